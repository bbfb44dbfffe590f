//! Claude Code, the real agent client from npm (pinned in `tests/deps/package.json`), run in
//! print mode against `toolgate serve` over stdio, with `tests/clients/scripted_model.py`
//! answering its Messages API on 127.0.0.1 in the model's place and
//! `tests/clients/wire_tap.py` recording every JSON-RPC line between the two.
//!
//! Each run gets its own home and configuration directory, so nothing a person set up for
//! their own Claude Code is read, and its environment is cleared: no key, proxy or endpoint
//! of the machine's reaches it.

#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::clients::{python, root, test_dep, toolgate_bin};
use super::home;
use super::served::Served;

/// The version `tests/deps/package.json` pins.
pub const CLAUDE_CODE_VERSION: &str = "2.1.332";

/// How long one Claude Code run may take before the test fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The `claude` binary `scripts/test-deps` installed, checked to be the pinned native build
/// (without its platform package, a small stub stays in the binary's place).
pub fn claude_bin() -> PathBuf {
    let bin = test_dep("node/node_modules/.bin/claude");
    let output = Command::new(&bin)
        .arg("--version")
        .env_clear()
        .output()
        .unwrap();
    let version = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && version.starts_with(&format!("{CLAUDE_CODE_VERSION} ")),
        "`{} --version` is not Claude Code {CLAUDE_CODE_VERSION}: {version} {}\n\
         run scripts/test-deps (its npm ci must install @anthropic-ai/claude-code-linux-x64)",
        bin.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    bin
}

/// `tests/clients/scripted_model.py` serving a script, and the requests it has received.
pub struct ScriptedModel {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl ScriptedModel {
    pub fn start(dir: &Path, script: &Value) -> ScriptedModel {
        ScriptedModel::serving("tests/clients/scripted_model.py", dir, script)
    }

    /// `program` (a stand-in for another model API, such as
    /// `tests/clients/scripted_responses.py`), which takes the same arguments and logs the
    /// same way, serving `script`.
    pub fn serving(program: &str, dir: &Path, script: &Value) -> ScriptedModel {
        let script_path = dir.join("script.json");
        fs::write(&script_path, script.to_string()).unwrap();
        let log = dir.join("requests.jsonl");
        let mut child = Command::new(python())
            .arg(root().join(program))
            .arg(&script_path)
            .arg(&log)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .strip_prefix("port ")
            .unwrap_or_else(|| panic!("{program} did not start: {line:?}"))
            .parse()
            .unwrap();
        ScriptedModel { child, port, log }
    }

    /// Every request, in order, as logged: `method`, `path` and `body`.
    pub fn requests(&self) -> Vec<Value> {
        read_json_lines(&self.log)
    }

    /// The bodies of the conversation's requests: those that offer the model tools (the
    /// client's side requests, for a title or a quota check, offer none).
    pub fn conversation(&self) -> Vec<Value> {
        self.requests()
            .into_iter()
            .filter(|r| {
                r["method"] == "POST"
                    && r["path"].as_str().unwrap().split('?').next() == Some("/v1/messages")
            })
            .map(|r| r["body"].clone())
            .filter(|b| b["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool names a request offered the model.
pub fn offered(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// What the client gave the model back for one tool use.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub is_error: bool,
    pub text: String,
}

/// The `tool_result` blocks of a request's conversation, by `tool_use_id`.
pub fn tool_results(request: &Value) -> Vec<(String, ToolResult)> {
    let mut out = Vec::new();
    for message in request["messages"].as_array().unwrap() {
        let Some(blocks) = message["content"].as_array() else {
            continue;
        };
        for block in blocks.iter().filter(|b| b["type"] == "tool_result") {
            let text = match &block["content"] {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n"),
                other => other.to_string(),
            };
            out.push((
                block["tool_use_id"].as_str().unwrap().to_owned(),
                ToolResult {
                    is_error: block["is_error"] == true,
                    text,
                },
            ));
        }
    }
    out
}

/// The result the model got for the tool use of scripted turn `turn`.
pub fn result_of(request: &Value, turn: usize) -> ToolResult {
    let id = format!("toolu_scripted_{turn:02}");
    tool_results(request)
        .into_iter()
        .find(|(i, _)| *i == id)
        .unwrap_or_else(|| panic!("no tool_result for `{id}` in {}", request["messages"]))
        .1
}

fn read_json_lines(path: &Path) -> Vec<Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// One line that crossed the wire between Claude Code and toolgate.
#[derive(Debug, Clone)]
pub struct WireLine {
    /// `client` or `server`.
    pub from: String,
    pub line: String,
}

impl WireLine {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.line).ok()
    }
}

/// A workspace, a toolgate configuration and a home for Claude Code, in one temporary
/// directory; a toolgate served over stdio behind the wire tap.
pub struct ClaudeSetup {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
    pub state: PathBuf,
    pub config: PathBuf,
}

impl ClaudeSetup {
    /// `ws` is a workspace the test prepared (it is served as it is); `config` is toolgate's
    /// configuration.
    pub fn new(ws: &Path, config: &str) -> ClaudeSetup {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        fs::create_dir_all(&state).unwrap();
        fs::create_dir_all(dir.path().join("home/.claude")).unwrap();
        let config_path = dir.path().join("toolgate.toml");
        fs::write(&config_path, config).unwrap();
        ClaudeSetup {
            dir,
            ws: ws.to_owned(),
            state,
            config: config_path,
        }
    }

    pub fn wire_log(&self) -> PathBuf {
        self.dir.path().join("wire.jsonl")
    }

    /// Claude Code's own debug log (`--debug-file`), for a failure's message.
    pub fn debug_log(&self) -> PathBuf {
        self.dir.path().join("claude-debug.log")
    }

    pub fn server_stderr(&self) -> PathBuf {
        self.dir.path().join("toolgate.stderr")
    }

    /// Runs a `toolgate` command with this setup's configuration and state; its output.
    pub fn toolgate(&self, args: &[&str]) -> std::process::Output {
        home::toolgate()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .env("XDG_STATE_HOME", &self.state)
            .output()
            .unwrap()
    }

    /// Everything that crossed the wire so far.
    pub fn wire(&self) -> Vec<WireLine> {
        read_json_lines(&self.wire_log())
            .into_iter()
            .map(|v| WireLine {
                from: v["from"].as_str().unwrap().to_owned(),
                line: v["line"].as_str().unwrap().to_owned(),
            })
            .collect()
    }

    /// The `--mcp-config` that starts toolgate over stdio, through the wire tap.
    fn mcp_config(&self) -> Value {
        let args = [
            root()
                .join("tests/clients/wire_tap.py")
                .display()
                .to_string(),
            self.wire_log().display().to_string(),
            self.server_stderr().display().to_string(),
            "--".to_owned(),
            toolgate_bin().to_owned(),
            "serve".to_owned(),
            "--workspace".to_owned(),
            self.ws.display().to_string(),
            "--config".to_owned(),
            self.config.display().to_string(),
        ];
        json!({"mcpServers": {"toolgate": {
            "type": "stdio",
            "command": python().display().to_string(),
            "args": args,
            "env": {"XDG_STATE_HOME": self.state.display().to_string()},
        }}})
    }

    /// Starts `claude -p PROMPT` against `model`, allowed to call only `allowed` (tool names
    /// without the `mcp__toolgate__` prefix) and with no built-in tools of its own.
    pub fn start(&self, model: &ScriptedModel, allowed: &[&str]) -> ClaudeRun {
        let mcp = self.dir.path().join("mcp.json");
        fs::write(&mcp, self.mcp_config().to_string()).unwrap();
        let home = self.dir.path().join("home");
        let allowed: Vec<String> = allowed
            .iter()
            .map(|t| format!("mcp__toolgate__{t}"))
            .collect();
        let mut command = Command::new(claude_bin());
        command
            .current_dir(&self.ws)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .envs(home::vars(&home))
            .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
            .env("TMPDIR", self.dir.path())
            .env(
                "ANTHROPIC_BASE_URL",
                format!("http://127.0.0.1:{}", model.port),
            )
            .env("ANTHROPIC_API_KEY", "test")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .arg("-p")
            .arg("Work in this project with the toolgate tools.");
        let mut child = command
            .arg("--mcp-config")
            .arg(&mcp)
            .arg("--strict-mcp-config")
            .args(["--tools", ""])
            .arg("--allowedTools")
            .arg(allowed.join(","))
            .args(["--output-format", "stream-json", "--verbose"])
            .arg("--no-session-persistence")
            .arg("--debug-file")
            .arg(self.debug_log())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stdout = {
            let lines = Arc::clone(&lines);
            let pipe = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    lines.lock().unwrap().push(line);
                }
            })
        };
        let stderr = drain(child.stderr.take().unwrap());
        ClaudeRun {
            child: Some(child),
            console: None,
            started: Instant::now(),
            lines,
            stdout,
            stderr,
            server_stderr: self.server_stderr(),
        }
    }
}

fn drain(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

/// A Claude Code run in progress.
pub struct ClaudeRun {
    // The process lives in `console` once the console is found, which ends it on drop.
    child: Option<Child>,
    console: Option<Served>,
    started: Instant,
    lines: Arc<Mutex<Vec<String>>>,
    stdout: JoinHandle<()>,
    stderr: JoinHandle<String>,
    server_stderr: PathBuf,
}

/// A Claude Code run that ended.
pub struct Finished {
    pub status: ExitStatus,
    /// `--output-format stream-json`: one JSON message a line.
    pub stdout: String,
    pub stderr: String,
}

impl Finished {
    /// The stream's messages.
    pub fn messages(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The status Claude Code reported for the `toolgate` server at start.
    pub fn toolgate_status(&self) -> String {
        self.messages()
            .iter()
            .find(|m| m["type"] == "system" && m["subtype"] == "init")
            .and_then(|m| {
                m["mcp_servers"]
                    .as_array()?
                    .iter()
                    .find(|s| s["name"] == "toolgate")
                    .map(|s| s["status"].as_str().unwrap_or_default().to_owned())
            })
            .unwrap_or_default()
    }
}

impl ClaudeRun {
    fn child(&mut self) -> &mut Child {
        match (&mut self.child, &mut self.console) {
            (Some(child), _) => child,
            (None, Some(console)) => &mut console.child,
            (None, None) => unreachable!(),
        }
    }

    /// toolgate's approval console, through the login link its banner on standard error holds
    /// (Claude Code keeps that stream in its MCP log; the wire tap keeps a copy), driven as a
    /// person's browser drives it.
    pub fn console(&mut self) -> &Served {
        if self.console.is_none() {
            let deadline = Instant::now() + Duration::from_secs(30);
            let link = loop {
                let text = fs::read_to_string(&self.server_stderr).unwrap_or_default();
                let lines: Vec<String> = text.lines().map(str::to_owned).collect();
                if lines.iter().any(|l| l.contains("/login?code=")) {
                    break super::served::printed_login_link(&lines);
                }
                assert!(
                    Instant::now() < deadline,
                    "toolgate printed no console address: {text}"
                );
                assert!(
                    self.child().try_wait().unwrap().is_none(),
                    "claude ended before toolgate's console started: {text}"
                );
                std::thread::sleep(Duration::from_millis(50));
            };
            let child = self.child.take().unwrap();
            self.console = Some(Served::log_in(child, &link, None));
        }
        self.console.as_ref().unwrap()
    }

    fn fail(&mut self, why: &str) -> ! {
        let _ = self.child().kill();
        let _ = self.child().wait();
        let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new));
        panic!(
            "{why} (limit {RUN_LIMIT:?})\nstdout: {}\nstderr: {}\ntoolgate: {}",
            self.lines.lock().unwrap().join("\n"),
            stderr.join().unwrap(),
            fs::read_to_string(&self.server_stderr).unwrap_or_default()
        );
    }

    /// Waits for the run to end, within [`RUN_LIMIT`] of its start.
    pub fn finish(mut self) -> Finished {
        let status = loop {
            if let Some(status) = self.child().try_wait().unwrap() {
                break status;
            }
            if self.started.elapsed() > RUN_LIMIT {
                self.fail("claude did not finish");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stdout = std::mem::replace(&mut self.stdout, std::thread::spawn(|| ()));
        stdout.join().unwrap();
        let stderr = std::mem::replace(&mut self.stderr, std::thread::spawn(String::new));
        Finished {
            status,
            stdout: self.lines.lock().unwrap().join("\n"),
            stderr: stderr.join().unwrap(),
        }
    }
}

impl Drop for ClaudeRun {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
