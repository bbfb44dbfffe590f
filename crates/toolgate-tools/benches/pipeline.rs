//! What the boundary costs per call, at a realistic size: 200 registered tools and 100 Cedar
//! policies.
//!
//! - `stages_1_to_6`: `authorize_call` for a `read_file` that needs no approval — normalize,
//!   resolve, validate (schema and path checks against the file system), classify, authorize,
//!   approve — without executing.
//! - `read_file_4k_end_to_end`: `run` reading a 4 KiB file, all eight stages.
//! - `edit_file_100k_end_to_end`: `run` of one `edit_file` on a 100 KiB file, approved at
//!   once: the compare-and-swap checks, the diff, the grant, and the atomic write with its
//!   two fsyncs.
//!
//! Run with `cargo bench -p toolgate-tools --bench pipeline`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toolgate_core::policy::DEFAULT_POLICY;
use toolgate_core::registry::{DEFAULT_PROFILE, READONLY_PROFILE};
use toolgate_core::*;
use toolgate_workspace::Workspace;

const TOOLS: usize = 200;
const POLICIES: usize = 100;

/// A synthetic read-only tool that does nothing.
#[derive(Debug)]
struct Noop;

impl Executor for Noop {
    fn execute(&self, _call: &Call<'_, Self>, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(Value::Null))
    }
}

/// A person who allows every call once, at once.
#[derive(Debug)]
struct Allow;

impl ApprovalBroker for Allow {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// The workspace directory (kept alive by the caller) and the pipeline over it.
fn fixture() -> (tempfile::TempDir, Pipeline) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::write(dir.path().join("small.txt"), "hello\n").expect("small.txt");
    let line = format!("{}\n", "x".repeat(63));
    std::fs::write(dir.path().join("4k.txt"), line.repeat(64)).expect("4k.txt");
    std::fs::write(dir.path().join("100k.rs"), edit_state(0)).expect("100k.rs");
    let workspace = Arc::new(Workspace::open(dir.path()).expect("the workspace"));

    let mut registry = RegistryBuilder::new();
    let builtins = toolgate_tools::builtin(
        Arc::clone(&workspace),
        std::env::home_dir().as_deref(),
        std::env::vars_os(),
    );
    let synthetic = TOOLS - builtins.len();
    for tool in builtins {
        registry
            .register(tool.descriptor, tool.entry, tool.executor)
            .expect("a builtin");
    }
    for i in 0..synthetic {
        let name = format!("tool_{i}");
        let descriptor = Descriptor::new(
            name.clone(),
            format!("Synthetic tool number {i}; reads nothing."),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "maxLength": 256, "description": "What to look up."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How many."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        );
        let mut entry = ToolEntry::new(name, "synthetic");
        entry.effect = Some(EffectClass::ReadOnly);
        entry.profiles = [DEFAULT_PROFILE, READONLY_PROFILE]
            .map(str::to_owned)
            .into();
        registry
            .register(descriptor, entry, Arc::new(Noop))
            .expect("a synthetic tool");
    }
    let registry = registry.build().expect("the registry");

    // The default policy's 3, then operator policies up to 100: mostly permits scoped to one
    // tool, every sixth a forbid.
    let default_count = DEFAULT_POLICY.matches("@id(").count();
    let operator: String = (0..POLICIES - default_count)
        .map(|i| {
            if i % 6 == 5 {
                format!(
                    "@id(\"f{i}\") forbid(principal, action, resource == Tool::\"tool_{i}\") \
                     when {{ context.surface == \"cli\" }};\n"
                )
            } else {
                format!(
                    "@id(\"p{i}\") permit(principal, action == Action::\"call\", \
                     resource == Tool::\"tool_{i}\") when {{ context.surface == \"chat\" }};\n"
                )
            }
        })
        .collect();
    let mut policy = PolicyEngine::from_sources(&[
        ("<default policy>", DEFAULT_POLICY),
        ("operator", &operator),
    ])
    .expect("the policies");
    assert_eq!(policy.len(), POLICIES);
    policy.prepare(&registry).expect("prepared policies");

    let pipeline = Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(Allow),
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    );
    (dir, pipeline)
}

/// 100 KiB of source with one marker line in the middle, in one of two states.
fn edit_state(state: usize) -> String {
    let line = format!("    let value = compute({});\n", "x".repeat(32));
    let half = line.repeat(100 * 1024 / line.len() / 2);
    format!("fn main() {{\n{half}    // marker {state}\n{half}}}\n")
}

fn benches(c: &mut Criterion) {
    let (_dir, pipeline) = fixture();

    let probe = pipeline.enter(|stages| {
        stages
            .authorize_call(RawCall::text(
                "read_file",
                r#"{"path":"small.txt"}"#,
                Surface::Chat,
            ))
            .map(drop)
            .map_err(|stopped| stopped.rejection.to_string())
    });
    assert!(probe.is_ok(), "read_file must be authorized: {probe:?}");
    c.bench_function("stages_1_to_6", |b| {
        b.iter(|| {
            pipeline.enter(|stages| {
                let authorized = stages.authorize_call(black_box(RawCall::text(
                    "read_file",
                    r#"{"path":"small.txt"}"#,
                    Surface::Chat,
                )));
                black_box(authorized.is_ok())
            })
        });
    });

    let outcome = pipeline.run(RawCall::text(
        "read_file",
        r#"{"path":"4k.txt"}"#,
        Surface::Chat,
    ));
    assert_eq!(outcome.status(), Status::Completed, "{}", outcome.summary());
    c.bench_function("read_file_4k_end_to_end", |b| {
        b.iter(|| {
            let outcome = pipeline.run(black_box(RawCall::text(
                "read_file",
                r#"{"path":"4k.txt"}"#,
                Surface::Chat,
            )));
            black_box(outcome.status())
        });
    });
}

fn edit_bench(c: &mut Criterion) {
    let (_dir, pipeline) = fixture();
    let edit = |from: usize| {
        json!({
            "path": "100k.rs",
            "expected_digest": sha256_digest(edit_state(from).as_bytes()),
            "edits": [{"old_text": format!("// marker {from}"), "new_text": format!("// marker {}", 1 - from)}]
        })
        .to_string()
    };
    // The file flips between its two states, so each call's digest is known in advance.
    let (forward, back) = (edit(0), edit(1));
    let mut state = 0;
    c.bench_function("edit_file_100k_end_to_end", |b| {
        b.iter(|| {
            let outcome = pipeline.run(black_box(RawCall::text(
                "edit_file",
                if state == 0 {
                    forward.as_str()
                } else {
                    back.as_str()
                },
                Surface::Chat,
            )));
            assert_eq!(outcome.status(), Status::Completed, "{}", outcome.summary());
            state = 1 - state;
        });
    });
}

criterion_group!(pipeline_benches, benches, edit_bench);
criterion_main!(pipeline_benches);
