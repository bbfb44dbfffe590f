//! The cgroup tier against the real kernel: a call in a delegated cgroup gets a cgroup of its
//! own, the escape probes run in it (or leave it) and still die with the call, and the call
//! cgroup is gone afterwards.
//!
//! The test makes its own delegated cgroup, `<cgroup2 mount>/toolgate-test-<pid>-<n>`, marked
//! as systemd marks a `Delegate=yes` unit's, and re-runs this test binary inside it, so that
//! the runner's probe (done once per process) finds a delegated cgroup. It touches no cgroup
//! but the one it made and what the runner made below it, and removes it at the end. A
//! machine with no writable cgroup2 mount fails the test, saying so.
//!
//! The API is argv-only; the test starts `sh -c` on purpose, as the program, to build the
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
use std::process::{Command, Stdio};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use toolgate_exec::{CgroupLimits, CommandSpec, Tier, cgroup_tier, run, unknown};

/// Set in the re-run test process: the test cgroup it moves itself into.
const CGROUP_VAR: &str = "TOOLGATE_TEST_CGROUP";
/// Set in the re-run test process: where its probes write.
const OUT_VAR: &str = "TOOLGATE_TEST_OUT";

const TEST_NAME: &str = "a_call_in_a_delegated_cgroup_gets_its_own_and_leaves_nothing_alive";

fn sh(cwd: &Path, script: &str, args: &[&str]) -> CommandSpec {
    CommandSpec::new(program("sh"), cwd)
        .args(["-c", script, "sh"])
        .args(args.iter().copied())
        .env(env())
}

/// The mount point of the first cgroup2 mount this process sees.
fn cgroup2_mount() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        (after.split(' ').next()? == "cgroup2")
            .then(|| before.split(' ').nth(4).map(PathBuf::from))?
    })
}

/// The `0::PATH` line of a `/proc/<pid>/cgroup` text.
fn v2_line(text: &str) -> String {
    let line = text.lines().find(|l| l.starts_with("0::"));
    line.unwrap_or_else(|| panic!("no cgroup v2 line in {text:?}"))
        .to_owned()
}

/// The call cgroups the runner left in `dir`.
fn call_cgroups(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("toolgate-call-"))
        .collect()
}

/// The test's own cgroup, killed and removed however the test ends.
struct TestCgroup(PathBuf);

impl TestCgroup {
    fn populated(&self) -> bool {
        std::fs::read_to_string(self.0.join("cgroup.events"))
            .map(|events| !events.lines().any(|l| l.trim() == "populated 0"))
            .unwrap_or(false)
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        if !self.0.exists() {
            return;
        }
        if self.populated() {
            // Only processes in a cgroup this test made: the re-run test and what it ran.
            let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
            let until = Instant::now() + Duration::from_secs(2);
            while self.populated() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        for name in call_cgroups(&self.0) {
            let _ = std::fs::remove_dir(self.0.join(name));
        }
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn a_call_in_a_delegated_cgroup_gets_its_own_and_leaves_nothing_alive() {
    if let (Ok(cgroup), Ok(out)) = (std::env::var(CGROUP_VAR), std::env::var(OUT_VAR)) {
        inside(Path::new(&cgroup), Path::new(&out));
        return;
    }
    let mount = cgroup2_mount().unwrap_or_else(|| {
        panic!(
            "this machine has no cgroup2 mount in /proc/self/mountinfo: the cgroup tier cannot \
             be tested here"
        )
    });
    let dir = mount.join(format!("toolgate-test-{}-0", std::process::id()));
    if let Err(e) = std::fs::create_dir(&dir) {
        panic!(
            "cannot create the test cgroup `{}`: {e}; the cgroup tier needs a writable cgroup2 \
             mount (root, or a delegated cgroup) to be tested",
            dir.display()
        );
    }
    let cgroup = TestCgroup(dir.clone());
    assert!(
        dir.join("cgroup.kill").exists(),
        "`{}` has no cgroup.kill: this kernel (before 5.14) has no cgroup tier to test",
        dir.display()
    );
    // What systemd does for a unit with `Delegate=yes`. A test that is not root owns the
    // directory it made, which counts as delegated too.
    let _ = rustix::fs::setxattr(
        &dir,
        "trusted.delegate",
        b"1",
        rustix::fs::XattrFlags::empty(),
    );

    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([TEST_NAME, "--exact", "--nocapture", "--test-threads=1"])
        .env(CGROUP_VAR, &dir)
        .env(OUT_VAR, out.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= until {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let output = child.wait_with_output().unwrap();
    let shown = format!(
        "{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the test inside the cgroup: {shown}"
    );
    assert!(
        shown.contains("1 passed"),
        "the test did not run inside the cgroup: {shown}"
    );

    // Seen from outside too: nothing the probes started is alive, no call cgroup is left.
    let recorded = pids(&out.path().join("pids"));
    assert!(recorded.len() >= 4, "{recorded:?}");
    let alive: Vec<u32> = recorded.into_iter().filter(|&p| running(p)).collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
    assert_eq!(call_cgroups(&dir), Vec::<String>::new());
    assert!(!cgroup.populated(), "the test cgroup still holds processes");
    drop(cgroup);
    assert!(
        !dir.exists(),
        "the test cgroup `{}` was not removed",
        dir.display()
    );
}

/// The re-run test process, which moves itself into the test cgroup `dir` first.
fn inside(dir: &Path, out: &Path) {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).unwrap();
    let probe = cgroup_tier();
    assert_eq!(probe.tier, Tier::SubreaperAndCgroup, "{}", probe.reason);
    assert_eq!(probe.directory.as_deref(), Some(dir));
    let name = dir.file_name().unwrap().to_str().unwrap();
    let own = format!("0::/{name}");
    let never = AtomicBool::new(false);

    // The escape probes: a new session, a double fork, and a process that moves itself back
    // out of the call cgroup into the one above it (possible for a process of toolgate's own
    // user), which only the subreaper path can still end.
    // The leader is moved in once it runs already: it waits for that before it forks (what
    // it forked before would stay outside, as the runner documents).
    let script = r#"
        i=0
        while ! grep -q toolgate-call- /proc/$$/cgroup && [ $i -lt 250 ]; do
            sleep 0.02; i=$((i+1))
        done
        cat /proc/$$/cgroup > cgroup.leader
        echo $$ >> pids
        setsid sh -c 'cat /proc/self/cgroup > cgroup.setsid; echo $$ >> pids; exec sleep 60' &
        ( ( sleep 60 & echo $! >> pids ) & )
        sh -c 'echo $$ > "$1/cgroup.procs"; cat /proc/self/cgroup > cgroup.moved;
               echo $$ >> pids; exec sleep 60' moved "$1" &
        i=0
        while [ "$(wc -l < pids)" -lt 4 ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done
        while [ ! -s cgroup.moved ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done
    "#;
    let dir_text = dir.to_str().unwrap();
    let outcome = run(
        &sh(out, script, &[dir_text]).timeout(Duration::from_secs(20)),
        &never,
    )
    .unwrap();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.tier, Tier::SubreaperAndCgroup, "{outcome:?}");
    assert_eq!(outcome.unknowns, [unknown::DETACHED], "{outcome:?}");
    // The cgroup v2 line of what a probe wrote (a hybrid layout lists v1 hierarchies too).
    let read = |file: &str| v2_line(&std::fs::read_to_string(out.join(file)).unwrap());
    let call = format!("{own}/toolgate-call-{}-", std::process::id());
    assert!(
        read("cgroup.leader").starts_with(&call),
        "{}",
        read("cgroup.leader")
    );
    assert!(
        read("cgroup.setsid").starts_with(&call),
        "{}",
        read("cgroup.setsid")
    );
    assert_eq!(read("cgroup.moved"), own, "it left the call cgroup");
    let recorded = pids(&out.join("pids"));
    assert_eq!(recorded.len(), 4, "{recorded:?}");
    let alive: Vec<u32> = recorded.iter().copied().filter(|&p| running(p)).collect();
    assert!(alive.is_empty(), "still running: {alive:?}");
    assert_eq!(call_cgroups(dir), Vec::<String>::new());

    // A timeout ends the tree through the cgroup as well, and removes it.
    let started = Instant::now();
    let outcome = run(
        &sh(out, "sleep 60 & sleep 60", &[]).timeout(Duration::from_millis(300)),
        &never,
    )
    .unwrap();
    assert!(outcome.timed_out(), "{outcome:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "{outcome:?}");
    assert_eq!(outcome.tier, Tier::SubreaperAndCgroup);
    assert_eq!(call_cgroups(dir), Vec::<String>::new());

    // Limits asked for where the controllers are not enabled for toolgate's cgroup (its
    // `cgroup.subtree_control` is empty, as the probe requires): the call runs, and says which
    // limit it could not set rather than claiming it.
    let outcome = run(
        &sh(out, "true", &[]).cgroup_limits(CgroupLimits {
            pids_max: Some(64),
            memory_max: None,
        }),
        &never,
    )
    .unwrap();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.tier, Tier::SubreaperAndCgroup);
    let controllers = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
    if !controllers.contains("pids") {
        assert!(
            outcome
                .unknowns
                .iter()
                .any(|u| u.starts_with("`pids.max` of the call's cgroup was not set to 64")),
            "{outcome:?}"
        );
    }
    assert_eq!(call_cgroups(dir), Vec::<String>::new());

    // A call cgroup that cannot be made: the call runs on the subreaper alone, and says so.
    std::fs::write(dir.join("cgroup.max.depth"), "0").unwrap();
    let outcome = run(&sh(out, "cat /proc/self/cgroup", &[]), &never);
    std::fs::write(dir.join("cgroup.max.depth"), "max").unwrap();
    let outcome = outcome.unwrap();
    assert!(outcome.success(), "{outcome:?}");
    assert_eq!(outcome.tier, Tier::Subreaper);
    assert_eq!(v2_line(&outcome.stdout.text()), own);
    assert_eq!(outcome.unknowns.len(), 1, "{outcome:?}");
    assert!(
        outcome.unknowns[0]
            .starts_with("the command ran without a cgroup of its own (cannot create"),
        "{outcome:?}"
    );
    assert_eq!(call_cgroups(dir), Vec::<String>::new());

    // The watchdog told of a call cgroup ends it with `cgroup.kill`: here the only way, since
    // the leader it was told of is another process (another start time) than the one inside.
    let call_dir = dir.join("toolgate-call-watchdog-0");
    std::fs::create_dir(&call_dir).unwrap();
    let mut sleeper = Command::new(program("sleep")).arg("60").spawn().unwrap();
    std::fs::write(call_dir.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    let leader = toolgate_exec::ProcessId::of(i32::try_from(sleeper.id()).unwrap()).unwrap();
    let input = format!(
        "c 9 {} {}\ng 9 {}\n",
        leader.pid,
        leader.start + 1,
        call_dir.display()
    );
    toolgate_exec::run_watchdog(input.as_bytes());
    let status = sleeper.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
    assert!(!call_dir.exists(), "the watchdog removed the call cgroup");
}
