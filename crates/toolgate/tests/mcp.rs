//! `toolgate serve` driven by real MCP clients: the official Python SDK (over stdio and
//! streamable HTTP), the MCP Inspector's CLI, the MCP conformance suite, raw JSON-RPC lines
//! and raw HTTP requests.
//!
//! The clients are installed by `scripts/test-deps` into `target/test-deps/` (a Python venv
//! with `mcp`, and npm packages with Node 22). A missing client fails the test with a message
//! saying so; nothing is skipped.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::*;
use fixture::{Fixture, corpus};
use support::{clients, fixture, home};

const TOKEN_ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
const TOKEN_BOB: &str = "bob-0123456789abcdef0123456789abcdef00";

/// A configuration file beside the fixture's workspace; its policy file too, if any.
fn write_config(fx: &Fixture, name: &str, toml: &str, cedar: Option<&str>) -> PathBuf {
    let path = fx.dir.path().join(format!("{name}.toml"));
    fs::write(&path, toml).unwrap();
    if let Some(cedar) = cedar {
        fs::write(fx.dir.path().join(format!("{name}.cedar")), cedar).unwrap();
    }
    path
}

/// The tools `toolgate tools list` says a profile sees.
fn visible(config: &Path, profile: &str) -> Vec<String> {
    let output = home::toolgate()
        .args(["tools", "list", "--json", "--profile", profile, "--config"])
        .arg(config)
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

fn stdio_session(ws: &Path, config: &Path, extra: &[&str], steps: Value) -> Value {
    let mut args = stdio_serve_args(ws, config);
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    json!({"transport": "stdio", "command": toolgate_bin(), "args": args, "steps": steps})
}

fn code(result: &Value) -> &str {
    result["structured"]["rejection"]["code"]
        .as_str()
        .unwrap_or_default()
}

#[test]
fn sdk_over_stdio_lists_and_calls_every_builtin() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    // A project script for `run_script` to find.
    fs::write(ws.join("Makefile"), "test:\n\ttrue\n").unwrap();
    let config = write_config(&fx, "plain", "", None);
    let expected = visible(&config, "default");
    for tool in ["read_file", "list_dir", "search_text"] {
        assert!(expected.iter().any(|n| n == tool), "{expected:?}");
    }
    // One call per builtin: the read-only ones run; the ones that change things or run
    // commands need a person, who is never there in a headless server.
    let arguments: BTreeMap<&str, Value> = BTreeMap::from([
        ("read_file", json!({"path": "a.txt"})),
        ("list_dir", json!({})),
        ("search_text", json!({"pattern": "beta"})),
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("write_file", json!({"path": "new.txt", "content": "x\n"})),
        (
            "edit_file",
            json!({"path": "a.txt", "edits": [{"old_text": "alpha", "new_text": "ALPHA"}]}),
        ),
        ("run_command", json!({"argv": ["true"]})),
        ("run_script", json!({"script": "test"})),
    ]);
    let mut steps = vec![json!({"op": "list"})];
    for tool in &expected {
        let args = arguments.get(tool.as_str()).cloned().unwrap_or(json!({}));
        steps.push(json!({"op": "call", "tool": tool, "arguments": args}));
    }
    steps.extend([
        json!({"op": "call", "tool": "read_file", "arguments": {"path": "../outside/secret.txt"}}),
        json!({"op": "call", "tool": "read_file", "arguments": {"file_path": "a.txt"}}),
        json!({"op": "call", "tool": "read_fil", "arguments": {"path": "a.txt"}}),
    ]);
    let report = drive(&json!({"sessions": [stdio_session(&ws, &config, &[], json!(steps))]}));
    let session = &report["sessions"][0];
    assert_eq!(session["init"]["serverInfo"]["name"], "toolgate");
    let steps = session["steps"].as_array().unwrap();
    assert_eq!(names(&steps[0]), expected);

    let results: HashMap<&str, &Value> = expected
        .iter()
        .map(String::as_str)
        .zip(steps[1..].iter())
        .collect();
    let read = results["read_file"];
    assert_eq!(read["isError"], false, "{read}");
    assert_eq!(read["structured"]["content"], "alpha\nbeta\ngamma\n");
    assert_eq!(
        results["list_dir"]["isError"], false,
        "{}",
        results["list_dir"]
    );
    assert!(
        results["list_dir"]["text"]
            .as_str()
            .unwrap()
            .contains("a.txt")
    );
    let search = results["search_text"];
    assert_eq!(search["isError"], false, "{search}");
    assert!(
        search["text"].as_str().unwrap().contains("a.txt"),
        "{search}"
    );
    for tool in ["write_file", "edit_file", "run_command", "run_script"] {
        if let Some(result) = results.get(tool) {
            assert_eq!(result["isError"], true, "{tool}: {result}");
            // Refused for want of a person's approval, or (an edit without the digest of
            // what it read) before that.
            assert!(
                code(result) == "approval_required" || code(result) == "read_required",
                "{tool}: {result}"
            );
        }
    }
    for tool in ["git_status", "git_diff"] {
        if let Some(result) = results.get(tool) {
            // Not a git repository here: a tool error or a rejection, but an answer.
            assert!(
                result["text"].as_str().is_some_and(|t| !t.is_empty()),
                "{tool}: {result}"
            );
        }
    }
    assert!(
        fs::read_to_string(ws.join("a.txt")).unwrap() == "alpha\nbeta\ngamma\n"
            && !ws.join("new.txt").exists(),
        "nothing may have been written"
    );

    let n = expected.len();
    let escape = &steps[n + 1];
    assert_eq!(escape["isError"], true);
    assert_eq!(code(escape), "path_outside_workspace", "{escape}");
    let typo = &steps[n + 2];
    assert_eq!(code(typo), "unknown_argument", "{typo}");
    assert!(
        typo["text"]
            .as_str()
            .unwrap()
            .contains("did you mean `path`?"),
        "{typo}"
    );
    let unknown = &steps[n + 3];
    assert_eq!(unknown["isError"], true);
    assert_eq!(code(unknown), "unknown_tool", "{unknown}");
    assert!(
        unknown["text"]
            .as_str()
            .unwrap()
            .contains("did you mean `read_file`?"),
        "{unknown}"
    );
}

/// A client that logs the server's answers to a file (standard output not a pipe) while it
/// writes requests down a pipe is served: the server waits for it rather than ending.
#[test]
fn a_server_whose_output_is_a_file_waits_for_its_client() {
    let fx = Fixture::new();
    let answers = fx.dir.path().join("answers.jsonl");
    let mut child = home::toolgate()
        .args(["serve", "--no-console", "--workspace"])
        .arg(fx.workspace())
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&answers).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the server ended before its client spoke"
    );
    let mut input = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "logger", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    ] {
        writeln!(input, "{message}").unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while !fs::read_to_string(&answers).unwrap().contains("\"id\":2") {
        assert!(Instant::now() < deadline, "no answer to tools/list");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(input);
    assert!(child.wait().unwrap().success());
    let listed = fs::read_to_string(&answers).unwrap();
    assert!(listed.contains("\"read_file\""), "{listed}");
}

#[test]
fn readonly_sessions_see_and_call_only_read_only_tools() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(&fx, "plain", "", None);
    let expected = visible(&config, "readonly");
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}},
        {"op": "call", "tool": "write_file", "arguments": {"path": "b.txt", "content": "x"}},
        {"op": "call", "tool": "run_command", "arguments": {"argv": ["true"]}},
    ]);
    let report = drive(&json!({"sessions": [
        stdio_session(&ws, &config, &["--profile", "readonly"], steps)
    ]}));
    let steps = report["sessions"][0]["steps"].as_array().unwrap();
    assert_eq!(names(&steps[0]), expected);
    for tool in steps[0]["tools"].as_array().unwrap() {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
    }
    assert_eq!(steps[1]["isError"], false, "{}", steps[1]);
    for refused in &steps[2..] {
        assert_eq!(code(refused), "unknown_tool", "{refused}");
        assert_eq!(refused["meta"]["toolgate/evidence"]["profile"], "readonly");
    }
    assert!(!ws.join("b.txt").exists());
}

/// The 2026-07-28 revision (no `initialize`; protocol version, client capabilities and client
/// information on every request) over both transports, through the SDK's high-level client.
#[test]
fn revision_2026_07_28_over_stdio_and_http() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(
        &fx,
        "tokens",
        "[[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN_ALICE\"\nactor = \"alice\"\nprofile = \"readonly\"\n",
        None,
    );
    let server = HttpServer::start(
        &ws,
        &config,
        &[],
        &[("TOOLGATE_TEST_TOKEN_ALICE", TOKEN_ALICE)],
    );
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}},
        {"op": "call", "tool": "read_fil", "arguments": {"path": "a.txt"}},
    ]);
    let mut stdio = stdio_session(&ws, &config, &["--profile", "readonly"], steps.clone());
    stdio["client"] = json!("modern");
    let report = drive(&json!({"sessions": [
        stdio,
        {"transport": "http", "client": "modern", "url": server.url(), "token": TOKEN_ALICE, "steps": steps},
    ]}));
    for session in report["sessions"].as_array().unwrap() {
        assert_eq!(
            session["init"]["protocolVersion"], "2026-07-28",
            "{session}"
        );
        let steps = session["steps"].as_array().unwrap();
        assert_eq!(names(&steps[0]), visible(&config, "readonly"));
        assert_eq!(
            steps[1]["structured"]["content"], "alpha\nbeta\ngamma\n",
            "{}",
            steps[1]
        );
        assert_eq!(code(&steps[2]), "unknown_tool", "{}", steps[2]);
        assert!(
            steps[2]["text"]
                .as_str()
                .unwrap()
                .contains("did you mean `read_file`?")
        );
    }
}

/// A `toolgate serve` child speaking raw JSON-RPC lines.
struct RawStdio {
    child: Child,
    answers: mpsc::Receiver<Value>,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    /// While this lives, the writer keeps the server's input open; dropped with the server.
    input_held: Option<mpsc::Sender<()>>,
}

impl RawStdio {
    fn start(ws: &Path, config: Option<&Path>, profile: &str) -> RawStdio {
        let empty = ws.parent().unwrap().join("empty.toml");
        fs::write(&empty, "").unwrap();
        let mut child =
            spawn_piped(serve_stdio(ws, config.unwrap_or(&empty)).args(["--profile", profile]));
        let stderr = collected(child.stderr.take().unwrap());
        let answers = lines_of(child.stdout.take().unwrap(), |line| {
            serde_json::from_str(&line).unwrap()
        });
        RawStdio {
            child,
            answers,
            stderr,
            input_held: None,
        }
    }

    /// Writes every line, from another thread, so that a large one cannot block reading.
    fn send_all(&mut self, lines: Vec<String>) {
        let mut stdin = self.child.stdin.take().unwrap();
        let (held, released) = mpsc::channel::<()>();
        self.input_held = Some(held);
        std::thread::spawn(move || {
            for line in lines {
                if stdin.write_all(line.as_bytes()).is_err() || stdin.write_all(b"\n").is_err() {
                    return;
                }
            }
            // Keep the input open until the test is done with the server; closing it would end
            // the session before the answers are in.
            let _ = released.recv_timeout(Duration::from_secs(120));
        });
    }

    /// Answers (not notifications) until `count` have arrived.
    fn answers(&self, count: usize) -> Vec<Value> {
        let mut answers = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        while answers.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.answers.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "only {} of {count} answers: {answers:?}\nstderr: {}",
                    answers.len(),
                    self.stderr.lock().unwrap()
                )
            });
            // An answer has an id, or is an error to a line that had none to read.
            if message.get("id").is_some() || message.get("error").is_some() {
                answers.push(message);
            }
        }
        answers
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"corpus","version":"1"}}}"#;

/// The shared hostile-input table, as `tools/call` lines: the same stage and code as through
/// the library and the command line, with two differences a session makes on purpose. A tool
/// the session was not shown (outside its profile, disabled) is `unknown_tool`, so that a
/// session learns nothing of tools it may not see; and a line that is not JSON at all (a
/// nesting deeper than the JSON parser takes) can only be answered with a JSON-RPC parse error.
#[test]
fn hostile_corpus_over_mcp() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let mut groups: BTreeMap<(String, String), Vec<fixture::Row>> = BTreeMap::new();
    for row in corpus().into_iter().filter(|r| r.surface == "chat") {
        groups
            .entry((row.config.clone(), row.profile.clone()))
            .or_default()
            .push(row);
    }
    let mut checked = 0;
    for ((config, profile), rows) in groups {
        let config = fx.config(&config);
        if !known_profile(config.as_deref(), &profile) {
            // No session can run in a profile that does not exist: serve refuses to start.
            let refused = home::toolgate()
                .args(["serve", "--no-console", "--workspace"])
                .arg(&ws)
                .args(["--profile", &profile])
                .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(refused.status.code(), Some(3), "{refused:?}");
            assert!(
                String::from_utf8_lossy(&refused.stderr).contains("unknown profile"),
                "{refused:?}"
            );
            checked += rows.len();
            continue;
        }
        let mut server = RawStdio::start(&ws, config.as_deref(), &profile);
        let mut lines = vec![
            INITIALIZE.to_owned(),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned(),
        ];
        for (i, row) in rows.iter().enumerate() {
            let arguments = if row.args.trim().is_empty() {
                String::new()
            } else {
                format!(",\"arguments\":{}", row.args)
            };
            lines.push(format!(
                r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/call","params":{{"name":{}{arguments}}}}}"#,
                serde_json::to_string(&row.tool).unwrap()
            ));
        }
        let not_json: Vec<bool> = lines[2..]
            .iter()
            .map(|l| serde_json::from_str::<serde::de::IgnoredAny>(l).is_err())
            .collect();
        server.send_all(lines);
        // Lines that are not JSON are answered without an id; count them apart.
        let mut by_id: HashMap<String, Value> = HashMap::new();
        let mut parse_errors = 0;
        for answer in server.answers(rows.len() + 1) {
            match &answer["id"] {
                Value::Null => {
                    assert_eq!(answer["error"]["code"], -32700, "{answer}");
                    parse_errors += 1;
                }
                id => {
                    by_id.insert(id.to_string(), answer);
                }
            }
        }
        assert_eq!(parse_errors, not_json.iter().filter(|b| **b).count());
        for (i, row) in rows.iter().enumerate() {
            if not_json[i] {
                continue;
            }
            let name = &row.name;
            let answer = &by_id[&i.to_string()];
            let result = &answer["result"];
            assert_eq!(result["isError"], true, "{name}: {answer}");
            let outcome = &result["structuredContent"];
            match row.status.as_str() {
                "rejected" => {
                    let expected = match row.code.as_str() {
                        "not_in_profile" | "disabled" => "unknown_tool",
                        other => other,
                    };
                    assert_eq!(outcome["rejection"]["code"], expected, "{name}: {outcome}");
                    if expected == row.code {
                        assert_eq!(
                            outcome["rejection"]["stage"],
                            row.stage.clone().unwrap(),
                            "{name}: {outcome}"
                        );
                    }
                }
                "failed" => {
                    assert_eq!(outcome["status"], "failed", "{name}: {outcome}");
                    assert_eq!(outcome["error"]["code"], row.code, "{name}: {outcome}");
                }
                other => panic!("{name}: unknown status {other}"),
            }
            assert_eq!(
                result["_meta"]["toolgate/evidence"]["surface"], "chat",
                "{name}"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "only {checked} rows checked");
}

/// Whether `profile` exists under `config` (the defaults when `None`).
fn known_profile(config: Option<&Path>, profile: &str) -> bool {
    let mut check = home::toolgate();
    check.arg("check");
    match config {
        Some(config) => check.arg("--config").arg(config),
        None => check.env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config"),
    };
    let output = check.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .any(|l| l.starts_with(&format!("profile {profile}:")))
}

/// A command that runs until cancelled, allowed to run unattended for this test.
fn unattended_commands(fx: &Fixture) -> PathBuf {
    write_config(
        fx,
        "commands",
        "policy = \"commands.cedar\"\n[[tool]]\nname = \"run_command\"\napproval = \"policy\"\n",
        Some(
            "@id(\"test-unattended-commands\")\npermit (principal, action == Action::\"call_unattended\", resource == Tool::\"run_command\");\n",
        ),
    )
}

/// How many processes have exactly this command line.
fn processes(argv: &[&str]) -> usize {
    let wanted: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| *cmdline == wanted)
        .count()
}

fn check_cancelled(report: &Value, sleeper: &[&str]) {
    let cancel = &report["sessions"][0]["steps"][0];
    assert!(
        cancel["completed"].is_null(),
        "the call completed: {cancel}"
    );
    let progress = cancel["progress"].as_array().unwrap();
    assert!(
        progress.iter().any(|p| p["message"]
            .as_str()
            .is_some_and(|m| m.contains("`run_command` is running"))),
        "{cancel}"
    );
    // The follow-up call answers; the command is gone well before its 30 seconds.
    let after = &report["sessions"][0]["steps"][1];
    assert_eq!(after["isError"], false, "{after}");
    wait_until(
        "the cancelled command was killed",
        Duration::from_secs(10),
        || processes(sleeper) == 0,
    );
}

#[test]
fn cancelling_a_long_command_kills_it() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = unattended_commands(&fx);
    if !visible(&config, "default")
        .iter()
        .any(|t| t == "run_command")
    {
        panic!("run_command is not a builtin; this test needs it");
    }
    let sleeper = ["sleep", "31.25"];
    let steps = json!([
        {"op": "cancel", "tool": "run_command", "arguments": {"argv": sleeper}, "after": 8.0},
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}},
    ]);
    let report = drive(&json!({"sessions": [stdio_session(&ws, &config, &[], steps.clone())]}));
    check_cancelled(&report, &sleeper);

    // The same over HTTP, where the SDK cancels with a notification on its own POST.
    let server = HttpServer::start(&ws, &config, &["--dangerous-no-auth"], &[]);
    let sleeper = ["sleep", "32.25"];
    let steps = json!([
        {"op": "cancel", "tool": "run_command", "arguments": {"argv": sleeper}, "after": 8.0},
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}},
    ]);
    let report = drive(&json!({"sessions": [
        {"transport": "http", "url": server.url(), "steps": steps}
    ]}));
    check_cancelled(&report, &sleeper);
}

#[test]
fn inspector_cli_lists_and_calls() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(&fx, "plain", "", None);
    let inspector = node_package("@modelcontextprotocol/inspector/cli/build/cli.js");
    // The inspector's own options go after the server's arguments: `--tool-arg` takes every
    // `key=value` that follows it.
    let run = |method: &[&str]| {
        let output = home::isolated(Command::new(node()))
            .arg(&inspector)
            .arg("--cli")
            .arg(toolgate_bin())
            .args(["--", "serve", "--no-console", "--workspace"])
            .arg(&ws)
            .arg("--config")
            .arg(&config)
            .args(method)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        serde_json::from_slice::<Value>(&output.stdout).unwrap()
    };
    let listed = run(&["--method", "tools/list"]);
    assert_eq!(names(&listed), visible(&config, "default"));
    let called = run(&[
        "--method",
        "tools/call",
        "--tool-name",
        "read_file",
        "--tool-arg",
        "path=a.txt",
    ]);
    assert_eq!(called["isError"], false, "{called}");
    assert_eq!(
        called["structuredContent"]["content"],
        "alpha\nbeta\ngamma\n"
    );
}

impl HttpServer {
    fn start(ws: &Path, config: &Path, extra: &[&str], env: &[(&str, &str)]) -> HttpServer {
        HttpServer::spawn(serve_http(ws, config).args(extra).envs(env.iter().copied()))
    }

    /// The status of one POST with these headers (Host and the JSON headers are added).
    fn status(&self, headers: &[(&str, String)], body: &str) -> u16 {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut request = String::from("POST /mcp HTTP/1.1\r\n");
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            request.push_str(&format!("host: {}\r\n", self.addr));
        }
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str(&format!(
            "content-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        ));
        stream.write_all(request.as_bytes()).unwrap();
        let mut status = [0u8; 12];
        stream.read_exact(&mut status).unwrap();
        std::str::from_utf8(&status[9..12])
            .unwrap()
            .parse()
            .unwrap()
    }
}

const HTTP_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

#[test]
fn http_serves_concurrent_sessions_by_token_and_refuses_strangers() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(
        &fx,
        "tokens",
        concat!(
            "[profiles.reviewer]\ntools = [\"read_file\"]\n\n",
            "[[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN_ALICE\"\nactor = \"alice\"\nprofile = \"readonly\"\n\n",
            "[[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN_BOB\"\nactor = \"bob\"\nprofile = \"reviewer\"\n",
        ),
        None,
    );
    let server = HttpServer::start(
        &ws,
        &config,
        &[],
        &[
            ("TOOLGATE_TEST_TOKEN_ALICE", TOKEN_ALICE),
            ("TOOLGATE_TEST_TOKEN_BOB", TOKEN_BOB),
        ],
    );
    // Refused before any MCP handling.
    assert_eq!(server.status(&[], HTTP_INITIALIZE), 401);
    assert_eq!(
        server.status(&[bearer(&TOKEN_ALICE[1..])], HTTP_INITIALIZE),
        401
    );
    assert_eq!(server.status(&[bearer(TOKEN_ALICE)], "garbage"), 400);
    assert_eq!(server.status(&[], "garbage"), 401);
    let evil_host = ("host", format!("evil.example.com:{}", server.addr.port()));
    assert_eq!(
        server.status(&[evil_host, bearer(TOKEN_ALICE)], HTTP_INITIALIZE),
        403
    );
    let evil_origin = ("origin", "http://evil.example.com".to_owned());
    assert_eq!(
        server.status(&[evil_origin, bearer(TOKEN_ALICE)], HTTP_INITIALIZE),
        403
    );
    assert_eq!(server.status(&[bearer(TOKEN_ALICE)], HTTP_INITIALIZE), 200);

    // Two sessions at once, each with its own actor and profile.
    let steps = json!([
        {"op": "list"},
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}},
        {"op": "sleep", "seconds": 0.2},
        {"op": "call", "tool": "list_dir", "arguments": {}},
        {"op": "call", "tool": "write_file", "arguments": {"path": "b.txt", "content": "x"}},
    ]);
    let report = drive(&json!({"sessions": [
        {"transport": "http", "url": server.url(), "token": TOKEN_ALICE, "steps": steps},
        {"transport": "http", "url": server.url(), "token": TOKEN_BOB, "steps": steps},
    ]}));
    let alice = report["sessions"][0]["steps"].as_array().unwrap();
    let bob = report["sessions"][1]["steps"].as_array().unwrap();
    assert_eq!(names(&alice[0]), visible(&config, "readonly"));
    assert_eq!(names(&bob[0]), ["read_file"]);
    assert_eq!(alice[1]["isError"], false, "{}", alice[1]);
    assert_eq!(bob[1]["isError"], false, "{}", bob[1]);
    assert_eq!(alice[3]["isError"], false, "{}", alice[3]);
    assert_eq!(code(&bob[3]), "unknown_tool", "{}", bob[3]);
    assert_eq!(bob[3]["meta"]["toolgate/evidence"]["actor"], "bob");
    assert_eq!(code(&alice[4]), "unknown_tool", "{}", alice[4]);
    assert_eq!(alice[4]["meta"]["toolgate/evidence"]["actor"], "alice");
    assert!(!ws.join("b.txt").exists());
}

#[test]
fn http_without_configured_tokens_generates_one_and_refuses_open_binds() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(&fx, "plain", "", None);
    let server = HttpServer::start(&ws, &config, &["--profile", "readonly"], &[]);
    // Kept in a user-only file the banner names, never printed itself.
    let token = support::served::generated_token(&server.banner);
    assert_eq!(token.len(), 64, "{token}");
    assert_eq!(server.status(&[], HTTP_INITIALIZE), 401);
    assert_eq!(server.status(&[bearer(&token)], HTTP_INITIALIZE), 200);
    let report = drive(&json!({"sessions": [
        {"transport": "http", "url": server.url(), "token": token, "steps": [{"op": "list"}]}
    ]}));
    assert_eq!(
        names(&report["sessions"][0]["steps"][0]),
        visible(&config, "readonly")
    );

    let refused = home::toolgate()
        .args([
            "serve",
            "--no-console",
            "--http",
            "0.0.0.0:0",
            "--workspace",
        ])
        .arg(&ws)
        .arg("--config")
        .arg(&config)
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not a loopback address"),
        "{refused:?}"
    );
    let unset = write_config(
        &fx,
        "unset",
        "[[serve.token]]\nenv = \"TOOLGATE_TEST_NOT_SET\"\nactor = \"a\"\nprofile = \"default\"\n",
        None,
    );
    let refused = serve_http(&ws, &unset)
        .env_remove("TOOLGATE_TEST_NOT_SET")
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(3), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("unset.toml:2:") && stderr.contains("`TOOLGATE_TEST_NOT_SET`"),
        "{stderr}"
    );
}

/// The MCP conformance suite against `toolgate serve --http`. Scenarios that need the suite's
/// fixture tools, resources or prompts are listed, with a reason each, in
/// `tests/mcp/conformance-baseline.txt`; every other scenario must pass, and a listed one that
/// starts passing fails the run too (the suite's own rule for a stale baseline).
#[test]
fn conformance_suite() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = write_config(&fx, "plain", "", None);
    // The suite sends no token: this is what --dangerous-no-auth (loopback only) is for.
    let server = HttpServer::start(&ws, &config, &["--dangerous-no-auth"], &[]);
    conformance(
        &server.url(),
        &root().join("tests/mcp/conformance-baseline.txt"),
        &[
            "server-initialize",
            "tools-list",
            "ping",
            "dns-rebinding-protection",
        ],
    );
}
