//! toolgate's process runner: argv only, never a shell, and the command's whole tree lives and
//! dies with the call.
//!
//! [`run`] starts an absolute program with explicit arguments, an explicit environment (start
//! from [`scrub_env`]) and an absolute working directory, as the leader of a new process
//! group. Its output is captured bounded — a head, a tail and a byte count per stream
//! ([`Capture`]) — while the pipes keep draining, so a flood neither blocks the command nor
//! grows memory. When the deadline passes or the caller cancels, the group gets `SIGTERM`, a
//! short grace, then `SIGKILL` until no process of it is left (a fork loop keeps forking, a
//! process may ignore `SIGTERM`). When the leader exits on its own, whatever it left running
//! in its group is killed too: a command's lifetime is the call. What nobody can vouch for —
//! side effects of a killed command, a process that left the group and still holds the output
//! open — comes back in [`RunOutcome::unknowns`].
//!
//! [`resolve_program`] turns an `argv[0]` into the canonical path that a person approves and
//! that then runs.
//!
//! Linux only (`/proc`, pidfds, process groups). Writing stdin to a command that stopped
//! reading raises `SIGPIPE`; Rust programs ignore it from `main` on, a host written in another
//! language must too.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use std::time::Duration;
//! use toolgate_exec::{CommandSpec, Exit, ambient_env, resolve_program, run, scrub_env};
//!
//! let env = scrub_env(ambient_env());
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
mod env;
mod group;
mod program;

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use process_wrap::std::{ChildWrapper, CommandWrap, ProcessGroup};
use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, PidfdFlags, Signal, pidfd_open};
use thiserror::Error;

pub use capture::Capture;
pub use env::{ambient_env, is_allowed, is_denied, scrub_env};
pub use program::resolve_program;

use capture::CaptureBuffer;
use group::Group;

/// Bytes kept per stream unless the spec says otherwise.
pub const DEFAULT_CAPTURE_BYTES: usize = 64 * 1024;

/// Time between `SIGTERM` and `SIGKILL` unless the spec says otherwise.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_millis(300);

/// How long `SIGKILL` is repeated before the runner gives up on a group (a process stuck in
/// the kernel cannot die until it returns).
const KILL_BOUND: Duration = Duration::from_secs(2);

/// How long the pipes are drained once the group is gone. Anything still holding them open
/// then has left the group, and is not waited for.
const DRAIN_BOUND: Duration = Duration::from_millis(250);

/// How often cancellation is looked at while nothing else happens.
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
            ExecError::Io { .. } => "io_error",
        }
    }
}

/// A way for the caller to give up on a running command.
pub trait Cancel {
    fn is_cancelled(&self) -> bool;
}

impl Cancel for AtomicBool {
    fn is_cancelled(&self) -> bool {
        self.load(Ordering::Relaxed)
    }
}

impl<F: Fn() -> bool> Cancel for F {
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
        }
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
    pub const UNKILLABLE: &str =
        "some processes of the command did not die when killed and may still be running";
    pub const ESCAPED: &str = "a process that left the command's process group kept its output \
        open; it may still be running and its later output was not captured";
}

/// Runs `spec` to completion, timeout or cancellation. An `Err` means nothing ran (or the
/// runner itself failed, in which case the group is killed before returning).
pub fn run(spec: &CommandSpec, cancel: &(impl Cancel + ?Sized)) -> Result<RunOutcome, ExecError> {
    for (what, path) in [("program", &spec.program), ("working directory", &spec.cwd)] {
        if !path.is_absolute() {
            return Err(ExecError::NotAbsolute {
                what,
                path: path.display().to_string(),
            });
        }
    }
    let shown = spec.program.display().to_string();
    let io_error = |what: &'static str| {
        let program = shown.clone();
        move |source: io::Error| ExecError::Io {
            program,
            what,
            source,
        }
    };

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
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    let started = Instant::now();
    let child = wrapped.spawn().map_err(|source| ExecError::Spawn {
        program: shown.clone(),
        source,
    })?;
    let mut running = Running::new(child).map_err(io_error("the child's pid"))?;
    let group = running.group;

    let mut stdout = Reader::new(
        running.child.stdout().take().map(OwnedFd::from),
        spec.capture_bytes,
    )
    .map_err(io_error("stdout"))?;
    let mut stderr = Reader::new(
        running.child.stderr().take().map(OwnedFd::from),
        spec.capture_bytes,
    )
    .map_err(io_error("stderr"))?;
    let mut stdin = Feeder::new(
        running.child.stdin().take().map(OwnedFd::from),
        spec.stdin.as_deref().unwrap_or_default(),
    )
    .map_err(io_error("stdin"))?;
    // Without a pidfd (kernels before 5.3) the leader's exit is noticed on the next tick.
    let pidfd = Pid::from_raw(running.group_pid())
        .and_then(|pid| pidfd_open(pid, PidfdFlags::empty()).ok());
    let tick = if pidfd.is_some() {
        TICK
    } else {
        TICK.min(Duration::from_millis(5))
    };

    let deadline = started.checked_add(spec.timeout);
    let mut phase = Phase::Running;
    let mut stopped = None;
    let mut unknowns = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let now = Instant::now();
        running.reap().map_err(io_error("waiting for the leader"))?;
        phase = match phase {
            Phase::Running if running.status.is_some() => {
                if group.is_running() {
                    unknowns.push(unknown::LEFT_RUNNING.to_owned());
                    group.signal(Signal::TERM);
                    Phase::Terminating(now)
                } else {
                    Phase::Draining(now + DRAIN_BOUND)
                }
            }
            Phase::Running => {
                let reason = if cancel.is_cancelled() {
                    Some(StopReason::Cancelled)
                } else if deadline.is_some_and(|d| now >= d) {
                    Some(StopReason::Timeout)
                } else {
                    None
                };
                match reason {
                    Some(reason) => {
                        stopped = Some(reason);
                        unknowns.push(
                            match reason {
                                StopReason::Timeout => unknown::KILLED_ON_TIMEOUT,
                                StopReason::Cancelled => unknown::KILLED_ON_CANCEL,
                            }
                            .to_owned(),
                        );
                        group.signal(Signal::TERM);
                        // A stopped process cannot act on SIGTERM until continued.
                        group.signal(Signal::CONT);
                        Phase::Terminating(now)
                    }
                    None => Phase::Running,
                }
            }
            Phase::Terminating(_) | Phase::Killing(_)
                if running.status.is_some() && !group.is_running() =>
            {
                Phase::Draining(now + DRAIN_BOUND)
            }
            Phase::Terminating(since)
                if now.saturating_duration_since(since) >= spec.kill_grace =>
            {
                group.signal(Signal::KILL);
                Phase::Killing(now)
            }
            Phase::Killing(since) if now.saturating_duration_since(since) >= KILL_BOUND => {
                unknowns.push(unknown::UNKILLABLE.to_owned());
                Phase::Draining(now + DRAIN_BOUND)
            }
            Phase::Killing(since) => {
                // Again and again: a fork loop may have made new members since the last one.
                group.signal(Signal::KILL);
                Phase::Killing(since)
            }
            Phase::Draining(until)
                if now >= until && !(stdout.is_closed() && stderr.is_closed()) =>
            {
                unknowns.push(unknown::ESCAPED.to_owned());
                break;
            }
            other => other,
        };
        if matches!(phase, Phase::Draining(_)) && stdout.is_closed() && stderr.is_closed() {
            break;
        }

        let wait = match phase {
            Phase::Running => deadline.map_or(tick, |d| d.saturating_duration_since(now).min(tick)),
            Phase::Terminating(_) | Phase::Killing(_) => Duration::from_millis(10),
            Phase::Draining(until) => until.saturating_duration_since(now),
        };
        let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(4);
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

    let exit = match running.status {
        Some(status) => exit_of(status),
        None => Exit::Unknown,
    };
    // With the leader reaped and its group empty there is nothing left to kill; the pgid may
    // even be reused from now on.
    running.settled = running.status.is_some() && !group.is_running();
    Ok(RunOutcome {
        exit,
        stopped,
        duration: started.elapsed(),
        stdout: stdout.buffer.finish(),
        stderr: stderr.buffer.finish(),
        unknowns,
    })
}

/// Where a run is.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// The leader runs.
    Running,
    /// `SIGTERM` sent at this instant; waiting for the group to empty.
    Terminating(Instant),
    /// `SIGKILL` sent since this instant, repeatedly.
    Killing(Instant),
    /// The group is gone; reading what is left in the pipes until this instant.
    Draining(Instant),
}

fn exit_of(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Unknown,
    }
}

/// The spawned leader, killed with its group if the runner returns early or unwinds.
#[derive(Debug)]
struct Running {
    child: Box<dyn ChildWrapper>,
    group: Group,
    status: Option<ExitStatus>,
    /// The run finished normally; nothing to clean up.
    settled: bool,
}

impl Running {
    fn new(mut child: Box<dyn ChildWrapper>) -> io::Result<Running> {
        match Group::new(child.id()) {
            Some(group) => Ok(Running {
                child,
                group,
                status: None,
                settled: false,
            }),
            None => {
                let _ = child.kill();
                Err(io::Error::other("the child has no usable pid"))
            }
        }
    }

    fn group_pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap_or(0)
    }

    /// Collects the leader's status if it has exited.
    fn reap(&mut self) -> io::Result<()> {
        if self.status.is_none() {
            self.status = self.child.try_wait()?;
        }
        Ok(())
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.settled {
            self.group.signal(Signal::KILL);
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
