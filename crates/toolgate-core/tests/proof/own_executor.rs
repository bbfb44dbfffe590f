// A caller holding an executor of its own runs it with a proof the pipeline issued.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let _ = Reader.execute(&proof, &context());
    });
}
