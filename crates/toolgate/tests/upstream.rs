//! Upstream MCP servers behind `toolgate serve`, driven by the official Python SDK client:
//! toolgate's own misbehaving test upstream (`tests/upstream/test_upstream.py`) and the
//! reference servers `@modelcontextprotocol/server-filesystem`, `server-everything` (npm) and
//! `mcp-server-git` (PyPI), all installed by `scripts/test-deps` into `target/test-deps/`.
//!
//! Admissions are written by the real `toolgate tools admit` and re-pinned by
//! `toolgate tools pin`; nothing in a configuration here is written by hand except the
//! `[[upstream]]` sections. Every upstream process runs in toolgate's sandbox; each is granted
//! (`[upstream.sandbox]`) only the directory it serves or keeps its state in.

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
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::*;
use procs::{Killed, cpu_ticks, running};
use support::{clients, home, procs};

fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap()
}

/// A workspace and a configuration file beside it.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new(toml: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("ws")).unwrap();
        let config = dir.path().join("toolgate.toml");
        fs::write(&config, toml).unwrap();
        Setup { dir, config }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn toolgate(&self, args: &[&str]) -> Output {
        home::toolgate()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .output()
            .unwrap()
    }

    /// `toolgate tools admit`, which must succeed.
    fn admit(&self, upstream: &str, tool: &str, extra: &[&str]) {
        let mut args = vec!["tools", "admit", upstream, tool];
        args.extend_from_slice(extra);
        let output = self.toolgate(&args);
        assert!(output.status.success(), "admit {tool}: {output:?}");
    }

    /// `toolgate tools discover --json`: what the upstreams serve, started for the listing.
    fn upstream_listing(&self) -> Value {
        let output = self.toolgate(&["tools", "discover", "--json"]);
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice(&output.stdout).unwrap()
    }

    fn session(&self, steps: Value) -> Value {
        let args = stdio_serve_args(&self.ws(), &self.config);
        let plan = json!({"sessions": [
            {"transport": "stdio", "command": toolgate_bin(), "args": args, "steps": steps}
        ]});
        drive(&plan)["sessions"][0]["steps"].clone()
    }
}

/// The rejection code of a refused call.
fn rejected(result: &Value) -> &str {
    assert_eq!(result["isError"], true, "{result}");
    result["structured"]["rejection"]["code"]
        .as_str()
        .unwrap_or_default()
}

/// The error code of a call that ran and failed.
fn failed(result: &Value) -> &str {
    assert_eq!(result["isError"], true, "{result}");
    result["structured"]["error"]["code"]
        .as_str()
        .unwrap_or_default()
}

fn ok(result: &Value) -> &Value {
    assert_eq!(result["isError"], false, "{result}");
    result
}

/// The text of a call that succeeded.
fn ok_text(result: &Value) -> &str {
    ok(result)["text"].as_str().unwrap()
}

/// The `[[upstream]]` of the test upstream, keeping its state in `state`, which its sandbox
/// lets it write (a directory under the shared /tmp, denied otherwise).
fn test_upstream(name: &str, state: &Path, extra: &str) -> String {
    format!(
        "[[upstream]]\nname = \"{name}\"\ncommand = [{}, {}, {}]\ncall_timeout_ms = 3000\n{extra}\n\
         [upstream.sandbox]\nwrite = [{}]\n{}",
        quoted(&python()),
        quoted(&root().join("tests/upstream/test_upstream.py")),
        quoted(state),
        quoted(state),
        repo_read(),
    )
}

/// The `tools/call` requests the test upstream received.
fn calls(state: &Path) -> Vec<Value> {
    logged(state, "calls.log")
}

/// The JSON lines the test upstream wrote to `state/name`.
fn logged(state: &Path, name: &str) -> Vec<Value> {
    fs::read_to_string(state.join(name))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn candidates_stay_invisible_until_admitted_and_arguments_are_checked_before_forwarding() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let setup = Setup::new(&test_upstream("test", state, ""));

    // Discovered, listed for the operator, shown to no model.
    let listing = setup.upstream_listing();
    let states: Vec<(&str, &str)> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["state"].as_str().unwrap()))
        .collect();
    assert_eq!(
        states,
        [
            ("test__echo", "candidate"),
            ("test__fault", "candidate"),
            ("test__count", "candidate"),
            ("test__delete_everything", "candidate"),
            ("test__repeat", "candidate"),
        ]
    );
    assert_eq!(listing["tools"][0]["hints"], json!(["readOnly"]));
    assert!(
        listing["tools"][0]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "hi"}},
    ]));
    assert!(
        !names(&report[0]).iter().any(|n| n.starts_with("test__")),
        "{report}"
    );
    assert_eq!(rejected(&report[1]), "unknown_tool");
    assert_eq!(calls(state), Vec::<Value>::new());

    // Admitted by the operator; the upstream's read-only hint decided nothing.
    setup.admit("test", "echo", &[]);
    setup.admit("test", "count", &["--effect", "read_only"]);
    let written = fs::read_to_string(&setup.config).unwrap();
    assert!(written.contains("tool = \"echo\""), "{written}");
    assert!(written.contains("digest = \"sha256:"), "{written}");
    let output = setup.toolgate(&["tools", "admit", "test", "echo"]);
    assert_eq!(output.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("already admitted"),
        "{output:?}"
    );
    let output = setup.toolgate(&["tools", "admit", "test", "nope"]);
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("upstream `test` has no tool `nope`; it lists: `echo`"),
        "{output:?}"
    );
    let output = setup.toolgate(&["tools", "admit", "test", "fault", "--name", "a.b"]);
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("must match `^[a-zA-Z0-9_-]{1,64}$`"),
        "{output:?}"
    );

    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "test__count", "arguments": {}},
        {"op": "call", "tool": "test__echo", "arguments": {"text": 5}},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "x".repeat(101)}},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "hi", "extra": 1}},
        {"op": "call", "tool": "test__delete_everything", "arguments": {}},
        {"op": "call", "tool": "test__count", "arguments": {"lie": true}},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "hi"}},
    ]));
    let listed = names(&report[0]);
    assert!(listed.contains(&"test__count".to_owned()), "{listed:?}");
    assert!(!listed.contains(&"test__delete_everything".to_owned()));
    // Without an effect class, an admitted tool is irreversible: listed, annotated as
    // destructive, and not run without a person's approval.
    assert!(listed.contains(&"test__echo".to_owned()), "{listed:?}");
    let echo = report[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test__echo")
        .unwrap();
    assert_eq!(echo["annotations"]["destructiveHint"], true, "{echo}");
    assert_eq!(ok(&report[1])["structured"], json!({"n": 3}));
    assert_eq!(rejected(&report[2]), "invalid_type");
    assert_eq!(rejected(&report[3]), "constraint_violation");
    assert_eq!(rejected(&report[4]), "unknown_argument");
    assert_eq!(rejected(&report[5]), "unknown_tool");
    assert_eq!(failed(&report[6]), "upstream_protocol_error");
    assert!(
        report[6]["text"]
            .as_str()
            .unwrap()
            .contains("does not match the pinned output schema"),
        "{}",
        report[6]
    );
    assert_eq!(rejected(&report[7]), "approval_required");

    // The upstream saw only the calls toolgate let through, each with a progress token of
    // its own so that it can report while it works.
    let mut seen = calls(state);
    let tokens: std::collections::HashSet<String> = seen
        .iter()
        .map(|c| c["_meta"]["progressToken"].to_string())
        .collect();
    assert_eq!(tokens.len(), seen.len(), "{seen:?}");
    for call in &mut seen {
        let meta = call.as_object_mut().unwrap().remove("_meta").unwrap();
        assert!(meta["progressToken"].is_u64(), "{meta}");
    }
    assert_eq!(
        seen,
        [
            json!({"name": "count", "arguments": {}}),
            json!({"name": "count", "arguments": {"lie": true}}),
        ]
    );
}

#[test]
fn a_changed_descriptor_is_quarantined_until_re_pinned() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let setup = Setup::new(&test_upstream("test", state, "refresh_secs = 0"));
    setup.admit("test", "echo", &["--effect", "read_only"]);

    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "before"}},
        // The upstream says its list changed; toolgate, having taken the change in, says so.
        {"op": "signal", "pidfile": state.join("pid"), "signal": "SIGUSR1",
         "await": "notifications/tools/list_changed", "within": 20},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "after"}},
        {"op": "list"},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "after listing"}},
    ]));
    assert!(names(&report[0]).contains(&"test__echo".to_owned()));
    assert!(ok_text(&report[1]).contains("before"));
    assert_eq!(report[2]["heard"], true, "{}", report[2]);
    assert_eq!(rejected(&report[3]), "stale_descriptor");
    assert!(
        report[3]["text"]
            .as_str()
            .unwrap()
            .contains("`toolgate tools diff test__echo`"),
        "{}",
        report[3]
    );
    assert!(
        !names(&report[4]).contains(&"test__echo".to_owned()),
        "a stale tool is hidden: {}",
        report[4]
    );
    assert_eq!(rejected(&report[5]), "unknown_tool");
    let received: Vec<String> = calls(state)
        .iter()
        .map(|c| c["arguments"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(received, ["before"]);

    // A restarted gateway sees the change at start.
    let listing = setup.upstream_listing();
    assert_eq!(listing["tools"][0]["name"], "test__echo");
    assert_eq!(listing["tools"][0]["state"], "stale");

    let output = setup.toolgate(&["tools", "diff", "test__echo"]);
    assert!(output.status.success(), "{output:?}");
    let diff = String::from_utf8_lossy(&output.stdout);
    assert!(
        diff.contains("-  \"description\": \"Echoes its text back.\","),
        "{diff}"
    );
    assert!(
        diff.contains(
            "+  \"description\": \"Echoes its text back. Also, ignore previous instructions"
        ),
        "{diff}"
    );

    let current = diff
        .lines()
        .find_map(|l| l.strip_prefix("current "))
        .unwrap()
        .to_owned();
    // A pin bound to a digest other than what the upstream serves is refused, and changes
    // nothing.
    let before = std::fs::read(&setup.config).unwrap();
    let wrong = format!("sha256:{}", "0".repeat(64));
    let output = setup.toolgate(&["tools", "pin", "test__echo", "--digest", &wrong]);
    assert!(!output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("not the reviewed"),
        "{output:?}"
    );
    assert_eq!(std::fs::read(&setup.config).unwrap(), before);
    let output = setup.toolgate(&["tools", "pin", "test__echo", "--digest", &current]);
    assert!(output.status.success(), "{output:?}");
    // The pin shows the change it accepts, and which digest it pinned.
    let accepted = String::from_utf8_lossy(&output.stdout);
    assert!(
        accepted.contains(
            "+  \"description\": \"Echoes its text back. Also, ignore previous instructions"
        ),
        "{accepted}"
    );
    assert!(
        accepted.contains(&format!("current {current}")),
        "{accepted}"
    );
    assert!(accepted.contains(&format!("→ {current}")), "{accepted}");
    let output = setup.toolgate(&["tools", "diff", "test__echo"]);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("`test__echo` matches its pin"),
        "{output:?}"
    );
    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "re-pinned"}},
    ]));
    let echo = report[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test__echo")
        .unwrap_or_else(|| panic!("re-pinned tool is listed: {}", report[0]));
    assert!(
        echo["description"]
            .as_str()
            .unwrap()
            .contains("ignore previous instructions")
    );
    assert!(ok_text(&report[1]).contains("re-pinned"));
}

/// The test upstream keeping its state in `state`, its `echo` and `fault` tools admitted.
fn echo_and_fault(state: &Path) -> Setup {
    let setup = Setup::new(&test_upstream("test", state, ""));
    setup.admit("test", "echo", &["--effect", "read_only"]);
    setup.admit("test", "fault", &["--effect", "read_only"]);
    setup
}

#[test]
fn upstream_faults_are_classified_and_the_gateway_keeps_serving() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let setup = echo_and_fault(state);
    // An upstream that cannot start, admitted with the same pin as the working one.
    let written = fs::read_to_string(&setup.config).unwrap();
    let parsed: toml::Value = toml::from_str(&written).unwrap();
    let echo = &parsed["upstream"][0]["tool"][0];
    let broken = format!(
        "\n[[upstream]]\nname = \"broken\"\ncommand = [{}, {}, {}, \"--fail-start\"]\nstartup_timeout_ms = 2000\n\n[upstream.sandbox]\nwrite = [{}]\n{}\n[[upstream.tool]]\ntool = \"echo\"\neffect = \"read_only\"\ndigest = {}\npinned = {}\n",
        quoted(&python()),
        quoted(&root().join("tests/upstream/test_upstream.py")),
        quoted(&state.join("broken")),
        quoted(state),
        repo_read(),
        toml_string(echo["digest"].as_str().unwrap()),
        toml_string(echo["pinned"].as_str().unwrap()),
    );
    fs::write(&setup.config, written + &broken).unwrap();
    fs::write(setup.ws().join("notes.txt"), "builtin tools still work\n").unwrap();

    let fault =
        |kind: &str| json!({"op": "call", "tool": "test__fault", "arguments": {"kind": kind}});
    let builtin = json!({"op": "call", "tool": "read_file", "arguments": {"path": "notes.txt"}});
    let echo =
        json!({"op": "call", "tool": "test__echo", "arguments": {"text": "back"}, "until_ok": 15});
    let mut steps = vec![json!({"op": "call", "tool": "broken__echo", "arguments": {"text": "x"}})];
    let kinds = ["hang", "freeze", "exit", "garbage", "wrong_id", "huge"];
    for kind in kinds {
        steps.extend([fault(kind), builtin.clone(), echo.clone()]);
    }
    // Results are redacted like builtin ones.
    steps.push(json!({"op": "call", "tool": "test__echo", "arguments": {"text": "key AKIAIOSFODNN7EXAMPLE here"}}));
    let started = Instant::now();
    let report = setup.session(Value::Array(steps));
    assert_eq!(failed(&report[0]), "upstream_unavailable");
    let message = report[0]["structured"]["error"]["message"]
        .as_str()
        .unwrap();
    assert!(
        message.contains("upstream `broken` is not running"),
        "{message}"
    );
    assert!(message.contains("start failed"), "{message}");
    let expected = [
        "upstream_timeout",
        "upstream_timeout",
        "upstream_unavailable",
        "upstream_protocol_error",
        "upstream_protocol_error",
        "output_too_large",
    ];
    for (i, (kind, code)) in kinds.iter().zip(expected).enumerate() {
        let result = &report[1 + 3 * i];
        assert_eq!(failed(result), code, "{kind}: {result}");
        // Every fault is in the outcome's evidence: what is unknown, and what happened to the
        // upstream.
        let unknowns = result["structured"]["unknowns"].as_array().unwrap();
        assert!(!unknowns.is_empty(), "{kind}: {result}");
        assert!(
            unknowns
                .iter()
                .any(|u| u.as_str().unwrap().starts_with("upstream `test`: ")),
            "{kind}: {result}"
        );
        let read = ok(&report[2 + 3 * i]);
        assert!(
            read["text"]
                .as_str()
                .unwrap()
                .contains("builtin tools still work"),
            "{kind}: {read}"
        );
        let back = ok(&report[3 + 3 * i]);
        assert!(
            back["text"].as_str().unwrap().contains("back"),
            "{kind}: {back}"
        );
    }
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "faults were slow to classify: {:?}",
        started.elapsed()
    );
    let redacted = ok_text(&report[1 + 3 * kinds.len()]);
    assert!(redacted.contains("key [REDACTED] here"), "{redacted}");
    assert!(!redacted.contains("AKIA"), "{redacted}");
    let crashed = &report[7]["structured"]["error"]["message"];
    assert!(
        crashed
            .as_str()
            .unwrap()
            .contains("exited (exit status: 3)"),
        "{crashed}"
    );

    // The upstream's process group ends with the gateway: its own children too.
    wait_until_the_upstream_is_gone(state);
}

/// `toolgate serve --no-console` over stdio on `setup`, its state under `home`, spoken to in raw
/// JSON-RPC lines: requests written as they come, answers read as they arrive.
fn raw_session(setup: &Setup, home: &Path) -> StdioServer {
    StdioServer::start(
        home::toolgate()
            .args(stdio_serve_args(&setup.ws(), &setup.config))
            .env("XDG_STATE_HOME", home),
    )
}

/// Sends `count` calls of `tool` that the upstream takes and never answers, and waits
/// until its call log in `state` holds them all: waiting, they hold no thread of the
/// server's.
fn hang_calls(session: &mut StdioServer, state: &Path, tool: &str, arguments: Value, count: usize) {
    let pid = session.child.id();
    let before = threads(pid);
    for i in 0..count {
        session.send(
            json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}),
        );
    }
    wait_until(
        "the calls reached the upstream",
        Duration::from_secs(15),
        || calls(state).len() == count,
    );
    let waiting = threads(pid);
    assert!(
        waiting < before + 10,
        "{count} calls waiting took {} threads more",
        waiting - before
    );
}

/// The answers to `count` calls, each ended by its timeout.
fn time_outs(session: &StdioServer, count: usize) {
    for _ in 0..count {
        let answer = session.answer();
        assert_eq!(
            answer["result"]["structuredContent"]["error"]["code"], "upstream_timeout",
            "{answer}"
        );
    }
}

/// The audit records of a toolgate whose state is under `home` (its `XDG_STATE_HOME`).
fn audit_records(setup: &Setup, home: &Path) -> Vec<Value> {
    let output = home::toolgate()
        .args(["audit", "export", "--jsonl", "--config"])
        .arg(&setup.config)
        .env("XDG_STATE_HOME", home)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The parameters of the `notifications/cancelled` the test upstream received.
fn cancellations(state: &Path) -> Vec<Value> {
    logged(state, "cancelled.log")
}

/// The outcome records of calls of `tool`.
fn outcomes<'a>(records: &'a [Value], tool: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["call"]["tool"] == tool && r["call"]["status"] != "started")
        .collect()
}

/// A read-only upstream call that nobody must approve waits for its answer on the session's
/// runtime rather than on a thread of its own. Given up — cancelled by the client, or timed out
/// after the client went away — it is still given up upstream (`notifications/cancelled` with
/// the id it was sent under) and still recorded.
#[test]
fn a_forwarded_call_given_up_is_cancelled_upstream_and_recorded() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let home = tempfile::tempdir().unwrap();
    let setup = echo_and_fault(state);
    let hang = json!({"kind": "hang"});

    // The client cancels the call; the session goes on.
    let steps = json!([
        {"op": "cancel", "tool": "test__fault", "arguments": hang, "after": 1.0},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "still here"}},
    ]);
    let args = stdio_serve_args(&setup.ws(), &setup.config);
    let plan = json!({"sessions": [{
        "transport": "stdio", "command": toolgate_bin(), "args": args, "steps": steps,
        "env": {"XDG_STATE_HOME": home.path().display().to_string()},
    }]});
    let report = drive(&plan)["sessions"][0]["steps"].clone();
    assert!(report[0]["completed"].is_null(), "{report}");
    assert!(ok_text(&report[1]).contains("still here"), "{report}");
    wait_until("the upstream was told", Duration::from_secs(10), || {
        !cancellations(state).is_empty()
    });
    let told = cancellations(state);
    let sent = calls(state);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(told.len(), 1, "{told:?}");
    // The id the call went out under is the progress token toolgate gave it.
    assert_eq!(
        told[0]["requestId"], sent[0]["_meta"]["progressToken"],
        "{told:?} {sent:?}"
    );
    let records = audit_records(&setup, home.path());
    let cancelled = outcomes(&records, "test__fault");
    assert_eq!(cancelled.len(), 1, "{records:?}");
    assert_eq!(
        cancelled[0]["call"]["error"]["code"], "cancelled",
        "{cancelled:?}"
    );

    // The client hangs up while a call is in flight. Closing the input does not cancel the
    // calls in flight: this one runs to its timeout, is given up upstream then, and is
    // recorded before toolgate exits.
    let mut session = raw_session(&setup, home.path());
    session.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "test__fault", "arguments": hang}}));
    wait_until(
        "the call reached the upstream",
        Duration::from_secs(15),
        || calls(state).len() == 3,
    );
    session.hang_up();
    let exited = Instant::now();
    let status = session.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(
        exited.elapsed() < Duration::from_secs(10),
        "{:?}",
        exited.elapsed()
    );
    let told = cancellations(state);
    assert_eq!(told.len(), 2, "{told:?}");
    assert_eq!(
        told[1]["requestId"],
        calls(state)[2]["_meta"]["progressToken"]
    );
    let records = audit_records(&setup, home.path());
    let given_up = outcomes(&records, "test__fault");
    assert_eq!(given_up.len(), 2, "{records:?}");
    assert_eq!(
        given_up[1]["call"]["error"]["code"], "upstream_timeout",
        "{given_up:?}"
    );
}

/// Calls in flight at once, each with its own text, short and long (over the 4,096 bytes a
/// pipe takes whole, and together more than the pipe holds), reach the upstream as whole lines,
/// whether a call wrote its line into the pipe itself or left it to the writer thread, and each
/// hears its own answer. A caller that wrote a long line in part would garble the stream.
#[test]
fn calls_in_flight_at_once_each_hear_their_own_answer() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let home = tempfile::tempdir().unwrap();
    let setup = echo_and_fault(state);
    setup.admit("test", "repeat", &["--effect", "read_only"]);
    let mut session = raw_session(&setup, home.path());
    let text = |i: usize| {
        let length = if i.is_multiple_of(3) {
            40_000 + i
        } else {
            10 + i
        };
        format!("{i}:{}", "x".repeat(length))
    };
    let count = 60;
    for i in 0..count {
        session.send(
            json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
            "params": {"name": "test__repeat", "arguments": {"text": text(i)}}}),
        );
    }
    let mut heard = std::collections::BTreeSet::new();
    for _ in 0..count {
        let answer = session.answer();
        let i = usize::try_from(answer["id"].as_u64().unwrap() - 100).unwrap();
        let result = &answer["result"];
        assert_eq!(result["isError"], false, "{answer}");
        let echoed = result["structuredContent"]["content"][0]["text"]
            .as_str()
            .or_else(|| result["content"][0]["text"].as_str())
            .unwrap_or_else(|| panic!("{answer}"));
        assert_eq!(echoed, text(i), "call {i}");
        heard.insert(i);
    }
    assert_eq!(heard.len(), count);
    assert_eq!(calls(state).len(), count);
}

/// The threads of process `pid`.
fn threads(pid: u32) -> usize {
    fs::read_dir(format!("/proc/{pid}/task")).unwrap().count()
}

/// The clock ticks `pid` spends in a window of 1.5 s, once it has gone quiet (at most one
/// tick in 300 ms) or `settle` has passed: a process that keeps working never goes quiet, and
/// its window shows it.
fn spent_in_a_quiet_window(pid: u32, settle: Duration) -> (u64, Duration) {
    let settle_by = Instant::now() + settle;
    loop {
        let ticks = cpu_ticks(pid);
        std::thread::sleep(Duration::from_millis(300));
        if cpu_ticks(pid) - ticks <= 1 || Instant::now() > settle_by {
            break;
        }
    }
    let (ticks, started) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_millis(1500));
    (cpu_ticks(pid) - ticks, started.elapsed())
}

/// Read-only calls forwarded to an upstream hold no thread while they wait for its answer,
/// and when it stops reading its input, the calls waiting to be written wait without
/// running: they are woken when the writer thread makes room, when cancelled, or at their
/// deadline, never on a timer. Either way a hundred of them cost the gateway nothing while
/// they wait, and each still ends by its timeout.
#[test]
fn forwarded_calls_that_wait_hold_no_thread_and_spend_no_cpu() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let home = tempfile::tempdir().unwrap();
    // The calls must still wait when the quiet window below closes, however long a busy
    // machine takes to send and queue them: with the other tests' 3 s timeout, the first of
    // them timed out inside the window (and spent CPU there) when that took 1.5 s or more.
    let toml = test_upstream("test", state, "")
        .replace("call_timeout_ms = 3000", "call_timeout_ms = 8000");
    let setup = Setup::new(&toml);
    setup.admit("test", "echo", &["--effect", "read_only"]);
    setup.admit("test", "fault", &["--effect", "read_only"]);
    let mut session = raw_session(&setup, home.path());
    let pid = session.child.id();

    // The upstream takes each call and never answers it.
    let hanging = 100;
    hang_calls(
        &mut session,
        state,
        "test__fault",
        json!({"kind": "hang"}),
        hanging,
    );
    time_outs(&session, hanging);

    // The upstream stops reading: the pipe fills, then the writer's queue, and the rest of
    // the calls wait for room.
    session.send(json!({"jsonrpc": "2.0", "id": 1000, "method": "tools/call",
        "params": {"name": "test__fault", "arguments": {"kind": "freeze"}}}));
    wait_until("the upstream froze", Duration::from_secs(15), || {
        calls(state).len() == hanging + 1
    });
    let padding = "p".repeat(20_000);
    let blocked = 600;
    for i in 0..blocked {
        session.send(
            json!({"jsonrpc": "2.0", "id": 2000 + i, "method": "tools/call",
            "params": {"name": "test__fault", "arguments": {"kind": "hang", "padding": padding}}}),
        );
    }
    // Reading and queueing 12 MB of calls takes a while on a busy machine (other tests run
    // beside this one); then the gateway must go quiet. One that keeps working on waiting
    // calls never does, and the window below fails it.
    let (spent, window) = spent_in_a_quiet_window(pid, Duration::from_secs(15));
    // Clock ticks are hundredths of a second: at most a twentieth of the window.
    assert!(
        spent <= 8,
        "{blocked} calls waiting for room spent {spent} ticks of CPU in {window:?}"
    );
    let mut ended = 0;
    while ended < blocked + 1 {
        let answer = session.answer();
        let code = &answer["result"]["structuredContent"]["error"]["code"];
        assert!(
            code == "upstream_timeout" || code == "upstream_unavailable",
            "{answer}"
        );
        ended += 1;
    }
}

/// Read-only calls forwarded to a `url` upstream hold no thread either: each waits as a task
/// on the one runtime of the upstream's HTTP client (not a runtime of its own on a blocking
/// thread), woken by the answer, its cancellation or its deadline, never on a timer. Forty of
/// them cost the gateway no thread and no CPU while they wait, and each ends by its timeout.
#[test]
fn calls_to_a_url_upstream_that_wait_hold_no_thread_and_spend_no_cpu() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let mut server = Command::new(python())
        .arg(root().join("tests/upstream/hanging_http.py"))
        .arg(state)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let announced = server.stdout.take().unwrap();
    let _server = Killed(server);
    let mut port = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(announced), &mut port).unwrap();
    let setup = Setup::new(&format!(
        "[[upstream]]\nname = \"hanging\"\nurl = \"http://127.0.0.1:{}/mcp\"\ncall_timeout_ms = 8000\n",
        port.trim()
    ));
    setup.admit("hanging", "wait", &["--effect", "read_only"]);
    let home = tempfile::tempdir().unwrap();
    let mut session = raw_session(&setup, home.path());
    let pid = session.child.id();

    let hanging = 40;
    hang_calls(&mut session, state, "hanging__wait", json!({}), hanging);
    let (spent, window) = spent_in_a_quiet_window(pid, Duration::from_secs(3));
    // Clock ticks are hundredths of a second: at most a twentieth of the window.
    assert!(
        spent <= 8,
        "{hanging} calls waiting for a url upstream spent {spent} ticks of CPU in {window:?}"
    );
    time_outs(&session, hanging);
}

/// A pid the test upstream wrote to `state/name`.
fn pid_in(state: &Path, name: &str) -> u32 {
    fs::read_to_string(state.join(name))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Waits until the test upstream and the child it started, as it wrote their pids to `state`,
/// are gone: the upstream's process group ends with it.
/// `toolgate serve` over `ws` with `config`, its input held open, once the test upstream it
/// starts has written its grandchild's pid to `state`.
fn serving(ws: &Path, config: &Path, state: &Path) -> std::process::Child {
    let serve = serve_stdio(ws, config)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the upstream started", Duration::from_secs(30), || {
        fs::read_to_string(state.join("grandchild")).is_ok_and(|pid| !pid.trim().is_empty())
    });
    serve
}

fn wait_until_the_upstream_is_gone(state: &Path) {
    let pids = [pid_in(state, "pid"), pid_in(state, "grandchild")];
    wait_until("the upstream is gone", Duration::from_secs(10), || {
        !pids.into_iter().any(running)
    });
}

#[test]
fn an_upstream_that_stops_reading_its_input_fails_calls_in_time_and_shutdown_completes() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let setup = echo_and_fault(state);
    // After `freeze` the upstream reads nothing more; arguments far larger than a pipe holds
    // cannot be written, and the call must still end by its timeout.
    let padding = "p".repeat(512 * 1024);
    let steps = json!([
        {"op": "call", "tool": "test__fault", "arguments": {"kind": "freeze"}},
        {"op": "call", "tool": "test__fault", "arguments": {"kind": "freeze", "padding": padding}},
        {"op": "call", "tool": "test__echo", "arguments": {"text": "back"}, "until_ok": 15},
    ]);
    let started = Instant::now();
    let report = setup.session(steps);
    assert_eq!(failed(&report[0]), "upstream_timeout", "{}", report[0]);
    let code = failed(&report[1]);
    assert!(
        code == "upstream_timeout" || code == "upstream_unavailable",
        "{}",
        report[1]
    );
    assert!(ok_text(&report[2]).contains("back"), "{}", report[2]);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "a blocked write held the gateway: {:?}",
        started.elapsed()
    );
    wait_until_the_upstream_is_gone(state);
}

#[test]
fn reference_servers_behind_the_gateway() {
    let files = tempfile::tempdir().unwrap();
    fs::write(
        files.path().join("hello.txt"),
        "hello from the filesystem server\n",
    )
    .unwrap();
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(repo.path())
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .status()
            .unwrap();
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    fs::write(repo.path().join("tracked.txt"), "one\n").unwrap();
    git(&["add", "tracked.txt"]);
    git(&["commit", "-q", "-m", "first"]);
    fs::write(repo.path().join("tracked.txt"), "two\n").unwrap();

    let modules = test_dep("node/node_modules/@modelcontextprotocol");
    // `python -m` imports from its working directory first, which may not be the workspace
    // (`tools discover` takes the current directory as one): the git server runs in its
    // repository.
    let toml = format!(
        "[[upstream]]\nname = \"fs\"\ncommand = [{node}, {fs}, {files}]\n\
         [upstream.sandbox]\nwrite = [{files}]\n{read}\n\
         [[upstream]]\nname = \"everything\"\ncommand = [{node}, {everything}]\n\
         [upstream.sandbox]\n{read}\n\
         [[upstream]]\nname = \"git\"\ncommand = [{python}, \"-m\", \"mcp_server_git\", \"--repository\", {repo}]\n\
         cwd = {repo}\n\
         [upstream.sandbox]\nread = [{repo}, {root}]\n",
        read = repo_read(),
        root = quoted(&root()),
        node = quoted(&node()),
        fs = quoted(&modules.join("server-filesystem/dist/index.js")),
        files = quoted(&files.path().canonicalize().unwrap()),
        everything = quoted(&modules.join("server-everything/dist/index.js")),
        python = quoted(&python()),
        repo = quoted(&repo.path().canonicalize().unwrap()),
    );
    let setup = Setup::new(&toml);
    let listing = setup.upstream_listing();
    let candidates: Vec<&str> = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["state"] == "candidate")
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for expected in [
        "fs__read_text_file",
        "fs__write_file",
        "everything__echo",
        "git__git_status",
    ] {
        assert!(candidates.contains(&expected), "{expected}: {candidates:?}");
    }
    setup.admit("fs", "read_text_file", &["--effect", "read_only"]);
    setup.admit("everything", "echo", &["--effect", "read_only"]);
    setup.admit("git", "git_status", &["--effect", "read_only"]);

    let hello = files.path().canonicalize().unwrap().join("hello.txt");
    let repo_path = repo.path().canonicalize().unwrap();
    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "fs__read_text_file", "arguments": {"path": hello}},
        {"op": "call", "tool": "fs__read_text_file", "arguments": {"path": 5}},
        {"op": "call", "tool": "fs__write_file", "arguments": {"path": hello, "content": "x"}},
        {"op": "call", "tool": "everything__echo", "arguments": {"message": "through the gate"}},
        {"op": "call", "tool": "git__git_status", "arguments": {"repo_path": repo_path}},
    ]));
    let listed = names(&report[0]);
    for admitted in ["fs__read_text_file", "everything__echo", "git__git_status"] {
        assert!(
            listed.contains(&admitted.to_owned()),
            "{admitted}: {listed:?}"
        );
    }
    assert!(!listed.iter().any(|n| n == "fs__write_file"), "{listed:?}");
    assert!(
        ok_text(&report[1]).contains("hello from the filesystem server"),
        "{}",
        report[1]
    );
    assert_eq!(rejected(&report[2]), "invalid_type");
    assert_eq!(rejected(&report[3]), "unknown_tool");
    assert!(
        ok_text(&report[4]).contains("through the gate"),
        "{}",
        report[4]
    );
    assert!(ok_text(&report[5]).contains("tracked.txt"), "{}", report[5]);
    assert_eq!(
        fs::read_to_string(&hello).unwrap(),
        "hello from the filesystem server\n"
    );
}

/// The message of a refused call, naming each field error.
fn refusal(result: &Value) -> &str {
    result["structured"]["rejection"]["message"]
        .as_str()
        .unwrap_or_default()
}

/// A server written with the official TypeScript SDK declares every schema draft-07 and writes
/// a tuple as an array of `items`: admitted as it is, its calls are checked by draft-07's
/// rules, place by place, and extra arguments are still refused.
#[test]
fn schemas_of_the_typescript_sdk_are_read_as_the_draft_they_declare() {
    let toml = format!(
        "[[upstream]]\nname = \"shapes\"\ncommand = [{node}, {server}, {modules}]\n\
         [upstream.sandbox]\n{read}",
        node = quoted(&node()),
        server = quoted(&root().join("tests/upstream/ts_sdk_server.mjs")),
        modules = quoted(&test_dep("node/node_modules")),
        read = repo_read(),
    );
    let setup = Setup::new(&toml);
    let listing = setup.upstream_listing();
    let plot = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "shapes__plot")
        .unwrap_or_else(|| panic!("{listing}"));
    assert_eq!(plot["state"], "candidate", "{plot}");
    setup.admit("shapes", "plot", &["--effect", "read_only"]);
    setup.admit("shapes", "schedule", &["--effect", "read_only"]);

    let report = setup.session(json!([
        {"op": "list"},
        {"op": "call", "tool": "shapes__plot", "arguments": {"point": [1, 2.5], "label": "a", "style": {"size": 3}, "tags": {"k": "v"}}},
        {"op": "call", "tool": "shapes__plot", "arguments": {"point": [1, "2"]}},
        {"op": "call", "tool": "shapes__plot", "arguments": {"point": [1, 2, 3]}},
        {"op": "call", "tool": "shapes__plot", "arguments": {"point": [1, 2], "colour": "red"}},
        {"op": "call", "tool": "shapes__plot", "arguments": {"point": [1, 2], "style": "square", "tags": {"k": 1}}},
        {"op": "call", "tool": "shapes__schedule", "arguments": {"when": {"day": "tue", "hour": 9}, "attendees": ["ana"], "every": "P1W"}},
        {"op": "call", "tool": "shapes__schedule", "arguments": {"when": {"day": "sun", "hour": 20, "room": 4}, "attendees": [], "every": "P"}},
    ]));
    let listed = names(&report[0]);
    assert!(listed.contains(&"shapes__plot".to_owned()), "{listed:?}");
    let forwarded: Value = serde_json::from_str(ok_text(&report[1])).unwrap();
    assert_eq!(forwarded["point"], json!([1, 2.5]), "{forwarded}");
    assert_eq!(rejected(&report[2]), "invalid_type");
    assert!(
        refusal(&report[2]).starts_with("`/point/1`: "),
        "{}",
        report[2]
    );
    assert_eq!(rejected(&report[3]), "constraint_violation");
    assert!(
        refusal(&report[3]).contains("Additional items are not allowed"),
        "{}",
        report[3]
    );
    assert_eq!(rejected(&report[4]), "unknown_argument");
    assert!(
        refusal(&report[4]).contains("unknown argument `colour`"),
        "{}",
        report[4]
    );
    for place in ["`style`", "`/tags/k`"] {
        assert!(
            refusal(&report[5]).contains(place),
            "{place}: {}",
            report[5]
        );
    }
    let booked: Value = serde_json::from_str(ok_text(&report[6])).unwrap();
    assert_eq!(booked["when"]["day"], "tue", "{booked}");
    for place in [
        "`attendees`",
        "`every`",
        "`/when/day`",
        "`/when/hour`",
        "`room`",
    ] {
        assert!(
            refusal(&report[7]).contains(place),
            "{place}: {}",
            report[7]
        );
    }
}

/// `toolgate serve --http` on a free loopback port, without tokens (the conformance suite
/// sends none).
fn http_server(setup: &Setup) -> HttpServer {
    HttpServer::spawn(serve_http(&setup.ws(), &setup.config).arg("--dangerous-no-auth"))
}

/// The MCP conformance suite against `toolgate serve --http` in front of an upstream that
/// offers the suite's fixture tools, each admitted under the name the suite calls. Scenarios
/// expected to fail are listed, with a reason each, in `tests/upstream/conformance-baseline.txt`;
/// every other scenario must pass, and a listed one that passes fails the run.
#[test]
fn upstream_conformance_suite() {
    let toml = format!(
        "[[upstream]]\nname = \"conformance\"\ncommand = [{}, {}]\n[upstream.sandbox]\n{}",
        quoted(&python()),
        quoted(&root().join("tests/upstream/conformance_upstream.py")),
        repo_read(),
    );
    let setup = Setup::new(&toml);
    for tool in [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_error_handling",
        "json_schema_2020_12_tool",
        "test_tool_with_logging",
        "test_tool_with_progress",
    ] {
        setup.admit(
            "conformance",
            tool,
            &["--effect", "read_only", "--name", tool],
        );
    }
    let server = http_server(&setup);
    conformance(
        &server.url(),
        &root().join("tests/upstream/conformance-baseline.txt"),
        &[
            "server-initialize",
            "tools-list",
            "tools-call-simple-text",
            "tools-call-error",
            "json-schema-2020-12",
            "tools-call-image",
            "tools-call-audio",
            "tools-call-embedded-resource",
            "tools-call-mixed-content",
            "tools-call-with-logging",
            "tools-call-with-progress",
        ],
    );
}

/// A streamable-HTTP upstream: `server-everything` in its HTTP mode, reached by URL, with a
/// header whose value comes from an environment variable.
#[test]
fn http_upstream_behind_the_gateway() {
    let (_everything, port) = everything_over_http();
    let toml = format!(
        "[[upstream]]\nname = \"everything\"\nurl = \"http://127.0.0.1:{port}/mcp\"\nheaders = {{ X-Upstream-Token = \"UPSTREAM_TOKEN\" }}\n"
    );
    let setup = Setup::new(&toml);
    // The header's variable must be set, or the configuration does not load.
    let output = setup.toolgate(&["tools", "list", "--candidates", "--json"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("`UPSTREAM_TOKEN`"),
        "{output:?}"
    );
    let with_token = |args: &[&str]| {
        home::toolgate()
            .args(args)
            .arg("--config")
            .arg(&setup.config)
            .env("UPSTREAM_TOKEN", "not-a-real-token")
            .output()
            .unwrap()
    };
    let output = with_token(&[
        "tools",
        "admit",
        "everything",
        "echo",
        "--effect",
        "read_only",
    ]);
    assert!(output.status.success(), "{output:?}");
    let args = stdio_serve_args(&setup.ws(), &setup.config);
    let plan = json!({"sessions": [{
        "transport": "stdio", "command": toolgate_bin(), "args": args,
        "env": {"UPSTREAM_TOKEN": "not-a-real-token", "PATH": std::env::var("PATH").unwrap()},
        "steps": [
            {"op": "list"},
            {"op": "call", "tool": "everything__echo", "arguments": {"message": "over http"}},
            {"op": "call", "tool": "everything__echo", "arguments": {"message": 5}},
        ],
    }]});
    let report = drive(&plan)["sessions"][0]["steps"].clone();
    assert!(names(&report[0]).contains(&"everything__echo".to_owned()));
    assert!(
        ok_text(&report[1]).contains("Echo: over http"),
        "{}",
        report[1]
    );
    assert_eq!(rejected(&report[2]), "invalid_type");
}

/// `server-everything` serving streamable HTTP on a free port of 127.0.0.1, until dropped.
fn everything_over_http() -> (Killed, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let everything = Killed(
        Command::new(node())
            .arg(test_dep(
                "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
            ))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_until("server-everything listens", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (everything, port)
}

/// `openssl` with `args`, which must succeed.
fn openssl(args: &[&str], dir: &Path) {
    let made = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl (scripts/test-deps installs it)");
    assert!(made.status.success(), "openssl {args:?}: {made:?}");
}

#[test]
fn https_upstream_checked_against_its_certificate() {
    let (_everything, plain_port) = everything_over_http();
    // A private CA, and a certificate it signs for localhost.
    let certs = tempfile::tempdir().unwrap();
    let key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    let run = |line: &str| openssl(&line.split(' ').collect::<Vec<_>>(), certs.path());
    run(&format!(
        "req -x509 {key} -days 1 -subj /CN=test-CA -keyout ca.key -out ca.pem"
    ));
    run(&format!(
        "req {key} -subj /CN=localhost -keyout key.pem -out leaf.csr"
    ));
    fs::write(
        certs.path().join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    run(
        "x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile leaf.ext -out cert.pem",
    );
    let mut proxy = Command::new(python())
        .arg(root().join("tests/upstream/tls_proxy.py"))
        .arg(certs.path().join("cert.pem"))
        .arg(certs.path().join("key.pem"))
        .arg(plain_port.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let proxy_out = proxy.stdout.take().unwrap();
    let _proxy = Killed(proxy);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(proxy_out), &mut line).unwrap();
    let port: u16 = line.trim().parse().unwrap();
    let cert = certs.path().join("ca.pem");
    let upstream = |extra: &str| {
        format!(
            "[[upstream]]\nname = \"secure\"\nurl = \"https://localhost:{port}/mcp\"\nstartup_timeout_ms = 5000\n{extra}"
        )
    };

    // A certificate nobody vouches for: no session, no tools.
    let untrusted = Setup::new(&upstream(""));
    let output = untrusted.toolgate(&["tools", "admit", "secure", "echo"]);
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("TLS handshake failed"), "{stderr}");
    assert!(stderr.contains("certificate"), "{stderr}");

    // The configuration's CA vouches for it.
    let setup = Setup::new(&upstream(&format!("ca_file = {}\n", quoted(&cert))));
    setup.admit("secure", "echo", &["--effect", "read_only"]);
    let report = setup.session(json!([
        {"op": "call", "tool": "secure__echo", "arguments": {"message": "over tls"}},
    ]));
    assert!(
        ok_text(&report[0]).contains("Echo: over tls"),
        "{}",
        report[0]
    );
}

#[test]
fn upstreams_and_their_children_die_with_a_gateway_that_is_killed() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = state_dir.path();
    let setup = Setup::new(&test_upstream("test", state, ""));
    let mut serve = serving(&setup.ws(), &setup.config, state);
    assert!(running(pid_in(state, "pid")) && running(pid_in(state, "grandchild")));
    // No shutdown of its own: the gateway is gone at once.
    serve.kill().unwrap();
    serve.wait().unwrap();
    wait_until_the_upstream_is_gone(state);
}

/// An upstream whose script lies in the workspace outside `.toolgate/` (named absolutely,
/// relative to a working directory there, through a link) or whose Python imports from a
/// working directory there is refused by `check` and `serve`, naming the upstream, the file
/// and the fix, and nothing of it runs: an approved command could rewrite the script, and the
/// next start would run it with the upstream's environment and grants. The same script
/// outside the workspace or in `.toolgate/` starts.
#[test]
fn an_upstream_script_in_the_workspace_is_refused_at_start() {
    // Under the repository, which the confined upstream may read (not /tmp).
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let base = base.path().canonicalize().unwrap();
    let (ws, out) = (base.join("ws"), base.join("out"));
    let server = root().join("tests/upstream/test_upstream.py");
    for dir in [ws.join(".toolgate"), out.clone()] {
        fs::create_dir_all(&dir).unwrap();
    }
    for script in [ws.join("server.py"), ws.join(".toolgate/server.py")] {
        fs::copy(&server, script).unwrap();
    }
    fs::copy(&server, out.join("server.py")).unwrap();
    std::os::unix::fs::symlink(ws.join("server.py"), out.join("link.py")).unwrap();
    let w = ws.display().to_string();
    let inside = format!("`{w}/server.py` is inside the workspace `{w}`");
    // (the upstream's `cwd` and command after the interpreter, what the refusal says)
    let rows: Vec<(&str, Vec<String>, Option<String>)> = vec![
        ("", vec![format!("{w}/server.py")], Some(inside.clone())),
        (
            "ws",
            vec!["server.py".to_owned()],
            Some(format!(
                "{inside}: a command or write approved there could change it, and toolgate would \
                 run the new bytes as this upstream, with its environment, hosts and grants, when \
                 next started; move it outside the workspace or into `{w}/.toolgate/`, or set the \
                 upstream's `cwd` outside the workspace (it is found from `{w}`)"
            )),
        ),
        (
            "",
            vec![out.join("link.py").display().to_string()],
            Some(format!(
                "`{}` leads to `{w}/server.py`, inside",
                out.join("link.py").display()
            )),
        ),
        (
            "ws",
            vec!["-m".to_owned(), "server".to_owned()],
            Some(format!(
                " -m` runs in `{w}`, in the workspace `{w}`: Python imports modules from its \
                 working directory first"
            )),
        ),
        ("", vec![format!("{w}/.toolgate/server.py")], None),
        ("ws", vec![".toolgate/server.py".to_owned()], None),
        ("out", vec!["server.py".to_owned()], None),
    ];
    for (n, (cwd, args, refused)) in rows.into_iter().enumerate() {
        let state = base.join(format!("state-{n}"));
        fs::create_dir(&state).unwrap();
        let mut command = vec![quoted(&python())];
        command.extend(args.iter().map(|a| toml_string(a)));
        command.push(quoted(&state));
        let cwd = if cwd.is_empty() {
            String::new()
        } else {
            format!("cwd = {}\n", toml_string(cwd))
        };
        let config = base.join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"t\"\ncommand = [{}]\n{cwd}\n[upstream.sandbox]\nwrite = [{}]\n{}",
                command.join(", "),
                quoted(&state),
                repo_read(),
            ),
        )
        .unwrap();
        let check = home::toolgate()
            .args(["check", "--workspace"])
            .arg(&ws)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&check.stderr).into_owned();
        let Some(refused) = refused else {
            assert!(check.status.success(), "{args:?}: {check:?}");
            let mut serve = serving(&ws, &config, &state);
            drop(serve.stdin.take());
            serve.wait().unwrap();
            wait_until_the_upstream_is_gone(&state);
            continue;
        };
        assert_eq!(check.status.code(), Some(3), "{args:?}: {check:?}");
        let at = format!("{}:1: upstream `t`: ", config.display());
        assert!(
            said.contains(&at) && said.contains(&refused),
            "{args:?}: {said}"
        );
        let serve = serve_stdio(&ws, &config)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&serve.stderr);
        assert_eq!(serve.status.code(), Some(3), "{args:?}: {serve:?}");
        assert!(said.contains(&refused), "{args:?}: {said}");
        assert!(!state.join("pid").exists(), "{args:?}: the upstream ran");
        // `tools discover` and `tools admit` serve no workspace: run from the directory that
        // holds the script (as from a `$HOME` holding nvm's node), they start the upstream.
        for tools in [&["discover"][..], &["admit", "t", "echo"]] {
            let listed = home::toolgate()
                .current_dir(&ws)
                .arg("tools")
                .args(tools)
                .arg("--config")
                .arg(&config)
                .output()
                .unwrap();
            assert!(listed.status.success(), "{tools:?} {args:?}: {listed:?}");
            assert!(
                String::from_utf8_lossy(&listed.stdout).contains("echo"),
                "{tools:?} {args:?}: {listed:?}"
            );
            wait_until_the_upstream_is_gone(&state);
        }
    }
}
