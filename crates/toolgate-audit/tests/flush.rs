//! The background flush's deadline, through the log's public API on a real SQLite file.
//!
//! These tests time the flush against its promise (a committed record is on the disk within
//! 100 ms), so they live in a test binary of their own: `cargo test` runs binaries one at a
//! time, and a lock keeps the two apart, so no other test's fsyncs stand in their way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use toolgate_audit::{AuditLog, AuditOptions, Durability, verify};

static ALONE: Mutex<()> = Mutex::new(());

/// A new log, and the lock that keeps the other test of this file off the disk meanwhile.
fn alone_with_a_new_log() -> (
    MutexGuard<'static, ()>,
    tempfile::TempDir,
    PathBuf,
    AuditLog,
) {
    let alone = ALONE.lock().unwrap_or_else(PoisonError::into_inner);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/toolgate/audit.db");
    let log = AuditLog::open(&path, AuditOptions::default()).unwrap();
    (alone, dir, path, log)
}

/// The record the head file witnesses, read as `verify` reads it.
fn witnessed(path: &Path) -> Option<u64> {
    verify(path).unwrap().witnessed
}

#[test]
fn committed_records_are_flushed_and_witnessed_within_the_flush_interval() {
    let (_alone, _dir, path, log) = alone_with_a_new_log();
    let started = Instant::now();
    let seq = log
        .append_with(r#"{"call_id":"c-1"}"#.to_owned(), Durability::Committed)
        .unwrap();
    // The head file names only flushed records, so once it names this one, the background
    // flush has happened.
    while witnessed(&path) != Some(seq) {
        assert!(
            started.elapsed() < Duration::from_millis(100),
            "not flushed within 100 ms"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(log);
}

/// The flush thread is woken only when it sleeps with nothing to flush; records that come
/// while it waits out the interval are still flushed within it.
#[test]
fn a_steady_stream_of_commits_is_flushed_within_the_interval_every_time() {
    let (_alone, _dir, path, log) = alone_with_a_new_log();
    for n in 0..30 {
        let committed = Instant::now();
        let seq = log
            .append_with(format!(r#"{{"call_id":"c-{n}"}}"#), Durability::Committed)
            .unwrap();
        while witnessed(&path).is_none_or(|w| w < seq) {
            assert!(
                committed.elapsed() < Duration::from_millis(100),
                "record {seq} not flushed within 100 ms"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Some records come while the thread waits out the interval, some after it slept.
        std::thread::sleep(Duration::from_millis(n % 3 * 20));
    }
    drop(log);
    assert_eq!(witnessed(&path), Some(30));
}
