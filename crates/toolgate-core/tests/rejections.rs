//! Every rejection code, driven through the public pipeline, with an executor that records
//! whether it was entered. A rejected call must never reach it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};
use toolgate_core::*;

/// An executor that remembers being entered.
#[derive(Debug, Default)]
struct Recorder {
    entered: AtomicBool,
}

impl TypedExecutor for Recorder {
    type Args = Map<String, Value>;
    type Plan = ();

    fn check(&self, arguments: &Map<String, Value>) -> Vec<FieldError> {
        match arguments.get("path").and_then(Value::as_str) {
            Some(path) if path.starts_with('/') || path.contains("..") => vec![FieldError::new(
                "/path",
                RejectCode::PathOutsideWorkspace,
                "path leads outside the workspace",
            )],
            // Stand-ins for a write tool's compare-and-swap checks.
            Some("unread.txt") => vec![FieldError::new(
                "/expected_digest",
                RejectCode::ReadRequired,
                "read it first",
            )],
            Some("changed.txt") => vec![FieldError::new(
                "/expected_digest",
                RejectCode::StaleWrite,
                "it changed since it was read",
            )],
            // A stand-in for a command tool on a machine that cannot confine it.
            Some("unconfinable") => vec![FieldError::new(
                "",
                RejectCode::SandboxUnavailable,
                "this machine cannot confine commands",
            )],
            _ => Vec::new(),
        }
    }

    fn plan(&self, arguments: Map<String, Value>) -> ((), Classification) {
        let paths: Vec<String> = arguments
            .get("path")
            .and_then(Value::as_str)
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default();
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
        call: &Call<'_, Self>,
        _cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        self.entered.store(true, Ordering::SeqCst);
        Ok(ToolOutput::new(json!({ "args": call.arguments() })))
    }
}

#[derive(Debug, Default)]
struct TestClock(AtomicU64);
impl Clock for TestClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How the test broker answers.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Answer {
    Allow,
    Deny,
    /// Allows, under a pipeline whose grants lapse as soon as they are issued.
    AllowExpiring,
    /// Allows; the grant is revoked between approval and execution.
    AllowRevoked,
}

/// Answers as told, holding the pipeline's ledger as the approval console does, on a clock
/// the test moves.
#[derive(Debug)]
struct TestBroker {
    answer: Answer,
    grants: Arc<GrantLedger>,
    clock: Arc<TestClock>,
    /// The digest of every request asked.
    asked: Mutex<Vec<ApprovalDigest>>,
}

impl TestBroker {
    fn new(answer: Answer) -> Self {
        let clock = Arc::new(TestClock::default());
        TestBroker {
            answer,
            grants: Arc::new(GrantLedger::new(clock.clone())),
            clock,
            asked: Mutex::new(Vec::new()),
        }
    }

    /// `pipeline`, issuing and redeeming in this broker's ledger, with grants that lapse at
    /// once when the broker's answer says so.
    fn wire(self: &Arc<Self>, pipeline: Pipeline) -> Pipeline {
        let mut times = GrantTimes::default();
        if self.answer == Answer::AllowExpiring {
            times.once = Duration::ZERO;
        }
        pipeline
            .with_grants(Arc::clone(&self.grants))
            .with_grant_times(times)
    }
}

impl ApprovalBroker for TestBroker {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request.digest.clone());
        match self.answer {
            Answer::Deny => ApprovalDecision::Reject {
                reason: "not today".into(),
            },
            Answer::Allow | Answer::AllowExpiring | Answer::AllowRevoked => {
                ApprovalDecision::AllowOnce
            }
        }
    }
}

/// The operator's check on the tools named `vetoed` (refused) and `unchecked` (whose check
/// breaks).
#[derive(Debug)]
struct Veto;

impl Hook for Veto {
    fn name(&self) -> &str {
        "veto"
    }

    fn event(&self) -> HookEvent {
        HookEvent::PreCall
    }

    fn applies_to(&self, tool: &str) -> bool {
        tool == "vetoed" || tool == "unchecked"
    }

    fn call(&self, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
        match input.tool {
            "vetoed" => Ok(HookAnswer::deny("not on this branch")),
            _ => Err(HookFailure::new(HookFailureKind::Timeout, "no answer")),
        }
    }
}

struct Fixture {
    pipeline: Pipeline,
    recorder: Arc<Recorder>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": 64},
            "count": {"type": "integer", "minimum": 0}
        },
        "required": ["path"]
    })
}

fn entry(name: &str, effect: EffectClass) -> ToolEntry {
    let mut entry = ToolEntry::new(name, "test");
    entry.effect = Some(effect);
    entry
}

/// A pipeline over one `write` tool that records being entered, asking `broker`.
fn one_writer(broker: Arc<dyn ApprovalBroker>) -> (Pipeline, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let mut builder = RegistryBuilder::new();
    builder
        .register(
            Descriptor::new("write", "writes", schema()),
            entry("write", EffectClass::LocalWrite),
            recorder.clone(),
        )
        .unwrap();
    let pipeline = Pipeline::new(
        Arc::new(builder.build().unwrap()),
        Arc::new(PolicyEngine::default_policy().unwrap()),
        broker,
        WorkspaceId::new("/w"),
    );
    (pipeline, recorder)
}

fn fixture(answer: Answer) -> Fixture {
    let recorder = Arc::new(Recorder::default());
    let executor: Arc<dyn Executor> = recorder.clone();
    let mut builder = RegistryBuilder::new();
    let mut register = |entry: ToolEntry| {
        let descriptor = Descriptor::new(entry.name.clone(), "a test tool", schema());
        builder
            .register(descriptor, entry, executor.clone())
            .unwrap();
    };
    let mut read = entry("read", EffectClass::ReadOnly);
    read.profiles.insert("readonly".into());
    register(read);
    register(entry("write", EffectClass::LocalWrite));
    register(entry("fetch", EffectClass::Network));
    let mut ops = entry("ops_only", EffectClass::ReadOnly);
    ops.profiles = BTreeSet::from(["ops".to_owned()]);
    register(ops);
    let mut off = entry("off", EffectClass::ReadOnly);
    off.enabled = false;
    register(off);
    let mut cli = entry("cli_only", EffectClass::ReadOnly);
    cli.surfaces = BTreeSet::from([Surface::Cli]);
    register(cli);
    for major in [1, 2] {
        let mut multi = entry("multi", EffectClass::ReadOnly);
        multi.version = Version { major, minor: 0 };
        register(multi);
    }
    register(entry("vetoed", EffectClass::ReadOnly));
    register(entry("unchecked", EffectClass::ReadOnly));
    let mut pinned = entry("pinned", EffectClass::ReadOnly);
    pinned.pinned_digest = Some(sha256_digest(b"what the operator reviewed"));
    register(pinned);
    let mut gone = entry("gone", EffectClass::ReadOnly);
    gone.availability = Some(Arc::new(|| Err("the service is down".into())));
    register(gone);
    let registry = builder.build().unwrap();
    let mut policy = PolicyEngine::default_policy().unwrap();
    policy.prepare(&registry).unwrap();
    let broker = Arc::new(TestBroker::new(answer));
    let pipeline = broker.wire(
        Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            broker.clone(),
            WorkspaceId::new("/work/project"),
        )
        .with_hooks(vec![Arc::new(Veto)]),
    );
    Fixture { pipeline, recorder }
}

struct Row {
    tool: &'static str,
    args: &'static str,
    surface: Surface,
    profile: &'static str,
    answer: Answer,
    stage: Stage,
    code: RejectCode,
}

const fn row(tool: &'static str, args: &'static str, code: RejectCode) -> Row {
    Row {
        tool,
        args,
        surface: Surface::Chat,
        profile: "default",
        answer: Answer::Allow,
        stage: Stage::Normalize,
        code,
    }
}

fn rows() -> Vec<Row> {
    let ok = r#"{"path": "a.txt"}"#;
    let mut rows = vec![
        row("bad name", ok, RejectCode::Malformed),
        row("read", "[1, 2]", RejectCode::Malformed),
        row("read", r#"{"path": "a.txt""#, RejectCode::Malformed),
        row("read", "", RejectCode::TooLarge), // arguments replaced below
        row("nope", ok, RejectCode::UnknownTool),
        row("ops_only", ok, RejectCode::NotInProfile),
        Row {
            profile: "readonly",
            ..row("write", ok, RejectCode::NotInProfile)
        },
        row("off", ok, RejectCode::Disabled),
        row("read@2", ok, RejectCode::VersionIncompatible),
        row("multi", ok, RejectCode::AmbiguousVersion),
        row("pinned", ok, RejectCode::StaleDescriptor),
        row("gone", ok, RejectCode::Unavailable),
        row("read", "{}", RejectCode::MissingInput),
        row("read", r#"{"path": 7}"#, RejectCode::InvalidType),
        row(
            "read",
            r#"{"path": "a", "file_path": "b"}"#,
            RejectCode::UnknownArgument,
        ),
        row(
            "read",
            r#"{"path": "a", "count": -1}"#,
            RejectCode::ConstraintViolation,
        ),
        row(
            "read",
            r#"{"path": "../../etc/passwd"}"#,
            RejectCode::PathOutsideWorkspace,
        ),
        row(
            "write",
            r#"{"path": "unread.txt"}"#,
            RejectCode::ReadRequired,
        ),
        row(
            "write",
            r#"{"path": "changed.txt"}"#,
            RejectCode::StaleWrite,
        ),
        row(
            "write",
            r#"{"path": "unconfinable"}"#,
            RejectCode::SandboxUnavailable,
        ),
        row("cli_only", ok, RejectCode::SurfaceNotAllowed),
        row("fetch", ok, RejectCode::PolicyDenied),
        row("vetoed", ok, RejectCode::HookDenied),
        row("unchecked", ok, RejectCode::HookFailed),
        Row {
            answer: Answer::Deny,
            ..row("write", ok, RejectCode::ApprovalDenied)
        },
        Row {
            answer: Answer::AllowExpiring,
            ..row("write", ok, RejectCode::ApprovalExpired)
        },
        Row {
            answer: Answer::AllowRevoked,
            ..row("write", ok, RejectCode::ApprovalInvalid)
        },
    ];
    let table = documented_codes();
    for row in &mut rows {
        row.stage = table[row.code.as_str()];
    }
    rows
}

/// Each rejection code with the stage that issues it, from the table written from the
/// documentation (`tests/corpus/reject_codes.jsonl`), not from the code under test.
fn documented_codes() -> BTreeMap<String, Stage> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/corpus/reject_codes.jsonl"
    );
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            let stage: Stage = serde_json::from_value(row["stage"].clone()).unwrap();
            (row["code"].as_str().unwrap().to_owned(), stage)
        })
        .collect()
}

fn run_row(row: &Row) -> (Outcome, bool) {
    let fixture = fixture(row.answer);
    let args = if row.code == RejectCode::TooLarge {
        format!(r#"{{"path": "{}"}}"#, "x".repeat(2 * 1024 * 1024))
    } else {
        row.args.to_owned()
    };
    let mut raw = RawCall::text(row.tool, args, row.surface).in_profile(row.profile);
    raw.request_id = Some("req-1".into());
    let outcome = if row.answer == Answer::AllowRevoked {
        // Revoked in the console after the person allowed it, before it ran.
        fixture.pipeline.enter(|stages| {
            let authorized = stages.authorize_call(raw).unwrap();
            let id = authorized.approval_id().unwrap();
            assert_eq!(fixture.pipeline.grants().revoke(id), Ok(true));
            let cx = ExecContext::new(Duration::from_secs(1), Cancel::new());
            stages.execute(authorized, &cx)
        })
    } else {
        fixture.pipeline.run(raw)
    };
    (outcome, fixture.recorder.entered.load(Ordering::SeqCst))
}

#[test]
fn every_rejection_code_stops_before_the_executor() {
    let mut seen = BTreeSet::new();
    for row in rows() {
        let (outcome, entered) = run_row(&row);
        let rejection = outcome
            .rejection()
            .unwrap_or_else(|| panic!("{} {} was not rejected: {outcome:?}", row.tool, row.args));
        assert_eq!(
            (rejection.stage(), rejection.code()),
            (row.stage, row.code),
            "{} {}: {rejection}",
            row.tool,
            row.args
        );
        assert_eq!(outcome.status(), Status::Rejected);
        assert!(!entered, "{} {}: executor was entered", row.tool, row.args);
        assert!(
            !outcome.evidence().durations_ns.contains_key("execute"),
            "{} {}: evidence records an execution",
            row.tool,
            row.args
        );
        // Arguments that passed validation are in the evidence as a digest, never as values.
        assert_eq!(
            outcome.evidence().argument_digest.is_some(),
            row.stage > Stage::Validate,
            "{} {}",
            row.tool,
            row.args
        );
        assert!(outcome.output().is_none());
        assert_eq!(outcome.evidence().request_id.as_deref(), Some("req-1"));
        seen.insert(row.code);
    }
    // The headless default covers approval_required; every other code is in the table.
    seen.insert(RejectCode::ApprovalRequired);
    let seen: BTreeSet<&str> = seen.iter().map(|code| code.as_str()).collect();
    let documented = documented_codes();
    let all: BTreeSet<&str> = documented.keys().map(String::as_str).collect();
    assert_eq!(seen, all, "every documented rejection code needs a row");
}

#[test]
fn headless_approval_is_required_and_refused() {
    let (pipeline, recorder) = one_writer(Arc::new(HeadlessBroker));
    let outcome = pipeline.run(RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat));
    let rejection = outcome.rejection().unwrap();
    assert_eq!(
        (rejection.stage(), rejection.code()),
        (Stage::Approve, RejectCode::ApprovalRequired)
    );
    assert!(!recorder.entered.load(Ordering::SeqCst));
}

#[test]
fn an_approved_call_runs_once_and_a_replayed_grant_is_refused() {
    let broker = Arc::new(TestBroker::new(Answer::Allow));
    let (pipeline, recorder) = one_writer(broker.clone());
    let pipeline = broker.wire(pipeline);
    let call = || RawCall::text("write", r#"{"path": "a.txt"}"#, Surface::Chat);
    let first = pipeline.run(call());
    assert_eq!(first.status(), Status::Completed, "{first:?}");
    let id = first.evidence().approval_id.clone().unwrap();
    assert!(recorder.entered.swap(false, Ordering::SeqCst));
    // The grant the first call redeemed, handed in again for the same inputs: refused.
    let digest = broker.asked.lock().unwrap().pop().unwrap();
    let replayed = Grant {
        id: id.clone(),
        digest: digest.clone(),
        scope: GrantScope::Once,
        workspace: WorkspaceId::new("/w").digest().to_owned(),
        tool: "write".into(),
        expires_at_ms: u64::MAX,
    };
    assert_eq!(
        pipeline
            .grants()
            .redeem(&replayed, &digest, &replayed.workspace, "write"),
        Err(GrantRefusal::Used)
    );
    assert!(!recorder.entered.load(Ordering::SeqCst));
    // A second call is a second approval, under a grant of its own.
    let second = pipeline.run(call());
    assert_eq!(second.status(), Status::Completed, "{second:?}");
    assert_ne!(second.evidence().approval_id.as_deref(), Some(id.as_str()));
    assert_eq!(broker.asked.lock().unwrap().len(), 1, "asked again");
}

/// Allows every call, and meanwhile uses its handle on the pipeline's ledger to slip in a
/// grant of its own, for other inputs: what a broker that tried to widen a decision could do.
#[derive(Debug)]
struct Forger {
    grants: Arc<GrantLedger>,
    forged: Mutex<Vec<(Grant, ApprovalDigest)>>,
}

impl ApprovalBroker for Forger {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let mut other = request.clone();
        other.arguments = json!({"path": "elsewhere.txt"});
        other.digest = ApprovalDigest::compute(
            &request.tool,
            &request.version,
            &other.arguments,
            &request.workspace,
            &[],
            &[],
        );
        let grant = self
            .grants
            .grant(&other, GrantScope::Once, GrantTimes::default())
            .unwrap();
        self.forged
            .lock()
            .unwrap()
            .push((grant, request.digest.clone()));
        ApprovalDecision::AllowOnce
    }
}

#[test]
fn a_broker_cannot_make_a_call_run_twice_or_for_other_inputs() {
    let grants = Arc::new(GrantLedger::default());
    let broker = Arc::new(Forger {
        grants: Arc::clone(&grants),
        forged: Mutex::new(Vec::new()),
    });
    let (pipeline, recorder) = one_writer(broker.clone());
    let pipeline = pipeline.with_grants(Arc::clone(&grants));
    let workspace = WorkspaceId::new("/w");
    let outcome = pipeline.run(RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    assert!(recorder.entered.swap(false, Ordering::SeqCst));
    let ran_under = outcome.evidence().approval_id.clone().unwrap();
    let (forged, digest) = broker.forged.lock().unwrap().pop().unwrap();
    assert_ne!(
        ran_under, forged.id,
        "the call ran under the pipeline's grant"
    );
    // The grant the broker slipped in is for other inputs: the ledger refuses it for this
    // call, and the call's own grant, once redeemed, is refused a second time.
    assert_eq!(
        grants.redeem(&forged, &digest, workspace.digest(), "write"),
        Err(GrantRefusal::Mismatch)
    );
    let own = Grant {
        id: ran_under,
        ..forged.clone()
    };
    assert_eq!(
        grants.redeem(&own, &digest, workspace.digest(), "write"),
        Err(GrantRefusal::Used)
    );
    // Every call is asked, and runs, once: nothing a broker kept lets it run again.
    let again = pipeline.run(RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(again.status(), Status::Completed, "{again:?}");
    assert_eq!(broker.forged.lock().unwrap().len(), 1);
    assert!(recorder.entered.load(Ordering::SeqCst));
}

#[test]
fn grants_are_rechecked_immediately_before_execution() {
    // The grant is valid when stage 6 passes and revoked before stage 7: the call must not run.
    let broker = Arc::new(TestBroker::new(Answer::Allow));
    let (pipeline, recorder) = one_writer(broker.clone());
    let pipeline = broker.wire(pipeline);
    pipeline.enter(|stages| {
        let authorized = stages
            .authorize_call(RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat))
            .unwrap();
        let cx = ExecContext::new(Duration::from_secs(1), Cancel::new());
        let call = || RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat);

        // Revoked after approval, before execution.
        let revoked = stages.authorize_call(call()).unwrap();
        assert_eq!(
            pipeline.grants().revoke(revoked.approval_id().unwrap()),
            Ok(true)
        );
        let outcome = stages.execute(revoked, &cx);
        assert_eq!(
            outcome.rejection().unwrap().code(),
            RejectCode::ApprovalInvalid
        );

        // Expired after approval, before execution.
        broker.clock.0.fetch_add(120_000, Ordering::SeqCst);
        let outcome = stages.execute(authorized, &cx);
        let rejection = outcome.rejection().unwrap();
        assert_eq!(
            (rejection.stage(), rejection.code()),
            (Stage::Approve, RejectCode::ApprovalExpired)
        );
        assert!(!recorder.entered.load(Ordering::SeqCst));

        // A fresh approval runs.
        let fresh = stages.authorize_call(call()).unwrap();
        assert_eq!(stages.execute(fresh, &cx).status(), Status::Completed);
    });
    assert!(recorder.entered.load(Ordering::SeqCst));
}

#[test]
fn misspelt_argument_hint_reaches_the_outcome() {
    let fixture = fixture(Answer::Allow);
    let outcome = fixture.pipeline.run(RawCall::text(
        "read",
        r#"{"file_path": "a"}"#,
        Surface::Chat,
    ));
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectCode::UnknownArgument);
    assert_eq!(rejection.hint(), Some("did you mean `path`?"));
    assert_eq!(
        rejection.details().len(),
        2,
        "unknown and missing are both reported"
    );
}

#[test]
fn unknown_tool_hint_names_a_visible_tool() {
    let fixture = fixture(Answer::Allow);
    let outcome = fixture
        .pipeline
        .run(RawCall::text("reed", "{}", Surface::Chat));
    assert_eq!(
        outcome.rejection().unwrap().hint(),
        Some("did you mean `read`?")
    );
}

#[test]
fn completed_outcomes_carry_evidence_without_values() {
    let fixture = fixture(Answer::Allow);
    let secret_path = "secret-dir/AKIAIOSFODNN7EXAMPLE.txt";
    let outcome = fixture.pipeline.run(RawCall::text(
        "read",
        json!({ "path": secret_path }).to_string(),
        Surface::Chat,
    ));
    assert_eq!(outcome.status(), Status::Completed);
    let evidence = outcome.evidence();
    assert_eq!(evidence.tool, "read");
    assert_eq!(evidence.version.as_deref(), Some("1.0"));
    assert_eq!(evidence.effect, Some(EffectClass::ReadOnly));
    assert_eq!(evidence.argument_names, ["path"]);
    assert!(evidence.argument_digest.is_some());
    assert_eq!(evidence.policies, ["default-read-only"]);
    assert!(evidence.durations_ns.contains_key("execute"));
    // The output echoes the key-shaped path and the resources name it: both are redacted and
    // counted.
    assert_eq!(evidence.redactions, 2);
    assert_eq!(evidence.resources, ["path:secret-dir/[REDACTED].txt"]);
    let text = serde_json::to_string(&outcome).unwrap();
    assert!(!text.contains("AKIAIOSFODNN7EXAMPLE"), "{text}");
    assert!(
        !text.contains("/work/project"),
        "no absolute workspace path in the outcome"
    );
}

#[test]
fn explain_reports_each_stage_and_never_executes() {
    let fixture = fixture(Answer::Allow);
    let reports =
        fixture
            .pipeline
            .explain(RawCall::text("write", r#"{"path": "a"}"#, Surface::Chat));
    let decisions: Vec<(Stage, &str)> = reports.iter().map(|r| (r.stage, r.decision)).collect();
    assert_eq!(
        decisions,
        [
            (Stage::Normalize, "pass"),
            (Stage::Resolve, "pass"),
            (Stage::Validate, "pass"),
            (Stage::Classify, "pass"),
            (Stage::Authorize, "pass"),
            (Stage::Approve, "ask"),
            (Stage::Execute, "skip"),
        ]
    );
    assert!(!fixture.recorder.entered.load(Ordering::SeqCst));
    let reports =
        fixture
            .pipeline
            .explain(RawCall::text("fetch", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(
        reports.last().map(|r| (r.stage, r.decision)),
        Some((Stage::Authorize, "reject"))
    );
}
