//! The real clients and servers the binary's end-to-end tests drive, as `scripts/test-deps`
//! installs them into `target/test-deps/`, and `tests/mcp/drive.py`, which runs a plan of MCP
//! sessions with the official Python SDK.
//!
//! Shared by the MCP, upstream and console tests through `#[path]`.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::home;
/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

pub fn toolgate_bin() -> &'static str {
    env!("CARGO_BIN_EXE_toolgate")
}

/// A file the tests need, or a failure that says how to get it.
pub fn test_dep(relative: &str) -> PathBuf {
    let path = root().join("target/test-deps").join(relative);
    assert!(
        path.exists(),
        "test dependency `{}` is missing: run scripts/test-deps first",
        path.display()
    );
    path
}

pub fn python() -> PathBuf {
    test_dep("venv/bin/python")
}

pub fn node() -> PathBuf {
    test_dep("node/node_modules/node/bin/node")
}

pub fn node_package(relative: &str) -> PathBuf {
    test_dep(&format!("node/node_modules/{relative}"))
}

/// Runs `tests/mcp/drive.py` on `plan` and returns its report.
pub fn drive(plan: &Value) -> Value {
    Driving::start(plan).report()
}

/// `tests/mcp/drive.py` running a plan in the background.
pub struct Driving {
    child: Child,
    _plan: tempfile::TempDir,
}

impl Driving {
    pub fn start(plan: &Value) -> Driving {
        let dir = tempfile::tempdir().unwrap();
        let plan_path = dir.path().join("plan.json");
        fs::write(&plan_path, plan.to_string()).unwrap();
        // drive.py passes its home on to every server it starts.
        let child = home::isolated(Command::new(python()))
            .arg(root().join("tests/mcp/drive.py"))
            .arg(&plan_path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Driving { child, _plan: dir }
    }

    /// Waits for the plan to finish; its report.
    pub fn report(self) -> Value {
        let output = self.child.wait_with_output().unwrap();
        serde_json::from_slice(&succeeded("drive.py", output)).unwrap()
    }

    /// The report of a plan of one session: its steps' results, and the forms it was shown.
    pub fn session_report(self) -> Value {
        self.report()["sessions"][0].clone()
    }

    /// The results of the steps of a plan of one session.
    pub fn steps(self) -> Vec<Value> {
        self.session_report()["steps"].as_array().unwrap().clone()
    }
}

/// The standard output of a helper program that must have succeeded.
pub fn succeeded(what: &str, output: Output) -> Vec<u8> {
    assert!(
        output.status.success(),
        "{what} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}

/// Where the console's checks in Chromium save their screenshots, made if missing.
pub fn screenshots() -> PathBuf {
    let dir = root().join("target/console-screenshots");
    fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `tests/console/SCRIPT` on `plan` (Chromium as the person), told where the screenshots,
/// playwright-core and Chromium are, and returns the report it printed.
pub fn in_chromium(script: &str, mut plan: Value) -> Value {
    let chromium = "/usr/bin/chromium";
    assert!(
        Path::new(chromium).exists(),
        "{chromium} is missing: run scripts/test-deps first"
    );
    plan["screenshots"] = json!(screenshots());
    plan["node_modules"] = json!(test_dep("node/node_modules"));
    plan["chromium"] = json!(chromium);
    let dir = tempfile::tempdir().unwrap();
    let plan_path = dir.path().join("plan.json");
    fs::write(&plan_path, plan.to_string()).unwrap();
    let output = Command::new(node())
        .arg(root().join("tests/console").join(script))
        .arg(&plan_path)
        .output()
        .unwrap();
    serde_json::from_slice(&succeeded(script, output)).unwrap()
}

/// Runs the MCP conformance suite against the server at `url`, with the scenarios listed in
/// `baseline` (each with its reason) as expected failures, and checks that it passes and that
/// each of `must_pass` passed.
pub fn conformance(url: &str, baseline: &Path, must_pass: &[&str]) {
    let baseline = fs::read_to_string(baseline).unwrap();
    let mut yaml = String::from("server:\n");
    for line in baseline
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let (scenario, reason) = line.split_once(':').unwrap_or((line, ""));
        assert!(
            !reason.trim().is_empty(),
            "no reason given for `{scenario}`"
        );
        yaml.push_str(&format!("  - {}\n", scenario.trim()));
    }
    let dir = tempfile::tempdir().unwrap();
    let expected = dir.path().join("baseline.yml");
    fs::write(&expected, yaml).unwrap();
    let output = Command::new(node())
        .current_dir(dir.path())
        .arg(node_package(
            "@modelcontextprotocol/conformance/dist/index.js",
        ))
        .args([
            "server",
            "--suite",
            "all",
            "--url",
            url,
            "--expected-failures",
        ])
        .arg(&expected)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = text
        .split("=== SUMMARY ===")
        .nth(1)
        .unwrap_or(&text)
        .to_owned();
    assert!(
        output.status.success(),
        "conformance suite failed:\n{summary}"
    );
    for scenario in must_pass {
        assert!(
            summary.contains(&format!("✓ {scenario}:")),
            "`{scenario}` must pass:\n{summary}"
        );
    }
}

/// The tool names of a `tools/list` step's report.
pub fn names(listing: &Value) -> Vec<String> {
    listing["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("not a listing: {listing}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls `condition` until it holds, failing the test after `limit`.
pub fn wait_until(what: &str, limit: Duration, condition: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether this machine gives confined processes the mount-namespace tier, as `toolgate
/// sandbox check` reports it.
pub fn mount_tier() -> bool {
    let out = home::toolgate()
        .args(["sandbox", "check", "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    report["machine"]["mount_namespaces"].as_bool().unwrap()
}

/// `read = ["<this repository>"]`, for a `[sandbox]` or `[upstream.sandbox]` section: the
/// test servers, scripts and installed test dependencies live in the repository, which may
/// itself lie under `/tmp`, where the sandbox denies everything by default.
pub fn repo_read() -> String {
    format!(
        "read = [{}]\n",
        serde_json::to_string(&root().display().to_string()).unwrap()
    )
}

/// The address `toolgate serve --http` announced on its standard error (which must be piped),
/// and the lines it printed before; the rest of its standard error is read and dropped, so the
/// server never blocks on a full pipe.
pub fn http_address(child: &mut Child) -> (SocketAddr, Vec<String>) {
    let (url, banner) = mcp_url(child);
    let addr = url
        .strip_prefix("http://")
        .unwrap()
        .trim_end_matches("/mcp")
        .parse()
        .unwrap();
    (addr, banner)
}

/// The MCP URL `toolgate serve --http` announced on its standard error (which must be piped),
/// and the lines it printed before; the rest is read and dropped, as [`http_address`] says.
pub fn mcp_url(child: &mut Child) -> (String, Vec<String>) {
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut banner = Vec::new();
    let url = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| panic!("the server stopped: {banner:?}"))
            .unwrap();
        if let Some(rest) = line.strip_prefix("toolgate: serving MCP at ") {
            break rest.to_owned();
        }
        banner.push(line);
    };
    std::thread::spawn(move || lines.for_each(drop));
    (url, banner)
}

/// `toolgate` under strace, with every `landlock_create_ruleset` failing as on a kernel
/// without Landlock; the caller adds toolgate's arguments.
pub fn without_landlock() -> Command {
    let strace = Path::new("/usr/bin/strace");
    assert!(
        strace.exists(),
        "strace is missing: run scripts/test-deps first"
    );
    let mut command = home::isolated(Command::new(strace));
    command
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "inject=landlock_create_ruleset:error=ENOSYS",
        ])
        .arg(toolgate_bin());
    command
}

/// The system's own program, not a version manager's shim that needs the real `HOME`.
pub fn system_program(name: &str) -> String {
    ["/usr/bin", "/bin"]
        .iter()
        .map(|dir| Path::new(dir).join(name))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no `{name}` in /usr/bin or /bin"))
        .display()
        .to_string()
}

/// The arguments of `toolgate serve --no-console` over stdio on `ws` with `config`, as a plan
/// of `tests/mcp/drive.py` gives them.
pub fn stdio_serve_args(ws: &Path, config: &Path) -> Vec<String> {
    vec![
        "serve".to_owned(),
        "--no-console".to_owned(),
        "--workspace".to_owned(),
        ws.display().to_string(),
        "--config".to_owned(),
        config.display().to_string(),
    ]
}

/// Everything a child writes to `pipe` (its standard error, say), read in the background so
/// that it never blocks on a full pipe.
pub fn collected(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        let mut read = String::new();
        let _ = pipe.read_to_string(&mut read);
        sink.lock().unwrap().push_str(&read);
    });
    text
}

/// Each line `pipe` carries (a server's standard output, say), as `parse` makes of it, read in
/// the background until the pipe closes or the receiver is dropped.
pub fn lines_of<T: Send + 'static>(
    pipe: impl Read + Send + 'static,
    parse: fn(String) -> T,
) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(parse(line)).is_err() {
                return;
            }
        }
    });
    rx
}

/// The JSON-RPC messages the events of a `text/event-stream` body carry: each event's `data:`
/// lines joined, events without data skipped.
pub fn sse_messages(body: &str) -> Vec<Value> {
    body.replace("\r\n", "\n")
        .split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            let data = data.join("\n");
            (!data.trim().is_empty()).then(|| serde_json::from_str(&data).unwrap())
        })
        .collect()
}

/// A path as a string literal for the configurations the tests write (TOML reads JSON's
/// quoting of it the same).
pub fn quoted(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).unwrap()
}

/// `toolgate serve --no-console --http 127.0.0.1:0` on `ws` with `config`, not yet run, for the
/// caller to add flags and environment to.
pub fn serve_http(ws: &Path, config: &Path) -> Command {
    let mut command = home::toolgate();
    command
        .args([
            "serve",
            "--no-console",
            "--http",
            "127.0.0.1:0",
            "--workspace",
        ])
        .arg(ws)
        .arg("--config")
        .arg(config);
    command
}

/// `toolgate serve --no-console` over stdio on `ws` with `config`, not yet run.
pub fn serve_stdio(ws: &Path, config: &Path) -> Command {
    let mut command = home::toolgate();
    command
        .args(["serve", "--no-console", "--workspace"])
        .arg(ws)
        .arg("--config")
        .arg(config);
    command
}

/// Runs `command` with its three standard streams piped, as a raw JSON-RPC client drives
/// `toolgate serve` over stdio.
pub fn spawn_piped(command: &mut Command) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// `toolgate serve` over stdio spoken to in raw JSON-RPC lines, past the handshake; killed
/// when dropped.
pub struct StdioServer {
    pub child: Child,
    /// `None` once the client hung up.
    input: Option<std::process::ChildStdin>,
    answers: mpsc::Receiver<Value>,
}

impl StdioServer {
    /// Runs `command` (a `toolgate serve` over stdio, its standard error not wanted) and
    /// completes the handshake.
    pub fn start(command: &mut Command) -> StdioServer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = child.stdout.take().unwrap();
        // A line that is not JSON reads as null, which has no id and answers nothing.
        let answers = lines_of(output, |line| {
            serde_json::from_str(&line).unwrap_or(Value::Null)
        });
        let mut server = StdioServer {
            child,
            input: Some(input),
            answers,
        };
        server.send(r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}"#);
        server.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        server.next_answer(Duration::from_secs(30)).unwrap();
        server
    }

    /// Writes `message` (a JSON text or value) as one line.
    pub fn send(&mut self, message: impl std::fmt::Display) {
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
    }

    /// Closes the server's standard input, as a client that hangs up.
    pub fn hang_up(&mut self) {
        self.input = None;
    }

    /// Asks, as request `id`, for `read_file` of `path`.
    pub fn read(&mut self, id: u64, path: &str) {
        self.send(format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"{path}"}}}}}}"#
        ));
    }

    /// The next answer (a message with an id), which must come within two minutes.
    pub fn answer(&self) -> Value {
        self.next_answer(Duration::from_secs(120))
            .expect("an answer within two minutes")
    }

    /// The next answer (a message with an id) within `wait`.
    pub fn next_answer(&self, wait: Duration) -> Option<Value> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let message = self.answers.recv_timeout(left).ok()?;
            if message.get("id").is_some() {
                return Some(message);
            }
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `toolgate serve --http` on a free loopback port, stopped when dropped.
pub struct HttpServer {
    pub child: Child,
    pub addr: SocketAddr,
    /// What it printed to standard error before it began serving.
    pub banner: Vec<String>,
}

impl HttpServer {
    /// Runs `command` (a [`serve_http`] with what the test adds) until it says where it serves.
    pub fn spawn(command: &mut Command) -> HttpServer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (addr, banner) = http_address(&mut child);
        HttpServer {
            child,
            addr,
            banner,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
