//! Stage 6: a person's consent, bound to the exact operation.
//!
//! An [`ApprovalRequest`] carries an [`ApprovalDigest`] over (tool, version, canonical
//! arguments, workspace, resolved resources, pre-image digests). A broker answers with a
//! [`Grant`] bound to that digest; the [`GrantLedger`] makes grants single-use, expiring and
//! revocable, and the pipeline redeems the grant immediately before the executor runs, so a
//! grant that expired, was revoked or was issued for other inputs stops the call there.
//!
//! The model cannot approve anything: no tool grants approval, and grants live in this
//! process's state, not in any message a model can write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::canonical::{Digest, canonical_json, sha256_digest};
use crate::invocation::Surface;
use crate::registry::{ApprovalMode, EffectClass};

/// Time, injectable so expiry can be tested.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The digest an approval is bound to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ApprovalDigest(pub Digest);

impl ApprovalDigest {
    /// Binds tool, version, canonical arguments, workspace, resources and pre-image digests.
    pub fn compute(
        tool: &str,
        version: &str,
        arguments: &Value,
        workspace: &str,
        resources: &[String],
        preimages: &[(String, Digest)],
    ) -> Self {
        let bound = json!({
            "tool": tool,
            "version": version,
            "arguments": arguments,
            "workspace": workspace,
            "resources": resources,
            "preimages": preimages,
        });
        ApprovalDigest(sha256_digest(canonical_json(&bound).as_bytes()))
    }
}

/// What a grant covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GrantScope {
    /// This exact call, once.
    Once,
    /// Calls of this tool in this workspace (file edits only), until expiry or revocation.
    WorkspaceAction,
}

/// The longest reason a person may give with a rejection, on any channel; it goes back to the
/// model verbatim.
pub const MAX_REASON_CHARS: usize = 2000;

/// What a person is asked to approve. Everything they need to decide, nothing secret.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalRequest {
    pub digest: ApprovalDigest,
    pub tool: String,
    pub version: String,
    pub effect: EffectClass,
    pub surface: Surface,
    pub actor: String,
    pub workspace: String,
    pub arguments: Value,
    pub resources: Vec<String>,
    /// A human-readable preview: a diff, a resolved argv.
    pub preview: Option<String>,
    /// Whether a workspace-scoped grant may be offered.
    pub scope_allowed: GrantScope,
    /// The policies, by `@id`, that permitted the call subject to approval.
    pub policies: Vec<String>,
    /// The tool entry's approval mode: `each_call` asks whatever the policies say.
    pub approval_mode: ApprovalMode,
    /// The id of the call waiting (the outcome's `call_id`), so a transport that asks a person
    /// on a channel of its own can name the request it answers.
    pub call_id: String,
    /// Set when the caller gives up on the call; a broker still waiting must then stop
    /// waiting and answer [`ApprovalResponse::Unanswered`].
    #[serde(skip)]
    pub cancelled: Arc<AtomicBool>,
}

/// A broker's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalResponse {
    /// A person approved; the grant must still be redeemed before execution.
    Grant(Grant),
    /// A person refused.
    Deny { reason: String },
    /// Nobody could be asked (headless, no terminal, console unreachable, call cancelled).
    Unanswered { reason: String },
    /// A person could be asked but did not answer in time.
    Expired { reason: String },
}

/// Asks a person. Implementations must never approve on their own.
pub trait ApprovalBroker: Send + Sync + std::fmt::Debug {
    /// Asks for a decision on `request`, blocking until there is one or none can be had.
    fn request(&self, request: &ApprovalRequest) -> ApprovalResponse;

    /// The ledger that holds this broker's grants; `None` for a broker that never grants.
    fn ledger(&self) -> Option<&GrantLedger>;

    /// Whether a request made now would wait for a person, rather than be answered at once
    /// because the broker has no room for another; a transport told of a wait that never
    /// comes would promise the model one.
    fn has_room(&self) -> bool {
        true
    }

    /// Redeems `grant` for `digest` immediately before execution. Without a ledger every
    /// grant is unknown.
    fn redeem(
        &self,
        grant: &Grant,
        digest: &ApprovalDigest,
        workspace: &str,
        tool: &str,
    ) -> Result<(), GrantRefusal> {
        self.ledger()
            .ok_or(GrantRefusal::Unknown)?
            .redeem(grant, digest, workspace, tool)
    }

    /// A remembered workspace-scoped grant for this tool, if one is standing.
    fn standing(&self, workspace: &str, tool: &str) -> Option<Grant> {
        self.ledger()?.standing(workspace, tool)
    }
}

/// The default broker: nobody is there to ask, so every approval is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeadlessBroker;

impl ApprovalBroker for HeadlessBroker {
    fn request(&self, _request: &ApprovalRequest) -> ApprovalResponse {
        ApprovalResponse::Unanswered {
            reason: "no approval channel is configured".to_owned(),
        }
    }

    fn ledger(&self) -> Option<&GrantLedger> {
        None
    }
}

/// A person's consent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    pub id: String,
    pub digest: ApprovalDigest,
    pub scope: GrantScope,
    /// For workspace-scoped grants: the workspace and tool they cover.
    pub workspace: String,
    pub tool: String,
    pub expires_at_ms: u64,
}

/// Why a grant could not be redeemed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefusal {
    #[error("the approval has expired")]
    Expired,
    #[error("the approval was revoked")]
    Revoked,
    #[error("the approval was already used")]
    Used,
    #[error("the approval was given for different inputs")]
    Mismatch,
    #[error("the approval is unknown")]
    Unknown,
}

#[derive(Debug)]
struct GrantState {
    grant: Grant,
    used: bool,
    revoked: bool,
}

/// Issues, remembers and redeems grants. Brokers hold one.
#[derive(Debug)]
pub struct GrantLedger {
    grants: Mutex<HashMap<String, GrantState>>,
    next: AtomicU64,
    clock: Arc<dyn Clock>,
    nonce: u64,
}

impl GrantLedger {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        GrantLedger {
            grants: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            nonce: clock.now_ms(),
            clock,
        }
    }

    /// Records a person's approval of `request` for `ttl` in `scope`. A workspace scope is
    /// downgraded to once where the request does not allow it.
    pub fn issue(&self, request: &ApprovalRequest, scope: GrantScope, ttl: Duration) -> Grant {
        let scope = match (scope, request.scope_allowed) {
            (GrantScope::WorkspaceAction, GrantScope::WorkspaceAction) => {
                GrantScope::WorkspaceAction
            }
            _ => GrantScope::Once,
        };
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let grant = Grant {
            id: format!("grant-{:x}-{n}", self.nonce),
            digest: request.digest.clone(),
            scope,
            workspace: request.workspace.clone(),
            tool: request.tool.clone(),
            expires_at_ms: self.clock.now_ms().saturating_add(ttl_ms),
        };
        self.lock().insert(
            grant.id.clone(),
            GrantState {
                grant: grant.clone(),
                used: false,
                revoked: false,
            },
        );
        grant
    }

    /// Revokes a grant; later redemptions fail. Unknown ids are ignored.
    pub fn revoke(&self, id: &str) {
        if let Some(state) = self.lock().get_mut(id) {
            state.revoked = true;
        }
    }

    /// Checks and consumes a grant: known, not revoked, not expired, for this digest (or, for
    /// a workspace-scoped grant, this workspace and tool), not used before (once-scoped only).
    pub fn redeem(
        &self,
        grant: &Grant,
        digest: &ApprovalDigest,
        workspace: &str,
        tool: &str,
    ) -> Result<(), GrantRefusal> {
        let mut grants = self.lock();
        let state = grants.get_mut(&grant.id).ok_or(GrantRefusal::Unknown)?;
        // Trust the ledger's copy, never the caller's: a grant value could have been altered.
        let held = &state.grant;
        if state.revoked {
            return Err(GrantRefusal::Revoked);
        }
        if self.clock.now_ms() >= held.expires_at_ms {
            return Err(GrantRefusal::Expired);
        }
        match held.scope {
            GrantScope::Once => {
                if held.digest != *digest {
                    return Err(GrantRefusal::Mismatch);
                }
                if state.used {
                    return Err(GrantRefusal::Used);
                }
                state.used = true;
            }
            GrantScope::WorkspaceAction => {
                if held.workspace != workspace || held.tool != tool {
                    return Err(GrantRefusal::Mismatch);
                }
            }
        }
        Ok(())
    }

    /// A standing workspace-scoped grant for `tool` in `workspace`.
    pub fn standing(&self, workspace: &str, tool: &str) -> Option<Grant> {
        let now = self.clock.now_ms();
        self.lock()
            .values()
            .find(|s| {
                s.grant.scope == GrantScope::WorkspaceAction
                    && !s.revoked
                    && s.grant.expires_at_ms > now
                    && s.grant.workspace == workspace
                    && s.grant.tool == tool
            })
            .map(|s| s.grant.clone())
    }

    /// The workspace-scoped grants still standing (not revoked, not expired), oldest first, so
    /// a person can see what they allowed and revoke it.
    pub fn standing_grants(&self) -> Vec<Grant> {
        let now = self.clock.now_ms();
        let mut standing: Vec<Grant> = self
            .lock()
            .values()
            .filter(|s| {
                s.grant.scope == GrantScope::WorkspaceAction
                    && !s.revoked
                    && s.grant.expires_at_ms > now
            })
            .map(|s| s.grant.clone())
            .collect();
        standing.sort_by(|a, b| a.expires_at_ms.cmp(&b.expires_at_ms).then(a.id.cmp(&b.id)));
        standing
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, GrantState>> {
        // A poisoned lock means a panic elsewhere mid-update; the map itself stays consistent
        // (every update is a single insert or field store), so keep using it.
        self.grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Default)]
    struct TestClock(AtomicU64);
    impl Clock for TestClock {
        fn now_ms(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
    }

    fn request(args: Value, scope_allowed: GrantScope) -> ApprovalRequest {
        ApprovalRequest {
            digest: ApprovalDigest::compute("edit", "1.0", &args, "ws", &[], &[]),
            tool: "edit".into(),
            version: "1.0".into(),
            effect: EffectClass::LocalWrite,
            surface: Surface::Chat,
            actor: "a".into(),
            workspace: "ws".into(),
            arguments: args,
            resources: vec![],
            preview: None,
            scope_allowed,
            policies: vec![],
            approval_mode: ApprovalMode::Policy,
            call_id: String::new(),
            cancelled: Arc::default(),
        }
    }

    #[test]
    fn once_grants_are_single_use_bound_and_expiring() {
        let clock = Arc::new(TestClock::default());
        let ledger = GrantLedger::new(clock.clone());
        let req = request(json!({"a": 1}), GrantScope::Once);
        let grant = ledger.issue(&req, GrantScope::WorkspaceAction, Duration::from_secs(60));
        assert_eq!(
            grant.scope,
            GrantScope::Once,
            "scope is capped by the request"
        );
        let other = request(json!({"a": 2}), GrantScope::Once);
        assert_eq!(
            ledger.redeem(&grant, &other.digest, "ws", "edit"),
            Err(GrantRefusal::Mismatch)
        );
        assert_eq!(ledger.redeem(&grant, &req.digest, "ws", "edit"), Ok(()));
        assert_eq!(
            ledger.redeem(&grant, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Used)
        );

        let late = ledger.issue(&req, GrantScope::Once, Duration::from_secs(60));
        clock.0.store(60_000, Ordering::Relaxed);
        assert_eq!(
            ledger.redeem(&late, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Expired)
        );

        let revoked = ledger.issue(&req, GrantScope::Once, Duration::from_secs(60));
        ledger.revoke(&revoked.id);
        assert_eq!(
            ledger.redeem(&revoked, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Revoked)
        );
    }

    #[test]
    fn altered_grant_values_are_not_trusted() {
        let ledger = GrantLedger::new(Arc::new(TestClock::default()));
        let req = request(json!({"a": 1}), GrantScope::Once);
        let mut grant = ledger.issue(&req, GrantScope::Once, Duration::from_secs(60));
        let other = request(json!({"a": 2}), GrantScope::Once);
        grant.digest = other.digest.clone();
        assert_eq!(
            ledger.redeem(&grant, &other.digest, "ws", "edit"),
            Err(GrantRefusal::Mismatch)
        );
        grant.id = "grant-forged".into();
        assert_eq!(
            ledger.redeem(&grant, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Unknown)
        );
    }

    #[test]
    fn workspace_grants_stand_for_their_tool_and_workspace_only() {
        let clock = Arc::new(TestClock::default());
        let ledger = GrantLedger::new(clock.clone());
        let req = request(json!({"a": 1}), GrantScope::WorkspaceAction);
        let grant = ledger.issue(&req, GrantScope::WorkspaceAction, Duration::from_secs(60));
        let next = request(json!({"a": 2}), GrantScope::WorkspaceAction);
        assert_eq!(ledger.standing("ws", "edit"), Some(grant.clone()));
        assert_eq!(ledger.standing_grants(), vec![grant.clone()]);
        let once = ledger.issue(
            &request(json!({"a": 3}), GrantScope::Once),
            GrantScope::Once,
            Duration::from_secs(60),
        );
        assert!(
            !ledger.standing_grants().contains(&once),
            "once grants never stand"
        );
        assert_eq!(ledger.standing("other", "edit"), None);
        assert_eq!(ledger.standing("ws", "write"), None);
        assert_eq!(ledger.redeem(&grant, &next.digest, "ws", "edit"), Ok(()));
        assert_eq!(ledger.redeem(&grant, &next.digest, "ws", "edit"), Ok(()));
        assert_eq!(
            ledger.redeem(&grant, &next.digest, "other", "edit"),
            Err(GrantRefusal::Mismatch)
        );
        clock.0.store(60_000, Ordering::Relaxed);
        assert_eq!(ledger.standing("ws", "edit"), None);
        assert_eq!(ledger.standing_grants(), vec![]);
    }

    #[test]
    fn revoked_grants_no_longer_stand() {
        let ledger = GrantLedger::new(Arc::new(TestClock::default()));
        let req = request(json!({"a": 1}), GrantScope::WorkspaceAction);
        let grant = ledger.issue(&req, GrantScope::WorkspaceAction, Duration::from_secs(60));
        ledger.revoke(&grant.id);
        assert_eq!(ledger.standing_grants(), vec![]);
        assert_eq!(ledger.standing("ws", "edit"), None);
    }
}
