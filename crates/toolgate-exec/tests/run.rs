//! The runner against real programs: timeouts, process trees that resist, floods, stdin, the
//! environment. Every test that starts background processes records their pids and proves
//! afterwards that none is still running.
//!
//! The API is argv-only; these tests start `sh -c` on purpose, as the program, to build the
//! hostile process trees.

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

use procs::{pids, running};
use programs::{env, program};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use toolgate_exec::{
    CancelToken, Cancellation, CommandSpec, ExecError, Exit, RunOutcome, StopReason,
    resolve_program, run, scrub_env, unknown, utf8_env,
};

/// `sh -c script` in `cwd`, with the scrubbed environment.
fn sh(cwd: &Path, script: &str) -> CommandSpec {
    CommandSpec::new(program("sh"), cwd)
        .args(["-c", script])
        .env(env())
}

/// Held by every test: when commands run side by side, an orphan whose parent died before
/// anyone saw it is given to every call that may have started it, and would show in the
/// unknowns of a neighbour.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn never() -> AtomicBool {
    AtomicBool::new(false)
}

fn assert_none_running(file: &Path) {
    let pids = pids(file);
    assert!(!pids.is_empty(), "the script recorded no pids");
    let alive: Vec<u32> = pids.into_iter().filter(|&p| running(p)).collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
}

#[test]
fn exit_codes_signals_and_plain_arguments() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(&sh(dir.path(), "exit 7"), &never()).unwrap();
    assert_eq!(outcome.exit, Exit::Code(7));
    assert!(!outcome.success() && outcome.stopped.is_none());
    let outcome = run(&sh(dir.path(), "kill -9 $$"), &never()).unwrap();
    assert_eq!(outcome.exit, Exit::Signal(9));
    assert!(outcome.stopped.is_none() && outcome.unknowns.is_empty());

    // Shell syntax in arguments is text: printf prints each argument on its own line.
    let hostile = [
        ";",
        "|",
        "$(touch marker)",
        "`touch marker`",
        "&&",
        ">",
        "*",
        "a b",
    ];
    let spec = CommandSpec::new(program("printf"), dir.path())
        .args(["%s\n"])
        .args(hostile)
        .env(env());
    let outcome = run(&spec, &never()).unwrap();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.stdout.text(), format!("{}\n", hostile.join("\n")));
    assert!(!dir.path().join("marker").exists());
}

#[test]
fn the_program_sees_the_name_it_was_called_by() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::new(program("cat"), dir.path())
        .arg0("kitty")
        .args(["/proc/self/cmdline"]);
    let outcome = run(&spec, &never()).unwrap();
    assert_eq!(outcome.stdout.text(), "kitty\0/proc/self/cmdline\0");
    let spec = CommandSpec::new(program("cat"), dir.path()).args(["/proc/self/cmdline"]);
    let outcome = run(&spec, &never()).unwrap();
    assert!(
        outcome
            .stdout
            .text()
            .starts_with(&format!("{}\0", program("cat").display()))
    );
}

#[test]
fn the_working_directory_is_the_one_given() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    let outcome = run(&CommandSpec::new(program("pwd"), &cwd).env(env()), &never()).unwrap();
    assert_eq!(outcome.stdout.text().trim_end(), cwd.to_str().unwrap());
}

#[test]
fn specs_must_be_absolute_and_spawnable() {
    let _serial = serial();
    let error = run(&CommandSpec::new("sh", "/"), &never()).unwrap_err();
    assert!(matches!(
        error,
        ExecError::NotAbsolute {
            what: "program",
            ..
        }
    ));
    assert_eq!(
        error.to_string(),
        "the program `sh` is not an absolute path"
    );
    let error = run(&CommandSpec::new(program("sh"), "tmp"), &never()).unwrap_err();
    assert_eq!(error.code(), "invalid_command");
    let error = run(&CommandSpec::new("/nonexistent/program", "/"), &never()).unwrap_err();
    assert_eq!(error.code(), "spawn_failed");
    let missing_cwd = CommandSpec::new(program("true"), "/nonexistent/dir");
    assert_eq!(
        run(&missing_cwd, &never()).unwrap_err().code(),
        "spawn_failed"
    );
}

#[test]
fn a_timeout_kills_the_command() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::new(program("sleep"), dir.path())
        .args(["100"])
        .timeout(Duration::from_millis(200));
    let started = Instant::now();
    let outcome = run(&spec, &never()).unwrap();
    assert!(started.elapsed() < Duration::from_secs(3), "{outcome:?}");
    assert!(outcome.timed_out());
    assert_eq!(outcome.exit, Exit::Signal(15), "SIGTERM was enough");
    assert_eq!(outcome.unknowns, [unknown::KILLED_ON_TIMEOUT]);
    assert!(outcome.duration >= Duration::from_millis(200));
}

#[test]
fn a_grandchild_that_ignores_sigterm_dies_too() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    // The ignored SIGTERM is inherited through fork and exec, by the subshell and by sleep.
    let script = "trap '' TERM; sleep 100 & echo $! >> pids; \
                  (trap '' TERM; sleep 100) & echo $! >> pids; echo $$ >> pids; wait";
    let spec = sh(dir.path(), script)
        .timeout(Duration::from_millis(300))
        .kill_grace(Duration::from_millis(200));
    let started = Instant::now();
    let outcome = run(&spec, &never()).unwrap();
    let took = started.elapsed();
    assert!(outcome.timed_out(), "{outcome:?}");
    assert_eq!(outcome.exit, Exit::Signal(9), "only SIGKILL ended it");
    assert!(
        took >= Duration::from_millis(500),
        "the grace was given: {took:?}"
    );
    assert!(took < Duration::from_secs(4), "{took:?}");
    assert_eq!(pids(&pidfile).len(), 3);
    assert_none_running(&pidfile);
}

#[test]
fn a_fork_loop_under_a_timeout_is_killed_to_the_last_process() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    // Each round starts a subshell that itself keeps forking sleepers.
    let script = r#"echo $$ >> pids
        while :; do
          sh -c 'echo $$ >> pids; while :; do sleep 100 & echo $! >> pids; sleep 0.02; done' &
          echo $! >> pids
          sleep 0.01
        done"#;
    let spec = sh(dir.path(), script).timeout(Duration::from_millis(500));
    let outcome = run(&spec, &never()).unwrap();
    assert!(outcome.timed_out(), "{outcome:?}");
    assert!(
        pids(&pidfile).len() > 10,
        "the loop forked: {}",
        pids(&pidfile).len()
    );
    assert_none_running(&pidfile);
}

#[test]
fn cancelling_kills_the_command() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let cancelled = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancelled);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        flag.store(true, Ordering::Relaxed);
    });
    let spec = sh(dir.path(), "sleep 100 & echo $! >> pids; wait");
    let started = Instant::now();
    let outcome = run(&spec, &*cancelled).unwrap();
    setter.join().unwrap();
    assert!(outcome.cancelled(), "{outcome:?}");
    assert_eq!(outcome.stopped, Some(StopReason::Cancelled));
    assert_eq!(outcome.unknowns, [unknown::KILLED_ON_CANCEL]);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_none_running(&pidfile);
    // A closure works as well as a flag.
    let outcome = run(&sh(dir.path(), "sleep 100"), &|| true).unwrap();
    assert!(outcome.cancelled());
}

#[test]
fn a_cancel_token_wakes_the_runner_and_kills_the_command() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    let token = Arc::new(CancelToken::new().unwrap());
    let waker = token.waker().unwrap();
    let mut fds = [rustix::event::PollFd::new(
        &waker,
        rustix::event::PollFlags::IN,
    )];
    let zero = rustix::event::Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    assert_eq!(rustix::event::poll(&mut fds, Some(&zero)).unwrap(), 0);
    let canceller = Arc::clone(&token);
    let setter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        canceller.cancel();
    });
    let spec = sh(dir.path(), "sleep 100 & echo $! >> pids; wait");
    let started = Instant::now();
    let outcome = run(&spec, &*token).unwrap();
    setter.join().unwrap();
    assert!(outcome.cancelled(), "{outcome:?}");
    assert_eq!(outcome.unknowns, [unknown::KILLED_ON_CANCEL]);
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_none_running(&pidfile);
    // Once cancelled it stays so, and readable, for every later run.
    assert_eq!(rustix::event::poll(&mut fds, Some(&zero)).unwrap(), 1);
    let started = Instant::now();
    let outcome = run(&sh(dir.path(), "sleep 100"), &*token).unwrap();
    assert!(outcome.cancelled(), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[test]
fn processes_left_behind_by_a_finished_command_are_killed() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pids");
    // The sleeper holds stdout open: without the group kill the run would wait 100 s.
    let spec = sh(dir.path(), "sleep 100 & echo $! >> pids; echo done");
    let started = Instant::now();
    let outcome = run(&spec, &never()).unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.stdout.text(), "done\n");
    assert_eq!(outcome.unknowns, [unknown::LEFT_RUNNING]);
    assert!(outcome.ended, "killed, and known to be gone: {outcome:?}");
    assert_none_running(&pidfile);
}

/// One row of `tests/corpus/escapes.jsonl`: a command whose processes try to outlive it.
#[derive(Debug)]
struct Escape {
    name: String,
    argv: Vec<String>,
    timeout: Option<Duration>,
}

fn escapes() -> Vec<Escape> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/escapes.jsonl");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let row: serde_json::Value = serde_json::from_str(line).unwrap();
            Escape {
                name: row["name"].as_str().unwrap().to_owned(),
                argv: row["argv"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap().to_owned())
                    .collect(),
                timeout: row["timeout_ms"].as_u64().map(Duration::from_millis),
            }
        })
        .collect()
}

/// The system's own copy of a program (`python3` from `/usr/bin`, not a version manager's
/// shim, which needs an environment the runner does not pass).
fn system_program(name: &str) -> PathBuf {
    resolve_program(name, Some("/usr/bin:/bin"), Path::new("/")).unwrap()
}

/// Kills, by pid, whatever a failed row left, so that one failure does not leak.
fn kill_left(pids: &[u32]) {
    for pid in pids {
        let _ = std::process::Command::new(program("kill"))
            .args(["-9", &pid.to_string()])
            .status();
    }
}

#[test]
fn nothing_a_command_starts_outlives_it() {
    let _serial = serial();
    // `ESCAPE_ROW=name` runs one row alone.
    let only = std::env::var("ESCAPE_ROW").ok();
    for row in escapes() {
        if only.as_ref().is_some_and(|name| *name != row.name) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut spec = CommandSpec::new(system_program(&row.argv[0]), dir.path())
            .args(row.argv[1..].iter().cloned())
            .env(env());
        if let Some(timeout) = row.timeout {
            spec = spec.timeout(timeout);
        }
        let started = Instant::now();
        let outcome = run(&spec, &never()).unwrap();
        let took = started.elapsed();
        let seen = pids(&dir.path().join("pids"));
        let alive: Vec<u32> = seen.iter().copied().filter(|&p| running(p)).collect();
        kill_left(&alive);
        // A probe killed before it could note its pid proves nothing by its pids; its late
        // marker below still does.
        assert!(alive.is_empty(), "{}: still running: {alive:?}", row.name);
        assert!(took < Duration::from_secs(4), "{}: {took:?}", row.name);
        let expected = if row.timeout.is_some() {
            unknown::KILLED_ON_TIMEOUT
        } else if outcome.unknowns.iter().any(|u| u == unknown::LEFT_RUNNING) {
            unknown::LEFT_RUNNING
        } else {
            unknown::DETACHED
        };
        assert_eq!(
            outcome.unknowns.first().map(String::as_str),
            Some(expected),
            "{}: {outcome:?}",
            row.name
        );
        assert!(
            outcome
                .unknowns
                .iter()
                .all(|u| !u.contains("still running")),
            "{}: {outcome:?}",
            row.name
        );
        assert!(outcome.ended, "{}: {outcome:?}", row.name);
        // The delayed action of a killed process never happens.
        std::thread::sleep(Duration::from_millis(2600).saturating_sub(started.elapsed()));
        assert!(
            !dir.path().join("late").exists(),
            "{}: the late marker appeared",
            row.name
        );
        let late: Vec<u32> = pids(&dir.path().join("pids"))
            .into_iter()
            .filter(|&p| running(p))
            .collect();
        kill_left(&late);
        assert!(late.is_empty(), "{}: running later: {late:?}", row.name);
    }
}

/// An observer that keeps what it is told, and when it heard of each process.
#[derive(Debug, Default)]
struct Notes {
    lines: std::sync::Mutex<Vec<String>>,
    saw: std::sync::Mutex<Vec<(Instant, u32)>>,
}

impl toolgate_exec::TreeObserver for Notes {
    fn started(&self, call: u64, leader: toolgate_exec::ProcessId) -> std::io::Result<()> {
        self.lines
            .lock()
            .unwrap()
            .push(format!("started {call} {}", leader.pid));
        Ok(())
    }
    fn saw(&self, call: u64, process: toolgate_exec::ProcessId) {
        let heard = (Instant::now(), process.pid.unsigned_abs());
        self.saw.lock().unwrap().push(heard);
        self.lines
            .lock()
            .unwrap()
            .push(format!("saw {call} {}", process.pid));
    }
    fn ended(&self, call: u64) {
        self.lines.lock().unwrap().push(format!("ended {call}"));
    }
}

#[test]
fn the_observer_hears_of_every_process_of_the_tree_and_of_the_end() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Notes::default());
    let spec = sh(
        dir.path(),
        "setsid sh -c 'echo $$ >> pids; sleep 30' & sleep 0.3",
    )
    .observer(notes.clone());
    let outcome = run(&spec, &never()).unwrap();
    assert_eq!(outcome.unknowns, [unknown::DETACHED], "{outcome:?}");
    assert_none_running(&dir.path().join("pids"));
    let escaped = pids(&dir.path().join("pids"))[0];
    let lines = notes.lines.lock().unwrap().clone();
    let call = lines[0].split(' ').nth(1).unwrap().to_owned();
    assert!(lines[0].starts_with("started "), "{lines:?}");
    assert!(
        lines.contains(&format!("saw {call} {escaped}")),
        "{escaped}: {lines:?}"
    );
    assert_eq!(lines.last().unwrap(), &format!("ended {call}"), "{lines:?}");
}

#[test]
fn a_tree_hopping_to_new_groups_is_claimed_while_its_leader_runs() {
    let _serial = serial();
    // Every few milliseconds the tree forks, moves the child to a new group and exits: each
    // process is new, adopted by this process, and shaped like a child it spawned itself.
    // Such a process can wait to be registered only while a spawn is under way; none is, so
    // each look claims the process it finds, though it is gone a moment later.
    let dir = tempfile::tempdir().unwrap();
    let hop = "import os, time\n\
               if os.fork() == 0:\n    \
                   start = time.time()\n    \
                   while True:\n        \
                       with open('pids', 'a') as f: f.write(str(os.getpid()) + '\\n')\n        \
                       if time.time() - start > 2: open('late', 'w').close()\n        \
                       if os.fork() != 0: os._exit(0)\n        \
                       os.setpgid(0, 0)\n        \
                       time.sleep(0.002)\n\
               time.sleep(1)\n";
    let notes = Arc::new(Notes::default());
    let spec = CommandSpec::new(system_program("python3"), dir.path())
        .args(["-c", hop])
        .env(env())
        .observer(notes.clone());
    let started = Instant::now();
    let outcome = run(&spec, &never()).unwrap();
    let hoppers = pids(&dir.path().join("pids"));
    let alive: Vec<u32> = hoppers.iter().copied().filter(|&p| running(p)).collect();
    kill_left(&alive);
    assert!(alive.is_empty(), "still running: {alive:?}");
    assert_eq!(
        outcome.unknowns.first().map(String::as_str),
        Some(unknown::DETACHED),
        "{outcome:?}"
    );
    // Claimed while the leader still ran its second, look after look: not only once the
    // call was ending and a grace renewed by every new process had to be outwaited.
    let early = notes
        .saw
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, pid)| *at < started + Duration::from_millis(800) && hoppers.contains(pid))
        .count();
    assert!(
        early >= 3,
        "{early} hoppers claimed in the leader's first 800 ms"
    );
    std::thread::sleep(Duration::from_millis(2600).saturating_sub(started.elapsed()));
    assert!(
        !dir.path().join("late").exists(),
        "the late marker appeared"
    );
}

#[derive(Debug)]
struct Refusing;

impl toolgate_exec::TreeObserver for Refusing {
    fn started(&self, _: u64, _: toolgate_exec::ProcessId) -> std::io::Result<()> {
        Err(std::io::Error::other("no watchdog"))
    }
    fn saw(&self, _: u64, _: toolgate_exec::ProcessId) {}
    fn ended(&self, _: u64) {}
}

#[test]
fn a_command_the_observer_cannot_watch_does_not_keep_running() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "echo $$ >> pids; sleep 1; touch late").observer(Arc::new(Refusing));
    let error = run(&spec, &never()).unwrap_err();
    assert_eq!(error.code(), "io_error", "{error}");
    assert!(error.to_string().contains("no watchdog"), "{error}");
    std::thread::sleep(Duration::from_millis(1300));
    assert!(!dir.path().join("late").exists());
}

#[test]
fn adopted_zombies_are_reaped_and_no_other_child_is() {
    let _serial = serial();
    // Children of this test process that are not the runner's: their statuses are their
    // holders', even when they are collected long after the child exited. One leads a group of
    // its own and is registered, as toolgate registers its upstreams; one is a plain child.
    let mut leader = std::process::Command::new(program("sh"));
    std::os::unix::process::CommandExt::process_group(&mut leader, 0);
    let mut registered = leader.args(["-c", "exit 7"]).spawn().unwrap();
    toolgate_exec::own_child(registered.id());
    let mut plain = std::process::Command::new(program("sh"))
        .args(["-c", "exit 8"])
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        &sh(
            dir.path(),
            "setsid sh -c 'echo $$ >> pids; sleep 30' & sleep 0.3",
        ),
        &never(),
    )
    .unwrap();
    assert_eq!(outcome.unknowns, [unknown::DETACHED], "{outcome:?}");
    let escaped = pids(&dir.path().join("pids"))[0];
    // Killed, adopted by this process, and reaped: not even a zombie is left.
    assert!(
        !Path::new(&format!("/proc/{escaped}")).exists(),
        "{escaped} is still in the process table"
    );
    assert_eq!(registered.wait().unwrap().code(), Some(7));
    assert_eq!(plain.wait().unwrap().code(), Some(8));
}

/// Peak resident memory of this process, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_one_gib_flood_is_drained_in_bounded_memory() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let before = peak_rss_kib();
    let spec = CommandSpec::new(program("head"), dir.path())
        .args(["-c", "1073741824", "/dev/zero"])
        .capture_bytes(64 * 1024)
        .timeout(Duration::from_secs(60));
    let outcome = run(&spec, &never()).unwrap();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.stdout.total_bytes(), 1 << 30);
    assert_eq!(
        outcome.stdout.head().len() + outcome.stdout.tail().len(),
        64 * 1024
    );
    assert_eq!(outcome.stdout.elided_bytes(), (1 << 30) - 64 * 1024);
    assert!(outcome.stdout.head().iter().all(|&b| b == 0));
    assert!(outcome.unknowns.is_empty());
    // Other tests run in this process too; 64 MiB of slack is still far below 1 GiB.
    let grown = peak_rss_kib().saturating_sub(before);
    assert!(grown < 64 * 1024, "peak memory grew by {grown} KiB");
    eprintln!("1 GiB drained in {:?}", outcome.duration);
}

#[test]
fn a_flood_that_never_ends_still_times_out() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::new(program("cat"), dir.path())
        .args(["/dev/zero"])
        .timeout(Duration::from_millis(300));
    let started = Instant::now();
    let outcome = run(&spec, &never()).unwrap();
    assert!(outcome.timed_out());
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(outcome.stdout.total_bytes() > 0);
    assert!(outcome.stdout.elided_bytes() > 0);
}

#[test]
fn stdin_is_delivered_and_then_closed() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let outcome = run(
        &CommandSpec::new(program("cat"), dir.path()).stdin("hello\nworld\n"),
        &never(),
    )
    .unwrap();
    assert_eq!(outcome.stdout.text(), "hello\nworld\n");
    // More than a pipe holds: written as the command reads.
    let big = vec![b'x'; 4 << 20];
    let outcome = run(
        &CommandSpec::new(program("wc"), dir.path())
            .args(["-c"])
            .stdin(big.clone()),
        &never(),
    )
    .unwrap();
    assert_eq!(outcome.stdout.text().trim(), (4 << 20).to_string());
    // A command that never reads its stdin does not block the run.
    let outcome = run(
        &CommandSpec::new(program("true"), dir.path()).stdin(big),
        &never(),
    )
    .unwrap();
    assert!(outcome.success());
    // Without stdin bytes, stdin is /dev/null: cat ends at once.
    let outcome = run(&CommandSpec::new(program("cat"), dir.path()), &never()).unwrap();
    assert!(outcome.success());
    assert_eq!(outcome.stdout.total_bytes(), 0);
}

#[test]
fn the_command_sees_exactly_the_environment_given() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let ambient = utf8_env(std::env::vars_os()).chain(
        [
            ("FAKE_API_TOKEN", "tok-123"),
            ("AWS_SECRET_ACCESS_KEY", "aws-456"),
            ("LD_PRELOAD", "/tmp/evil.so"),
            ("BASH_ENV", "/tmp/evil.sh"),
            ("LC_ALL", "C"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    let scrubbed = scrub_env(ambient);
    let outcome = run(
        &CommandSpec::new(program("env"), dir.path()).env(scrubbed.clone()),
        &never(),
    )
    .unwrap();
    let text = outcome.stdout.text();
    for secret in ["tok-123", "aws-456", "evil", "FAKE_API_TOKEN", "LD_PRELOAD"] {
        assert!(!text.contains(secret), "{secret} leaked: {text}");
    }
    let mut seen: Vec<String> = text.lines().map(str::to_owned).collect();
    seen.sort();
    let mut expected: Vec<String> = scrubbed.iter().map(|(k, v)| format!("{k}={v}")).collect();
    expected.sort();
    assert_eq!(seen, expected);
    assert!(expected.iter().any(|l| l == "LC_ALL=C"));
    // And an empty environment is empty.
    let outcome = run(&CommandSpec::new(program("env"), dir.path()), &never()).unwrap();
    assert_eq!(outcome.stdout.total_bytes(), 0);
}

#[test]
fn output_is_kept_as_head_and_tail() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let spec = CommandSpec::new(program("seq"), dir.path())
        .args(["1", "100000"])
        .capture_bytes(20);
    let outcome: RunOutcome = run(&spec, &never()).unwrap();
    let text = outcome.stdout.text();
    assert!(text.starts_with("1\n2\n3\n4\n5\n"), "{text}");
    assert!(text.ends_with("99\n100000\n"), "{text}");
    assert!(outcome.stdout.elided_bytes() > 500_000);
    assert_eq!(outcome.stderr.total_bytes(), 0);
}
