//! What an in-process pre_call hook adds to a call: the same read-only tool, which does
//! nothing, run through every stage by two pipelines that differ only in one hook (the
//! library's [`Hook`] trait) that allows every call at once.
//!
//! - `hook/none`: `run` with no hook configured.
//! - `hook/in_process_allow`: `run` with one pre_call hook that answers allow.
//!
//! The difference of the medians is what the hook stage costs a call (target ≤ 0.1 ms): the
//! hook's input built and made canonical, its answer recorded in the evidence, and the call
//! decided and run where a hook may wait.
//!
//! Run with `cargo bench -p toolgate-core --bench hooks -- --warm-up-time 1
//! --measurement-time 5`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolgate_core::*;

/// A read-only tool that does nothing.
#[derive(Debug)]
struct Noop;

impl Executor for Noop {
    fn execute(&self, _call: &Call<'_, Self>, _cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(serde_json::Value::Null))
    }
}

/// A pre_call hook that allows every call at once.
#[derive(Debug)]
struct Allows;

impl Hook for Allows {
    fn name(&self) -> &str {
        "allows"
    }

    fn event(&self) -> HookEvent {
        HookEvent::PreCall
    }

    fn call(&self, _input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
        Ok(HookAnswer::allow())
    }
}

fn pipeline(hooks: Vec<Arc<dyn Hook>>) -> Pipeline {
    let mut entry = ToolEntry::new("noop", "bench");
    entry.effect = Some(EffectClass::ReadOnly);
    let schema = json!({
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "additionalProperties": false,
    });
    let mut builder = RegistryBuilder::new();
    builder
        .register(
            Descriptor::new("noop", "does nothing", schema),
            entry,
            Arc::new(Noop),
        )
        .expect("the tool registers");
    let registry = builder.build().expect("the registry");
    let mut policy = PolicyEngine::default_policy().expect("the default policy");
    policy
        .prepare(&registry)
        .expect("the policy over the registry");
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(HeadlessBroker),
        WorkspaceId::new("/bench"),
    )
    .with_hooks(hooks)
}

fn call(pipeline: &Pipeline) -> Outcome {
    let outcome = pipeline.run(RawCall::text("noop", r#"{"path":"a"}"#, Surface::Chat));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    outcome
}

fn hooks(c: &mut Criterion) {
    let none = pipeline(Vec::new());
    let hooked = pipeline(vec![Arc::new(Allows)]);
    let mut group = c.benchmark_group("hook");
    group.bench_function("none", |b| b.iter(|| black_box(call(&none))));
    group.bench_function("in_process_allow", |b| b.iter(|| black_box(call(&hooked))));
    group.finish();
}

criterion_group!(benches, hooks);
criterion_main!(benches);
