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

/// The one crate allowed unsafe code: the confinement of a child between fork and exec.
const UNSAFE_CRATE: &str = "toolgate-sandbox";

#[test]
fn unsafe_is_forbidden_workspace_wide() {
    let manifest = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("unsafe_code = \"forbid\""));
    let workspace_lints = manifest
        .split_once("[workspace.lints.clippy]")
        .unwrap()
        .1
        .split("\n\n")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    for krate in fs::read_dir(root().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let name = krate.file_name().unwrap().to_string_lossy().to_string();
        let manifest = fs::read_to_string(krate.join("Cargo.toml")).unwrap();
        if name == UNSAFE_CRATE {
            // Denied rather than forbidden, so that each block can carry its own `#[expect]`;
            // every other lint is the workspace's.
            assert!(manifest.contains("unsafe_code = \"deny\""), "{name}");
            assert!(
                manifest.contains(&workspace_lints),
                "{name} keeps the clippy lints"
            );
            continue;
        }
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{name}: every crate but {UNSAFE_CRATE} uses the workspace lints"
        );
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut files = Vec::new();
    rust_files(&root().join("crates").join(UNSAFE_CRATE), &mut files);
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("unsafe {") {
                let before = &lines[i.saturating_sub(8)..i];
                assert!(
                    before.iter().any(|l| l.contains("// SAFETY:")),
                    "{}:{}: an unsafe block without a `// SAFETY:` note",
                    file.display(),
                    i + 1
                );
            }
        }
    }
}
