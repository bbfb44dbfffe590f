//! The proof of authorization, held to at compile time, on stable Rust. Each case under
//! `tests/proof/` (after the setup all share, `common.rs`) is a way around the proof that must
//! not build, and its `.stderr` the errors it must fail with, every one of them: a case whose
//! first line stopped failing, or whose later lines began to build, fails here. `allowed.rs`,
//! the way the proof is meant to be used (as the crate's documentation shows), must build, so
//! that no case fails for its setup alone.
//!
//! After a change to the compiler's wording, `TRYBUILD=overwrite cargo test -p toolgate-core
//! --test proof` writes the errors anew; read the diff before committing it.

#[test]
fn the_proof_cannot_be_gone_around() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/proof/allowed.rs");
    for case in [
        "executor_from_tool",
        "own_executor",
        "other_tools_executor",
        "reuse_proof",
        "clone_proof",
        "construct_authorized",
        "construct_call",
        "keep_call",
        "hand_on_call",
        "mix_stages",
        "mix_clones",
        "escape_entry",
    ] {
        cases.compile_fail(format!("tests/proof/{case}.rs"));
    }
}
