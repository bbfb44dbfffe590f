//! The fail-closed tool-dispatch pipeline.
//!
//! A model *proposes* a tool call; this crate decides whether it runs. Every call crosses the
//! same eight stages, each consuming the previous stage's value:
//!
//! ```text
//! RawCall ─normalize→ Invocation ─resolve→ Resolved ─validate→ Validated ─classify→ Classified
//!         ─authorize→ Permitted ─approve→ Authorized ─execute→ Executed ─describe→ Outcome
//! ```
//!
//! Any stage may instead return a [`Rejection`]; a rejected call never reaches an
//! [`Executor`]. Only [`Stages::execute`] runs an executor: it consumes the [`Authorized`]
//! proof, whose constructor is private to the [`pipeline`] module, runs that proof's own tool,
//! and records the outcome; an executor is handed a [`Call`] that nothing else can make. So
//! running a tool without crossing stages 1–6, or without a record, does not compile.
//!
//! The crate does no I/O of its own: tools, approvals and time come in through traits
//! ([`Executor`], [`ApprovalBroker`], [`Clock`]).
//!
//! ```
//! use std::sync::Arc;
//! use serde_json::json;
//! use toolgate_core::*;
//!
//! #[derive(Debug)]
//! struct Echo;
//! impl Executor for Echo {
//!     fn execute(&self, call: &Call<'_, Self>, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
//!         Ok(ToolOutput::new(json!({ "echo": call.arguments() })))
//!     }
//! }
//!
//! let descriptor = Descriptor::new(
//!     "echo",
//!     "Echoes its arguments. Use it to test the boundary.",
//!     json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
//! );
//! let mut entry = ToolEntry::new("echo", "reads nothing");
//! entry.effect = Some(EffectClass::ReadOnly);
//! let mut registry = RegistryBuilder::new();
//! registry.register(descriptor, entry, Arc::new(Echo)).unwrap();
//! let pipeline = Pipeline::new(
//!     Arc::new(registry.build().unwrap()),
//!     Arc::new(PolicyEngine::default_policy().unwrap()),
//!     Arc::new(HeadlessBroker),
//!     WorkspaceId::new("/tmp/project"),
//! );
//!
//! let done = pipeline.run(RawCall::text("echo", r#"{"text": "hi"}"#, Surface::Chat));
//! assert_eq!(done.status(), Status::Completed);
//! let typo = pipeline.run(RawCall::text("echo", r#"{"txt": "hi"}"#, Surface::Chat));
//! assert_eq!(typo.rejection().unwrap().code(), RejectCode::UnknownArgument);
//! ```

pub mod approval;
pub mod cancel;
pub mod canonical;
pub mod descriptor_lint;
mod dialect;
pub mod hint;
pub mod invocation;
pub mod notice;
pub mod outcome;
mod pattern;
pub mod pipeline;
pub mod policy;
pub mod record;
pub mod redact;
pub mod registry;
pub mod rejection;
pub mod runs_later;
pub mod schema;
pub mod sensitive;
pub mod visible;

pub use approval::{
    ApprovalBroker, ApprovalDecision, ApprovalDigest, ApprovalRequest, Clock, Grant, GrantLedger,
    GrantNotKept, GrantRefusal, GrantScope, GrantStore, GrantTimes, HeadlessBroker, HookAsk,
    MAX_REASON_CHARS, SystemClock,
};
pub use cancel::{Cancel, OnCancel};
pub use canonical::{Canonical, Digest, canonical_json, sha256_digest};
pub use invocation::{Invocation, NormalizeBounds, RawArguments, RawCall, Surface, UnknownSurface};
pub use notice::{NOTICES_PER_SECOND, Notice, NoticeSink};
pub use outcome::{Evidence, Outcome, Status, ToolError, ToolErrorCode, ToolOutput};
pub use pipeline::{
    Authorized, Branded, Call, Classification, Classified, Decided, ExecContext, Executor,
    Finished, Forward, Forwarded, Forwarding, HOOK_PROTOCOL, Hook, HookAnswer, HookDecision,
    HookEvent, HookFailure, HookFailureKind, HookInput, HookMode, HookRecord,
    MAX_HOOK_ANSWER_BYTES, Normalized, Parsed, Permitted, Pipeline, Placement, Planned, Resolved,
    Resource, Rest, Shown, StageReport, Stages, Stopped, TypedExecutor, Validated, Watch,
    WorkspaceId,
};
pub use policy::{
    NETWORK_NONE, NETWORK_PREFIX, NETWORK_UNCONFINED, NetworkRequest, PolicyContext,
    PolicyDecision, PolicyEngine, PolicyError, Withheld,
};
pub use record::{RecordError, Recorder};
pub use registry::{
    ApprovalMode, Availability, Descriptor, EffectClass, Limits, Registry, RegistryBuilder,
    RegistryError, Tool, ToolEntry, UnknownEffectClass, Version,
};
pub use rejection::{FieldError, RejectCode, Rejection, Stage};
pub use schema::{SchemaBounds, SchemaError, ToolSchema};
pub use sensitive::Sensitivity;
