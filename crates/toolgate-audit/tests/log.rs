//! The audit log through its public API, on real SQLite files: concurrent writers, reopening,
//! a log that cannot be written, and every kind of tampering `verify` must name.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/builtins.rs"]
mod builtins;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;
use toolgate_audit::{AuditLog, AuditOptions, Durability, Finding, Verdict, chain, verify};
use toolgate_core::{RawCall, Recorder as _, Status, Surface};

fn db(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state/toolgate/audit.db")
}

fn fast() -> AuditOptions {
    AuditOptions {
        busy_timeout: Duration::from_millis(100),
        ..AuditOptions::default()
    }
}

fn call(n: usize) -> String {
    format!(r#"{{"call_id":"c-{n}","tool":"t"}}"#)
}

fn finding(path: &Path) -> Finding {
    match verify(path).unwrap().verdict {
        Verdict::Broken(finding) => finding,
        Verdict::Intact => panic!("the log verifies"),
    }
}

fn intact(path: &Path) -> u64 {
    let verification = verify(path).unwrap();
    assert_eq!(verification.verdict, Verdict::Intact, "{verification:?}");
    verification.records
}

/// A log of `count` records, closed (so its head file is current).
fn log_of(count: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let log = AuditLog::open(&path, fast()).unwrap();
    for n in 1..=count {
        assert_eq!(log.append(call(n)).unwrap(), n as u64);
    }
    drop(log);
    (dir, path)
}

fn sql(path: &Path, statements: &str) {
    Connection::open(path)
        .unwrap()
        .execute_batch(statements)
        .unwrap();
}

#[test]
fn concurrent_writers_keep_one_unbroken_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    // Two logs on one file stand for two processes; each has its own writer and batches.
    let first = Arc::new(AuditLog::open(&path, AuditOptions::default()).unwrap());
    let second = Arc::new(AuditLog::open(&path, AuditOptions::default()).unwrap());
    let threads: Vec<_> = (0..16)
        .map(|t| {
            let log = Arc::clone(if t % 2 == 0 { &first } else { &second });
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| log.append(call(t * 1000 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let numbers: BTreeSet<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    assert_eq!(numbers, (1..=1600).collect(), "each record its own number");
    drop((first, second));
    assert_eq!(intact(&path), 1600);
    let mut out = Vec::new();
    toolgate_audit::export_jsonl(&path, &mut out).unwrap();
    let ids: BTreeSet<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["call"]["call_id"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1600);
}

fn wal_len(path: &Path) -> u64 {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    std::fs::metadata(wal).map_or(0, |m| m.len())
}

/// A log that appends for long has its WAL written to full size up front: later commits,
/// flushed or not, overwrite the zeros instead of growing the file; another process
/// appending while the zeros are written loses nothing; and a copy of the files taken while
/// the log is open, as a crash leaves them, reads the zeros as the WAL's end.
#[test]
fn a_reserved_wal_is_overwritten_not_grown_and_its_zeros_read_as_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let reserving = AuditOptions {
        reserve_wal: true,
        ..AuditOptions::default()
    };
    let first = Arc::new(AuditLog::open(&path, reserving).unwrap());
    let second = Arc::new(AuditLog::open(&path, AuditOptions::default()).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let log = Arc::clone(if t % 2 == 0 { &first } else { &second });
            std::thread::spawn(move || {
                for i in 0..25 {
                    log.append(call(t * 1000 + i)).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    // SQLite's defaults: 4 KiB pages, a checkpoint at 1,000 frames; 64 frames more.
    let reserved = 32 + 1064 * (24 + 4096);
    let waited = std::time::Instant::now();
    while wal_len(&path) < reserved && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(wal_len(&path), reserved);
    for n in 0..100 {
        let durability = if n % 2 == 0 {
            Durability::Flushed
        } else {
            Durability::Committed
        };
        first.append_with(call(5000 + n), durability).unwrap();
    }
    assert_eq!(wal_len(&path), reserved, "a commit grew the WAL");

    let copy_dir = tempfile::tempdir().unwrap();
    let copy = copy_dir.path().join("audit.db");
    for suffix in ["", "-wal", "-head"] {
        let mut from = path.as_os_str().to_owned();
        from.push(suffix);
        let mut to = copy.as_os_str().to_owned();
        to.push(suffix);
        std::fs::copy(from, to).unwrap();
    }
    assert_eq!(intact(&copy), 200);

    drop((first, second));
    assert_eq!(intact(&path), 200);
    let reopened = AuditLog::open(&path, fast()).unwrap();
    assert_eq!(reopened.append(call(9999)).unwrap(), 201);
}

#[test]
fn reopening_continues_the_chain() {
    let (_dir, path) = log_of(3);
    let log = AuditLog::open(&path, fast()).unwrap();
    assert_eq!(log.append(call(4)).unwrap(), 4);
    drop(log);
    assert_eq!(intact(&path), 4);
    let records = toolgate_audit::last(&path, 2).unwrap();
    assert_eq!(records[1].prev_hash, records[0].hash);
    assert_eq!(
        records[1].hash,
        chain::record_hash(&records[0].hash, 4, &records[1].body).to_vec()
    );
}

#[test]
fn the_log_and_its_directory_are_user_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let (_dir, path) = log_of(1);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&toolgate_audit::head_path(&path)), 0o600);
    assert_eq!(mode(path.parent().unwrap()), 0o700);
}

#[test]
fn a_log_that_cannot_be_written_fails_the_record_and_the_call() {
    let (_dir, path) = log_of(2);
    let log = Arc::new(AuditLog::open(&path, fast()).unwrap());
    // Another process holds the write lock longer than the log waits.
    let holder = Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let refused = log.append(call(3)).unwrap_err();
    assert!(refused.0.contains("locked"), "{refused}");
    holder.execute_batch("ROLLBACK").unwrap();
    assert_eq!(log.append(call(3)).unwrap(), 3);

    // The newest record altered underneath a running log: nothing more is chained to it, and
    // a pipeline's call fails closed without its output.
    sql(
        &path,
        "UPDATE records SET hash = zeroblob(32) WHERE seq = 3",
    );
    let refused = log.append(call(4)).unwrap_err();
    assert!(refused.0.contains("does not verify"), "{refused}");
    let (_ws, pipeline) = read_file_pipeline();
    let outcome = pipeline
        .with_recorder(Arc::clone(&log) as Arc<dyn toolgate_core::Recorder>)
        .run(RawCall::text(
            "read_file",
            r#"{"path": "a.txt"}"#,
            Surface::Cli,
        ));
    assert_eq!(outcome.status(), Status::Failed);
    assert_eq!(outcome.error().unwrap().code, "audit_unavailable");
    assert_eq!(outcome.output(), None);
    // And a new process refuses to start on it.
    let error = AuditLog::open(&path, fast()).unwrap_err().to_string();
    assert!(error.contains("does not verify"), "{error}");
}

#[test]
fn opening_refuses_a_truncated_log_or_one_without_its_head_file() {
    let (_dir, path) = log_of(3);
    sql(&path, "DELETE FROM records WHERE seq = 3");
    let error = AuditLog::open(&path, fast()).unwrap_err().to_string();
    assert!(error.contains("witnessed record 3"), "{error}");

    let (_dir, path) = log_of(3);
    std::fs::remove_file(toolgate_audit::head_path(&path)).unwrap();
    let error = AuditLog::open(&path, fast()).unwrap_err().to_string();
    assert!(error.contains("head file is missing"), "{error}");
    assert_eq!(finding(&path), Finding::HeadMissing);
}

/// A writer trusts what it committed last only while no other connection has committed since:
/// a record rewritten or cut away under an open log stops its next append.
#[test]
fn a_change_made_under_an_open_log_is_checked_before_the_next_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let log = AuditLog::open(&path, fast()).unwrap();
    for n in 1..=3 {
        log.append(call(n)).unwrap();
    }
    sql(
        &path,
        "UPDATE records SET body = replace(body, 'c-3', 'c-9') WHERE seq = 3",
    );
    let error = log.append(call(4)).unwrap_err().0;
    assert!(error.contains("record 3 does not verify"), "{error}");
    drop(log);

    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let log = AuditLog::open(&path, fast()).unwrap();
    for n in 1..=3 {
        log.append(call(n)).unwrap();
    }
    // Once the head file witnesses record 3, cutting it away is a truncation.
    let started = std::time::Instant::now();
    while verify(&path).unwrap().witnessed != Some(3) {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "record 3 never witnessed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    sql(&path, "DELETE FROM records WHERE seq = 3");
    let error = log.append(call(4)).unwrap_err().0;
    assert!(error.contains("witnessed record 3"), "{error}");
    // Nothing was appended to it.
    assert_eq!(verify(&path).unwrap().records, 2);
}

#[test]
fn a_log_created_without_its_table_is_empty_and_can_be_opened() {
    // A crash after the database file is created but before its table is.
    let (_dir, path) = log_of(0);
    std::fs::write(&path, b"").unwrap();
    for suffix in ["-wal", "-shm"] {
        let mut side = path.clone().into_os_string();
        side.push(suffix);
        let _ = std::fs::remove_file(side);
    }
    assert_eq!(intact(&path), 0);
    let log = AuditLog::open(&path, fast()).unwrap();
    assert_eq!(log.append(call(1)).unwrap(), 1);
    drop(log);
    assert_eq!(intact(&path), 1);
}

/// Several processes starting at once on a log that is still new: one turns the database to
/// WAL while another asks the same. SQLite does not wait for a lock it could deadlock on (a
/// read lock held while the other holds the write lock) and says "database is locked" at
/// once; opening waits it out, within the busy timeout, as it waits for any other lock.
#[test]
fn opening_waits_for_another_process_setting_up_a_new_log() {
    let (_dir, path) = log_of(0);
    let emptied = || {
        std::fs::write(&path, b"").unwrap();
        for suffix in ["-wal", "-shm"] {
            let mut side = path.clone().into_os_string();
            side.push(suffix);
            let _ = std::fs::remove_file(side);
        }
    };
    emptied();
    // Another process part-way through setting the new database up: its write lock held, in
    // the rollback journal mode every new SQLite database starts in.
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        other.execute_batch("COMMIT").unwrap();
    });
    let options = AuditOptions {
        busy_timeout: Duration::from_secs(5),
        ..AuditOptions::default()
    };
    let log = AuditLog::open(&path, options).unwrap();
    release.join().unwrap();
    assert_eq!(log.append(call(1)).unwrap(), 1);
    drop(log);
    assert_eq!(intact(&path), 1);

    // Held past the busy timeout, the lock is an error that says what it is.
    emptied();
    let other = Connection::open(&path).unwrap();
    other.execute_batch("BEGIN IMMEDIATE").unwrap();
    let started = std::time::Instant::now();
    let refused = AuditLog::open(&path, fast()).err().unwrap().to_string();
    assert!(refused.contains("locked"), "{refused}");
    assert!(started.elapsed() >= fast().busy_timeout);
    other.execute_batch("COMMIT").unwrap();
}

#[test]
fn a_log_of_an_unknown_format_is_refused_by_name() {
    let (_dir, path) = log_of(1);
    sql(&path, "PRAGMA user_version = 9");
    let error = AuditLog::open(&path, fast()).unwrap_err();
    assert!(
        matches!(
            error,
            toolgate_audit::AuditError::Format {
                found: 9,
                supported: 1,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .ends_with("record format 9; this toolgate writes format 1"),
        "{error}"
    );
}

#[test]
fn an_emptied_or_zeroed_head_file_does_not_hide_a_truncation() {
    for contents in [&[][..], &[0u8; 128][..]] {
        let (_dir, path) = log_of(4);
        std::fs::write(toolgate_audit::head_path(&path), contents).unwrap();
        sql(&path, "DELETE FROM records WHERE seq >= 3");
        assert_eq!(finding(&path), Finding::HeadInvalid);
        let error = AuditLog::open(&path, fast()).unwrap_err().to_string();
        assert!(error.contains("no valid head"), "{error}");
        // Nothing was appended to it.
        assert_eq!(verify(&path).unwrap().records, 2);
    }
}

#[test]
fn records_of_real_calls_hold_evidence_not_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = db(&dir);
    let log = Arc::new(AuditLog::open(&path, fast()).unwrap());
    let (ws, pipeline) = read_file_pipeline();
    let pipeline = pipeline.with_recorder(log.clone());
    let done = pipeline.run(RawCall::text(
        "read_file",
        r#"{"path": "a.txt"}"#,
        Surface::Cli,
    ));
    assert_eq!(done.status(), Status::Completed);
    let refused = pipeline.run(RawCall::text(
        "read_file",
        r#"{"path": "../hunter2-secret"}"#,
        Surface::Cli,
    ));
    assert_eq!(refused.status(), Status::Rejected);
    log.record(&done).unwrap();
    drop(pipeline);
    drop(log);
    let records = toolgate_audit::last(&path, 10).unwrap();
    assert_eq!(records.len(), 3);
    let first = records[0].to_json();
    assert_eq!(first["call"]["call_id"], done.evidence().call_id.as_str());
    assert_eq!(first["call"]["status"], "completed");
    assert_eq!(first["call"]["argument_names"][0], "path");
    assert_eq!(
        records[1].to_json()["call"]["rejection"]["stage"],
        "validate"
    );
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(!text.contains("hunter2"));
    assert!(!text.contains("alpha beta"), "no file bodies");
    assert!(
        !text.contains(&*ws.path().to_string_lossy()),
        "no absolute paths"
    );
}

fn read_file_pipeline() -> (tempfile::TempDir, toolgate_core::Pipeline) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "alpha beta\n").unwrap();
    let pipeline = builtins::pipeline(ws.path(), Arc::new(toolgate_core::HeadlessBroker));
    (ws, pipeline)
}

#[test]
fn verify_names_each_kind_of_tampering() {
    let cases: [(&str, &str, Finding); 7] = [
        (
            "an edited body",
            "UPDATE records SET body = replace(body, '\"t\"', '\"u\"') WHERE seq = 5",
            Finding::Edited {
                seq: 5,
                reason: "its hash does not match its contents".to_owned(),
            },
        ),
        (
            "an edited hash",
            "UPDATE records SET hash = randomblob(32) WHERE seq = 5",
            Finding::Edited {
                seq: 5,
                reason: "its hash does not match its contents".to_owned(),
            },
        ),
        (
            "a deleted middle record",
            "DELETE FROM records WHERE seq = 5",
            Finding::Missing { first: 5, last: 5 },
        ),
        (
            "deleted middle records, renumbered",
            "DELETE FROM records WHERE seq IN (4, 5); UPDATE records SET seq = seq - 2 WHERE seq > 5",
            Finding::Missing { first: 4, last: 5 },
        ),
        (
            "the newest record deleted",
            "DELETE FROM records WHERE seq = 8",
            Finding::Truncated {
                last: 7,
                witnessed: 8,
            },
        ),
        (
            "two records swapped",
            "UPDATE records SET seq = -1 WHERE seq = 5; UPDATE records SET seq = 5 WHERE seq = 6; UPDATE records SET seq = 6 WHERE seq = -1",
            Finding::OutOfOrder {
                position: 5,
                holds: 6,
            },
        ),
        (
            "a forged record inserted",
            "UPDATE records SET seq = seq + 100 WHERE seq >= 5; UPDATE records SET seq = seq - 99 WHERE seq >= 100; INSERT INTO records VALUES (5, '{\"at\":\"x\",\"call\":{},\"seq\":5}', zeroblob(32), zeroblob(32))",
            Finding::Inserted { seq: 5 },
        ),
    ];
    for (what, statements, expected) in cases {
        let (_dir, path) = log_of(8);
        assert_eq!(intact(&path), 8);
        sql(&path, statements);
        assert_eq!(finding(&path), expected, "{what}");
    }
}

#[test]
fn verify_names_consistent_forgeries_too() {
    // A forged record 5 with a correct hash and link, the real ones renumbered after it.
    let (_dir, path) = log_of(8);
    let records = toolgate_audit::last(&path, 8).unwrap();
    let body = chain::body(5, 0, r#"{"tool":"forged"}"#);
    let hash = chain::record_hash(&records[3].hash, 5, &body);
    let connection = Connection::open(&path).unwrap();
    connection
        .execute_batch("UPDATE records SET seq = seq + 100 WHERE seq >= 5; UPDATE records SET seq = seq - 99 WHERE seq >= 100")
        .unwrap();
    connection
        .execute(
            "INSERT INTO records VALUES (5, ?1, ?2, ?3)",
            rusqlite::params![body, records[3].hash, hash.as_slice()],
        )
        .unwrap();
    assert_eq!(finding(&path), Finding::Inserted { seq: 5 });

    // Record 5 rewritten with its hash recomputed: record 6 no longer links to it.
    let (_dir, path) = log_of(8);
    let records = toolgate_audit::last(&path, 8).unwrap();
    let body = chain::body(5, 0, r#"{"tool":"rewritten"}"#);
    let hash = chain::record_hash(&records[3].hash, 5, &body);
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE records SET body = ?1, hash = ?2 WHERE seq = 5",
            rusqlite::params![body, hash.as_slice()],
        )
        .unwrap();
    assert!(matches!(finding(&path), Finding::Edited { seq: 5, .. }));

    // The whole database rolled back to an older copy: the head file still knows better.
    let (dir, path) = log_of(4);
    let copy = dir.path().join("old.db");
    std::fs::copy(&path, &copy).unwrap();
    let log = AuditLog::open(&path, fast()).unwrap();
    log.append(call(5)).unwrap();
    drop(log);
    std::fs::copy(&copy, &path).unwrap();
    assert_eq!(
        finding(&path),
        Finding::Truncated {
            last: 4,
            witnessed: 5
        }
    );
}
