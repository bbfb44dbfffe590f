//! What the durable audit log costs, with real `read_file` calls through a real pipeline.
//!
//! - `audited_calls_32_sessions`: 32 threads, each running `read_file` calls one after
//!   another through one pipeline whose log commits every record (WAL, `synchronous=FULL`)
//!   before the call returns. Criterion's throughput is the sustained calls per second.
//! - `sequential/read_file_without_audit` and `sequential/read_file_audited`: one session,
//!   one call at a time; the difference of the medians is the latency the audit write adds.
//! - `verify_1m_records`: `verify` of a log of 1,000,000 records of real `read_file`
//!   outcomes, built once.
//!
//! Run with `cargo bench -p toolgate-audit -- --warm-up-time 1 --measurement-time 5`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use toolgate_audit::{AuditLog, AuditOptions, Verdict, chain};
use toolgate_core::*;
use toolgate_workspace::Workspace;

const SESSIONS: u64 = 32;
const VERIFY_RECORDS: u64 = 1_000_000;

/// A workspace with a 4 KiB file and the builtin tools over it.
fn pipeline(dir: &Path) -> Pipeline {
    let line = format!("{}\n", "x".repeat(63));
    std::fs::write(dir.join("4k.txt"), line.repeat(64)).expect("4k.txt");
    let workspace = Arc::new(Workspace::open(dir).expect("the workspace"));
    let mut registry = RegistryBuilder::new();
    for tool in toolgate_tools::builtin(
        Arc::clone(&workspace),
        std::env::home_dir().as_deref(),
        std::env::vars_os(),
    ) {
        registry
            .register(tool.descriptor, tool.entry, tool.executor)
            .expect("a builtin");
    }
    let registry = registry.build().expect("the registry");
    let mut policy = PolicyEngine::default_policy().expect("the default policy");
    policy.prepare(&registry).expect("prepared policy");
    Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(HeadlessBroker),
        WorkspaceId::new(&workspace.root().to_string_lossy()),
    )
}

fn read_4k(pipeline: &Pipeline) -> Outcome {
    pipeline.run(RawCall::text(
        "read_file",
        r#"{"path": "4k.txt"}"#,
        Surface::Chat,
    ))
}

fn audited(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let log = Arc::new(
        AuditLog::open(dir.path().join("state/audit.db"), AuditOptions::default())
            .expect("the audit log"),
    );
    let plain = pipeline(dir.path());
    let audited = Arc::new(plain.clone().with_recorder(log));
    assert_eq!(read_4k(&audited).status(), Status::Completed);

    let mut group = c.benchmark_group("concurrent");
    group.sample_size(10);
    group.throughput(Throughput::Elements(1));
    group.bench_function("audited_calls_32_sessions", |b| {
        b.iter_custom(|iters| {
            let per_session = iters.div_ceil(SESSIONS).max(1);
            let started = Instant::now();
            let sessions: Vec<_> = (0..SESSIONS)
                .map(|_| {
                    let pipeline = Arc::clone(&audited);
                    std::thread::spawn(move || {
                        for _ in 0..per_session {
                            let outcome = read_4k(&pipeline);
                            assert_eq!(outcome.status(), Status::Completed);
                        }
                    })
                })
                .collect();
            for session in sessions {
                session.join().expect("a session");
            }
            // Scale to the number of calls criterion asked for.
            let elapsed = started.elapsed();
            elapsed.mul_f64(iters as f64 / (per_session * SESSIONS) as f64)
        });
    });
    group.finish();

    let mut group = c.benchmark_group("sequential");
    group.sample_size(20);
    group.bench_function("read_file_without_audit", |b| {
        b.iter(|| black_box(read_4k(&plain)));
    });
    group.bench_function("read_file_audited", |b| {
        b.iter(|| black_box(read_4k(&audited)));
    });
    group.finish();
}

/// A log of `count` records of a real outcome, chained and numbered as the writer would
/// write them, inserted in one transaction (building it through the writer would time the
/// disk, not `verify`).
fn build_log(path: &Path, count: u64) {
    drop(AuditLog::open(path, AuditOptions::default()).expect("a new log"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let outcome = read_4k(&pipeline(dir.path()));
    let call = toolgate_audit::record_body(&outcome, false);
    let mut connection = rusqlite::Connection::open(path).expect("the log");
    let transaction = connection.transaction().expect("a transaction");
    {
        let mut insert = transaction
            .prepare("INSERT INTO records (seq, body, prev_hash, hash) VALUES (?1, ?2, ?3, ?4)")
            .expect("the insert");
        let mut prev = chain::GENESIS;
        let at = chain::now_ms();
        for seq in 1..=count {
            let body = chain::body(seq, at + seq, &call);
            let hash = chain::record_hash(&prev, seq, &body);
            insert
                .execute(rusqlite::params![
                    i64::try_from(seq).expect("a number"),
                    body,
                    prev.as_slice(),
                    hash.as_slice()
                ])
                .expect("a record");
            prev = hash;
        }
    }
    transaction.commit().expect("the commit");
}

fn verify_million(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("audit.db");
    let started = Instant::now();
    build_log(&path, VERIFY_RECORDS);
    eprintln!(
        "built a log of {VERIFY_RECORDS} records ({} MiB) in {:.1} s",
        std::fs::metadata(&path).map_or(0, |m| m.len() >> 20),
        started.elapsed().as_secs_f64()
    );
    let mut group = c.benchmark_group("verify");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.bench_function("verify_1m_records", |b| {
        b.iter(|| {
            let verification = toolgate_audit::verify(&path).expect("verify");
            assert_eq!(verification.verdict, Verdict::Intact);
            assert_eq!(verification.records, VERIFY_RECORDS);
        });
    });
    group.finish();
}

criterion_group!(benches, audited, verify_million);
criterion_main!(benches);
