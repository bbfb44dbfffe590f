//! A hostile upstream behind `toolgate serve` over stdio: `tests/upstream/flood_server.py`
//! floods toolgate with `list_changed` notifications, and reports a call's progress and logs
//! far faster than a client should hear them. The client here is raw JSON-RPC, so that each
//! builtin read is timed on its own and every notification is seen with the time it arrived.
//!
//! The admissions are written by the real `toolgate tools admit`; the upstream runs in
//! toolgate's sandbox, granted its own state directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::*;
use support::clients;
use support::home;

/// How toolgate reaches the flood server.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Transport {
    /// toolgate starts it, confined, and speaks over its standard streams.
    Stdio,
    /// The test starts it, serving streamable HTTP on 127.0.0.1, and toolgate reaches it by URL.
    Http,
}

/// A workspace, the flood server's state directory and a configuration admitting `tools`.
struct Setup {
    dir: tempfile::TempDir,
    config: PathBuf,
    /// The HTTP flood server, ended by pid on drop.
    server: Option<Child>,
}

impl Drop for Setup {
    fn drop(&mut self) {
        if let Some(server) = &mut self.server {
            let _ = server.kill();
            let _ = server.wait();
        }
    }
}

impl Setup {
    fn new(tools: &[&str]) -> Setup {
        Setup::over(Transport::Stdio, tools)
    }

    fn over(transport: Transport, tools: &[&str]) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let state = dir.path().join("state");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&state).unwrap();
        fs::write(ws.join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
        let script = root().join("tests/upstream/flood_server.py");
        let mut server = None;
        let section = match transport {
            Transport::Stdio => format!(
                "[[upstream]]\nname = \"flood\"\ncommand = [{}, {}, {}]\ncall_timeout_ms = 20000\n\
                 [upstream.sandbox]\nwrite = [{}]\n{}",
                quoted(&python()),
                quoted(&script),
                quoted(&state),
                quoted(&state),
                repo_read(),
            ),
            Transport::Http => {
                server = Some(
                    Command::new(python())
                        .arg(&script)
                        .arg(&state)
                        .arg("--http")
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap(),
                );
                let port_file = state.join("port");
                wait_until(
                    "the HTTP flood server listens",
                    Duration::from_secs(20),
                    || port_file.exists(),
                );
                let port = fs::read_to_string(&port_file).unwrap();
                format!(
                    "[[upstream]]\nname = \"flood\"\nurl = \"http://127.0.0.1:{}/mcp\"\ncall_timeout_ms = 20000\n",
                    port.trim()
                )
            }
        };
        let config = dir.path().join("toolgate.toml");
        fs::write(&config, section).unwrap();
        let setup = Setup {
            dir,
            config,
            server,
        };
        for tool in tools {
            let output = home::toolgate()
                .args(["tools", "admit", "flood", tool, "--effect", "read_only"])
                .arg("--config")
                .arg(&setup.config)
                .output()
                .unwrap();
            assert!(output.status.success(), "admit {tool}: {output:?}");
        }
        setup
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
}

/// `toolgate serve` over stdio, spoken to in raw JSON-RPC lines.
struct Client {
    child: Child,
    stdin: ChildStdin,
    messages: mpsc::Receiver<(Instant, Value)>,
    /// Every message that was not the answer being waited for, with when it arrived.
    seen: Vec<(Instant, Value)>,
    next_id: u64,
    stderr: Arc<Mutex<String>>,
}

impl Client {
    fn start(setup: &Setup) -> Client {
        let mut child = spawn_piped(&mut serve_stdio(&setup.ws(), &setup.config));
        let stderr = collected(child.stderr.take().unwrap());
        let messages = lines_of(child.stdout.take().unwrap(), |line| {
            (Instant::now(), serde_json::from_str(&line).unwrap())
        });
        let stdin = child.stdin.take().unwrap();
        Client {
            child,
            stdin,
            messages,
            seen: Vec::new(),
            next_id: 1,
            stderr,
        }
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request; its id.
    fn begin(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    /// The answer to request `id` and when it arrived; whatever else arrives is kept in
    /// `seen`.
    fn answer(&mut self, id: u64) -> (Instant, Value) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, message) = self.messages.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no answer to request {id}\nstderr: {}",
                    self.stderr.lock().unwrap()
                )
            });
            if message["id"] == json!(id) && message.get("method").is_none() {
                return (at, message);
            }
            self.seen.push((at, message));
        }
    }

    /// The answers to requests `ids`, in that order, with when each arrived.
    fn answers(&mut self, ids: &[u64]) -> Vec<(Instant, Value)> {
        let mut answers: Vec<Option<(Instant, Value)>> = vec![None; ids.len()];
        let deadline = Instant::now() + Duration::from_secs(60);
        while answers.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (at, message) = self.messages.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no answers to {ids:?}\nstderr: {}",
                    self.stderr.lock().unwrap()
                )
            });
            let slot = ids.iter().position(|id| message["id"] == json!(id));
            match slot {
                Some(slot) if message.get("method").is_none() => {
                    answers[slot] = Some((at, message));
                }
                _ => self.seen.push((at, message)),
            }
        }
        answers.into_iter().map(Option::unwrap).collect()
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.begin(method, params);
        let (_, answer) = self.answer(id);
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    /// Keeps what arrives for `period`.
    fn listen(&mut self, period: Duration) {
        let until = Instant::now() + period;
        while let Ok((at, message)) = self
            .messages
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            self.seen.push((at, message));
        }
    }

    /// The handshake; whether the server offers logging.
    fn initialize(&mut self) -> bool {
        let result = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "floods", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        result["capabilities"].get("logging").is_some()
    }

    fn tool_names(&mut self) -> Vec<String> {
        let result = self.request("tools/list", json!({}));
        result["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        assert_eq!(result["isError"], json!(false), "{tool}: {result}");
        result
    }

    /// How long one builtin `read_file` takes, answer checked.
    fn timed_read(&mut self) -> Duration {
        let started = Instant::now();
        let result = self.call("read_file", json!({"path": "a.txt"}));
        let took = started.elapsed();
        assert!(result.to_string().contains("beta"), "{result}");
        took
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The 99th percentile of `samples`.
fn p99(samples: &[Duration]) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = (sorted.len() * 99).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// 20,000 `list_changed` notifications in three seconds cost a handful of `tools/list`
/// requests, the tool list toolgate ends with is the one served after the flood, and builtin
/// reads through toolgate answer within their usual p99 meanwhile.
///
/// The p99 of reads during the flood is held to three times the p99 of reads before it, plus
/// 25 ms: the machine is shared with the flood server itself and with other work (a build
/// beside it took one run to 26 ms against 6 ms before), and a tolerance any tighter fails on
/// noise rather than on toolgate; a read queued behind refreshes waits for seconds. Before the
/// flood was coalesced, each notification was a refresh on the upstream's thread and the flood
/// took about as many `tools/list` requests as notifications.
#[test]
fn a_flood_of_list_changed_costs_a_handful_of_refreshes_and_reads_stay_fast() {
    let setup = Setup::new(&["doomed", "flood"]);
    let mut client = Client::start(&setup);
    client.initialize();
    assert!(client.tool_names().contains(&"flood__doomed".to_owned()));
    for _ in 0..20 {
        client.timed_read();
    }
    let before: Vec<Duration> = (0..300).map(|_| client.timed_read()).collect();

    let flood_started = Instant::now();
    client.call("flood__flood", json!({"count": 20_000, "seconds": 3}));
    let done = setup.state().join("flood.done");
    let mut during = Vec::new();
    while !done.exists() {
        assert!(
            flood_started.elapsed() < Duration::from_secs(60),
            "the flood did not end"
        );
        during.push(client.timed_read());
    }
    let flood_took = flood_started.elapsed();
    assert!(
        during.len() >= 50,
        "only {} reads during the flood",
        during.len()
    );

    // The final list: `doomed` is no longer listed, so its admission is missing and hidden.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if !client.tool_names().contains(&"flood__doomed".to_owned()) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "toolgate still serves the list from before the flood"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let settled = flood_started.elapsed();
    // Room for a refresh that was still queued to run, if one was.
    client.listen(Duration::from_secs(3));
    let lists = fs::read_to_string(setup.state().join("lists.log")).unwrap();
    let versions: Vec<&str> = lists.lines().collect();
    let (p99_before, p99_during) = (p99(&before), p99(&during));
    eprintln!(
        "flood of 20000 list_changed over {flood_took:?}: {} tools/list {versions:?}; final list \
         in force {settled:?} after the flood began; read_file p99 {p99_before:?} before \
         ({} reads), {p99_during:?} during ({} reads)",
        versions.len(),
        before.len(),
        during.len()
    );
    assert!(
        versions.len() <= 8,
        "{} refreshes for one flood: {versions:?}",
        versions.len()
    );
    assert_eq!(versions.last(), Some(&"2"), "{versions:?}");
    assert!(
        p99_during <= p99_before * 3 + Duration::from_millis(25),
        "read_file p99 {p99_during:?} during the flood against {p99_before:?} before"
    );
    // The client was told the list changed, once or a few times, not once per notification.
    let told = client
        .seen
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/tools/list_changed")
        .count();
    assert!((1..=8).contains(&told), "told {told} times");
}

/// A fresh GitHub token, different on every run.
fn fresh_secret() -> String {
    use std::hash::{BuildHasher, Hasher};
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut secret = String::from("ghp_");
    while secret.len() < 40 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_usize(secret.len());
        let n = hasher.finish();
        secret.push(char::from(ALPHABET[(n % ALPHABET.len() as u64) as usize]));
    }
    secret
}

/// The text of a progress or log notification's params.
fn said(message: &Value) -> String {
    message["params"].to_string()
}

/// An upstream tool's progress and log notifications during a call reach the client as the
/// call's own: under the client's progress token, redacted, no more than
/// `NOTICES_PER_SECOND` a second however fast the tool reports, and none once the call ended
/// or under a token toolgate did not give the call.
#[test]
fn a_calls_progress_and_logs_reach_the_client_as_its_own_redacted_and_limited() {
    relayed_as_the_calls_own(Transport::Stdio);
}

/// The same over streamable HTTP, where the reports arrive in the call's own event stream.
#[test]
fn over_http_a_calls_progress_and_logs_reach_the_client_as_its_own() {
    relayed_as_the_calls_own(Transport::Http);
}

fn relayed_as_the_calls_own(transport: Transport) {
    let setup = Setup::over(transport, &["chatty"]);
    let mut client = Client::start(&setup);
    let logging = client.initialize();
    if logging {
        client.request("logging/setLevel", json!({"level": "debug"}));
    }
    let secret = fresh_secret();
    let started = Instant::now();
    let id = client.begin(
        "tools/call",
        json!({"name": "flood__chatty", "arguments": {"secret": secret, "burst": 1000},
               "_meta": {"progressToken": "tok-chatty"}}),
    );
    let (answered, answer) = client.answer(id);
    assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    assert!(answer.to_string().contains("chatty done"), "{answer}");
    let lasted = answered.duration_since(started);
    wait_until(
        "the server sent its reports after the call",
        Duration::from_secs(10),
        || setup.state().join("chatty.done").exists(),
    );
    client.listen(Duration::from_secs(1));

    let progress: Vec<&(Instant, Value)> = client
        .seen
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/progress")
        .collect();
    let logs: Vec<&(Instant, Value)> = client
        .seen
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/message")
        .collect();
    let everything = client
        .seen
        .iter()
        .map(|(_, m)| m.to_string())
        .collect::<Vec<_>>()
        .join("\n");
    for (_, message) in &progress {
        assert_eq!(
            message["params"]["progressToken"],
            json!("tok-chatty"),
            "{message}"
        );
    }
    assert!(
        !everything.contains(&secret),
        "the secret reached the client:\n{everything}"
    );
    for never in ["after the end", "wrong token", "another call's token"] {
        assert!(
            !everything.contains(never),
            "`{never}` reached the client:\n{everything}"
        );
    }
    // toolgate's own reports of where the call is are not the tool's.
    let relayed: Vec<&(Instant, Value)> = progress
        .iter()
        .copied()
        .filter(|(_, m)| !said(m).contains("`flood__chatty` is"))
        .collect();
    assert!(
        relayed
            .iter()
            .any(|(_, m)| said(m).contains("cloning with")),
        "the tool's first report did not arrive:\n{everything}"
    );
    assert!(
        relayed
            .iter()
            .any(|(_, m)| said(m).contains("after the pause")),
        "the report after the pause did not arrive:\n{everything}"
    );
    if logging {
        assert!(
            logs.iter().any(|(_, m)| said(m).contains("using")),
            "the tool's log did not arrive:\n{everything}"
        );
    }
    for (at, message) in relayed.iter().chain(logs.iter()) {
        assert!(*at <= answered, "a report after the call ended: {message}");
    }
    let limit = toolgate_core::NOTICES_PER_SECOND as usize;
    let windows = lasted.as_secs() as usize + 1;
    let count = relayed.len() + logs.len();
    eprintln!(
        "{transport:?}: a call of {lasted:?} reporting over 1,000 progress notifications and its logs: the client \
         heard {} of its progress and {} logs (limit {limit} a second)",
        relayed.len(),
        logs.len()
    );
    assert!(
        count <= limit * windows,
        "{count} notices in {lasted:?}:\n{everything}"
    );
}

/// Two calls to the same stdio upstream at once: each hears only the progress reported under
/// its own token, under the token its client gave it, never the other's.
#[test]
fn two_calls_at_once_each_hear_only_their_own_progress() {
    let setup = Setup::new(&["chatty"]);
    let mut client = Client::start(&setup);
    client.initialize();
    let mut ids = Vec::new();
    for (label, token) in [("first", "tok-first"), ("second", "tok-second")] {
        ids.push(client.begin(
            "tools/call",
            json!({"name": "flood__chatty",
                   "arguments": {"secret": fresh_secret(), "burst": 30, "label": label},
                   "_meta": {"progressToken": token}}),
        ));
    }
    for (_, answer) in client.answers(&ids) {
        assert_eq!(answer["result"]["isError"], json!(false), "{answer}");
    }
    client.listen(Duration::from_millis(500));
    let mut heard = std::collections::BTreeMap::<String, usize>::new();
    for (_, message) in &client.seen {
        if message["method"] != "notifications/progress" {
            continue;
        }
        let token = message["params"]["progressToken"].as_str().unwrap();
        let text = message["params"]["message"].as_str().unwrap_or_default();
        if text.contains("`flood__chatty` is") {
            continue;
        }
        let (own, other) = match token {
            "tok-first" => ("first", "second"),
            "tok-second" => ("second", "first"),
            other => panic!("progress under a token nobody gave: {other}"),
        };
        assert!(
            text.starts_with(own) && !text.contains(other),
            "{token} heard `{text}`"
        );
        *heard.entry(token.to_owned()).or_default() += 1;
    }
    assert_eq!(heard.len(), 2, "{heard:?}");
}
