// The way the proof is meant to be used, which must compile: so that each case fails for the
// way around it tries, not for its setup.
fn main() {
    let pipeline = pipeline();
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let _ = pipeline.execute(proof, &context());
}
