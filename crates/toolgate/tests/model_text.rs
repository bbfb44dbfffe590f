//! What a model reads when toolgate refuses a call, through the real `toolgate serve` over
//! stdio, one row of `tests/corpus/model_text.jsonl` per refusal.
//!
//! For each: the text has exactly one `Hint:` line and says nothing twice (no clause, no name
//! in backticks); it names only approval channels that exist for how the server runs; the
//! `structuredContent` — all that some clients (Codex CLI) give their model — holds only the
//! status, `"executed": false` and the rejection's stage, code, message and hint, with the
//! evidence in `_meta`; and no progress report says the call waits for a person unless one is
//! being asked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use fixture::Fixture;
use support::fixture;
use support::home;

/// Longest wait for one answer: the console row waits out its 1 s approval timeout.
const ANSWER_WITHIN: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
struct Row {
    name: String,
    /// How the server runs: `console`, `no-console`, or `elicit` (a console, and a client that
    /// is asked by form).
    serve: String,
    tool: String,
    args: Value,
    stage: String,
    code: String,
    must: Vec<String>,
    must_not: Vec<String>,
    /// Whether a person is asked, so that progress may say the call waits for one.
    waits: bool,
}

fn rows() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/model_text.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `toolgate serve` on stdio, its messages read on a thread; killed by pid when dropped.
struct Server {
    child: Child,
    stdin: ChildStdin,
    messages: Receiver<Value>,
}

impl Server {
    fn start(fx: &Fixture, serve: &str) -> Server {
        let config = fx.dir.path().join(format!("{serve}.toml"));
        let text = match serve {
            "console" => "[approval]\ntimeout_secs = 1\n",
            "elicit" => "[approval]\ntimeout_secs = 30\nelicitation = [\"default\"]\n",
            _ => "",
        };
        std::fs::write(&config, text).unwrap();
        let mut command = home::toolgate();
        command
            .args(["serve", "--workspace"])
            .arg(fx.workspace())
            .arg("--config")
            .arg(&config)
            .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
            .env(
                "XDG_STATE_HOME",
                fx.dir.path().join(format!("state-{serve}")),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        if serve == "no-console" {
            command.arg("--no-console");
        }
        let mut child = command.spawn().unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, messages) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(message) = serde_json::from_str::<Value>(&line)
                    && tx.send(message).is_err()
                {
                    break;
                }
            }
        });
        let mut server = Server {
            child,
            stdin,
            messages,
        };
        let capabilities = if serve == "elicit" {
            json!({"elicitation": {"form": {}}})
        } else {
            json!({})
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": capabilities,
                "clientInfo": {"name": "model-text-test", "version": "1"}
            }}),
        );
        let (answer, _) = server.answer_to(0);
        assert!(answer.get("result").is_some(), "{answer}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The answer to request `id`, and every other message before it. A form the server
    /// sends is answered as the person at the client would: rejected, with a reason.
    fn answer_to(&mut self, id: u64) -> (Value, Vec<Value>) {
        let deadline = Instant::now() + ANSWER_WITHIN;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = match self.messages.recv_timeout(left) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => panic!("no answer to {id}: {before:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("server gone: {before:?}"),
            };
            if message["id"] == json!(id) && message.get("method").is_none() {
                return (message, before);
            }
            if message["method"] == "elicitation/create" {
                self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": {
                    "action": "accept",
                    "content": {"decision": "reject", "reason": "not now"}
                }}));
            }
            before.push(message);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The text content of a tool result.
fn text_of(result: &Value) -> String {
    result["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "text")
        .map(|c| c["text"].as_str().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

/// What is wrong with one refusal as a model reads it; empty when nothing is.
fn problems(row: &Row, result: &Value, progress: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let text = text_of(result);
    if result["isError"] != true {
        found.push("not a tool error".to_owned());
    }
    let hints: Vec<&str> = text.lines().filter(|l| l.starts_with("Hint:")).collect();
    if hints.len() != 1 {
        found.push(format!("{} hint lines", hints.len()));
    }
    // Each clause once.
    let mut clauses = BTreeSet::new();
    for clause in text.lines().flat_map(|l| l.split("; ")) {
        let clause = clause.trim().trim_start_matches("Hint: ");
        if !clause.is_empty() && !clauses.insert(clause) {
            found.push(format!("said twice: {clause:?}"));
        }
    }
    // Each name, path or value in backticks once.
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for quoted in text.split('`').skip(1).step_by(2) {
        *counts.entry(quoted).or_default() += 1;
    }
    for (quoted, count) in counts {
        if count > 1 {
            found.push(format!("`{quoted}` named {count} times"));
        }
    }
    if text.contains("`/") {
        found.push("a JSON pointer where a name would do".to_owned());
    }
    for needle in &row.must {
        if !text.contains(needle.as_str()) {
            found.push(format!("missing {needle:?}"));
        }
    }
    for needle in &row.must_not {
        if text.contains(needle.as_str()) {
            found.push(format!("says {needle:?}"));
        }
    }
    for evidence in ["sha256:", "durations", "_ns"] {
        if text.contains(evidence) {
            found.push(format!("evidence {evidence:?} in the text"));
        }
    }

    // What a client that forwards only structuredContent gives its model.
    let lean = &result["structuredContent"];
    let keys: BTreeSet<&str> = lean
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if keys != BTreeSet::from(["status", "executed", "rejection"]) {
        found.push(format!("structuredContent has {keys:?}"));
    }
    if lean["status"] != "rejected" || lean["executed"] != false {
        found.push(format!(
            "structuredContent does not say nothing ran: {lean}"
        ));
    }
    let rejection = &lean["rejection"];
    let said: BTreeSet<&str> = rejection
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    if said != BTreeSet::from(["stage", "code", "message", "hint"]) {
        found.push(format!("the rejection has {said:?}"));
    }
    if rejection["stage"] != row.stage.as_str() || rejection["code"] != row.code.as_str() {
        found.push(format!(
            "stage and code: {} {}",
            rejection["stage"], rejection["code"]
        ));
    }
    match (rejection["message"].as_str(), rejection["hint"].as_str()) {
        (Some(message), Some(hint)) => {
            let hint_line = format!("Hint: {hint}");
            if !text.contains(message) || hints.first() != Some(&hint_line.as_str()) {
                found.push("the text and structuredContent disagree".to_owned());
            }
        }
        _ => found.push(format!("no message or hint: {rejection}")),
    }
    let lean_json = lean.to_string();
    for evidence in ["sha256:", "durations_ns", "evidence", "call_id"] {
        if lean_json.contains(evidence) {
            found.push(format!("evidence {evidence:?} in structuredContent"));
        }
    }

    // The evidence is for people and logs, in `_meta`.
    let meta = &result["_meta"];
    if meta["toolgate/evidence"]["call_id"] != meta["toolgate/call_id"]
        || meta["toolgate/evidence"]["durations_ns"]
            .as_object()
            .is_none()
    {
        found.push(format!("no evidence in _meta: {meta}"));
    }

    let promised = progress.iter().any(|p| p.contains("waiting for a person"));
    if promised != row.waits {
        found.push(format!(
            "progress {} a person: {progress:?}",
            if promised {
                "promised"
            } else {
                "never mentioned"
            }
        ));
    }
    found
}

#[test]
fn refusals_read_well_whichever_part_a_client_forwards() {
    let fx = Fixture::new();
    let rows = rows();
    assert!(rows.len() >= 8, "the table lost rows");
    let mut failures = Vec::new();
    let mut servers: BTreeMap<String, Server> = BTreeMap::new();
    for (i, row) in rows.iter().enumerate() {
        let server = servers
            .entry(row.serve.clone())
            .or_insert_with(|| Server::start(&fx, &row.serve));
        let id = u64::try_from(i).unwrap() + 1;
        let token = format!("p{id}");
        server.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": row.tool, "arguments": row.args, "_meta": {"progressToken": token}
            }}),
        );
        let (answer, before) = server.answer_to(id);
        let progress: Vec<String> = before
            .iter()
            .filter(|m| {
                m["method"] == "notifications/progress" && m["params"]["progressToken"] == token
            })
            .map(|m| {
                m["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        let result = &answer["result"];
        let found = problems(row, result, &progress);
        if !found.is_empty() {
            failures.push(format!(
                "{}:\n  {}\n  text: {:?}\n  structuredContent: {}",
                row.name,
                found.join("\n  "),
                text_of(result),
                result["structuredContent"]
            ));
        }
    }
    assert!(
        !fx.workspace().join("new.txt").exists(),
        "nothing was written"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_checks_find_what_they_look_for() {
    let row = Row {
        name: "old shape".into(),
        serve: "no-console".into(),
        tool: "read_file".into(),
        args: json!({}),
        stage: "validate".into(),
        code: "unknown_argument".into(),
        must: vec![],
        must_not: vec!["approve it in toolgate's approval console".into()],
        waits: false,
    };
    // The result toolgate gave before: hints repeated, the missing `path` named twice, the
    // whole outcome as structuredContent, and a console that does not exist.
    let old = json!({
        "isError": true,
        "content": [{"type": "text", "text": "toolgate rejected this call at the validate stage (unknown_argument); nothing ran.\n`/pth`: unknown argument `pth`; `/path`: missing required argument `path`\n- `/pth` (unknown_argument): unknown argument `pth` — did you mean `path`?\nHint: did you mean `path`?\nHint: ask the user to approve it in toolgate's approval console"}],
        "structuredContent": {"status": "rejected", "rejection": {"stage": "validate", "code": "unknown_argument", "message": "m"}, "evidence": {"argument_digest": "sha256:00", "durations_ns": {"validate": 1}}, "unknowns": []},
    });
    let found = problems(
        &row,
        &old,
        &["`read_file` is waiting for a person's approval (0s)".into()],
    );
    for expected in [
        "2 hint lines",
        "`path` named",
        "JSON pointer",
        "says \"approve it in toolgate's approval console\"",
        "structuredContent has",
        "evidence \"sha256:\" in structuredContent",
        "no evidence in _meta",
        "progress promised",
    ] {
        assert!(
            found.iter().any(|f| f.contains(expected)),
            "{expected}: {found:?}"
        );
    }
}
