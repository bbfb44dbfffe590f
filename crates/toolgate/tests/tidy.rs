//! Rules of the codebase that a test can check.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn ci_runs_the_test_command_the_readme_gives() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let ci = fs::read_to_string(root().join(".ci/run")).unwrap();
    let command = "scripts/test";
    assert!(readme.contains(command), "README must show `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run must run `{command}`"
    );
}

#[test]
fn every_source_file_opens_with_a_module_doc_and_has_no_grab_bag_name() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    assert!(files.len() > 10);
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            !["utils.rs", "helpers.rs", "manager.rs", "misc.rs"].contains(&name.as_str()),
            "{}: say what it is instead",
            file.display()
        );
        if file.components().any(|c| c.as_os_str() == "src") {
            let text = fs::read_to_string(&file).unwrap();
            assert!(
                text.starts_with("//!"),
                "{} must open with a `//!` doc",
                file.display()
            );
        }
    }
}

#[test]
fn unsafe_is_forbidden_workspace_wide() {
    let manifest = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("unsafe_code = \"forbid\""));
    for krate in fs::read_dir(root().join("crates")).unwrap() {
        let manifest = fs::read_to_string(krate.unwrap().path().join("Cargo.toml")).unwrap();
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "every crate uses the workspace lints"
        );
    }
}
