//! The writing, executing and git tools through the real binary, on real git repositories and
//! Cargo and npm projects, with a person answering at a terminal.

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
use support::clients::toolgate_bin;
use support::{home, terminal};
use terminal::on_a_terminal;

/// A temporary git repository with one commit.
fn repository() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("repo");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("README.md"), "# Demo\n\nFirst line.\n").unwrap();
    fs::write(ws.join("notes.txt"), "keep me\n").unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-q", "-m", "first commit"]);
    (dir, ws)
}

fn git(ws: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(args)
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// Single-quotes `text` for the shell that `script` runs the command with.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `toolgate call --json` without a terminal: anything needing approval is refused.
fn call(ws: &Path, tool: &str, args: &Value) -> (i32, Value) {
    let output = home::toolgate()
        .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
        .args(["call", "--json", "--workspace"])
        .arg(ws)
        .args(["--tool", tool, "--args", &args.to_string()])
        .output()
        .unwrap();
    let outcome = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code().unwrap_or(-1), outcome)
}

/// The same call on a terminal where a person types `answer`; the screen and the outcome.
fn call_approved(ws: &Path, tool: &str, args: &Value, answer: &str) -> (i32, String, Value) {
    let command = format!(
        "call --json --workspace {} --tool {tool} --args {}",
        quoted(&ws.display().to_string()),
        quoted(&args.to_string())
    );
    let (code, screen) = on_a_terminal(&command, answer);
    let screen = screen.replace("\r\n", "\n");
    let outcome = screen
        .find("{\n  \"status\"")
        .and_then(|at| serde_json::from_str(&screen[at..]).ok())
        .unwrap_or(Value::Null);
    (code, screen, outcome)
}

fn digest(ws: &Path, path: &str) -> String {
    let (code, outcome) = call(ws, "read_file", &json!({ "path": path }));
    assert_eq!(code, 0, "{outcome}");
    outcome["output"]["digest"].as_str().unwrap().to_owned()
}

#[test]
fn an_approved_edit_shows_its_diff_first_and_git_sees_the_change() {
    let (_dir, ws) = repository();
    let args = json!({
        "path": "README.md",
        "expected_digest": digest(&ws, "README.md"),
        "edits": [{"old_text": "First line.", "new_text": "First line, edited."}]
    });
    let (code, screen, outcome) = call_approved(&ws, "edit_file", &args, "y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("--- a/README.md\n+++ b/README.md\n"),
        "{screen}"
    );
    assert!(screen.contains("+First line, edited.\n"), "{screen}");
    assert_eq!(outcome["status"], "completed", "{screen}");
    assert_eq!(
        fs::read_to_string(ws.join("README.md")).unwrap(),
        "# Demo\n\nFirst line, edited.\n"
    );
    assert_eq!(git(&ws, &["status", "--porcelain"]), " M README.md\n");

    let (code, status) = call(&ws, "git_status", &json!({}));
    assert_eq!(code, 0, "{status}");
    assert!(
        status["output"].to_string().contains("README.md"),
        "{status}"
    );
    let (code, diff) = call(&ws, "git_diff", &json!({}));
    assert_eq!(code, 0, "{diff}");
    assert!(
        diff["output"].to_string().contains("+First line, edited."),
        "{diff}"
    );
}

#[test]
fn a_refused_write_changes_nothing_and_says_why() {
    let (_dir, ws) = repository();
    let args = json!({
        "path": "notes.txt",
        "content": "overwritten\n",
        "expected_digest": digest(&ws, "notes.txt"),
    });
    let (code, screen, outcome) = call_approved(&ws, "write_file", &args, "n\n");
    assert_eq!(code, 2, "{screen}");
    assert_eq!(outcome["rejection"]["code"], "approval_denied", "{screen}");
    assert_eq!(
        fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "keep me\n"
    );
    // Without a terminal nobody can approve, whatever the caller says.
    let (code, outcome) = call(&ws, "write_file", &args);
    assert_eq!(code, 2);
    assert_eq!(outcome["rejection"]["code"], "approval_required");
    assert_eq!(git(&ws, &["status", "--porcelain"]), "");
}

#[test]
fn a_command_runs_without_a_shell_as_the_absolute_program_the_person_saw() {
    let (_dir, ws) = repository();
    let args = json!({"argv": ["git", "log", "--format=%s", "; touch pwned", "$(touch pwned2)"]});
    let (code, screen, outcome) = call_approved(&ws, "run_command", &args, "y\n");
    // git rejects the extra arguments as revisions; what matters is that no shell saw them.
    assert!(code == 0 || code == 1, "{screen}");
    let program = outcome["evidence"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|r| r.as_str().and_then(|r| r.strip_prefix("program:")))
        .unwrap_or_else(|| panic!("no program resource: {outcome}"))
        .to_owned();
    assert!(program.starts_with('/'), "{program}");
    assert!(
        screen.contains(&program),
        "the person saw {program}: {screen}"
    );
    assert!(!ws.join("pwned").exists() && !ws.join("pwned2").exists());

    let (code, screen, outcome) = call_approved(
        &ws,
        "run_command",
        &json!({"argv": ["git", "log", "--format=%s"]}),
        "y\n",
    );
    assert_eq!(code, 0, "{screen}");
    assert_eq!(outcome["output"]["exit_code"], 0, "{outcome}");
    assert!(
        outcome["output"]["stdout"]
            .as_str()
            .unwrap()
            .contains("first commit"),
        "{outcome}"
    );
}

#[test]
fn project_scripts_resolve_from_cargo_and_npm_projects() {
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("crate");
    fs::create_dir_all(crate_dir.join("src")).unwrap();
    fs::write(
        crate_dir.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    fs::write(
        crate_dir.join("src/lib.rs"),
        "#[test]\nfn adds() { assert_eq!(1 + 1, 2); }\n",
    )
    .unwrap();
    let (code, screen, outcome) =
        call_approved(&crate_dir, "run_script", &json!({"script": "test"}), "y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        screen.contains("cargo"),
        "the resolved argv is shown: {screen}"
    );
    assert_eq!(outcome["output"]["exit_code"], 0, "{outcome}");
    let output = outcome["output"].to_string();
    assert!(output.contains("test adds ... ok"), "{output}");

    let npm_dir = dir.path().join("web");
    fs::create_dir_all(&npm_dir).unwrap();
    fs::write(
        npm_dir.join("package.json"),
        r#"{"name": "web", "version": "1.0.0", "scripts": {"test": "node -e \"console.log('npm test ran')\""}}"#,
    )
    .unwrap();
    let (code, screen, outcome) =
        call_approved(&npm_dir, "run_script", &json!({"script": "test"}), "y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(
        outcome["output"]["stdout"]
            .as_str()
            .unwrap_or_default()
            .contains("npm test ran"),
        "{outcome}"
    );
    // A script the project does not define is refused before anyone is asked.
    let (code, outcome) = call(&npm_dir, "run_script", &json!({"script": "lint"}));
    assert_eq!(code, 2, "{outcome}");
    assert_eq!(outcome["rejection"]["stage"], "validate");
    assert!(
        outcome["rejection"]["hint"]
            .as_str()
            .unwrap()
            .contains("`test` (package.json: `/bin/sh -c node -e"),
        "the message lists the scripts there are: {outcome}"
    );
}

/// A repository cloned with git whose `.gitignore` is a link to an endless device, beside a
/// FIFO named `.ignore`: reading either as git ignore rules would exhaust memory or wait
/// forever. The walk reads neither, and both tools answer, under a memory bound.
#[test]
fn ignore_files_that_lead_nowhere_neither_stall_nor_exhaust_a_walk() {
    let (dir, origin) = repository();
    std::os::unix::fs::symlink("/dev/zero", origin.join(".gitignore")).unwrap();
    fs::create_dir(origin.join("src")).unwrap();
    fs::write(origin.join("src/lib.rs"), "pub fn needle() {}\n").unwrap();
    git(&origin, &["add", "."]);
    git(&origin, &["commit", "-q", "-m", "links"]);
    let ws = dir.path().join("clone");
    git(dir.path(), &["clone", "-q", "repo", "clone"]);
    assert!(
        fs::symlink_metadata(ws.join(".gitignore"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let made = Command::new("mkfifo")
        .arg(ws.join("src/.ignore"))
        .status()
        .unwrap();
    assert!(made.success());

    for (tool, args) in [
        ("list_dir", json!({ "path": ".", "depth": 3 })),
        ("search_text", json!({ "pattern": "needle" })),
    ] {
        // At most 2 GiB of address space, and a minute: the walk needs neither.
        let mut child = home::isolated(Command::new("sh"))
            .args(["-c", "ulimit -v 2097152; exec \"$@\"", "sh"])
            .arg(toolgate_bin())
            .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .args(["call", "--json", "--workspace"])
            .arg(&ws)
            .args(["--tool", tool, "--args", &args.to_string()])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while child.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                child.kill().unwrap();
                panic!("{tool} was still walking after a minute");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "{tool}: {output:?}");
        let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
        let shown = outcome["output"].to_string();
        assert!(shown.contains("src/lib.rs"), "{tool}: {outcome}");
        assert!(!shown.contains(".git/"), "{tool}: {outcome}");
    }
}
