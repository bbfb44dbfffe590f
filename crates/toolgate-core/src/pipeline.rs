//! The eight stages as consuming functions over proof-carrying values.
//!
//! Each stage takes the previous stage's value by move and returns the next one or a
//! [`Stopped`] (a [`Rejection`] plus the evidence gathered so far). [`Authorized`] has only
//! private fields and no public constructor, and only [`Pipeline::execute`] accepts it: by
//! value, so one proof runs once, and running the executor of the tool the proof was issued
//! for, never one a caller names. That step redeems the grant, guards against a panicking
//! tool, describes the result and records it, all in one, so nothing executes off the record.
//!
//! [`Executor::execute`] takes a [`Call`], which only that step can make; a type outside this
//! crate can implement the trait but cannot call it. A tool cannot run unless stages 1–6 have
//! passed — a compile-time fact, in the manner of rustls's handshake states.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::approval::{
    ApprovalBroker, ApprovalDigest, ApprovalRequest, ApprovalResponse, Grant, GrantRefusal,
    GrantScope,
};
use crate::canonical::{Digest, canonical_json, json_len, sha256_digest};
use crate::invocation::{Invocation, NormalizeBounds, RawCall, Surface, normalize};
use crate::notice::{Notice, NoticeSink, Notices};
use crate::outcome::{Evidence, Outcome, Status, ToolError, ToolOutput};
use crate::policy::{NetworkRequest, PolicyContext, PolicyEngine};
use crate::record::Recorder;
use crate::redact::{redact_string, redact_value};
use crate::registry::{ApprovalMode, EffectClass, Limits, Registry, Tool};
use crate::rejection::{RejectCode, Rejection, Stage};
use crate::sensitive::Sensitivity;

/// The owner of a tool: checks what the schema cannot, names what a call touches, and runs
/// authorized calls.
pub trait Executor: Send + Sync + std::fmt::Debug {
    /// Stage 3, after the schema passed: semantic checks (paths inside the workspace, regexes
    /// that compile, sensible ranges). Every problem, not just the first.
    fn check(&self, _arguments: &Map<String, Value>) -> Vec<crate::rejection::FieldError> {
        Vec::new()
    }

    /// Stage 4: the resources a call touches and, where the arguments make it more
    /// consequential than the entry says, a stricter effect class.
    fn classify(&self, _arguments: &Map<String, Value>) -> Classification {
        Classification::default()
    }

    /// Stage 7: do it, within `call.limits()`, watching `cx` for cancellation. Only the
    /// pipeline can call this: nothing outside this crate can make a [`Call`].
    fn execute(&self, call: &Call<'_>, cx: &ExecContext) -> Result<ToolOutput, ToolError>;
}

/// What stage 4 learned about a call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// A stricter effect class than the entry's; a laxer one is ignored.
    pub effect: Option<EffectClass>,
    /// Resources touched, as `kind:value` (`path:src/lib.rs`).
    pub resources: Vec<String>,
    /// Workspace-relative paths touched; policies see these as `context.paths`.
    pub paths: Vec<String>,
    /// Digests of files as they are before the call, bound into approvals.
    pub preimages: Vec<(String, Digest)>,
    /// What a person should see before approving (a diff, an argv).
    pub preview: Option<String>,
}

/// Identifies the workspace a pipeline serves, by a digest of its root, so that evidence and
/// policies never carry an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkspaceId {
    digest: String,
}

impl WorkspaceId {
    pub fn new(root: &str) -> Self {
        WorkspaceId {
            digest: sha256_digest(root.as_bytes()).to_string(),
        }
    }

    pub fn digest(&self) -> &str {
        &self.digest
    }
}

/// A fresh call id: 64 random bits fixed for this process, then a counter, so ids are unique
/// within a process without coordination and across processes with overwhelming probability.
fn new_call_id() -> String {
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::sync::atomic::AtomicU64;
    // std seeds `RandomState` from the operating system's randomness; hashing nothing with it
    // yields a random word without this crate doing I/O of its own.
    static PROCESS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    });
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}-{n}", *PROCESS)
}

/// Cancellation, deadline, sensitive paths and where to report progress, for one execution.
#[derive(Debug, Clone)]
pub struct ExecContext {
    cancelled: Arc<AtomicBool>,
    deadline: Instant,
    sensitivity: Arc<Sensitivity>,
    notices: Option<Arc<Notices>>,
}

impl ExecContext {
    /// A context that ends after `timeout` or when `cancelled` is set, knowing only the fixed
    /// sensitive kinds until [`ExecContext::with_sensitivity`] says more.
    pub fn new(timeout: Duration, cancelled: Arc<AtomicBool>) -> Self {
        ExecContext {
            cancelled,
            deadline: Instant::now() + timeout,
            sensitivity: Arc::default(),
            notices: None,
        }
    }

    /// The same context, passing what the executor reports to `sink` (see [`Notice`]).
    #[must_use]
    pub fn with_notices(mut self, sink: NoticeSink) -> Self {
        self.notices = Some(Arc::new(Notices::new(sink)));
        self
    }

    /// Reports `notice` to the client that made the call, redacted, unless nobody listens or
    /// the call already reported its share this second; whether it was passed on.
    pub fn notify(&self, notice: Notice) -> bool {
        self.notices
            .as_ref()
            .is_some_and(|notices| notices.send(notice))
    }

    /// The same context with `sensitivity`. [`Pipeline::execute`] sets its own, so that what a
    /// tool that enumerates the workspace withholds is what stage 4 tagged for the policy.
    #[must_use]
    pub fn with_sensitivity(mut self, sensitivity: Arc<Sensitivity>) -> Self {
        self.sensitivity = sensitivity;
        self
    }

    /// The sensitive paths of the workspace: what `list_dir`, `search_text` and the git tools
    /// must not show (see [`Sensitivity::visibility`]).
    pub fn sensitivity(&self) -> &Arc<Sensitivity> {
        &self.sensitivity
    }

    /// Whether the caller gave up or the deadline passed.
    pub fn should_stop(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed) || Instant::now() >= self.deadline
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }
}

/// Replaces secrets in everything a rejection says; the number replaced.
fn redact_rejection(rejection: &mut Rejection) -> usize {
    redact_string(&mut rejection.message)
        + rejection.hint.as_mut().map_or(0, redact_string)
        + rejection
            .details
            .iter_mut()
            .map(|detail| {
                redact_string(&mut detail.message) + detail.hint.as_mut().map_or(0, redact_string)
            })
            .sum::<usize>()
}

/// Evidence gathered as a call moves through the stages.
#[derive(Debug, Clone)]
struct Trace {
    started: Instant,
    durations: [Option<Duration>; 8],
    tool: String,
    call_id: String,
    request_id: Option<String>,
    surface: Surface,
    actor: String,
    profile: String,
    resolved: Option<Arc<Tool>>,
    argument_names: Vec<String>,
    effect: Option<EffectClass>,
    resources: Vec<String>,
    policies: Vec<String>,
    approval_id: Option<String>,
    arguments: Option<Value>,
}

impl Trace {
    /// Adds the time since `since` to `stage`.
    fn record(&mut self, stage: Stage, since: Instant) {
        if let Some(slot) = self.durations.get_mut(stage as usize) {
            *slot = Some(slot.unwrap_or_default() + since.elapsed());
        }
    }
}

/// A call stopped by a stage, with what was known when it stopped.
#[derive(Debug)]
pub struct Stopped {
    pub rejection: Rejection,
    trace: Box<Trace>,
}

/// After stage 1: a well-formed invocation, not yet matched to any tool.
#[derive(Debug)]
pub struct Normalized {
    invocation: Invocation,
    trace: Box<Trace>,
}

impl Normalized {
    pub fn invocation(&self) -> &Invocation {
        &self.invocation
    }
}

/// After stage 2: the registry entry the call will use, fixed for the rest of the call even if
/// the registry is replaced meanwhile.
#[derive(Debug)]
pub struct Resolved {
    invocation: Invocation,
    tool: Arc<Tool>,
    trace: Box<Trace>,
}

/// After stage 3.
#[derive(Debug)]
pub struct Validated {
    invocation: Invocation,
    tool: Arc<Tool>,
    arguments: Value,
    trace: Box<Trace>,
}

/// After stage 4.
#[derive(Debug)]
pub struct Classified {
    invocation: Invocation,
    tool: Arc<Tool>,
    arguments: Value,
    effect: EffectClass,
    classification: Classification,
    /// The kinds of sensitive file the call's paths touch.
    sensitive: Vec<&'static str>,
    trace: Box<Trace>,
}

/// After stage 5: the policy allows the call, perhaps only with approval.
#[derive(Debug)]
pub struct Permitted {
    invocation: Invocation,
    tool: Arc<Tool>,
    arguments: Value,
    effect: EffectClass,
    classification: Classification,
    approval_required: bool,
    trace: Box<Trace>,
}

impl Permitted {
    /// Whether stage 6 will ask a person.
    pub fn approval_required(&self) -> bool {
        self.approval_required
    }
}

/// After stage 6: the proof that a call may run. It cannot be built, cloned or altered outside
/// this module, and only [`Pipeline::execute`] redeems it, once.
#[derive(Debug)]
#[must_use = "an authorized call does nothing until `Pipeline::execute` runs and records it"]
pub struct Authorized {
    invocation: Invocation,
    tool: Arc<Tool>,
    arguments: Value,
    effect: EffectClass,
    classification: Classification,
    grant: Option<(Grant, ApprovalDigest)>,
    trace: Box<Trace>,
}

impl Authorized {
    /// The validated arguments object.
    pub fn arguments(&self) -> &Map<String, Value> {
        // INVARIANT: normalize admits only objects and nothing later replaces them.
        static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);
        self.arguments.as_object().unwrap_or(&EMPTY)
    }

    pub fn tool(&self) -> &Tool {
        &self.tool
    }

    pub fn limits(&self) -> &Limits {
        &self.tool.entry.limits
    }

    pub fn effect(&self) -> EffectClass {
        self.effect
    }

    pub fn classification(&self) -> &Classification {
        &self.classification
    }

    pub fn surface(&self) -> Surface {
        self.invocation.surface
    }

    pub fn actor(&self) -> &str {
        &self.invocation.actor
    }

    /// The id of the grant this call will redeem, if it needed approval.
    pub fn approval_id(&self) -> Option<&str> {
        self.grant.as_ref().map(|(grant, _)| grant.id.as_str())
    }
}

/// One authorized call, as its executor sees it while it runs. Only [`Pipeline::execute`]
/// makes one, and it lives no longer than that step, so an executor can neither be called
/// from outside the pipeline nor keep a call to run later.
#[derive(Debug)]
pub struct Call<'a> {
    authorized: &'a Authorized,
}

impl Call<'_> {
    /// The validated arguments object.
    pub fn arguments(&self) -> &Map<String, Value> {
        self.authorized.arguments()
    }

    /// The tool the call was authorized for: the one running.
    pub fn tool(&self) -> &Tool {
        self.authorized.tool()
    }

    pub fn limits(&self) -> &Limits {
        self.authorized.limits()
    }

    pub fn effect(&self) -> EffectClass {
        self.authorized.effect()
    }

    pub fn classification(&self) -> &Classification {
        self.authorized.classification()
    }

    pub fn surface(&self) -> Surface {
        self.authorized.surface()
    }

    pub fn actor(&self) -> &str {
        self.authorized.actor()
    }

    /// The id of the grant this call redeemed, if it needed approval.
    pub fn approval_id(&self) -> Option<&str> {
        self.authorized.approval_id()
    }
}

/// After stage 7: the executor's result, before stage 8 describes and records it.
#[derive(Debug)]
#[must_use = "an execution leaves no record until stage 8 describes it"]
struct Executed {
    result: Result<ToolOutput, ToolError>,
    trace: Box<Trace>,
}

/// One line of `toolgate explain`: what a stage decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StageReport {
    pub stage: Stage,
    /// `pass`, `reject`, `ask` (approval would be requested) or `skip` (not run).
    pub decision: &'static str,
    pub detail: String,
}

/// A caller's further condition on stage 2: given the entry the registry resolved (`None` when
/// the registry refused the call), `Ok` to let the registry's answer stand, or its own
/// rejection. It can turn an entry into a refusal, or say *why* a name is refused (an MCP
/// session answers `unknown_tool` for a tool it never showed rather than reveal that the tool
/// exists in another profile), but it can never make a refused call resolve.
pub type Admit<'a> = dyn Fn(&Invocation, Option<&Arc<Tool>>) -> Result<(), Rejection> + 'a;

/// What to do about a call that needs approval when no one can give it.
const NO_APPROVER_HINT: &str = "it cannot be approved here, so do not retry it; the user can run \
it themselves, or the operator can allow it: `toolgate serve` with its approval console, or a \
policy that permits it without approval";

/// What a transport adds to a run without changing its stages: a further condition on the
/// entry resolved ([`Pipeline::resolve_within`]), and word of when the call starts waiting
/// for a person (with the call's id, which its [`ApprovalRequest`] carries too; never for a
/// call a standing grant covers, nor under a broker that can never grant) and when it starts executing (for progress reports, and to
/// ask a person on another channel).
pub struct RunHooks<'a> {
    pub admit: &'a Admit<'a>,
    pub awaiting_approval: &'a (dyn Fn(&str) + 'a),
    pub executing: &'a (dyn Fn() + 'a),
    /// Where the executor's progress and log notices go (see [`ExecContext::notify`]).
    pub notices: Option<NoticeSink>,
}

impl Default for RunHooks<'_> {
    fn default() -> Self {
        RunHooks {
            admit: &|_, _| Ok(()),
            awaiting_approval: &|_| {},
            executing: &|| {},
            notices: None,
        }
    }
}

impl std::fmt::Debug for RunHooks<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunHooks")
    }
}

/// The pipeline for one workspace.
#[derive(Debug, Clone)]
pub struct Pipeline {
    registry: Arc<Registry>,
    policy: Arc<PolicyEngine>,
    broker: Arc<dyn ApprovalBroker>,
    workspace: WorkspaceId,
    bounds: NormalizeBounds,
    sensitivity: Arc<Sensitivity>,
    recorders: Vec<Arc<dyn Recorder>>,
}

impl Pipeline {
    pub fn new(
        registry: Arc<Registry>,
        policy: Arc<PolicyEngine>,
        broker: Arc<dyn ApprovalBroker>,
        workspace: WorkspaceId,
    ) -> Self {
        Pipeline {
            registry,
            policy,
            broker,
            workspace,
            bounds: NormalizeBounds::default(),
            sensitivity: Arc::default(),
            recorders: Vec::new(),
        }
    }

    /// The same pipeline, also handing every outcome to `recorder` before returning it (see
    /// [`Recorder`]).
    #[must_use]
    pub fn with_recorder(mut self, recorder: Arc<dyn Recorder>) -> Self {
        self.recorders.push(recorder);
        self
    }

    /// The same pipeline, treating `sensitivity`'s configuration paths as sensitive too: in
    /// stage 4, for the policy, and in stage 7, for the tools that enumerate the workspace.
    #[must_use]
    pub fn with_sensitivity(mut self, sensitivity: Sensitivity) -> Self {
        self.sensitivity = Arc::new(sensitivity);
        self
    }

    /// The same pipeline with other normalize bounds.
    #[must_use]
    pub fn with_bounds(mut self, bounds: NormalizeBounds) -> Self {
        self.bounds = bounds;
        self
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every stage, start to finish.
    pub fn run(&self, raw: RawCall) -> Outcome {
        self.run_cancellable(raw, Arc::new(AtomicBool::new(false)))
    }

    /// Every stage, with a flag the caller may set to cancel execution.
    pub fn run_cancellable(&self, raw: RawCall, cancelled: Arc<AtomicBool>) -> Outcome {
        self.run_with(raw, cancelled, &RunHooks::default())
    }

    /// Every stage, with what a transport adds to them (see [`RunHooks`]).
    pub fn run_with(&self, raw: RawCall, cancelled: Arc<AtomicBool>, hooks: &RunHooks) -> Outcome {
        let result = self
            .normalize(raw)
            .and_then(|normalized| self.resolve_within(normalized, hooks.admit))
            .and_then(|resolved| self.validate(resolved))
            .map(|validated| self.classify(validated))
            .and_then(|classified| self.authorize(classified))
            .and_then(|permitted| {
                self.approve_with(permitted, Arc::clone(&cancelled), hooks.awaiting_approval)
            })
            .and_then(|authorized| {
                (hooks.executing)();
                let timeout = Duration::from_millis(authorized.limits().timeout_ms);
                let mut cx = ExecContext::new(timeout, cancelled);
                if let Some(sink) = &hooks.notices {
                    cx = cx.with_notices(Arc::clone(sink));
                }
                self.execute_step(authorized, &cx)
            });
        self.describe(result)
    }

    /// Stages 1–6.
    pub fn authorize_call(&self, raw: RawCall) -> Result<Authorized, Stopped> {
        let invocation = self.normalize(raw)?;
        let resolved = self.resolve(invocation)?;
        let validated = self.validate(resolved)?;
        let classified = self.classify(validated);
        let permitted = self.authorize(classified)?;
        self.approve(permitted)
    }

    /// Stage 1.
    pub fn normalize(&self, raw: RawCall) -> Result<Normalized, Stopped> {
        let started = Instant::now();
        let mut trace = Box::new(Trace {
            started,
            durations: [None; 8],
            tool: crate::invocation::escape(&raw.tool),
            call_id: new_call_id(),
            request_id: raw.request_id.clone(),
            surface: raw.surface,
            actor: crate::invocation::escape(&raw.actor),
            profile: crate::invocation::escape(&raw.profile),
            resolved: None,
            argument_names: Vec::new(),
            effect: None,
            resources: Vec::new(),
            policies: Vec::new(),
            approval_id: None,
            arguments: None,
        });
        let result = normalize(raw, &self.bounds);
        trace.record(Stage::Normalize, started);
        match result {
            Ok(invocation) => {
                trace.tool.clone_from(&invocation.tool);
                Ok(Normalized { invocation, trace })
            }
            Err(rejection) => Err(Stopped { rejection, trace }),
        }
    }

    /// Stage 2.
    pub fn resolve(&self, normalized: Normalized) -> Result<Resolved, Stopped> {
        self.resolve_within(normalized, &|_, _| Ok(()))
    }

    /// Stage 2 with the caller's further condition (see [`Admit`]): an MCP session admits
    /// only the tools it was shown. It can narrow what resolves, never widen it.
    pub fn resolve_within(
        &self,
        normalized: Normalized,
        admit: &Admit<'_>,
    ) -> Result<Resolved, Stopped> {
        let started = Instant::now();
        let Normalized {
            invocation,
            mut trace,
        } = normalized;
        let result = match self.registry.resolve(&invocation) {
            Ok(tool) => admit(&invocation, Some(&tool)).map(|()| tool),
            Err(refused) => Err(admit(&invocation, None).err().unwrap_or(refused)),
        };
        trace.record(Stage::Resolve, started);
        match result {
            Ok(tool) => {
                trace.resolved = Some(Arc::clone(&tool));
                Ok(Resolved {
                    invocation,
                    tool,
                    trace,
                })
            }
            Err(rejection) => Err(Stopped { rejection, trace }),
        }
    }

    /// Stage 3.
    pub fn validate(&self, resolved: Resolved) -> Result<Validated, Stopped> {
        let started = Instant::now();
        let Resolved {
            mut invocation,
            tool,
            mut trace,
        } = resolved;
        let arguments = Value::Object(std::mem::take(&mut invocation.arguments));
        let mut errors = tool.schema.check(&arguments);
        if errors.is_empty()
            && let Value::Object(map) = &arguments
        {
            errors = tool.executor.check(map);
        }
        trace.record(Stage::Validate, started);
        if !errors.is_empty() {
            return Err(Stopped {
                rejection: Rejection::from_field_errors(errors),
                trace,
            });
        }
        if let Value::Object(map) = &arguments {
            trace.argument_names = map.keys().cloned().collect();
            trace.argument_names.sort_unstable();
        }
        Ok(Validated {
            invocation,
            tool,
            arguments,
            trace,
        })
    }

    /// Stage 4. Classification cannot reject: it only learns.
    pub fn classify(&self, validated: Validated) -> Classified {
        let started = Instant::now();
        let Validated {
            invocation,
            tool,
            arguments,
            mut trace,
        } = validated;
        let classification = match &arguments {
            Value::Object(map) => tool.executor.classify(map),
            _ => Classification::default(),
        };
        // Arguments may make a call more consequential than its entry, never less.
        let effect = classification
            .effect
            .map_or(tool.entry.effect(), |refined| {
                refined.max(tool.entry.effect())
            });
        let sensitive = self.sensitivity.kinds(&classification.paths);
        trace.effect = Some(effect);
        // Evidence is shown to the caller: a link's target in toolgate's state directory is
        // named as the directory. The approval still binds, and shows, the resources whole.
        trace.resources = classification
            .resources
            .iter()
            .map(|resource| self.sensitivity.evidence_resource(resource).into_owned())
            .collect();
        trace.record(Stage::Classify, started);
        Classified {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            sensitive,
            trace,
        }
    }

    /// Stage 5.
    pub fn authorize(&self, classified: Classified) -> Result<Permitted, Stopped> {
        let started = Instant::now();
        let Classified {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            sensitive,
            mut trace,
        } = classified;
        if !tool.entry.surfaces.contains(&invocation.surface) {
            trace.record(Stage::Authorize, started);
            // Validated arguments go into the evidence of every later rejection, as a digest.
            trace.arguments = Some(arguments);
            let allowed: Vec<&str> = tool.entry.surfaces.iter().map(|s| s.as_str()).collect();
            return Err(Stopped {
                rejection: Rejection::new(
                    RejectCode::SurfaceNotAllowed,
                    format!(
                        "tool `{}` may not be called from the {} surface",
                        tool.entry.name, invocation.surface
                    ),
                )
                .with_hint(Some(format!("allowed surfaces: {}", allowed.join(", ")))),
                trace,
            });
        }
        let decision = self.policy.decide(
            &tool,
            &PolicyContext {
                effect,
                actor: &invocation.actor,
                surface: invocation.surface,
                profile: &invocation.profile,
                workspace: self.workspace.digest(),
                paths: &classification.paths,
                sensitive: &sensitive,
                network: NetworkRequest::from_resources(&classification.resources),
            },
        );
        trace.policies.clone_from(&decision.policies);
        trace.record(Stage::Authorize, started);
        if !decision.allow {
            let message = if !decision.errors.is_empty() {
                format!(
                    "policy evaluation failed, so the call is denied: {}",
                    decision.errors.join("; ")
                )
            } else if decision.policies.is_empty() {
                format!(
                    "no policy permits `{}` ({effect}) for actor `{}` on the {} surface",
                    tool.entry.name, invocation.actor, invocation.surface
                )
            } else {
                let named: Vec<String> = decision
                    .policies
                    .iter()
                    .map(|p| match self.policy.reason(p) {
                        Some(reason) => format!("`{p}` ({reason})"),
                        None => format!("`{p}`"),
                    })
                    .collect();
                format!(
                    "`{}` is forbidden by policy {}",
                    tool.entry.name,
                    named.join(", ")
                )
            };
            let mut rejection = Rejection::new(RejectCode::PolicyDenied, message).with_hint(Some(
                "this is the operator's decision; do not retry the same call".into(),
            ));
            rejection.policies = decision.policies;
            trace.arguments = Some(arguments);
            return Err(Stopped { rejection, trace });
        }
        let approval_required =
            decision.approval_required || tool.entry.approval == ApprovalMode::EachCall;
        Ok(Permitted {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            approval_required,
            trace,
        })
    }

    /// Stage 6.
    pub fn approve(&self, permitted: Permitted) -> Result<Authorized, Stopped> {
        self.approve_cancellable(permitted, Arc::new(AtomicBool::new(false)))
    }

    /// Stage 6, with a flag the caller may set to stop waiting for a person.
    pub fn approve_cancellable(
        &self,
        permitted: Permitted,
        cancelled: Arc<AtomicBool>,
    ) -> Result<Authorized, Stopped> {
        self.approve_with(permitted, cancelled, &|_| {})
    }

    /// Stage 6, calling `awaiting` with the call's id when a person is about to be asked
    /// (not when a standing grant covers the call, nor when the broker can never grant).
    fn approve_with(
        &self,
        permitted: Permitted,
        cancelled: Arc<AtomicBool>,
        awaiting: &dyn Fn(&str),
    ) -> Result<Authorized, Stopped> {
        let started = Instant::now();
        let Permitted {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            approval_required,
            mut trace,
        } = permitted;
        let grant = if approval_required {
            let mut request =
                self.approval_request(&invocation, &tool, &arguments, effect, &classification);
            request.policies.clone_from(&trace.policies);
            request.call_id.clone_from(&trace.call_id);
            request.cancelled = cancelled;
            match self.obtain_grant(request, &tool, awaiting) {
                Ok(grant) => {
                    trace.approval_id = Some(grant.0.id.clone());
                    Some(grant)
                }
                Err(rejection) => {
                    trace.record(Stage::Approve, started);
                    trace.arguments = Some(arguments);
                    return Err(Stopped { rejection, trace });
                }
            }
        } else {
            None
        };
        trace.record(Stage::Approve, started);
        Ok(Authorized {
            invocation,
            tool,
            arguments,
            effect,
            classification,
            grant,
            trace,
        })
    }

    /// A standing workspace grant where one applies, else a person's answer. `awaiting` is
    /// told only when a person can be asked: a broker without a ledger never grants, so its
    /// answer is a refusal, and a transport told of a wait would promise one that never comes.
    fn obtain_grant(
        &self,
        request: ApprovalRequest,
        tool: &Tool,
        awaiting: &dyn Fn(&str),
    ) -> Result<(Grant, ApprovalDigest), Rejection> {
        if request.scope_allowed == GrantScope::WorkspaceAction
            && let Some(grant) = self
                .broker
                .standing(self.workspace.digest(), &tool.entry.name)
        {
            return Ok((grant, request.digest));
        }
        let approver = self.broker.ledger().is_some();
        // A full console answers at once: that is not a wait either.
        if approver && self.broker.has_room() {
            awaiting(&request.call_id);
        }
        match self.broker.request(&request) {
            ApprovalResponse::Grant(grant) => Ok((grant, request.digest)),
            ApprovalResponse::Deny { reason } => Err(Rejection::new(
                RejectCode::ApprovalDenied,
                format!("the user refused this call: {reason}"),
            )
            .with_hint(Some(
                "do not retry the same call; ask the user what they want instead".into(),
            ))),
            ApprovalResponse::Expired { reason } => Err(Rejection::new(
                RejectCode::ApprovalExpired,
                format!("`{}` waited for approval, and {reason}", tool.entry.name),
            )
            .with_hint(Some(
                "ask the user whether they still want it before trying again".into(),
            ))),
            // Said so that a model neither retries nor sends the user to a console that is
            // not there, and the operator reading along learns what would allow it.
            ApprovalResponse::Unanswered { reason } if !approver => Err(Rejection::new(
                RejectCode::ApprovalRequired,
                format!(
                    "`{}` needs a person's approval, and nobody can be asked: {reason}",
                    tool.entry.name
                ),
            )
            .with_hint(Some(NO_APPROVER_HINT.into()))),
            ApprovalResponse::Unanswered { reason } => Err(Rejection::new(
                RejectCode::ApprovalRequired,
                format!(
                    "`{}` needs a person's approval and none could be obtained: {reason}",
                    tool.entry.name
                ),
            )
            .with_hint(Some(
                "ask the user to approve it in toolgate's approval console, or to run it themselves"
                    .into(),
            ))),
        }
    }

    fn approval_request(
        &self,
        invocation: &Invocation,
        tool: &Tool,
        arguments: &Value,
        effect: EffectClass,
        classification: &Classification,
    ) -> ApprovalRequest {
        let version = tool.entry.version.to_string();
        let digest = ApprovalDigest::compute(
            &tool.entry.name,
            &version,
            arguments,
            self.workspace.digest(),
            &classification.resources,
            &classification.preimages,
        );
        // Only file edits may be remembered for the workspace; everything else asks each time.
        let scope_allowed =
            if effect == EffectClass::LocalWrite && tool.entry.approval == ApprovalMode::Policy {
                GrantScope::WorkspaceAction
            } else {
                GrantScope::Once
            };
        ApprovalRequest {
            digest,
            tool: tool.entry.name.clone(),
            version,
            effect,
            surface: invocation.surface,
            actor: invocation.actor.clone(),
            workspace: self.workspace.digest().to_owned(),
            arguments: arguments.clone(),
            resources: classification.resources.clone(),
            preview: classification.preview.clone(),
            scope_allowed,
            policies: Vec::new(),
            approval_mode: tool.entry.approval,
            call_id: String::new(),
            cancelled: Arc::default(),
        }
    }

    /// Stages 7 and 8, as one step: re-checks the grant, runs the executor of the tool the
    /// proof was issued for, then describes the result and records it. The proof is consumed,
    /// so it runs once; there is no way to run it without a record.
    #[must_use = "the outcome is the call's only result, and may be a refusal"]
    pub fn execute(&self, authorized: Authorized, cx: &ExecContext) -> Outcome {
        self.describe(self.execute_step(authorized, cx))
    }

    /// Stage 7: re-checks the grant, then hands the call to its own tool's executor.
    fn execute_step(&self, authorized: Authorized, cx: &ExecContext) -> Result<Executed, Stopped> {
        let started = Instant::now();
        if let Some((grant, digest)) = &authorized.grant {
            // Re-checked here, not only when granted: expiry, revocation and the digest can
            // all change between the two.
            let redeemed = self.broker.redeem(
                grant,
                digest,
                self.workspace.digest(),
                &authorized.tool.entry.name,
            );
            if let Err(refusal) = redeemed {
                let mut trace = authorized.trace;
                // Redeeming is the last act of approval: its time counts there, and no
                // execution is recorded for a call that never ran.
                trace.record(Stage::Approve, started);
                trace.arguments = Some(authorized.arguments);
                let code = match refusal {
                    GrantRefusal::Expired => RejectCode::ApprovalExpired,
                    _ => RejectCode::ApprovalInvalid,
                };
                return Err(Stopped {
                    rejection: Rejection::new(code, format!("{refusal}; the call did not run"))
                        .with_hint(Some("request the call again to get a new approval".into())),
                    trace,
                });
            }
        }
        // The tool withholds what this pipeline's policy input calls sensitive, whatever
        // context the caller built.
        let cx = cx.clone().with_sensitivity(Arc::clone(&self.sensitivity));
        // A tool that panics has still run, perhaps halfway: its outcome must reach stage 8
        // (and the record) like any failure, not vanish with the thread that ran it.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = Call {
                authorized: &authorized,
            };
            authorized.tool.executor.execute(&call, &cx)
        }))
        .unwrap_or_else(|payload| Err(panicked(payload.as_ref())));
        let mut trace = authorized.trace;
        trace.arguments = Some(authorized.arguments);
        trace.record(Stage::Execute, started);
        Ok(Executed { result, trace })
    }

    /// Stage 8: the outcome, redacted and bounded, with evidence, once it is recorded.
    fn describe(&self, result: Result<Executed, Stopped>) -> Outcome {
        let started = Instant::now();
        let (mut status, mut rejection, mut output, mut error, mut trace, truncated, mut unknowns) =
            match result {
                Err(Stopped { rejection, trace }) => (
                    Status::Rejected,
                    Some(rejection),
                    None,
                    None,
                    trace,
                    false,
                    Vec::new(),
                ),
                Ok(Executed {
                    result: Ok(output),
                    trace,
                }) => (
                    Status::Completed,
                    None,
                    Some(output.value),
                    None,
                    trace,
                    output.truncated,
                    output.unknowns,
                ),
                Ok(Executed {
                    result: Err(error),
                    trace,
                }) => {
                    let unknowns = error.unknowns.clone();
                    (
                        Status::Failed,
                        None,
                        None,
                        Some(error),
                        trace,
                        false,
                        unknowns,
                    )
                }
            };
        // Resources are evidence, and evidence is kept: a secret-shaped path is hidden too.
        let mut resources = std::mem::take(&mut trace.resources);
        // What a refusal or failure says can quote the tool or the arguments: it is output
        // too, for the model, the console and the audit log alike.
        let redactions = output.as_mut().map_or(0, redact_value)
            + error.as_mut().map_or(0, |e| redact_string(&mut e.message))
            + rejection.as_mut().map_or(0, redact_rejection)
            + unknowns.iter_mut().map(redact_string).sum::<usize>()
            + resources.iter_mut().map(redact_string).sum::<usize>();
        let output_bytes = output.as_ref().map_or(0, json_len);
        let limit = trace
            .resolved
            .as_ref()
            .map_or(usize::MAX, |t| t.entry.limits.max_output_bytes);
        if output_bytes > limit {
            // The executor broke its limit; fail closed rather than pass it on.
            output = None;
            status = Status::Failed;
            error = Some(ToolError::new(
                "output_too_large",
                format!("the tool returned {output_bytes} bytes; the limit is {limit}"),
            ));
        }
        if truncated {
            unknowns.push("output was truncated to stay within limits".to_owned());
        }
        trace.record(Stage::Describe, started);
        let argument_digest = trace
            .arguments
            .as_ref()
            .map(|a| sha256_digest(canonical_json(a).as_bytes()));
        let evidence = Evidence {
            call_id: std::mem::take(&mut trace.call_id),
            request_id: trace.request_id.clone(),
            tool: trace.tool.clone(),
            version: trace.resolved.as_ref().map(|t| t.entry.version.to_string()),
            descriptor_digest: trace.resolved.as_ref().map(|t| t.digest.clone()),
            surface: trace.surface,
            actor: trace.actor.clone(),
            profile: trace.profile.clone(),
            workspace: self.workspace.digest().to_owned(),
            effect: trace.effect,
            argument_names: std::mem::take(&mut trace.argument_names),
            argument_digest,
            resources,
            approval_id: trace.approval_id.take(),
            policies: std::mem::take(&mut trace.policies),
            durations_ns: Stage::ALL
                .iter()
                .zip(trace.durations.iter())
                .filter_map(|(stage, d)| d.map(|d| (stage.as_str().to_owned(), nanos(d))))
                .collect::<BTreeMap<_, _>>(),
            total_ns: nanos(trace.started.elapsed()),
            output_bytes: if output.is_some() { output_bytes } else { 0 },
            truncated,
            redactions,
        };
        self.recorded(Outcome {
            status,
            rejection,
            output,
            error,
            evidence,
            unknowns,
        })
    }

    /// `outcome`, once every recorder has kept it; else a failure that carries no output.
    fn recorded(&self, mut outcome: Outcome) -> Outcome {
        for recorder in &self.recorders {
            if let Err(error) = recorder.record(&outcome) {
                outcome.status = Status::Failed;
                outcome.output = None;
                outcome.evidence.output_bytes = 0;
                outcome.unknowns.push(match outcome.rejection.take() {
                    Some(rejection) => format!("the call was rejected ({})", rejection.code),
                    None => "the tool ran; its result is withheld".to_owned(),
                });
                outcome.error = Some(ToolError::new("audit_unavailable", error.to_string()));
                return outcome;
            }
        }
        outcome
    }

    /// Stages 1–6 without asking anyone and without running anything: what each stage
    /// decided, for `toolgate explain`.
    pub fn explain(&self, raw: RawCall) -> Vec<StageReport> {
        let mut reports = Vec::new();
        let mut report = |stage, decision, detail: String| {
            reports.push(StageReport {
                stage,
                decision,
                detail,
            });
        };
        let stopped = |reports: &mut dyn FnMut(Stage, &'static str, String), s: Stopped| {
            reports(s.rejection.stage, "reject", s.rejection.to_string());
        };
        let normalized = match self.normalize(raw) {
            Ok(n) => n,
            Err(s) => {
                stopped(&mut report, s);
                return reports;
            }
        };
        let invocation = &normalized.invocation;
        report(
            Stage::Normalize,
            "pass",
            format!(
                "tool `{}`, {} argument(s)",
                invocation.tool,
                invocation.arguments.len()
            ),
        );
        let resolved = match self.resolve(normalized) {
            Ok(r) => r,
            Err(s) => {
                stopped(&mut report, s);
                return reports;
            }
        };
        report(
            Stage::Resolve,
            "pass",
            format!(
                "entry `{}` version {}, descriptor {}",
                resolved.tool.entry.name, resolved.tool.entry.version, resolved.tool.digest
            ),
        );
        let validated = match self.validate(resolved) {
            Ok(v) => v,
            Err(s) => {
                stopped(&mut report, s);
                return reports;
            }
        };
        report(
            Stage::Validate,
            "pass",
            format!("arguments {}", validated.trace.argument_names.join(", ")),
        );
        let classified = self.classify(validated);
        report(
            Stage::Classify,
            "pass",
            format!(
                "effect {}; resources: {}{}",
                classified.effect,
                if classified.classification.resources.is_empty() {
                    "none".to_owned()
                } else {
                    classified.classification.resources.join(", ")
                },
                if classified.sensitive.is_empty() {
                    String::new()
                } else {
                    format!("; sensitive: {}", classified.sensitive.join(", "))
                }
            ),
        );
        let permitted = match self.authorize(classified) {
            Ok(p) => p,
            Err(s) => {
                stopped(&mut report, s);
                return reports;
            }
        };
        report(
            Stage::Authorize,
            "pass",
            format!("permitted by {}", permitted.trace.policies.join(", ")),
        );
        if permitted.approval_required {
            // What the person would be shown: the diff of a write, the argv of a command.
            let preview = permitted
                .classification
                .preview
                .as_deref()
                .map_or_else(String::new, |p| format!(", seeing:\n{p}"));
            report(
                Stage::Approve,
                "ask",
                format!(
                    "a person must approve this `{}` call{preview}",
                    permitted.effect
                ),
            );
        } else {
            report(Stage::Approve, "pass", "no approval needed".to_owned());
        }
        report(Stage::Execute, "skip", "explain never executes".to_owned());
        reports
    }
}

/// The failure of an executor that panicked, with what its panic said.
fn panicked(payload: &(dyn std::any::Any + Send)) -> ToolError {
    let said = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let mut error = ToolError::new(
        "tool_panicked",
        format!("the tool stopped unexpectedly: {said}"),
    );
    error
        .unknowns
        .push("the tool may have done part of its work before it stopped".to_owned());
    error
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::approval::HeadlessBroker;
    use crate::registry::{Descriptor, RegistryBuilder, ToolEntry};
    use crate::sensitive::Visibility;

    /// Remembers what its context said of a path in toolgate's state directory.
    #[derive(Debug, Default)]
    struct Looks(Mutex<Option<Visibility>>);

    impl Executor for Looks {
        fn classify(&self, _: &Map<String, Value>) -> Classification {
            // As a link to the token would be classified: the link, and where it leads.
            let paths = vec!["link".to_owned(), "state/toolgate/console.token".to_owned()];
            Classification {
                resources: paths.iter().map(|p| format!("path:{p}")).collect(),
                paths,
                ..Classification::default()
            }
        }

        fn execute(&self, _: &Call<'_>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
            *self.0.lock().unwrap() =
                Some(cx.sensitivity().visibility("state/toolgate/console.token"));
            Ok(ToolOutput::new(Value::Null))
        }
    }

    #[test]
    fn the_executor_is_handed_the_pipelines_sensitivity() {
        let looks = Arc::new(Looks::default());
        let mut builder = RegistryBuilder::new();
        let mut entry = ToolEntry::new("walk", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let schema = serde_json::json!({"type": "object"});
        builder
            .register(Descriptor::new("walk", "t", schema), entry, looks.clone())
            .unwrap();
        let registry = builder.build().unwrap();
        let mut policy = PolicyEngine::default_policy().unwrap();
        policy.prepare(&registry).unwrap();
        let pipeline = Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/ws"),
        );
        let seen = |pipeline: &Pipeline| {
            let outcome = pipeline.run(RawCall::text("walk", "{}", Surface::Chat));
            (outcome, looks.0.lock().unwrap().take())
        };
        let (outcome, visibility) = seen(&pipeline);
        assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
        assert_eq!(visibility, Some(Visibility::Visible));
        let pipeline =
            pipeline.with_sensitivity(Sensitivity::default().with_config_dir("state/toolgate"));
        let (outcome, visibility) = seen(&pipeline);
        // The policy refuses the path; nothing ran, and the evidence names no file in there.
        assert_eq!(visibility, None);
        assert_eq!(
            outcome.rejection.map(|r| r.policies),
            Some(vec!["sensitive-toolgate-config".to_owned()])
        );
        assert_eq!(
            outcome.evidence.resources,
            ["path:link", "path:state/toolgate/…"]
        );

        // A context the caller built is given the pipeline's sensitivity too (here with a
        // policy that lets the call through).
        let mut permissive = PolicyEngine::from_sources(&[(
            "operator",
            "@id(\"all\") permit (principal, action, resource);",
        )])
        .unwrap();
        permissive.prepare(pipeline.registry()).unwrap();
        let pipeline = Pipeline::new(
            Arc::clone(pipeline.registry()),
            Arc::new(permissive),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/ws"),
        )
        .with_sensitivity(Sensitivity::default().with_config_dir("state/toolgate"));
        let authorized = pipeline
            .authorize_call(RawCall::text("walk", "{}", Surface::Chat))
            .unwrap();
        let cx = ExecContext::new(Duration::from_secs(5), Arc::default());
        assert_eq!(
            cx.sensitivity().visibility("state/toolgate/console.token"),
            Visibility::Visible
        );
        let _ = pipeline.execute(authorized, &cx);
        assert_eq!(looks.0.lock().unwrap().take(), Some(Visibility::Hidden));
    }

    #[test]
    fn a_broker_that_never_grants_is_not_waited_for() {
        let mut builder = RegistryBuilder::new();
        let mut entry = ToolEntry::new("change", "test");
        entry.effect = Some(EffectClass::LocalWrite);
        entry.approval = ApprovalMode::EachCall;
        let schema = serde_json::json!({"type": "object"});
        builder
            .register(
                Descriptor::new("change", "t", schema),
                entry,
                Arc::new(Looks::default()),
            )
            .unwrap();
        let registry = builder.build().unwrap();
        let mut policy = PolicyEngine::default_policy().unwrap();
        policy.prepare(&registry).unwrap();
        let pipeline = Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/ws"),
        );
        let waited = Mutex::new(0);
        let hooks = RunHooks {
            awaiting_approval: &|_| *waited.lock().unwrap() += 1,
            ..RunHooks::default()
        };
        let outcome = pipeline.run_with(
            RawCall::text("change", "{}", Surface::Chat),
            Arc::default(),
            &hooks,
        );
        let rejection = outcome.rejection.unwrap();
        assert_eq!(rejection.code, RejectCode::ApprovalRequired);
        assert_eq!(*waited.lock().unwrap(), 0, "nobody was said to be asked");
        let hint = rejection.hint.unwrap();
        assert!(hint.contains("cannot be approved here"), "{hint}");
        assert!(
            !hint.contains("approve it in toolgate's approval console"),
            "{hint}"
        );
    }
}
