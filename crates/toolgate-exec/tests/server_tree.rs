//! A server's whole tree ends with it: every row of the escape table (`tests/corpus/
//! escapes.jsonl`, the ways a process leaves its group that commands are tested with) is run
//! as a long-running server would be, through [`ServerTree`], and ended after it has made its
//! escape. No process it noted is left running, and none writes its late marker.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#[path = "../../../tests/support/procs.rs"]
mod procs;
#[path = "../../../tests/support/programs.rs"]
mod programs;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use procs::{pids, running};
use programs::{env, program};
use toolgate_exec::{ServerTree, resolve_program};

/// One row of the escape table: its name and argv.
fn escapes() -> Vec<(String, Vec<String>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/escapes.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            let argv = row["argv"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned())
                .collect();
            (row["name"].as_str().unwrap().to_owned(), argv)
        })
        .collect()
}

/// The system's own copy of a program, as the runner's tests take it.
fn system_program(name: &str) -> PathBuf {
    resolve_program(name, Some("/usr/bin:/bin"), Path::new("/")).unwrap()
}

/// Kills, by pid, whatever a failed row left, so that one failure does not leak.
fn kill_left(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new(program("kill"))
            .args(["-9", &pid.to_string()])
            .status();
    }
}

#[test]
fn nothing_a_server_starts_outlives_its_end() {
    // `ESCAPE_ROW=name` runs one row alone.
    let only = std::env::var("ESCAPE_ROW").ok();
    for (name, argv) in escapes() {
        if only.as_ref().is_some_and(|only| *only != name) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut command = Command::new(system_program(&argv[0]));
        command
            .args(&argv[1..])
            .current_dir(dir.path())
            .env_clear()
            .envs(env())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let started = Instant::now();
        let (mut server, _pipes) = ServerTree::spawn(&mut command, None).unwrap();
        // A server keeps running while what it left waits: the escape is made by then.
        std::thread::sleep(Duration::from_millis(600));
        assert!(
            !pids(&dir.path().join("pids")).is_empty(),
            "{name}: no pid noted"
        );
        let end = server.end();
        let alive: Vec<u32> = pids(&dir.path().join("pids"))
            .into_iter()
            .filter(|&p| running(p))
            .collect();
        kill_left(&alive);
        assert!(alive.is_empty(), "{name}: still running: {alive:?} {end:?}");
        assert!(end.ended, "{name}: {end:?}");
        assert!(
            end.unknowns.iter().all(|u| !u.contains("still running")),
            "{name}: {end:?}"
        );
        // Asked again, the same answer.
        assert_eq!(server.end().ended, end.ended, "{name}");
        // The delayed action of a killed process never happens.
        std::thread::sleep(Duration::from_millis(2600).saturating_sub(started.elapsed()));
        assert!(
            !dir.path().join("late").exists(),
            "{name}: the late marker appeared"
        );
        let late: Vec<u32> = pids(&dir.path().join("pids"))
            .into_iter()
            .filter(|&p| running(p))
            .collect();
        kill_left(&late);
        assert!(late.is_empty(), "{name}: running later: {late:?}");
    }
}
