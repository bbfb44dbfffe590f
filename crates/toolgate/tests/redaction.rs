//! An upstream tool whose result holds credentials, behind the real `toolgate` binary: the
//! keys reach neither the client (text content nor `structuredContent`, over `serve`), nor the
//! outcome `toolgate call --json` prints, nor the audit log.
//!
//! The upstream (`tests/upstream/secrets_server.py`, on the official Python SDK installed by
//! `scripts/test-deps`) makes fresh random keys in real providers' formats on every call and
//! writes them down, so the test knows what must not come through.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use clients::*;
use support::clients;
use support::home;

/// A workspace, the upstream's state and toolgate's state, each in a directory of the test's.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        for sub in ["ws", "upstream", "state"] {
            fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let config = dir.path().join("toolgate.toml");
        let upstream = dir.path().join("upstream");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"secrets\"\ncommand = [{}, {}, {}]\ncall_timeout_ms = 10000\n\
                 [upstream.sandbox]\nwrite = [{}]\n{}",
                quoted(&python()),
                quoted(&root().join("tests/upstream/secrets_server.py")),
                quoted(&upstream),
                quoted(&upstream),
                repo_read(),
            ),
        )
        .unwrap();
        Setup { dir, config }
    }

    fn path(&self, sub: &str) -> PathBuf {
        self.dir.path().join(sub)
    }

    fn toolgate(&self, args: &[&str]) -> Output {
        home::toolgate()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("XDG_STATE_HOME", self.path("state"))
            .output()
            .unwrap()
    }

    /// The keys the upstream handed out so far.
    fn keys(&self) -> Vec<String> {
        fs::read_to_string(self.path("upstream/keys.jsonl"))
            .unwrap_or_default()
            .lines()
            .flat_map(|line| {
                let keys: Value = serde_json::from_str(line).unwrap();
                keys.as_object()
                    .unwrap()
                    .values()
                    .map(|key| key.as_str().unwrap().to_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Every file toolgate wrote under its state directory, as text.
    fn state_text(&self) -> String {
        fn walk(dir: &Path, out: &mut String) {
            for entry in fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    walk(&path, out);
                } else if let Ok(bytes) = fs::read(&path) {
                    out.push_str(&String::from_utf8_lossy(&bytes));
                }
            }
        }
        let mut out = String::new();
        walk(&self.path("state"), &mut out);
        out
    }
}

fn assert_no_key(what: &str, text: &str, keys: &[String]) {
    for key in keys {
        assert!(
            !text.contains(key.as_str()),
            "{what} holds `{key}`:\n{text}"
        );
    }
}

#[test]
fn an_upstream_results_keys_reach_neither_client_nor_audit_log() {
    let setup = Setup::new();
    let admitted = setup.toolgate(&[
        "tools",
        "admit",
        "secrets",
        "deploy_log",
        "--effect",
        "read_only",
    ]);
    assert!(admitted.status.success(), "admit: {admitted:?}");

    // Over `serve`, as a model's client sees the result.
    let args = stdio_serve_args(&setup.path("ws"), &setup.config);
    let env = json!({
        "PATH": std::env::var("PATH").unwrap_or_default(),
        "HOME": setup.path("state").display().to_string(),
        "XDG_STATE_HOME": setup.path("state").display().to_string(),
    });
    let plan = json!({"sessions": [{
        "transport": "stdio", "command": toolgate_bin(), "args": args, "env": env,
        "steps": [{"op": "call", "tool": "secrets__deploy_log", "arguments": {"service": "api"}}],
    }]});
    let report = drive(&plan);
    let result = report["sessions"][0]["steps"][0].clone();
    assert!(result.is_object(), "{report}");
    assert_eq!(result["isError"], false, "{result}");
    let keys = setup.keys();
    assert_eq!(keys.len(), 4, "the upstream was called once: {keys:?}");
    let text = result["text"].as_str().unwrap();
    let structured = result["structured"].to_string();
    assert_no_key("the text content", text, &keys);
    assert_no_key("the structured content", &structured, &keys);
    assert!(text.contains("[REDACTED]"), "{text}");
    assert!(structured.contains("[REDACTED]"), "{structured}");
    // What is not a secret comes through as the upstream wrote it.
    assert!(text.contains("deploying api"), "{text}");
    assert_eq!(result["structured"]["service"], "api", "{structured}");

    // Through `toolgate call --json`, as a person at a terminal sees the outcome.
    let output = setup.toolgate(&[
        "call",
        "--json",
        "--workspace",
        &setup.path("ws").display().to_string(),
        "--tool",
        "secrets__deploy_log",
        "--args",
        r#"{"service": "web"}"#,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    assert!(output.status.success(), "call: {output:?}");
    let keys = setup.keys();
    assert_eq!(keys.len(), 8, "the upstream was called twice: {keys:?}");
    assert_no_key("`toolgate call --json`", &stdout, &keys);
    assert_no_key(
        "`toolgate call`'s standard error",
        &String::from_utf8_lossy(&output.stderr),
        &keys,
    );
    assert!(stdout.contains("[REDACTED]"), "{stdout}");
    let outcome: Value = serde_json::from_str(&stdout).unwrap();
    assert!(outcome.is_object(), "{stdout}");

    // The audit log keeps evidence, not the keys.
    let state = setup.state_text();
    assert!(!state.is_empty(), "toolgate wrote no state");
    assert_no_key("toolgate's state directory", &state, &keys);
}

#[test]
fn a_refusal_that_quotes_a_key_passes_it_neither_to_the_model_nor_to_the_audit_log() {
    let setup = Setup::new();
    let ws = setup.path("ws");
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    // A fresh key each run, of GitHub's shape, in an argument the schema refuses: the
    // validator's message quotes the value.
    let alphabet: Vec<char> = ('a'..='z').chain('A'..='Z').chain('0'..='9').collect();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let body: String = (0..36u128)
        .map(|i| {
            let n = (seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(i * 1_442_695_040_888_963_407)
                >> 17) as usize;
            alphabet[n % alphabet.len()]
        })
        .collect();
    let key = format!("ghp_{body}");
    let arguments = json!({"path": "notes.txt", "limit": key}).to_string();
    let out = setup.toolgate(&[
        "call",
        "--workspace",
        ws.to_str().unwrap(),
        "--tool",
        "read_file",
        "--args",
        &arguments,
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let outcome: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(outcome["status"], "rejected", "{stdout}");
    assert!(
        outcome["rejection"]["message"]
            .as_str()
            .unwrap()
            .contains("[REDACTED]"),
        "{stdout}"
    );
    let keys = [key];
    assert_no_key("the refusal", &stdout, &keys);
    assert_no_key("toolgate's state directory", &setup.state_text(), &keys);
}
