// A stage value taken out of its entry, to be handed to another pipeline's stage later.
include!("common.rs");

fn main() {
    let one = pipeline();
    let other = pipeline();
    let proof = one.enter(|stages| {
        stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap()
    });
    other.enter(|stages| {
        let _ = stages.execute(proof, &context());
    });
}
