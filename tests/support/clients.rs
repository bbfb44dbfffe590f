//! The real clients and servers the binary's end-to-end tests drive, as `scripts/test-deps`
//! installs them into `target/test-deps/`, and `tests/mcp/drive.py`, which runs a plan of MCP
//! sessions with the official Python SDK.
//!
//! Shared by the MCP, upstream and console tests through `#[path]`.

#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn toolgate_bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

/// A file the tests need, or a failure that says how to get it.
pub fn test_dep(relative: &str) -> PathBuf {
    let path = root().join("target/test-deps").join(relative);
    assert!(
        path.exists(),
        "test dependency `{}` is missing: run scripts/test-deps first",
        path.display()
    );
    path
}

pub fn python() -> PathBuf {
    test_dep("venv/bin/python")
}

pub fn node() -> PathBuf {
    test_dep("node/node_modules/node/bin/node")
}

pub fn node_package(relative: &str) -> PathBuf {
    test_dep(&format!("node/node_modules/{relative}"))
}

/// Runs `tests/mcp/drive.py` on `plan` and returns its report.
pub fn drive(plan: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    fs::write(&plan_path, plan.to_string()).unwrap();
    let output = Command::new(python())
        .arg(root().join("tests/mcp/drive.py"))
        .arg(&plan_path)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "drive.py failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The tool names of a `tools/list` step's report.
pub fn names(listing: &Value) -> Vec<String> {
    listing["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a listing: {listing}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls `condition` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
