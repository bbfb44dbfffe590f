//! Keeping one upstream running: start, handshake, list, watch, restart with backoff.
//!
//! Each upstream has a thread of its own, so a slow or broken upstream delays nobody else.
//! The thread owns the lifecycle; calls only borrow the current connection. The tool list is
//! the last one fetched successfully: a refresh that fails, or an upstream that is down,
//! leaves it as it was, so the pinned set in force never changes on a failure.
//!
//! `notifications/tools/list_changed` costs the upstream's reader a flag (see
//! [`Events`]), and costs this thread at most one refresh in flight and one queued, paced by
//! [`Pace`]: the first at once, each next one later than the last while they keep coming, and
//! never more than [`REFRESHES_PER_MINUTE`] in a minute. What arrives meanwhile is merged into
//! the queued refresh, which still runs when the pace allows, so the list that is last served
//! is the list toolgate ends up with.

use std::collections::VecDeque;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use toolgate_core::Descriptor;

use crate::config::UpstreamSpec;
use crate::connection::{Connection, Event, Events, Fault, Rpc};
use crate::watchdog::Watchdog;

/// The first wait before a restart; it doubles up to [`MAX_BACKOFF`] while starts keep failing.
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long an upstream has to answer `ping` after one of its calls timed out.
const PING_TIMEOUT: Duration = Duration::from_secs(2);
/// How many recent events an upstream's status keeps.
const RECENT_EVENTS: usize = 16;
/// The most refreshes `list_changed` causes in any one minute, per upstream.
pub const REFRESHES_PER_MINUTE: usize = 6;
/// The wait after a `list_changed` refresh before the next may start; it doubles with each
/// refresh of the last minute, so a burst is listed at once, a flood seldom.
const FIRST_GAP: Duration = Duration::from_millis(250);
const MINUTE: Duration = Duration::from_secs(60);

/// When the `list_changed` refreshes of one upstream may run.
#[derive(Debug, Default)]
pub(crate) struct Pace {
    /// A `list_changed` arrived since the last refresh started.
    queued: bool,
    /// When the refreshes of the last minute started, oldest first.
    recent: VecDeque<Instant>,
}

impl Pace {
    pub(crate) fn queue(&mut self) {
        self.queued = true;
    }

    /// When the queued refresh may start; `None` when none is queued.
    pub(crate) fn due(&mut self, now: Instant) -> Option<Instant> {
        if !self.queued {
            return None;
        }
        while self
            .recent
            .front()
            .is_some_and(|started| now.duration_since(*started) >= MINUTE)
        {
            self.recent.pop_front();
        }
        let Some(last) = self.recent.back() else {
            return Some(now);
        };
        let doublings = u32::try_from(self.recent.len().saturating_sub(1)).unwrap_or(u32::MAX);
        let gap = FIRST_GAP.saturating_mul(2u32.saturating_pow(doublings.min(16)));
        let mut due = *last + gap.min(MINUTE);
        if self.recent.len() >= REFRESHES_PER_MINUTE
            && let Some(oldest) = self.recent.front()
        {
            due = due.max(*oldest + MINUTE);
        }
        Some(due)
    }

    pub(crate) fn started(&mut self, now: Instant) {
        self.queued = false;
        self.recent.push_back(now);
    }
}

/// Called on the supervisor's thread when an upstream's tool list changed.
pub type OnChange = Arc<dyn Fn() + Send + Sync>;

/// Told, in a sentence naming the upstream, that an upstream process was stopped but not
/// everything it started is known to be gone (see [`crate::connection::Rpc::unended`]).
pub type OnUnended = Arc<dyn Fn(&str) + Send + Sync>;

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
    events: Events,
    on_change: Mutex<Option<OnChange>>,
    on_unended: Mutex<Option<OnUnended>>,
    watchdog: Option<Arc<Watchdog>>,
    /// Whether a `ping` probe is out: calls that time out together start one between them.
    probing: std::sync::atomic::AtomicBool,
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
            events: Events::new(tx),
            on_change: Mutex::new(None),
            on_unended: Mutex::new(None),
            watchdog,
            probing: std::sync::atomic::AtomicBool::new(false),
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

    pub(crate) fn set_on_unended(&self, on_unended: OnUnended) {
        *lock(&self.on_unended) = Some(on_unended);
    }

    /// After `connection` was killed: a stop that is not clean is recorded among the
    /// upstream's events (which the outcomes of its calls and `tools discover` show) and told
    /// to the operator — through the hook toolgate set, or else on standard error, escaped.
    fn after_kill(&self, connection: &dyn Rpc) {
        let Some(unended) = connection.unended() else {
            return;
        };
        self.record(format!("stopped, not cleanly: {unended}"));
        let hook = lock(&self.on_unended).clone();
        match hook {
            Some(hook) => hook(&unended),
            None => eprintln!(
                "toolgate: {}",
                toolgate_core::visible::escape_invisible(&unended)
            ),
        }
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
    /// While one probe is out, another is not started.
    pub(crate) fn probe(self: &Arc<Self>, connection: Arc<dyn Rpc>) {
        use std::sync::atomic::Ordering;
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let supervisor = Arc::clone(self);
        let spawned = std::thread::Builder::new()
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
                    supervisor.events.send(Event::Died(reason));
                }
                supervisor.probing.store(false, Ordering::Release);
            });
        if spawned.is_err() {
            self.probing.store(false, Ordering::Release);
        }
    }

    pub(crate) fn shutdown(&self) {
        self.events.send(Event::Shutdown);
        // The connection is taken out first so that the state lock is not held while the
        // process is killed: calls and status readers never wait on a dying upstream.
        let connection = lock(&self.state).connection.take();
        if let Some(connection) = connection {
            connection.kill();
            self.after_kill(connection.as_ref());
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
                        self.after_kill(connection.as_ref());
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
        let sender = self.events.clone();
        let connection: Arc<dyn Rpc> = match &self.spec.endpoint {
            crate::Endpoint::Http { url } => {
                crate::http::HttpConnection::open(&self.spec, url, sender)?
            }
            crate::Endpoint::Command { .. } => {
                Connection::spawn(&self.spec, sender, self.watchdog.clone())?
            }
        };
        // The first listing sees whatever an earlier connection announced.
        self.events.take_list_changed();
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
                self.after_kill(connection.as_ref());
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
        let mut pace = Pace::default();
        let mut heard = self.events.heard();
        loop {
            let now = Instant::now();
            let due = pace.due(now);
            if due.is_some_and(|due| due <= now) {
                // Cleared before listing: a `list_changed` sent from here on queues another
                // refresh, one sent before is seen by this one.
                self.events.take_list_changed();
                pace.started(now);
                // An operator looking at the upstream's events sees that it floods.
                let total = self.events.heard();
                let merged = total.saturating_sub(heard);
                heard = total;
                if merged > 1 {
                    self.record(format!(
                        "{merged} list_changed notifications merged into one refresh"
                    ));
                }
                self.refresh(connection.as_ref(), "list_changed");
                continue;
            }
            let wake = due.map_or(next_refresh, |due| due.min(next_refresh));
            let event = events.recv_timeout(wake.saturating_duration_since(now));
            match event {
                Ok(Event::ListChanged) => pace.queue(),
                Err(RecvTimeoutError::Timeout) if Instant::now() < next_refresh => {}
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
                    drop(state);
                    // Killed by whoever saw it die, before the event was sent.
                    self.after_kill(connection.as_ref());
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
                Err(problem) => malformed.push(problem.to_string()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The `list_changed` refreshes a flood of `seconds` seconds, one notification every
    /// millisecond, would start (each taking `listing` to run), and whether one started after
    /// the last notification.
    fn flood(seconds: u64, listing: Duration) -> (Vec<Duration>, bool) {
        let start = Instant::now();
        let end = start + Duration::from_secs(seconds);
        let mut pace = Pace::default();
        let mut now = start;
        let mut started = Vec::new();
        let mut busy_until = start;
        // Steps of a millisecond, for two minutes past the flood.
        while now < end + Duration::from_secs(120) {
            if now < end {
                pace.queue();
            }
            if now >= busy_until && pace.due(now).is_some_and(|due| due <= now) {
                pace.started(now);
                started.push(now - start);
                busy_until = now + listing;
            }
            now += Duration::from_millis(1);
        }
        let after = started.last().is_some_and(|last| start + *last >= end);
        (started, after)
    }

    #[test]
    fn a_short_flood_is_listed_a_few_times_and_once_after_it_ends() {
        let (started, after) = flood(3, Duration::from_millis(5));
        assert!(started.len() <= 6, "{started:?}");
        assert!(after, "{started:?}");
        assert_eq!(started.first(), Some(&Duration::ZERO));
        // Soon after, not a minute after.
        assert!(
            *started.last().unwrap() < Duration::from_secs(5),
            "{started:?}"
        );
    }

    #[test]
    fn a_long_flood_is_held_to_the_bound_per_minute_and_listed_after_it() {
        let (started, after) = flood(150, Duration::from_millis(50));
        assert!(after, "{started:?}");
        for (i, first) in started.iter().enumerate() {
            let within = started
                .iter()
                .skip(i)
                .take_while(|t| **t < *first + MINUTE)
                .count();
            assert!(within <= REFRESHES_PER_MINUTE, "{started:?}");
        }
    }

    #[test]
    fn nothing_queued_is_nothing_due() {
        let mut pace = Pace::default();
        let now = Instant::now();
        assert_eq!(pace.due(now), None);
        pace.queue();
        assert_eq!(pace.due(now), Some(now));
        pace.started(now);
        assert_eq!(pace.due(now), None);
        pace.queue();
        assert_eq!(pace.due(now), Some(now + FIRST_GAP));
    }
}
