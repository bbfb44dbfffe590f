// One proof, run twice by running a copy of it.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let copy = proof.clone();
        let _ = stages.execute(proof, &context());
        let _ = stages.execute(copy, &context());
    });
}
