//! A home of its own for every process a test starts that may run toolgate: `HOME` and the
//! XDG base directories toolgate (and the clients that start it) would otherwise find in the
//! user's real home, where its audit log, console tokens and standing grants would land.
//!
//! Every spawn of the binary goes through [`toolgate`] (or [`toolgate_at`] for a test that
//! fakes `HOME` on purpose), and every client or wrapper that starts it through [`isolated`]:
//! `crates/toolgate/tests/tidy.rs` fails a test source that spawns it otherwise.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::clients::toolgate_bin;

/// The variables that place a program's own files: `HOME`, and the XDG base directories that
/// default beneath it.
pub const VARIABLES: [&str; 5] = [
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_STATE_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

/// A new, empty home under cargo's `target/tmp` (not `/tmp`, which the sandbox hides by
/// default). It is kept after the test, since a server it started may outlive the test's
/// handles; `scripts/test` empties `target/tmp/homes` before the suite.
pub fn fresh() -> PathBuf {
    let homes = Path::new(env!("CARGO_TARGET_TMPDIR")).join("homes");
    fs::create_dir_all(&homes).unwrap();
    tempfile::Builder::new()
        .prefix("home-")
        .tempdir_in(&homes)
        .unwrap()
        .keep()
}

/// `HOME` at `home`, and each XDG base directory where it defaults beneath it, so a test's
/// fake home keeps the meaning it would have without the variables set.
pub fn vars(home: &Path) -> Vec<(&'static str, PathBuf)> {
    vec![
        ("HOME", home.to_owned()),
        ("XDG_CONFIG_HOME", home.join(".config")),
        ("XDG_STATE_HOME", home.join(".local/state")),
        ("XDG_DATA_HOME", home.join(".local/share")),
        ("XDG_CACHE_HOME", home.join(".cache")),
    ]
}

/// [`vars`] as the `"env"` object of a plan or a client's server entry.
pub fn json(home: &Path) -> serde_json::Map<String, serde_json::Value> {
    vars(home)
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.display().to_string().into()))
        .collect()
}

/// `command` (a client or a wrapper such as strace, that starts toolgate) with a fresh home.
/// Set first, so what the caller sets afterwards (the test's own `XDG_STATE_HOME`) wins; a
/// later `env_clear` would drop it, which the tidy check refuses.
pub fn isolated(command: Command) -> Command {
    isolated_at(command, &fresh())
}

/// As [`isolated`], with the home at `home` (a fake home the test prepared).
pub fn isolated_at(mut command: Command, home: &Path) -> Command {
    command.envs(vars(home));
    command
}

/// The `toolgate` binary, not yet run, with a fresh home of its own.
pub fn toolgate() -> Command {
    isolated(Command::new(toolgate_bin()))
}

/// The `toolgate` binary with its home at `home`, for a test that fakes `HOME` on purpose.
pub fn toolgate_at(home: &Path) -> Command {
    isolated_at(Command::new(toolgate_bin()), home)
}
