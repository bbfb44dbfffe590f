// A permitted call of a pipeline finished by its clone, which judged nothing of it; and one
// entry's value finished by a second entry into the same pipeline.
include!("common.rs");

fn main() {
    let one = pipeline();
    let clone = one.clone();
    one.enter(|first| {
        let Decided::Permitted(permitted) =
            first.decide(RawCall::text("reader", "{}", Surface::Chat), None)
        else {
            return;
        };
        clone.enter(|second| {
            let _ = second.finish(permitted, Cancel::new(), &Watch::default());
        });
    });
    one.enter(|first| {
        let permitted = first
            .normalize(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        one.enter(|again| {
            let _ = again.resolve(permitted);
        });
    });
}
