// The way the proof is meant to be used, as the crate's documentation shows it, which must
// compile: so that each case fails for the way around it tries, not for its setup.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    let done = pipeline.run(RawCall::text("reader", "{}", Surface::Chat));
    assert_eq!(done.status(), Status::Completed);
    let typo = pipeline.run(RawCall::text("reader", "[]", Surface::Chat));
    assert_eq!(typo.rejection().unwrap().code(), RejectCode::Malformed);
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let _ = stages.execute(proof, &context());
        let shown = Shown::of(pipeline.registry(), "default");
        match stages.decide(RawCall::text("reader", "{}", Surface::Chat), Some(&shown)) {
            Decided::Ended(outcome) => drop(outcome),
            Decided::Permitted(permitted) => {
                let _ = stages.finish(permitted, Cancel::new(), &Watch::default());
            }
        }
        let normalized = stages.normalize(RawCall::text("reader", "{}", Surface::Chat));
        let resolved = stages.resolve(normalized.unwrap()).unwrap();
        let classified = stages.classify(stages.validate(resolved).unwrap());
        let authorized = stages
            .approve(stages.authorize(classified).unwrap())
            .unwrap();
        let _ = stages.execute(authorized, &context());
    });
    let permitted = pipeline.enter(|stages| {
        match stages.decide(RawCall::text("reader", "{}", Surface::Chat), None) {
            Decided::Ended(_) => None,
            Decided::Permitted(permitted) => Some(stages.rest(permitted)),
        }
    });
    let _ = std::thread::spawn(move || {
        permitted.map(|rest| rest.finish(Cancel::new(), &Watch::default()))
    })
    .join();
}
