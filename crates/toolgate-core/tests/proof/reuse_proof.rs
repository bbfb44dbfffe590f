// One proof, two executions: by hand beside the pipeline, or through it twice.
include!("common.rs");

fn by_hand() {
    let pipeline = pipeline();
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let cx = context();
    let _ = proof.tool().executor.execute(&proof, &cx);
    let _ = proof.tool().executor.execute(&proof, &cx);
    let _ = pipeline.execute(proof, &cx);
}

fn through_the_pipeline() {
    let pipeline = pipeline();
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let cx = context();
    let _ = pipeline.execute(proof, &cx);
    let _ = pipeline.execute(proof, &cx);
}

fn main() {
    by_hand();
    through_the_pipeline();
}
