//! The environment `toolgate-exec` gives a command, and the programs found on its `PATH`,
//! for the runner's tests to build their commands from.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use toolgate_exec::{resolve_program, scrub_env, utf8_env};

/// The scrubbed environment of this process.
pub fn env() -> Vec<(String, String)> {
    scrub_env(utf8_env(std::env::vars_os()))
}

/// `name` as the runner resolves it on the scrubbed environment's `PATH`.
pub fn program(name: &str) -> PathBuf {
    let env = env();
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    resolve_program(name, path, Path::new("/")).unwrap()
}
