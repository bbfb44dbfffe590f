//! Stage 6: a person's consent, bound to the exact operation.
//!
//! An [`ApprovalRequest`] carries an [`ApprovalDigest`] over (tool, version, canonical
//! arguments, workspace, resolved resources, pre-image digests). A broker asks a person and
//! answers with an [`ApprovalDecision`]; it never holds a grant. The pipeline owns the one
//! [`GrantLedger`]: it issues a [`Grant`] bound to that digest from the decision, narrowed to
//! the scope the request allows, and redeems it immediately before the executor runs, so a
//! grant that expired, was revoked or was issued for other inputs stops the call there, and
//! no broker can make a call run twice or for other inputs.
//!
//! The model cannot approve anything: no tool grants approval, and grants live in this
//! process's state, not in any message a model can write.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::cancel::Cancel;
use crate::canonical::{Digest, canonical_json, sha256_digest};
use crate::invocation::Surface;
use crate::pipeline::Resource;
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
        resources: &[Resource],
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

    /// The digest bound also to the identities of the hooks that let the call through: an
    /// approval of the call as these hooks judged it, not as changed ones would.
    #[must_use]
    pub fn with_hooks(self, hooks: &[String]) -> Self {
        if hooks.is_empty() {
            return self;
        }
        let bound = json!({"digest": self.0, "hooks": hooks});
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

/// A pre_call hook that asked for a person about a call, and the reason it gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HookAsk {
    pub name: String,
    pub reason: Option<String>,
}

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
    /// What the call touches; each is shown, and bound into the digest, as `kind:value`.
    pub resources: Vec<Resource>,
    /// A human-readable preview: a diff, a resolved argv.
    pub preview: Option<String>,
    /// Whether a workspace-scoped grant may be offered.
    pub scope_allowed: GrantScope,
    /// The policies, by `@id`, that permitted the call subject to approval.
    pub policies: Vec<String>,
    /// The tool entry's approval mode: `each_call` asks whatever the policies say.
    pub approval_mode: ApprovalMode,
    /// The enforcing pre_call hooks that asked for a person, in the order they ran: what a
    /// person is shown first, since the call may be one no policy asks about.
    pub hook_asks: Vec<HookAsk>,
    /// What the asking client says it is, and its session (see [`crate::RawCall::client`]):
    /// shown to the person as the client's claim, and bound into nothing, the digest least of
    /// all.
    pub client: Option<String>,
    /// The id of the call waiting (the outcome's `call_id`), so a transport that asks a person
    /// on a channel of its own can name the request it answers.
    pub call_id: String,
    /// Given when the caller gives up on the call; a broker still waiting must then stop
    /// waiting and answer [`ApprovalDecision::Unanswered`] (see [`Cancel::on_cancel`] to be
    /// woken by it).
    #[serde(skip)]
    pub cancel: Cancel,
}

/// What a person decided about one request, as a broker reports it. A decision is not a
/// grant: the pipeline issues the grant from it, bound to the request's digest, so nothing a
/// broker returns can make a call run twice or for other inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalDecision {
    /// Allow this exact call, once.
    AllowOnce,
    /// Allow calls of this tool in this workspace until the grant expires or is revoked.
    /// Where the request offers only once ([`ApprovalRequest::scope_allowed`]), the pipeline
    /// grants once.
    AllowWorkspace,
    /// A person refused, saying why.
    Reject { reason: String },
    /// Nobody could be asked (headless, no terminal, console unreachable or full, call
    /// cancelled).
    Unanswered { reason: String },
    /// A person could be asked but did not answer in time.
    Expired { reason: String },
}

/// How long the grants the pipeline issues from a decision stay redeemable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantTimes {
    /// A once grant is redeemed immediately after the decision, so this only bounds one
    /// that was never used.
    pub once: Duration,
    /// How long an "allow for this workspace" grant stands unless revoked first.
    pub standing: Duration,
}

impl Default for GrantTimes {
    fn default() -> Self {
        GrantTimes {
            once: Duration::from_secs(60),
            standing: Duration::from_secs(8 * 60 * 60),
        }
    }
}

/// Asks a person. Implementations must never approve on their own, and cannot grant: they
/// decide, and the pipeline's [`GrantLedger`] issues and redeems.
pub trait ApprovalBroker: Send + Sync + std::fmt::Debug {
    /// Asks for a decision on `request`, blocking until there is one or none can be had.
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision;

    /// Whether this broker can ever allow a call. One that cannot (nobody is there to ask) is
    /// not waited for: its refusal says so, and a transport told of a wait would promise the
    /// model one that never comes.
    fn can_allow(&self) -> bool {
        true
    }

    /// Whether a request made now would wait for a person, rather than be answered at once
    /// because the broker has no room for another; a transport told of a wait that never
    /// comes would promise the model one.
    fn has_room(&self) -> bool {
        true
    }
}

/// The default broker: nobody is there to ask, so every approval is refused.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeadlessBroker;

impl ApprovalBroker for HeadlessBroker {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Unanswered {
            reason: "no approval channel is configured".to_owned(),
        }
    }

    fn can_allow(&self) -> bool {
        false
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

/// Why a workspace grant was not issued, or a revocation not kept: the [`GrantStore`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct GrantNotKept(pub String);

/// Keeps the standing workspace grants beyond this process (the approval console's grants
/// file). A person who allows a tool for the workspace is told it lasts across restarts, so a
/// grant that cannot be kept is not given.
pub trait GrantStore: Send + Sync + std::fmt::Debug {
    /// Replaces what is kept with `standing`: every workspace grant standing now.
    fn keep(&self, standing: &[Grant]) -> Result<(), String>;
}

#[derive(Debug)]
struct GrantState {
    grant: Grant,
    used: bool,
    revoked: bool,
}

/// Issues, remembers and redeems grants. The pipeline holds the one it issues from and
/// redeems against; the approval console holds the same one to list and revoke standing
/// grants.
#[derive(Debug)]
pub struct GrantLedger {
    grants: Mutex<HashMap<String, GrantState>>,
    next: AtomicU64,
    clock: Arc<dyn Clock>,
    nonce: u64,
    store: Option<Arc<dyn GrantStore>>,
}

impl Default for GrantLedger {
    fn default() -> Self {
        GrantLedger::new(Arc::new(SystemClock))
    }
}

impl GrantLedger {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        GrantLedger {
            grants: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            nonce: clock.now_ms(),
            clock,
            store: None,
        }
    }

    /// The same ledger, keeping its standing grants in `store` whenever they change.
    #[must_use]
    pub fn with_store(mut self, store: Arc<dyn GrantStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Issues a grant for `request` from a person's `decision` to allow it, for `times`: a
    /// workspace decision is narrowed to once where the request does not allow more. A
    /// workspace grant is kept in the store before it is given; `Err` when it cannot be.
    pub fn grant(
        &self,
        request: &ApprovalRequest,
        decision: GrantScope,
        times: GrantTimes,
    ) -> Result<Grant, GrantNotKept> {
        let scope = narrowed(decision, request.scope_allowed);
        let ttl = match scope {
            GrantScope::Once => times.once,
            GrantScope::WorkspaceAction => times.standing,
        };
        let grant = self.make(
            request.digest.clone(),
            scope,
            &request.workspace,
            &request.tool,
            ttl,
        );
        let mut grants = self.lock();
        grants.insert(
            grant.id.clone(),
            GrantState {
                grant: grant.clone(),
                used: false,
                revoked: false,
            },
        );
        if scope == GrantScope::WorkspaceAction
            && let Err(e) = self.keep(&grants)
        {
            grants.remove(&grant.id);
            return Err(e);
        }
        Ok(grant)
    }

    /// Restores a workspace grant kept by the store in an earlier run, for `ttl` from now.
    /// It is not written back: the store already holds it.
    pub fn restore(&self, workspace: &str, tool: &str, ttl: Duration) -> Grant {
        let arguments = Value::Object(serde_json::Map::new());
        // A workspace grant is checked against its workspace and tool only; the digest
        // stands for those, so that it can never match a once grant's.
        let digest = ApprovalDigest::compute(tool, "", &arguments, workspace, &[], &[]);
        let grant = self.make(digest, GrantScope::WorkspaceAction, workspace, tool, ttl);
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

    fn make(
        &self,
        digest: ApprovalDigest,
        scope: GrantScope,
        workspace: &str,
        tool: &str,
        ttl: Duration,
    ) -> Grant {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Grant {
            id: format!("grant-{:x}-{n}", self.nonce),
            digest,
            scope,
            workspace: workspace.to_owned(),
            tool: tool.to_owned(),
            expires_at_ms: self.clock.now_ms().saturating_add(ttl_ms),
        }
    }

    /// Hands the standing grants in `grants` to the store, under the ledger's lock, so that a
    /// slower writer with an older list cannot bring back a grant revoked meanwhile.
    fn keep(&self, grants: &HashMap<String, GrantState>) -> Result<(), GrantNotKept> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        store
            .keep(&standing_in(grants, self.clock.now_ms()))
            .map_err(GrantNotKept)
    }

    /// Revokes a grant; later redemptions fail. A standing workspace grant's revocation is
    /// kept in the store. `false` when no grant with that id is still in force; the
    /// revocation holds in this process even when the store fails.
    pub fn revoke(&self, id: &str) -> Result<bool, GrantNotKept> {
        let now = self.clock.now_ms();
        let mut grants = self.lock();
        let Some(state) = grants.get_mut(id) else {
            return Ok(false);
        };
        if state.revoked || state.used || state.grant.expires_at_ms <= now {
            return Ok(false);
        }
        state.revoked = true;
        if state.grant.scope == GrantScope::WorkspaceAction {
            self.keep(&grants)?;
        }
        Ok(true)
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
            .find(|s| stands(s, now) && s.grant.workspace == workspace && s.grant.tool == tool)
            .map(|s| s.grant.clone())
    }

    /// The workspace-scoped grants still standing (not revoked, not expired), oldest first, so
    /// a person can see what they allowed and revoke it.
    pub fn standing_grants(&self) -> Vec<Grant> {
        standing_in(&self.lock(), self.clock.now_ms())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, GrantState>> {
        // A poisoned lock means a panic elsewhere mid-update; the map itself stays consistent
        // (every update is a single insert or field store), so keep using it.
        self.grants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The scope a person's decision grants, given what the request allowed.
fn narrowed(decision: GrantScope, allowed: GrantScope) -> GrantScope {
    match (decision, allowed) {
        (GrantScope::WorkspaceAction, GrantScope::WorkspaceAction) => GrantScope::WorkspaceAction,
        _ => GrantScope::Once,
    }
}

/// Whether `state` is a workspace grant standing at `now`.
fn stands(state: &GrantState, now: u64) -> bool {
    state.grant.scope == GrantScope::WorkspaceAction
        && !state.revoked
        && state.grant.expires_at_ms > now
}

/// The workspace grants standing at `now`, oldest first.
fn standing_in(grants: &HashMap<String, GrantState>, now: u64) -> Vec<Grant> {
    let mut standing: Vec<Grant> = grants
        .values()
        .filter(|s| stands(s, now))
        .map(|s| s.grant.clone())
        .collect();
    standing.sort_by(|a, b| a.expires_at_ms.cmp(&b.expires_at_ms).then(a.id.cmp(&b.id)));
    standing
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
            hook_asks: Vec::new(),
            client: None,
            call_id: String::new(),
            cancel: Cancel::new(),
        }
    }

    /// An approval digest is what a person's answer is bound to, and grants kept on disk name
    /// it: the same call must give the same digest from one release to the next, whether its
    /// resources were strings (the value below was computed then) or typed.
    #[test]
    fn the_approval_digest_of_a_call_does_not_change() {
        let digest = ApprovalDigest::compute(
            "file_write",
            "1.2.0",
            &json!({"path": "src/lib.rs", "content": "fn main() {}\n", "n": 1.0}),
            "sha256:ws",
            &[
                Resource::Path("src/lib.rs".to_owned()),
                Resource::Network("crates.io".to_owned()),
            ],
            &[("src/lib.rs".to_owned(), sha256_digest(b"before"))],
        );
        assert_eq!(
            digest.0.as_str(),
            "sha256:fa89dda63d502f988e30b75db7c1ae0e2150cd9789f7f1a961baf0de567e122b"
        );
    }

    fn times() -> GrantTimes {
        GrantTimes {
            once: Duration::from_secs(60),
            standing: Duration::from_secs(60),
        }
    }

    /// Remembers what it was asked to keep, or fails when told to.
    #[derive(Debug, Default)]
    struct Kept {
        lists: Mutex<Vec<Vec<String>>>,
        fail: std::sync::atomic::AtomicBool,
    }

    impl GrantStore for Kept {
        fn keep(&self, standing: &[Grant]) -> Result<(), String> {
            if self.fail.load(Ordering::Relaxed) {
                return Err("the disk is full".into());
            }
            let tools = standing.iter().map(|g| g.tool.clone()).collect();
            self.lists.lock().unwrap().push(tools);
            Ok(())
        }
    }

    #[test]
    fn once_grants_are_single_use_bound_and_expiring() {
        let clock = Arc::new(TestClock::default());
        let ledger = GrantLedger::new(clock.clone());
        let req = request(json!({"a": 1}), GrantScope::Once);
        let grant = ledger
            .grant(&req, GrantScope::WorkspaceAction, times())
            .unwrap();
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

        let late = ledger.grant(&req, GrantScope::Once, times()).unwrap();
        clock.0.store(60_000, Ordering::Relaxed);
        assert_eq!(
            ledger.redeem(&late, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Expired)
        );

        let revoked = ledger.grant(&req, GrantScope::Once, times()).unwrap();
        assert_eq!(ledger.revoke(&revoked.id), Ok(true));
        assert_eq!(ledger.revoke(&revoked.id), Ok(false), "revoked once");
        assert_eq!(
            ledger.redeem(&revoked, &req.digest, "ws", "edit"),
            Err(GrantRefusal::Revoked)
        );
    }

    #[test]
    fn altered_grant_values_are_not_trusted() {
        let ledger = GrantLedger::new(Arc::new(TestClock::default()));
        let req = request(json!({"a": 1}), GrantScope::Once);
        let mut grant = ledger.grant(&req, GrantScope::Once, times()).unwrap();
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
        let grant = ledger
            .grant(&req, GrantScope::WorkspaceAction, times())
            .unwrap();
        let next = request(json!({"a": 2}), GrantScope::WorkspaceAction);
        assert_eq!(ledger.standing("ws", "edit"), Some(grant.clone()));
        assert_eq!(ledger.standing_grants(), vec![grant.clone()]);
        let once = ledger
            .grant(
                &request(json!({"a": 3}), GrantScope::Once),
                GrantScope::Once,
                times(),
            )
            .unwrap();
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
        let grant = ledger
            .grant(&req, GrantScope::WorkspaceAction, times())
            .unwrap();
        assert_eq!(ledger.revoke(&grant.id), Ok(true));
        assert_eq!(ledger.standing_grants(), vec![]);
        assert_eq!(ledger.standing("ws", "edit"), None);
        assert_eq!(ledger.revoke("grant-unknown"), Ok(false));
    }

    #[test]
    fn the_store_keeps_every_change_of_the_standing_grants_or_nothing_is_granted() {
        let store = Arc::new(Kept::default());
        let ledger = GrantLedger::new(Arc::new(TestClock::default())).with_store(store.clone());
        let req = request(json!({"a": 1}), GrantScope::WorkspaceAction);
        let grant = ledger
            .grant(&req, GrantScope::WorkspaceAction, times())
            .unwrap();
        ledger.grant(&req, GrantScope::Once, times()).unwrap();
        let restored = ledger.restore("ws", "write", Duration::from_secs(30));
        assert_eq!(ledger.standing("ws", "write"), Some(restored));
        assert_eq!(ledger.revoke(&grant.id), Ok(true));
        // Once grants and restored grants are not written; issuing and revoking are.
        assert_eq!(
            *store.lists.lock().unwrap(),
            vec![vec!["edit".to_owned()], vec!["write".to_owned()]]
        );

        store.fail.store(true, Ordering::Relaxed);
        let refused = ledger.grant(&req, GrantScope::WorkspaceAction, times());
        assert_eq!(
            refused,
            Err(GrantNotKept("the disk is full".into())),
            "a grant that cannot be kept is not given"
        );
        assert_eq!(ledger.standing("ws", "edit"), None);
        assert!(ledger.grant(&req, GrantScope::Once, times()).is_ok());
    }
}
