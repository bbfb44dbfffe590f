// One proof, two executions: by hand beside the pipeline, or through it twice.
include!("common.rs");

fn by_hand() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let cx = context();
        let _ = proof.tool().executor.execute(&proof, &cx);
        let _ = proof.tool().executor.execute(&proof, &cx);
        let _ = stages.execute(proof, &cx);
    });
}

fn through_the_pipeline() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let cx = context();
        let _ = stages.execute(proof, &cx);
        let _ = stages.execute(proof, &cx);
    });
}

fn main() {
    by_hand();
    through_the_pipeline();
}
