//! Typed executors through the public pipeline: arguments the schema accepts but the tool's
//! type refuses stop at stage 3; the plan stage 4 makes is the one stage 7 runs; a plan of
//! another type fails the call closed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::*;

/// The arguments of a tool whose schema accepts any object: the type is stricter.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CountArgs {
    path: String,
    lines: Option<u32>,
}

/// What stage 4 decided: the line count, and which plan this was.
#[derive(Debug, Clone, PartialEq)]
struct CountPlan {
    number: usize,
    path: String,
    lines: u32,
}

/// Counts how often each typed stage runs and remembers the plans it made and was handed.
#[derive(Debug, Default)]
struct Counter {
    checked: AtomicUsize,
    planned: Mutex<Vec<CountPlan>>,
    executed: Mutex<Vec<CountPlan>>,
}

impl TypedExecutor for Counter {
    type Args = CountArgs;
    type Plan = CountPlan;

    fn check(&self, arguments: &CountArgs) -> Vec<FieldError> {
        self.checked.fetch_add(1, Ordering::SeqCst);
        if arguments.path.starts_with('/') {
            return vec![FieldError::new(
                "/path",
                RejectCode::PathOutsideWorkspace,
                "absolute",
            )];
        }
        Vec::new()
    }

    fn plan(&self, arguments: CountArgs) -> (CountPlan, Classification) {
        let mut planned = self.planned.lock().unwrap();
        let plan = CountPlan {
            number: planned.len(),
            lines: arguments.lines.unwrap_or(10),
            path: arguments.path,
        };
        planned.push(plan.clone());
        let classification = Classification {
            resources: vec![Resource::Path(plan.path.clone())],
            paths: vec![plan.path.clone()],
            ..Classification::default()
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &CountPlan,
        call: &Call<'_, Self>,
        _: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        self.executed.lock().unwrap().push(plan.clone());
        Ok(ToolOutput::new(
            json!({"lines": plan.lines, "resources": call.classification().resources}),
        ))
    }
}

/// A pipeline over one read-only tool `count`, whose schema names three arguments of any
/// type and requires none, the default policy and no approver.
fn one_tool(executor: Arc<dyn Executor>) -> Pipeline {
    let mut builder = RegistryBuilder::new();
    let schema = json!({
        "type": "object",
        "properties": {"path": {}, "lines": {}, "extra": {}}
    });
    let descriptor = Descriptor::new("count", "Counts lines.", schema);
    let mut entry = ToolEntry::new("count", "reads");
    entry.effect = Some(EffectClass::ReadOnly);
    builder.register(descriptor, entry, executor).unwrap();
    let registry = builder.build().unwrap();
    let mut policy = PolicyEngine::default_policy().unwrap();
    policy.prepare(&registry).unwrap();
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(HeadlessBroker),
        WorkspaceId::new("/ws"),
    )
}

fn run(pipeline: &Pipeline, arguments: Value) -> Outcome {
    pipeline.run(RawCall::text("count", arguments.to_string(), Surface::Chat))
}

#[test]
fn arguments_the_schema_accepts_but_the_type_refuses_stop_at_stage_3() {
    let counter = Arc::new(Counter::default());
    let pipeline = one_tool(counter.clone());
    for (arguments, code, pointer) in [
        (
            json!({"path": "a.txt", "extra": 1}),
            RejectCode::UnknownArgument,
            "/extra",
        ),
        (json!({"lines": 3}), RejectCode::MissingInput, "/path"),
        (json!({"path": 7}), RejectCode::InvalidType, ""),
        (
            json!({"path": "a.txt", "lines": -1}),
            RejectCode::InvalidType,
            "",
        ),
    ] {
        let outcome = run(&pipeline, arguments.clone());
        let rejection = outcome.rejection().expect("rejected");
        assert_eq!(rejection.stage(), Stage::Validate, "{arguments}");
        assert_eq!(rejection.code(), code, "{arguments}: {rejection}");
        assert_eq!(rejection.details()[0].pointer, pointer, "{arguments}");
        assert!(
            rejection.details()[0]
                .message
                .starts_with("the arguments do not fit this tool"),
            "{}",
            rejection.details()[0].message
        );
        // Nothing the type refused reached the tool's own checks, let alone its plan.
        assert_eq!(outcome.evidence().resources, Vec::<String>::new());
    }
    assert_eq!(counter.checked.load(Ordering::SeqCst), 0);
    assert!(counter.planned.lock().unwrap().is_empty());
    // The tool's own check still runs on what parses, and still rejects at stage 3.
    let outcome = run(&pipeline, json!({"path": "/etc/passwd"}));
    assert_eq!(
        outcome.rejection().map(|r| r.code()),
        Some(RejectCode::PathOutsideWorkspace)
    );
    assert_eq!(counter.checked.load(Ordering::SeqCst), 1);
    assert!(counter.planned.lock().unwrap().is_empty());
}

#[test]
fn the_plan_stage_4_made_is_the_one_stage_7_runs() {
    let counter = Arc::new(Counter::default());
    let pipeline = one_tool(counter.clone());
    for (i, path) in ["a.txt", "b.txt"].into_iter().enumerate() {
        let outcome = run(&pipeline, json!({"path": path, "lines": 3}));
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        // Parsed once, checked once, planned once, per call.
        assert_eq!(counter.checked.load(Ordering::SeqCst), i + 1);
        assert_eq!(counter.planned.lock().unwrap().len(), i + 1);
        let expected = CountPlan {
            number: i,
            path: path.to_owned(),
            lines: 3,
        };
        assert_eq!(counter.planned.lock().unwrap()[i], expected);
        assert_eq!(counter.executed.lock().unwrap()[i], expected);
        // The typed resources leave the pipeline in their wire spelling.
        let wire = format!("path:{path}");
        assert_eq!(outcome.output().unwrap()["resources"], json!([wire]));
        assert_eq!(outcome.evidence().resources, [wire]);
    }
}
