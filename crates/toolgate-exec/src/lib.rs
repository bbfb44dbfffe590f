//! toolgate's process runner: argv only, never a shell, and the command's whole tree lives and
//! dies with the call.
//!
//! [`run`] starts an absolute program with explicit arguments, an explicit environment (start
//! from [`scrub_env`]) and an absolute working directory, as the leader of a new process
//! group. Its output is captured bounded — a head, a tail and a byte count per stream
//! ([`Capture`]) — while the pipes keep draining, so a flood neither blocks the command nor
//! grows memory. A command's lifetime is the call's, for its whole tree: this process becomes
//! the subreaper of what it starts ([`become_subreaper`]), so what a command leaves behind —
//! `setsid`, a double fork, a daemon — is adopted here rather than by init, and the tree is
//! followed in `/proc` while it runs (see `tree` and `household`). When the deadline passes or
//! the caller cancels, the tree gets `SIGTERM` and a short grace; then, and whenever the leader
//! exits leaving anything behind, the tree is stopped (`SIGSTOP`, until a look finds nothing
//! new) and killed, and its zombies are reaped. What nobody can vouch for — side effects of a
//! killed command, a process that would not die, an output still held open — comes back in
//! [`RunOutcome::unknowns`]. A [`TreeObserver`] hears of every process of the tree; the
//! [`watchdog`] is the one that ends the tree should this process be killed outright.
//! Where this process's own cgroup v2 is delegated to it, each call also gets a child cgroup,
//! ended with `cgroup.kill` when the call ends ([`cgroup_tier`] says whether; the subreaper
//! path stays the guarantee, see `cgroup`); [`RunOutcome::tier`] says what ended the tree.
//!
//! A child that serves for long (an upstream MCP server) is started as a [`ServerTree`]: the
//! same subreaper, register, cgroup and observer, its tree looked for and ended when it stops.
//!
//! [`resolve_program`] turns an `argv[0]` into the canonical path that a person approves and
//! that then runs.
//!
//! Linux only (`/proc`, pidfds, process groups, `PR_SET_CHILD_SUBREAPER`). Writing stdin to a command that stopped
//! reading raises `SIGPIPE`; Rust programs ignore it from `main` on, a host written in another
//! language must too.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use toolgate_exec::{CommandSpec, Exit, resolve_program, run, scrub_env, utf8_env};
//!
//! let env = scrub_env(utf8_env(std::env::vars_os()));
//! let path = env.iter().find(|(k, _)| k == "PATH").map(|(_, v)| v.as_str());
//! let program = resolve_program("sh", path, std::path::Path::new("/")).unwrap();
//! let spec = CommandSpec::new(program, "/")
//!     .args(["-c", "echo $0; echo oops >&2; exit 3", "a;b|c $(touch x)"])
//!     .env(env)
//!     .timeout(Duration::from_secs(10));
//! let outcome = run(&spec, &AtomicBool::new(false)).unwrap();
//! assert_eq!(outcome.exit, Exit::Code(3));
//! // The argument reached the program as one plain string; nothing interpreted it.
//! assert_eq!(outcome.stdout.text(), "a;b|c $(touch x)\n");
//! assert_eq!(outcome.stderr.text(), "oops\n");
//! assert!(outcome.unknowns.is_empty());
//! ```

mod capture;
mod cgroup;
mod env;
mod household;
mod machine;
mod procs;
mod program;
mod serving;
mod tree;
pub mod watchdog;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::{EventfdFlags, PollFd, PollFlags, Timespec, eventfd, poll};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open};
use thiserror::Error;

pub use capture::Capture;
pub use cgroup::{CgroupProbe, Tier, cgroup_tier};
pub use env::{is_allowed, is_denied, scrub_env, utf8_env};
pub use household::{Spawning, become_subreaper, no_unregistered_children, own_child, spawning};
pub use procs::ProcessId;
pub use program::resolve_program;
pub use serving::{Busy, ServerEnd, ServerPipes, ServerTree};
pub use tree::{TreeObserver, observe_every_command};
pub use watchdog::{Watchdog, run_watchdog};

use capture::CaptureBuffer;
use cgroup::CallCgroup;
use machine::{Action, DRAIN_BOUND, KILL_BOUND, Limits, Phase, Seen, State};
use procs::Stat;
use tree::Tree;

/// Bytes kept per stream unless the spec says otherwise.
pub const DEFAULT_CAPTURE_BYTES: usize = 64 * 1024;

/// Time between `SIGTERM` and `SIGKILL` unless the spec says otherwise.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(300);

/// How often cancellation is looked at while nothing else happens, unless the caller's
/// [`Cancellation`] can wake the runner.
const TICK: Duration = Duration::from_millis(20);

/// Reads per stream per wake-up, so that a flood cannot keep the deadline from being seen.
const READS_PER_WAKE: usize = 16;

const READ_CHUNK: usize = 64 * 1024;

/// Why a command could not be run at all.
#[derive(Debug, Error)]
pub enum ExecError {
    #[error("program `{program}` was not found: {reason}")]
    ProgramNotFound { program: String, reason: String },
    #[error("`{path}` is not an executable file")]
    NotExecutable { path: String },
    #[error("the {what} `{path}` is not an absolute path")]
    NotAbsolute { what: &'static str, path: String },
    #[error("cannot start `{program}`: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("cannot follow the processes of commands: {source}")]
    Subreaper { source: io::Error },
    #[error("while running `{program}`: {what}: {source}")]
    Io {
        program: String,
        what: &'static str,
        source: io::Error,
    },
}

impl ExecError {
    /// A stable, `snake_case` code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            ExecError::ProgramNotFound { .. } => "program_not_found",
            ExecError::NotExecutable { .. } => "not_executable",
            ExecError::NotAbsolute { .. } => "invalid_command",
            ExecError::Spawn { .. } => "spawn_failed",
            ExecError::Subreaper { .. } => "subreaper_unavailable",
            ExecError::Io { .. } => "io_error",
        }
    }
}

/// A way for the caller to give up on a running command.
pub trait Cancellation {
    fn is_cancelled(&self) -> bool;

    /// A descriptor that becomes readable once [`Cancellation::is_cancelled`] holds, so that the
    /// runner wakes the moment the caller gives up. Without one (the default) cancellation is
    /// looked at on every wake-up, at least every 20 ms.
    fn waker(&self) -> Option<BorrowedFd<'_>> {
        None
    }
}

/// A cancellation that wakes the runner at once: [`CancelToken::cancel`] from any thread
/// makes every [`run`] given the token stop its command without waiting for its next tick.
#[derive(Debug)]
pub struct CancelToken {
    cancelled: AtomicBool,
    /// An eventfd written once cancelled, never read: it stays readable.
    event: OwnedFd,
}

impl CancelToken {
    pub fn new() -> io::Result<CancelToken> {
        let event = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
        Ok(CancelToken {
            cancelled: AtomicBool::new(false),
            event,
        })
    }

    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Release);
        // Only a counter at its maximum refuses the write, and that one is readable already.
        let _ = rustix::io::write(&self.event, &1u64.to_ne_bytes());
    }
}

impl Cancellation for CancelToken {
    fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Acquire)
    }

    fn waker(&self) -> Option<BorrowedFd<'_>> {
        Some(self.event.as_fd())
    }
}

impl Cancellation for AtomicBool {
    fn is_cancelled(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

impl<F: Fn() -> bool> Cancellation for F {
    fn is_cancelled(&self) -> bool {
        self()
    }
}

/// What to run. Nothing is inherited from this process: not the environment, not the working
/// directory, not standard input.
#[derive(Debug, Clone)]
pub struct CommandSpec {
    /// Absolute path of the program; see [`resolve_program`].
    pub program: PathBuf,
    /// The name the program sees as its `argv[0]`; `None` is `program`. Multi-call binaries
    /// (rustup's `cargo`, busybox) choose what to be by it, so pass the name the caller used.
    pub arg0: Option<String>,
    /// Arguments after `argv[0]`, each passed as it is.
    pub args: Vec<String>,
    /// Absolute working directory.
    pub cwd: PathBuf,
    /// The whole environment of the command.
    pub env: Vec<(String, String)>,
    /// Bytes written to standard input, which is then closed; `None` is `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Bytes kept of each of stdout and stderr: half from the start, half from the end.
    pub capture_bytes: usize,
    /// Time between `SIGTERM` and `SIGKILL`.
    pub kill_grace: Duration,
    /// Told of every process of the command's tree; `None` is the one set by
    /// [`observe_every_command`], if any.
    pub observer: Option<Arc<dyn TreeObserver>>,
    /// The step that confines the program between fork and exec (the sandbox's); `None` runs
    /// it with this process's own authority (only an operator's `dangerous` setting leads
    /// there).
    pub pre_exec: Option<PreExec>,
    /// Limits written into the call's own cgroup, where there is one (see [`cgroup_tier`]).
    pub cgroup_limits: CgroupLimits,
}

/// A step run in the child between fork and exec — the sandbox's confinement — which the
/// runner installs on the command it spawns. It comes as the closure that installs it, since
/// installing a `pre_exec` hook takes unsafe code, which only the sandbox's crate holds; a
/// step that cannot be taken must fail the spawn, so that nothing runs less confined.
#[derive(Clone)]
pub struct PreExec(Arc<dyn Fn(&mut Command) + Send + Sync>);

impl PreExec {
    /// The step `install` puts on a command (`toolgate_sandbox::Prepared::confine`).
    pub fn new(install: impl Fn(&mut Command) + Send + Sync + 'static) -> Self {
        PreExec(Arc::new(install))
    }

    /// Puts the step on `command`, to run in every child spawned from it.
    pub fn install(&self, command: &mut Command) {
        (self.0)(command);
    }
}

impl std::fmt::Debug for PreExec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PreExec(..)")
    }
}

/// `pids.max` and `memory.max` of a call's own cgroup. They apply only where toolgate's
/// cgroup is delegated to it and the controllers are enabled there; where the call has a
/// cgroup and a limit could not be set, the outcome's unknowns say so.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Processes (and threads) in the call's cgroup at once.
    pub pids_max: Option<u64>,
    /// Bytes of memory the call's cgroup may use.
    pub memory_max: Option<u64>,
}

impl CommandSpec {
    /// `program` in `cwd`, no arguments, an empty environment, a 60 s timeout.
    pub fn new(program: impl Into<PathBuf>, cwd: impl Into<PathBuf>) -> Self {
        CommandSpec {
            program: program.into(),
            arg0: None,
            args: Vec::new(),
            cwd: cwd.into(),
            env: Vec::new(),
            stdin: None,
            timeout: Duration::from_secs(60),
            capture_bytes: DEFAULT_CAPTURE_BYTES,
            kill_grace: DEFAULT_KILL_GRACE,
            observer: None,
            pre_exec: None,
            cgroup_limits: CgroupLimits::default(),
        }
    }

    /// Confines the program by `step` between fork and exec.
    #[must_use]
    pub fn pre_exec(mut self, step: PreExec) -> Self {
        self.pre_exec = Some(step);
        self
    }

    #[must_use]
    pub fn cgroup_limits(mut self, limits: CgroupLimits) -> Self {
        self.cgroup_limits = limits;
        self
    }

    #[must_use]
    pub fn arg0(mut self, name: impl Into<String>) -> Self {
        self.arg0 = Some(name.into());
        self
    }

    #[must_use]
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    #[must_use]
    pub fn env(mut self, env: Vec<(String, String)>) -> Self {
        self.env = env;
        self
    }

    #[must_use]
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    #[must_use]
    pub fn capture_bytes(mut self, bytes: usize) -> Self {
        self.capture_bytes = bytes;
        self
    }

    #[must_use]
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn TreeObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
}

/// How the command's leader ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this status.
    Code(i32),
    /// A signal ended it (ours, on timeout or cancellation, or anyone's).
    Signal(i32),
    /// It could not be reaped: it did not die within the kill bound.
    Unknown,
}

/// Why the runner ended a command before it ended itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Timeout,
    Cancelled,
}

/// What happened.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub exit: Exit,
    /// Set when the runner killed the command.
    pub stopped: Option<StopReason>,
    /// From spawn until the pipes were drained.
    pub duration: Duration,
    pub stdout: Capture,
    pub stderr: Capture,
    /// What nobody can vouch for, in words.
    pub unknowns: Vec<String>,
    /// Whether every process of the command's tree is known to be gone: false when one did
    /// not die when killed, one that left the group kept its output open, one was alive at
    /// the last look (or the last look could not be taken), the leader was never reaped, or
    /// the call's cgroup was not cleanly ended. Its unknowns say which.
    pub ended: bool,
    /// What ended the command's tree: the subreaper alone, or also the call's cgroup.
    pub tier: Tier,
}

impl RunOutcome {
    pub fn timed_out(&self) -> bool {
        self.stopped == Some(StopReason::Timeout)
    }

    pub fn cancelled(&self) -> bool {
        self.stopped == Some(StopReason::Cancelled)
    }

    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        self.stopped.is_none() && self.exit == Exit::Code(0)
    }
}

/// Unknowns, word for word, so callers and tests can match them.
pub mod unknown {
    pub const KILLED_ON_TIMEOUT: &str = "killed on timeout: side effects unknown";
    pub const KILLED_ON_CANCEL: &str = "killed on cancellation: side effects unknown";
    pub const LEFT_RUNNING: &str =
        "the command left processes running in its group; they were killed: side effects unknown";
    pub const DETACHED: &str = "the command left processes running outside its process group \
        (a new session or group, a double fork); they were stopped and killed: side effects \
        unknown";
    pub const UNKILLABLE: &str =
        "some processes of the command did not die when killed and may still be running";
    pub const ESCAPED: &str = "a process that left the command's process group kept its output \
        open; it may still be running and its later output was not captured";

    /// The call had no cgroup of its own although toolgate's cgroup is delegated to it.
    pub fn no_call_cgroup(reason: &str) -> String {
        format!(
            "the command ran without a cgroup of its own ({reason}); its tree was followed and \
             ended by the subreaper alone"
        )
    }

    /// The call's cgroup could not be ended or removed.
    pub fn call_cgroup_left(reason: &str) -> String {
        format!("the command's cgroup was not cleanly ended: {reason}")
    }

    /// A process of the command's tree that was still alive when the run ended.
    pub fn survivor(pid: i32, name: &str) -> String {
        format!("process {pid} (`{name}`) of the command was still running when the call ended")
    }
}

/// How often the tree is looked at in `/proc` during the first [`CLOSE_WATCH`] of a run, and
/// after it. Most commands are short, and a fork that escapes is best seen early.
const SCAN_EARLY: Duration = Duration::from_millis(20);
const SCAN_LATER: Duration = Duration::from_millis(100);
const CLOSE_WATCH: Duration = Duration::from_secs(2);

/// Survivors named one by one in the unknowns; more are counted.
const NAMED_SURVIVORS: usize = 8;

/// Spawns `command` as the leader of a process group of its own, registered at once as this
/// process's own child ([`own_child`]), so that it is never taken for an orphan a command left
/// behind, and its whole group can be signalled by its number. The spawn is declared under
/// way ([`spawning`]) until the child is registered. Whatever `command` was told before (a
/// [`PreExec`] step, pipes, environment) applies as set.
pub fn spawn_group_leader(command: &mut Command) -> io::Result<Child> {
    command.process_group(0);
    let under_way = spawning();
    let child = command.spawn()?;
    own_child(child.id());
    drop(under_way);
    Ok(child)
}

/// Runs `spec` to completion, timeout or cancellation. An `Err` means nothing ran (or the
/// runner itself failed, in which case the tree is killed before returning).
pub fn run(
    spec: &CommandSpec,
    cancel: &(impl Cancellation + ?Sized),
) -> Result<RunOutcome, ExecError> {
    for (what, path) in [("program", &spec.program), ("working directory", &spec.cwd)] {
        if !path.is_absolute() {
            return Err(ExecError::NotAbsolute {
                what,
                path: path.display().to_string(),
            });
        }
    }
    // Without it, what a command leaves behind would be adopted by init, out of sight.
    become_subreaper().map_err(|source| ExecError::Subreaper { source })?;
    let shown = spec.program.display().to_string();
    let io_error = |what: &'static str| {
        let program = shown.clone();
        move |source: io::Error| ExecError::Io {
            program,
            what,
            source,
        }
    };

    let mut notes = Vec::new();
    // Made before the spawn, so that the leader can be moved in the moment it exists.
    let cgroup = CallCgroup::create().unwrap_or_else(|reason| {
        notes.push(unknown::no_call_cgroup(&reason));
        None
    });
    // Without a cgroup tier there is nothing to write them into; the sandbox's report says so
    // once for the call (see `cgroup_tier`), not as an unknown of every command.
    if let Some(cgroup) = &cgroup {
        notes.extend(cgroup.limit(spec.cgroup_limits));
    }

    let mut command = Command::new(&spec.program);
    if let Some(name) = &spec.arg0 {
        command.arg0(name);
    }
    command
        .args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(step) = &spec.pre_exec {
        step.install(&mut command);
    }
    let started = Instant::now();
    let child = spawn_group_leader(&mut command).map_err(|source| ExecError::Spawn {
        program: shown.clone(),
        source,
    })?;
    // The leader is running its program already, and what it forked before this write stays
    // in toolgate's cgroup: the tree followed in `/proc` is what covers that.
    let cgroup = cgroup.and_then(|cgroup| match cgroup.enter(child.id()) {
        Ok(()) => Some(cgroup),
        Err(e) => {
            notes.push(unknown::no_call_cgroup(&format!(
                "cannot move it into `{}`: {e}",
                cgroup.path().display()
            )));
            None
        }
    });
    let observer = spec.observer.clone().or_else(tree::default_observer);
    let mut running = Running::new(child, observer, cgroup)
        .map_err(io_error("starting to follow its processes"))?;

    let mut stdout = Reader::new(
        running.child.stdout.take().map(OwnedFd::from),
        spec.capture_bytes,
    )
    .map_err(io_error("stdout"))?;
    let mut stderr = Reader::new(
        running.child.stderr.take().map(OwnedFd::from),
        spec.capture_bytes,
    )
    .map_err(io_error("stderr"))?;
    let mut stdin = Feeder::new(
        running.child.stdin.take().map(OwnedFd::from),
        spec.stdin.as_deref().unwrap_or_default(),
    )
    .map_err(io_error("stdin"))?;
    // Without a pidfd (kernels before 5.3) the leader's exit is noticed on the next tick.
    let pidfd =
        Pid::from_raw(running.leader.pid).and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let waker = cancel.waker();
    let tick = if pidfd.is_some() {
        TICK
    } else {
        TICK.min(Duration::from_millis(5))
    };

    let limits = Limits {
        deadline: started.checked_add(spec.timeout),
        kill_grace: spec.kill_grace,
        tick,
    };
    let mut state = State::START;
    let mut unknowns = notes;
    // A process of the tree may still be running (see `RunOutcome::ended`).
    let mut unended = false;
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut table: Vec<Stat> = Vec::new();
    let mut next_scan = started;
    loop {
        let now = Instant::now();
        running.reap().map_err(io_error("waiting for the leader"))?;
        let exited = running.status.is_some();
        let mut others = None;
        // While the leader runs, a look now and then; once anything ends, a look every time.
        if now >= next_scan || exited || !matches!(state.phase, Phase::Running) {
            table = procs::family(household::me()).map_err(io_error("reading /proc"))?;
            running.tree.update(&table, now);
            let every = if now.saturating_duration_since(started) < CLOSE_WATCH {
                SCAN_EARLY
            } else {
                SCAN_LATER
            };
            next_scan = now + every;
            if exited && state.stopped.is_none() && !running.tree.others(&table).is_empty() {
                others = Some(running.tree.detached(&table));
            }
        }
        let seen = Seen {
            now,
            exited,
            busy: running.tree.busy(&table),
            others,
            cancelled: cancel.is_cancelled(),
            closed: stdout.is_closed() && stderr.is_closed(),
        };
        let actions;
        (state, actions) = machine::step(state, seen, &limits);
        let mut wait = None;
        for action in actions {
            match action {
                Action::Note(text) => {
                    unended |= text == unknown::UNKILLABLE || text == unknown::ESCAPED;
                    unknowns.push(text.to_owned());
                }
                Action::Signal(signal) => running.tree.signal(&table, signal),
                Action::StopThenKill(until) => running.tree.stop_then_kill(until),
                Action::Wait(time) => wait = Some(time),
                Action::End => {}
            }
        }
        let Some(wait) = wait else { break };

        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(5);
        for pipe in [stdout.pipe.as_ref(), stderr.pipe.as_ref()]
            .into_iter()
            .flatten()
        {
            fds.push(PollFd::new(pipe, PollFlags::IN));
        }
        if let Some(pipe) = stdin.pipe.as_ref() {
            fds.push(PollFd::new(pipe, PollFlags::OUT));
        }
        if let Some(pidfd) = pidfd.as_ref().filter(|_| running.status.is_none()) {
            fds.push(PollFd::new(pidfd, PollFlags::IN));
        }
        // Once the run is ending, a cancellation changes nothing, and its descriptor stays
        // readable: it is no longer waited on.
        if let Some(waker) = waker.filter(|_| matches!(state.phase, Phase::Running)) {
            fds.push(PollFd::from_borrowed_fd(waker, PollFlags::IN));
        }
        let timeout = Timespec::try_from(wait).unwrap_or(Timespec {
            tv_sec: 0,
            tv_nsec: 10_000_000,
        });
        match poll(&mut fds, Some(&timeout)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(io_error("polling its pipes")(errno.into())),
        }
        drop(fds);
        // Nonblocking pipes: trying each one is as cheap as asking which are ready.
        stdout
            .read(&mut chunk)
            .map_err(io_error("reading stdout"))?;
        stderr
            .read(&mut chunk)
            .map_err(io_error("reading stderr"))?;
        stdin.write();
    }
    let State { stopped, left, .. } = state;
    if stopped.is_none() {
        let left = match running.tree.left {
            Some(detached) => Some(left.unwrap_or(false) || detached),
            None => left,
        };
        match left {
            Some(true) => unknowns.insert(0, unknown::DETACHED.to_owned()),
            Some(false) => unknowns.insert(0, unknown::LEFT_RUNNING.to_owned()),
            None => {}
        }
    }

    let exit = match running.status {
        Some(status) => exit_of(status),
        None => Exit::Unknown,
    };
    // The call's cgroup first: one write kills whatever is in it.
    let tier = match running.end_cgroup() {
        None => Tier::Subreaper,
        Some((killed, result)) => {
            if let Err(reason) = result {
                unended = true;
                unknowns.push(unknown::call_cgroup_left(&reason));
            }
            if killed {
                Tier::SubreaperAndCgroup
            } else {
                Tier::Subreaper
            }
        }
    };
    // The last look: whatever of the tree is still alive is named, and the adopted zombies
    // of the tree are reaped so that they do not pile up.
    let survivors = running.finish();
    for stat in survivors.iter().take(NAMED_SURVIVORS) {
        unknowns.push(unknown::survivor(stat.pid, &stat.comm));
    }
    if survivors.len() > NAMED_SURVIVORS {
        unknowns.push(format!(
            "{} more processes of the command were still running when the call ended",
            survivors.len() - NAMED_SURVIVORS
        ));
    }
    Ok(RunOutcome {
        exit,
        stopped,
        duration: started.elapsed(),
        stdout: stdout.buffer.finish(),
        stderr: stderr.buffer.finish(),
        unknowns,
        // Set by the last look only when it found nothing alive and the leader reaped.
        ended: !unended && running.settled,
        tier,
    })
}

fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Unknown,
    }
}

/// The spawned leader and its tree, killed if the runner returns early or unwinds.
#[derive(Debug)]
struct Running {
    child: Child,
    leader: ProcessId,
    tree: Tree,
    status: Option<ExitStatus>,
    /// The call's cgroup, holding the leader, until it is ended.
    cgroup: Option<CallCgroup>,
    /// The run finished normally; nothing to clean up.
    settled: bool,
}

impl Running {
    fn new(
        mut child: Child,
        observer: Option<Arc<dyn TreeObserver>>,
        cgroup: Option<CallCgroup>,
    ) -> io::Result<Running> {
        // The child is not reaped yet, so its pid still names it, zombie or not.
        let leader = i32::try_from(child.id())
            .ok()
            .filter(|pid| *pid > 1)
            .and_then(ProcessId::of);
        let tree = leader
            .ok_or_else(|| io::Error::other("the child has no usable pid"))
            .and_then(|leader| Ok((leader, Tree::new(leader, observer)?)));
        match tree {
            Ok((leader, tree)) => {
                if let Some(cgroup) = &cgroup {
                    tree.entered_cgroup(cgroup.path());
                }
                Ok(Running {
                    child,
                    leader,
                    tree,
                    status: None,
                    cgroup,
                    settled: false,
                })
            }
            Err(e) => {
                drop(cgroup);
                // Its group may hold a child already; nothing of it is followed yet.
                if let Ok(group) = i32::try_from(child.id())
                    && let Some(group) = Pid::from_raw(group).filter(|_| group > 1)
                {
                    let _ = rustix::process::kill_process_group(group, Signal::KILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// Collects the leader's status if it has exited: its own pid only, never another child.
    fn reap(&mut self) -> io::Result<()> {
        if self.status.is_none() {
            self.status = self.child.try_wait()?;
        }
        Ok(())
    }

    /// Ends the call's cgroup, if it has one: whether `cgroup.kill` was written, and what
    /// went wrong.
    fn end_cgroup(&mut self) -> Option<(bool, Result<(), String>)> {
        self.cgroup.take().map(|mut cgroup| cgroup.end())
    }

    /// Reaps the tree's adopted zombies and returns what of the tree is still alive.
    fn finish(&mut self) -> Vec<Stat> {
        let until = Instant::now() + DRAIN_BOUND;
        loop {
            let _ = self.reap();
            let Ok(table) = procs::family(household::me()) else {
                return Vec::new();
            };
            let now = Instant::now();
            self.tree.update(&table, now);
            household::reap_adopted(&table, now);
            let me = household::me();
            let mut survivors: Vec<Stat> = self.tree.others(&table).into_iter().cloned().collect();
            if self.status.is_none() {
                survivors.extend(table.iter().filter(|s| s.id() == self.leader).cloned());
            }
            // A killed process of the tree becomes toolgate's zombie a moment after its parent
            // dies; wait for those too.
            let zombies = table.iter().any(|s| {
                s.ppid == me && !s.is_live() && self.tree.knows(s.id()) && s.id() != self.leader
            });
            if (survivors.is_empty() && !zombies) || now >= until {
                self.settled = survivors.is_empty() && self.status.is_some();
                return survivors;
            }
            if !survivors.is_empty() {
                self.tree.stop_then_kill(now + Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.settled {
            if let Some(mut cgroup) = self.cgroup.take() {
                let _ = cgroup.end();
            }
            self.tree.stop_then_kill(Instant::now() + KILL_BOUND / 2);
            let _ = self.child.kill();
            let _ = self.child.try_wait();
        }
    }
}

/// One output pipe and what was kept of it.
#[derive(Debug)]
struct Reader {
    pipe: Option<File>,
    buffer: CaptureBuffer,
}

impl Reader {
    fn new(pipe: Option<OwnedFd>, cap: usize) -> io::Result<Reader> {
        if let Some(fd) = &pipe {
            rustix::io::ioctl_fionbio(fd, true)?;
        }
        Ok(Reader {
            pipe: pipe.map(File::from),
            buffer: CaptureBuffer::new(cap),
        })
    }

    fn is_closed(&self) -> bool {
        self.pipe.is_none()
    }

    /// Reads what is there, a bounded amount, closing the pipe at end of file.
    fn read(&mut self, chunk: &mut [u8]) -> io::Result<()> {
        let Some(pipe) = self.pipe.as_mut() else {
            return Ok(());
        };
        for _ in 0..READS_PER_WAKE {
            match pipe.read(chunk) {
                Ok(0) => {
                    self.pipe = None;
                    return Ok(());
                }
                Ok(n) => self.buffer.push(chunk.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The stdin pipe and the bytes still to write to it.
#[derive(Debug)]
struct Feeder<'a> {
    pipe: Option<File>,
    rest: &'a [u8],
}

impl<'a> Feeder<'a> {
    fn new(pipe: Option<OwnedFd>, bytes: &'a [u8]) -> io::Result<Feeder<'a>> {
        if let Some(fd) = &pipe {
            rustix::io::ioctl_fionbio(fd, true)?;
        }
        let mut feeder = Feeder {
            pipe: pipe.map(File::from),
            rest: bytes,
        };
        feeder.write();
        Ok(feeder)
    }

    /// Writes what the pipe takes; closes it when everything is written or the command stopped
    /// reading (it may never read, which is its business).
    fn write(&mut self) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        while !self.rest.is_empty() {
            match pipe.write(self.rest) {
                Ok(n) => self.rest = self.rest.get(n..).unwrap_or_default(),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.pipe = None;
    }
}
