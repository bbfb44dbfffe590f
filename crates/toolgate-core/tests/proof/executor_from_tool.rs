// The proof's own tool hands out its executor, which runs the call with no grant redeemed,
// no panic guard and no record.
include!("common.rs");

fn main() {
    let pipeline = pipeline();
    pipeline.enter(|stages| {
        let proof = stages
            .authorize_call(RawCall::text("reader", "{}", Surface::Chat))
            .unwrap();
        let _ = proof.tool().executor.execute(&proof, &context());
    });
}
