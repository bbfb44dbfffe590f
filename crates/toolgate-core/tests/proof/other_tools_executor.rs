// A proof issued for the read-only tool, handed to the writing tool's executor.
fn main() {
    let pipeline = pipeline();
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let writer = pipeline
        .registry()
        .tools()
        .find(|tool| tool.entry().name == "writer")
        .unwrap();
    let _ = writer.executor.execute(&proof, &context());
    let _ = Writer.execute(&proof, &context());
}
