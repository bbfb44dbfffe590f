//! Limits on `toolgate serve --http` sessions, driven with raw HTTP requests on 127.0.0.1:
//! a token and all tokens together may hold only so many open sessions, an `initialize`
//! beyond either gets HTTP 503 with a JSON-RPC error while the open sessions go on, `DELETE`
//! and idle expiry free a slot, and 3,000 `initialize` requests in a row leave the server's
//! memory bounded and, once their sessions expired, back where it started.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::{HttpServer, serve_http};
use support::clients;

const TOKEN_ALICE: &str = "alice-0123456789abcdef0123456789abcdef";
const TOKEN_BOB: &str = "bob-0123456789abcdef0123456789abcdef00";
const PROTOCOL: &str = "2025-11-25";

/// Two tokens, and `serve` as given.
fn config(serve: &str) -> String {
    format!(
        "[serve]\n{serve}\n\n\
         [[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN_ALICE\"\nactor = \"alice\"\nprofile = \"readonly\"\n\n\
         [[serve.token]]\nenv = \"TOOLGATE_TEST_TOKEN_BOB\"\nactor = \"bob\"\nprofile = \"readonly\"\n"
    )
}

/// `toolgate serve --http 127.0.0.1:0` on `ws`, its state in `dir` and both tokens in its
/// environment.
fn serve_command(dir: &Path, ws: &Path, config: &Path) -> Command {
    let mut command = serve_http(ws, config);
    command
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("TOOLGATE_TEST_TOKEN_ALICE", TOKEN_ALICE)
        .env("TOOLGATE_TEST_TOKEN_BOB", TOKEN_BOB);
    command
}

/// `toolgate serve --http 127.0.0.1:0` on a workspace and configuration of its own, stopped
/// when dropped.
struct Server {
    http: HttpServer,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(config: &str) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        fs::create_dir(&ws).unwrap();
        fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        let config_path = dir.path().join("toolgate.toml");
        fs::write(&config_path, config).unwrap();
        let http = HttpServer::spawn(&mut serve_command(dir.path(), &ws, &config_path));
        Server { http, _dir: dir }
    }

    fn as_token(&self, token: &'static str) -> Client<'_> {
        Client {
            server: self,
            token,
        }
    }

    /// The server's resident set size, in bytes.
    fn rss(&self) -> u64 {
        let status = fs::read_to_string(format!("/proc/{}/status", self.http.child.id())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .unwrap()
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .unwrap();
        kib * 1024
    }
}

/// One answer: its status, headers (names in lowercase) and body, unchunked.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages of the body: the body itself, or the `data:` of each event.
    fn messages(&self) -> Vec<Value> {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            return clients::sse_messages(&self.body);
        }
        vec![serde_json::from_str(&self.body).unwrap()]
    }

    fn message(&self) -> Value {
        let messages = self.messages();
        assert_eq!(messages.len(), 1, "{self:?}");
        messages.into_iter().next().unwrap()
    }
}

/// Requests with one token.
struct Client<'a> {
    server: &'a Server,
    token: &'static str,
}

impl Client<'_> {
    fn request(&self, method: &str, session: Option<&str>, body: &str) -> Reply {
        let mut stream = TcpStream::connect(self.server.http.addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut request = format!(
            "{method} /mcp HTTP/1.1\r\nhost: {}\r\nconnection: close\r\nauthorization: Bearer {}\r\n\
             content-type: application/json\r\naccept: application/json, text/event-stream\r\n",
            self.server.http.addr, self.token
        );
        if let Some(session) = session {
            request.push_str(&format!(
                "mcp-session-id: {session}\r\nmcp-protocol-version: {PROTOCOL}\r\n"
            ));
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines.next().unwrap()[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
        let body = if chunked {
            unchunk(body)
        } else {
            body.to_owned()
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    fn initialize(&self) -> Reply {
        let body = json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": PROTOCOL,
                "capabilities": {},
                "clientInfo": {"name": "http-sessions-test", "version": "1"},
            },
        });
        self.request("POST", None, &body.to_string())
    }

    /// A new session, initialized; its id.
    fn begin(&self) -> String {
        let reply = self.initialize();
        assert_eq!(reply.status, 200, "{reply:?}");
        assert_eq!(reply.message()["result"]["protocolVersion"], PROTOCOL);
        let session = reply.header("mcp-session-id").unwrap().to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self.request("POST", Some(&session), &initialized.to_string());
        assert_eq!(ack.status, 202, "{ack:?}");
        session
    }

    fn list(&self, session: &str) -> Reply {
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        self.request("POST", Some(session), &body.to_string())
    }

    /// Session `session` answers `tools/list` with the read-only tools.
    fn lists(&self, session: &str) {
        let reply = self.list(session);
        assert_eq!(reply.status, 200, "{reply:?}");
        let tools = reply.message()["result"]["tools"].clone();
        let names: Vec<&str> = tools
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert!(names.contains(&"read_file"), "{names:?}");
    }

    fn delete(&self, session: &str) -> u16 {
        self.request("DELETE", Some(session), "").status
    }
}

fn unchunk(mut body: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").unwrap();
        let size = usize::from_str_radix(size.trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// `reply` is the refusal of an `initialize` over `limit`, as a JSON-RPC error that says what
/// to do.
fn assert_refused(reply: &Reply, limit: &str, open: u64) {
    assert_eq!(reply.status, 503, "{reply:?}");
    assert_eq!(reply.header("content-type"), Some("application/json"));
    assert!(reply.header("mcp-session-id").is_none(), "{reply:?}");
    let retry: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!(retry >= 1, "{reply:?}");
    let error = reply.message();
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["id"], 1, "the refused request's id: {error}");
    assert_eq!(error["error"]["code"], -32000);
    assert_eq!(error["error"]["data"]["limit"], limit);
    assert_eq!(error["error"]["data"]["open"], open);
    let message = error["error"]["message"].as_str().unwrap();
    for needle in [
        format!("`{limit} = {open}` under [serve]"),
        "DELETE".into(),
        "Mcp-Session-Id".into(),
        "expire".into(),
        format!("raise `{limit}`"),
        "sessions already open keep working".into(),
    ] {
        assert!(message.contains(&needle), "{needle}: {message}");
    }
}

#[test]
fn limits_per_token_and_in_all_refuse_with_503_while_open_sessions_keep_working() {
    let server = Server::start(&config("max_sessions = 3\nmax_sessions_per_token = 2"));
    let alice = server.as_token(TOKEN_ALICE);
    let bob = server.as_token(TOKEN_BOB);

    let a1 = alice.begin();
    let a2 = alice.begin();
    assert_refused(&alice.initialize(), "max_sessions_per_token", 2);
    // Alice's limit is hers: Bob still has room, until the server is full.
    let b1 = bob.begin();
    assert_refused(&bob.initialize(), "max_sessions", 3);
    assert_refused(&alice.initialize(), "max_sessions", 3);
    for (client, session) in [(&alice, &a1), (&alice, &a2), (&bob, &b1)] {
        client.lists(session);
    }
    // Another token's session is no one's to use or end.
    assert_eq!(bob.list(&a1).status, 404);
    assert_eq!(bob.delete(&a1), 404);
    alice.lists(&a1);

    // Ending a session frees its slot at once; its id is gone for good.
    assert_eq!(alice.delete(&a1), 202);
    assert_eq!(alice.list(&a1).status, 404);
    assert_eq!(alice.delete(&a1), 404);
    let a3 = alice.begin();
    alice.lists(&a3);
    assert_refused(&bob.initialize(), "max_sessions", 3);
    assert_eq!(bob.delete(&b1), 202);
    let b2 = bob.begin();
    for (client, session) in [(&alice, &a2), (&alice, &a3), (&bob, &b2)] {
        client.lists(session);
    }
}

#[test]
fn idle_sessions_expire_and_free_their_slots() {
    let server = Server::start(&config(
        "max_sessions = 2\nmax_sessions_per_token = 2\nsession_idle_timeout_secs = 2",
    ));
    let alice = server.as_token(TOKEN_ALICE);
    let busy = alice.begin();
    let idle = alice.begin();
    assert_refused(&alice.initialize(), "max_sessions", 2);
    // A session in use does not expire, however long it lives.
    let began = Instant::now();
    while began.elapsed() < Duration::from_millis(3500) {
        alice.lists(&busy);
        std::thread::sleep(Duration::from_millis(300));
    }
    // Expired by now: idle for 3.5 s, while the timeout is 2 s and a sweep runs every 0.5 s.
    // (Asking earlier would have kept it alive: any request of a session is activity.)
    assert_eq!(alice.list(&idle).status, 404);
    assert_eq!(alice.delete(&idle), 404);
    alice.lists(&busy);
    // Its slot is free again.
    let fresh = alice.begin();
    alice.lists(&fresh);
    assert_refused(&alice.initialize(), "max_sessions", 2);
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

#[test]
fn three_thousand_initializes_keep_memory_bounded_and_expiry_returns_it() {
    // The default limits, and sessions that expire within the run: sessions begin and end
    // throughout, with as many open at once as one token may hold.
    let server = Server::start(&config("session_idle_timeout_secs = 2"));
    let alice = server.as_token(TOKEN_ALICE);
    let warm_up = alice.begin();
    assert_eq!(alice.delete(&warm_up), 202);
    // Measured once the warm-up session is gone, so its teardown is not counted as growth.
    let deadline = Instant::now() + Duration::from_secs(5);
    while alice.list(&warm_up).status != 404 {
        assert!(
            Instant::now() < deadline,
            "the deleted session still answers"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let start = server.rss();

    let began = Instant::now();
    let mut peak = start;
    let mut sessions = Vec::new();
    let mut refused = 0;
    for i in 0..3000 {
        let reply = alice.initialize();
        match reply.status {
            200 => sessions.push(reply.header("mcp-session-id").unwrap().to_owned()),
            503 => {
                refused += 1;
                if refused == 1 {
                    assert_refused(&reply, "max_sessions_per_token", 64);
                }
            }
            _ => panic!("initialize {i}: {reply:?}"),
        }
        if i % 50 == 0 {
            peak = peak.max(server.rss());
        }
    }
    let hammered = began.elapsed();
    peak = peak.max(server.rss());
    let after_run = server.rss();
    assert!(sessions.len() >= 64, "{} sessions", sessions.len());
    assert_eq!(sessions.len() + refused, 3000);
    assert!(
        peak < 64 << 20,
        "peak {:.1} MiB (start {:.1} MiB)",
        mib(peak),
        mib(start)
    );

    // Every session expires; the memory they held is given back.
    // Untouched since its `initialize`, the last session expires 2.5 s after it at the latest;
    // asking before would keep it alive.
    std::thread::sleep(Duration::from_secs(4));
    for session in sessions.iter().rev().take(64) {
        assert_eq!(alice.list(session).status, 404, "{session}");
    }
    let bound = start + start / 5;
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after_expiry = server.rss();
    while after_expiry > bound && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after_expiry = server.rss();
    }
    eprintln!(
        "3,000 initialize in {hammered:.1?}: {} sessions, {refused} refused; RSS start {:.1} MiB, \
         peak {:.1} MiB, after the run {:.1} MiB, after expiry {:.1} MiB",
        sessions.len(),
        mib(start),
        mib(peak),
        mib(after_run),
        mib(after_expiry)
    );
    assert!(
        after_expiry <= bound,
        "after expiry {:.1} MiB, start {:.1} MiB",
        mib(after_expiry),
        mib(start)
    );
    // And the server serves on.
    alice.lists(&alice.begin());
}

#[test]
fn unusable_session_settings_stop_serve_at_their_line() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir(&ws).unwrap();
    for (serve, line, needle) in [
        ("max_sessions = \"many\"", 2, "invalid type"),
        ("max_sessions = -3", 2, "invalid value"),
        ("max_sessions = 0", 2, "max_sessions `0` is out of range"),
        (
            "max_sessions = 4\nmax_sessions_per_token = 5",
            3,
            "more than max_sessions `4`",
        ),
        ("session_idle_timeout_secs = 0", 2, "out of range"),
        ("session_idle_timeout = 60", 2, "unknown field"),
    ] {
        let config_path = dir.path().join("toolgate.toml");
        fs::write(&config_path, config(serve)).unwrap();
        let output = serve_command(dir.path(), &ws, &config_path)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{serve}: {stderr}");
        assert!(
            stderr.contains(&format!("toolgate.toml:{line}: ")) && stderr.contains(needle),
            "{serve}: {stderr}"
        );
        assert!(!stderr.contains("serving MCP"), "{stderr}");
    }
}

#[test]
fn connections_beyond_the_limit_are_answered_503_and_the_server_serves_on() {
    let server = Server::start(&config(""));
    // Connections that never send a request, as many as the server serves at once: whoever
    // opens them needs no token.
    let held: Vec<TcpStream> = (0..512)
        .map(|_| TcpStream::connect(server.http.addr).unwrap())
        .collect();
    // Wait until the server has accepted them all: the next connection is refused with a 503.
    let deadline = Instant::now() + Duration::from_secs(5);
    let answer = loop {
        let mut extra = TcpStream::connect(server.http.addr).unwrap();
        extra
            .set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut answer = String::new();
        let _ = extra.read_to_string(&mut answer);
        if !answer.is_empty() || Instant::now() > deadline {
            break answer;
        }
    };
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    let body = answer.split("\r\n\r\n").nth(1).unwrap();
    let error: Value = serde_json::from_str(body).unwrap();
    assert_eq!(error["error"]["code"], -32000, "{body}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("512 connections"),
        "{body}"
    );
    // Closed, they free their places.
    drop(held);
    let alice = server.as_token(TOKEN_ALICE);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let reply = alice.initialize();
        if reply.status == 200 || Instant::now() > deadline {
            assert_eq!(reply.status, 200, "{reply:?}");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
