// The way the proof is meant to be used, as the crate's documentation shows it, which must
// compile: so that each case fails for the way around it tries, not for its setup.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    let done = pipeline.run(RawCall::text("reader", "{}", Surface::Chat));
    assert_eq!(done.status(), Status::Completed);
    let typo = pipeline.run(RawCall::text("reader", "[]", Surface::Chat));
    assert_eq!(typo.rejection().unwrap().code(), RejectCode::Malformed);
    let proof = pipeline
        .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
        .unwrap();
    let _ = pipeline.execute(proof, &context());
    let shown = Shown::of(pipeline.registry(), "default");
    match pipeline.decide(RawCall::text("reader", "{}", Surface::Chat), Some(&shown)) {
        Decided::Ended(outcome) => drop(outcome),
        Decided::Permitted(permitted) => {
            let _ = pipeline.finish(permitted, Cancel::new(), &RunHooks::default());
        }
    }
}
