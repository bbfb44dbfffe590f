//! Write-ahead starts, durability by effect and sealed epochs, through the real binary: a
//! server killed with SIGKILL while an approved command runs, a server killed under a load of
//! reads for each `[audit] sync` setting and with none, and a sealed log rewritten with every
//! hash and the head file recomputed.
//!
//! Every test keeps its log in its own temporary state directory.

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
#[path = "../../toolgate-console/src/raw_http.rs"]
mod http;
#[path = "../../../tests/support/served.rs"]
mod served;

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::StdioServer;
use fixture::Fixture;
use served::Served;

fn toolgate() -> Command {
    let mut command = home::toolgate();
    command.env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config");
    command
}

fn db(state: &Path) -> PathBuf {
    state.join("toolgate/audit.db")
}

fn audit(state: &Path, args: &[&str]) -> Output {
    toolgate()
        .env("XDG_STATE_HOME", state)
        .arg("audit")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn export(state: &Path) -> Vec<Value> {
    let output = audit(state, &["export", "--jsonl"]);
    assert!(output.status.success(), "{output:?}");
    stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn with_status<'a>(records: &'a [Value], status: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["call"]["status"] == status)
        .collect()
}

#[test]
fn a_server_killed_while_an_approved_command_runs_leaves_its_start_and_then_its_interruption() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let state = tempfile::tempdir().unwrap();
    let mut served = Served::start_at(&ws, "", state.path());
    let client = served.client(json!([{"op": "call", "tool": "run_command",
        "arguments": {"argv": ["sleep", "60"]}}]));
    let id = served.pending(1)[0]["id"].as_str().unwrap().to_owned();
    let reply = served.decide(&id, r#"{"decision":"allow_once"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);

    // The start is on the record (flushed) before the command runs.
    let deadline = Instant::now() + Duration::from_secs(30);
    let start = loop {
        let records = export(state.path());
        if let Some(start) = with_status(&records, "started").first() {
            break (*start).clone();
        }
        assert!(Instant::now() < deadline, "no start recorded: {records:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(start["call"]["tool"], "run_command");
    assert!(start["call"]["approval_id"].is_string(), "{start}");
    assert!(start["call"]["argument_digest"].is_string(), "{start}");
    // Give the command a moment to be running, then kill the server: no destructor, no flush.
    std::thread::sleep(Duration::from_millis(300));
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    drop(client);

    let records = export(state.path());
    assert_eq!(with_status(&records, "started").len(), 1);
    assert!(
        with_status(&records, "interrupted").is_empty(),
        "nothing is interrupted until toolgate opens the log again"
    );

    // The next toolgate to open the log records the interruption.
    let again = Served::start_at(&ws, "", state.path());
    let records = export(state.path());
    let interrupted = with_status(&records, "interrupted");
    assert_eq!(interrupted.len(), 1, "{records:?}");
    assert_eq!(interrupted[0]["call"]["started"], start["seq"]);
    assert_eq!(interrupted[0]["call"]["call_id"], start["call"]["call_id"]);
    assert_eq!(
        interrupted[0]["call"]["reason"],
        "outcome unknown: toolgate stopped while it ran"
    );
    drop(again);

    let verified = audit(state.path(), &["verify"]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let text = stdout(&verified);
    let expected = format!(
        "interrupted: record {}: call {} (run_command) started at record {}: outcome unknown",
        interrupted[0]["seq"],
        start["call"]["call_id"].as_str().unwrap(),
        start["seq"]
    );
    assert!(text.contains(&expected), "{text}");
    let tail = stdout(&audit(state.path(), &["tail", "-n", "5"]));
    assert!(
        tail.contains("interrupted") && tail.contains("started"),
        "{tail}"
    );
    assert!(tail.contains("outcome_unknown"), "{tail}");
    // Opening it once more records nothing more.
    drop(Served::start_at(&ws, "", state.path()));
    assert_eq!(with_status(&export(state.path()), "interrupted").len(), 1);
}

/// SIGKILL in the middle of a load of reads (no destructor, no flush, no checkpoint), for
/// each `[audit] sync` setting and with none: the log still verifies, holds every call that
/// was answered, and takes the next.
#[test]
fn every_answered_read_is_on_the_record_after_a_sigkill_for_each_sync_setting() {
    for config in [
        "",
        "[audit]\nsync = \"effects\"\n",
        "[audit]\nsync = \"always\"\n",
    ] {
        let fx = Fixture::new();
        let state = tempfile::tempdir().unwrap();
        let config_path = state.path().join("toolgate.toml");
        fs::write(&config_path, config).unwrap();
        let toolgate_on = |args: &[&str]| {
            let mut command = toolgate();
            command
                .env("XDG_STATE_HOME", state.path())
                .args(args)
                .arg("--workspace")
                .arg(fx.workspace())
                .arg("--config")
                .arg(&config_path);
            command
        };
        let mut server = StdioServer::start(&mut toolgate_on(&["serve"]));
        let total = 3000;
        // Many calls in flight: every request is written before any answer is awaited.
        for id in 0..total {
            server.read(id, if id % 3 == 0 { "missing.txt" } else { "a.txt" });
        }
        let mut answered = Vec::new();
        while answered.len() < 400 {
            let answer = server
                .next_answer(Duration::from_secs(60))
                .expect("answers keep coming");
            answered.push(answer);
        }
        server.child.kill().unwrap();
        server.child.wait().unwrap();
        // Answers already written to the pipe before the kill count too.
        while let Some(answer) = server.next_answer(Duration::from_millis(200)) {
            answered.push(answer);
        }
        assert!(
            answered.len() < total as usize,
            "{config:?}: the kill came mid-load"
        );

        let verified = audit(state.path(), &["verify"]);
        assert_eq!(verified.status.code(), Some(0), "{config:?}: {verified:?}");
        let recorded: HashSet<String> = export(state.path())
            .iter()
            .map(|r| r["call"]["call_id"].as_str().unwrap().to_owned())
            .collect();
        for answer in &answered {
            let id = answer["result"]["_meta"]["toolgate/call_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{config:?}: no call id: {answer}"));
            assert!(
                recorded.contains(id),
                "{config:?}: answered but not recorded: {answer}"
            );
        }
        let output = toolgate_on(&["call", "--json"])
            .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{config:?}: {output:?}");
        assert_eq!(audit(state.path(), &["verify"]).status.code(), Some(0));
    }
}

#[test]
fn an_unknown_sync_setting_is_refused_by_name() {
    let fx = Fixture::new();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("toolgate.toml");
    fs::write(&config, "[audit]\nsync = \"sometimes\"\n").unwrap();
    let output = toolgate()
        .env("XDG_STATE_HOME", state.path())
        .args(["call", "--workspace"])
        .arg(fx.workspace())
        .arg("--config")
        .arg(&config)
        .args(["--tool", "read_file", "--args", r#"{"path":"a.txt"}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("`sometimes`") && stderr.contains("effects") && stderr.contains(":2"),
        "{stderr}"
    );
}

/// Replaces record `seq`'s tool with `tool` and recomputes every hash from there on, and the
/// head file (its slot `seq` mod 2, as toolgate writes it), with nothing but the state
/// directory in hand: Python's `sqlite3` and `hashlib`.
const REWRITE: &str = r#"
import hashlib, json, sqlite3, struct, sys
db, target, tool = sys.argv[1], int(sys.argv[2]), sys.argv[3]
c = sqlite3.connect(db)
rows = c.execute("SELECT seq, body, prev_hash FROM records WHERE seq >= ? ORDER BY seq", (target,)).fetchall()
prev = rows[0][2]
head = open(db + "-head", "r+b")
for seq, body, _ in rows:
    if seq == target:
        value = json.loads(body)
        value["call"]["tool"] = tool
        body = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hashlib.sha256(prev + struct.pack(">Q", seq) + body.encode()).digest()
    c.execute("UPDATE records SET body = ?, prev_hash = ?, hash = ? WHERE seq = ?", (body, prev, digest, seq))
    payload = b"TGAH" + struct.pack(">Q", seq) + digest
    slot = payload + hashlib.sha256(payload).digest()[:8]
    head.seek((seq % 2) * 64)
    head.write(slot.ljust(64, b"\0"))
    prev = digest
c.commit()
head.close()
"#;

fn rewrite(db: &Path, seq: u64, tool: &str) {
    let output = Command::new("python3")
        .args(["-c", REWRITE])
        .arg(db)
        .arg(seq.to_string())
        .arg(tool)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
}

fn read_once(ws: &Path, state: &Path, config: &Path) {
    let output = toolgate()
        .env("XDG_STATE_HOME", state)
        .args(["call", "--workspace"])
        .arg(ws)
        .arg("--config")
        .arg(config)
        .args(["--tool", "read_file", "--args", r#"{"path":"a.txt"}"#])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

#[test]
fn a_rewritten_sealed_epoch_is_named_and_an_unsealed_tail_is_not_vouched_for() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let state = tempfile::tempdir().unwrap();
    let config = state.path().join("toolgate.toml");
    fs::write(&config, "[audit]\nseal_epoch_secs = 2\n").unwrap();
    let setup = toolgate()
        .env("XDG_STATE_HOME", state.path())
        .args(["audit", "seal-setup", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(setup.status.code(), Some(0), "{setup:?}");
    let key = stdout(&setup).trim().to_owned();
    assert!(key.starts_with("toolgate-seal-v1:"), "{key}");
    let again = toolgate()
        .env("XDG_STATE_HOME", state.path())
        .args(["audit", "seal-setup", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(3), "set up only once: {again:?}");
    assert!(!stdout(&again).contains("toolgate-seal"), "{again:?}");

    // Epoch after epoch, three reads each: every `call` seals the epoch before its own.
    for _ in 0..3 {
        for _ in 0..3 {
            read_once(&ws, state.path(), &config);
        }
        std::thread::sleep(Duration::from_millis(2100));
    }
    read_once(&ws, state.path(), &config);
    let records = export(state.path());
    let seals = with_status(&records, "sealed");
    assert!(seals.len() >= 2, "{records:?}");

    let verified = audit(state.path(), &["verify", "--verification-key", &key]);
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    let text = stdout(&verified);
    assert!(text.contains("sealed: epochs 0 to"), "{text}");
    // The newest read is in an epoch still open, after the last seal (which the next seal
    // will cover).
    let last = records.last().unwrap()["seq"].as_u64().unwrap();
    let last_seal = seals.last().unwrap()["seq"].as_u64().unwrap();
    assert!(
        text.contains(&format!("unsealed: records {last_seal} to {last}")),
        "{text}"
    );
    let head = audit(state.path(), &["head", "--json"]);
    let head: Value = serde_json::from_slice(&head.stdout).unwrap();
    assert_eq!(head["seq"], last);
    assert!(head["hash"].as_str().unwrap().starts_with("sha256:"));

    // The first read, in the first sealed epoch, rewritten, every hash and the head file
    // recomputed.
    let first_seal = &seals[0]["call"];
    let (epoch, through) = (&first_seal["epoch"], &first_seal["head_seq"]);
    rewrite(&db(state.path()), 1, "write_file");
    let plain = audit(state.path(), &["verify"]);
    assert_eq!(
        plain.status.code(),
        Some(0),
        "without the key nothing shows: {plain:?}"
    );
    let verified = audit(state.path(), &["verify", "--verification-key", &key]);
    assert_eq!(verified.status.code(), Some(1), "{verified:?}");
    let text = stdout(&verified);
    assert!(
        text.contains(&format!(
            "broken: epoch {epoch} (records 1 to {through}) was altered"
        )),
        "{text}"
    );

    let wrong = audit(state.path(), &["verify", "--verification-key", "nonsense"]);
    assert_eq!(wrong.status.code(), Some(3), "{wrong:?}");
}
