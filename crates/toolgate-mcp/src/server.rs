//! What every session of one server shares: the pipeline, and news that it changed.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rmcp::model::{Implementation, ServerConfig};
use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use toolgate_core::Pipeline;

use crate::auth::Principal;
use crate::elicit::{Elicitation, Parked, ParkingLot};
use crate::watcher::Running;

/// How often a long call reports progress to a client that asked for it.
pub const DEFAULT_PROGRESS_INTERVAL: Duration = Duration::from_secs(1);

/// How long a stopping server waits for its open subscriptions to send their final result.
const SUBSCRIPTIONS_FAREWELL: Duration = Duration::from_secs(2);

/// The pipeline behind every session of one server.
///
/// The pipeline can be replaced while sessions run (a reloaded configuration, say). A call
/// keeps the pipeline, and so the registry entry, it started with; sessions are told that
/// their tool list changed, and a session may call only what it was shown, so a tool the new
/// registry adds or changes must be listed again before it can be called.
#[derive(Debug)]
pub struct Server {
    pipeline: RwLock<Arc<Pipeline>>,
    generation: watch::Sender<u64>,
    info: ServerConfig,
    progress_interval: Duration,
    elicitation: Option<Elicitation>,
    /// Calls that answered `input_required`, by the `requestState` they gave; cancelled when
    /// the server goes.
    parked: ParkingLot<Running>,
    /// Cancelled when the server stops, so that open subscriptions end with their result.
    closing: CancellationToken,
    /// How many `subscriptions/listen` requests are open.
    listening: watch::Sender<usize>,
}

impl Server {
    /// A server to `pipeline`, introducing itself as `name` `version`.
    pub fn new(pipeline: Pipeline, name: &str, version: &str) -> Self {
        let info = ServerConfig::new(crate::logging::capabilities())
            .with_server_info(Implementation::new(name, version))
            .with_instructions(
                "Every tool call goes through toolgate's policy. A rejected call says at which \
                 stage it stopped and what to change; consequential calls may need a person's \
                 approval, which the model cannot give.",
            );
        Server {
            pipeline: RwLock::new(Arc::new(pipeline)),
            generation: watch::Sender::new(0),
            info,
            progress_interval: DEFAULT_PROGRESS_INTERVAL,
            elicitation: None,
            parked: ParkingLot::default(),
            closing: CancellationToken::new(),
            listening: watch::Sender::new(0),
        }
    }

    /// The same server, asking the person at the client about approvals for the sessions
    /// `elicitation` names (see [`crate::elicit`]).
    #[must_use]
    pub fn with_elicitation(mut self, elicitation: Elicitation) -> Self {
        self.elicitation = Some(elicitation);
        self
    }

    /// The same server, reporting progress on long calls every `interval`.
    #[must_use]
    pub fn with_progress_interval(mut self, interval: Duration) -> Self {
        self.progress_interval = interval;
        self
    }

    /// The pipeline new calls use.
    pub fn pipeline(&self) -> Arc<Pipeline> {
        Arc::clone(&self.pipeline.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Replaces the pipeline for calls that start from now on, and tells every session that its
    /// tool list changed.
    pub fn replace_pipeline(&self, pipeline: Pipeline) {
        *self
            .pipeline
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Arc::new(pipeline);
        self.generation.send_modify(|g| *g += 1);
    }

    pub(crate) fn info(&self) -> ServerConfig {
        self.info.clone()
    }

    pub(crate) fn progress_interval(&self) -> Duration {
        self.progress_interval
    }

    pub(crate) fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// Cancelled once the server begins to stop.
    pub(crate) fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    /// Counts an open subscription until the guard is dropped.
    pub(crate) fn listening(&self) -> Listening<'_> {
        self.listening.send_modify(|open| *open += 1);
        Listening(&self.listening)
    }

    /// Ends every open subscription with its final result, and waits (a little) for them to
    /// have sent it: a transport about to stop calls this before it closes its streams.
    pub async fn end_subscriptions(&self) {
        self.closing.cancel();
        let mut open = self.listening.subscribe();
        let ended = tokio::time::timeout(SUBSCRIPTIONS_FAREWELL, open.wait_for(|n| *n == 0));
        if ended.await.is_ok_and(|waited| waited.is_ok()) {
            // The results are on their way through in-process channels to local sockets; give
            // the writers a moment before the streams are cut.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) fn elicitation(&self) -> Option<&Elicitation> {
        self.elicitation.as_ref()
    }

    /// Leaves `parked` waiting for its client's retry under a fresh random `requestState`,
    /// for at most the elicitation's hold; then it is cancelled. Gives it back when
    /// elicitation is off, too many wait already, or no state could be drawn.
    pub(crate) fn park(
        &self,
        parked: Box<Parked<Running>>,
    ) -> Result<String, Box<Parked<Running>>> {
        match &self.elicitation {
            Some(elicitation) => self.parked.park(parked, elicitation.hold),
            None => Err(parked),
        }
    }

    /// The call parked under `state`, for a retry by the same principal of the same tool with
    /// the same arguments. A retry that does not match leaves it parked.
    pub(crate) fn claim(
        &self,
        state: &str,
        principal: &Principal,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Box<Parked<Running>>, &'static str> {
        self.parked.claim(state, principal, tool, arguments)
    }
}

/// One open subscription, counted by its server while it lives.
pub(crate) struct Listening<'a>(&'a watch::Sender<usize>);

impl Drop for Listening<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|open| *open = open.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::time::Duration;

    use serde_json::json;
    use toolgate_core::{HeadlessBroker, PolicyEngine, RegistryBuilder, WorkspaceId};

    use super::*;
    use crate::elicit::{Answer, ApprovalDesk, MAX_PARKED};

    #[derive(Debug)]
    struct NoDesk;

    impl ApprovalDesk for NoDesk {
        fn question(&self, _: &str) -> Option<String> {
            None
        }
        fn arrivals(&self) -> tokio::sync::watch::Receiver<u64> {
            tokio::sync::watch::channel(0).1
        }
        fn answer(&self, _: &str, _: Answer) -> Result<(), crate::elicit::NotTaken> {
            Err("no desk".into())
        }
    }

    fn server(hold: Duration) -> Arc<Server> {
        let pipeline = Pipeline::new(
            Arc::new(RegistryBuilder::new().build().unwrap()),
            Arc::new(PolicyEngine::default_policy().unwrap()),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/w"),
        );
        Arc::new(
            Server::new(pipeline, "t", "0").with_elicitation(Elicitation {
                desk: Arc::new(NoDesk),
                profiles: BTreeSet::from(["default".to_owned()]),
                hold,
            }),
        )
    }

    fn parked(server: &Server, principal: &Principal) -> Box<Parked<Running>> {
        Box::new(Parked {
            principal: principal.clone(),
            tool: "write_file".into(),
            arguments: json!({"path": "a"}).as_object().cloned(),
            call_id: "c1".into(),
            call: Running::waiting(server.pipeline(), "write_file"),
        })
    }

    #[tokio::test]
    async fn a_parked_call_is_claimed_only_by_the_same_call_of_the_same_principal() {
        let server = server(Duration::from_secs(60));
        let alice = Principal::new("alice", "default");
        let state = server.park(parked(&server, &alice)).unwrap();
        assert_eq!(state.len(), 64, "a random state, not a counter");
        let args = json!({"path": "a"}).as_object().cloned();
        let other = json!({"path": "b"}).as_object().cloned();
        let bob = Principal::new("bob", "default");
        for (principal, tool, arguments) in [
            (&bob, "write_file", args.as_ref()),
            (&alice, "edit_file", args.as_ref()),
            (&alice, "write_file", other.as_ref()),
            (&alice, "write_file", None),
        ] {
            let refused = server
                .claim(&state, principal, tool, arguments)
                .unwrap_err();
            assert!(refused.contains("another call"), "{refused}");
        }
        assert!(
            server
                .claim("0123", &alice, "write_file", args.as_ref())
                .unwrap_err()
                .contains("unknown requestState")
        );
        let claimed = server
            .claim(&state, &alice, "write_file", args.as_ref())
            .unwrap();
        assert!(
            server
                .claim(&state, &alice, "write_file", args.as_ref())
                .is_err(),
            "claimed once"
        );
        claimed.call.cancel();
    }

    #[tokio::test]
    async fn a_call_nobody_comes_back_for_is_cancelled_after_the_hold() {
        let server = server(Duration::from_millis(50));
        let alice = Principal::new("alice", "default");
        let parked = parked(&server, &alice);
        let cancelled = parked.call.cancelled();
        let state = server.park(parked).unwrap();
        let given = tokio::task::spawn_blocking(move || {
            cancelled.wait_until(std::time::Instant::now() + Duration::from_secs(30))
        });
        assert!(given.await.unwrap(), "the call is cancelled");
        let args = json!({"path": "a"}).as_object().cloned();
        assert!(
            server
                .claim(&state, &alice, "write_file", args.as_ref())
                .unwrap_err()
                .contains("unknown requestState")
        );
    }

    #[tokio::test]
    async fn parking_is_bounded() {
        let server = server(Duration::from_secs(60));
        let alice = Principal::new("alice", "default");
        for _ in 0..MAX_PARKED {
            server.park(parked(&server, &alice)).unwrap();
        }
        let refused = server.park(parked(&server, &alice)).unwrap_err();
        assert!(
            !refused.call.cancelled().is_cancelled(),
            "given back to wait where it is"
        );
        refused.call.cancel();
        drop(server);
    }
}
