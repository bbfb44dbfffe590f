//! Claude Code, a real agent client (from npm, pinned), in print mode against `toolgate serve`
//! over stdio, with a scripted model in the model's place: what the model is offered and what
//! it gets back is what Claude Code really sends, not what an SDK test client would.
//!
//! Every test also checks the JSON-RPC wire between the two (`tests/clients/wire_tap.py`):
//! no error crosses it.
//!
//! Claude Code is installed by `scripts/test-deps` into `target/test-deps/node/`; a missing
//! one fails the test with a message saying so. Each run is bounded by
//! [`claude::RUN_LIMIT`].

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use claude::*;
use clients::*;
use fixture::Fixture;
use support::{claude, clients, fixture};

const PREFIX: &str = "mcp__toolgate__";

fn tool_use(name: &str, input: Value) -> Value {
    json!({"tool_use": {"name": format!("{PREFIX}{name}"), "input": input}})
}

/// The tool names toolgate listed in its answers to `tools/list`, in order of answer.
fn listed_by_toolgate(setup: &ClaudeSetup) -> Vec<Vec<String>> {
    listings(setup)
        .iter()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .collect()
}

/// The tools toolgate listed in its answers to `tools/list`, in order of answer.
fn listings(setup: &ClaudeSetup) -> Vec<Vec<Value>> {
    let wire = setup.wire();
    let list_ids: Vec<Value> = wire
        .iter()
        .filter(|l| l.from == "client")
        .filter_map(|l| l.json())
        .filter(|m| m["method"] == "tools/list")
        .map(|m| m["id"].clone())
        .collect();
    wire.iter()
        .filter(|l| l.from == "server")
        .filter_map(|l| l.json())
        .filter(|m| list_ids.contains(&m["id"]) && m["result"]["tools"].is_array())
        .map(|m| m["result"]["tools"].as_array().unwrap().clone())
        .collect()
}

/// The offered tools that are toolgate's, without the prefix, sorted.
fn toolgate_tools(request: &Value) -> Vec<String> {
    let mut names: Vec<String> = offered(request)
        .iter()
        .filter_map(|n| n.strip_prefix(PREFIX))
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// The file text a successful `read_file` gave the model: the result's text, or the
/// `content` of the JSON object it holds.
fn file_text(result: &ToolResult) -> String {
    match serde_json::from_str::<Value>(&result.text) {
        Ok(Value::Object(fields)) => fields["content"].as_str().unwrap().to_owned(),
        _ => result.text.clone(),
    }
}

/// Checks that every line on the wire between Claude Code and toolgate was JSON-RPC 2.0 and
/// that none was an error: whatever the client asks of toolgate (discovery, the 2026-07-28
/// subscription, listings, calls refused or not), toolgate answers it.
fn assert_no_json_rpc_error(setup: &ClaudeSetup) {
    let wire = setup.wire();
    assert!(
        wire.iter().any(|l| l.from == "client"),
        "nothing crossed the wire"
    );
    let mut errors = Vec::new();
    for line in &wire {
        let message = line
            .json()
            .unwrap_or_else(|| panic!("not JSON on the wire: {line:?}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line:?}");
        if message.get("error").is_some() {
            // The request it answers, for the message.
            let request = wire
                .iter()
                .filter(|l| l.from != line.from)
                .filter_map(|l| l.json())
                .find(|m| m["id"] == message["id"] && m.get("method").is_some());
            errors.push(format!(
                "{} answered {} with {}",
                line.from,
                request.map(|r| r["method"].to_string()).unwrap_or_default(),
                message["error"]
            ));
        }
    }
    assert!(
        errors.is_empty(),
        "JSON-RPC errors on the wire: {errors:#?}"
    );
}

/// Checks that Claude Code ended well and had toolgate connected.
fn finished_ok(run: &Finished, model: &ScriptedModel) {
    assert!(
        run.status.success(),
        "claude failed: {}\nstdout: {}\nstderr: {}\nrequests: {:?}",
        run.status,
        run.stdout,
        run.stderr,
        model.requests()
    );
    assert_eq!(run.toolgate_status(), "connected", "{}", run.stdout);
}

#[test]
fn claude_code_is_offered_toolgate_s_tools_reads_and_gets_refusals_as_tool_errors() {
    let fx = Fixture::new();
    let setup = ClaudeSetup::new(&fx.workspace(), "");
    let model = ScriptedModel::start(
        setup.dir.path(),
        &json!({"turns": [
            tool_use("read_file", json!({"path": "a.txt"})),
            tool_use("read_file", json!({"path": "../../etc/passwd"})),
            tool_use("read_file", json!({"pth": "a.txt"})),
            {"text": "All done."},
        ]}),
    );
    let run = setup.start(&model, &["read_file"]).finish();
    finished_ok(&run, &model);

    let conversation = model.conversation();
    assert_eq!(conversation.len(), 4, "{conversation:?}");
    // The model is offered exactly the tools toolgate listed, and of Claude Code's own
    // (`--tools ""`) none that touches the machine: only its placeholder for tools it would
    // load on demand.
    let mut listed = listed_by_toolgate(&setup)
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("toolgate never answered tools/list: {:?}", setup.wire()));
    listed.sort();
    for tool in ["read_file", "write_file", "edit_file"] {
        assert!(listed.contains(&tool.to_owned()), "{listed:?}");
    }
    assert_eq!(toolgate_tools(&conversation[0]), listed);
    let others: Vec<String> = offered(&conversation[0])
        .into_iter()
        .filter(|n| !n.starts_with(PREFIX))
        .collect();
    assert!(
        others.iter().all(|n| n == "DeferredToolPlaceholder"),
        "{others:?}"
    );

    // toolgate's instructions reach the model too.
    let instructions = setup
        .wire()
        .iter()
        .filter(|l| l.from == "server")
        .filter_map(|l| l.json())
        .find_map(|m| m["result"]["instructions"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("toolgate gave no instructions: {:?}", setup.wire()));
    let first_sentence = instructions.split(". ").next().unwrap();
    assert!(
        conversation[0].to_string().contains(first_sentence),
        "`{first_sentence}` is not in the model's first request"
    );

    let last = &conversation[3];
    let read = result_of(last, 0);
    assert!(!read.is_error, "{read:?}");
    assert_eq!(file_text(&read), "alpha\nbeta\ngamma\n", "{read:?}");

    let traversal = result_of(last, 1);
    assert!(
        traversal.is_error,
        "a traversal is a tool error: {traversal:?}"
    );
    assert!(!traversal.text.contains("root:"), "{traversal:?}");
    assert!(
        traversal.text.contains("path_outside_workspace")
            && traversal.text.contains("`../../etc/passwd`"),
        "toolgate's rejection reaches the model: {traversal:?}"
    );

    let misspelt = result_of(last, 2);
    assert!(
        misspelt.is_error,
        "a misspelt argument is a tool error: {misspelt:?}"
    );
    assert!(
        misspelt.text.contains("unknown_argument")
            && misspelt.text.contains("`pth`")
            && misspelt.text.contains("`path`"),
        "toolgate's rejection names the argument and the one it expects: {misspelt:?}"
    );
    // Neither refusal ran anything.
    assert!(!fx.dir.path().join("ws/pth").exists());
    assert_no_json_rpc_error(&setup);
}

#[test]
fn claude_code_s_writes_wait_for_a_person_in_the_console() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let setup = ClaudeSetup::new(&ws, "");
    let model = ScriptedModel::start(
        setup.dir.path(),
        &json!({"turns": [
            tool_use("write_file", json!({"path": "new.txt", "content": "written by the model\n"})),
            tool_use("write_file", json!({"path": "other.txt", "content": "refused\n"})),
            {"text": "Done."},
        ]}),
    );
    let mut run = setup.start(&model, &["write_file"]);
    let console = run.console();
    let pending = console.pending(1);
    assert_eq!(pending[0]["tool"], "write_file", "{pending:?}");
    assert!(
        !ws.join("new.txt").exists(),
        "nothing is written before the decision"
    );
    assert_eq!(
        model.conversation().len(),
        1,
        "the model has no result while the call waits"
    );
    let first = pending[0]["id"].as_str().unwrap().to_owned();
    let decided = console.decide(&first, r#"{"decision":"allow_once"}"#);
    assert_eq!(decided.status, 204, "{}", decided.body);

    // The second write waits in its turn, and the person refuses it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let second = loop {
        let pending = console.get_json("/api/pending");
        if let Some(id) = pending
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["id"].as_str())
            .find(|id| *id != first)
        {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "no second request: {pending}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let decided = console.decide(&second, r#"{"decision":"reject"}"#);
    assert_eq!(decided.status, 204, "{}", decided.body);
    let run = run.finish();
    finished_ok(&run, &model);

    assert_eq!(
        fs::read_to_string(ws.join("new.txt")).unwrap(),
        "written by the model\n"
    );
    assert!(!ws.join("other.txt").exists());
    let conversation = model.conversation();
    assert_eq!(conversation.len(), 3, "{conversation:?}");
    let written = result_of(&conversation[2], 0);
    assert!(!written.is_error, "{written:?}");
    let refused = result_of(&conversation[2], 1);
    assert!(
        refused.is_error,
        "a person's refusal is a tool error: {refused:?}"
    );
    assert!(refused.text.contains("approval_denied"), "{refused:?}");
    assert_no_json_rpc_error(&setup);
}

/// The `[[upstream]]` of `tests/upstream/test_upstream.py`, keeping its state in `state`,
/// which its sandbox lets it write.
fn test_upstream(state: &Path) -> String {
    let quoted = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
    format!(
        "[[upstream]]\nname = \"test\"\ncommand = [{}, {}, {}]\ncall_timeout_ms = 3000\n\
         refresh_secs = 0\n[upstream.sandbox]\nwrite = [{}]\n{}",
        quoted(&python()),
        quoted(&root().join("tests/upstream/test_upstream.py")),
        quoted(state),
        quoted(state),
        repo_read(),
    )
}

#[test]
fn claude_code_hears_that_toolgate_s_tools_changed() {
    let fx = Fixture::new();
    let upstream_state = tempfile::tempdir().unwrap();
    let setup = ClaudeSetup::new(&fx.workspace(), &test_upstream(upstream_state.path()));
    let admit = setup.toolgate(&["tools", "admit", "test", "echo", "--effect", "read_only"]);
    assert!(admit.status.success(), "{admit:?}");
    // The model calls the upstream's `echo`; on its result the upstream changes `echo`'s
    // description (SIGUSR1), which quarantines it, so toolgate's list changes. The next answer
    // is held until Claude Code has listed toolgate's tools again after the notification, and
    // then calls `echo` once more.
    let model = ScriptedModel::start(
        setup.dir.path(),
        &json!({"turns": [
            tool_use("test__echo", json!({"text": "before"})),
            {
                "signal": {"pidfile": upstream_state.path().join("pid"), "signal": "SIGUSR1"},
                "wait_for": {
                    "file": setup.wire_log(),
                    "after": "notifications/tools/list_changed",
                    "contains": "\\\"tools\\\":[",
                    "timeout": 20,
                },
                "tool_use": {"name": format!("{PREFIX}test__echo"), "input": {"text": "after"}},
            },
            {"text": "All done."},
        ]}),
    );
    let run = setup.start(&model, &["test__echo"]).finish();
    finished_ok(&run, &model);

    let wire = setup.wire();
    assert!(
        wire.iter()
            .any(|l| l.from == "server" && l.line.contains("notifications/tools/list_changed")),
        "toolgate sent no list_changed to Claude Code: {wire:?}"
    );
    let listings = listed_by_toolgate(&setup);
    assert!(
        listings.len() >= 2,
        "Claude Code did not list toolgate's tools again after list_changed: {wire:?}"
    );
    assert!(
        !listings.last().unwrap().contains(&"test__echo".to_owned()),
        "{listings:?}"
    );
    let conversation = model.conversation();
    assert_eq!(conversation.len(), 3, "{conversation:?}");
    assert!(
        toolgate_tools(&conversation[0]).contains(&"test__echo".to_owned()),
        "{:?}",
        offered(&conversation[0])
    );
    let echoed = result_of(&conversation[1], 0);
    assert!(
        !echoed.is_error && echoed.text.contains("before"),
        "{echoed:?}"
    );
    // Claude Code 2.1.332 keeps offering the model the tools its session began with (it
    // lists again, but does not pass the new list on), so the model can still ask for the
    // quarantined tool: toolgate refuses it, as the session's listing no longer holds it.
    let refused = result_of(&conversation[2], 1);
    assert!(refused.is_error, "{refused:?}");
    assert!(refused.text.contains("test__echo"), "{refused:?}");
    let received: Vec<String> = fs::read_to_string(upstream_state.path().join("calls.log"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["arguments"]["text"].to_string())
        .collect();
    assert_eq!(received, ["\"before\""]);
    assert_no_json_rpc_error(&setup);
}

/// `@modelcontextprotocol/server-filesystem` declares its schemas draft-07, output schemas
/// included: through toolgate, Claude Code reads with it, its results checked against the
/// pinned draft-07 output schema, and a call its input schema refuses never reaches it.
#[test]
fn claude_code_reads_through_an_upstream_whose_schemas_are_draft_07() {
    let fx = Fixture::new();
    let files = fx.workspace().canonicalize().unwrap();
    let quoted = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
    let toml = format!(
        "[[upstream]]\nname = \"fs\"\ncommand = [{node}, {fs}, {files}]\nrefresh_secs = 0\n\
         [upstream.sandbox]\nread = [{root}, {files}]\n",
        node = quoted(&node()),
        fs = quoted(&node_package(
            "@modelcontextprotocol/server-filesystem/dist/index.js"
        )),
        files = quoted(&files),
        root = quoted(&root()),
    );
    let setup = ClaudeSetup::new(&fx.workspace(), &toml);
    let admitted = setup.toolgate(&[
        "tools",
        "admit",
        "fs",
        "read_text_file",
        "--effect",
        "read_only",
    ]);
    assert!(admitted.status.success(), "{admitted:?}");
    let path = files.join("a.txt");
    let model = ScriptedModel::start(
        setup.dir.path(),
        &json!({"turns": [
            tool_use("fs__read_text_file", json!({"path": path})),
            tool_use("fs__read_text_file", json!({"path": path, "lines": 2})),
            {"text": "All done."},
        ]}),
    );
    let run = setup.start(&model, &["fs__read_text_file"]).finish();
    finished_ok(&run, &model);
    let conversation = model.conversation();
    assert_eq!(conversation.len(), 3, "{conversation:?}");
    let read = result_of(&conversation[2], 0);
    assert!(!read.is_error, "{read:?}");
    assert_eq!(file_text(&read), "alpha\nbeta\ngamma\n", "{read:?}");
    let refused = result_of(&conversation[2], 1);
    assert!(
        refused.is_error
            && refused.text.contains("unknown_argument")
            && refused.text.contains("`lines`"),
        "{refused:?}"
    );
    // The upstream's own listing declared draft-07; the refusal is toolgate's, by that draft.
    let listed = listings(&setup)
        .into_iter()
        .flatten()
        .find(|t| t["name"] == "fs__read_text_file")
        .unwrap_or_else(|| panic!("fs__read_text_file was not listed: {:?}", setup.wire()));
    assert_eq!(
        listed["outputSchema"]["$schema"], "http://json-schema.org/draft-07/schema#",
        "{listed}"
    );
    assert_no_json_rpc_error(&setup);
}
