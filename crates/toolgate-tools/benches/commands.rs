//! What the boundary costs a command: `run_command ["true"]` through all eight stages (with a
//! broker that grants at once), confined and not, against spawning `/usr/bin/true` directly.
//!
//! - `run_command_true_pipeline`: `Pipeline::run`, from raw arguments to outcome, in the
//!   sandbox: resolving `true` in PATH (three times: check, classify, execute), approval
//!   digest, grant, the call's temporary directory, the Landlock ruleset (the paths along
//!   the deny list enumerated and opened) and the seccomp filters prepared, confinement
//!   between fork and exec, own process group, scrubbed environment, captured stdout and
//!   stderr, group check at exit.
//! - `run_command_true_unconfined`: the same with the operator's `dangerous-unconfined`
//!   setting: no sandbox, so the difference is what confinement costs.
//! - `exec_run_true`: `toolgate_exec::run` alone, the same command without the pipeline.
//! - `std_command_true_output`: `std::process::Command::new("/usr/bin/true").output()`, which
//!   also pipes stdout and stderr.
//!
//! After criterion's report, the three are measured again in alternation and their medians
//! printed, with the ratio of the first to the last.
//!
//! Run with `cargo bench -p toolgate-tools --bench commands -- --warm-up-time 1
//! --measurement-time 5`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use toolgate_core::*;
use toolgate_workspace::Workspace;

/// Allows every request at once, as a person who always says yes would.
#[derive(Debug)]
struct Yes;

impl ApprovalBroker for Yes {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// The workspace directory (kept alive by the caller) and a granting pipeline over it, whose
/// commands are confined as `confinement` says, starting from this process's environment.
fn fixture(mut confinement: toolgate_tools::Confinement) -> (tempfile::TempDir, Pipeline) {
    confinement.set_environment(std::env::vars_os());
    let dir = tempfile::tempdir().expect("a temporary directory");
    let workspace = Arc::new(Workspace::open(dir.path()).expect("the workspace"));
    let mut registry = RegistryBuilder::new();
    for tool in toolgate_tools::builtin_confined(Arc::clone(&workspace), Arc::new(confinement)) {
        registry
            .register(tool.descriptor, tool.entry, tool.executor)
            .expect("a builtin");
    }
    let registry = registry.build().expect("the registry");
    let mut policy = PolicyEngine::default_policy().expect("the default policy");
    policy.prepare(&registry).expect("policy slices");
    let pipeline = Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(Yes),
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    );
    (dir, pipeline)
}

fn run_true(pipeline: &Pipeline) -> Outcome {
    let outcome = pipeline.run(RawCall::text(
        "run_command",
        r#"{"argv": ["true"]}"#,
        Surface::Chat,
    ));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    outcome
}

fn direct_true() -> std::process::Output {
    Command::new("/usr/bin/true")
        .output()
        .expect("/usr/bin/true runs")
}

fn confined() -> toolgate_tools::Confinement {
    let confinement = toolgate_tools::Confinement::detect(std::env::home_dir().as_deref());
    assert!(
        confinement.describe().starts_with("landlock+seccomp"),
        "this machine cannot confine commands: {}",
        confinement.describe()
    );
    confinement
}

fn benches(c: &mut Criterion) {
    let (_dir, pipeline) = fixture(confined());
    let (_open_dir, unconfined) = fixture(toolgate_tools::Confinement::dangerous_unconfined());
    let spec = toolgate_exec::CommandSpec::new("/usr/bin/true", "/").env(toolgate_exec::scrub_env(
        toolgate_exec::utf8_env(std::env::vars_os()),
    ));
    let never = AtomicBool::new(false);
    c.bench_function("run_command_true_pipeline", |b| {
        b.iter(|| black_box(run_true(&pipeline)));
    });
    c.bench_function("run_command_true_unconfined", |b| {
        b.iter(|| black_box(run_true(&unconfined)));
    });
    c.bench_function("exec_run_true", |b| {
        b.iter(|| black_box(toolgate_exec::run(&spec, &never).expect("true runs")));
    });
    c.bench_function("std_command_true_output", |b| {
        b.iter(|| black_box(direct_true()));
    });
}

criterion_group!(commands, benches);

/// Medians of the confined pipeline, the unconfined one, the runner alone and the direct
/// spawn over `n` rounds, measured in alternation so that all four see the same machine.
fn side_by_side(n: usize) {
    let (_dir, pipeline) = fixture(confined());
    let (_open_dir, unconfined) = fixture(toolgate_tools::Confinement::dangerous_unconfined());
    let spec = toolgate_exec::CommandSpec::new("/usr/bin/true", "/").env(toolgate_exec::scrub_env(
        toolgate_exec::utf8_env(std::env::vars_os()),
    ));
    let never = AtomicBool::new(false);
    let mut times: [Vec<Duration>; 4] = Default::default();
    for _ in 0..n {
        let started = Instant::now();
        black_box(run_true(&pipeline));
        times[0].push(started.elapsed());
        let started = Instant::now();
        black_box(run_true(&unconfined));
        times[1].push(started.elapsed());
        let started = Instant::now();
        black_box(toolgate_exec::run(&spec, &never).expect("true runs"));
        times[2].push(started.elapsed());
        let started = Instant::now();
        black_box(direct_true());
        times[3].push(started.elapsed());
    }
    let [through, open, runner, direct] = times.map(|mut t| {
        t.sort_unstable();
        t.get(n / 2).copied().expect("at least one run")
    });
    println!(
        "side by side, {n} rounds: median run_command [\"true\"] confined {through:?}, \
         unconfined {open:?} (the sandbox adds {:?}), toolgate_exec::run {runner:?}, \
         /usr/bin/true direct {direct:?}; ratio confined/direct {:.2}",
        through.saturating_sub(open),
        through.as_secs_f64() / direct.as_secs_f64()
    );
}

fn main() {
    commands();
    Criterion::default().configure_from_args().final_summary();
    side_by_side(500);
}
