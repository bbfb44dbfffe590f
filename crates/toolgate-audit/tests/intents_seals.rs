//! Write-ahead starts, interrupted calls, durability by effect and sealed epochs, through the
//! log's public API on real SQLite files.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/builtins.rs"]
mod builtins;

use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;
use sha2::{Digest as _, Sha256};
use toolgate_audit::{
    AuditLog, AuditOptions, Verdict, VerificationKey, chain, verify, verify_with,
};
use toolgate_core::record::Intent;
use toolgate_core::{EffectClass, Recorder as _, Surface};

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state/toolgate/audit.db")
}

fn intent<'a>(call_id: &'a str, resources: &'a [String]) -> Intent<'a> {
    Intent {
        call_id,
        request_id: None,
        tool: "run_command",
        version: Some("1.0.0"),
        surface: Surface::Cli,
        actor: "local",
        profile: "default",
        effect: EffectClass::LocalWrite,
        argument_digest: "sha256:00",
        approval_id: Some("grant-1"),
        resources,
        sandbox: None,
    }
}

fn records(path: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    toolgate_audit::export_jsonl(path, &mut out).unwrap();
    String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn statuses(path: &Path) -> Vec<String> {
    records(path)
        .iter()
        .map(|r| r["call"]["status"].as_str().unwrap_or("-").to_owned())
        .collect()
}

#[test]
fn a_start_without_an_outcome_is_interrupted_once_its_process_has_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let resources = vec!["program:/usr/bin/sleep".to_owned()];
    let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
    log.intend(&intent("c-1", &resources)).unwrap();
    // A second process opening the log meanwhile leaves the running call alone.
    let other = AuditLog::open(&path, AuditOptions::default()).unwrap();
    drop(other);
    assert_eq!(statuses(&path), ["started"]);
    // The process stops without recording an outcome.
    drop(log);
    let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
    let kept = records(&path);
    assert_eq!(statuses(&path), ["started", "interrupted"]);
    let start = &kept[0]["call"];
    assert_eq!(start["approval_id"], "grant-1");
    assert_eq!(start["effect"], "local_write");
    assert!(
        start["resources"][0]
            .as_str()
            .unwrap()
            .starts_with("program:sleep#sha256:"),
        "{start}"
    );
    let interrupted = &kept[1]["call"];
    assert_eq!(interrupted["started"], 1);
    assert_eq!(interrupted["call_id"], "c-1");
    assert_eq!(interrupted["reason"], toolgate_audit::INTERRUPTED);
    drop(log);
    // Recorded once, however often the log is opened again.
    drop(AuditLog::open(&path, AuditOptions::default()).unwrap());
    assert_eq!(statuses(&path).len(), 2);
    let verification = verify(&path).unwrap();
    assert_eq!(verification.verdict, Verdict::Intact);
    assert_eq!(verification.interrupted.len(), 1);
    assert_eq!(verification.interrupted[0].started, 1);
}

#[test]
fn an_outcome_names_its_start_and_closes_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (_ws, pipeline) = write_pipeline();
    let log = Arc::new(AuditLog::open(&path, AuditOptions::default()).unwrap());
    let pipeline = pipeline.with_recorder(Arc::clone(&log) as Arc<dyn toolgate_core::Recorder>);
    let outcome = pipeline.run(toolgate_core::RawCall::text(
        "write_file",
        r#"{"path": "b.txt", "content": "beta\n"}"#,
        Surface::Cli,
    ));
    let kept = records(&path);
    let started: Vec<&Value> = kept
        .iter()
        .filter(|r| r["call"]["status"] == "started")
        .collect();
    assert_eq!(started.len(), 1, "{kept:?} {outcome:?}");
    let last = kept.last().unwrap();
    assert_eq!(last["call"]["started"], started[0]["seq"], "{last}");
    assert_eq!(last["call"]["call_id"], started[0]["call"]["call_id"]);
    drop(pipeline);
    drop(Arc::try_unwrap(log).unwrap());
    drop(AuditLog::open(&path, AuditOptions::default()).unwrap());
    assert!(!statuses(&path).contains(&"interrupted".to_owned()));
}

/// A pipeline of the built-in tools over a new workspace, whose `write_file` has effects and
/// is allowed without asking.
fn write_pipeline() -> (tempfile::TempDir, toolgate_core::Pipeline) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha\n").unwrap();
    let pipeline = builtins::pipeline_with(
        ws.path(),
        Arc::new(toolgate_core::HeadlessBroker),
        r#"@id("cli-write") permit (principal, action == Action::"call_unattended", resource) when { resource.effect == "local_write" };"#,
        |_| {},
    );
    (ws, pipeline)
}

/// Writes `seq` and `hash` into the head file as toolgate does (its slot `seq` mod 2).
fn forge_head(path: &Path, seq: u64, hash: &[u8]) {
    let mut payload = Vec::new();
    payload.extend_from_slice(b"TGAH");
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.extend_from_slice(hash);
    let check = Sha256::digest(&payload);
    payload.extend_from_slice(&check[..8]);
    payload.resize(64, 0);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(toolgate_audit::head_path(path))
        .unwrap();
    file.write_all_at(&payload, (seq % 2) * 64).unwrap();
}

/// Replaces the call of record `seq` with `call` and recomputes every hash from there on,
/// and the head file: what someone who can write the state directory can do.
fn rewrite(path: &Path, seq: i64, call: &str) {
    let connection = Connection::open(path).unwrap();
    let rows: Vec<(i64, String, Vec<u8>)> = connection
        .prepare("SELECT seq, body, prev_hash FROM records WHERE seq >= ?1 ORDER BY seq")
        .unwrap()
        .query_map([seq], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let mut prev = rows[0].2.clone();
    for (n, body, _) in rows {
        let body = if n == seq {
            let value: Value = serde_json::from_str(&body).unwrap();
            let at = value["at"].as_str().unwrap();
            format!(r#"{{"at":"{at}","call":{call},"seq":{n}}}"#)
        } else {
            body
        };
        let hash = chain::record_hash(&prev, n as u64, &body);
        connection
            .execute(
                "UPDATE records SET body = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
                rusqlite::params![body, prev, hash.as_slice(), n],
            )
            .unwrap();
        prev = hash.to_vec();
        forge_head(path, n as u64, &hash);
    }
}

#[test]
fn sealed_epochs_resist_a_rewrite_that_recomputes_every_hash() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let epoch = Duration::from_millis(300);
    let key: VerificationKey = toolgate_audit::seal_setup(&path, epoch).unwrap();
    assert!(
        toolgate_audit::seal_setup(&path, epoch).is_err(),
        "set up once"
    );
    let key: VerificationKey = key.to_string().parse().unwrap();
    let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
    for n in 0..3 {
        log.append(format!(r#"{{"call_id":"a-{n}"}}"#)).unwrap();
    }
    // The epoch ends without more records: the background thread seals it.
    std::thread::sleep(epoch + Duration::from_millis(150));
    for n in 0..2 {
        log.append(format!(r#"{{"call_id":"b-{n}"}}"#)).unwrap();
    }
    drop(log);
    assert_eq!(statuses(&path)[3], "sealed", "{:?}", records(&path));
    // The key left on the machine is no longer the one that sealed epoch 0.
    let stored = std::fs::read(toolgate_audit::seal_key_path(&path)).unwrap();
    assert!(
        !stored.windows(32).any(|w| w == key.first.key),
        "k_0 erased"
    );

    let verification = verify_with(&path, Some(&key)).unwrap();
    assert_eq!(verification.verdict, Verdict::Intact);
    let sealing = verification.sealing.unwrap();
    assert_eq!(sealing.sealed, vec![(0, 1, 3)]);
    assert_eq!(sealing.broken, None);
    assert_eq!(
        sealing.unsealed,
        Some((4, 6)),
        "the open epoch is not vouched for"
    );

    // Record 2 of the sealed epoch rewritten, every hash and the head file recomputed: the
    // chain alone cannot tell, the seal can, and names the epoch.
    rewrite(&path, 2, r#"{"call_id":"forged"}"#);
    assert_eq!(verify(&path).unwrap().verdict, Verdict::Intact);
    let sealing = verify_with(&path, Some(&key)).unwrap().sealing.unwrap();
    let broken = sealing.broken.expect("the seal names the rewrite");
    assert_eq!((broken.epoch, broken.first, broken.last), (0, 1, 3));
    assert!(broken.to_string().contains("epoch 0"), "{broken}");

    // A seal forged with a made-up key does not verify either.
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    toolgate_audit::seal_setup(&path, epoch).unwrap();
    let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
    log.append(r#"{"call_id":"a"}"#.to_owned()).unwrap();
    std::thread::sleep(epoch + Duration::from_millis(150));
    log.append(r#"{"call_id":"b"}"#.to_owned()).unwrap();
    drop(log);
    let sealing = verify_with(&path, Some(&key)).unwrap().sealing.unwrap();
    assert_eq!(sealing.broken.unwrap().epoch, 0, "another log's key");
}

#[test]
fn a_call_whose_start_cannot_be_recorded_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let (ws, pipeline) = write_pipeline();
    let options = AuditOptions {
        busy_timeout: Duration::from_millis(100),
        ..AuditOptions::default()
    };
    let log = Arc::new(AuditLog::open(&path, options).unwrap());
    let pipeline = pipeline.with_recorder(Arc::clone(&log) as Arc<dyn toolgate_core::Recorder>);
    // Another process holds the write lock longer than the log waits.
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let outcome = pipeline.run(toolgate_core::RawCall::text(
        "write_file",
        r#"{"path": "b.txt", "content": "beta\n"}"#,
        Surface::Cli,
    ));
    holder.execute_batch("ROLLBACK").unwrap();
    let error = outcome.error().cloned().expect("the call failed");
    assert_eq!(error.code, "audit_unavailable", "{outcome:?}");
    // The outcome cannot be recorded either while the lock is held, so the error the caller
    // sees is the outcome's.
    assert!(error.message.contains("locked"), "{error:?}");
    assert!(!ws.path().join("b.txt").exists(), "the tool never ran");
    // Its outcome, once the lock is gone, is on the record; no start is.
    let outcome = pipeline.run(toolgate_core::RawCall::text(
        "write_file",
        r#"{"path": "c.txt", "content": "gamma\n"}"#,
        Surface::Cli,
    ));
    assert!(outcome.error().is_none(), "{outcome:?}");
    assert_eq!(statuses(&path), ["started", "completed"]);
}
