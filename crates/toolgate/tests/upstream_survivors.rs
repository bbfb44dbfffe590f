//! A malicious upstream server leaves a process behind that tries to outlive the server's stop:
//! `tests/upstream/survivor_server.py`, confined as every upstream is, leaves one out of its
//! process group (`setsid`, a double fork into a new session, `setpgid`), on a tool call or
//! the moment it starts. The process closes what it shares with the server, notes its pid,
//! sleeps, and then writes a marker in a place the upstream may write, as it could write a
//! file that runs later after toolgate compared them at the stop.
//!
//! Through the real binary: `toolgate tools admit` starts and stops the server once (a process
//! it leaves at start must be gone when admit returns); `toolgate serve` over stdio is then
//! stopped by its client hanging up. Once toolgate has exited, the process left (checked by
//! its pid) must be gone, the marker never written, and toolgate must not have said that the
//! stop was not clean. Before upstreams' trees were ended whole, only the server's process
//! group was killed, and every row's process lived on and wrote its marker.
//!
//! A toolgate killed outright ends nothing itself: the watchdog ends what it was told of, and
//! the look toolgate takes at an upstream's tree while it serves tells it of what left.

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
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::mpsc::Receiver;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::*;
use support::{clients, home, procs};

/// How long the process left sleeps before it writes its marker.
const SLEEP_SECONDS: u64 = 3;

/// What toolgate says of a stop after which a process may still run.
const UNCLEAN: &str = "not every process it started is known to be gone";

/// One way of leaving a process behind, and when.
struct Row {
    how: &'static str,
    /// Left the moment the server starts, before it reads a message; otherwise on a call.
    at_start: bool,
}

const ROWS: &[Row] = &[
    Row {
        how: "setsid",
        at_start: false,
    },
    Row {
        how: "double_fork",
        at_start: false,
    },
    Row {
        how: "setpgid",
        at_start: false,
    },
    Row {
        how: "double_fork",
        at_start: true,
    },
    Row {
        how: "setsid",
        at_start: true,
    },
];

/// A workspace, the server's state directory (the one place it may write) and a configuration
/// admitting its `leave` tool, under `$CARGO_TARGET_TMPDIR`: the server's files are read by a
/// confined process, which is denied `/tmp`.
struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    state: PathBuf,
    config: PathBuf,
}

impl Setup {
    fn new(row: &Row) -> Setup {
        let dir = tempfile::Builder::new()
            .prefix("upstream-survivors-")
            .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        let state = root.join("state");
        fs::create_dir(&ws).unwrap();
        fs::create_dir(&state).unwrap();
        let mut command = vec![
            quoted(&python()),
            quoted(&clients::root().join("tests/upstream/survivor_server.py")),
            quoted(&state),
        ];
        if row.at_start {
            command.push(quoted(Path::new("--at-start")));
            command.push(quoted(Path::new(row.how)));
        }
        let config = root.join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"survivor\"\ncommand = [{}]\ncall_timeout_ms = 20000\n\
                 [upstream.sandbox]\nwrite = [{}]\n{}",
                command.join(", "),
                quoted(&state),
                repo_read()
            ),
        )
        .unwrap();
        Setup {
            _dir: dir,
            ws,
            state,
            config,
        }
    }

    /// The pid the process named `name` noted, once it did.
    fn pid(&self, name: &str) -> u32 {
        let file = self.state.join(format!("{name}.pid"));
        wait_until(
            &format!("`{name}` notes its pid"),
            Duration::from_secs(30),
            || file.exists(),
        );
        fs::read_to_string(&file).unwrap().trim().parse().unwrap()
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.state.join(format!("{name}.marker"))
    }

    /// `toolgate tools admit` of the server's `leave`, which starts the server to list its
    /// tools and stops it; its output.
    fn admit(&self) -> std::process::Output {
        let admit = home::toolgate()
            .args([
                "tools",
                "admit",
                "survivor",
                "leave",
                "--effect",
                "read_only",
            ])
            .arg("--config")
            .arg(&self.config)
            .output()
            .unwrap();
        assert!(admit.status.success(), "admit: {admit:?}");
        admit
    }

    /// Forgets what a process left at start noted, before the server starts again.
    fn forget(&self, name: &str) {
        let _ = fs::remove_file(self.state.join(format!("{name}.pid")));
        let _ = fs::remove_file(self.marker(name));
    }
}

/// Kills `pid` if it still runs, so that a failed row leaves nothing behind.
struct Reaped(u32);

impl Drop for Reaped {
    fn drop(&mut self) {
        if procs::running(self.0) {
            let _ = Command::new(system_program("kill"))
                .args(["-9", &self.0.to_string()])
                .status();
        }
    }
}

/// `toolgate serve` over stdio, past the handshake, its standard error kept.
struct Serving {
    child: Child,
    messages: Receiver<Value>,
    stderr: Arc<Mutex<String>>,
}

impl Serving {
    fn start(setup: &Setup) -> Serving {
        let mut child = spawn_piped(&mut serve_stdio(&setup.ws, &setup.config));
        let stderr = collected(child.stderr.take().unwrap());
        let messages = lines_of(child.stdout.take().unwrap(), |line| {
            serde_json::from_str(&line).unwrap_or(Value::Null)
        });
        let mut serving = Serving {
            child,
            messages,
            stderr,
        };
        serving.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        );
        serving.answer(0);
        serving.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        serving
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.child.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn answer(&self, id: u64) -> Value {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self
                .messages
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("no answer to {id}: {}", self.stderr.lock().unwrap()));
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Calls the server's `leave`, which leaves a process `row.how`, named so too.
    fn leave(&mut self, row: &Row) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "survivor__leave",
            "arguments": {"how": row.how, "name": row.how, "seconds": SLEEP_SECONDS}}}),
        );
        let answer = self.answer(1);
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }

    /// Hangs up, as a client that is done, and waits for toolgate to exit; what it wrote to
    /// standard error.
    fn hang_up(mut self) -> String {
        drop(self.child.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "toolgate did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Its standard error closes with it, and with the upstream it forwarded.
        wait_until(
            "toolgate's standard error is read",
            Duration::from_secs(10),
            || Arc::strong_count(&self.stderr) == 1,
        );
        self.stderr.lock().unwrap().clone()
    }
}

/// After the stop: the process is gone at once, and stays gone past the time it would have
/// written its marker, which never appears.
fn assert_ended(row: &Row, setup: &Setup, name: &str, pid: u32, left_at: Instant, said: &str) {
    let what = format!(
        "{} ({})",
        row.how,
        if row.at_start {
            "at start"
        } else {
            "on a call"
        }
    );
    assert!(
        !procs::running(pid),
        "{what}: process {pid} outlived the stop"
    );
    std::thread::sleep(Duration::from_secs(SLEEP_SECONDS + 1).saturating_sub(left_at.elapsed()));
    assert!(!procs::running(pid), "{what}: process {pid} runs later");
    assert!(
        !setup.marker(name).exists(),
        "{what}: the marker was written after the stop"
    );
    assert!(!said.contains(UNCLEAN), "{what}: {said}");
}

#[test]
fn nothing_an_upstream_leaves_outlives_its_stop() {
    for row in ROWS {
        let setup = Setup::new(row);
        // `tools admit` starts the server to list its tools, and stops it.
        let admitting = Instant::now();
        let admit = setup.admit();
        if row.at_start {
            let pid = setup.pid("start");
            let _reaped = Reaped(pid);
            let said = String::from_utf8_lossy(&admit.stderr).into_owned();
            assert_ended(row, &setup, "start", pid, admitting, &said);
            setup.forget("start");
        }

        let mut serving = Serving::start(&setup);
        let (name, left_at) = if row.at_start {
            ("start", Instant::now())
        } else {
            serving.leave(row);
            (row.how, Instant::now())
        };
        let pid = setup.pid(name);
        let _reaped = Reaped(pid);
        assert!(
            procs::running(pid),
            "{}: the process left is in place",
            row.how
        );
        let said = serving.hang_up();
        assert_ended(row, &setup, name, pid, left_at, &said);
    }
}

/// A toolgate killed outright (SIGKILL) ends nothing itself: what the upstream left, seen by
/// the look at its tree while it served, is ended by the watchdog.
#[test]
fn nothing_an_upstream_leaves_outlives_a_toolgate_killed_outright() {
    for row in ROWS.iter().filter(|row| !row.at_start) {
        let setup = Setup::new(row);
        setup.admit();
        let mut serving = Serving::start(&setup);
        serving.leave(row);
        let left_at = Instant::now();
        let pid = setup.pid(row.how);
        let _reaped = Reaped(pid);
        // A few looks at the upstream's tree have been taken: the call brought the next one
        // within 100 ms, and they follow 200 and 400 ms after that.
        std::thread::sleep(Duration::from_millis(500));
        serving.child.kill().unwrap();
        serving.child.wait().unwrap();
        wait_until(
            &format!("{}: the watchdog ends process {pid}", row.how),
            Duration::from_secs(10),
            || !procs::running(pid),
        );
        assert_ended(row, &setup, row.how, pid, left_at, "");
    }
}
