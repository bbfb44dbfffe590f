//! toolgate's state directory inside the workspace, against every tool that enumerates or reads
//! it: the table `tests/corpus/state_dir.jsonl`, run over MCP against the server that filled
//! the directory and through `toolgate call` beside it, in both layouts that put the directory
//! in a workspace — a workspace at `$HOME` with the default `~/.local/state/toolgate`, and one
//! whose gitignored `target/` holds `XDG_STATE_HOME`.
//!
//! The directory holds what a real `toolgate serve --http` put there: the console's token
//! file, the file a person's "allow for this workspace" was kept in, the audit log. No output
//! of any row may hold the token, a grant, or the name of anything in the directory.

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
use std::process::Command;

use serde_json::{Value, json};

use clients::*;
use served::Served;
use support::{clients, home, served};

/// Where the state directory lies in the workspace.
#[derive(Debug, Clone, Copy)]
enum Layout {
    /// The workspace is `$HOME`; `XDG_STATE_HOME` is unset.
    Home,
    /// `XDG_STATE_HOME` is `target/state`, and `target/` is gitignored.
    IgnoredTarget,
}

impl Layout {
    /// Where `XDG_STATE_HOME` is, or `$HOME` puts it, relative to the workspace.
    fn state_home(self) -> &'static str {
        match self {
            Layout::Home => ".local/state",
            Layout::IgnoredTarget => "target/state",
        }
    }

    /// The environment `toolgate call` finds the same state directory by.
    fn environment(self, ws: &Path, command: &mut Command) {
        match self {
            Layout::Home => {
                command.envs(home::vars(ws)).env_remove("XDG_STATE_HOME");
            }
            Layout::IgnoredTarget => {
                command.env("XDG_STATE_HOME", ws.join(self.state_home()));
            }
        }
    }
}

/// One row of `tests/corpus/state_dir.jsonl`.
#[derive(Debug)]
struct Row {
    name: String,
    tool: String,
    /// The arguments, placeholders not yet filled in.
    args: Value,
    /// `completed`, or `rejected` by `policy`.
    expect: String,
    policy: Option<String>,
}

fn rows() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/state_dir.jsonl");
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("//"))
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let s = |key: &str| v.get(key).and_then(Value::as_str).map(str::to_owned);
            Row {
                name: s("name").unwrap(),
                tool: s("tool").unwrap(),
                args: v["args"].clone(),
                expect: s("expect").unwrap_or_else(|| "completed".to_owned()),
                policy: s("policy"),
            }
        })
        .collect()
}

/// A workspace that is a git repository, holding toolgate's state directory after a real run,
/// with the server that made it still running.
struct Scene {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    layout: Layout,
    served: Served,
    /// The token file, relative to the workspace.
    token_file: String,
    /// What must never be shown: the token, every name in the state directory, and what the
    /// grants file says.
    secrets: Vec<String>,
}

impl Scene {
    fn new(layout: Layout) -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        fs::write(ws.join(".gitignore"), "target/\n").unwrap();
        git(&ws, &["init", "-q", "-b", "main"]);
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-q", "-m", "first"]);
        fs::write(ws.join("a.txt"), "alpha\nbeta\n").unwrap();
        git(&ws, &["add", "a.txt"]);
        fs::write(ws.join("src/lib.rs"), "pub fn g() {}\n").unwrap();

        let state_home = ws.join(layout.state_home());
        fs::create_dir_all(&state_home).unwrap();
        let served = Served::start_at(&ws, "", &state_home);
        // A person allows writes for the whole workspace; the grant is kept in the directory.
        let client = served.client(json!([{"op": "call", "tool": "write_file",
            "arguments": {"path": "granted.txt", "content": "granted\n"}}]));
        let id = served.pending(1)[0]["id"].as_str().unwrap().to_owned();
        let reply = served.decide(&id, r#"{"decision": "allow_workspace"}"#);
        assert_eq!(reply.status, 204, "{}", reply.body);
        assert_eq!(client.steps()[0]["isError"], false);

        let state = state_home.join("toolgate");
        let names: Vec<String> = fs::read_dir(&state)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .collect();
        let grants = names
            .iter()
            .find(|name| name.starts_with("grants-"))
            .unwrap_or_else(|| panic!("no grants file among {names:?}"));
        let token_name = format!("console-{}.token", served.port);
        for expected in [&token_name, "audit.db"] {
            assert!(
                names.iter().any(|n| n == expected),
                "{expected} in {names:?}"
            );
        }
        assert_eq!(
            fs::read_to_string(state.join(&token_name)).unwrap().trim(),
            served.token
        );
        let stored: Value =
            serde_json::from_str(&fs::read_to_string(state.join(grants)).unwrap()).unwrap();
        let expiry = stored[0]["expires_at_ms"].to_string();
        assert!(expiry.len() >= 10, "{stored}");

        let token_file = format!("{}/toolgate/{token_name}", layout.state_home());
        std::os::unix::fs::symlink(&token_file, ws.join("token_link")).unwrap();
        std::os::unix::fs::symlink(
            format!("../{}/toolgate", layout.state_home()),
            ws.join("src/state_link"),
        )
        .unwrap();

        let mut secrets = names;
        secrets.extend([served.token.clone(), expiry, "expires_at_ms".to_owned()]);
        Scene {
            _dir: dir,
            ws,
            layout,
            served,
            token_file,
            secrets,
        }
    }

    /// `row`'s arguments with the placeholders filled in.
    fn arguments(&self, row: &Row) -> Value {
        let home = self.layout.state_home();
        let parent = home.split('/').next().unwrap();
        let text = row
            .args
            .to_string()
            .replace("@state_home", home)
            .replace("@state_parent", parent)
            .replace("@token_file", &self.token_file);
        serde_json::from_str(&text).unwrap()
    }

    /// The row through `toolgate call`, as the workspace's user would run it: its outcome
    /// and everything it printed.
    fn call(&self, row: &Row, arguments: &Value) -> (Value, String) {
        let config = self.ws.join(self.layout.state_home()).join("toolgate.toml");
        let mut command = home::toolgate();
        command
            .args(["call", "--json", "--workspace"])
            .arg(&self.ws)
            .arg("--config")
            .arg(&config)
            .args(["--tool", &row.tool, "--args", &arguments.to_string()]);
        self.layout.environment(&self.ws, &mut command);
        let output = command.output().unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let printed = format!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
        let outcome = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{}: {e}: {printed}", row.name));
        (outcome, printed)
    }

    /// Every row, over MCP and through `toolgate call`, checked.
    fn check(&self) {
        let rows = rows();
        assert!(rows.len() >= 10);
        let steps: Vec<Value> = rows
            .iter()
            .map(|row| json!({"op": "call", "tool": row.tool, "arguments": self.arguments(row)}))
            .collect();
        let results = self.served.client(Value::Array(steps)).steps();
        assert_eq!(results.len(), rows.len());
        for (row, result) in rows.iter().zip(&results) {
            let arguments = self.arguments(row);
            let what = format!("{:?} over MCP: {}", self.layout, row.name);
            let policies = &result["meta"]["toolgate/evidence"]["policies"];
            match row.expect.as_str() {
                "completed" => assert_eq!(result["isError"], false, "{what}: {result}"),
                _ => assert_eq!(policies, &json!([row.policy]), "{what}: {result}"),
            }
            self.never_shown(&what, &arguments, &result.to_string());

            let (outcome, printed) = self.call(row, &arguments);
            let what = format!("{:?} through toolgate call: {}", self.layout, row.name);
            assert_eq!(outcome["status"], row.expect.as_str(), "{what}: {printed}");
            if let Some(policy) = &row.policy {
                assert_eq!(outcome["rejection"]["policies"], json!([policy]), "{what}");
            }
            self.never_shown(&what, &arguments, &printed);
        }
    }

    /// Fails unless `output` holds none of the secrets but those the caller named itself.
    fn never_shown(&self, what: &str, arguments: &Value, output: &str) {
        let asked = arguments.to_string();
        for secret in self.secrets.iter().filter(|s| !asked.contains(s.as_str())) {
            assert!(
                !output.contains(secret.as_str()),
                "{what}: `{secret}` in {output}"
            );
        }
    }
}

/// Git with no configuration of the machine's or the user's, and a fixed identity.
const GIT_ENV: [(&str, &str); 6] = [
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_AUTHOR_NAME", "Test"),
    ("GIT_AUTHOR_EMAIL", "test@example.com"),
    ("GIT_COMMITTER_NAME", "Test"),
    ("GIT_COMMITTER_EMAIL", "test@example.com"),
];

fn git(ws: &Path, args: &[&str]) {
    let output = Command::new("git")
        .args(args)
        .current_dir(ws)
        .envs(GIT_ENV)
        .output()
        .unwrap();
    succeeded("git", output);
}

#[test]
fn a_state_directory_in_a_workspace_at_home_is_out_of_every_tools_sight() {
    Scene::new(Layout::Home).check();
}

#[test]
fn a_state_directory_under_an_ignored_target_is_out_of_every_tools_sight() {
    Scene::new(Layout::IgnoredTarget).check();
}

/// With the workspace at `$HOME`, toolgate's configuration directory is out of the write
/// tools' reach as it is out of commands': a model that wrote a hook, a policy or a file the
/// configuration will name beside it would judge its own calls. Each write is refused by
/// the sensitive-path rule itself, not left to an approval.
#[test]
fn the_configuration_directory_in_a_workspace_at_home_is_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    fs::create_dir_all(ws.join(".config/toolgate/hooks")).unwrap();
    fs::write(ws.join(".config/toolgate/hooks/guard.sh"), "#!/bin/sh\n").unwrap();
    fs::create_dir_all(ws.join("src")).unwrap();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": ".config/toolgate/hooks/next.sh", "content": "exit 0\n"}),
        ),
        (
            "write_file",
            json!({"path": ".config/toolgate/policies/extra.cedar", "content": "permit(principal, action, resource);\n"}),
        ),
        (
            "read_file",
            json!({"path": ".config/toolgate/hooks/guard.sh"}),
        ),
    ] {
        let output = home::toolgate_at(&ws)
            .args(["call", "--json", "--workspace"])
            .arg(&ws)
            .args(["--tool", tool, "--args", &args.to_string()])
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let outcome: Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{e}: {stdout}{}", String::from_utf8_lossy(&output.stderr)));
        assert_eq!(outcome["status"], "rejected", "{tool} {args}: {outcome}");
        assert_eq!(
            outcome["rejection"]["policies"],
            json!(["sensitive-toolgate-config"]),
            "{tool} {args}: {outcome}"
        );
    }
    assert_eq!(
        fs::read_to_string(ws.join(".config/toolgate/hooks/guard.sh")).unwrap(),
        "#!/bin/sh\n"
    );
    assert!(!ws.join(".config/toolgate/hooks/next.sh").exists());
    assert!(!ws.join(".config/toolgate/policies").exists());
}
