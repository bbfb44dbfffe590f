//! Keeping one upstream running: start, handshake, list, watch, restart with backoff.
//!
//! Each upstream has a thread of its own, so a slow or broken upstream delays nobody else.
//! The thread owns the lifecycle; calls only borrow the current connection. The tool list is
//! the last one fetched successfully: a refresh that fails, or an upstream that is down,
//! leaves it as it was, so the pinned set in force never changes on a failure.

use std::collections::VecDeque;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate_core::Descriptor;

use crate::config::UpstreamSpec;
use crate::connection::{Connection, Event, Fault, Rpc};
use crate::watchdog::Watchdog;

/// The first wait before a restart; it doubles up to [`MAX_BACKOFF`] while starts keep failing.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long an upstream has to answer `ping` after one of its calls timed out.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// How many recent events an upstream's status keeps.
const RECENT_EVENTS: usize = 16;

/// Called on the supervisor's thread when an upstream's tool list changed.
pub type OnChange = Arc<dyn Fn() + Send + Sync>;

/// Why [`Supervisor::connection_for`] gave no connection.
#[derive(Debug)]
pub(crate) enum Stale {
    /// The upstream now serves a different descriptor under the tool's name.
    Changed,
    /// The upstream no longer lists the tool.
    Missing,
    /// No connection, for another reason.
    Fault(Fault),
}

/// What is known about one upstream right now.
#[derive(Debug, Clone, Default)]
pub struct UpstreamStatus {
    pub name: String,
    pub connected: bool,
    /// The last tool list fetched; `None` until one was.
    pub tools: Option<Vec<Descriptor>>,
    /// Tools the upstream listed that are not descriptors (no name, no input schema).
    pub malformed: Vec<String>,
    pub restarts: u32,
    /// Recent starts, failures and refreshes, oldest first.
    pub events: VecDeque<String>,
}

impl UpstreamStatus {
    fn record(&mut self, event: String) {
        self.events.push_back(event);
        while self.events.len() > RECENT_EVENTS {
            self.events.pop_front();
        }
    }
}

#[derive(Debug, Default)]
struct State {
    status: UpstreamStatus,
    /// The digest of each tool of `status.tools`, computed once per list, not per call.
    digests: std::collections::HashMap<String, toolgate_core::Digest>,
    connection: Option<Arc<dyn Rpc>>,
    attempted: bool,
    /// Why the upstream is never started on this machine: it cannot be confined here.
    refused: Option<Fault>,
}

/// One upstream's lifecycle.
pub struct Supervisor {
    pub(crate) spec: UpstreamSpec,
    state: Mutex<State>,
    started: Condvar,
    events: Mutex<mpsc::Sender<Event>>,
    on_change: Mutex<Option<OnChange>>,
    watchdog: Option<Arc<Watchdog>>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("upstream", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl Supervisor {
    /// Starts the supervisor's thread.
    pub(crate) fn start(
        spec: UpstreamSpec,
        watchdog: Option<Arc<Watchdog>>,
    ) -> std::io::Result<(Arc<Supervisor>, std::thread::JoinHandle<()>)> {
        let (tx, rx) = mpsc::channel();
        let supervisor = Arc::new(Supervisor {
            state: Mutex::new(State {
                status: UpstreamStatus {
                    name: spec.name.clone(),
                    ..UpstreamStatus::default()
                },
                ..State::default()
            }),
            spec,
            started: Condvar::new(),
            events: Mutex::new(tx),
            on_change: Mutex::new(None),
            watchdog,
        });
        let running = Arc::clone(&supervisor);
        let thread = std::thread::Builder::new()
            .name(format!("supervise-{}", supervisor.spec.name))
            .spawn(move || running.run(&rx))?;
        Ok((supervisor, thread))
    }

    pub(crate) fn set_on_change(&self, on_change: OnChange) {
        *lock(&self.on_change) = Some(on_change);
    }

    /// Waits until the first start attempt ended, at most `limit`.
    pub(crate) fn wait_attempted(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut state = lock(&self.state);
        while !state.attempted {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            state = self
                .started
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    pub(crate) fn status(&self) -> UpstreamStatus {
        let state = lock(&self.state);
        let mut status = state.status.clone();
        status.connected = state.connection.as_ref().is_some_and(|c| !c.is_dead());
        status
    }

    /// The running connection, if the upstream's current list still holds `tool` with the
    /// pinned `digest`. Both are read under one lock, so no call reaches a descriptor the list
    /// has already replaced, whatever pipeline the caller resolved it in.
    pub(crate) fn connection_for(
        &self,
        tool: &str,
        digest: &toolgate_core::Digest,
    ) -> Result<Arc<dyn Rpc>, Stale> {
        let state = lock(&self.state);
        match state.digests.get(tool) {
            Some(current) if current == digest => {}
            Some(_) => return Err(Stale::Changed),
            None if state.status.tools.is_some() => return Err(Stale::Missing),
            None => {}
        }
        self.running(&state).map_err(Stale::Fault)
    }

    /// The running connection, or why there is none.
    fn running(&self, state: &State) -> Result<Arc<dyn Rpc>, Fault> {
        if let Some(refused) = &state.refused {
            return Err(refused.clone());
        }
        match &state.connection {
            Some(connection) if !connection.is_dead() => Ok(Arc::clone(connection)),
            _ => {
                let last = state
                    .status
                    .events
                    .back()
                    .map_or_else(String::new, |e| format!("; last event: {e}"));
                Err(Fault::Unavailable(format!(
                    "upstream `{}` is not running{last}",
                    self.spec.name
                )))
            }
        }
    }

    /// Something happened worth showing in the outcomes of calls to this upstream.
    pub(crate) fn record(&self, event: String) {
        lock(&self.state).status.record(event);
    }

    /// After a call timed out: an upstream that does not answer `ping` either is hung as a
    /// whole, not just busy with that call, and is restarted, so later calls do not all wait
    /// out their timeouts. Runs on its own thread; the timed-out call has already returned.
    pub(crate) fn probe(self: &Arc<Self>, connection: Arc<dyn Rpc>) {
        let supervisor = Arc::clone(self);
        let _ = std::thread::Builder::new()
            .name(format!("probe-{}", self.spec.name))
            .spawn(move || {
                let answered = connection.request("ping", serde_json::json!({}), PING_TIMEOUT);
                if let Err(fault) = answered
                    && !connection.is_dead()
                {
                    connection.kill();
                    let reason = format!(
                        "did not answer `ping` after a call timed out ({})",
                        fault.message()
                    );
                    let _ = lock(&supervisor.events).send(Event::Died(reason));
                }
            });
    }

    pub(crate) fn shutdown(&self) {
        let _ = lock(&self.events).send(Event::Shutdown);
        // The connection is taken out first so that the state lock is not held while the
        // process is killed: calls and status readers never wait on a dying upstream.
        let connection = lock(&self.state).connection.take();
        if let Some(connection) = connection {
            connection.kill();
        }
    }

    fn run(&self, events: &mpsc::Receiver<Event>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match self.connect() {
                Ok(connection) => {
                    backoff = FIRST_BACKOFF;
                    if !self.serve(&connection, events) {
                        connection.kill();
                        return;
                    }
                }
                Err(fault) => {
                    let refused = matches!(fault, Fault::SandboxUnavailable(_));
                    let mut state = lock(&self.state);
                    state
                        .status
                        .record(format!("start failed: {}", fault.message()));
                    state.attempted = true;
                    if refused {
                        // The machine will not learn to confine it by waiting: no restarts,
                        // and every call says why.
                        state.refused = Some(fault);
                    }
                    drop(state);
                    self.started.notify_all();
                    if refused {
                        while wait_unless_shutdown(events, MAX_BACKOFF) {}
                        return;
                    }
                }
            }
            if !wait_unless_shutdown(events, backoff) {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            lock(&self.state).status.restarts += 1;
        }
    }

    /// Starts the process, shakes hands and lists its tools; the connection is published only
    /// once its tool list is known, so no call reaches a tool whose descriptor is unchecked.
    fn connect(&self) -> Result<Arc<dyn Rpc>, Fault> {
        let sender = lock(&self.events).clone();
        let connection: Arc<dyn Rpc> = match &self.spec.url {
            Some(url) => crate::http::HttpConnection::open(&self.spec, url, sender)?,
            None => Connection::spawn(&self.spec, sender, self.watchdog.clone())?,
        };
        let deadline = Instant::now() + self.spec.startup_timeout;
        let listed = connection
            .initialize(self.spec.startup_timeout)
            .and_then(|_| {
                connection.list_tools(deadline.saturating_duration_since(Instant::now()))
            });
        let changed = match listed.and_then(|tools| self.update_tools(&tools)) {
            Ok(changed) => changed,
            Err(fault) => {
                connection.kill();
                return Err(fault);
            }
        };
        let mut state = lock(&self.state);
        state.connection = Some(Arc::clone(&connection));
        state.status.record("started".to_owned());
        drop(state);
        // Reported before the start counts as done, so whoever waits for the start knows the
        // first listing has been reported too, and counts later changes from there.
        if changed {
            self.changed();
        }
        lock(&self.state).attempted = true;
        self.started.notify_all();
        Ok(connection)
    }

    /// Watches a running connection. `false` when the gateway is stopping.
    fn serve(&self, connection: &Arc<dyn Rpc>, events: &mpsc::Receiver<Event>) -> bool {
        let refresh = self.spec.refresh.unwrap_or(Duration::from_secs(3600));
        let mut next_refresh = Instant::now() + refresh;
        loop {
            let wait = next_refresh.saturating_duration_since(Instant::now());
            let event = events.recv_timeout(wait);
            match event {
                Ok(Event::ListChanged) => self.refresh(connection.as_ref(), "list_changed"),
                Err(RecvTimeoutError::Timeout) => {
                    next_refresh = Instant::now() + refresh;
                    if self.spec.refresh.is_some() {
                        self.refresh(connection.as_ref(), "periodic refresh");
                    }
                }
                // A death notice from an earlier connection is old news.
                Ok(Event::Died(_)) if !connection.is_dead() => {}
                Ok(Event::Died(reason)) => {
                    let mut state = lock(&self.state);
                    state.connection = None;
                    state
                        .status
                        .record(format!("stopped: {reason}; restarting"));
                    return true;
                }
                Ok(Event::Shutdown) | Err(RecvTimeoutError::Disconnected) => return false,
            }
        }
    }

    fn refresh(&self, connection: &dyn Rpc, why: &str) {
        match connection
            .list_tools(self.spec.call_timeout)
            .and_then(|tools| self.update_tools(&tools))
        {
            Ok(true) => {
                self.record(format!("tool list changed ({why})"));
                self.changed();
            }
            Ok(false) => {}
            Err(fault) => self.record(format!(
                "refresh after {why} failed, keeping the last tool list: {}",
                fault.message()
            )),
        }
    }

    /// Replaces the tool list; `true` when it differs from the last one. A list naming one tool
    /// twice is refused and the last list stays: which of the two an admission pins, and which
    /// one a call reaches, would otherwise be a guess.
    fn update_tools(&self, tools: &[Value]) -> Result<bool, Fault> {
        let mut names = std::collections::HashSet::new();
        for name in tools
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
        {
            if !names.insert(name) {
                return Err(crate::connection::protocol(
                    &self.spec.name,
                    &format!("`tools/list` names `{name}` more than once"),
                ));
            }
        }
        let mut descriptors = Vec::new();
        let mut malformed = Vec::new();
        for tool in tools {
            match crate::descriptor::descriptor_of(tool) {
                Ok(descriptor) => descriptors.push(descriptor),
                Err(problem) => malformed.push(problem),
            }
        }
        let digests = descriptors
            .iter()
            .map(|d| (d.name.clone(), d.digest()))
            .collect();
        let mut state = lock(&self.state);
        let changed = state.status.tools.as_ref() != Some(&descriptors);
        state.status.tools = Some(descriptors);
        state.digests = digests;
        state.status.malformed = malformed;
        Ok(changed)
    }

    fn changed(&self) {
        let on_change = lock(&self.on_change).clone();
        if let Some(on_change) = on_change {
            on_change();
        }
    }
}

/// Sleeps for `wait`, draining events; `false` if the gateway is stopping.
fn wait_unless_shutdown(events: &mpsc::Receiver<Event>, wait: Duration) -> bool {
    let deadline = Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        match events.recv_timeout(left) {
            Ok(Event::Shutdown) | Err(RecvTimeoutError::Disconnected) => return false,
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => return true,
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
