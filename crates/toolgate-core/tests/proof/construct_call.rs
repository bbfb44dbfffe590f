// An executor's view of a call, made up outside the pipeline to call an executor with.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let call = Call {
            authorized: &*proof,
        };
        let _ = Reader.execute(&call, &context());
    });
}
