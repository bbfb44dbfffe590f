// A proof issued for the read-only tool, handed to the writing tool's executor, and to its
// typed stage 7 with a plan the caller made up.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let writer = pipeline
            .registry()
            .tools()
            .find(|tool| tool.entry().name == "writer")
            .unwrap();
        let _ = writer.executor.execute(&proof, &context());
        let _ = TypedExecutor::execute(&Writer, &(), &proof, &context());
    });
}
