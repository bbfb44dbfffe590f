//! MCP sessions in process, over real pipes and a real socket: listing, calls, rejections,
//! visibility changes, progress, cancellation, and the HTTP front door.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolgate_core::{
    ApprovalBroker, ApprovalDecision, ApprovalRequest, Call, Descriptor, EffectClass, ExecContext,
    Executor, HeadlessBroker, Pipeline, PolicyEngine, RegistryBuilder, ToolEntry, ToolError,
    ToolErrorCode, ToolOutput, WorkspaceId,
};
use toolgate_mcp::{HttpOptions, Principal, Server, TokenTable};

const WAIT: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Echo;
impl Executor for Echo {
    fn execute(&self, call: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(json!({ "echo": call.arguments() })))
    }
}

/// Runs until cancelled, counting starts and stops.
#[derive(Debug, Default)]
struct Sleep {
    started: AtomicUsize,
    stopped: AtomicUsize,
}
impl Executor for Sleep {
    fn execute(&self, _: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        while !cx.should_stop() {
            std::thread::sleep(Duration::from_millis(5));
        }
        self.stopped.fetch_add(1, Ordering::SeqCst);
        Err(ToolError::new(ToolErrorCode::Cancelled, "stopped as asked"))
    }
}

/// A channel where a person could answer, who takes a while to say nobody is there.
#[derive(Debug)]
struct SlowBroker;
impl ApprovalBroker for SlowBroker {
    fn ask(&self, _: &ApprovalRequest) -> ApprovalDecision {
        std::thread::sleep(Duration::from_millis(400));
        ApprovalDecision::Unanswered {
            reason: "nobody answered".into(),
        }
    }
}

struct Rig {
    server: Arc<Server>,
    sleep: Arc<Sleep>,
    toggle: Arc<AtomicBool>,
}

fn entry(name: &str, effect: EffectClass, profiles: &[&str]) -> ToolEntry {
    let mut entry = ToolEntry::new(name, "test");
    entry.effect = Some(effect);
    entry.profiles = profiles.iter().map(|p| (*p).to_owned()).collect();
    entry
}

fn pipeline(sleep: &Arc<Sleep>, toggle: &Arc<AtomicBool>, echo_description: &str) -> Pipeline {
    let schema = json!({
        "type": "object",
        "properties": {"text": {"type": "string"}, "path": {"type": "string"}},
        "additionalProperties": false
    });
    let mut builder = RegistryBuilder::new();
    builder
        .register(
            Descriptor::new("echo", echo_description, schema.clone()),
            entry("echo", EffectClass::ReadOnly, &["default", "readonly"]),
            Arc::new(Echo),
        )
        .unwrap();
    builder
        .register(
            Descriptor::new(
                "sleep",
                "Sleeps until cancelled.",
                json!({"type": "object"}),
            ),
            entry("sleep", EffectClass::ReadOnly, &["default"]),
            Arc::clone(sleep) as Arc<dyn Executor>,
        )
        .unwrap();
    let mut toggled = entry("toggled", EffectClass::ReadOnly, &["default"]);
    let flag = Arc::clone(toggle);
    toggled.availability = Some(Arc::new(move || {
        if flag.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err("switched off".into())
        }
    }));
    builder
        .register(
            Descriptor::new("toggled", "There or not.", json!({"type": "object"})),
            toggled,
            Arc::new(Echo),
        )
        .unwrap();
    builder
        .register(
            Descriptor::new("write", "Writes.", json!({"type": "object"})),
            entry("write", EffectClass::LocalWrite, &["default"]),
            Arc::new(Echo),
        )
        .unwrap();
    let registry = builder.build().unwrap();
    let mut policy = PolicyEngine::default_policy().unwrap();
    policy.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(SlowBroker),
        WorkspaceId::new("/test"),
    )
}

fn rig() -> Rig {
    let sleep = Arc::new(Sleep::default());
    let toggle = Arc::new(AtomicBool::new(false));
    let server = Arc::new(
        Server::new(pipeline(&sleep, &toggle, "Echoes."), "toolgate", "test")
            .with_progress_interval(Duration::from_millis(50)),
    );
    Rig {
        server,
        sleep,
        toggle,
    }
}

/// A client on the other end of two pipes.
struct Client {
    input: std::io::PipeWriter,
    lines: mpsc::Receiver<Value>,
    /// Messages read while waiting for something else.
    seen: Vec<Value>,
}

impl Client {
    fn start(server: &Arc<Server>, profile: &str) -> Client {
        let (server_in, input) = std::io::pipe().unwrap();
        let (output, server_out) = std::io::pipe().unwrap();
        let server = Arc::clone(server);
        let principal = Principal::new("tester", profile);
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime
                .block_on(toolgate_mcp::serve_streams(
                    server,
                    principal,
                    server_in,
                    server_out,
                    1 << 20,
                ))
                .unwrap();
        });
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(output).lines() {
                let Ok(line) = line else { return };
                let value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("server wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        Client {
            input,
            lines,
            seen: Vec::new(),
        }
    }

    fn send_raw(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).unwrap();
        self.input.write_all(b"\n").unwrap();
        self.input.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string());
    }

    fn next(&mut self) -> Value {
        self.lines
            .recv_timeout(WAIT)
            .expect("the server answered in time")
    }

    /// The answer to request `id`, keeping everything else that arrives meanwhile.
    fn answer(&mut self, id: &Value) -> Value {
        if let Some(at) = self
            .seen
            .iter()
            .position(|m| m.get("id") == Some(id) && m.get("method").is_none())
        {
            return self.seen.remove(at);
        }
        loop {
            let message = self.next();
            if message.get("id") == Some(id) && message.get("method").is_none() {
                return message;
            }
            self.seen.push(message);
        }
    }

    fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.answer(&id)
    }

    fn initialize(&mut self) -> Value {
        let answer = self.request(
            json!(0),
            "initialize",
            json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"}
            }),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    fn list(&mut self, id: i64) -> Vec<String> {
        let answer = self.request(json!(id), "tools/list", json!({}));
        answer["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{answer}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn call(&mut self, id: i64, name: &str, arguments: &str) -> Value {
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{arguments}}}}}"#
        );
        self.send_raw(&line);
        let answer = self.answer(&json!(id));
        answer
            .get("result")
            .cloned()
            .unwrap_or_else(|| panic!("not a result: {answer}"))
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

fn wait_for(what: &str, condition: impl Fn() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(started.elapsed() < WAIT, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn lists_by_profile_and_annotates_from_the_operators_effect_class() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    let init = client.initialize();
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "toolgate");
    assert_eq!(
        init["result"]["capabilities"]["tools"]["listChanged"], true,
        "{init}"
    );
    let answer = client.request(json!(1), "tools/list", json!({}));
    let tools = answer["result"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "sleep", "write"], "toggled is unavailable");
    assert_eq!(tools[0]["annotations"]["readOnlyHint"], true);
    assert_eq!(tools[2]["annotations"]["readOnlyHint"], false);
    assert_eq!(
        tools[0]["inputSchema"]["properties"]["text"]["type"],
        "string"
    );

    let mut sub_agent = Client::start(&rig.server, "readonly");
    sub_agent.initialize();
    assert_eq!(sub_agent.list(1), ["echo"]);
    let refused = sub_agent.call(2, "write", "{}");
    assert_eq!(refused["isError"], true);
    assert_eq!(
        refused["structuredContent"]["rejection"]["code"],
        "unknown_tool"
    );
    assert!(
        text(&refused).contains("no tool `write` in this session's tool list"),
        "{refused}"
    );

    let bad_cursor = client.request(json!(9), "tools/list", json!({"cursor": "x"}));
    assert_eq!(bad_cursor["error"]["code"], -32602, "{bad_cursor}");
}

#[test]
fn calls_run_the_pipeline_and_rejections_are_tool_errors() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    client.initialize();
    let done = client.call(1, "echo", r#"{"text": "hi"}"#);
    assert_eq!(done["isError"], false, "{done}");
    assert_eq!(done["structuredContent"], json!({"echo": {"text": "hi"}}));
    assert_eq!(text(&done), r#"{"echo":{"text":"hi"}}"#);

    let twice = client.call(2, "echo", r#"{"text": "a", "text": "b"}"#);
    assert_eq!(twice["isError"], true);
    assert_eq!(
        twice["structuredContent"]["rejection"]["code"], "malformed",
        "{twice}"
    );
    assert!(
        text(&twice).contains("the key `text` appears twice"),
        "{twice}"
    );

    let typo = client.call(3, "echo", r#"{"txt": "a"}"#);
    assert_eq!(
        typo["structuredContent"]["rejection"]["code"],
        "unknown_argument"
    );
    assert!(text(&typo).contains("did you mean `text`?"), "{typo}");
    assert!(text(&typo).starts_with("toolgate rejected this call at the validate stage"));

    let unknown = client.call(4, "ecko", "{}");
    assert_eq!(unknown["isError"], true);
    assert_eq!(
        unknown["structuredContent"]["rejection"]["code"],
        "unknown_tool"
    );
    assert!(text(&unknown).contains("did you mean `echo`?"), "{unknown}");
    assert_eq!(unknown["_meta"]["toolgate/evidence"]["tool"], "ecko");
    assert_eq!(unknown["_meta"]["toolgate/evidence"]["request_id"], "4");

    let not_object = client.call(5, "echo", "[1]");
    assert_eq!(
        not_object["structuredContent"]["rejection"]["code"],
        "malformed"
    );

    // Writes need a person; nobody answers here, and the model is told so.
    let write = client.call(6, "write", "{}");
    assert_eq!(
        write["structuredContent"]["rejection"]["code"], "approval_required",
        "{write}"
    );
    assert_eq!(rig.sleep.started.load(Ordering::SeqCst), 0);
}

#[test]
fn malformed_messages_get_json_rpc_errors_and_the_session_goes_on() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    // Before initialize: noise that must not end the session.
    client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    client.send_raw("{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}");
    client.send_raw("this is not json");
    assert_eq!(client.next()["error"]["code"], -32700);
    client.initialize();
    client.send_raw("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
    assert_eq!(client.next()["error"]["code"], -32600);
    let unknown = client.request(json!("m"), "no/such/method", json!({}));
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
    let bad_params = client.request(json!(7), "tools/call", json!({"arguments": {}}));
    assert_eq!(bad_params["error"]["code"], -32602, "{bad_params}");
    assert!(
        bad_params["error"]["message"]
            .as_str()
            .unwrap()
            .contains("invalid `tools/call` params"),
        "{bad_params}"
    );
    client.send_raw(&format!("{{\"x\": \"{}\"}}", "y".repeat(2 << 20)));
    assert_eq!(client.next()["error"]["code"], -32600);
    let ping = client.request(json!(8), "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    assert_eq!(client.list(9), ["echo", "sleep", "write"]);
}

#[test]
fn cancelled_calls_stop_and_are_never_answered() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    client.initialize();
    client.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {}, "_meta": {"progressToken": "p1"}}
    }));
    let progress = client.next();
    assert_eq!(progress["method"], "notifications/progress", "{progress}");
    assert_eq!(progress["params"]["progressToken"], "p1");
    assert!(
        progress["params"]["message"]
            .as_str()
            .unwrap()
            .contains("`sleep` is running"),
        "{progress}"
    );
    // A second request with the same id while the first runs is refused.
    let reused = client.request(json!(1), "ping", json!({}));
    assert_eq!(reused["error"]["code"], -32600, "{reused}");
    client.send(&json!({
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "changed my mind"}
    }));
    wait_for("the executor stopped", || {
        rig.sleep.stopped.load(Ordering::SeqCst) == 1
    });
    // The id is free again; its answer is the new call's, not the cancelled one's.
    let fresh = client.call(1, "echo", r#"{"text": "after"}"#);
    assert_eq!(
        fresh["structuredContent"],
        json!({"echo": {"text": "after"}})
    );
    let ping = client.request(json!(2), "ping", json!({}));
    assert_eq!(ping["result"], json!({}));
    let stale: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m.get("id") == Some(&json!(1)))
        .collect();
    assert!(stale.is_empty(), "answers to the cancelled call: {stale:?}");
}

#[test]
fn approval_waits_are_reported() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    client.initialize();
    client.send(&json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "write", "arguments": {}, "_meta": {"progressToken": 5}}
    }));
    let answer = client.answer(&json!(1));
    assert_eq!(
        answer["result"]["structuredContent"]["rejection"]["code"],
        "approval_required"
    );
    let first = client
        .seen
        .iter()
        .find(|m| m["method"] == "notifications/progress")
        .unwrap_or_else(|| panic!("no progress: {:?}", client.seen));
    assert_eq!(first["params"]["progressToken"], 5);
    assert!(
        first["params"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting for a person's approval"),
        "{first}"
    );
}

#[test]
fn sessions_that_ask_for_logs_hear_of_refused_calls() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    client.initialize();
    assert_eq!(client.call(1, "echo", "{}")["isError"], false);
    let set = client.request(json!(2), "logging/setLevel", json!({"level": "info"}));
    assert_eq!(set["result"], json!({}), "{set}");
    assert_eq!(client.call(3, "ecko", "{}")["isError"], true);
    let logs: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(logs.len(), 1, "{:?}", client.seen);
    assert_eq!(logs[0]["params"]["level"], "warning");
    assert_eq!(logs[0]["params"]["logger"], "toolgate");
    assert!(
        logs[0]["params"]["data"]
            .as_str()
            .unwrap()
            .contains("rejected at resolve (unknown_tool)"),
        "{}",
        logs[0]
    );
}

#[test]
fn sessions_call_only_what_they_were_shown() {
    let rig = rig();
    let mut client = Client::start(&rig.server, "default");
    client.initialize();
    assert_eq!(client.list(1), ["echo", "sleep", "write"]);

    // Visible since the last listing: refused until the session lists again.
    rig.toggle.store(true, Ordering::SeqCst);
    let early = client.call(2, "toggled", "{}");
    assert_eq!(
        early["structuredContent"]["rejection"]["code"],
        "unknown_tool"
    );
    assert!(
        text(&early).contains("became available after this session last listed"),
        "{early}"
    );
    assert_eq!(client.list(3), ["echo", "sleep", "toggled", "write"]);
    assert_eq!(client.call(4, "toggled", "{}")["isError"], false);

    // Hidden since the last listing: refused.
    rig.toggle.store(false, Ordering::SeqCst);
    let hidden = client.call(5, "toggled", "{}");
    assert_eq!(
        hidden["structuredContent"]["rejection"]["code"], "unavailable",
        "{hidden}"
    );

    // A new registry whose `echo` says something else: the session is told, and must list
    // again before calling it.
    rig.server
        .replace_pipeline(pipeline(&rig.sleep, &rig.toggle, "Echoes, differently."));
    let changed = client.call(6, "echo", "{}");
    assert_eq!(
        changed["structuredContent"]["rejection"]["code"], "stale_descriptor",
        "{changed}"
    );
    assert!(
        client
            .seen
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{:?}",
        client.seen
    );
    client.list(7);
    assert_eq!(client.call(8, "echo", "{}")["isError"], false);
    // The same registry again: same descriptors, so no listing is needed.
    rig.server
        .replace_pipeline(pipeline(&rig.sleep, &rig.toggle, "Echoes, differently."));
    assert_eq!(client.call(9, "echo", "{}")["isError"], false);
}

// ---- HTTP ----------------------------------------------------------------------------

const ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
const BOB: &str = "bob-0123456789abcdef0123456789abcdef00";

fn http_server(
    server: &Arc<Server>,
    anonymous: Option<Principal>,
) -> (SocketAddr, CancellationToken) {
    let mut tokens = TokenTable::new();
    tokens
        .insert(ALICE, Principal::new("alice", "readonly"))
        .unwrap();
    tokens
        .insert(BOB, Principal::new("bob", "default"))
        .unwrap();
    let mut options = HttpOptions::new(tokens);
    options.dangerous_anonymous = anonymous;
    options.keep_alive = Duration::from_millis(100);
    let listener = toolgate_mcp::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let server = Arc::clone(server);
    let stop = shutdown.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(toolgate_mcp::serve_http(server, listener, options, stop))
            .unwrap();
    });
    (addr, shutdown)
}

/// One HTTP/1.1 request; the status, the headers, and the open connection.
fn http(addr: SocketAddr, head: &[(&str, String)], body: &str) -> (u16, String, TcpStream) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut request = String::from("POST /mcp HTTP/1.1\r\n");
    for (name, value) in head {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "content-type: application/json\r\naccept: application/json, text/event-stream\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "{}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    (status, head, stream)
}

fn host(addr: SocketAddr) -> (&'static str, String) {
    ("host", addr.to_string())
}

fn bearer(token: &str) -> (&'static str, String) {
    ("authorization", format!("Bearer {token}"))
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn session_id(head: &str) -> String {
    head.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .starts_with("mcp-session-id:")
                .then(|| l[15..].trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {head}"))
}

#[test]
fn http_refuses_foreign_hosts_and_origins_then_missing_tokens() {
    let rig = rig();
    let (addr, shutdown) = http_server(&rig.server, None);
    let ok = || vec![host(addr), bearer(ALICE)];
    assert_eq!(http(addr, &ok(), INITIALIZE).0, 200);
    let evil_host = vec![
        ("host", format!("evil.example.com:{}", addr.port())),
        bearer(ALICE),
    ];
    assert_eq!(http(addr, &evil_host, INITIALIZE).0, 403);
    let no_port = vec![("host", "127.0.0.1".to_owned()), bearer(ALICE)];
    assert_eq!(http(addr, &no_port, INITIALIZE).0, 403);
    let localhost = vec![
        ("host", format!("localhost:{}", addr.port())),
        bearer(ALICE),
    ];
    assert_eq!(http(addr, &localhost, INITIALIZE).0, 200);
    let mut evil_origin = ok();
    evil_origin.push(("origin", "http://evil.example.com".into()));
    assert_eq!(http(addr, &evil_origin, INITIALIZE).0, 403);
    let mut local_origin = ok();
    local_origin.push(("origin", "http://localhost:6274".into()));
    assert_eq!(http(addr, &local_origin, INITIALIZE).0, 200);
    // Host and Origin are judged before the token: a rebinding page learns nothing about it.
    assert_eq!(http(addr, &[("host", "evil:1".into())], INITIALIZE).0, 403);

    let (status, head, _) = http(addr, &[host(addr)], INITIALIZE);
    assert_eq!(status, 401);
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: bearer"),
        "{head}"
    );
    assert_eq!(
        http(
            addr,
            &[host(addr), bearer("x".repeat(40).as_str())],
            INITIALIZE
        )
        .0,
        401
    );
    assert_eq!(
        http(
            addr,
            &[host(addr), ("authorization", ALICE.into())],
            INITIALIZE
        )
        .0,
        401
    );
    // Even garbage is refused with 401, before anything reads it as MCP.
    assert_eq!(http(addr, &[host(addr)], "not json").0, 401);
    assert_eq!(http(addr, &ok(), "not json").0, 400);
    shutdown.cancel();
}

#[test]
fn http_sessions_belong_to_their_token() {
    let rig = rig();
    let (addr, shutdown) = http_server(&rig.server, None);
    let (status, head, _) = http(addr, &[host(addr), bearer(ALICE)], INITIALIZE);
    assert_eq!(status, 200);
    let session = session_id(&head);
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let as_alice = vec![
        host(addr),
        bearer(ALICE),
        ("mcp-session-id", session.clone()),
        ("mcp-protocol-version", "2025-11-25".into()),
    ];
    assert_eq!(http(addr, &as_alice, ping).0, 200);
    let as_bob = vec![
        host(addr),
        bearer(BOB),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25".into()),
    ];
    assert_eq!(http(addr, &as_bob, ping).0, 404);
    shutdown.cancel();
}

#[test]
fn http_closing_the_answer_stream_cancels_the_call() {
    let rig = rig();
    let (addr, shutdown) = http_server(&rig.server, Some(Principal::new("anon", "default")));
    // Anonymous here: no Authorization header at all.
    let (status, head, _) = http(addr, &[host(addr)], INITIALIZE);
    assert_eq!(status, 200);
    let session = session_id(&head);
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{}}}"#;
    let headers = vec![
        host(addr),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-11-25".into()),
    ];
    let (status, _, stream) = http(addr, &headers, call);
    assert_eq!(status, 200);
    wait_for("the call started", || {
        rig.sleep.started.load(Ordering::SeqCst) == 1
    });
    drop(stream);
    wait_for("the call was cancelled", || {
        rig.sleep.stopped.load(Ordering::SeqCst) == 1
    });
    // A presented but wrong token is still refused, anonymous mode or not.
    assert_eq!(
        http(
            addr,
            &[host(addr), bearer(BOB.trim_end_matches('0'))],
            INITIALIZE
        )
        .0,
        401
    );
    shutdown.cancel();
}

#[test]
fn anonymous_serving_is_for_loopback_only() {
    let rig = rig();
    let listener = toolgate_mcp::bind("0.0.0.0:0".parse().unwrap(), true).unwrap();
    let mut options = HttpOptions::new(TokenTable::new());
    options.dangerous_anonymous = Some(Principal::new("anon", "default"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let error = runtime
        .block_on(toolgate_mcp::serve_http(
            Arc::clone(&rig.server),
            listener,
            options,
            CancellationToken::new(),
        ))
        .unwrap_err();
    assert!(error.to_string().contains("loopback"), "{error}");
    let listener = toolgate_mcp::bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
    let error = runtime
        .block_on(toolgate_mcp::serve_http(
            Arc::clone(&rig.server),
            listener,
            HttpOptions::new(TokenTable::new()),
            CancellationToken::new(),
        ))
        .unwrap_err();
    assert!(
        matches!(error, toolgate_mcp::HttpError::NoTokens),
        "{error}"
    );
    let _ = HeadlessBroker;
}
