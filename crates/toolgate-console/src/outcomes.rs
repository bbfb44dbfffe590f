//! [`RecentOutcomes`]: the last outcomes the pipeline recorded, for the console's list.
//!
//! It keeps what a person needs to follow along — tool, status, the stage and code of a
//! refusal, when — and never argument values or output, which may hold secrets and are the
//! durable audit log's business.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use toolgate_core::{Outcome, RecordError, Recorder, Status};

use crate::broker::AskedBy;

/// One outcome as the console lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OutcomeView {
    pub tool: String,
    pub status: String,
    /// The stage that refused the call, for a rejection.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The rejection or tool error code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    pub actor: String,
    pub surface: String,
    /// What the client that asked says it is, and its session (its claim, unchecked), for a
    /// call the console was asked about.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Milliseconds since the Unix epoch when it was recorded.
    pub at_ms: u64,
}

/// A bounded list of recent outcomes, newest first.
#[derive(Debug)]
pub struct RecentOutcomes {
    kept: Mutex<VecDeque<OutcomeView>>,
    capacity: usize,
    asked_by: Option<Arc<AskedBy>>,
}

impl RecentOutcomes {
    pub fn new(capacity: usize) -> RecentOutcomes {
        RecentOutcomes {
            kept: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
            asked_by: None,
        }
    }

    /// The same list, naming the client that asked for each call `asked_by` knows of (the
    /// console broker's, see [`crate::ConsoleBroker::asked_by`]).
    #[must_use]
    pub fn with_asked_by(mut self, asked_by: Arc<AskedBy>) -> RecentOutcomes {
        self.asked_by = Some(asked_by);
        self
    }

    /// The kept outcomes, newest first.
    pub fn list(&self) -> Vec<OutcomeView> {
        self.kept
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect()
    }
}

impl Recorder for RecentOutcomes {
    fn record(&self, outcome: &Outcome) -> Result<(), RecordError> {
        let (stage, code) = match (outcome.rejection(), outcome.error()) {
            (Some(rejection), _) => (
                Some(rejection.stage().to_string()),
                Some(rejection.code().to_string()),
            ),
            (None, Some(error)) => (None, Some(error.code.to_string())),
            (None, None) => (None, None),
        };
        let view = OutcomeView {
            tool: outcome.evidence().tool.clone(),
            status: match outcome.status() {
                Status::Completed => "completed",
                Status::Failed => "failed",
                Status::Rejected => "rejected",
            }
            .to_owned(),
            stage,
            code,
            actor: outcome.evidence().actor.clone(),
            surface: outcome.evidence().surface.to_string(),
            client: self
                .asked_by
                .as_ref()
                .and_then(|asked| asked.client_of(&outcome.evidence().call_id)),
            approval_id: outcome.evidence().approval_id.clone(),
            at_ms: crate::broker::now_ms(),
        };
        // Losing an entry of this view is harmless (it is not the audit log), so a poisoned
        // lock is recovered rather than failing the call.
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        kept.push_front(view);
        kept.truncate(self.capacity);
        Ok(())
    }
}
