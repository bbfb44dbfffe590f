//! `toolgate serve --http` answering a plain keep-alive client promptly, with raw HTTP/1.1 on
//! 127.0.0.1 as Python's `http.client` speaks it: one connection for every call, `TCP_NODELAY`
//! on the client's socket, a request's head and body in two writes.
//!
//! Without `TCP_NODELAY` on the server's sockets, an answer that goes out in several writes
//! (an event stream's events) waits each call for the client's delayed acknowledgement, about
//! 40 ms; these tests hold the fastest quarter of twenty calls under 35 ms each, which no call
//! made to wait could be. They also hold the choice of answer: a call that reports nothing on
//! the way is answered with one `application/json` body, one that reports progress first with
//! an event stream. The progress comes from an upstream server of the test's own, which
//! reports it for every call at once.
//!
//! A call that needs nothing of rmcp's session worker is answered by toolgate itself: the
//! tests compare its answers with rmcp's for the same calls, and hold its event stream (for a
//! call that runs past the keep-alive interval) and its cancellation.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use support::clients;
use support::home;

const TOKEN: &str = "latency-0123456789abcdef0123456789abcdef";
const PROTOCOL: &str = "2025-11-25";
const CALLS: usize = 20;
/// Nagle's algorithm holds the second write of every answer until the client's delayed
/// acknowledgement, at least 40 ms on Linux, so at its pace no call takes less. toolgate's own
/// pace is a few ms a call in a debug build; a machine busy with other work slows some calls
/// past that, rarely a quarter of them, so the quarter fastest must each take less than this.
const NAGLE_FLOOR: Duration = Duration::from_millis(35);

/// An upstream MCP server over stdio with two tools: `tick`, that reports progress for the
/// call's token (when it has one) before it answers, at once; and `nap`, that answers after
/// six seconds (longer than toolgate's keep-alive interval), on a thread of its own.
const PROGRESS_UPSTREAM: &str = r#"
import json, sys, threading, time
lock = threading.Lock()
def write(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
def nap(id):
    time.sleep(6)
    write({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "awake"}]}})
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        write({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "ticker", "version": "1"}}})
    elif method == "tools/list":
        write({"jsonrpc": "2.0", "id": id, "result": {"tools": [{
            "name": "tick", "description": "Reports progress once, then answers.",
            "inputSchema": {"type": "object", "properties": {}}}, {
            "name": "nap", "description": "Answers after six seconds.",
            "inputSchema": {"type": "object", "properties": {}}}]}})
    elif method == "tools/call" and message["params"]["name"] == "nap":
        threading.Thread(target=nap, args=(id,), daemon=True).start()
    elif method == "tools/call":
        token = message["params"].get("_meta", {}).get("progressToken")
        if token is not None:
            write({"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": token, "progress": 1, "total": 2}})
        write({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "tock"}]}})
    elif id is not None:
        write({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no such method"}})
"#;

/// `toolgate serve --http 127.0.0.1:0` on a workspace of its own, stopped when dropped.
struct Server {
    addr: SocketAddr,
    _served: clients::HttpServer,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start() -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir(&ws).unwrap();
        fs::write(ws.join("a.txt"), "alpha\n".repeat(20)).unwrap();
        let upstream = dir.path().join("progress_upstream.py");
        fs::write(&upstream, PROGRESS_UPSTREAM).unwrap();
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN\"\nactor = \"alice\"\nprofile = \"default\"\n\n\
                 [[upstream]]\nname = \"fx\"\ncommand = [\"python3\", {}]\n\
                 [upstream.sandbox]\nread = [{}]\n",
                clients::quoted(&upstream),
                clients::quoted(dir.path()),
            ),
        )
        .unwrap();
        for tool in ["tick", "nap"] {
            let admitted = home::toolgate()
                .args([
                    "tools",
                    "admit",
                    "fx",
                    tool,
                    "--effect",
                    "read_only",
                    "--config",
                ])
                .arg(&config)
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .output()
                .unwrap();
            assert!(admitted.status.success(), "admit {tool}: {admitted:?}");
        }
        let served = clients::HttpServer::spawn(
            clients::serve_http(&ws, &config)
                .env("XDG_STATE_HOME", dir.path().join("state"))
                .env("TOOLGATE_TEST_TOKEN", TOKEN),
        );
        Server {
            addr: served.addr,
            _served: served,
            _dir: dir,
        }
    }
}

/// One answer: its status, content type, its body and the JSON-RPC messages in it.
#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: String,
    session: Option<String>,
    body: String,
    messages: Vec<Value>,
}

/// One keep-alive connection, used as `http.client` uses it.
struct Connection {
    addr: SocketAddr,
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    session: Option<String>,
    next_id: u64,
}

impl Connection {
    fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).unwrap();
        // As `http.client` does: the client's own writes are not what is measured.
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Connection {
            addr,
            writer: stream.try_clone().unwrap(),
            reader: BufReader::new(stream),
            session: None,
            next_id: 0,
        }
    }

    /// Another connection to the same server, in the same session.
    fn sibling(&self) -> Connection {
        let mut other = Connection::open(self.addr);
        other.session.clone_from(&self.session);
        other
    }

    /// POSTs `message`: the head in one write, the body in a second.
    fn post(&mut self, message: &Value) -> Reply {
        self.send(message, &[]);
        self.read_reply()
    }

    /// Sends `message` with `headers` besides the usual, without reading the answer.
    fn send(&mut self, message: &Value, headers: &[(&str, &str)]) {
        let body = message.to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\nauthorization: Bearer {TOKEN}\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
             mcp-protocol-version: {PROTOCOL}\r\ncontent-length: {}\r\n",
            self.addr,
            body.len()
        );
        if let Some(session) = &self.session {
            head.push_str(&format!("mcp-session-id: {session}\r\n"));
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        self.writer.write_all(head.as_bytes()).unwrap();
        self.writer.write_all(body.as_bytes()).unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Reply {
        self.request_with(method, params, &[])
    }

    fn request_with(&mut self, method: &str, params: Value, headers: &[(&str, &str)]) -> Reply {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(&message, headers);
        self.read_reply()
    }

    fn begin(&mut self) {
        let reply = self.request(
            "initialize",
            json!({"protocolVersion": PROTOCOL, "capabilities": {},
                   "clientInfo": {"name": "latency", "version": "1"}}),
        );
        assert_eq!(reply.status, 200, "{reply:?}");
        self.session = reply.session;
        assert!(self.session.is_some(), "the session has an id");
        let accepted = self.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert_eq!(accepted.status, 202, "{accepted:?}");
    }

    fn read_reply(&mut self) -> Reply {
        let mut status = 0;
        let mut content_type = String::new();
        let mut session = None;
        let mut length = None;
        let mut chunked = false;
        loop {
            let mut line = String::new();
            assert!(
                self.reader.read_line(&mut line).unwrap() > 0,
                "the server closed the connection"
            );
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(code) = line.strip_prefix("HTTP/1.1 ") {
                status = code[..3].parse().unwrap();
                continue;
            }
            let (name, value) = line.split_once(':').unwrap();
            let value = value.trim().to_owned();
            match name.to_ascii_lowercase().as_str() {
                "content-type" => content_type = value,
                "content-length" => length = Some(value.parse::<usize>().unwrap()),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                "mcp-session-id" => session = Some(value),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.reader.read_line(&mut size).unwrap();
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut piece = vec![0; size + 2];
                self.reader.read_exact(&mut piece).unwrap();
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&piece[..size]);
            }
        } else {
            body.resize(length.unwrap_or(0), 0);
            self.reader.read_exact(&mut body).unwrap();
        }
        let body = String::from_utf8(body).unwrap();
        let messages = if content_type.starts_with("text/event-stream") {
            clients::sse_messages(&body)
        } else if content_type.starts_with("application/json") {
            vec![serde_json::from_str(&body).unwrap()]
        } else {
            Vec::new()
        };
        Reply {
            status,
            content_type,
            session,
            body,
            messages,
        }
    }
}

fn read_a_file(connection: &mut Connection) -> Reply {
    let reply = connection.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": "a.txt"}}),
    );
    assert_eq!(reply.status, 200, "{reply:?}");
    let result = &reply.messages.last().unwrap()["result"];
    assert_eq!(result["isError"], json!(false), "{reply:?}");
    assert!(result.to_string().contains("alpha"), "{reply:?}");
    reply
}

/// A call of the upstream's `tick`, with a progress token when `token` is given.
fn tick(connection: &mut Connection, token: Option<&str>) -> Reply {
    let mut params = json!({"name": "fx__tick", "arguments": {}});
    if let Some(token) = token {
        params["_meta"] = json!({"progressToken": token});
    }
    let reply = connection.request("tools/call", params);
    assert_eq!(reply.status, 200, "{reply:?}");
    let result = &reply.messages.last().unwrap()["result"];
    assert_eq!(result["isError"], json!(false), "{reply:?}");
    assert!(result.to_string().contains("tock"), "{reply:?}");
    reply
}

fn is_event_stream(reply: &Reply) -> bool {
    reply.content_type.starts_with("text/event-stream")
}

/// How long each of `CALLS` calls of `call` took, fastest first.
fn timed(mut call: impl FnMut(usize)) -> Vec<Duration> {
    let mut took: Vec<Duration> = (0..CALLS)
        .map(|n| {
            let started = Instant::now();
            call(n);
            started.elapsed()
        })
        .collect();
    took.sort();
    took
}

fn assert_not_held(what: &str, took: &[Duration]) {
    let quarter = took[CALLS / 4 - 1];
    assert!(
        quarter < NAGLE_FLOOR,
        "{what}: the fastest quarter of {CALLS} calls on one connection took up to {quarter:?} each: {took:?}"
    );
}

#[test]
fn a_keep_alive_client_writing_head_and_body_apart_is_answered_without_waiting() {
    let server = Server::start();
    let mut connection = Connection::open(server.addr);
    connection.begin();
    read_a_file(&mut connection);
    let reads = timed(|_| {
        read_a_file(&mut connection);
    });
    assert_not_held("reads", &reads);

    // The same for answers that are event streams, written event by event.
    tick(&mut connection, Some("warm"));
    let streamed = timed(|n| {
        let reply = tick(&mut connection, Some(&format!("t{n}")));
        assert!(is_event_stream(&reply), "{reply:?}");
    });
    assert_not_held("streamed answers", &streamed);
}

#[test]
fn a_call_that_reports_nothing_gets_json_and_one_that_notifies_gets_an_event_stream() {
    let server = Server::start();
    let mut connection = Connection::open(server.addr);
    connection.begin();

    let read = read_a_file(&mut connection);
    assert_eq!(read.content_type, "application/json", "{read:?}");
    assert_eq!(read.messages.len(), 1, "{read:?}");

    // The upstream's call, without a token: it reports nothing, so JSON too.
    let quiet = tick(&mut connection, None);
    assert_eq!(quiet.content_type, "application/json", "{quiet:?}");

    let told = tick(&mut connection, Some("p1"));
    assert!(is_event_stream(&told), "{told:?}");
    let methods: Vec<&str> = told
        .messages
        .iter()
        .map(|m| m["method"].as_str().unwrap_or("(result)"))
        .collect();
    assert_eq!(
        methods,
        ["notifications/progress", "(result)"],
        "the progress, then the result, in order: {told:?}"
    );
    assert_eq!(told.messages[0]["params"]["progressToken"], json!("p1"));

    // The connection serves on after a stream.
    let again = read_a_file(&mut connection);
    assert_eq!(again.content_type, "application/json", "{again:?}");
}

/// `messages` without what differs between any two calls: the request's id, the call's id
/// wherever it appears, and the evidence's timings.
fn comparable(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .map(|message| {
            let call_id = message["result"]["_meta"]["toolgate/call_id"]
                .as_str()
                .unwrap_or("(none)")
                .to_owned();
            let text = message.to_string().replace(&call_id, "(call)");
            let mut message: Value = serde_json::from_str(&text).unwrap();
            message["id"] = Value::Null;
            if let Some(evidence) = message["result"]["_meta"]
                .get_mut("toolgate/evidence")
                .and_then(Value::as_object_mut)
            {
                for varies in ["request_id", "durations_ns", "total_ns"] {
                    evidence.remove(varies);
                }
            }
            message
        })
        .collect()
}

/// A `tools/call` that needs nothing of rmcp's session worker is answered by toolgate itself:
///
/// - one that runs past the keep-alive interval (5 s) is answered as an event stream that
///   opens with toolgate's keep-alive comment (rmcp's streams open with a priming event), then
///   its result; so calls of this session, with these headers, are answered by toolgate;
/// - one that its client cancels with `notifications/cancelled`, on a POST of its own, ends at
///   once, cancelled;
/// - while those run, the same calls sent with an `Mcp-Method` header (which rmcp checks
///   against the body, and so which toolgate leaves to rmcp) go through rmcp's handler, and
///   both answers say the same, for reads, refusals, unknown tools and an upstream's call.
#[test]
fn calls_answered_without_rmcp_say_what_rmcp_says_stream_when_long_and_can_be_cancelled() {
    let server = Server::start();
    let mut first = Connection::open(server.addr);
    first.begin();
    read_a_file(&mut first);
    let mut second = first.sibling();
    let mut third = first.sibling();
    let nap = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
               "params": {"name": "fx__nap", "arguments": {}}})
    };
    first.send(&nap(901), &[]);
    second.send(&nap(902), &[]);
    std::thread::sleep(Duration::from_millis(500));
    let asked = Instant::now();
    let accepted = third.post(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": 902, "reason": "changed my mind"}}),
    );
    assert_eq!(accepted.status, 202, "{accepted:?}");
    let cancelled = second.read_reply();
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "the cancelled call ended {:?} after it was cancelled",
        asked.elapsed()
    );
    assert_eq!(cancelled.content_type, "application/json", "{cancelled:?}");
    let result = &cancelled.messages[0]["result"];
    assert_eq!(result["isError"], json!(true), "{cancelled:?}");
    assert!(result.to_string().contains("cancel"), "{cancelled:?}");

    for params in [
        json!({"name": "read_file", "arguments": {"path": "a.txt"}}),
        json!({"name": "read_file", "arguments": {"path": "a.txt", "limit": 2}, "_meta": {}}),
        json!({"name": "read_file", "arguments": {"path": "../outside.txt"}}),
        json!({"name": "read_file", "arguments": {"path": "a.txt", "tail": true}}),
        json!({"name": "no_such_tool", "arguments": {}}),
        json!({"name": "fx__tick", "arguments": {}}),
    ] {
        let direct = third.request("tools/call", params.clone());
        let through_rmcp = third.request_with(
            "tools/call",
            params.clone(),
            &[("mcp-method", "tools/call")],
        );
        assert_eq!(direct.status, through_rmcp.status, "{params}");
        assert_eq!(direct.content_type, through_rmcp.content_type, "{params}");
        assert_eq!(
            comparable(&direct.messages),
            comparable(&through_rmcp.messages),
            "{params}"
        );
    }

    let slept = first.read_reply();
    assert!(is_event_stream(&slept), "{slept:?}");
    assert!(slept.body.starts_with(": keep-alive"), "{slept:?}");
    assert_eq!(slept.messages.len(), 1, "{slept:?}");
    assert_eq!(slept.messages[0]["id"], json!(901), "{slept:?}");
    assert!(
        slept.messages[0]["result"].to_string().contains("awake"),
        "{slept:?}"
    );
    // The connection serves on after a stream.
    read_a_file(&mut first);
}
