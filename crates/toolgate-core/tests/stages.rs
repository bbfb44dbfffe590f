//! The stage values through the public API: what each stage hands the next, and what an
//! executor is shown.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolgate_core::*;

/// What an executor saw of the call it ran.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    arguments: Map<String, Value>,
    limits: Limits,
    effect: EffectClass,
    resources: Vec<String>,
    surface: Surface,
    actor: String,
    tool: String,
    approval_id: Option<String>,
}

#[derive(Debug, Default)]
struct Witness {
    seen: Mutex<Option<Seen>>,
}

impl TypedExecutor for Witness {
    type Args = Map<String, Value>;
    type Plan = ();

    fn plan(&self, arguments: Map<String, Value>) -> ((), Classification) {
        let path = arguments
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let classification = Classification {
            // A path under `bin/` makes the call irreversible, whatever the entry says.
            effect: path
                .starts_with("bin/")
                .then_some(EffectClass::Irreversible),
            resources: vec![Resource::Path(path.clone())],
            paths: vec![path],
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
        *self.seen.lock().unwrap() = Some(Seen {
            arguments: call.arguments().clone(),
            limits: *call.limits(),
            effect: call.effect(),
            resources: call
                .classification()
                .resources
                .iter()
                .map(ToString::to_string)
                .collect(),
            surface: call.surface(),
            actor: call.actor().to_owned(),
            tool: call.tool().entry().name.clone(),
            approval_id: call.approval_id().map(str::to_owned),
        });
        Ok(ToolOutput::new(json!("done")))
    }
}

/// Allows everything once.
#[derive(Debug)]
struct Yes;

impl ApprovalBroker for Yes {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

const ROOT: &str = "/home/someone/project";

fn pipeline(witness: Arc<Witness>, policy: Option<&str>) -> Pipeline {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let mut builder = RegistryBuilder::new();
    for (name, effect) in [
        ("look", EffectClass::ReadOnly),
        ("change", EffectClass::LocalWrite),
    ] {
        let mut entry = ToolEntry::new(name, "test");
        entry.effect = Some(effect);
        entry.limits = Limits {
            timeout_ms: 1234,
            default_timeout_ms: None,
            max_output_bytes: 5678,
            max_results: 9,
        };
        builder
            .register(
                Descriptor::new(name, "t", schema.clone()),
                entry,
                witness.clone(),
            )
            .unwrap();
    }
    let registry = builder.build().unwrap();
    let mut sources = vec![("default", policy::DEFAULT_POLICY)];
    if let Some(text) = policy {
        sources.push(("operator", text));
    }
    let mut engine = PolicyEngine::from_sources(&sources).unwrap();
    engine.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(engine),
        Arc::new(Yes),
        WorkspaceId::new(ROOT),
    )
}

#[test]
fn the_executor_sees_the_authorized_call_and_nothing_else() {
    let witness = Arc::new(Witness::default());
    let p = pipeline(witness.clone(), None);
    let outcome =
        p.run(RawCall::text("change", r#"{"path": "src/a.rs"}"#, Surface::Console).by("alice"));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let seen = witness.seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        seen,
        Seen {
            arguments: json!({"path": "src/a.rs"}).as_object().unwrap().clone(),
            limits: Limits {
                timeout_ms: 1234,
                default_timeout_ms: None,
                max_output_bytes: 5678,
                max_results: 9
            },
            effect: EffectClass::LocalWrite,
            resources: vec!["path:src/a.rs".to_owned()],
            surface: Surface::Console,
            actor: "alice".to_owned(),
            tool: "change".to_owned(),
            approval_id: outcome.evidence().approval_id.clone(),
        }
    );
    assert!(seen.approval_id.is_some());
}

#[test]
fn classification_can_raise_the_effect_class_but_never_lower_it() {
    let witness = Arc::new(Witness::default());
    let p = pipeline(witness.clone(), None);
    // `look` is read-only, but a path under bin/ makes it irreversible: approval is asked.
    let outcome = p.run(RawCall::text(
        "look",
        r#"{"path": "bin/tool"}"#,
        Surface::Chat,
    ));
    assert_eq!(outcome.evidence().effect, Some(EffectClass::Irreversible));
    assert!(
        outcome.evidence().approval_id.is_some(),
        "irreversible calls need approval"
    );
    let outcome = p.run(RawCall::text("look", r#"{"path": "src/a"}"#, Surface::Chat));
    assert_eq!(outcome.evidence().effect, Some(EffectClass::ReadOnly));
    assert!(outcome.evidence().approval_id.is_none());
}

#[test]
fn permitted_says_whether_approval_will_be_asked() {
    let p = pipeline(Arc::new(Witness::default()), None);
    let permitted = |tool: &str| {
        p.enter(|s| {
            let normalized = s
                .normalize(RawCall::text(tool, r#"{"path": "a"}"#, Surface::Chat))
                .unwrap();
            let validated = s.validate(s.resolve(normalized).unwrap()).unwrap();
            s.authorize(s.classify(validated))
                .unwrap()
                .approval_required()
        })
    };
    assert!(!permitted("look"));
    assert!(permitted("change"));
}

#[test]
fn the_workspace_is_a_digest_in_evidence_and_in_policy_context() {
    let root_digest = sha256_digest(ROOT.as_bytes()).to_string();
    assert_eq!(WorkspaceId::new(ROOT).digest(), root_digest);
    let only_here = format!(
        r#"@id("other-workspace") forbid (principal, action, resource) unless {{ context.workspace == "{root_digest}" }};"#
    );
    let p = pipeline(Arc::new(Witness::default()), Some(&only_here));
    let outcome = p.run(RawCall::text("look", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    assert_eq!(outcome.evidence().workspace, root_digest);
    assert!(!serde_json::to_string(&outcome).unwrap().contains(ROOT));

    let elsewhere = r#"@id("other-workspace") forbid (principal, action, resource) unless { context.workspace == "sha256:elsewhere" };"#;
    let p = pipeline(Arc::new(Witness::default()), Some(elsewhere));
    let outcome = p.run(RawCall::text("look", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(outcome.rejection().unwrap().policies(), ["other-workspace"]);
}

#[test]
fn exec_context_stops_on_cancel_or_deadline_only() {
    let cancelled = Cancel::new();
    let running = ExecContext::new(Duration::from_secs(60), cancelled.clone());
    assert!(!running.should_stop());
    cancelled.cancel();
    assert!(running.should_stop());
    let late = ExecContext::new(Duration::ZERO, Cancel::new());
    assert!(late.should_stop());
    assert!(late.deadline() <= std::time::Instant::now());
}

/// Remembers every request; allows once, or for the workspace when offered that.
#[derive(Debug)]
struct Recording {
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl ApprovalBroker for Recording {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.requests.lock().unwrap().push(request.clone());
        match request.scope_allowed {
            GrantScope::Once => ApprovalDecision::AllowOnce,
            GrantScope::WorkspaceAction => ApprovalDecision::AllowWorkspace,
        }
    }
}

fn recording_pipeline(entries: Vec<ToolEntry>) -> (Pipeline, Arc<Recording>) {
    let broker = Arc::new(Recording {
        requests: Mutex::new(Vec::new()),
    });
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let mut builder = RegistryBuilder::new();
    for entry in entries {
        let descriptor = Descriptor::new(entry.name.clone(), "t", schema.clone());
        builder
            .register(descriptor, entry, Arc::new(Witness::default()))
            .unwrap();
    }
    let p = Pipeline::new(
        Arc::new(builder.build().unwrap()),
        Arc::new(PolicyEngine::default_policy().unwrap()),
        broker.clone(),
        WorkspaceId::new(ROOT),
    );
    (p, broker)
}

fn entry(name: &str, effect: EffectClass, approval: ApprovalMode) -> ToolEntry {
    let mut entry = ToolEntry::new(name, "test");
    entry.effect = Some(effect);
    entry.approval = approval;
    entry
}

#[test]
fn only_file_edits_may_be_remembered_for_the_workspace() {
    let (p, broker) = recording_pipeline(vec![
        entry("edit", EffectClass::LocalWrite, ApprovalMode::Policy),
        entry("edit_each", EffectClass::LocalWrite, ApprovalMode::EachCall),
        entry("run", EffectClass::Irreversible, ApprovalMode::Policy),
    ]);
    for tool in ["edit", "edit_each", "run"] {
        for path in ["a", "b"] {
            let outcome = p.run(RawCall::text(
                tool,
                json!({ "path": path }).to_string(),
                Surface::Chat,
            ));
            assert_eq!(outcome.status(), Status::Completed, "{tool}: {outcome:?}");
        }
    }
    let asked: Vec<(String, GrantScope)> = broker
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| (r.tool.clone(), r.scope_allowed))
        .collect();
    // `edit` was asked once, with a workspace scope that then stood for the second call;
    // `edit_each` and `run` were asked every time, for that call only.
    assert_eq!(
        asked,
        [
            ("edit".to_owned(), GrantScope::WorkspaceAction),
            ("edit_each".to_owned(), GrantScope::Once),
            ("edit_each".to_owned(), GrantScope::Once),
            ("run".to_owned(), GrantScope::Once),
            ("run".to_owned(), GrantScope::Once),
        ]
    );
}

#[test]
fn only_a_call_that_asks_a_person_says_it_waits_for_one() {
    let (p, broker) = recording_pipeline(vec![entry(
        "edit",
        EffectClass::LocalWrite,
        ApprovalMode::Policy,
    )]);
    let waited = Mutex::new(Vec::new());
    let watch = Watch {
        awaiting_approval: &|call_id| waited.lock().unwrap().push(call_id.to_owned()),
        ..Watch::default()
    };
    for path in ["a", "b"] {
        let raw = RawCall::text("edit", json!({ "path": path }).to_string(), Surface::Chat);
        let outcome = p.run_with(raw, Cancel::new(), &watch);
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    }
    // The first call asked, and its answer stood for the workspace; the second was covered
    // by that grant, and no one was asked or told of a wait.
    let asked: Vec<String> = broker
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.call_id.clone())
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(waited.into_inner().unwrap(), asked);
}

#[test]
fn standing_grants_never_cover_commands() {
    // A workspace grant standing for `run` (say, left by an older version) is not used: every
    // irreversible call is asked afresh.
    let (p, broker) = recording_pipeline(vec![entry(
        "run",
        EffectClass::Irreversible,
        ApprovalMode::Policy,
    )]);
    let request = ApprovalRequest {
        digest: ApprovalDigest::compute("run", "1.0", &json!({}), "w", &[], &[]),
        tool: "run".into(),
        version: "1.0".into(),
        effect: EffectClass::LocalWrite,
        surface: Surface::Chat,
        actor: "local".into(),
        workspace: WorkspaceId::new(ROOT).digest().to_owned(),
        arguments: json!({}),
        resources: vec![],
        preview: None,
        scope_allowed: GrantScope::WorkspaceAction,
        policies: vec![],
        approval_mode: ApprovalMode::Policy,
        hook_asks: Vec::new(),
        client: None,
        call_id: String::new(),
        cancel: Cancel::new(),
    };
    p.grants()
        .grant(&request, GrantScope::WorkspaceAction, GrantTimes::default())
        .unwrap();
    assert!(
        p.grants()
            .standing(WorkspaceId::new(ROOT).digest(), "run")
            .is_some()
    );
    let outcome = p.run(RawCall::text("run", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(outcome.status(), Status::Completed);
    assert_eq!(
        broker.requests.lock().unwrap().len(),
        1,
        "asked, not waved through"
    );
}

/// Fails with a secret in its message, or returns `size` bytes of JSON, or sleeps.
#[derive(Debug)]
enum Scripted {
    FailWithSecret,
    Output(usize),
    Text(String),
    Sleep(Duration),
}

impl Executor for Scripted {
    fn execute(&self, _call: &Call<'_, Self>, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        match self {
            Scripted::FailWithSecret => Err(ToolError::new(
                ToolErrorCode::IoError,
                "connecting with token ghp_0123456789abcdefghijABCDEFGHIJ012345 failed",
            )),
            // A JSON string of `size` bytes: the quotes and size - 2 letters.
            Scripted::Output(size) => Ok(ToolOutput::new(json!("x".repeat(size - 2)))),
            Scripted::Text(text) => Ok(ToolOutput::new(json!(text))),
            Scripted::Sleep(d) => {
                std::thread::sleep(*d);
                Ok(ToolOutput::new(json!(null)))
            }
        }
    }
}

fn scripted(executor: Scripted, max_output_bytes: usize) -> Pipeline {
    let mut entry = ToolEntry::new("s", "test");
    entry.effect = Some(EffectClass::ReadOnly);
    entry.limits.max_output_bytes = max_output_bytes;
    let mut builder = RegistryBuilder::new();
    builder
        .register(
            Descriptor::new("s", "t", json!({"type": "object"})),
            entry,
            Arc::new(executor),
        )
        .unwrap();
    Pipeline::new(
        Arc::new(builder.build().unwrap()),
        Arc::new(PolicyEngine::default_policy().unwrap()),
        Arc::new(HeadlessBroker),
        WorkspaceId::new(ROOT),
    )
}

#[test]
fn tool_errors_are_redacted_and_counted() {
    let outcome =
        scripted(Scripted::FailWithSecret, 1000).run(RawCall::text("s", "{}", Surface::Chat));
    assert_eq!(outcome.status(), Status::Failed);
    let error = outcome.error().unwrap();
    assert_eq!(error.message, "connecting with token [REDACTED] failed");
    assert_eq!(outcome.evidence().redactions, 1);
}

#[test]
fn output_over_the_limit_fails_closed() {
    let at = scripted(Scripted::Output(100), 100).run(RawCall::text("s", "{}", Surface::Chat));
    assert_eq!(at.status(), Status::Completed, "{at:?}");
    assert_eq!(at.evidence().output_bytes, 100);
    let over = scripted(Scripted::Output(101), 100).run(RawCall::text("s", "{}", Surface::Chat));
    assert_eq!(over.status(), Status::Failed);
    assert!(over.output().is_none());
    assert_eq!(over.error().unwrap().code, "output_too_large");
    let under = scripted(Scripted::Output(99), 100).run(RawCall::text("s", "{}", Surface::Chat));
    assert_eq!(under.status(), Status::Completed);
}

/// What is thrown away is not redacted first: an output over the limit as the tool returned
/// it costs stage 8 its measuring, not a pass of every secret rule over it.
#[test]
fn an_output_over_the_limit_is_refused_before_it_is_redacted() {
    let secrets = "token ghp_0123456789abcdefghijABCDEFGHIJ012345\n".repeat(40);
    let limit = secrets.len() / 2;
    let over = scripted(Scripted::Text(secrets.clone()), limit).run(RawCall::text(
        "s",
        "{}",
        Surface::Chat,
    ));
    assert_eq!(over.error().unwrap().code, "output_too_large", "{over:?}");
    assert_eq!(over.evidence().redactions, 0, "{over:?}");
    let within =
        scripted(Scripted::Text(secrets), 1 << 20).run(RawCall::text("s", "{}", Surface::Chat));
    assert_eq!(within.status(), Status::Completed, "{within:?}");
    assert_eq!(within.evidence().redactions, 40, "{within:?}");
}

#[test]
fn durations_are_measured() {
    let outcome = scripted(Scripted::Sleep(Duration::from_millis(5)), 1000).run(RawCall::text(
        "s",
        "{}",
        Surface::Chat,
    ));
    let execute = outcome.evidence().durations_ns["execute"];
    assert!(execute >= 5_000_000, "{execute}");
    assert!(outcome.evidence().total_ns >= execute);
    assert!(outcome.evidence().total_ns < 5_000_000_000);
    let stages: Vec<&str> = outcome
        .evidence()
        .durations_ns
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        stages,
        [
            "approve",
            "authorize",
            "classify",
            "describe",
            "execute",
            "normalize",
            "resolve",
            "validate"
        ]
    );
}

/// A registry of `look` alone, as `pipeline` registers it but described as `description`.
fn registry_of_look(description: &str, witness: Arc<Witness>) -> Registry {
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let mut entry = ToolEntry::new("look", "test");
    entry.effect = Some(EffectClass::ReadOnly);
    entry.limits = Limits {
        timeout_ms: 1234,
        default_timeout_ms: None,
        max_output_bytes: 5678,
        max_results: 9,
    };
    let mut builder = RegistryBuilder::new();
    builder
        .register(Descriptor::new("look", description, schema), entry, witness)
        .unwrap();
    builder.build().unwrap()
}

#[test]
fn a_caller_may_narrow_what_resolves_never_widen_it_and_hears_of_approval_and_execution() {
    let witness = Arc::new(Witness::default());
    let p = pipeline(witness.clone(), None);
    let events = Mutex::new(Vec::new());
    // The caller was shown only `look`, as a registry that holds nothing else lists it.
    let shown = Shown::of(&registry_of_look("t", witness.clone()), "default");
    let watch = Watch {
        shown: Some(&shown),
        awaiting_approval: &|_| events.lock().unwrap().push("approval"),
        executing: &|| events.lock().unwrap().push("executing"),
        notices: None,
    };
    let run = |tool: &str| {
        p.run_with(
            RawCall::text(tool, r#"{"path": "a"}"#, Surface::Chat),
            Cancel::new(),
            &watch,
        )
    };

    let refused = run("change");
    let rejection = refused.rejection().unwrap();
    assert_eq!(
        (rejection.stage(), rejection.code(), rejection.message()),
        (
            Stage::Resolve,
            RejectCode::UnknownTool,
            "no tool `change` in this session's tool list"
        )
    );
    assert_eq!(
        refused.evidence().tool,
        "change",
        "the refusal has its evidence"
    );
    assert!(refused.evidence().durations_ns.contains_key("resolve"));
    assert!(witness.seen.lock().unwrap().is_none(), "never executed");
    assert!(events.lock().unwrap().is_empty());

    // A name neither shown nor registered is unknown, in the caller's words.
    let unknown = run("nothing");
    let rejection = unknown.rejection().unwrap();
    assert_eq!(rejection.code(), RejectCode::UnknownTool);
    assert_eq!(
        rejection.message(),
        "no tool `nothing` in this session's tool list"
    );
    // A tool shown as it was before it changed is stale: what the caller read of it no longer
    // holds.
    let before = Shown::of(&registry_of_look("as it was", witness.clone()), "default");
    let stale = p.run_with(
        RawCall::text("look", r#"{"path": "a"}"#, Surface::Chat),
        Cancel::new(),
        &Watch {
            shown: Some(&before),
            ..Watch::default()
        },
    );
    assert_eq!(
        stale.rejection().map(|r| (r.stage(), r.code())),
        Some((Stage::Resolve, RejectCode::StaleDescriptor))
    );

    let looked = run("look");
    assert_eq!(looked.status(), Status::Completed, "{looked:?}");
    assert_eq!(*events.lock().unwrap(), ["executing"]);

    // The same pipeline, its caller shown everything: `change` resolves, waits for approval,
    // runs.
    let changed = p.run_with(
        RawCall::text("change", r#"{"path": "a"}"#, Surface::Chat),
        Cancel::new(),
        &Watch {
            awaiting_approval: &|_| events.lock().unwrap().push("approval"),
            executing: &|| events.lock().unwrap().push("executing"),
            ..Watch::default()
        },
    );
    assert_eq!(changed.status(), Status::Completed, "{changed:?}");
    assert_eq!(
        *events.lock().unwrap(),
        ["executing", "approval", "executing"]
    );
}

/// Waits for the call's cancellation, then answers as a broker that was told to stop; or, when
/// told to, answers that time ran out.
#[derive(Debug)]
struct Waiting {
    expire: bool,
    seen: Mutex<Vec<ApprovalRequest>>,
}

impl ApprovalBroker for Waiting {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.seen.lock().unwrap().push(request.clone());
        if self.expire {
            return ApprovalDecision::Expired {
                reason: "nobody answered within 1 s".into(),
            };
        }
        // Woken by the cancellation itself, not by looking at it now and then.
        request
            .cancel
            .wait_until(Instant::now() + Duration::from_secs(60));
        ApprovalDecision::Unanswered {
            reason: "the call was cancelled".into(),
        }
    }
    fn can_allow(&self) -> bool {
        false
    }
}

fn waiting_pipeline(expire: bool) -> (Pipeline, Arc<Waiting>) {
    let broker = Arc::new(Waiting {
        expire,
        seen: Mutex::new(Vec::new()),
    });
    let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let mut builder = RegistryBuilder::new();
    builder
        .register(
            Descriptor::new("run", "t", schema),
            entry("run", EffectClass::Irreversible, ApprovalMode::EachCall),
            Arc::new(Witness::default()),
        )
        .unwrap();
    let p = Pipeline::new(
        Arc::new(builder.build().unwrap()),
        Arc::new(PolicyEngine::default_policy().unwrap()),
        broker.clone(),
        WorkspaceId::new(ROOT),
    );
    (p, broker)
}

#[test]
fn a_waiting_broker_sees_the_call_cancelled() {
    let (p, broker) = waiting_pipeline(false);
    let cancelled = Cancel::new();
    let run = std::thread::spawn({
        let cancelled = cancelled.clone();
        move || {
            p.run_cancellable(
                RawCall::text("run", r#"{"path": "a"}"#, Surface::Chat),
                cancelled,
            )
        }
    });
    while broker.seen.lock().unwrap().is_empty() {
        std::thread::sleep(Duration::from_millis(5));
    }
    cancelled.cancel();
    let outcome = run.join().unwrap();
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectCode::ApprovalRequired);
    assert!(rejection.message().contains("cancelled"), "{rejection:?}");
    let seen = broker.seen.lock().unwrap();
    assert_eq!(seen[0].approval_mode, ApprovalMode::EachCall);
    assert_eq!(
        seen[0].call_id,
        outcome.evidence().call_id,
        "the request names the call that waits"
    );
    assert!(
        !seen[0].policies.is_empty(),
        "the permitting policy is named"
    );
}

#[test]
fn an_unanswered_request_that_ran_out_of_time_is_approval_expired() {
    let (p, _) = waiting_pipeline(true);
    let outcome = p.run(RawCall::text("run", r#"{"path": "a"}"#, Surface::Chat));
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectCode::ApprovalExpired);
    assert!(rejection.message().contains("within 1 s"), "{rejection:?}");
}
