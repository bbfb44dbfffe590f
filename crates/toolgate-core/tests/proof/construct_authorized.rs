// A proof made up outside the pipeline.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    let tool = pipeline.registry().tools().next().unwrap().clone();
    let proof = Authorized {
        tool,
        arguments: json!({}),
    };
    pipeline.enter(|stages| {
        let _ = stages.execute(Branded { value: proof }, &context());
    });
}
