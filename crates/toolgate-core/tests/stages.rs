//! The stage values through the public API: what each stage hands the next, and what an
//! executor is shown.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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

impl Executor for Witness {
    fn classify(&self, arguments: &Map<String, Value>) -> Classification {
        let path = arguments
            .get("path")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        Classification {
            // A path under `bin/` makes the call irreversible, whatever the entry says.
            effect: path
                .starts_with("bin/")
                .then_some(EffectClass::Irreversible),
            resources: vec![format!("path:{path}")],
            paths: vec![path],
            ..Classification::default()
        }
    }

    fn execute(&self, call: &Authorized, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        *self.seen.lock().unwrap() = Some(Seen {
            arguments: call.arguments().clone(),
            limits: *call.limits(),
            effect: call.effect(),
            resources: call.classification().resources.clone(),
            surface: call.surface(),
            actor: call.actor().to_owned(),
            tool: call.tool().entry.name.clone(),
            approval_id: call.approval_id().map(str::to_owned),
        });
        Ok(ToolOutput::new(json!("done")))
    }
}

/// Grants everything once, for a minute.
#[derive(Debug)]
struct Yes(GrantLedger);

impl ApprovalBroker for Yes {
    fn request(&self, request: &ApprovalRequest) -> ApprovalResponse {
        ApprovalResponse::Grant(
            self.0
                .issue(request, GrantScope::Once, Duration::from_secs(60)),
        )
    }
    fn redeem(&self, g: &Grant, d: &ApprovalDigest, w: &str, t: &str) -> Result<(), GrantRefusal> {
        self.0.redeem(g, d, w, t)
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
        Arc::new(Yes(GrantLedger::new(Arc::new(SystemClock)))),
        WorkspaceId::new(ROOT),
    )
}

#[test]
fn the_executor_sees_the_authorized_call_and_nothing_else() {
    let witness = Arc::new(Witness::default());
    let p = pipeline(witness.clone(), None);
    let outcome =
        p.run(RawCall::text("change", r#"{"path": "src/a.rs"}"#, Surface::Console).by("alice"));
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    let seen = witness.seen.lock().unwrap().clone().unwrap();
    assert_eq!(
        seen,
        Seen {
            arguments: json!({"path": "src/a.rs"}).as_object().unwrap().clone(),
            limits: Limits {
                timeout_ms: 1234,
                max_output_bytes: 5678,
                max_results: 9
            },
            effect: EffectClass::LocalWrite,
            resources: vec!["path:src/a.rs".to_owned()],
            surface: Surface::Console,
            actor: "alice".to_owned(),
            tool: "change".to_owned(),
            approval_id: outcome.evidence.approval_id.clone(),
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
    assert_eq!(outcome.evidence.effect, Some(EffectClass::Irreversible));
    assert!(
        outcome.evidence.approval_id.is_some(),
        "irreversible calls need approval"
    );
    let outcome = p.run(RawCall::text("look", r#"{"path": "src/a"}"#, Surface::Chat));
    assert_eq!(outcome.evidence.effect, Some(EffectClass::ReadOnly));
    assert!(outcome.evidence.approval_id.is_none());
}

#[test]
fn permitted_says_whether_approval_will_be_asked() {
    let p = pipeline(Arc::new(Witness::default()), None);
    let permitted = |tool: &str| {
        let normalized = p
            .normalize(RawCall::text(tool, r#"{"path": "a"}"#, Surface::Chat))
            .unwrap();
        let validated = p.validate(p.resolve(normalized).unwrap()).unwrap();
        p.authorize(p.classify(validated)).unwrap()
    };
    assert!(!permitted("look").approval_required());
    assert!(permitted("change").approval_required());
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
    assert_eq!(outcome.status, Status::Completed, "{outcome:?}");
    assert_eq!(outcome.evidence.workspace, root_digest);
    assert!(!serde_json::to_string(&outcome).unwrap().contains(ROOT));

    let elsewhere = r#"@id("other-workspace") forbid (principal, action, resource) unless { context.workspace == "sha256:elsewhere" };"#;
    let p = pipeline(Arc::new(Witness::default()), Some(elsewhere));
    let outcome = p.run(RawCall::text("look", r#"{"path": "a"}"#, Surface::Chat));
    assert_eq!(outcome.rejection.unwrap().policies, ["other-workspace"]);
}

#[test]
fn exec_context_stops_on_cancel_or_deadline_only() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let running = ExecContext::new(Duration::from_secs(60), cancelled.clone());
    assert!(!running.should_stop());
    cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(running.should_stop());
    let late = ExecContext::new(Duration::ZERO, Arc::new(AtomicBool::new(false)));
    assert!(late.should_stop());
    assert!(late.deadline() <= std::time::Instant::now());
}
