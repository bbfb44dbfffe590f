//! Every method and notification of every MCP revision toolgate claims, answered or refused
//! with `-32601` on purpose: the table is `tests/corpus/mcp_methods.jsonl`, one row a line
//! (revision, method, kind, expected, the params to send, what the result must hold, and why),
//! driven through `toolgate serve` as raw JSON-RPC over stdio, and over streamable HTTP for
//! the rows marked `http`.
//!
//! Then `subscriptions/listen` end to end: a 2026-07-28 client hears that toolgate's tools
//! changed when an upstream's tool list changes, tagged with its subscription's id, over stdio
//! (raw JSON-RPC, and the official Python SDK's client) and over HTTP (the SDK).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use clients::*;
use support::clients;
use support::home;

const MODERN: &str = "2026-07-28";
const WAIT: Duration = Duration::from_secs(20);
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One row of `tests/corpus/mcp_methods.jsonl`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    revision: String,
    method: String,
    kind: Kind,
    expected: Expected,
    #[serde(default)]
    params: Option<Value>,
    /// JSON pointers into the result (into the acknowledgement's params for a subscription)
    /// and the value each must hold; `null` for a member that must be absent.
    #[serde(default)]
    result: BTreeMap<String, Value>,
    /// Also driven over streamable HTTP.
    #[serde(default)]
    http: bool,
    why: String,
}

#[derive(Debug, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    Request,
    Notification,
}

#[derive(Debug, Deserialize, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Expected {
    /// A result.
    Answered,
    /// A `-32601` error.
    MethodNotFound,
    /// `notifications/subscriptions/acknowledged` tagged with the request's id, and no answer
    /// once the client cancels.
    Acknowledged,
    /// A notification: nothing comes back, and the session goes on.
    Accepted,
}

fn rows() -> Vec<Row> {
    let text = fs::read_to_string(root().join("tests/corpus/mcp_methods.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The revisions the rows cover, in the order they first appear.
fn revisions(rows: &[Row]) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for row in rows {
        if !seen.contains(&row.revision) {
            seen.push(row.revision.clone());
        }
    }
    seen
}

/// What a 2026-07-28 request carries in place of a handshake.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "corpus", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

fn message(row: &Row, id: &str) -> Value {
    let mut params = row.params.clone().unwrap_or_else(|| json!({}));
    if row.revision == MODERN && row.method != "initialize" {
        params["_meta"] = modern_meta();
    }
    let mut message = json!({"jsonrpc": "2.0", "method": row.method, "params": params});
    if row.kind == Kind::Request {
        message["id"] = json!(id);
    }
    message
}

fn request_id(i: usize, row: &Row) -> String {
    format!("{i}:{}", row.method)
}

/// Checks one row against what came back for it: `answer` (a response or an error) and, for a
/// subscription, its acknowledgement. Mismatches are pushed to `failures`.
fn check(
    row: &Row,
    transport: &str,
    answer: Option<&Value>,
    ack: Option<&Value>,
    failures: &mut Vec<String>,
) {
    let what = format!(
        "{} {} over {transport} (expected {:?}: {})",
        row.revision, row.method, row.expected, row.why
    );
    let mut fail = |problem: String| failures.push(format!("{what}: {problem}"));
    let holds = |target: &Value, fail: &mut dyn FnMut(String)| {
        for (pointer, wanted) in &row.result {
            let found = target.pointer(pointer);
            let ok = match wanted {
                Value::Null => found.is_none(),
                wanted => found == Some(wanted),
            };
            if !ok {
                fail(format!("`{pointer}` is {found:?}, not {wanted}: {target}"));
            }
        }
    };
    match row.expected {
        Expected::Answered => match answer {
            Some(answer) if answer.get("result").is_some() => holds(&answer["result"], &mut fail),
            other => fail(format!("no result: {other:?}")),
        },
        Expected::MethodNotFound => match answer {
            Some(answer) if answer["error"]["code"] == -32601 => {}
            other => fail(format!("not -32601: {other:?}")),
        },
        Expected::Acknowledged => {
            match ack {
                Some(ack) => holds(&ack["params"], &mut fail),
                None => fail("no acknowledgement".into()),
            }
            if let Some(answer) = answer {
                fail(format!("a cancelled subscription was answered: {answer}"));
            }
        }
        Expected::Accepted => {
            if let Some(answer) = answer {
                fail(format!("a notification was answered: {answer}"));
            }
        }
    }
}

/// `toolgate serve` on a workspace of its own, speaking raw JSON-RPC lines.
struct RawStdio {
    child: Child,
    input: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// Everything read so far.
    seen: Vec<Value>,
    _dir: Option<tempfile::TempDir>,
}

impl RawStdio {
    fn start(ws: &Path, config: &Path) -> RawStdio {
        let mut child = serve_stdio(ws, config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let lines = lines_of(child.stdout.take().unwrap(), |line| {
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
        });
        RawStdio {
            input: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            _dir: None,
        }
    }

    fn send(&mut self, message: &Value) {
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
    }

    /// Reads until `found` holds for a message read (now or before), or panics after `limit`.
    fn until(&mut self, what: &str, limit: Duration, found: impl Fn(&Value) -> bool) -> Value {
        if let Some(message) = self.seen.iter().find(|m| found(m)) {
            return message.clone();
        }
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no {what} within {limit:?}; read: {:#?}", self.seen));
            self.seen.push(message.clone());
            if found(&message) {
                return message;
            }
        }
    }

    /// Everything that arrives within `period`.
    fn drain(&mut self, period: Duration) {
        let deadline = Instant::now() + period;
        while let Ok(message) = self
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            self.seen.push(message);
        }
    }

    fn answer(&self, id: &str) -> Option<&Value> {
        self.seen
            .iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
    }

    fn ack(&self, id: &str) -> Option<&Value> {
        self.seen.iter().find(|m| {
            m["method"] == "notifications/subscriptions/acknowledged"
                && m["params"]["_meta"][SUBSCRIPTION_ID] == id
        })
    }
}

impl Drop for RawStdio {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace with `a.txt`, and an empty configuration beside it.
fn plain_workspace() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let config = dir.path().join("toolgate.toml");
    fs::write(&config, "").unwrap();
    (dir, ws, config)
}

/// The sentinel that shows a session still answers after every row.
fn sentinel(revision: &str) -> Value {
    let mut params = json!({});
    if revision == MODERN {
        params["_meta"] = modern_meta();
    }
    json!({"jsonrpc": "2.0", "id": "sentinel", "method": "tools/list", "params": params})
}

#[test]
fn every_method_of_every_revision_over_stdio() {
    let rows = rows();
    let (_dir, ws, config) = plain_workspace();
    let mut failures = Vec::new();
    let revisions = revisions(&rows);
    assert_eq!(
        revisions,
        [
            "2024-11-05",
            "2025-03-26",
            "2025-06-18",
            "2025-11-25",
            MODERN
        ],
        "the corpus covers every revision toolgate claims (rmcp's KNOWN_VERSIONS)"
    );
    for revision in &revisions {
        let mut server = RawStdio::start(&ws, &config);
        let session: Vec<(usize, &Row)> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| &r.revision == revision)
            .collect();
        for (i, row) in &session {
            server.send(&message(row, &request_id(*i, row)));
        }
        // Every request is answered but the subscriptions, which are acknowledged.
        for (i, row) in &session {
            let id = request_id(*i, row);
            match (row.kind, row.expected) {
                (Kind::Notification, _) => {}
                (_, Expected::Acknowledged) => {
                    server.until(&format!("acknowledgement of {id}"), WAIT, |m| {
                        m["method"] == "notifications/subscriptions/acknowledged"
                            && m["params"]["_meta"][SUBSCRIPTION_ID] == id.as_str()
                    });
                    let mut cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                        "params": {"requestId": id, "reason": "the table is done with it"}});
                    if revision == MODERN {
                        cancel["params"]["_meta"] = modern_meta();
                    }
                    server.send(&cancel);
                }
                _ => {
                    server.until(&format!("answer to {id}"), WAIT, |m| {
                        m["id"] == id.as_str() && m.get("method").is_none()
                    });
                }
            }
        }
        server.send(&sentinel(revision));
        server.until("the sentinel's answer", WAIT, |m| m["id"] == "sentinel");
        // Long enough for a cancelled subscription's result to show, if it were sent.
        server.drain(Duration::from_millis(300));
        for (i, row) in &session {
            let id = request_id(*i, row);
            let answer = match row.kind {
                Kind::Request => server.answer(&id),
                Kind::Notification => None,
            };
            check(row, "stdio", answer, server.ack(&id), &mut failures);
        }
        for message in &server.seen {
            if message.get("error").is_some() && message["id"].is_null() {
                failures.push(format!("{revision}: an error nobody asked for: {message}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

impl HttpServer {
    /// `toolgate serve --http 127.0.0.1:0 --dangerous-no-auth`.
    fn start(ws: &Path, config: &Path) -> HttpServer {
        HttpServer::spawn(serve_http(ws, config).arg("--dangerous-no-auth"))
    }

    /// POSTs `message` and reads the messages that come back (a JSON body, or an event
    /// stream) until the response ends or `enough` holds for one of them; the status, the
    /// headers and the messages.
    fn post(
        &self,
        message: &Value,
        headers: &[(&str, String)],
        enough: impl Fn(&Value) -> bool,
    ) -> (u16, String, Vec<Value>) {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(WAIT)).unwrap();
        let body = message.to_string();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut reader = BufReader::new(stream);
        let mut head = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            head.push_str(&line);
        }
        let status = head[9..12].parse().unwrap();
        let lower = head.to_ascii_lowercase();
        let chunked = lower.contains("transfer-encoding: chunked");
        let events = lower.contains("content-type: text/event-stream");
        let mut body = Vec::new();
        let mut messages = Vec::new();
        loop {
            let piece = if chunked {
                let mut size = String::new();
                if reader.read_line(&mut size).unwrap_or(0) == 0 {
                    break;
                }
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                if size == 0 {
                    break;
                }
                let mut piece = vec![0; size + 2];
                reader.read_exact(&mut piece).unwrap();
                piece.truncate(size);
                piece
            } else {
                let mut piece = Vec::new();
                reader.read_to_end(&mut piece).unwrap();
                if piece.is_empty() {
                    break;
                }
                piece
            };
            body.extend_from_slice(&piece);
            if events {
                // Complete events only; the rest waits for the next piece.
                let text = String::from_utf8_lossy(&body).replace("\r\n", "\n");
                let Some(end) = text.rfind("\n\n") else {
                    continue;
                };
                messages.extend(sse_messages(&text[..end]));
                body = text.as_bytes()[end + 2..].to_vec();
                if messages.iter().any(&enough) {
                    break;
                }
            }
            if !chunked {
                break;
            }
        }
        if !events && !body.is_empty() {
            messages.push(serde_json::from_slice(&body).unwrap());
        }
        (status, head, messages)
    }
}

#[test]
fn methods_marked_for_http_over_streamable_http() {
    let rows = rows();
    let (_dir, ws, config) = plain_workspace();
    let server = HttpServer::start(&ws, &config);
    let mut failures = Vec::new();
    let mut checked = 0;
    for revision in revisions(&rows) {
        let mut session: Option<String> = None;
        for (i, row) in rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.revision == revision && r.http)
        {
            let id = request_id(i, row);
            let mut headers = vec![("mcp-protocol-version", revision.clone())];
            if revision == MODERN {
                headers.push(("mcp-method", row.method.clone()));
                if let Some(name) = row.params.as_ref().and_then(|p| p["name"].as_str()) {
                    headers.push(("mcp-name", name.to_owned()));
                }
            }
            if let Some(session) = &session {
                headers.push(("mcp-session-id", session.clone()));
            }
            let (status, head, messages) = server.post(&message(row, &id), &headers, |m| {
                m["id"] == id.as_str()
                    || (m["method"] == "notifications/subscriptions/acknowledged"
                        && m["params"]["_meta"][SUBSCRIPTION_ID] == id.as_str())
            });
            if row.method == "initialize" {
                session = head.lines().find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("mcp-session-id")
                        .then(|| value.trim().to_owned())
                });
                assert!(session.is_some(), "{revision}: no session: {head}");
            }
            if row.kind == Kind::Notification && status != 202 {
                failures.push(format!(
                    "{revision} {}: a notification got HTTP {status}",
                    row.method
                ));
            }
            let answer = messages
                .iter()
                .find(|m| m["id"] == id.as_str() && m.get("method").is_none());
            let ack = messages.iter().find(|m| {
                m["method"] == "notifications/subscriptions/acknowledged"
                    && m["params"]["_meta"][SUBSCRIPTION_ID] == id.as_str()
            });
            // The subscription is cancelled by dropping its stream, which `post` did.
            check(row, "http", answer, ack, &mut failures);
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} rows over HTTP");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A workspace whose configuration has the test upstream (tests/upstream/test_upstream.py),
/// its `echo` admitted; SIGUSR1 to the upstream changes `echo`'s description, so toolgate
/// quarantines it and the tool list changes.
struct Upstream {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Upstream {
    fn new() -> Upstream {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let state = dir.path().join("state");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&state).unwrap();
        let quoted = |p: &Path| serde_json::to_string(&p.display().to_string()).unwrap();
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"test\"\ncommand = [{}, {}, {}]\ncall_timeout_ms = 3000\nrefresh_secs = 0\n\n[upstream.sandbox]\nwrite = [{}]\n{}",
                quoted(&python()),
                quoted(&root().join("tests/upstream/test_upstream.py")),
                quoted(&state),
                quoted(&state),
                repo_read(),
            ),
        )
        .unwrap();
        let admitted = home::toolgate()
            .args([
                "tools",
                "admit",
                "test",
                "echo",
                "--effect",
                "read_only",
                "--config",
            ])
            .arg(&config)
            .output()
            .unwrap();
        assert!(admitted.status.success(), "{admitted:?}");
        Upstream { dir, config }
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn pidfile(&self) -> PathBuf {
        self.dir.path().join("state/pid")
    }

    /// Sends the upstream SIGUSR1, once it has written its pid.
    fn change(&self) {
        wait_until("the upstream wrote its pid", WAIT, || {
            self.pidfile().exists()
        });
        let pid = fs::read_to_string(self.pidfile()).unwrap();
        let status = Command::new("kill")
            .args(["-USR1", pid.trim()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn serve_args(&self) -> Vec<String> {
        stdio_serve_args(&self.ws(), &self.config)
    }
}

/// Runs tests/mcp/listen.py on `plan`.
fn listen(plan: &Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.json");
    fs::write(&path, plan.to_string()).unwrap();
    // listen.py passes its home on to the server it starts.
    let mut child = home::isolated(Command::new(python()))
        .arg(root().join("tests/mcp/listen.py"))
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("listen.py did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

fn check_heard(report: &Value) {
    assert_eq!(report["protocolVersion"], MODERN, "{report}");
    assert_eq!(
        report["honored"],
        json!({"toolsListChanged": true}),
        "prompts are not honoured: {report}"
    );
    assert_eq!(report["events"], json!(["ToolsListChanged"]), "{report}");
    let listed = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(
        listed("listed_before").contains(&"test__echo".to_owned()),
        "{report}"
    );
    assert!(
        !listed("listed_after").contains(&"test__echo".to_owned()),
        "the changed tool is quarantined: {report}"
    );
}

#[test]
fn sdk_listening_over_stdio_hears_the_tool_list_change() {
    let upstream = Upstream::new();
    let report = listen(&json!({
        "transport": "stdio",
        "command": toolgate_bin(),
        "args": upstream.serve_args(),
        "pidfile": upstream.pidfile(),
    }));
    check_heard(&report);
}

#[test]
fn sdk_listening_over_http_hears_the_tool_list_change() {
    let upstream = Upstream::new();
    let server = HttpServer::start(&upstream.ws(), &upstream.config);
    let report = listen(&json!({
        "transport": "http",
        "url": server.url(),
        "pidfile": upstream.pidfile(),
    }));
    check_heard(&report);
}

/// On the wire: the acknowledgement and the change are tagged with the listen request's id as
/// the client chose it, nothing is sent unasked, and closing the input ends the subscription
/// with its result.
#[test]
fn raw_listen_over_stdio_is_tagged_with_the_clients_id() {
    let upstream = Upstream::new();
    let mut server = RawStdio::start(&upstream.ws(), &upstream.config);
    let listen = json!({"jsonrpc": "2.0", "id": "sub-7", "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}});
    server.send(&listen);
    let ack = server.until("the acknowledgement", WAIT, |m| {
        m["method"] == "notifications/subscriptions/acknowledged"
    });
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], "sub-7", "{ack}");
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true})
    );
    upstream.change();
    let changed = server.until("the tool list change", WAIT, |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    assert_eq!(
        changed["params"]["_meta"][SUBSCRIPTION_ID], "sub-7",
        "{changed}"
    );
    // Closing the input is this transport's shutdown: the subscription ends with its result.
    drop(server.input.take());
    let result = server.until("the subscription's result", WAIT, |m| m["id"] == "sub-7");
    assert_eq!(
        result["result"]["_meta"][SUBSCRIPTION_ID], "sub-7",
        "{result}"
    );
    let untagged: Vec<&Value> = server
        .seen
        .iter()
        .filter(|m| m.get("method").is_some() && m["params"]["_meta"][SUBSCRIPTION_ID].is_null())
        .collect();
    assert!(untagged.is_empty(), "sent unasked: {untagged:?}");
}

/// A server that stops (SIGTERM) ends an open subscription's stream with its result, which
/// tells the client the end was deliberate.
#[test]
fn a_stopping_http_server_ends_subscriptions_with_their_result() {
    let (_dir, ws, config) = plain_workspace();
    let server = HttpServer::start(&ws, &config);
    let pid = server.child.id().to_string();
    // Stopped once the subscription is acknowledged, so that it is open when the server stops.
    let stopped = std::cell::Cell::new(None);
    let enough = |m: &Value| {
        if m["method"] == "notifications/subscriptions/acknowledged" && stopped.get().is_none() {
            let status = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
            stopped.set(Some(status.success()));
        }
        m["id"] == 41
    };
    let listen = json!({"jsonrpc": "2.0", "id": 41, "method": "subscriptions/listen",
        "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}});
    let headers = [
        ("mcp-protocol-version", MODERN.to_owned()),
        ("mcp-method", "subscriptions/listen".to_owned()),
    ];
    let (status, _, messages) = server.post(&listen, &headers, enough);
    assert_eq!(stopped.get(), Some(true), "{messages:?}");
    assert_eq!(status, 200);
    assert_eq!(
        messages[0]["method"], "notifications/subscriptions/acknowledged",
        "{messages:?}"
    );
    let result = messages
        .iter()
        .find(|m| m["id"] == 41)
        .unwrap_or_else(|| panic!("the stream ended without a result: {messages:?}"));
    assert_eq!(result["result"]["_meta"][SUBSCRIPTION_ID], 41, "{result}");
    assert_eq!(result["result"]["resultType"], "complete", "{result}");
}

/// A cancelled subscription hears nothing more, while another one on the same channel does.
#[test]
fn a_cancelled_subscription_hears_no_more_changes() {
    let upstream = Upstream::new();
    let mut server = RawStdio::start(&upstream.ws(), &upstream.config);
    for id in ["gone", "kept"] {
        server.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": true}}}),
        );
        server.until("the acknowledgement", WAIT, |m| {
            m["method"] == "notifications/subscriptions/acknowledged"
                && m["params"]["_meta"][SUBSCRIPTION_ID] == id
        });
    }
    server.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"_meta": modern_meta(), "requestId": "gone"}}),
    );
    // The cancellation is read before this request, which is answered after it.
    server.send(&sentinel(MODERN));
    server.until("the sentinel's answer", WAIT, |m| m["id"] == "sentinel");
    upstream.change();
    server.until("the change on the subscription kept", WAIT, |m| {
        m["method"] == "notifications/tools/list_changed"
            && m["params"]["_meta"][SUBSCRIPTION_ID] == "kept"
    });
    server.drain(Duration::from_millis(500));
    let after_cancel: Vec<&Value> = server
        .seen
        .iter()
        .filter(|m| m["id"] == "gone" || m["params"]["_meta"][SUBSCRIPTION_ID] == "gone")
        .filter(|m| m["method"] != "notifications/subscriptions/acknowledged")
        .collect();
    assert!(after_cancel.is_empty(), "{after_cancel:?}");
}
