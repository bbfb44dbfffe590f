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

/// A server's command: the system's `program` with `args`, in `dir`, with the tests' own
/// environment and no standard streams.
fn server_command(program: &str, args: &[String], dir: &Path) -> Command {
    let mut command = Command::new(system_program(program));
    command
        .args(args)
        .current_dir(dir)
        .env_clear()
        .envs(env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
}

/// Kills, by pid, whatever a failed row left, so that one failure does not leak.
fn kill_left(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new(program("kill"))
            .args(["-9", &pid.to_string()])
            .status();
    }
}

/// Held by each test for its whole run: one server at a time in this process. An orphan
/// whose parent died before any look proves it a server's is left to another tree running
/// beside it (see `toolgate_exec::household`), which would end it instead; each row here is
/// about one server's own tree.
static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn alone() -> std::sync::MutexGuard<'static, ()> {
    ALONE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn nothing_a_server_starts_outlives_its_end() {
    let _alone = alone();
    // `ESCAPE_ROW=name` runs one row alone.
    let only = std::env::var("ESCAPE_ROW").ok();
    for (name, argv) in escapes() {
        if only.as_ref().is_some_and(|only| *only != name) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut command = server_command(&argv[0], &argv[1..], dir.path());
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

/// Records when each process of a tree was told of, as the watchdog is told.
#[derive(Debug, Default)]
struct Told(std::sync::Mutex<Vec<(i32, Instant)>>);

impl toolgate_exec::TreeObserver for Told {
    fn started(&self, _call: u64, _leader: toolgate_exec::ProcessId) -> std::io::Result<()> {
        Ok(())
    }
    fn saw(&self, _call: u64, process: toolgate_exec::ProcessId) {
        self.0.lock().unwrap().push((process.pid, Instant::now()));
    }
    fn ended(&self, _call: u64) {}
}

/// A server given work after a long quiet spell (its tree looked at only every 1.6 s by then)
/// is looked at again within 100 ms of being told so: what the work started is told to the
/// observer — the watchdog, which ends it should toolgate be killed — at once, not up to
/// 1.6 s later.
#[test]
fn a_server_given_work_is_looked_at_soon() {
    use std::io::Write as _;
    let _alone = alone();
    let dir = tempfile::tempdir().unwrap();
    let script = "read x; sleep 30 & echo $! > pid; read y".to_owned();
    let mut command = server_command("sh", &["-c".to_owned(), script], dir.path());
    command.stdin(Stdio::piped());
    let told = std::sync::Arc::new(Told::default());
    let observer: std::sync::Arc<dyn toolgate_exec::TreeObserver> = told.clone();
    let started = Instant::now();
    let (mut server, pipes) = ServerTree::spawn(&mut command, Some(observer)).unwrap();
    let mut stdin = pipes.stdin.unwrap();
    // Quiet since it started: looked at 0.1, 0.3, 0.7, 1.5 and 3.1 s in, next at 4.7 s.
    std::thread::sleep(Duration::from_millis(3300).saturating_sub(started.elapsed()));
    let given = Instant::now();
    stdin.write_all(b"work\n").unwrap();
    server.busy().unwrap().tell();
    let pid_file = dir.path().join("pid");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pid_file.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let deadline = given + Duration::from_secs(3);
    let seen = loop {
        let seen = told
            .0
            .lock()
            .unwrap()
            .iter()
            .find(|(p, _)| *p == pid)
            .map(|(_, at)| *at);
        if seen.is_some() || Instant::now() >= deadline {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let end = server.end();
    kill_left(&[u32::try_from(pid).unwrap()]);
    let seen = seen.expect("the process the work started was never told of");
    assert!(
        seen.saturating_duration_since(given) < Duration::from_millis(700),
        "told of {:?} after the work was given",
        seen.saturating_duration_since(given)
    );
    assert!(end.ended, "{end:?}");
}

/// Two servers alive at once: what one leaves as an orphan before any look proved it the
/// server's may be taken by the other (whichever looks first). Ending the first then either
/// ends that orphan or says it is not known to be gone, never `ended` with it still running.
#[test]
fn an_orphan_another_server_holds_keeps_an_end_from_being_sure() {
    let _alone = alone();
    let spawn = |dir: &Path, script: &str| {
        let mut command = server_command("sh", &["-c".to_owned(), script.to_owned()], dir);
        ServerTree::spawn(&mut command, None).unwrap().0
    };
    let dir = tempfile::tempdir().unwrap();
    // Started first, it looks first: the orphan the second leaves is its to take.
    let mut other = spawn(dir.path(), "sleep 30");
    std::thread::sleep(Duration::from_millis(50));
    // The orphan's parent exits at once: no look sees it as the server's child.
    let mut server = spawn(
        dir.path(),
        "sh -c 'setsid sleep 30 & echo $! > pids'; sleep 30",
    );
    std::thread::sleep(Duration::from_millis(600));
    let noted = pids(&dir.path().join("pids"));
    assert!(!noted.is_empty(), "no pid noted");
    let end = server.end();
    let alive: Vec<u32> = noted.iter().copied().filter(|&p| running(p)).collect();
    let other_end = other.end();
    kill_left(&noted);
    assert!(
        alive.is_empty() || !end.ended,
        "ended with {alive:?} still running: {end:?}"
    );
    assert!(
        alive.is_empty()
            || end
                .unknowns
                .iter()
                .any(|u| u.contains("held by another process tree")),
        "{end:?}"
    );
    assert!(other_end.ended, "{other_end:?}");
}
