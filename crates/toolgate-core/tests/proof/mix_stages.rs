// A stage value of one pipeline handed to the next stage of another: stage 1 of one, stage 2
// of the other; and a proof of one run by the other.
include!("common.rs");

fn main() {
    let one = pipeline();
    let other = pipeline();
    one.enter(|first| {
        other.enter(|second| {
            let normalized = first
                .normalize(RawCall::text("reader", "{}", Surface::Chat))
                .unwrap();
            let _ = second.resolve(normalized);
            let proof = first
                .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
                .unwrap();
            let _ = second.execute(proof, &context());
        })
    });
}
