//! The eight stages as consuming functions over proof-carrying values.
//!
//! Each stage takes the previous stage's value by move and returns the next one or a
//! [`Stopped`] (a [`Rejection`] plus the evidence gathered so far). [`Authorized`] has only
//! private fields and no public constructor, and only [`Stages::execute`] accepts it: by
//! value, so one proof runs once, and running the executor of the tool the proof was issued
//! for, never one a caller names. That step redeems the grant, guards against a panicking
//! tool, describes the result and records it, all in one, so nothing executes off the record.
//!
//! [`Executor::execute`] takes a [`Call`] made for that executor's own type, which only that
//! step can make; a type outside this crate can implement the trait but cannot call it, and an
//! executor cannot hand the call it was given to an executor of another type. A tool cannot
//! run unless stages 1–6 have passed — a compile-time fact, in the manner of rustls's
//! handshake states.
//!
//! Outside this crate the stages are reached only through [`Pipeline::enter`], whose stage
//! values are [`Branded`] by a lifetime no other entry shares (as GhostCell and the
//! `generativity` crate brand theirs): handing one pipeline's value to another's next stage
//! does not compile. As a second line, every stage value carries the stamp of the pipeline
//! whose stage 1 began it, and every stage refuses a value of another pipeline at run time
//! (see `approve::foreign`).
//!
//! This module holds the stage values and the pipeline. Each stage is a module of its own, the
//! only issuer of its reject codes: `normalize`, `resolve`, `validate`, `classify`,
//! `authorize`, `approve`, `execute` (stages 7 and 8 fused) and `describe`; `stages` is the one
//! sequence of stages 1–5 that running, authorizing and explaining follow; `explain` the words
//! for what each stage decided.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Map, Value};

use crate::approval::{
    ApprovalBroker, ApprovalDecision, ApprovalDigest, ApprovalRequest, Grant, GrantLedger,
    GrantRefusal, GrantScope, GrantTimes,
};
use crate::cancel::Cancel;
use crate::canonical::{Digest, canonical_json, json_len, sha256_digest};
use crate::invocation::{Invocation, NormalizeBounds, RawCall, Surface};
use crate::notice::{Notice, NoticeSink, Notices};
use crate::outcome::{Evidence, Outcome, ToolError, ToolOutput};
use crate::policy::{NetworkRequest, PolicyContext, PolicyEngine};
use crate::record::Recorder;
use crate::redact::{redact_string, redact_value};
use crate::registry::{ApprovalMode, EffectClass, Limits, Registry, Tool};
use crate::rejection::{RejectCode, Rejection, Stage};
use crate::sensitive::Sensitivity;

mod approve;
mod authorize;
mod classify;
mod describe;
mod execute;
mod explain;
mod hook;
pub(crate) mod normalize;
pub(crate) mod resolve;
mod resource;
mod stages;
mod typed;
mod validate;

pub use execute::{Forward, Forwarding};
pub use hook::{
    HOOK_PROTOCOL, Hook, HookAnswer, HookDecision, HookEvent, HookFailure, HookFailureKind,
    HookInput, HookMode, HookRecord, MAX_HOOK_ANSWER_BYTES,
};
pub use resolve::Shown;
pub use resource::Resource;
pub use typed::{Parsed, Planned, TypedExecutor};

/// The owner of a tool: checks what the schema cannot, names what a call touches, and runs
/// authorized calls.
///
/// Most tools implement [`TypedExecutor`] instead, and so this trait: their arguments are
/// parsed once into their own type and their stage 7 runs the plan their stage 4 made. An
/// executor that implements this trait itself sees its arguments only as the JSON object
/// ([`Call::arguments`]) and has no plan.
pub trait Executor: Send + Sync + std::fmt::Debug + sealed::Dispatch {
    /// Stage 3, after the schema passed: the arguments parsed into the tool's type and
    /// checked. Without a type, the object is all there is: nothing more to check.
    fn parse(&self, _arguments: &Value) -> Result<Parsed, Vec<crate::rejection::FieldError>> {
        Ok(Parsed::untyped())
    }

    /// Stage 4: the plan made from what stage 3 parsed, and what it touches. Without a type
    /// there is no plan, and the call touches nothing stage 4 can name.
    fn plan_call(&self, _parsed: Parsed) -> (Planned, Classification) {
        (Planned::untyped(), Classification::default())
    }

    /// Stage 7: do it, within `call.limits()`, watching `cx` for cancellation. Only the
    /// pipeline can call this: nothing outside this crate can make a [`Call`], and the one an
    /// executor is handed is made for its own type, so it cannot hand it to another's. The
    /// pipeline reaches it through a dispatcher no other code can call or replace.
    fn execute(&self, call: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError>
    where
        Self: Sized;

    /// Whether every call of this tool ends soon, by its own bounds, without waiting on
    /// anything outside the process: a transport may then run a read-only call that needs no
    /// approval where its request arrived, instead of handing it to another thread. The
    /// default is no.
    fn brief(&self) -> bool {
        false
    }

    /// Whether this call of a [brief](Executor::brief) tool, as stage 4 planned it, is brief
    /// too: a tool whose calls are bounded may still have some too large to run where the
    /// request arrived, where they would hold up every other request served there. The
    /// default is what [`Executor::brief`] says.
    fn brief_call(&self, _plan: &Planned) -> bool {
        self.brief()
    }

    /// Whether this tool's work is done by another process, which [`Executor::forward`] sends
    /// the call to without waiting for its answer: a transport with an async runtime may then
    /// run a read-only call that needs no approval there, instead of parking a thread on it.
    /// The default is no.
    fn forwards(&self) -> bool {
        false
    }

    /// Stage 7 for a tool that [forwards](Executor::forwards): begins the call and returns
    /// what resolves to its result once the other process answers, watching `cx` for
    /// cancellation and its deadline. The future may need the transport's runtime (its
    /// timers). Only the pipeline calls this, and only when `forwards` says yes; the default
    /// does nothing and fails the call.
    fn forward(&self, _call: &Call<'_, Self>, _cx: &ExecContext) -> Forwarded
    where
        Self: Sized,
    {
        cannot_forward()
    }
}

/// The one way into an executor's stage 7: implemented for every [`Executor`] here and
/// nowhere else (its trait cannot be named outside this crate), making the [`Call`] for the
/// executor it runs, of its type and at its address.
mod sealed {
    use super::{Authorized, Call, ExecContext, Executor, Forwarded, ToolError, ToolOutput};

    /// A call cleared to run, as only stage 7 hands it to the dispatcher.
    #[derive(Debug)]
    pub struct Handed<'a>(pub(super) &'a Authorized);

    pub trait Dispatch {
        fn dispatch(&self, call: Handed<'_>, cx: &ExecContext) -> Result<ToolOutput, ToolError>;
        fn dispatch_forward(&self, call: Handed<'_>, cx: &ExecContext) -> Forwarded;
    }

    impl<E: Executor> Dispatch for E {
        fn dispatch(&self, call: Handed<'_>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
            self.execute(&Call::of(call.0, self), cx)
        }

        fn dispatch_forward(&self, call: Handed<'_>, cx: &ExecContext) -> Forwarded {
            self.forward(&Call::of(call.0, self), cx)
        }
    }
}

use sealed::Handed;

/// What forwarding a call of a tool that does not forward comes to: a failure, nothing run.
fn cannot_forward() -> Forwarded {
    Box::pin(std::future::ready(Err(ToolError::new(
        crate::outcome::ToolErrorCode::PlanMismatch,
        "this tool cannot be forwarded; it did not run",
    ))))
}

/// The result of a call an executor [forwarded](Executor::forward), to come.
pub type Forwarded = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ToolOutput, ToolError>> + Send + 'static>,
>;

/// What stage 4 learned about a call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// A stricter effect class than the entry's; a laxer one is ignored.
    pub effect: Option<EffectClass>,
    /// Resources touched. Each leaves the process spelled `kind:value` (`path:src/lib.rs`):
    /// policies, approval digests, the audit record and the console all see that spelling.
    pub resources: Vec<Resource>,
    /// Workspace-relative paths touched; policies see these as `context.paths`.
    pub paths: Vec<String>,
    /// Digests of files as they are before the call, bound into approvals.
    pub preimages: Vec<(String, Digest)>,
    /// What a person should see before approving (a diff, an argv).
    pub preview: Option<String>,
    /// Workspace paths that run later beyond the table of [`crate::runs_later`]: those a
    /// repository's git configuration names (`core.hooksPath`, `include.path`, a filter's
    /// program, …), as the tool read them. A write of one, or of a path in one, is tagged
    /// `git` in `context.runs_later` like a write of `.git/config`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub named_runs_later: Vec<String>,
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
    use std::fmt::Write as _;
    use std::hash::{BuildHasher as _, Hasher as _};
    use std::sync::atomic::AtomicU64;
    // std seeds `RandomState` from the operating system's randomness; hashing nothing with it
    // yields a random word without this crate doing I/O of its own.
    static PROCESS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        let word = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        format!("{word:016x}-")
    });
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut id = String::with_capacity(PROCESS.len() + 20);
    id.push_str(&PROCESS);
    // Writing to a String cannot fail.
    let _ = write!(id, "{n}");
    id
}

/// Cancellation, deadline, sensitive paths and where to report progress, for one execution.
#[derive(Debug, Clone)]
pub struct ExecContext {
    cancel: Cancel,
    deadline: Instant,
    sensitivity: Arc<Sensitivity>,
    notices: Option<Arc<Notices>>,
}

impl ExecContext {
    /// A context that ends after `timeout` or when `cancel` is given, knowing only the fixed
    /// sensitive kinds until [`ExecContext::with_sensitivity`] says more.
    pub fn new(timeout: Duration, cancel: Cancel) -> Self {
        ExecContext {
            cancel,
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

    /// The same context with `sensitivity`. [`Stages::execute`] sets its own, so that what a
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
        self.cancel.is_cancelled() || Instant::now() >= self.deadline
    }

    /// The caller's cancellation, for a tool that waits on something else (a child process,
    /// an answer) and must be woken when the caller gives up (see [`Cancel::on_cancel`]).
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The same context, ending after `timeout` at the latest.
    fn within(mut self, timeout: Duration) -> Self {
        self.deadline = self.deadline.min(Instant::now() + timeout);
        self
    }
}

/// Evidence gathered as a call moves through the stages, and the plan stage 4 made, which
/// travels with it to stage 7 because every later stage value carries the trace.
#[derive(Debug)]
struct Trace {
    /// The pipeline whose stage 1 began the call: only it may run the call (see
    /// [`Stages::execute`]).
    pipeline: u64,
    started: Instant,
    durations: [Option<Duration>; Stage::ALL.len()],
    tool: String,
    call_id: String,
    request_id: Option<String>,
    /// The client's claim of what it is, cut (see [`crate::invocation::MAX_CLIENT_CHARS`]).
    client: Option<String>,
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
    plan: Planned,
    /// Where stages 6–8 run: written by stage 4, kept on a worker by stage 5 when a person
    /// must be asked.
    placement: Placement,
    /// What each hook the call ran answered, for the record.
    hooks: Vec<HookRecord>,
    /// Whether a pre_call hook asked for a person.
    hook_asks: bool,
    /// The identities of the enforcing pre_call hooks that let the call through, bound into
    /// its approval.
    hooks_bound: Vec<String>,
}

/// Where the rest of a call, stages 6 to 8, runs: data stage 4 writes beside the plan, which
/// a transport reads to choose a thread, never a code path ([`Stages::finish`] is the one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Where its request arrived: a read nobody must approve, whose executor is
    /// [brief](Executor::brief) for this call too ([`Executor::brief_call`]).
    Arrival,
    /// On a thread that may wait: for a person, or for the tool's work.
    Worker,
    /// Begun where its request arrived and awaited without a thread: a read nobody must
    /// approve, whose executor [forwards](Executor::forwards) it to another process.
    Forwarded,
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

/// After stage 3: the arguments, as the object the schema accepted and as the tool parsed it.
#[derive(Debug)]
pub struct Validated {
    invocation: Invocation,
    tool: Arc<Tool>,
    arguments: Value,
    parsed: Parsed,
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
    /// The kinds of file that runs later the call writes.
    runs_later: Vec<&'static str>,
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

    /// Where the rest of the call runs, as stages 4 and 5 placed it.
    pub fn placement(&self) -> Placement {
        self.trace.placement
    }

    /// Whether the rest of the call ends soon, run where its request arrived
    /// ([`Placement::Arrival`]).
    pub fn ends_soon(&self) -> bool {
        self.placement() == Placement::Arrival
    }
}

/// The brand of one [entry](Pipeline::enter) into a pipeline: a lifetime no other entry
/// shares, invariant so that the compiler never takes two brands for one.
#[derive(Clone, Copy)]
struct Brand<'id>(std::marker::PhantomData<fn(&'id ()) -> &'id ()>);

impl Brand<'_> {
    const NEW: Self = Brand(std::marker::PhantomData);
}

/// A stage value of one entry into a pipeline (see [`Pipeline::enter`]): only the stages of
/// that entry take it, and it cannot leave the entry. Read it as the value it holds.
pub struct Branded<'id, T> {
    value: T,
    _brand: Brand<'id>,
}

impl<T> Branded<'_, T> {
    fn new(value: T) -> Self {
        Branded {
            value,
            _brand: Brand::NEW,
        }
    }
}

impl<T> std::ops::Deref for Branded<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Branded<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.value.fmt(f)
    }
}

/// The stages of one pipeline, as one [entry](Pipeline::enter) reaches them: each takes only
/// the values this entry's stages made.
#[derive(Clone, Copy)]
pub struct Stages<'id> {
    pipeline: &'id Pipeline,
    _brand: Brand<'id>,
}

impl std::fmt::Debug for Stages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Stages")
    }
}

impl<'id> Stages<'id> {
    fn brand<T>(self, value: T) -> Branded<'id, T> {
        Branded::new(value)
    }

    /// Stage 1.
    pub fn normalize(self, raw: RawCall) -> Result<Branded<'id, Normalized>, Stopped> {
        self.pipeline.normalize(raw).map(|v| self.brand(v))
    }

    /// Stage 2, against the whole registry.
    pub fn resolve(
        self,
        normalized: Branded<'id, Normalized>,
    ) -> Result<Branded<'id, Resolved>, Stopped> {
        self.resolve_within(normalized, None)
    }

    /// Stage 2, judging by what the caller was `shown` (see [`Shown`]).
    pub fn resolve_within(
        self,
        normalized: Branded<'id, Normalized>,
        shown: Option<&Shown>,
    ) -> Result<Branded<'id, Resolved>, Stopped> {
        let resolved = self.pipeline.resolve_within(normalized.value, shown);
        resolved.map(|v| self.brand(v))
    }

    /// Stage 3.
    pub fn validate(
        self,
        resolved: Branded<'id, Resolved>,
    ) -> Result<Branded<'id, Validated>, Stopped> {
        let validated = self.pipeline.validate(resolved.value);
        validated.map(|v| self.brand(v))
    }

    /// Stage 4.
    pub fn classify(self, validated: Branded<'id, Validated>) -> Branded<'id, Classified> {
        self.brand(self.pipeline.classify(validated.value))
    }

    /// Stage 5 (after the pre_call hooks).
    pub fn authorize(
        self,
        classified: Branded<'id, Classified>,
    ) -> Result<Branded<'id, Permitted>, Stopped> {
        let permitted = self.pipeline.pre_call(classified.value);
        let permitted = permitted.and_then(|c| self.pipeline.authorize(c));
        permitted.map(|v| self.brand(v))
    }

    /// Stage 6.
    pub fn approve(
        self,
        permitted: Branded<'id, Permitted>,
    ) -> Result<Branded<'id, Authorized>, Stopped> {
        self.approve_cancellable(permitted, Cancel::new())
    }

    /// Stage 6, with a signal the caller may give to stop waiting for a person.
    pub fn approve_cancellable(
        self,
        permitted: Branded<'id, Permitted>,
        cancel: Cancel,
    ) -> Result<Branded<'id, Authorized>, Stopped> {
        let authorized = self.pipeline.approve_with(permitted.value, cancel, &|_| {});
        authorized.map(|v| self.brand(v))
    }

    /// Stages 1–6.
    pub fn authorize_call(self, raw: RawCall) -> Result<Branded<'id, Authorized>, Stopped> {
        self.pipeline.authorize_call(raw).map(|v| self.brand(v))
    }

    /// Stages 7 and 8, as one step: re-checks the grant, runs the executor of the tool the
    /// proof was issued for, within the tool's own time limit whatever deadline `cx` carries,
    /// then describes the result and records it. The proof is consumed, so it runs once.
    #[must_use = "the outcome is the call's only result, and may be a refusal"]
    pub fn execute(self, authorized: Branded<'id, Authorized>, cx: &ExecContext) -> Outcome {
        self.pipeline.execute(authorized.value, cx)
    }

    /// Stages 1–5, stage 2 judging by what the caller was `shown`; a call they stop is
    /// described and recorded here. With [`Stages::finish`], this is [`Pipeline::run_with`]
    /// in two steps, for a transport that runs the first where the request arrived and the
    /// second where [`Permitted::placement`] says.
    pub fn decide(self, raw: RawCall, shown: Option<&Shown>) -> Decided<'id> {
        self.pipeline.decide(raw, shown)
    }

    /// Stages 6–8 of a call this entry's stages 1–5 permitted, told to `watch` (whose `shown`
    /// stage 2 has already judged by): approve, execute, describe, the one path for every
    /// kind of executor. A call [placed](Placement) anywhere but [`Placement::Forwarded`]
    /// runs here to its end; a forwarded one comes back cleared to run, for the caller to
    /// begin and await or to run where it is ([`Forward`]). A transport chooses the thread by
    /// the placement; the path is this one.
    pub fn finish(
        self,
        permitted: Branded<'id, Permitted>,
        cancel: Cancel,
        watch: &Watch,
    ) -> Finished {
        self.pipeline.finish(permitted, cancel, watch)
    }

    /// Stages 6–8 of a call this entry permitted, to run later on another thread: the call
    /// and its own pipeline, so that no other pipeline can finish it.
    pub fn rest(self, permitted: Branded<'id, Permitted>) -> Rest {
        Rest {
            pipeline: self.pipeline.same(),
            permitted: permitted.value,
        }
    }
}

/// Stages 6–8 of one permitted call, held with the pipeline that permitted it (see
/// [`Stages::rest`]).
#[derive(Debug)]
#[must_use = "a permitted call does nothing until it is finished"]
pub struct Rest {
    pipeline: Pipeline,
    permitted: Permitted,
}

impl Rest {
    /// Where the rest of the call runs, as stages 4 and 5 placed it.
    pub fn placement(&self) -> Placement {
        self.permitted.placement()
    }

    /// Stages 6–8, as [`Stages::finish`] runs them.
    pub fn finish(self, cancel: Cancel, watch: &Watch) -> Finished {
        let Rest {
            pipeline,
            permitted,
        } = self;
        pipeline.finish(Branded::<'static, _>::new(permitted), cancel, watch)
    }
}

/// What stages 6–8 came to (see [`Stages::finish`]).
#[derive(Debug)]
#[must_use = "a forward does nothing until it is begun or run, and is recorded as given up"]
pub enum Finished {
    /// Ended, described and recorded.
    Ended(Outcome),
    /// Cleared to be forwarded: begin it, or run it here.
    Forward(Forward),
}

/// What stages 1–5 decided of a call (see [`Stages::decide`]).
#[derive(Debug)]
#[must_use = "a permitted call does nothing until `Stages::finish` runs and records it"]
pub enum Decided<'id> {
    /// Stopped before stage 6, and recorded.
    Ended(Outcome),
    /// Through the policy: [`Stages::finish`] runs the rest.
    Permitted(Branded<'id, Permitted>),
}

/// After stage 6: the proof that a call may run. It cannot be built, cloned or altered outside
/// this module, and only [`Stages::execute`] redeems it, once.
#[derive(Debug)]
#[must_use = "an authorized call does nothing until `Stages::execute` runs and records it"]
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
        // INVARIANT: normalize accepts only objects and nothing later replaces them.
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

/// One authorized call, as its executor sees it while it runs. Only stage 7 makes one, for
/// the executor of type `E` it runs, and it lives no longer than that step, so an executor can
/// neither be called from outside the pipeline, nor keep a call to run later, nor hand it to an
/// executor of another type (a compile error); a [typed executor](TypedExecutor) handed a call
/// made for another of its own type fails it unrun.
pub struct Call<'a, E: ?Sized> {
    authorized: &'a Authorized,
    /// The address of the executor the call is for.
    runs: usize,
    of: std::marker::PhantomData<fn(&E)>,
}

impl<E: ?Sized> std::fmt::Debug for Call<'_, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("authorized", self.authorized)
            .finish_non_exhaustive()
    }
}

impl<'a, E: ?Sized> Call<'a, E> {
    /// The call `authorized` as `executor` is handed it.
    fn of(authorized: &'a Authorized, executor: &E) -> Self {
        Call {
            authorized,
            runs: std::ptr::from_ref(executor).cast::<()>() as usize,
            of: std::marker::PhantomData,
        }
    }

    /// Whether `executor` is the one this call was made for.
    pub(crate) fn is_for(&self, executor: &E) -> bool {
        std::ptr::from_ref(executor).cast::<()>() as usize == self.runs
    }
}

impl<E: ?Sized> Call<'_, E> {
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

    /// The plan stage 4 made for this call.
    pub(crate) fn plan(&self) -> &Planned {
        &self.authorized.trace.plan
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

/// What the transport watching a call adds to its run without changing its stages: the tools
/// its caller was shown, which stage 2 judges by ([`Stages::resolve_within`]), and where to say
/// when the call starts waiting for a person (with the call's id, which its
/// [`ApprovalRequest`] carries too; never for a call a standing grant covers, nor under a
/// broker that can never grant), when it starts executing (for progress reports, and to ask a
/// person on another channel), and what its executor reports.
pub struct Watch<'a> {
    pub shown: Option<&'a Shown>,
    pub awaiting_approval: &'a (dyn Fn(&str) + 'a),
    pub executing: &'a (dyn Fn() + 'a),
    /// Where the executor's progress and log notices go (see [`ExecContext::notify`]).
    pub notices: Option<NoticeSink>,
}

impl Default for Watch<'_> {
    fn default() -> Self {
        Watch {
            shown: None,
            awaiting_approval: &|_| {},
            executing: &|| {},
            notices: None,
        }
    }
}

impl std::fmt::Debug for Watch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

/// The pipeline for one workspace.
///
/// A clone, or the pipeline a builder method returns, is another pipeline, with an id of its
/// own: a stage value one pipeline began is refused by every stage of any other.
#[derive(Debug)]
pub struct Pipeline {
    registry: Arc<Registry>,
    policy: Arc<PolicyEngine>,
    broker: Arc<dyn ApprovalBroker>,
    workspace: WorkspaceId,
    bounds: NormalizeBounds,
    sensitivity: Arc<Sensitivity>,
    recorders: Vec<Arc<dyn Recorder>>,
    /// The one ledger grants are issued from and redeemed against; brokers only decide.
    grants: Arc<GrantLedger>,
    grant_times: GrantTimes,
    /// The operator's hooks, in the order they run.
    hooks: Arc<[Arc<dyn Hook>]>,
    /// Which pipeline of this process this is, stamped on every call it begins.
    id: u64,
}

/// Numbers each pipeline of the process, so that a call's stage values carry the pipeline
/// that checked them.
static PIPELINES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The stamp of a value no pipeline may take on: one a stage of another pipeline touched.
const NO_PIPELINE: u64 = 0;

fn next_pipeline() -> u64 {
    PIPELINES.fetch_add(1, Ordering::Relaxed)
}

impl Clone for Pipeline {
    fn clone(&self) -> Self {
        Pipeline {
            id: next_pipeline(),
            ..self.same()
        }
    }
}

impl Pipeline {
    /// This pipeline again, under its own id: what describes a call this pipeline forwarded.
    fn same(&self) -> Pipeline {
        Pipeline {
            registry: Arc::clone(&self.registry),
            policy: Arc::clone(&self.policy),
            broker: Arc::clone(&self.broker),
            workspace: self.workspace.clone(),
            bounds: self.bounds,
            sensitivity: Arc::clone(&self.sensitivity),
            recorders: self.recorders.clone(),
            grants: Arc::clone(&self.grants),
            grant_times: self.grant_times,
            hooks: Arc::clone(&self.hooks),
            id: self.id,
        }
    }
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
            grants: Arc::default(),
            grant_times: GrantTimes::default(),
            hooks: Arc::new([]),
            id: next_pipeline(),
        }
    }

    /// The same pipeline, changed by `change`, under an id of its own.
    fn changed(mut self, change: impl FnOnce(&mut Pipeline)) -> Self {
        change(&mut self);
        self.id = next_pipeline();
        self
    }

    /// The same pipeline, issuing and redeeming grants in `grants`: a ledger shared with the
    /// approval console, which lists and revokes standing grants, and with the pipelines that
    /// replace this one, so that what a person allowed stands across them.
    #[must_use]
    pub fn with_grants(self, grants: Arc<GrantLedger>) -> Self {
        self.changed(|p| p.grants = grants)
    }

    /// The same pipeline, issuing grants for `times`.
    #[must_use]
    pub fn with_grant_times(self, times: GrantTimes) -> Self {
        self.changed(|p| p.grant_times = times)
    }

    /// The ledger this pipeline issues grants from and redeems them against.
    pub fn grants(&self) -> &Arc<GrantLedger> {
        &self.grants
    }

    /// The same pipeline, also handing every outcome to `recorder` before returning it (see
    /// [`Recorder`]).
    #[must_use]
    pub fn with_recorder(self, recorder: Arc<dyn Recorder>) -> Self {
        self.changed(|p| p.recorders.push(recorder))
    }

    /// The same pipeline, treating `sensitivity`'s configuration paths as sensitive too: in
    /// stage 4, for the policy, and in stage 7, for the tools that enumerate the workspace.
    #[must_use]
    pub fn with_sensitivity(self, sensitivity: Sensitivity) -> Self {
        self.changed(|p| p.sensitivity = Arc::new(sensitivity))
    }

    /// The same pipeline, running `hooks` on every call of the tools each names, in this
    /// order (see [`Hook`]).
    #[must_use]
    pub fn with_hooks(self, hooks: Vec<Arc<dyn Hook>>) -> Self {
        self.changed(|p| p.hooks = hooks.into())
    }

    /// The same pipeline with other normalize bounds.
    #[must_use]
    pub fn with_bounds(self, bounds: NormalizeBounds) -> Self {
        self.changed(|p| p.bounds = bounds)
    }

    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Every stage, start to finish.
    pub fn run(&self, raw: RawCall) -> Outcome {
        self.run_cancellable(raw, Cancel::new())
    }

    /// Every stage, with a signal the caller may give to stop waiting or executing.
    pub fn run_cancellable(&self, raw: RawCall, cancel: Cancel) -> Outcome {
        self.run_with(raw, cancel, &Watch::default())
    }

    /// Every stage, with what a transport adds to them (see [`Watch`]).
    pub fn run_with(&self, raw: RawCall, cancel: Cancel, watch: &Watch) -> Outcome {
        match self.decide(raw, watch.shown) {
            Decided::Ended(outcome) => outcome,
            Decided::Permitted(permitted) => match self.finish(permitted, cancel, watch) {
                Finished::Ended(outcome) => outcome,
                Finished::Forward(forward) => forward.run_here(),
            },
        }
    }

    /// The stages of this pipeline, one at a time, for `f`: every value they make is
    /// [`Branded`] by this entry, and only this entry's stages take it, so a value of one
    /// pipeline handed to another's stage does not compile, and none leaves `f`.
    ///
    /// ```
    /// # use toolgate_core::*;
    /// fn ask(pipeline: &Pipeline, raw: RawCall) -> Outcome {
    ///     pipeline.enter(|stages| match stages.decide(raw, None) {
    ///         Decided::Ended(outcome) => outcome,
    ///         Decided::Permitted(permitted) => {
    ///             match stages.finish(permitted, Cancel::new(), &Watch::default()) {
    ///                 Finished::Ended(outcome) => outcome,
    ///                 Finished::Forward(forward) => forward.run_here(),
    ///             }
    ///         }
    ///     })
    /// }
    /// ```
    pub fn enter<R>(&self, f: impl for<'id> FnOnce(Stages<'id>) -> R) -> R {
        f(Stages {
            pipeline: self,
            _brand: Brand::NEW,
        })
    }

    /// Stages 1–5 (see [`Stages::decide`]).
    pub(crate) fn decide<'id>(&self, raw: RawCall, shown: Option<&Shown>) -> Decided<'id> {
        match self.through_policy(raw, shown, None) {
            Ok(permitted) => Decided::Permitted(Branded::new(permitted)),
            Err(stopped) => Decided::Ended(self.describe(Err(stopped))),
        }
    }

    /// Whether a call of the tool named `name` may end soon or be forwarded (see
    /// [`Executor::forwards`]): then [`Stages::decide`] is worth running where a request
    /// arrived. Never while hooks are configured: a hook may take its whole time to answer,
    /// which a request served where it arrived must not wait for.
    pub fn decides_on_arrival(&self, name: &str) -> bool {
        self.hooks.is_empty() && self.registry.all_brief_or_forwarding(name)
    }

    /// Stages 6–8 (see [`Stages::finish`]).
    pub(crate) fn finish(
        &self,
        permitted: Branded<'_, Permitted>,
        cancel: Cancel,
        watch: &Watch,
    ) -> Finished {
        let placement = permitted.placement();
        let approved = self.approve_with(permitted.value, cancel.clone(), watch.awaiting_approval);
        let authorized = match approved {
            Ok(authorized) => authorized,
            Err(stopped) => return Finished::Ended(self.describe(Err(stopped))),
        };
        let cx = running(&authorized, cancel, watch);
        let cleared = match self.clear(authorized, &cx) {
            Ok(cleared) => cleared,
            Err(ended) => return Finished::Ended(self.describe(ended)),
        };
        if placement == Placement::Forwarded {
            return Finished::Forward(Forward::new(Arc::new(self.same()), cleared));
        }
        Finished::Ended(self.describe(Ok(cleared.run())))
    }

    /// Stages 1–6.
    pub(crate) fn authorize_call(&self, raw: RawCall) -> Result<Authorized, Stopped> {
        let permitted = self.through_policy(raw, None, None)?;
        self.approve(permitted)
    }
}

/// The context an approved call runs in, under its own timeout, reporting to `watch`, which
/// is told it runs.
fn running(authorized: &Authorized, cancel: Cancel, watch: &Watch) -> ExecContext {
    (watch.executing)();
    let timeout = Duration::from_millis(authorized.limits().timeout_ms);
    let cx = ExecContext::new(timeout, cancel);
    match &watch.notices {
        Some(sink) => cx.with_notices(Arc::clone(sink)),
        None => cx,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::approval::HeadlessBroker;
    use crate::outcome::Status;
    use crate::registry::{Descriptor, RegistryBuilder, ToolEntry};
    use crate::sensitive::Visibility;

    /// Remembers what its context said of a path in toolgate's state directory.
    #[derive(Debug, Default)]
    struct Looks(Mutex<Option<Visibility>>);

    impl TypedExecutor for Looks {
        type Args = Map<String, Value>;
        type Plan = ();

        fn plan(&self, _: Map<String, Value>) -> ((), Classification) {
            // As a link to the token would be classified: the link, and where it leads.
            let paths = vec!["link".to_owned(), "state/toolgate/console.token".to_owned()];
            let classification = Classification {
                resources: paths.iter().cloned().map(Resource::Path).collect(),
                paths,
                ..Classification::default()
            };
            ((), classification)
        }

        fn execute(
            &self,
            (): &(),
            _: &Call<'_, Self>,
            cx: &ExecContext,
        ) -> Result<ToolOutput, ToolError> {
            *self.0.lock().unwrap() =
                Some(cx.sensitivity().visibility("state/toolgate/console.token"));
            Ok(ToolOutput::new(Value::Null))
        }
    }

    /// A pipeline over one tool, the default policy and no approver.
    fn one_tool(entry: ToolEntry, executor: Arc<dyn Executor>) -> Pipeline {
        let descriptor = Descriptor::new(&entry.name, "t", serde_json::json!({"type": "object"}));
        let policy = PolicyEngine::default_policy().unwrap();
        serving(
            descriptor,
            entry,
            executor,
            policy,
            Arc::new(HeadlessBroker),
        )
    }

    /// A pipeline over the one tool `descriptor` describes, judged by `policy` and asking
    /// `broker`.
    pub(super) fn serving(
        descriptor: Descriptor,
        entry: ToolEntry,
        executor: Arc<dyn Executor>,
        mut policy: PolicyEngine,
        broker: Arc<dyn ApprovalBroker>,
    ) -> Pipeline {
        let mut builder = RegistryBuilder::new();
        builder.register(descriptor, entry, executor).unwrap();
        let registry = builder.build().unwrap();
        policy.prepare(&registry).unwrap();
        Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            broker,
            WorkspaceId::new("/ws"),
        )
    }

    /// A proof checked by one pipeline does not run in another, even over the same tool:
    /// its policies, workspace and ledger judged nothing about the call.
    #[test]
    fn a_proof_runs_only_in_the_pipeline_that_issued_it() {
        let looks = Arc::new(Looks::default());
        let mut entry = ToolEntry::new("walk", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let issuer = one_tool(entry.clone(), looks.clone());
        let other = one_tool(entry, looks.clone());
        let cx = || ExecContext::new(Duration::from_secs(5), Cancel::new());
        let authorized = issuer
            .authorize_call(RawCall::text("walk", "{}", Surface::Chat))
            .unwrap();
        let outcome = other.execute(authorized, &cx());
        assert_eq!(
            outcome.rejection().map(|r| r.code()),
            Some(RejectCode::ApprovalInvalid),
            "{outcome:?}"
        );
        assert_eq!(looks.0.lock().unwrap().take(), None, "the tool did not run");
        let authorized = issuer
            .authorize_call(RawCall::text("walk", "{}", Surface::Chat))
            .unwrap();
        let outcome = issuer.execute(authorized, &cx());
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        assert!(looks.0.lock().unwrap().take().is_some());
    }

    /// Every stage refuses a value another pipeline began: a clone, and a pipeline a builder
    /// made from this one, are other pipelines. Nothing runs, and a value a foreign stage 4
    /// touched is refused by its own pipeline too.
    #[test]
    fn every_stage_refuses_a_value_another_pipeline_began() {
        let looks = Arc::new(Looks::default());
        let mut entry = ToolEntry::new("walk", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let issuer = one_tool(entry, looks.clone());
        let raw = || RawCall::text("walk", "{}", Surface::Chat);
        let code = |stopped: Stopped| stopped.rejection.code();
        let others = [
            issuer.clone(),
            issuer.clone().with_bounds(NormalizeBounds::default()),
            issuer.clone().with_recorder(Arc::new(Kept::default())),
            issuer.clone().with_grants(Arc::default()),
        ];
        let invalid = Some(RejectCode::ApprovalInvalid);
        for other in &others {
            let normalized = issuer.normalize(raw()).unwrap();
            assert_eq!(
                other.resolve_within(normalized, None).err().map(code),
                invalid
            );
            let resolved = issuer
                .resolve_within(issuer.normalize(raw()).unwrap(), None)
                .unwrap();
            assert_eq!(other.validate(resolved).err().map(code), invalid);
            let validated = || {
                let resolved = issuer
                    .resolve_within(issuer.normalize(raw()).unwrap(), None)
                    .unwrap();
                issuer.validate(resolved).unwrap()
            };
            let classified = other.classify(validated());
            assert_eq!(issuer.authorize(classified).err().map(code), invalid);
            let classified = issuer.classify(validated());
            assert_eq!(other.authorize(classified).err().map(code), invalid);
            let permitted = issuer.authorize(issuer.classify(validated())).unwrap();
            assert_eq!(other.approve(permitted).err().map(code), invalid);
            let authorized = issuer.authorize_call(raw()).unwrap();
            let cx = ExecContext::new(Duration::from_secs(5), Cancel::new());
            let outcome = other.execute(authorized, &cx);
            assert_eq!(outcome.rejection().map(|r| r.code()), invalid);
        }
        assert_eq!(looks.0.lock().unwrap().take(), None, "the tool never ran");
        let outcome = issuer.execute(
            issuer.authorize_call(raw()).unwrap(),
            &ExecContext::new(Duration::from_secs(5), Cancel::new()),
        );
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    }

    /// Hands every call it is given to its twin, an executor of its own type, if it has one;
    /// else runs it, and counts.
    #[derive(Debug, Default)]
    struct Passes {
        twin: Option<Arc<Passes>>,
        ran: Arc<std::sync::atomic::AtomicUsize>,
    }

    impl TypedExecutor for Passes {
        type Args = Map<String, Value>;
        type Plan = ();

        fn plan(&self, _: Map<String, Value>) -> ((), Classification) {
            ((), Classification::default())
        }

        fn execute(
            &self,
            (): &(),
            call: &Call<'_, Self>,
            cx: &ExecContext,
        ) -> Result<ToolOutput, ToolError> {
            match &self.twin {
                Some(twin) => Executor::execute(&**twin, call, cx),
                None => {
                    self.ran.fetch_add(1, Ordering::SeqCst);
                    Ok(ToolOutput::new(Value::Null))
                }
            }
        }
    }

    /// An executor that passes the call it was handed to another executor, even one of its
    /// own type (whose plan it could read), fails it: the other does not run it.
    #[test]
    fn a_call_handed_to_another_executor_does_not_run() {
        let twin = Arc::new(Passes::default());
        let ran = Arc::clone(&twin.ran);
        let mut entry = ToolEntry::new("pass", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let passes = Passes {
            twin: Some(twin),
            ..Passes::default()
        };
        let pipeline = one_tool(entry, Arc::new(passes));
        let outcome = pipeline.run(RawCall::text("pass", "{}", Surface::Chat));
        assert_eq!(
            outcome.error().map(|e| e.code),
            Some(crate::outcome::ToolErrorCode::PlanMismatch),
            "{outcome:?}"
        );
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the twin never ran it");
    }

    /// Plans a `String`, and must never run a plan of another type.
    #[derive(Debug)]
    struct Other;

    impl TypedExecutor for Other {
        type Args = Value;
        type Plan = String;

        fn plan(&self, _: Value) -> (String, Classification) {
            (String::new(), Classification::default())
        }

        fn execute(
            &self,
            _: &String,
            _: &Call<'_, Self>,
            _: &ExecContext,
        ) -> Result<ToolOutput, ToolError> {
            panic!("a plan of another tool's type must never reach this executor");
        }
    }

    /// A call whose plan is of another type than its executor's (what stage 7 would meet
    /// were a call to reach an executor that did not plan it) fails closed, unrun.
    #[test]
    fn a_plan_of_another_type_fails_the_call_closed() {
        let mut entry = ToolEntry::new("walk", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let pipeline = one_tool(entry, Arc::new(Looks::default()));
        let authorized = pipeline
            .authorize_call(RawCall::text("walk", "{}", Surface::Chat))
            .unwrap();
        let cx = ExecContext::new(Duration::from_secs(5), Cancel::new());
        let other = Other;
        let error = Executor::execute(&other, &Call::of(&authorized, &other), &cx).unwrap_err();
        assert_eq!(error.code, crate::outcome::ToolErrorCode::PlanMismatch);
        assert!(error.message.contains("without the plan"), "{error:?}");
    }

    /// Notes the deadline its context gives it.
    #[derive(Debug, Default)]
    struct Deadline(Mutex<Option<Instant>>);

    impl Executor for Deadline {
        fn execute(&self, _: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
            *self.0.lock().unwrap() = Some(cx.deadline());
            Ok(ToolOutput::new(Value::Null))
        }
    }

    /// A context the caller built with a later deadline than the tool's limit still ends by
    /// the limit; an earlier one stands.
    #[test]
    fn the_tools_time_limit_holds_whatever_context_the_caller_built() {
        let deadline = Arc::new(Deadline::default());
        let mut entry = ToolEntry::new("slow", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        entry.limits.timeout_ms = 1234;
        let pipeline = one_tool(entry, deadline.clone());
        let raw = || RawCall::text("slow", "{}", Surface::Chat);
        let before = Instant::now();
        let hour = ExecContext::new(Duration::from_secs(3600), Cancel::new());
        let outcome = pipeline.execute(pipeline.authorize_call(raw()).unwrap(), &hour);
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        let seen = deadline.0.lock().unwrap().take().unwrap();
        assert!(
            seen <= Instant::now() + Duration::from_millis(1234),
            "{seen:?}"
        );
        assert!(seen >= before + Duration::from_millis(1234));
        let soon = ExecContext::new(Duration::from_millis(10), Cancel::new());
        let _ = pipeline.execute(pipeline.authorize_call(raw()).unwrap(), &soon);
        assert_eq!(deadline.0.lock().unwrap().take(), Some(soon.deadline()));
    }

    #[test]
    fn the_executor_is_handed_the_pipelines_sensitivity() {
        let looks = Arc::new(Looks::default());
        let mut entry = ToolEntry::new("walk", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let pipeline = one_tool(entry, looks.clone());
        let seen = |pipeline: &Pipeline| {
            let outcome = pipeline.run(RawCall::text("walk", "{}", Surface::Chat));
            (outcome, looks.0.lock().unwrap().take())
        };
        let (outcome, visibility) = seen(&pipeline);
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        assert_eq!(visibility, Some(Visibility::Visible));
        let pipeline =
            pipeline.with_sensitivity(Sensitivity::default().with_config_dir("state/toolgate"));
        let (outcome, visibility) = seen(&pipeline);
        // The policy refuses the path; nothing ran, and the evidence names no file in there.
        assert_eq!(visibility, None);
        assert_eq!(
            outcome.rejection().map(|r| r.policies().to_vec()),
            Some(vec!["sensitive-toolgate-config".to_owned()])
        );
        assert_eq!(
            outcome.evidence().resources,
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
        let cx = ExecContext::new(Duration::from_secs(5), Cancel::new());
        assert_eq!(
            cx.sensitivity().visibility("state/toolgate/console.token"),
            Visibility::Visible
        );
        let _ = pipeline.execute(authorized, &cx);
        assert_eq!(looks.0.lock().unwrap().take(), Some(Visibility::Hidden));
    }

    /// Ends at once, and says so.
    #[derive(Debug)]
    struct Quick;

    impl Executor for Quick {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new(Value::from("done")))
        }

        fn brief(&self) -> bool {
            true
        }
    }

    /// A brief tool whose every call, as planned, is too large to be brief.
    #[derive(Debug)]
    struct Large;

    impl Executor for Large {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            Ok(ToolOutput::new(Value::from("done, slowly")))
        }

        fn brief(&self) -> bool {
            true
        }

        fn brief_call(&self, _: &Planned) -> bool {
            false
        }
    }

    /// Only a brief executor's read that nobody must approve ends soon, and only when its
    /// call is brief too; deciding and finishing a call is running it, and a call stopped
    /// early is recorded by deciding it.
    #[test]
    fn only_a_brief_read_that_asks_nobody_ends_soon() {
        let cases: [(EffectClass, ApprovalMode, Arc<dyn Executor>, bool); 5] = [
            (
                EffectClass::ReadOnly,
                ApprovalMode::Policy,
                Arc::new(Quick),
                true,
            ),
            (
                EffectClass::ReadOnly,
                ApprovalMode::Policy,
                Arc::new(Large),
                false,
            ),
            (
                EffectClass::ReadOnly,
                ApprovalMode::EachCall,
                Arc::new(Quick),
                false,
            ),
            (
                EffectClass::ReadOnly,
                ApprovalMode::Policy,
                Arc::new(Looks::default()),
                false,
            ),
            (
                EffectClass::LocalWrite,
                ApprovalMode::EachCall,
                Arc::new(Quick),
                false,
            ),
        ];
        for (effect, approval, executor, soon) in cases {
            let brief = executor.brief();
            let mut entry = ToolEntry::new("t", "test");
            entry.effect = Some(effect);
            entry.approval = approval;
            let pipeline = one_tool(entry, executor);
            assert_eq!(pipeline.decides_on_arrival("t"), brief);
            assert!(!pipeline.decides_on_arrival("unknown"));
            let raw = RawCall::text("t", "{}", Surface::Chat);
            let Decided::Permitted(permitted) = pipeline.decide(raw, None) else {
                panic!("{effect:?} {approval:?} was stopped before stage 6");
            };
            assert_eq!(
                permitted.ends_soon(),
                soon,
                "{effect:?} {approval:?} {brief}"
            );
            let Finished::Ended(outcome) =
                pipeline.finish(permitted, Cancel::new(), &Watch::default())
            else {
                panic!("only a forwarded call comes back to be begun");
            };
            let expected = if approval == ApprovalMode::EachCall {
                Status::Rejected
            } else {
                Status::Completed
            };
            assert_eq!(outcome.status(), expected, "{outcome:?}");
        }
        // A name any of whose entries is not brief (an upstream's tool beside a builtin of the
        // same name) is never decided where the request arrived.
        let mut builder = RegistryBuilder::new();
        for (major, executor) in [
            (1, Arc::new(Quick) as Arc<dyn Executor>),
            (2, Arc::new(Looks::default())),
        ] {
            let mut entry = ToolEntry::new("t", "test");
            entry.version = crate::registry::Version { major, minor: 0 };
            let descriptor = Descriptor::new("t", "t", serde_json::json!({"type": "object"}));
            builder.register(descriptor, entry, executor).unwrap();
        }
        assert!(!builder.build().unwrap().all_brief_or_forwarding("t"));

        let pipeline = one_tool(ToolEntry::new("t", "test"), Arc::new(Quick));
        let refused = pipeline.decide(RawCall::text("t", "[]", Surface::Chat), None);
        let Decided::Ended(outcome) = refused else {
            panic!("arguments that are not an object pass stage 1");
        };
        assert_eq!(outcome.status(), Status::Rejected);
    }

    /// Forwards its calls: each resolves when the test fills its slot, and says when its
    /// future is dropped.
    #[derive(Debug, Default)]
    struct Later {
        slot: Arc<Mutex<Option<Result<ToolOutput, ToolError>>>>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
        panics: bool,
    }

    struct Awaited {
        slot: Arc<Mutex<Option<Result<ToolOutput, ToolError>>>>,
        dropped: Arc<std::sync::atomic::AtomicBool>,
        panics: bool,
    }

    impl std::future::Future for Awaited {
        type Output = Result<ToolOutput, ToolError>;

        fn poll(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Self::Output> {
            assert!(!self.panics, "the answer could not be read");
            self.slot
                .lock()
                .unwrap()
                .take()
                .map_or(std::task::Poll::Pending, std::task::Poll::Ready)
        }
    }

    impl Drop for Awaited {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    impl Executor for Later {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            panic!("a forwarded call is never executed on a thread");
        }

        fn forwards(&self) -> bool {
            true
        }

        fn forward(&self, _: &Call<'_, Self>, _: &ExecContext) -> Forwarded {
            Box::pin(Awaited {
                slot: Arc::clone(&self.slot),
                dropped: Arc::clone(&self.dropped),
                panics: self.panics,
            })
        }
    }

    /// Keeps the outcomes it is given.
    #[derive(Debug, Default)]
    struct Kept(Mutex<Vec<(Status, Option<crate::outcome::ToolErrorCode>)>>);

    impl Recorder for Kept {
        fn record(&self, outcome: &Outcome) -> Result<(), crate::record::RecordError> {
            let code = outcome.error().map(|e| e.code);
            self.0.lock().unwrap().push((outcome.status(), code));
            Ok(())
        }
    }

    /// A pipeline over one forwarding tool of `effect` and `approval`, recording into the
    /// returned list.
    fn far_pipeline(
        later: Later,
        effect: EffectClass,
        approval: ApprovalMode,
    ) -> (Arc<Pipeline>, Arc<Kept>) {
        let mut entry = ToolEntry::new("far", "test");
        entry.effect = Some(effect);
        entry.approval = approval;
        let kept = Arc::new(Kept::default());
        let pipeline = one_tool(entry, Arc::new(later)).with_recorder(kept.clone());
        (Arc::new(pipeline), kept)
    }

    fn permitted(pipeline: &Pipeline) -> Branded<'static, Permitted> {
        match pipeline.decide(RawCall::text("far", "{}", Surface::Chat), None) {
            Decided::Permitted(permitted) => permitted,
            Decided::Ended(outcome) => panic!("stopped before stage 6: {outcome:?}"),
        }
    }

    /// The call `permitted`, forwarded and in flight.
    fn forward(pipeline: &Pipeline, permitted: Branded<'_, Permitted>) -> Forwarding {
        match pipeline.finish(permitted, Cancel::new(), &Watch::default()) {
            Finished::Forward(forward) => forward.begin(),
            Finished::Ended(outcome) => panic!("ended before it was forwarded: {outcome:?}"),
        }
    }

    fn poll(forwarding: &mut Forwarding) -> std::task::Poll<Outcome> {
        use std::future::Future as _;
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(forwarding).poll(&mut context)
    }

    /// A forwarded call resolves to its executor's result, described and recorded once; one
    /// dropped in flight drops its executor's future first and is recorded as given up; one
    /// whose future panics is recorded as a tool that stopped.
    #[test]
    fn a_forwarded_call_is_recorded_however_it_ends() {
        use std::task::Poll;

        let later = Later::default();
        let (slot, dropped) = (Arc::clone(&later.slot), Arc::clone(&later.dropped));
        let (pipeline, kept) = far_pipeline(later, EffectClass::ReadOnly, ApprovalMode::Policy);
        let mut forwarding = forward(&pipeline, permitted(&pipeline));
        assert!(poll(&mut forwarding).is_pending());
        assert!(
            kept.0.lock().unwrap().is_empty(),
            "nothing is recorded in flight"
        );
        *slot.lock().unwrap() = Some(Ok(ToolOutput::new(Value::from("there"))));
        let Poll::Ready(outcome) = poll(&mut forwarding) else {
            panic!("the answer came");
        };
        assert_eq!(outcome.output(), Some(&Value::from("there")));
        assert!(poll(&mut forwarding).is_pending(), "it resolves once");
        drop(forwarding);
        assert_eq!(*kept.0.lock().unwrap(), [(Status::Completed, None)]);
        assert!(dropped.load(Ordering::SeqCst));

        // Dropped in flight: the future first, then the record.
        let later = Later::default();
        let dropped = Arc::clone(&later.dropped);
        let (pipeline, kept) = far_pipeline(later, EffectClass::ReadOnly, ApprovalMode::Policy);
        let mut forwarding = forward(&pipeline, permitted(&pipeline));
        assert!(poll(&mut forwarding).is_pending());
        drop(forwarding);
        assert!(dropped.load(Ordering::SeqCst));
        assert_eq!(
            *kept.0.lock().unwrap(),
            [(
                Status::Failed,
                Some(crate::outcome::ToolErrorCode::Cancelled)
            )]
        );

        // A future that panics.
        let later = Later {
            panics: true,
            ..Later::default()
        };
        let (pipeline, kept) = far_pipeline(later, EffectClass::ReadOnly, ApprovalMode::Policy);
        let mut forwarding = forward(&pipeline, permitted(&pipeline));
        let Poll::Ready(outcome) = poll(&mut forwarding) else {
            panic!("a panic ends the call");
        };
        let error = outcome.error().unwrap();
        assert!(
            error.message.contains("the answer could not be read"),
            "{error:?}"
        );
        drop(forwarding);
        assert_eq!(
            *kept.0.lock().unwrap(),
            [(
                Status::Failed,
                Some(crate::outcome::ToolErrorCode::ToolPanicked)
            )]
        );
    }

    /// Notes the thread each outcome is recorded on, and its status.
    #[derive(Debug, Default)]
    struct RecordedOn(Mutex<Vec<(std::thread::ThreadId, Status)>>);

    impl Recorder for RecordedOn {
        fn record(&self, outcome: &Outcome) -> Result<(), crate::record::RecordError> {
            let here = std::thread::current().id();
            self.0.lock().unwrap().push((here, outcome.status()));
            Ok(())
        }
    }

    /// Wakes the test's thread.
    struct Unpark(std::thread::Thread);

    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }

    /// A forwarded call whose answer is small is described where it was awaited; a large one
    /// on a thread of its own, which wakes the call once it is recorded, and which a call
    /// dropped meanwhile waits for.
    /// Held by the tests that describe answers elsewhere, which share the places for it.
    fn describing_alone() -> std::sync::MutexGuard<'static, ()> {
        static ALONE: Mutex<()> = Mutex::new(());
        ALONE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A pipeline over one forwarding tool that answers `answer` at once, recording into
    /// `recorder`, and one call of it in flight.
    fn answering(answer: Value, recorder: Arc<dyn Recorder>) -> Forwarding {
        let later = Later::default();
        *later.slot.lock().unwrap() = Some(Ok(ToolOutput::new(answer)));
        let mut entry = ToolEntry::new("far", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let pipeline = Arc::new(one_tool(entry, Arc::new(later)).with_recorder(recorder));
        forward(&pipeline, permitted(&pipeline))
    }

    #[test]
    fn a_large_forwarded_answer_is_described_on_a_thread_of_its_own() {
        use std::task::Poll;
        let _alone = describing_alone();

        let start = |answer: Value| {
            let recorded = Arc::new(RecordedOn::default());
            (answering(answer, recorded.clone()), recorded)
        };
        let here = std::thread::current().id();
        let waker = std::task::Waker::from(Arc::new(Unpark(std::thread::current())));
        let mut context = std::task::Context::from_waker(&waker);
        let mut wait = |forwarding: &mut Forwarding| {
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            loop {
                if let Poll::Ready(outcome) =
                    std::pin::Pin::new(&mut *forwarding).poll(&mut context)
                {
                    return outcome;
                }
                assert!(std::time::Instant::now() < deadline, "never woken");
                std::thread::park_timeout(Duration::from_millis(100));
            }
        };
        use std::future::Future as _;

        let (mut forwarding, recorded) = start(Value::from("x".repeat(1000)));
        assert!(wait(&mut forwarding).output().is_some());
        assert_eq!(*recorded.0.lock().unwrap(), [(here, Status::Completed)]);

        let large = Value::from("x".repeat(execute::DESCRIBED_IN_PLACE));
        let (mut forwarding, recorded) = start(large.clone());
        let outcome = wait(&mut forwarding);
        assert_eq!(outcome.output(), Some(&large));
        let kept = recorded.0.lock().unwrap().clone();
        assert_eq!(kept.len(), 1, "recorded once: {kept:?}");
        assert_ne!(kept[0].0, here, "described where it was awaited");
        assert_eq!(kept[0].1, Status::Completed);
        assert!(poll(&mut forwarding).is_pending(), "it resolves once");

        // Given up while it is described (its runtime stopping drops it): the drop waits for
        // the description, so the call is recorded, once, as what it was, by the time the
        // drop returns.
        let (mut forwarding, recorded) = start(large);
        assert!(poll(&mut forwarding).is_pending());
        drop(forwarding);
        let kept = recorded.0.lock().unwrap().clone();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(kept[0].1, Status::Completed);
    }

    /// Records on the describing threads only once let go (or after 10 s); anywhere else at
    /// once.
    #[derive(Debug, Default)]
    struct HeldElsewhere {
        let_go: Mutex<bool>,
        going: std::sync::Condvar,
        recorded: Mutex<Vec<bool>>,
    }

    impl Recorder for HeldElsewhere {
        fn record(&self, _: &Outcome) -> Result<(), crate::record::RecordError> {
            let elsewhere = std::thread::current().name() == Some("toolgate-describe");
            if elsewhere {
                // Not forever: a test that fails before letting go must not hang on its drops.
                let let_go = self.let_go.lock().unwrap();
                let waited = self
                    .going
                    .wait_timeout_while(let_go, Duration::from_secs(10), |go| !*go);
                drop(waited.unwrap());
            }
            self.recorded.lock().unwrap().push(elsewhere);
            Ok(())
        }
    }

    /// However many large answers land at once, no more than `DESCRIBING_AT_MOST` threads
    /// describe them; the next is described where it was awaited, and recorded all the same.
    #[test]
    fn no_more_large_answers_are_described_elsewhere_at_once_than_the_places_for_them() {
        let _alone = describing_alone();
        let held = Arc::new(HeldElsewhere::default());
        let large = Value::from("x".repeat(execute::DESCRIBED_IN_PLACE));
        let mut elsewhere = Vec::new();
        for _ in 0..execute::DESCRIBING_AT_MOST {
            let mut forwarding = answering(large.clone(), held.clone());
            assert!(poll(&mut forwarding).is_pending(), "described elsewhere");
            elsewhere.push(forwarding);
        }
        let mut one_more = answering(large, held.clone());
        let std::task::Poll::Ready(outcome) = poll(&mut one_more) else {
            panic!("every place is taken: described here");
        };
        assert_eq!(outcome.status(), Status::Completed);
        assert_eq!(*held.recorded.lock().unwrap(), [false]);
        *held.let_go.lock().unwrap() = true;
        held.going.notify_all();
        // Dropped, each waits for its description: all recorded, the places given back.
        drop(elsewhere);
        let recorded = held.recorded.lock().unwrap().clone();
        assert_eq!(recorded.len(), execute::DESCRIBING_AT_MOST + 1);
        assert_eq!(
            recorded.iter().filter(|&&e| e).count(),
            execute::DESCRIBING_AT_MOST
        );
        let mut again = answering(
            Value::from("x".repeat(execute::DESCRIBED_IN_PLACE)),
            held.clone(),
        );
        assert!(poll(&mut again).is_pending(), "a place is free again");
        drop(again);
    }

    /// How much JSON an answer comes to is counted from below, and only as far as the limit.
    #[test]
    fn an_answer_is_measured_only_as_far_as_the_limit() {
        let fits = |value: Value, limit| execute::fits_in(&Ok(ToolOutput::new(value)), limit);
        assert!(fits(serde_json::json!({"text": "x".repeat(90)}), 100));
        assert!(!fits(serde_json::json!({"text": "x".repeat(100)}), 100));
        // Many small values add up, names included.
        assert!(!fits(Value::Array(vec![Value::from(0); 101]), 100));
        assert!(fits(Value::Array(vec![Value::from(0); 99]), 100));
        assert!(!fits(serde_json::json!({"a".repeat(98): 1}), 100));
        let error = |message: &str| {
            execute::fits_in(
                &Err(ToolError::new(
                    crate::outcome::ToolErrorCode::UpstreamError,
                    message,
                )),
                100,
            )
        };
        assert!(error("short"));
        assert!(!error(&"e".repeat(101)));
    }

    /// Only a read that nobody must approve is placed to be forwarded; any other call is placed
    /// on a worker.
    #[test]
    fn only_a_read_that_asks_nobody_is_forwarded() {
        for (effect, approval, forwards) in [
            (EffectClass::ReadOnly, ApprovalMode::Policy, true),
            (EffectClass::ReadOnly, ApprovalMode::EachCall, false),
            (EffectClass::LocalWrite, ApprovalMode::Policy, false),
        ] {
            let (pipeline, kept) = far_pipeline(Later::default(), effect, approval);
            assert!(pipeline.decides_on_arrival("far"));
            let permitted = permitted(&pipeline);
            assert!(
                !permitted.ends_soon(),
                "a forwarded call is never finished here"
            );
            let placed = permitted.placement();
            assert_eq!(
                placed == Placement::Forwarded,
                forwards,
                "{effect:?} {approval:?}"
            );
            if forwards {
                drop(forward(&pipeline, permitted));
            } else {
                assert_eq!(placed, Placement::Worker);
                drop(permitted);
            }
            let recorded = kept.0.lock().unwrap().len();
            assert_eq!(recorded, usize::from(forwards), "{effect:?} {approval:?}");
        }
        let (pipeline, _) = far_pipeline(
            Later::default(),
            EffectClass::ReadOnly,
            ApprovalMode::Policy,
        );
        assert!(!pipeline.decides_on_arrival("unknown"));
    }

    /// A call placed to be forwarded that its caller cannot await runs where it is, through
    /// the executor's `execute`; one given up before it was begun is recorded as such.
    #[test]
    fn a_forward_not_begun_runs_here_or_is_recorded_as_given_up() {
        let (pipeline, kept) = far_pipeline(
            Later::default(),
            EffectClass::ReadOnly,
            ApprovalMode::Policy,
        );
        let finished = |pipeline: &Pipeline| match pipeline.finish(
            permitted(pipeline),
            Cancel::new(),
            &Watch::default(),
        ) {
            Finished::Forward(forward) => forward,
            Finished::Ended(outcome) => panic!("{outcome:?}"),
        };
        // `Later` panics when executed on a thread: run here, it did run here.
        let outcome = finished(&pipeline).run_here();
        assert_eq!(
            outcome.error().map(|e| e.code),
            Some(crate::outcome::ToolErrorCode::ToolPanicked)
        );
        drop(finished(&pipeline));
        let run = pipeline.run(RawCall::text("far", "{}", Surface::Chat));
        assert_eq!(run.status(), Status::Failed, "run_with runs it here too");
        assert_eq!(
            *kept.0.lock().unwrap(),
            [
                (
                    Status::Failed,
                    Some(crate::outcome::ToolErrorCode::ToolPanicked)
                ),
                (
                    Status::Failed,
                    Some(crate::outcome::ToolErrorCode::Cancelled)
                ),
                (
                    Status::Failed,
                    Some(crate::outcome::ToolErrorCode::ToolPanicked)
                ),
            ]
        );
    }

    #[test]
    fn a_broker_that_never_grants_is_not_waited_for() {
        let mut entry = ToolEntry::new("change", "test");
        entry.effect = Some(EffectClass::LocalWrite);
        entry.approval = ApprovalMode::EachCall;
        let pipeline = one_tool(entry, Arc::new(Looks::default()));
        let waited = Mutex::new(0);
        let hooks = Watch {
            awaiting_approval: &|_| *waited.lock().unwrap() += 1,
            ..Watch::default()
        };
        let outcome = pipeline.run_with(
            RawCall::text("change", "{}", Surface::Chat),
            Cancel::new(),
            &hooks,
        );
        let rejection = outcome.rejection().unwrap();
        assert_eq!(rejection.code(), RejectCode::ApprovalRequired);
        assert_eq!(*waited.lock().unwrap(), 0, "nobody was said to be asked");
        let hint = rejection.hint().unwrap();
        assert!(hint.contains("cannot be approved here"), "{hint}");
        assert!(
            !hint.contains("approve it in toolgate's approval console"),
            "{hint}"
        );
    }
}
