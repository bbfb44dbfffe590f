//! How many streamable-HTTP sessions may be open, and when an idle one ends.
//!
//! rmcp keeps everything a session holds (its worker task, its channels, toolgate's
//! [`crate::Session`]) in memory until the session ends, about 60 KB each. A client that
//! begins sessions and never ends them grew the server by that much per `initialize`, without
//! bound. So every session counts against two limits, one per token and one for all tokens
//! together ([`SessionLimits`]); an `initialize` over either is refused before rmcp sees it,
//! with HTTP 503 and a JSON-RPC error that says which limit and what to do, while the sessions
//! already open go on as before.
//!
//! A session is idle while no request of it is being answered: no response stream of it is
//! open. One idle for the configured time is ended ([`sweep`]) as if its client had sent
//! `DELETE`: rmcp drops what it holds, and its id is answered 404 from then on. A client
//! listening on a standalone `GET` stream is not idle, however long nothing happens; the
//! stream's keep-alive comments notice a client that went away, which closes the stream.
//!
//! This ledger, not rmcp's own idle timer, decides expiry: rmcp's timer counts only messages,
//! so it would end a session whose client is listening for `list_changed` and nothing else.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use rmcp::model::RequestId;
use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::json;
use sha2::{Digest as _, Sha256};
use tokio_util::sync::CancellationToken;

use crate::auth::Principal;
use crate::session::SessionState;

/// How many sessions may be open, and how long an idle one lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionLimits {
    /// Open sessions of all tokens together.
    pub max_sessions: usize,
    /// Open sessions begun with any one token (or, under `dangerous_anonymous`, without one).
    pub max_sessions_per_token: usize,
    /// How long a session may go without a request before it is ended.
    pub idle_timeout: Duration,
}

impl SessionLimits {
    /// 128 sessions cost the server about 8 MB, while one person's agents use a few each.
    pub const DEFAULT_MAX_SESSIONS: usize = 128;
    /// Half of all: a token whose client runs away leaves room for the others. Clients that
    /// never end their sessions still fit: the MCP conformance suite, which begins one per
    /// scenario, begins 33.
    pub const DEFAULT_MAX_SESSIONS_PER_TOKEN: usize = 64;
    /// Long enough for a person to read and think between two turns of their agent.
    pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(600);
}

impl Default for SessionLimits {
    fn default() -> Self {
        SessionLimits {
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            max_sessions_per_token: Self::DEFAULT_MAX_SESSIONS_PER_TOKEN,
            idle_timeout: Self::DEFAULT_IDLE_TIMEOUT,
        }
    }
}

/// Whose budget a session counts against: the token that began it, known by its digest (the
/// ledger keeps nothing from which the token could be read back), or no token at all.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(crate) enum Holder {
    Token([u8; 32]),
    Anonymous,
}

impl std::fmt::Debug for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the digest: a debug dump is no place for anything derived from a secret.
        match self {
            Holder::Token(_) => f.write_str("Holder::Token(..)"),
            Holder::Anonymous => f.write_str("Holder::Anonymous"),
        }
    }
}

impl Holder {
    /// The holder of a request whose `Authorization` header the token table accepted, or
    /// of one without that header.
    pub(crate) fn of(authorization: Option<&[u8]>) -> Holder {
        let Some(header) = authorization else {
            return Holder::Anonymous;
        };
        // The token as `TokenTable::authorize` reads it: after the scheme, trimmed.
        let header = header.trim_ascii();
        let token = header
            .iter()
            .position(|b| *b == b' ')
            .and_then(|space| header.get(space..))
            .unwrap_or_default()
            .trim_ascii();
        Holder::Token(Sha256::digest(token).into())
    }
}

/// Which limit an `initialize` would pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    PerToken,
    Total,
}

impl Limit {
    fn key(self) -> &'static str {
        match self {
            Limit::PerToken => "max_sessions_per_token",
            Limit::Total => "max_sessions",
        }
    }
}

/// An `initialize` refused: which limit it met, and when a slot is likely to be free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) limit: Limit,
    pub(crate) open: usize,
    pub(crate) max: usize,
    pub(crate) idle_timeout: Duration,
    /// When the idlest session counted by `limit` expires, if none of its streams opens
    /// before; the whole idle timeout if every one is busy.
    pub(crate) retry_after: Duration,
}

/// The JSON-RPC error code of a refused `initialize`: one of those JSON-RPC leaves to servers.
pub(crate) const SESSION_LIMIT_CODE: i64 = -32000;

impl Refusal {
    /// The JSON-RPC error answering request `id`: what was refused, why, and what to do.
    pub(crate) fn body(&self, id: Option<&RequestId>) -> serde_json::Value {
        let idle = self.idle_timeout.as_secs();
        let whose = match self.limit {
            Limit::PerToken => "this token already holds",
            Limit::Total => "all tokens together already hold",
        };
        let message = format!(
            "no new session: {whose} {open} open sessions, the limit `{key} = {max}` under [serve]; \
             end sessions no longer needed (an HTTP DELETE of /mcp with their Mcp-Session-Id header), \
             wait for an idle one to expire ({idle} s without requests), or raise `{key}`; \
             sessions already open keep working",
            open = self.open,
            key = self.limit.key(),
            max = self.max,
        );
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": SESSION_LIMIT_CODE,
                "message": message,
                "data": {
                    "limit": self.limit.key(),
                    "open": self.open,
                    "max": self.max,
                    "idleTimeoutSecs": idle,
                    "retryAfterSecs": retry_secs(self.retry_after),
                },
            },
        })
    }

    pub(crate) fn retry_after_secs(&self) -> u64 {
        retry_secs(self.retry_after)
    }
}

fn retry_secs(wait: Duration) -> u64 {
    let secs = wait.as_secs();
    let secs = if wait.subsec_nanos() > 0 {
        secs + 1
    } else {
        secs
    };
    secs.max(1)
}

/// Every open session: whom it belongs to, and since when it has been idle.
#[derive(Debug)]
pub(crate) struct SessionLedger {
    limits: SessionLimits,
    state: Mutex<LedgerState>,
}

#[derive(Debug, Default)]
struct LedgerState {
    open: HashMap<SessionId, OpenSession>,
    /// Open and reserved sessions per holder; a holder with none has no entry.
    held: HashMap<Holder, usize>,
    /// `initialize` requests let in and not yet answered.
    reserved: usize,
    /// Sessions rmcp holds that this ledger did not know of at the last sweep.
    strays: HashSet<SessionId>,
    /// Whether a session ended since the freed memory was last given back.
    ended: bool,
}

#[derive(Debug)]
struct OpenSession {
    id: SessionId,
    holder: Holder,
    principal: Principal,
    /// The end of its last request (or its beginning, while none has ended).
    idle_since: Instant,
    /// Response streams open now.
    streams: usize,
    /// The session's state, for the calls the transport answers itself.
    handler: Weak<SessionState>,
}

impl SessionLedger {
    pub(crate) fn new(limits: SessionLimits) -> SessionLedger {
        SessionLedger {
            limits,
            state: Mutex::new(LedgerState::default()),
        }
    }

    fn state(&self) -> MutexGuard<'_, LedgerState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a session `holder` is about to begin, or why there is none. The total is
    /// checked first: when the server is full, no token's own count is the reason.
    pub(crate) fn reserve(self: &Arc<Self>, holder: Holder) -> Result<Reservation, Refusal> {
        let mut state = self.state();
        let total = state.open.len() + state.reserved;
        let held = state.held.get(&holder).copied().unwrap_or(0);
        let refused = if total >= self.limits.max_sessions {
            Some((Limit::Total, total, self.limits.max_sessions))
        } else if held >= self.limits.max_sessions_per_token {
            Some((Limit::PerToken, held, self.limits.max_sessions_per_token))
        } else {
            None
        };
        if let Some((limit, open, max)) = refused {
            let now = Instant::now();
            let soonest = state
                .open
                .values()
                .filter(|s| s.streams == 0 && (limit == Limit::Total || s.holder == holder))
                .map(|s| (s.idle_since + self.limits.idle_timeout).saturating_duration_since(now))
                .min()
                .unwrap_or(self.limits.idle_timeout);
            return Err(Refusal {
                limit,
                open,
                max,
                idle_timeout: self.limits.idle_timeout,
                retry_after: soonest,
            });
        }
        state.reserved += 1;
        *state.held.entry(holder.clone()).or_insert(0) += 1;
        Ok(Reservation {
            ledger: Arc::clone(self),
            holder: Some(holder),
        })
    }

    /// The session `id`, if it is open and `principal`'s: it is busy until the returned
    /// stream is dropped.
    pub(crate) fn enter(self: &Arc<Self>, id: &str, principal: &Principal) -> Option<Stream> {
        let mut state = self.state();
        let session = state.open.get_mut(id)?;
        if session.principal != *principal {
            return None;
        }
        session.streams += 1;
        let id = Arc::clone(&session.id);
        let handler = session.handler.clone();
        Some(Stream {
            ledger: Arc::clone(self),
            id,
            handler,
        })
    }

    /// Forgets session `id`, which its client ended (`DELETE`) or rmcp closed.
    pub(crate) fn forget(&self, id: &str) {
        let mut state = self.state();
        if let Some(session) = state.open.remove(id) {
            release(&mut state.held, &session.holder);
            state.ended = true;
        }
    }

    /// Whether a session ended since the last call.
    fn take_ended(&self) -> bool {
        std::mem::take(&mut self.state().ended)
    }

    /// Forgets and returns the sessions idle for the idle timeout at `now`.
    fn expire(&self, now: Instant) -> Vec<SessionId> {
        let timeout = self.limits.idle_timeout;
        let mut state = self.state();
        let expired: Vec<SessionId> = state
            .open
            .iter()
            .filter(|(_, s)| {
                s.streams == 0 && now.saturating_duration_since(s.idle_since) >= timeout
            })
            .map(|(id, _)| Arc::clone(id))
            .collect();
        for id in &expired {
            if let Some(session) = state.open.remove(id) {
                release(&mut state.held, &session.holder);
                state.ended = true;
            }
        }
        expired
    }

    /// Brings the ledger in line with the sessions rmcp holds (`live`): forgets those rmcp
    /// closed itself (a session whose handler stopped), and returns those it holds that the
    /// ledger has not known of for two sweeps running, to be closed. A session is unknown
    /// to the ledger only between its creation and the answer to its `initialize`, which is
    /// far shorter than a sweep.
    fn reconcile(&self, live: &HashSet<SessionId>) -> Vec<SessionId> {
        let mut state = self.state();
        let gone: Vec<SessionId> = state
            .open
            .keys()
            .filter(|id| !live.contains(*id))
            .cloned()
            .collect();
        for id in &gone {
            if let Some(session) = state.open.remove(id) {
                release(&mut state.held, &session.holder);
                state.ended = true;
            }
        }
        let strays: HashSet<SessionId> = live
            .iter()
            .filter(|id| !state.open.contains_key(*id))
            .cloned()
            .collect();
        let again = strays
            .iter()
            .filter(|id| state.strays.contains(*id))
            .cloned()
            .collect();
        state.strays = strays;
        again
    }

    #[cfg(test)]
    fn open(&self) -> usize {
        self.state().open.len()
    }
}

fn release(held: &mut HashMap<Holder, usize>, holder: &Holder) {
    if let Some(count) = held.get_mut(holder) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            held.remove(holder);
        }
    }
}

/// A slot held for a session being begun: given back when dropped, unless [`Self::open`]
/// made it the session's.
#[derive(Debug)]
pub(crate) struct Reservation {
    ledger: Arc<SessionLedger>,
    holder: Option<Holder>,
}

impl Reservation {
    /// Session `id`, begun by `principal` with `handler` as its state, takes the slot.
    pub(crate) fn open(mut self, id: &str, principal: Principal, handler: Weak<SessionState>) {
        let Some(holder) = self.holder.take() else {
            return;
        };
        let id: SessionId = id.into();
        let mut state = self.ledger.state();
        state.reserved = state.reserved.saturating_sub(1);
        state.open.insert(
            Arc::clone(&id),
            OpenSession {
                id,
                holder,
                principal,
                idle_since: Instant::now(),
                streams: 0,
                handler,
            },
        );
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(holder) = self.holder.take() {
            let mut state = self.ledger.state();
            state.reserved = state.reserved.saturating_sub(1);
            release(&mut state.held, &holder);
        }
    }
}

/// A request of a session being answered: the session is not idle while this lives.
#[derive(Debug)]
pub(crate) struct Stream {
    ledger: Arc<SessionLedger>,
    id: SessionId,
    handler: Weak<SessionState>,
}

impl Stream {
    /// The session's state, while the session lives.
    pub(crate) fn session(&self) -> Option<Arc<SessionState>> {
        self.handler.upgrade()
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        let mut state = self.ledger.state();
        if let Some(session) = state.open.get_mut(&self.id) {
            session.streams = session.streams.saturating_sub(1);
            session.idle_since = Instant::now();
        }
    }
}

/// Ends idle sessions and those rmcp holds unknown to the ledger, until `shutdown`. Sweeps
/// four times per idle timeout, so a session outlives it by a quarter at most (by 30 s at
/// most for long timeouts).
///
/// At the sweep after sessions ended (by expiry, `DELETE` or otherwise), `release_memory`
/// runs, if given: by then their tasks have finished and freed what they held, but the
/// allocator keeps freed memory for itself, scattered between pages still in use (measured:
/// after 3,000 sessions came and went the server stayed at its peak until `malloc_trim`).
pub(crate) async fn sweep(
    ledger: Arc<SessionLedger>,
    manager: Arc<LocalSessionManager>,
    release_memory: Option<fn()>,
    shutdown: CancellationToken,
) {
    let every =
        (ledger.limits.idle_timeout / 4).clamp(Duration::from_millis(100), Duration::from_secs(30));
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if ledger.take_ended()
            && let Some(release_memory) = release_memory
        {
            release_memory();
        }
        let mut ending = ledger.expire(Instant::now());
        let live: HashSet<SessionId> = manager.sessions.read().await.keys().cloned().collect();
        ending.extend(ledger.reconcile(&live));
        for id in ending {
            // Closing drops the session's handle; its worker stops and what it held is
            // freed. An error means it had stopped already.
            let _ = manager.close_session(&id).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(max: usize, per_token: usize) -> Arc<SessionLedger> {
        Arc::new(SessionLedger::new(SessionLimits {
            max_sessions: max,
            max_sessions_per_token: per_token,
            idle_timeout: Duration::from_secs(10),
        }))
    }

    fn token(name: &str) -> Holder {
        Holder::of(Some(format!("Bearer {name}").as_bytes()))
    }

    #[test]
    fn holders_are_told_apart_by_token_as_authorize_reads_it() {
        assert_eq!(
            Holder::of(Some(b"Bearer abc")),
            Holder::of(Some(b"bearer   abc "))
        );
        assert_ne!(
            Holder::of(Some(b"Bearer abc")),
            Holder::of(Some(b"Bearer abd"))
        );
        assert_eq!(Holder::of(None), Holder::Anonymous);
        assert_eq!(format!("{:?}", token("abc")), "Holder::Token(..)");
    }

    #[test]
    fn limits_count_open_and_reserved_sessions() {
        let ledger = ledger(3, 2);
        let alice = Principal::new("alice", "default");
        let a1 = ledger.reserve(token("a")).unwrap();
        let a2 = ledger.reserve(token("a")).unwrap();
        let refused = ledger.reserve(token("a")).unwrap_err();
        assert_eq!(
            (refused.limit, refused.open, refused.max),
            (Limit::PerToken, 2, 2)
        );
        // Every session is busy or just begun: the whole timeout, or the time it has left.
        assert_eq!(refused.retry_after, Duration::from_secs(10));
        a1.open("s1", alice.clone(), Weak::new());
        drop(a2);
        let _a3 = ledger.reserve(token("a")).unwrap();
        let _b1 = ledger.reserve(token("b")).unwrap();
        let refused = ledger.reserve(token("c")).unwrap_err();
        assert_eq!(
            (refused.limit, refused.open, refused.max),
            (Limit::Total, 3, 3)
        );
        assert!(refused.retry_after <= Duration::from_secs(10));
        let body = refused.body(Some(&RequestId::Number(7)));
        assert_eq!(body["id"], 7);
        assert_eq!(body["error"]["code"], SESSION_LIMIT_CODE);
        assert_eq!(body["error"]["data"]["limit"], "max_sessions");
        let message = body["error"]["message"].as_str().unwrap();
        for needle in [
            "`max_sessions = 3`",
            "DELETE",
            "expire",
            "raise `max_sessions`",
        ] {
            assert!(message.contains(needle), "{needle}: {message}");
        }
        assert!(!ledger.take_ended());
        ledger.forget("s1");
        assert_eq!(ledger.open(), 0);
        assert!(ledger.take_ended());
        assert!(!ledger.take_ended());
        assert!(ledger.reserve(token("c")).is_ok());
    }

    #[test]
    fn busy_sessions_do_not_expire_and_strangers_do_not_enter() {
        let ledger = ledger(4, 4);
        let alice = Principal::new("alice", "default");
        ledger
            .reserve(token("a"))
            .unwrap()
            .open("busy", alice.clone(), Weak::new());
        ledger
            .reserve(token("a"))
            .unwrap()
            .open("idle", alice.clone(), Weak::new());
        let stream = ledger.enter("busy", &alice).unwrap();
        assert!(
            ledger
                .enter("busy", &Principal::new("bob", "default"))
                .is_none()
        );
        assert!(ledger.enter("nobody", &alice).is_none());
        let later = Instant::now() + Duration::from_secs(11);
        assert_eq!(ledger.expire(later), [SessionId::from("idle")]);
        assert!(ledger.enter("idle", &alice).is_none());
        drop(stream);
        assert!(
            ledger
                .expire(Instant::now() + Duration::from_secs(5))
                .is_empty(),
            "idle since just now"
        );
        assert_eq!(
            ledger.expire(Instant::now() + Duration::from_secs(10)),
            [SessionId::from("busy")]
        );
    }

    static RELEASED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn count_release() {
        RELEASED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    #[tokio::test]
    async fn sweeps_forget_closed_sessions_and_then_release_memory_once() {
        let ledger = Arc::new(SessionLedger::new(SessionLimits {
            max_sessions: 4,
            max_sessions_per_token: 4,
            // A sweep every 100 ms.
            idle_timeout: Duration::from_millis(400),
        }));
        let alice = Principal::new("alice", "default");
        // Known to the ledger only, as after rmcp closed it: forgotten at the first sweep,
        // and the memory released at the next.
        ledger
            .reserve(token("a"))
            .unwrap()
            .open("closed", alice.clone(), Weak::new());
        let shutdown = CancellationToken::new();
        let sweeper = tokio::spawn(sweep(
            Arc::clone(&ledger),
            Arc::new(LocalSessionManager::default()),
            Some(count_release),
            shutdown.clone(),
        ));
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(ledger.open(), 0);
        assert_eq!(RELEASED.load(std::sync::atomic::Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            RELEASED.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "nothing ended since"
        );
        shutdown.cancel();
        sweeper.await.unwrap();
    }

    #[test]
    fn reconciling_forgets_closed_sessions_and_ends_strays_seen_twice() {
        let ledger = ledger(4, 4);
        let alice = Principal::new("alice", "default");
        ledger
            .reserve(token("a"))
            .unwrap()
            .open("kept", alice.clone(), Weak::new());
        ledger
            .reserve(token("a"))
            .unwrap()
            .open("closed", alice, Weak::new());
        let live: HashSet<SessionId> = ["kept", "stray"].into_iter().map(SessionId::from).collect();
        assert!(ledger.reconcile(&live).is_empty());
        assert_eq!(ledger.open(), 1);
        assert_eq!(ledger.reconcile(&live), [SessionId::from("stray")]);
    }
}
