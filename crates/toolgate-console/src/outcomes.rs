//! [`RecentOutcomes`]: the last outcomes the pipeline recorded, for the console's list.
//!
//! It keeps what a person needs to follow along — tool, status, the stage and code of a
//! refusal, when — and never argument values or output, which may hold secrets and are the
//! durable audit log's business.

use std::collections::VecDeque;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;
use toolgate_core::{Outcome, RecordError, Recorder, Status};

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
    /// What the client that asked says it is, and its session (its claim, unchecked).
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
}

impl RecentOutcomes {
    pub fn new(capacity: usize) -> RecentOutcomes {
        RecentOutcomes {
            kept: Mutex::new(VecDeque::with_capacity(capacity)),
            capacity,
        }
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
            client: outcome.evidence().client.clone(),
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

#[cfg(test)]
mod tests {
    use toolgate_core::{Evidence, RejectCode, Rejection};

    use super::*;

    fn refused(client: Option<&str>) -> Outcome {
        let evidence: Evidence = serde_json::from_value(serde_json::json!({
            "call_id": "c-1", "client": client, "tool": "read_file", "surface": "chat",
            "actor": "local", "profile": "default", "workspace": "sha256:00",
            "argument_names": [], "resources": [], "policies": [], "durations_ns": {},
            "total_ns": 5, "output_bytes": 0, "truncated": false, "redactions": 0
        }))
        .unwrap();
        let rejection = Rejection::new(RejectCode::UnknownArgument, "unknown argument `x`");
        Outcome::refused(rejection, evidence, Vec::new())
    }

    /// Every outcome names the client that asked, from its evidence: a call no person was
    /// asked about as well.
    #[test]
    fn each_outcome_names_the_client_its_evidence_names() {
        let outcomes = RecentOutcomes::new(4);
        outcomes
            .record(&refused(Some("codex 0.171, session 2")))
            .unwrap();
        outcomes.record(&refused(None)).unwrap();
        let list = outcomes.list();
        assert_eq!(list[0].client, None);
        assert_eq!(list[1].client.as_deref(), Some("codex 0.171, session 2"));
        assert_eq!(list[1].code.as_deref(), Some("unknown_argument"));
    }
}
