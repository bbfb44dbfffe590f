//! The audit trail through the real binary: what records hold and leave out, `audit verify`
//! against tampering done with the `sqlite3` command-line tool, calls that fail closed when the
//! log cannot be written, and a server that finds its log no longer verifying. A server killed
//! in the middle of a load is in `audit_durability.rs`.
//!
//! Every test points `XDG_STATE_HOME` (or `--db`) into its own temporary directory, so nothing
//! touches the user's own log.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/clients.rs"]
mod clients;
#[path = "../../../tests/support/fixture.rs"]
mod fixture;
#[path = "../../../tests/support/home.rs"]
mod home;
#[path = "../../../tests/support/procs.rs"]
mod procs;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use clients::StdioServer;
use fixture::Fixture;
use procs::cpu_ticks;

/// A value no record may hold: it is only ever an argument.
const SECRET: &str = "zq-hunter2-do-not-log";

fn toolgate() -> Command {
    let mut command = home::toolgate();
    command.env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config");
    command
}

/// A fixture whose audit log lives in its own state directory.
struct Audited {
    fx: Fixture,
}

impl Audited {
    fn new() -> Audited {
        Audited { fx: Fixture::new() }
    }

    fn state(&self) -> PathBuf {
        self.fx.dir.path().join("state")
    }

    fn db(&self) -> PathBuf {
        self.state().join("toolgate/audit.db")
    }

    /// Every byte of every file beside the log (the database, its WAL, the head file), as text.
    fn stored(&self) -> String {
        let mut stored = Vec::new();
        for entry in fs::read_dir(self.db().parent().unwrap()).unwrap() {
            stored.extend(fs::read(entry.unwrap().path()).unwrap());
        }
        String::from_utf8_lossy(&stored).into_owned()
    }

    fn call(&self, tool: &str, args: &str) -> Output {
        toolgate()
            .env("XDG_STATE_HOME", self.state())
            .args(["call", "--json", "--workspace"])
            .arg(self.fx.workspace())
            .args(["--tool", tool, "--args", args])
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    fn audit(&self, args: &[&str]) -> Output {
        toolgate()
            .env("XDG_STATE_HOME", self.state())
            .arg("audit")
            .args(args)
            .output()
            .unwrap()
    }

    fn export(&self) -> Vec<Value> {
        let output = self.audit(&["export", "--jsonl"]);
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

fn sqlite3(db: &Path, sql: &str) {
    let output = Command::new("sqlite3").arg(db).arg(sql).output().unwrap();
    assert!(output.status.success(), "sqlite3 {sql}: {output:?}");
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn records_of_every_kind_of_outcome_hold_no_values_bodies_or_paths() {
    let audited = Audited::new();
    let body_marker = "alpha\nbeta";
    let calls = [
        ("read_file", r#"{"path": "a.txt"}"#, 0, "completed", None),
        (
            "search_text",
            &format!(r#"{{"pattern": "{SECRET}"}}"#) as &str,
            0,
            "completed",
            None,
        ),
        ("read_file", r#"{"path": "missing.txt"}"#, 1, "failed", None),
        (
            "read_file",
            "{not json",
            2,
            "rejected",
            Some(("normalize", "malformed")),
        ),
        (
            "read_fil",
            r#"{"path": "a.txt"}"#,
            2,
            "rejected",
            Some(("resolve", "unknown_tool")),
        ),
        (
            "read_file",
            &format!(r#"{{"file_path": "{SECRET}"}}"#),
            2,
            "rejected",
            Some(("validate", "unknown_argument")),
        ),
        (
            "read_file",
            r#"{"path": ".env"}"#,
            2,
            "rejected",
            Some(("authorize", "policy_denied")),
        ),
        (
            "write_file",
            &format!(r#"{{"path": "new.txt", "content": "{SECRET}"}}"#),
            2,
            "rejected",
            Some(("approve", "approval_required")),
        ),
    ];
    let mut call_ids = Vec::new();
    for (tool, args, exit, _, _) in &calls {
        let output = audited.call(tool, args);
        assert_eq!(
            output.status.code(),
            Some(*exit),
            "{tool} {args}: {output:?}"
        );
        if *exit == 0 {
            let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
            call_ids.push(outcome["evidence"]["call_id"].as_str().unwrap().to_owned());
        }
    }
    let records = audited.export();
    assert_eq!(records.len(), calls.len());
    for (record, (tool, _, _, status, rejection)) in records.iter().zip(&calls) {
        let call = &record["call"];
        assert_eq!(call["tool"], *tool, "{record}");
        assert_eq!(call["status"], *status, "{record}");
        match rejection {
            Some((stage, code)) => {
                assert_eq!(call["rejection"], json!({"stage": stage, "code": code}));
            }
            None => assert!(call.get("rejection").is_none(), "{record}"),
        }
        assert!(
            call.get("call_id").and_then(Value::as_str).is_some(),
            "{record}"
        );
    }
    assert_eq!(records[0]["call"]["call_id"], call_ids[0].as_str());
    assert_eq!(records[0]["call"]["resources"], json!(["path:a.txt"]));
    assert_eq!(records[2]["call"]["error"], json!({"code": "not_found"}));

    let workspace = audited.fx.workspace().canonicalize().unwrap();
    let workspace = workspace.to_string_lossy();
    let export = stdout(&audited.audit(&["export", "--jsonl"]));
    let stored = audited.stored();
    for (name, text) in [("the database", &*stored), ("the export", &export)] {
        assert!(!text.contains(SECRET), "{name} holds an argument value");
        assert!(
            !text.contains(&*workspace),
            "{name} holds the workspace's path"
        );
        assert!(!text.contains(body_marker), "{name} holds a file body");
        assert!(
            !text.contains("supersecret"),
            "{name} holds `.env`'s contents"
        );
    }

    let tail = stdout(&audited.audit(&["tail", "-n", "3"]));
    let lines: Vec<&str> = tail.lines().collect();
    assert_eq!(lines.len(), 3, "{tail}");
    assert!(lines[0].contains("validate/unknown_argument"), "{tail}");
    assert!(lines[2].contains("approve/approval_required"), "{tail}");
}

#[test]
fn commands_outside_the_workspace_leave_no_absolute_path_in_the_log() {
    let audited = Audited::new();
    fs::write(audited.fx.workspace().join("Makefile"), "test:\n\ttrue\n").unwrap();
    // Both are refused without a person to approve them, after their resources are known.
    let command = audited.call("run_command", r#"{"argv": ["true", "/etc/hostname"]}"#);
    assert_eq!(command.status.code(), Some(2), "{command:?}");
    let script = audited.call("run_script", r#"{"script": "test"}"#);
    assert_eq!(script.status.code(), Some(2), "{script:?}");

    let records = audited.export();
    assert_eq!(records.len(), 2, "{records:?}");
    let resources = |i: usize| records[i]["call"]["resources"].to_string();
    assert!(
        resources(0).contains("program:true#sha256:"),
        "{}",
        resources(0)
    );
    assert!(
        resources(1).contains(r#"argv:[\"make#sha256:"#),
        "{}",
        resources(1)
    );
    let export = stdout(&audited.audit(&["export", "--jsonl"]));
    let stored = audited.stored();
    for (name, text) in [("the database", &*stored), ("the export", &export)] {
        for path in ["/bin/true", "/bin/make", "/etc/hostname"] {
            assert!(!text.contains(path), "{name} holds `{path}`");
        }
    }
}

#[test]
fn debug_setting_keeps_redacted_values() {
    let audited = Audited::new();
    let config = audited.fx.dir.path().join("debug.toml");
    fs::write(
        &config,
        "[audit]\npath = \"debug-audit.db\"\ndebug_store_redacted_values = true\n",
    )
    .unwrap();
    let output = toolgate()
        .args(["call", "--config"])
        .arg(&config)
        .arg("--workspace")
        .arg(audited.fx.workspace())
        .args([
            "--tool",
            "read_file",
            "--args",
            r#"{"path": "API_KEY=hunter2"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let db = audited.fx.dir.path().join("debug-audit.db");
    let export = toolgate()
        .args(["audit", "export", "--jsonl", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let text = stdout(&export);
    assert!(text.contains("error_message"), "{text}");
    assert!(text.contains("API_KEY=[REDACTED]"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

/// A log of six calls, written by the binary.
fn six_calls() -> Audited {
    let audited = Audited::new();
    for i in 0..6 {
        let path = if i % 2 == 0 { "a.txt" } else { "missing.txt" };
        audited.call("read_file", &format!(r#"{{"path": "{path}"}}"#));
    }
    let verified = audited.audit(&["verify"]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    assert!(
        stdout(&verified).starts_with("ok: 6 records"),
        "{verified:?}"
    );
    audited
}

#[test]
fn verify_names_records_tampered_with_the_sqlite3_tool() {
    let cases = [
        (
            "edit a body",
            "UPDATE records SET body = replace(body, '\"read_file\"', '\"write_file\"') WHERE seq = 3",
            "record 3 was edited: its hash does not match its contents",
        ),
        (
            "edit a hash",
            "UPDATE records SET hash = randomblob(32) WHERE seq = 3",
            "record 3 was edited: its hash does not match its contents",
        ),
        (
            "delete a middle record",
            "DELETE FROM records WHERE seq = 3",
            "record 3 is missing: it was deleted",
        ),
        (
            "delete the newest record",
            "DELETE FROM records WHERE seq = 6",
            "record 6 is missing: the log was truncated",
        ),
        (
            "swap two records",
            "UPDATE records SET seq = -1 WHERE seq = 3; UPDATE records SET seq = 3 WHERE seq = 4; UPDATE records SET seq = 4 WHERE seq = -1",
            "record 3 is out of order: the record stored there is record 4",
        ),
        (
            "insert a forged record",
            "UPDATE records SET seq = seq + 100 WHERE seq >= 3; UPDATE records SET seq = seq - 99 WHERE seq >= 100; \
             INSERT INTO records VALUES (3, (SELECT body FROM records WHERE seq = 4), (SELECT prev_hash FROM records WHERE seq = 4), randomblob(32))",
            "record 3 was inserted",
        ),
    ];
    for (what, sql, expected) in cases {
        let audited = six_calls();
        sqlite3(&audited.db(), sql);
        let verified = audited.audit(&["verify"]);
        assert_eq!(verified.status.code(), Some(1), "{what}: {verified:?}");
        assert!(
            stdout(&verified).starts_with(&format!("broken: {expected}")),
            "{what}: {}",
            stdout(&verified)
        );
        // A toolgate started on a truncated log refuses to add to it.
        if what == "delete the newest record" {
            let refused = audited.call("read_file", r#"{"path": "a.txt"}"#);
            assert_eq!(refused.status.code(), Some(3), "{refused:?}");
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("head file witnessed record 6"),
                "{refused:?}"
            );
        }
    }
}

#[test]
fn an_emptied_head_file_does_not_hide_deleted_newest_records() {
    let audited = six_calls();
    fs::write(toolgate_audit::head_path(&audited.db()), b"").unwrap();
    sqlite3(&audited.db(), "DELETE FROM records WHERE seq >= 5");
    let verified = audited.audit(&["verify"]);
    assert_eq!(verified.status.code(), Some(1), "{verified:?}");
    assert!(
        stdout(&verified).starts_with("broken: the head file holds no valid head"),
        "{verified:?}"
    );
    let refused = audited.call("read_file", r#"{"path": "a.txt"}"#);
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("no valid head"),
        "{refused:?}"
    );
}

#[test]
fn a_call_whose_record_cannot_be_written_fails_closed_without_output() {
    let audited = six_calls();
    // Another process holds the log's write lock for longer than toolgate waits (5 s).
    let mut holder = Command::new("sqlite3")
        .arg(audited.db())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = holder.stdin.take().unwrap();
    // `.bail on` ends the shell if the lock cannot be had, so the line `locked` says it is
    // held: the call below starts only then.
    input
        .write_all(b".bail on\nBEGIN IMMEDIATE;\nSELECT 'locked';\n")
        .unwrap();
    input.flush().unwrap();
    let mut announced = String::new();
    BufReader::new(holder.stdout.take().unwrap())
        .read_line(&mut announced)
        .unwrap();
    assert_eq!(announced, "locked\n", "sqlite3 did not take the write lock");
    let output = audited.call("read_file", r#"{"path": "a.txt"}"#);
    drop(input);
    let _ = holder.wait();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(outcome["status"], "failed");
    assert_eq!(outcome["error"]["code"], "audit_unavailable");
    assert!(outcome.get("output").is_none(), "{outcome}");
    assert_eq!(outcome["evidence"]["output_bytes"], 0);
    // Nothing was recorded for it, and the chain is intact.
    assert!(stdout(&audited.audit(&["verify"])).starts_with("ok: 6 records"));
}

#[test]
fn a_server_whose_log_stops_verifying_fails_calls_closed() {
    let audited = Audited::new();
    let mut server = StdioServer::start(
        toolgate()
            .env("XDG_STATE_HOME", audited.state())
            .args(["serve", "--workspace"])
            .arg(audited.fx.workspace()),
    );
    server.read(1, "a.txt");
    let answer = server.next_answer(Duration::from_secs(30)).unwrap();
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    // The newest record is altered underneath the running server.
    sqlite3(
        &audited.db(),
        "UPDATE records SET hash = randomblob(32) WHERE seq = (SELECT max(seq) FROM records)",
    );
    server.read(2, "a.txt");
    let answer = server.next_answer(Duration::from_secs(30)).unwrap();
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(
        result["structuredContent"]["error"]["code"], "audit_unavailable",
        "{answer}"
    );
    assert!(
        result["structuredContent"].get("output").is_none(),
        "{answer}"
    );
    assert!(
        !answer.to_string().contains("alpha"),
        "no file contents: {answer}"
    );
}

#[test]
fn tail_follow_prints_records_as_they_are_appended_and_verify_needs_a_log() {
    let audited = six_calls();
    let mut follower = toolgate()
        .env("XDG_STATE_HOME", audited.state())
        .args(["audit", "tail", "-n", "1", "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let output = follower.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(output).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    let first = lines.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(first.trim_start().starts_with("6 "), "{first}");
    // Following waits for a write to the log: its own reads of the log, which create and
    // remove the write-ahead log when nobody else holds it, do not wake it.
    let ticks = || cpu_ticks(follower.id());
    let before = ticks();
    std::thread::sleep(Duration::from_secs(1));
    let spent = ticks() - before;
    assert!(
        spent <= 5,
        "an idle follower spent {spent} ticks of CPU in 1 s"
    );
    audited.call("read_fil", "{}");
    let next = lines.recv_timeout(Duration::from_secs(10)).unwrap();
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(next.trim_start().starts_with("7 "), "{next}");
    assert!(next.contains("resolve/unknown_tool"), "{next}");

    let missing = toolgate()
        .args(["audit", "verify", "--db"])
        .arg(audited.fx.dir.path().join("nothing.db"))
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(3), "{missing:?}");
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no audit log at"),
        "{missing:?}"
    );
}
