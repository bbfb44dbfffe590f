//! Any path text a model might send: refused, or accepted as a path that stays beneath the
//! workspace — relative, without `.`/`..`/empty components or control characters — and that
//! is accepted again, unchanged, when parsed a second time.

#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_workspace::RelPath;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(path) = RelPath::parse(text) else {
        return;
    };
    let accepted = path.as_str();
    if !path.is_root() {
        assert!(!accepted.starts_with('/'), "absolute: {accepted:?}");
        for component in path.components() {
            assert!(
                !component.is_empty() && component != "." && component != "..",
                "bad component in {accepted:?}"
            );
        }
    }
    assert!(!accepted.chars().any(char::is_control), "control: {accepted:?}");
    let again = RelPath::parse(accepted).expect("an accepted path is accepted again");
    assert_eq!(again, path);
});
