//! One running upstream process and the JSON-RPC spoken with it over its standard streams.
//!
//! This is a small client of its own rather than rmcp's, because a gateway needs control an
//! SDK client does not give: lines are read with a cap, so a 100 MB line is never held; a
//! response whose id nobody is waiting for, or a line that is not JSON-RPC, is a protocol
//! fault that fails every waiting call at once instead of being dropped while the calls time
//! out; and the process runs as a [`ServerTree`]: everything it starts, in its group or out of
//! it (`setsid`, `setpgid`, a double fork), is followed and ended with it, as a command's tree
//! is with its call.
//!
//! A connection is never repaired. Any fault that leaves the stream in doubt (garbage, a wrong
//! id, an oversized line nobody can be blamed for, the process exiting) ends the tree, fails
//! every pending call with the fault, and tells the supervisor, which starts a new one.
//!
//! The files that run later are compared (and what changed put back) once the tree is known
//! to be gone, since a process still running could change them after the comparison. When
//! that cannot be known, they are compared all the same, and the connection says so
//! ([`Rpc::unended`]) for the supervisor to record and tell the operator: the stop is never
//! reported clean.

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::{Notice, ToolErrorCode};
use toolgate_edge::lines::{Line, read_line};
use toolgate_exec::{ServerTree, TreeObserver};

use crate::config::UpstreamSpec;
use crate::relay::{Heard, Relay, heard, request_message};
use crate::sandbox::Confined;
use crate::watchdog::Watchdog;

/// The protocol revision toolgate asks for; upstreams answer with the one they speak.
pub const PROTOCOL_VERSION: &str = "2025-06-18";

/// How many ids of calls given up on (timed out, cancelled) are remembered, so that their late
/// answers are not mistaken for a wrong id.
const ABANDONED_IDS: usize = 1024;

/// How many messages may wait for the writer thread. An upstream that stops reading its input
/// fills its pipe, then this queue; after that, sending waits (at most until the call's
/// deadline) instead of blocking a caller forever.
const WRITE_QUEUE: usize = 64;

/// How long a process whose output closed is given to exit, for the status that says why.
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// How many notices of one call may wait for the thread that made it; past that the upstream
/// reports faster than the call takes them, and the rest are dropped rather than held.
const QUEUED_NOTICES: usize = 64;

/// Why a request to an upstream got no usable answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Not running, could not start, or exited.
    Unavailable(String),
    /// No answer in time.
    Timeout(String),
    /// It wrote something that is not the answer JSON-RPC requires.
    Protocol(String),
    /// Its answer was longer than toolgate reads.
    TooLarge(String),
    /// The caller gave up.
    Cancelled,
    /// This machine cannot confine the upstream's process, so it is not started.
    SandboxUnavailable(String),
}

impl Fault {
    /// The tool error code a call failing with this fault gets.
    pub fn code(&self) -> ToolErrorCode {
        match self {
            Fault::Unavailable(_) => ToolErrorCode::UpstreamUnavailable,
            Fault::Timeout(_) => ToolErrorCode::UpstreamTimeout,
            Fault::Protocol(_) => ToolErrorCode::UpstreamProtocolError,
            Fault::TooLarge(_) => ToolErrorCode::OutputTooLarge,
            Fault::Cancelled => ToolErrorCode::Cancelled,
            Fault::SandboxUnavailable(_) => ToolErrorCode::SandboxUnavailable,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Fault::Unavailable(m)
            | Fault::Timeout(m)
            | Fault::Protocol(m)
            | Fault::TooLarge(m)
            | Fault::SandboxUnavailable(m) => m,
            Fault::Cancelled => "the call was cancelled",
        }
    }
}

/// What the reader tells the supervisor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `notifications/tools/list_changed`.
    ListChanged,
    /// The connection is dead; the supervisor should start another.
    Died(String),
    /// The gateway is stopping.
    Shutdown,
}

/// Where a connection's reader tells the supervisor what happened. `list_changed` is
/// coalesced here, on the reader's side: while one is waiting for the supervisor, more of them
/// add nothing, so a flood of them costs the reader a flag and never grows a queue.
#[derive(Debug, Clone)]
pub struct Events {
    sender: mpsc::Sender<Event>,
    list_changed: Arc<AtomicBool>,
    /// Every `list_changed` heard, for the upstream's events.
    heard: Arc<AtomicU64>,
}

impl Events {
    pub fn new(sender: mpsc::Sender<Event>) -> Self {
        Events {
            sender,
            list_changed: Arc::new(AtomicBool::new(false)),
            heard: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The upstream said its tool list changed.
    pub fn list_changed(&self) {
        self.heard.fetch_add(1, Ordering::Relaxed);
        if !self.list_changed.swap(true, Ordering::AcqRel) {
            let _ = self.sender.send(Event::ListChanged);
        }
    }

    /// Forgets the `list_changed` that is waiting, if one is, right before a listing that will
    /// see whatever it announced; one that arrives after this is announced anew.
    pub(crate) fn take_list_changed(&self) -> bool {
        self.list_changed.swap(false, Ordering::AcqRel)
    }

    /// How many `list_changed` were heard so far, on every connection.
    pub(crate) fn heard(&self) -> u64 {
        self.heard.load(Ordering::Relaxed)
    }

    pub fn send(&self, event: Event) {
        let _ = self.sender.send(event);
    }
}

/// What the reader hands the thread waiting for a request.
#[derive(Debug)]
enum Delivery {
    Notice(Notice),
    Answer(Result<Value, Fault>),
    /// The caller's [`toolgate_core::Cancel`] was given: sent by its waker, so that the
    /// thread waiting on the channel wakes at once, not at a look at a flag.
    Cancelled,
}

/// Where a waiting request's deliveries go: to a thread that blocks on them, or to a task.
#[derive(Debug)]
enum Deliver {
    Thread(mpsc::Sender<Delivery>),
    Task(tokio::sync::mpsc::UnboundedSender<Delivery>),
}

impl Deliver {
    /// Whether the caller still waits.
    fn send(&self, delivery: Delivery) -> bool {
        match self {
            Deliver::Thread(sender) => sender.send(delivery).is_ok(),
            Deliver::Task(sender) => sender.send(delivery).is_ok(),
        }
    }
}

/// A request waiting for its answer, and, for a call that listens, its notices.
#[derive(Debug)]
struct Waiter {
    sender: Deliver,
    /// How many notices wait for the caller; `None` for a request that does not listen.
    queued: Option<Arc<AtomicU64>>,
}

impl Waiter {
    fn answer(self, answer: Result<Value, Fault>) {
        let _ = self.sender.send(Delivery::Answer(answer));
    }

    /// Hands `notice` to the caller unless too many already wait.
    fn notice(&self, notice: Notice) {
        let Some(queued) = &self.queued else {
            return;
        };
        if queued.fetch_add(1, Ordering::AcqRel) >= QUEUED_NOTICES as u64 {
            queued.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        if !self.sender.send(Delivery::Notice(notice)) {
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What the supervisor and the executors need of a connection, whatever carries it.
pub trait Rpc: Send + Sync + std::fmt::Debug {
    /// The upstream's name, for messages.
    fn upstream(&self) -> &str;

    /// Sends a request and waits for its result, giving up (and cancelling it upstream) once
    /// `cancel` is given, woken by it. A well-formed JSON-RPC `error` is returned as `Ok` with
    /// an `error` member, for the caller to interpret.
    ///
    /// With a `listener`, the request carries a progress token, and what the upstream reports
    /// about it until it is answered (see [`crate::relay`]) is passed to `listener`, in order,
    /// on the calling thread.
    /// Puts back what the upstream changed among the files that run later in the paths it
    /// may write since the last look, and says what that was; `None` when nothing was (or the
    /// connection starts no process).
    fn undo_later_changes(&self) -> Option<String> {
        None
    }

    /// Once [`Rpc::kill`] has returned: why the process's stop is not clean — something it
    /// started may still be running, with its sandbox, and change a file that runs later after
    /// the last comparison. Said once; `None` after a clean stop (or before any).
    fn unended(&self) -> Option<String> {
        None
    }

    fn request_reporting(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &toolgate_core::Cancel,
        listener: Option<&dyn Fn(Notice)>,
    ) -> Result<Value, Fault>;

    /// [`Rpc::request_reporting`] for a caller on an async runtime, which waits for the answer
    /// without a thread of its own: `cancel` gives the request up, and what the upstream
    /// reports goes to `listener`. Dropped before it resolves, the request is given up
    /// upstream. When this connection has no such way, `params` come back unsent, and the
    /// caller waits on a thread.
    fn request_async(
        self: Arc<Self>,
        _method: &'static str,
        params: Value,
        _timeout: Duration,
        _cancel: toolgate_core::Cancel,
        _listener: Box<dyn Fn(Notice) + Send + Sync>,
    ) -> Result<Answer, Value> {
        Err(params)
    }

    /// [`Rpc::request_reporting`] without a listener.
    fn request_until(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &toolgate_core::Cancel,
    ) -> Result<Value, Fault> {
        self.request_reporting(method, params, timeout, cancel, None)
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), Fault>;

    /// Whether the connection was found broken; a dead one is replaced, never repaired.
    fn is_dead(&self) -> bool;

    /// Ends the connection (and for a process, ends its whole tree: see [`Rpc::unended`]).
    fn kill(&self);

    /// The MCP handshake: `initialize`, then `notifications/initialized`.
    fn initialize(&self, timeout: Duration) -> Result<Value, Fault> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "toolgate", "version": env!("CARGO_PKG_VERSION")},
        });
        let result = self.request("initialize", params, timeout)?;
        self.notify("notifications/initialized", json!({}))?;
        Ok(result)
    }

    /// Every page of `tools/list`, as the upstream's raw tool objects.
    fn list_tools(&self, timeout: Duration) -> Result<Vec<Value>, Fault> {
        let deadline = Instant::now() + timeout;
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        // A cursor that never ends would list forever; no real server has this many pages.
        for _ in 0..1000 {
            let params = match &cursor {
                Some(cursor) => json!({"cursor": cursor}),
                None => json!({}),
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            let result = self.request("tools/list", params, remaining)?;
            if let Some(error) = result.get("error") {
                let message = error.get("message").and_then(Value::as_str).unwrap_or("");
                return Err(Fault::Unavailable(format!(
                    "upstream `{}` could not list its tools: {message}",
                    self.upstream()
                )));
            }
            let page = result
                .get("tools")
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    protocol(
                        self.upstream(),
                        "`tools/list` answered without a `tools` array",
                    )
                })?;
            tools.extend(page.iter().cloned());
            match result.get("nextCursor") {
                Some(Value::String(next)) => cursor = Some(next.clone()),
                None | Some(Value::Null) => return Ok(tools),
                Some(_) => return Err(protocol(self.upstream(), "`nextCursor` is not a string")),
            }
        }
        Err(protocol(
            self.upstream(),
            "`tools/list` did not stop paging after 1000 pages",
        ))
    }

    /// Sends a request and waits for its result (`result`, or the upstream's JSON-RPC error as
    /// `Err(Protocol)` only when malformed: a well-formed `error` is returned as `Ok` with the
    /// whole message, for the caller to interpret).
    fn request(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, Fault> {
        self.request_until(method, params, timeout, &toolgate_core::Cancel::new())
    }
}

/// The longest write a pipe takes whole or not at all.
const PIPE_BUF: usize = 4096;

/// Writes all of `line` into the non-blocking `stdin`, waiting for room whenever the pipe is
/// full.
fn write_waiting(stdin: &ChildStdin, line: &[u8]) -> std::io::Result<()> {
    let mut rest = line;
    while !rest.is_empty() {
        match (&*stdin).write(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = rest.get(n..).unwrap_or_default(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                let mut fds = [rustix::event::PollFd::new(
                    stdin,
                    rustix::event::PollFlags::OUT,
                )];
                match rustix::event::poll(&mut fds, None) {
                    Ok(_) | Err(rustix::io::Errno::INTR) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A request of [`Connection::answer_of`] still waiting: given up upstream when dropped, unless
/// it was answered or never sent.
struct Pending<'a> {
    connection: &'a Connection,
    id: Option<u64>,
}

impl Pending<'_> {
    /// Answered: nothing to give up.
    fn answered(&mut self) {
        self.id = None;
    }

    /// Never sent: only its waiter goes.
    fn forget(&mut self) {
        if let Some(id) = self.id.take() {
            lock(&self.connection.pending).remove(&id);
        }
    }

    /// Given up, for `reason`: the upstream is told.
    fn give_up(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            self.connection.abandon(id, reason);
        }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.give_up("the gateway stopped waiting for it");
    }
}

/// The answer to come of a request made with [`Rpc::request_async`].
pub type Answer =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<Value, Fault>> + Send + 'static>>;

/// The fault of request `method`, given `timeout` to be answered in, that was not.
pub(crate) fn unanswered(upstream: &str, method: &str, timeout: Duration) -> Fault {
    Fault::Timeout(format!(
        "upstream `{upstream}` did not answer `{method}` within {} ms",
        timeout.as_millis()
    ))
}

/// The parameters of `notifications/cancelled` for request `id`.
pub(crate) fn cancellation(id: u64, reason: &str) -> Value {
    json!({"requestId": id, "reason": reason})
}

/// A protocol fault of `upstream`.
pub fn protocol(upstream: &str, what: &str) -> Fault {
    Fault::Protocol(format!("upstream `{upstream}` broke the protocol: {what}"))
}

/// How many lines the writer thread took from its queue (and cancellations told since), for a
/// thread that waits for room in it.
#[derive(Debug, Default)]
struct Taken {
    count: Mutex<u64>,
    changed: std::sync::Condvar,
}

impl Taken {
    fn count(&self) -> u64 {
        *lock(&self.count)
    }

    /// Something changed: wakes every thread waiting for room.
    fn tell(&self) {
        *lock(&self.count) += 1;
        self.changed.notify_all();
    }

    /// Waits until the count is past `seen`, or `deadline`.
    fn wait_past(&self, seen: u64, deadline: Instant) {
        let mut count = lock(&self.count);
        while *count == seen {
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return;
            };
            count = self
                .changed
                .wait_timeout(count, left)
                .map_or_else(|e| e.into_inner().0, |(guard, _)| guard);
        }
    }
}

/// A running upstream process.
#[derive(Debug)]
pub struct Connection {
    upstream: String,
    /// The queue of the thread that writes to the process's input. Only this thread ever
    /// blocks on the pipe, so a process that stops reading delays no caller past its deadline
    /// and never holds a lock that [`Rpc::kill`] needs.
    stdin: Mutex<Option<SyncSender<Vec<u8>>>>,
    /// The write end of the process's input, non-blocking. Held by whoever writes a line: the
    /// writer thread, or a caller writing a short line straight in while nothing waits in the
    /// queue, which saves waking the writer thread.
    wire: Mutex<ChildStdin>,
    /// Lines handed to the writer thread and not yet written.
    queued: AtomicUsize,
    /// Told each time the writer thread takes a line, and so frees a place in its queue: a
    /// task waiting for room wakes then, not on a timer.
    room: tokio::sync::Notify,
    /// The same news for a thread waiting for room (see [`Connection::send`]).
    taken: Arc<Taken>,
    pending: Mutex<HashMap<u64, Waiter>>,
    abandoned: Mutex<VecDeque<u64>>,
    next_id: AtomicU64,
    /// The process and everything it starts, ended by [`Rpc::kill`]; the watchdog is told of
    /// them, to end them should the gateway die without doing so.
    tree: Mutex<ServerTree>,
    /// The leader's pid, which stays its own until the tree is ended.
    pid: u32,
    /// Tells the look at the tree that the process was given work, on which it may start
    /// processes: looked at soon, the watchdog knows them should toolgate be killed.
    busy: Option<toolgate_exec::Busy>,
    /// The process's sandbox, temporary directory and proxy; ended once the process is gone.
    confined: Mutex<Option<Confined>>,
    /// Why the last stop was not clean, until the supervisor takes it ([`Rpc::unended`]).
    unended: Mutex<Option<String>>,
    dead: AtomicBool,
}

impl Connection {
    /// Starts the upstream as a [`ServerTree`] and a thread that reads what it writes.
    /// Nothing is sent yet; see [`Connection::initialize`].
    pub fn spawn(
        spec: &UpstreamSpec,
        events: Events,
        watchdog: Option<Arc<Watchdog>>,
    ) -> Result<Arc<Self>, Fault> {
        let crate::Endpoint::Command { program, args } = &spec.endpoint else {
            return Err(Fault::Unavailable(format!(
                "upstream `{}` has no command",
                spec.name
            )));
        };
        still_as_trusted(spec)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // Copied onto toolgate's own, escaped: see `forward_stderr`.
            .stderr(Stdio::piped());
        if let Some(cwd) = &spec.cwd {
            command.current_dir(cwd);
        }
        let cwd = match &spec.cwd {
            Some(cwd) => cwd.clone(),
            None => std::env::current_dir().map_err(|e| {
                Fault::Unavailable(format!(
                    "upstream `{}` was not started: no working directory: {e}",
                    spec.name
                ))
            })?,
        };
        let confined = spec.confinement.start(&spec.name, &spec.sandbox, &cwd)?;
        confined.apply(&mut command);
        let observer = watchdog.map(|w| w as Arc<dyn TreeObserver>);
        let (mut tree, pipes) = match ServerTree::spawn(&mut command, observer) {
            Ok(spawned) => spawned,
            Err(e) => {
                // Nothing runs: a spawn that failed after its fork has killed what it started.
                confined.end();
                return Err(Fault::Unavailable(format!(
                    "upstream `{}` could not start `{program}`: {e}",
                    spec.name
                )));
            }
        };
        let stderr = pipes.stderr;
        let (Some(stdin), Some(stdout)) = (pipes.stdin, pipes.stdout) else {
            let unended = end_at_start(&spec.name, &mut tree, confined);
            return Err(Fault::Unavailable(format!(
                "upstream `{}` started without pipes{unended}",
                spec.name
            )));
        };
        // Only this end is made non-blocking: the process reads its own description of the
        // pipe.
        let nonblocking = rustix::fs::fcntl_getfl(&stdin).and_then(|flags| {
            rustix::fs::fcntl_setfl(&stdin, flags | rustix::fs::OFlags::NONBLOCK)
        });
        if let Err(e) = nonblocking {
            let unended = end_at_start(&spec.name, &mut tree, confined);
            return Err(Fault::Unavailable(format!(
                "cannot set up the input of upstream `{}`: {e}{unended}",
                spec.name
            )));
        }
        let (queue, lines) = mpsc::sync_channel(WRITE_QUEUE);
        let connection = Arc::new(Connection {
            upstream: spec.name.clone(),
            stdin: Mutex::new(Some(queue)),
            wire: Mutex::new(stdin),
            queued: AtomicUsize::new(0),
            room: tokio::sync::Notify::new(),
            taken: Arc::default(),
            pending: Mutex::new(HashMap::new()),
            abandoned: Mutex::new(VecDeque::new()),
            next_id: AtomicU64::new(1),
            pid: tree.pid(),
            busy: tree.busy(),
            tree: Mutex::new(tree),
            confined: Mutex::new(Some(confined)),
            unended: Mutex::new(None),
            dead: AtomicBool::new(false),
        });
        let writer = Arc::clone(&connection);
        let writer_events = events.clone();
        std::thread::Builder::new()
            .name(format!("upstream-{}-stdin", spec.name))
            .spawn(move || writer.write_loop(&lines, &writer_events))
            .map_err(|e| {
                connection.kill();
                Fault::Unavailable(format!("cannot start a writer for `{}`: {e}", spec.name))
            })?;
        let reader = Arc::clone(&connection);
        let max = spec.max_message_bytes;
        std::thread::Builder::new()
            .name(format!("upstream-{}", spec.name))
            .spawn(move || reader.read_loop(BufReader::new(stdout), max, &events))
            .map_err(|e| {
                connection.kill();
                Fault::Unavailable(format!("cannot start a reader for `{}`: {e}", spec.name))
            })?;
        if let Some(stderr) = stderr {
            std::thread::Builder::new()
                .name(format!("upstream-{}-stderr", spec.name))
                .spawn(move || forward_stderr(stderr, &mut std::io::stderr()))
                .map_err(|e| {
                    connection.kill();
                    Fault::Unavailable(format!(
                        "cannot start a reader of `{}`'s standard error: {e}",
                        spec.name
                    ))
                })?;
        }
        Ok(connection)
    }
}

/// Ends the confinement of upstream `upstream`'s process whose tree was ended as `end` says:
/// compared (and put back) when the tree is known to be gone; otherwise compared all the same,
/// and what is said of a stop that was not clean returned, with what the comparison found.
fn conclude(
    upstream: &str,
    mut confined: Confined,
    end: &toolgate_exec::ServerEnd,
) -> Option<String> {
    if end.ended {
        confined.end();
        return None;
    }
    let found = confined.undo_later_changes();
    let sandboxed = confined.prepared().is_some();
    // Its temporary directory and proxy end as they would: nothing else may use them.
    let _ = confined.stop();
    unended_sentence(upstream, end, found, sandboxed)
}

/// What is said of the stop of upstream `upstream` whose tree ended as `end` says, after its
/// files that run later were compared (`found`: what was put back) — `None` for a clean stop.
fn unended_sentence(
    upstream: &str,
    end: &toolgate_exec::ServerEnd,
    found: Option<String>,
    sandboxed: bool,
) -> Option<String> {
    if end.ended {
        return None;
    }
    let found = found.map_or_else(
        || "nothing had changed".to_owned(),
        |undone| format!("put back: {undone}"),
    );
    let keeps = if sandboxed {
        "keeps the upstream's sandbox"
    } else {
        "runs with all of the user's authority (`dangerous-unconfined`)"
    };
    Some(format!(
        "upstream `{upstream}` was stopped, but not every process it started is known to be \
         gone ({}); the files that run later in what it may write were compared ({found}), and \
         a change made after that is not caught; what may still run {keeps}",
        end.unknowns.join("; ")
    ))
}

/// Ends the tree of a process that failed to start right, and its confinement: what is said
/// of a stop that was not clean, to be added to the start's failure (before, it was said to
/// nobody), or nothing.
fn end_at_start(upstream: &str, tree: &mut ServerTree, confined: Confined) -> String {
    conclude(upstream, confined, &tree.end())
        .map_or_else(String::new, |unended| format!("; {unended}"))
}

/// Copies what an upstream writes to its standard error onto toolgate's, with every control
/// and invisible character escaped (`\u{1b}`): that stream reaches a person's terminal
/// (`toolgate tools discover`, `toolgate call`) or a client's log, and an upstream's text must
/// not command the terminal — set its clipboard with OSC 52, hide what follows (issue 36).
/// A character split between two reads is held until its last byte comes; bytes that are not
/// UTF-8 are written as U+FFFD. Ends when the upstream and everything it started have closed
/// the stream.
fn forward_stderr(mut from: impl Read, to: &mut impl Write) {
    let mut buffer = [0u8; 8192];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let read = match from.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        pending.extend_from_slice(buffer.get(..read).unwrap_or_default());
        let (text, rest) = decoded(&pending);
        pending = rest.to_vec();
        let _ = to.write_all(toolgate_core::visible::escape_invisible(&text).as_bytes());
        let _ = to.flush();
    }
    if !pending.is_empty() {
        let _ = to.write_all("\u{FFFD}".as_bytes());
    }
}

/// The text at the start of `bytes` (each byte that is not UTF-8 as U+FFFD), and the first
/// bytes of a character cut short at its end.
fn decoded(bytes: &[u8]) -> (String, &[u8]) {
    let mut text = String::new();
    let mut rest = bytes;
    loop {
        match std::str::from_utf8(rest) {
            Ok(whole) => {
                text.push_str(whole);
                return (text, &[]);
            }
            Err(e) => {
                let (good, after) = rest.split_at(e.valid_up_to());
                text.push_str(std::str::from_utf8(good).unwrap_or_default());
                match e.error_len() {
                    None => return (text, after),
                    Some(bad) => {
                        text.push('\u{FFFD}');
                        rest = after.get(bad..).unwrap_or_default();
                    }
                }
            }
        }
    }
}

impl Rpc for Connection {
    fn undo_later_changes(&self) -> Option<String> {
        lock(&self.confined).as_mut()?.undo_later_changes()
    }

    fn unended(&self) -> Option<String> {
        lock(&self.unended).take()
    }

    fn upstream(&self) -> &str {
        &self.upstream
    }

    fn request_reporting(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &toolgate_core::Cancel,
        listener: Option<&dyn Fn(Notice)>,
    ) -> Result<Value, Fault> {
        let (tx, rx) = mpsc::channel();
        // The caller's cancellation arrives on the channel the answer arrives on, so that one
        // blocking receive waits for both; the deadline is that receive's.
        let _on_cancel = cancel.on_cancel({
            let tx = tx.clone();
            move || {
                let _ = tx.send(Delivery::Cancelled);
            }
        });
        let (id, queued) = self.register(Deliver::Thread(tx), listener.is_some())?;
        let relay = listener.map(Relay::new);
        let message = request_message(id, method, params, relay.is_some());
        let deadline = Instant::now() + timeout;
        if let Err(fault) = self.send(&message, deadline, cancel) {
            lock(&self.pending).remove(&id);
            return Err(self.unsent(fault, method, timeout));
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                self.abandon(id, "timeout");
                return Err(unanswered(&self.upstream, method, timeout));
            }
            match rx.recv_timeout(deadline - now) {
                Ok(Delivery::Cancelled) => {
                    self.abandon(id, "cancelled by the client");
                    return Err(Fault::Cancelled);
                }
                Ok(Delivery::Notice(notice)) => {
                    if let Some(queued) = &queued {
                        queued.fetch_sub(1, Ordering::AcqRel);
                    }
                    if let Some(relay) = &relay {
                        relay.pass(notice);
                    }
                }
                Ok(Delivery::Answer(Ok(message))) => return self.result_of(message),
                Ok(Delivery::Answer(Err(fault))) => return Err(fault),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Err(self.stopped_during(method)),
            }
        }
    }

    fn request_async(
        self: Arc<Self>,
        method: &'static str,
        params: Value,
        timeout: Duration,
        cancel: toolgate_core::Cancel,
        listener: Box<dyn Fn(Notice) + Send + Sync>,
    ) -> Result<Answer, Value> {
        Ok(Box::pin(
            self.answer_of(method, params, timeout, cancel, listener),
        ))
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
        // The tree is ended before anything else: a process that stopped reading its input
        // keeps the writer thread blocked on the pipe until the process is gone.
        let mut tree = lock(&self.tree);
        let end = tree.end();
        // Its files that run later are compared once the tree is gone, not before; its
        // temporary directory and proxy go with it. The tree stays locked until then, so
        // that a second caller returns only once the first has concluded, and finds what
        // it said in `unended` (otherwise it could take `None` there first, and a stop
        // that was not clean would be said to nobody).
        if let Some(confined) = lock(&self.confined).take() {
            *lock(&self.unended) = conclude(&self.upstream, confined, &end);
        }
        drop(tree);
        // Closing the queue ends the writer thread once it is no longer blocked.
        drop(lock(&self.stdin).take());
    }

    /// Notifications wait for no one: one that finds the write queue full is not sent, and the
    /// upstream that stopped reading is left to the call timeouts and the `ping` probe.
    fn notify(&self, method: &str, params: Value) -> Result<(), Fault> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send(&message, Instant::now(), &toolgate_core::Cancel::new())
    }
}

impl Connection {
    /// [`Rpc::request_async`]: the request, written into the pipe or queued for the writer
    /// thread, and its answer, which the reader thread hands straight to the waiting task.
    async fn answer_of(
        self: Arc<Self>,
        method: &'static str,
        params: Value,
        timeout: Duration,
        cancel: toolgate_core::Cancel,
        listener: Box<dyn Fn(Notice) + Send + Sync>,
    ) -> Result<Value, Fault> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let (id, queued) = self.register(Deliver::Task(tx), true)?;
        // From here on the request is given up upstream unless it is answered, also when this
        // future is dropped.
        let mut pending = Pending {
            connection: &self,
            id: Some(id),
        };
        let relay = Relay::new(listener);
        let message = request_message(id, method, params, true);
        let deadline = Instant::now() + timeout;
        let woken = Arc::new(tokio::sync::Notify::new());
        let _on_cancel = cancel.on_cancel({
            let woken = Arc::clone(&woken);
            // A permit is stored when nobody waits yet, so the wake is never lost.
            move || woken.notify_one()
        });
        self.queue(&message, deadline, &cancel, &woken)
            .await
            .map_err(|fault| {
                pending.forget();
                self.unsent(fault, method, timeout)
            })?;
        let sleep = tokio::time::sleep_until(deadline.into());
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                biased;
                delivery = rx.recv() => match delivery {
                    Some(Delivery::Notice(notice)) => {
                        if let Some(queued) = &queued {
                            queued.fetch_sub(1, Ordering::AcqRel);
                        }
                        relay.pass(notice);
                    }
                    Some(Delivery::Answer(answer)) => {
                        pending.answered();
                        return answer.and_then(|message| self.result_of(message));
                    }
                    // Only a thread's channel carries a cancellation: a task is woken below.
                    Some(Delivery::Cancelled) => {}
                    None => {
                        pending.answered();
                        return Err(self.stopped_during(method));
                    }
                },
                () = woken.notified() => if cancel.is_cancelled() {
                    pending.give_up("cancelled by the client");
                    return Err(Fault::Cancelled);
                },
                () = &mut sleep => {
                    pending.give_up("timeout");
                    return Err(unanswered(&self.upstream, method, timeout));
                }
            }
        }
    }

    /// A new request's id, its deliveries going to `sender` (notices too, when `listening`),
    /// and the count of its notices waiting; or why no request can be made.
    fn register(
        &self,
        sender: Deliver,
        listening: bool,
    ) -> Result<(u64, Option<Arc<AtomicU64>>), Fault> {
        if self.dead.load(Ordering::SeqCst) {
            return Err(Fault::Unavailable(format!(
                "upstream `{}` is not running",
                self.upstream
            )));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let queued = listening.then(|| Arc::new(AtomicU64::new(0)));
        let waiter = Waiter {
            sender,
            queued: queued.clone(),
        };
        lock(&self.pending).insert(id, waiter);
        Ok((id, queued))
    }

    /// The fault of a request of `method` that could not be sent: a timeout says the upstream
    /// did not read it.
    fn unsent(&self, fault: Fault, method: &str, timeout: Duration) -> Fault {
        match fault {
            Fault::Timeout(_) => Fault::Timeout(format!(
                "upstream `{}` did not read `{method}` within {} ms",
                self.upstream,
                timeout.as_millis()
            )),
            other => other,
        }
    }

    /// The fault of a request of `method` whose answer can no longer come.
    fn stopped_during(&self, method: &str) -> Fault {
        Fault::Unavailable(format!(
            "upstream `{}` stopped while `{method}` was pending",
            self.upstream
        ))
    }

    /// [`Connection::send`] for a task: waits for room in the writer's queue without holding
    /// a thread, woken when the writer takes a line, when `cancelled` is told or at `deadline`
    /// — never on a timer, so that however many tasks wait for an upstream that stopped
    /// reading, none of them runs until something changed.
    async fn queue(
        &self,
        message: &Value,
        deadline: Instant,
        cancel: &toolgate_core::Cancel,
        cancelled: &tokio::sync::Notify,
    ) -> Result<(), Fault> {
        let mut line = self.line(message)?;
        let Some(queue) = lock(&self.stdin).clone() else {
            return Err(self.not_running());
        };
        loop {
            // Waiting for room before trying, so that room made in between is not missed.
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            line = match self.offer(&queue, line, deadline, cancel)? {
                None => {
                    if let Some(busy) = &self.busy {
                        busy.tell();
                    }
                    return Ok(());
                }
                Some(back) => back,
            };
            tokio::select! {
                () = room => {}
                // The wake is the caller's one word of the cancellation: it ends the wait here.
                () = cancelled.notified() => if cancel.is_cancelled() {
                    return Err(Fault::Cancelled);
                },
                () = tokio::time::sleep_until(deadline.into()) => {}
            }
        }
    }

    /// `line` queued for the writer thread, or handed back when the queue is full and there is
    /// time left to wait.
    fn offer(
        &self,
        queue: &SyncSender<Vec<u8>>,
        line: Vec<u8>,
        deadline: Instant,
        cancel: &toolgate_core::Cancel,
    ) -> Result<Option<Vec<u8>>, Fault> {
        if self.write_now(&line) {
            return Ok(None);
        }
        self.queued.fetch_add(1, Ordering::AcqRel);
        let back = match queue.try_send(line) {
            Ok(()) => return Ok(None),
            Err(TrySendError::Disconnected(_)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                return Err(self.not_running());
            }
            Err(TrySendError::Full(back)) => {
                self.queued.fetch_sub(1, Ordering::AcqRel);
                back
            }
        };
        if Instant::now() >= deadline {
            return Err(Fault::Timeout(format!(
                "upstream `{}` is not reading its input",
                self.upstream
            )));
        }
        if cancel.is_cancelled() {
            return Err(Fault::Cancelled);
        }
        Ok(Some(back))
    }

    /// `message` as one line of the stream.
    fn line(&self, message: &Value) -> Result<Vec<u8>, Fault> {
        let mut line = serde_json::to_vec(message)
            .map_err(|e| self.protocol(&format!("cannot encode a request: {e}")))?;
        line.push(b'\n');
        Ok(line)
    }

    /// A JSON-RPC `error` is passed to the caller as a value with an `error` member; a message
    /// with neither `result` nor `error` cannot be.
    fn result_of(&self, mut message: Value) -> Result<Value, Fault> {
        if let Some(result) = message.get_mut("result") {
            return Ok(result.take());
        }
        if let Some(error) = message.get("error")
            && error.is_object()
        {
            return Ok(json!({"error": error}));
        }
        Err(self.protocol("a response with neither `result` nor an `error` object"))
    }

    fn abandon(&self, id: u64, reason: &str) {
        lock(&self.pending).remove(&id);
        let mut abandoned = lock(&self.abandoned);
        abandoned.push_back(id);
        if abandoned.len() > ABANDONED_IDS {
            abandoned.pop_front();
        }
        drop(abandoned);
        // Tell the upstream to stop working on it; if this fails the reader will find out.
        let _ = self.notify("notifications/cancelled", cancellation(id, reason));
    }

    /// Queues one line for the writer thread, waiting for room until `deadline` or `cancel`:
    /// woken when the writer takes a line or the signal is given, never on a timer.
    fn send(
        &self,
        message: &Value,
        deadline: Instant,
        cancel: &toolgate_core::Cancel,
    ) -> Result<(), Fault> {
        let mut line = self.line(message)?;
        // The queue is cloned out so that no lock is held while waiting for room.
        let Some(queue) = lock(&self.stdin).clone() else {
            return Err(self.not_running());
        };
        let mut on_cancel = None;
        loop {
            // Read before trying, so that a line taken in between is not missed.
            let seen = self.taken.count();
            line = match self.offer(&queue, line, deadline, cancel)? {
                None => return Ok(()),
                Some(back) => back,
            };
            if on_cancel.is_none() {
                // Only a send that has to wait pays for a waker. It is registered before the
                // next look at the signal, so a cancellation from then on counts as news.
                let taken = Arc::clone(&self.taken);
                on_cancel = Some(cancel.on_cancel(move || taken.tell()));
                continue;
            }
            self.taken.wait_past(seen, deadline);
        }
    }

    fn not_running(&self) -> Fault {
        Fault::Unavailable(format!(
            "cannot write to upstream `{}`: it is not running",
            self.upstream
        ))
    }

    /// Writes queued lines to the process until the queue closes or a write fails; a failed
    /// write leaves the stream in doubt, so the connection is failed.
    fn write_loop(&self, lines: &mpsc::Receiver<Vec<u8>>, events: &Events) {
        while let Ok(line) = lines.recv() {
            self.room.notify_one();
            self.taken.tell();
            let written = write_waiting(&lock(&self.wire), &line);
            self.queued.fetch_sub(1, Ordering::AcqRel);
            if let Err(e) = written {
                let fault = Fault::Unavailable(format!(
                    "cannot write to upstream `{}`: {e}",
                    self.upstream
                ));
                self.fail(fault, events);
                return;
            }
        }
    }

    /// Writes `line` straight into the pipe when that cannot block and cannot reorder: the line
    /// is short enough to be written whole or not at all (`PIPE_BUF`), nobody else is writing,
    /// and nothing waits in the writer thread's queue. Whether it was written.
    fn write_now(&self, line: &[u8]) -> bool {
        if line.len() > PIPE_BUF || self.queued.load(Ordering::Acquire) != 0 {
            return false;
        }
        let wire = match self.wire.try_lock() {
            Ok(wire) => wire,
            Err(std::sync::TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return false,
        };
        // Checked again under the lock: a line queued after this check is written by the
        // writer thread, which must take the lock first, and so after this one.
        if self.queued.load(Ordering::Acquire) != 0 {
            return false;
        }
        // Anything short of the whole line (a full pipe, a broken one) is left to the writer
        // thread, which waits for room or reports the failure.
        matches!((&*wire).write(line), Ok(n) if n == line.len())
    }

    fn protocol(&self, what: &str) -> Fault {
        protocol(&self.upstream, what)
    }

    fn read_loop(&self, mut reader: impl BufRead, max: usize, events: &Events) {
        loop {
            let fault = match read_line(&mut reader, max) {
                Ok(Line::Full(line)) => match self.dispatch(&line, events) {
                    Ok(()) => continue,
                    Err(fault) => fault,
                },
                Ok(Line::Oversized { head, tail, length }) => {
                    match self.oversized(&head, &tail, length, max) {
                        Ok(()) => continue,
                        Err(fault) => fault,
                    }
                }
                Ok(Line::End) => Fault::Unavailable(format!(
                    "upstream `{}` {}",
                    self.upstream,
                    self.exit_status()
                )),
                Err(e) => Fault::Unavailable(format!(
                    "cannot read from upstream `{}`: {e}",
                    self.upstream
                )),
            };
            self.fail(fault, events);
            return;
        }
    }

    /// How the process ended, once its output closed: it usually exits right after, so wait a
    /// moment (at most [`EXIT_WAIT`], woken by the exit through a pidfd) for the status that
    /// says why. The status is looked at, not collected: until [`Rpc::kill`] has signalled the
    /// group, its leader stays unreaped, so that the group's number cannot be anyone else's.
    fn exit_status(&self) -> String {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::process::{PidfdFlags, WaitId, WaitIdOptions, pidfd_open, waitid};
        let pid = i32::try_from(self.pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw);
        let Some(pid) = pid else {
            return "closed its output".to_owned();
        };
        // A pidfd turns readable when the process exits. Without one (kernels before 5.3) the
        // status is looked at once, and a process still exiting is said to have closed its
        // output.
        if let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) {
            let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
            let wait = Timespec::try_from(EXIT_WAIT).unwrap_or(Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            });
            let _ = poll(&mut fds, Some(&wait));
        }
        let peek = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT;
        match waitid(WaitId::Pid(pid), peek) {
            Ok(Some(status)) => {
                if let Some(code) = status.exit_status() {
                    return format!("exited (exit status: {code})");
                }
                if let Some(signal) = status.terminating_signal() {
                    return format!("was killed (signal {signal})");
                }
                "closed its output".to_owned()
            }
            _ => "closed its output".to_owned(),
        }
    }

    /// Kills the process, fails every pending call with `fault`, and tells the supervisor.
    fn fail(&self, fault: Fault, events: &Events) {
        let was_dead = self.dead.swap(true, Ordering::SeqCst);
        let waiters: Vec<Waiter> = lock(&self.pending).drain().map(|(_, w)| w).collect();
        for waiter in waiters {
            waiter.answer(Err(fault.clone()));
        }
        self.kill();
        if !was_dead {
            events.send(Event::Died(fault.message().to_owned()));
        }
    }

    /// A notification: `list_changed` for the supervisor, a call's progress or log line for
    /// the thread waiting for that call, anything else dropped. Nothing here waits.
    fn notified(
        &self,
        method: &str,
        object: &serde_json::Map<String, Value>,
        bytes: usize,
        events: &Events,
    ) {
        if method == "notifications/tools/list_changed" {
            events.list_changed();
            return;
        }
        // Read before the lock is taken: the calls waiting for answers do not wait on this.
        let heard = heard(method, object.get("params"), bytes);
        let pending = lock(&self.pending);
        match heard {
            Some(Heard::Progress {
                token: Some(token),
                notice,
            }) => {
                if let Some(waiter) = pending.get(&token) {
                    waiter.notice(notice);
                }
            }
            Some(Heard::Log(notice)) => {
                let mut listening = pending.values().filter(|w| w.queued.is_some());
                if let (Some(only), None) = (listening.next(), listening.next()) {
                    only.notice(notice);
                }
            }
            Some(Heard::Progress { token: None, .. }) | None => {}
        }
    }

    fn dispatch(&self, line: &[u8], events: &Events) -> Result<(), Fault> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(());
        }
        let message: Value = serde_json::from_slice(line).map_err(|_| {
            self.protocol(&format!(
                "it wrote a line that is not JSON: `{}`",
                preview(line)
            ))
        })?;
        let Some(object) = message.as_object() else {
            return Err(self.protocol(&format!(
                "it wrote JSON that is not a JSON-RPC message: `{}`",
                preview(line)
            )));
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err(self.protocol(&format!(
                "it wrote a message without `\"jsonrpc\": \"2.0\"`: `{}`",
                preview(line)
            )));
        }
        let id = object.get("id");
        match (object.get("method").and_then(Value::as_str), id) {
            (Some(method), None) => {
                self.notified(method, object, line.len(), events);
                Ok(())
            }
            (Some(method), Some(id)) => {
                // Requests from the upstream: toolgate offers no client capabilities, so only
                // `ping` has an answer.
                let answer = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {
                        "code": -32601,
                        "message": format!("toolgate does not offer `{method}` to upstreams"),
                    }})
                };
                // The reader never waits for room: an upstream that asks while not reading
                // its own input gets no answer.
                let _ = self.send(&answer, Instant::now(), &toolgate_core::Cancel::new());
                Ok(())
            }
            (None, Some(id)) => {
                let waiter = id.as_u64().and_then(|n| lock(&self.pending).remove(&n));
                match waiter {
                    Some(waiter) => {
                        waiter.answer(Ok(message));
                        Ok(())
                    }
                    None if id
                        .as_u64()
                        .is_some_and(|n| lock(&self.abandoned).contains(&n)) =>
                    {
                        Ok(())
                    }
                    None => {
                        Err(self.protocol(&format!("it answered id `{id}`, which no request has")))
                    }
                }
            }
            (None, None) => Err(self.protocol(&format!(
                "it wrote a message with neither `method` nor `id`: `{}`",
                preview(line)
            ))),
        }
    }

    /// A line over the cap: the call it answers fails with `output_too_large`, if its id can be
    /// read from the part kept; otherwise nobody can be told, and the stream is in doubt.
    fn oversized(&self, head: &[u8], tail: &[u8], length: usize, max: usize) -> Result<(), Fault> {
        let message = format!(
            "upstream `{}` sent a message of {length} bytes; toolgate reads at most {max}",
            self.upstream
        );
        let pending = lock(&self.pending);
        let id = [head, tail]
            .into_iter()
            .filter_map(find_id)
            .find(|id| pending.contains_key(id));
        drop(pending);
        match id.and_then(|id| lock(&self.pending).remove(&id)) {
            Some(waiter) => {
                waiter.answer(Err(Fault::TooLarge(message)));
                Ok(())
            }
            None => Err(Fault::TooLarge(message)),
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if !self.dead.load(Ordering::SeqCst) {
            self.kill();
        }
    }
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The first characters of a line, for an error message.
pub(crate) fn preview(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line.get(..80).unwrap_or(line));
    text.chars()
        .filter(|c| !c.is_control())
        .collect::<String>()
        .replace('`', "'")
}

/// The numeric `"id"` member in a fragment of a JSON-RPC message, if there is one.
pub(crate) fn find_id(fragment: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(fragment);
    let at = text.find("\"id\"")?;
    let rest = text
        .get(at + 4..)?
        .trim_start()
        .strip_prefix(':')?
        .trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The largest file of [`UpstreamSpec::bound_files`] read to compare: as large as a hook's.
const MAX_BOUND_FILE_BYTES: u64 = 256 << 20;

/// Refuses to start `spec` while a file of the workspace its command runs, bound by the
/// person's trust, holds other bytes than those trusted (or is gone, not a regular file, or
/// too large): a command approved since toolgate started could have rewritten it, and a
/// restart would run what nobody trusted. Opened without blocking, so that a FIFO put there
/// is refused rather than waited on.
fn still_as_trusted(spec: &UpstreamSpec) -> Result<(), Fault> {
    use std::os::unix::fs::OpenOptionsExt as _;
    for (path, trusted) in &spec.bound_files {
        let read = || -> std::io::Result<Vec<u8>> {
            let file = std::fs::File::options()
                .read(true)
                .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed())
                .open(path)?;
            let meta = file.metadata()?;
            if !meta.is_file() || meta.len() > MAX_BOUND_FILE_BYTES {
                return Err(std::io::Error::other("not a regular file within bounds"));
            }
            let mut bytes = Vec::new();
            file.take(MAX_BOUND_FILE_BYTES + 1)
                .read_to_end(&mut bytes)?;
            Ok(bytes)
        };
        let now = read().map(|bytes| toolgate_core::sha256_digest(&bytes).to_string());
        if now.as_ref().ok() != Some(trusted) {
            return Err(Fault::Unavailable(format!(
                "upstream `{}` was not started: `{}` is not as its project was trusted; \
                 toolgate shows the trust pending when next started",
                spec.name,
                path.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An upstream whose trusted file changed, vanished or became a FIFO is not started; one
    /// whose file holds the bytes trusted is.
    #[test]
    fn a_bound_file_changed_since_trust_stops_the_start() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("server.sh");
        std::fs::write(&script, "exit 0\n").unwrap();
        let fifo = dir.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::RUSR).unwrap();
        let section: crate::UpstreamSection =
            serde_json::from_value(json!({"name": "t", "command": ["/bin/sh", "server.sh"]}))
                .unwrap();
        let mut spec = section
            .check(
                dir.path(),
                |_| None,
                crate::UpstreamConfinement::dangerous_unconfined(),
            )
            .unwrap();
        let trusted = toolgate_core::sha256_digest(b"exit 0\n").to_string();
        spec.bound_files = vec![(script.clone(), trusted.clone())];
        assert!(still_as_trusted(&spec).is_ok());
        std::fs::write(&script, "touch canary\n").unwrap();
        for bound in [script.clone(), dir.path().join("gone"), fifo] {
            spec.bound_files = vec![(bound.clone(), trusted.clone())];
            let Err(Fault::Unavailable(said)) = still_as_trusted(&spec) else {
                panic!("{bound:?} was started");
            };
            assert!(
                said.contains(&format!(
                    "`{}` is not as its project was trusted",
                    bound.display()
                )),
                "{said}"
            );
        }
    }

    /// Reads `bytes` a few at a time, as a pipe may deliver them.
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn an_upstreams_standard_error_reaches_toolgates_with_its_controls_escaped() {
        let written =
            "log \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[8mhidden \u{9b}2J \u{202e}x\n".as_bytes();
        for step in 1..8 {
            let mut out = Vec::new();
            forward_stderr(Trickle(written, step), &mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                "log \\u{1b}]52;c;ZXZpbA==\\u{7} \\u{1b}[8mhidden \\u{9b}2J \\u{202e}x\n",
                "read {step} bytes at a time"
            );
        }
        let mut out = Vec::new();
        forward_stderr(Trickle(b"a\x9bb\xe2\x80", 64), &mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "a\u{FFFD}b\u{FFFD}");
    }

    /// A stop after which a process may still run is never said to be clean: the sentence
    /// names the upstream, what is not known, what the comparison found and that a later
    /// change is not caught. A clean stop says nothing.
    #[test]
    fn a_stop_not_known_to_be_clean_says_so() {
        let mut end = toolgate_exec::ServerEnd {
            ended: false,
            unknowns: vec!["process 4242 (`sleep`) it started was still running".to_owned()],
            tier: toolgate_exec::Tier::Subreaper,
        };
        let said =
            unended_sentence("fs", &end, Some("`.envrc` was created".to_owned()), true).unwrap();
        for part in [
            "upstream `fs` was stopped, but not every process it started is known to be gone",
            "process 4242 (`sleep`)",
            "compared (put back: `.envrc` was created)",
            "a change made after that is not caught",
            "keeps the upstream's sandbox",
        ] {
            assert!(said.contains(part), "{part}: {said}");
        }
        let unconfined = unended_sentence("fs", &end, None, false).unwrap();
        assert!(unconfined.contains("(nothing had changed)"), "{unconfined}");
        assert!(
            unconfined.contains("all of the user's authority"),
            "{unconfined}"
        );
        end.ended = true;
        assert_eq!(unended_sentence("fs", &end, None, true), None);
    }

    /// A line larger than the pipe holds is written whole into the non-blocking end, waiting
    /// for the reader to make room.
    #[test]
    fn a_line_waits_for_room_in_a_full_pipe() {
        let mut child = Command::new("sh")
            .args(["-c", "sleep 0.3; wc -c"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let flags = rustix::fs::fcntl_getfl(&stdin).unwrap();
        rustix::fs::fcntl_setfl(&stdin, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
        let line = vec![b'x'; 1 << 20];
        // The reader sleeps first: the pipe fills, and a plain write stops short.
        assert!(matches!((&stdin).write(&line), Ok(n) if n < line.len()));
        write_waiting(&stdin, &line).unwrap();
        drop(stdin);
        let output = child.wait_with_output().unwrap();
        let count: usize = String::from_utf8_lossy(&output.stdout)
            .trim()
            .parse()
            .unwrap();
        assert!(count > line.len(), "{count}");
    }

    #[test]
    fn ids_are_found_at_either_end() {
        assert_eq!(
            find_id(br#"{"jsonrpc":"2.0","id": 42,"result":{"#),
            Some(42)
        );
        assert_eq!(find_id(br#"xxxx"}]},"jsonrpc":"2.0","id":9}"#), Some(9));
        assert_eq!(find_id(br#"{"id":"abc"}"#), None);
        assert_eq!(find_id(b"no id here"), None);
    }

    #[test]
    fn faults_have_codes() {
        assert_eq!(Fault::Timeout("t".into()).code(), "upstream_timeout");
        assert_eq!(
            Fault::Protocol("p".into()).code(),
            "upstream_protocol_error"
        );
        assert_eq!(
            Fault::Unavailable("u".into()).code(),
            "upstream_unavailable"
        );
        assert_eq!(Fault::TooLarge("b".into()).code(), "output_too_large");
        assert_eq!(Fault::Cancelled.message(), "the call was cancelled");
        assert_eq!(
            Fault::SandboxUnavailable("s".into()).code(),
            "sandbox_unavailable"
        );
    }
}
