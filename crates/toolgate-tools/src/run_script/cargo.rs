//! Cargo.toml's scripts (`cargo test`, `build`, `clippy`, `check`, `fmt`) and cargo's
//! configuration at the root, shown with the keys that name a program.

use std::fmt::Write as _;

use super::SCRIPTS;
use super::project::{Found, Parsed, Source, read_shown};

/// Cargo's configuration files at the root that decide what it runs, in the order shown.
const CARGO_CONFIG: [&str; 4] = [
    ".cargo/config.toml",
    ".cargo/config",
    "rust-toolchain.toml",
    "rust-toolchain",
];

/// Keys of cargo's configuration that name a program cargo runs, or change its arguments.
const CARGO_PROGRAM_KEYS: [&str; 13] = [
    "runner",
    "rustc-wrapper",
    "rustc-workspace-wrapper",
    "rustc",
    "rustdoc",
    "linker",
    "alias",
    "env",
    "rustflags",
    "path",
    "credential-provider",
    "global-credential-providers",
    "browser",
];

/// Cargo's commands, for a manifest with a package or a workspace, with the configuration at
/// the root that decides what cargo runs.
pub(super) fn cargo_toml(source: &Source) -> Parsed {
    let table: toml::Table = match source.text.parse() {
        Ok(table) => table,
        Err(error) => {
            let error: toml::de::Error = error;
            return Parsed::Problem(error.message().to_owned());
        }
    };
    if !table.contains_key("package") && !table.contains_key("workspace") {
        return Parsed::Found(Vec::new());
    }
    let mut shown = String::new();
    let mut bound = Vec::new();
    for name in CARGO_CONFIG {
        let (text, digest) = match read_shown(source.workspace, name, "cargo's") {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(problem) => return Parsed::Blocked(problem.to_string()),
        };
        let programs = program_keys(&text);
        let _ = write!(shown, "\ncargo reads `{name}` (bound to this approval)");
        if programs.is_empty() {
            shown.push(':');
        } else {
            let _ = write!(
                shown,
                "; it names programs or arguments cargo uses: {}:",
                programs.join(", ")
            );
        }
        for (i, line) in text.lines().enumerate() {
            let _ = write!(shown, "\n  {:>4}| {line}", i + 1);
        }
        bound.push((format!("config:{name}"), digest));
    }
    shown.push_str(
        "\nthe project's build scripts (`build.rs`), procedural macros and tests are its own \
         code and run as part of the command; cargo's configuration outside the workspace is \
         not bound",
    );
    let found = SCRIPTS
        .into_iter()
        .map(|script| {
            let command = match script {
                "test" => "test",
                "build" => "build",
                "lint" => "clippy",
                "typecheck" => "check",
                _ => "fmt",
            };
            let mut found = Found::new(
                script,
                &["cargo", command],
                format!("Cargo.toml, so `cargo {command}`"),
            );
            found.shown = shown.clone();
            found.bound = bound.clone();
            found
        })
        .collect();
    Parsed::Found(found)
}

/// The dotted keys of a cargo configuration that name a program or change what runs; a file
/// that is not TOML names them all, since cargo would refuse it anyway.
fn program_keys(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return vec!["(not TOML)".to_owned()];
    };
    let mut found = Vec::new();
    let mut stack: Vec<(String, &toml::Table)> = vec![(String::new(), &table)];
    while let Some((prefix, table)) = stack.pop() {
        for (key, value) in table {
            let dotted = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            if CARGO_PROGRAM_KEYS.contains(&key.as_str()) {
                found.push(format!("`{dotted}`"));
            } else if let Some(inner) = value.as_table() {
                stack.push((dotted, inner));
            }
        }
    }
    found.sort();
    found
}
