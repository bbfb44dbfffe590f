// One proof, run twice by running a copy of it.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let copy = proof.clone();
    let _ = pipeline.execute(proof, &context());
    let _ = pipeline.execute(copy, &context());
}
