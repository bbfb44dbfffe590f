//! The proof of authorization, held to at compile time: each case under `tests/proof/` is a
//! way around it that must not compile, with the error it must fail with.

#[test]
fn ways_around_the_proof_do_not_compile() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/proof/*.rs");
}
