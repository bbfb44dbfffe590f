//! Why a record was not appended. One failed commit answers every caller whose record it
//! held, so the error is `Clone` and shares its source; the pipeline receives it as a
//! [`RecordError`](toolgate_core::RecordError) and fails the call closed.

use std::sync::Arc;

/// Why a commit, or the recovery of interrupted starts, failed.
#[derive(Debug, Clone, thiserror::Error)]
pub(super) enum AppendError {
    /// A thread holding the queue or the writer panicked.
    #[error("the audit writer stopped unexpectedly")]
    Stopped,
    /// The background thread could not flush the WAL or write the head file: appending on
    /// would leave records that the head file never witnesses.
    #[error("the audit log cannot be flushed or its head file cannot be written")]
    Unflushed,
    /// SQLite failed inside the commit.
    #[error("cannot append to the audit log: {0}")]
    Sqlite(Arc<rusqlite::Error>),
    /// The head file could not be read before chaining to another process's records.
    #[error("cannot read the audit head file: {0}")]
    HeadFile(Arc<std::io::Error>),
    /// The newest record cannot be chained to.
    #[error(transparent)]
    Refused(#[from] ChainRefusal),
    /// The next record's number does not fit SQLite's integer.
    #[error("the log is full")]
    Full,
    /// The sealing key could not be read again before sealing an epoch.
    #[error("cannot read the sealing key: {0}")]
    ReadSealKey(Arc<std::io::Error>),
    /// The sealing key could not be evolved past the epoch just sealed.
    #[error("cannot evolve the sealing key: {0}")]
    EvolveSealKey(Arc<std::io::Error>),
    /// The starts left open could not be read when the log was opened.
    #[error("cannot read the open starts: {0}")]
    OpenStarts(Arc<rusqlite::Error>),
}

impl From<rusqlite::Error> for AppendError {
    fn from(error: rusqlite::Error) -> Self {
        AppendError::Sqlite(Arc::new(error))
    }
}

/// Why records may not be chained after the newest one: it does not verify, or it is not
/// what the head file witnessed. Each ends in how to find out more.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum ChainRefusal {
    /// The log has records but its head file holds no valid head.
    #[error(
        "its head file holds no valid head, so the newest records cannot be checked; run `toolgate audit verify`"
    )]
    NoHead,
    /// The log is empty, yet its head file witnessed records.
    #[error(
        "the log is empty but its head file witnessed record {witnessed}; run `toolgate audit verify`"
    )]
    Emptied { witnessed: u64 },
    /// The newest record's number is negative.
    #[error("the newest record has number {0}")]
    Number(i64),
    /// The newest record does not hash to its stored hash or does not say its own number.
    #[error(
        "the newest record {0} does not verify; refusing to append to it (run `toolgate audit verify`)"
    )]
    Unverified(u64),
    /// The log ends before the record its head file witnessed.
    #[error(
        "the log ends at record {seq} but its head file witnessed record {witnessed}; run `toolgate audit verify`"
    )]
    Truncated { seq: u64, witnessed: u64 },
    /// The newest record's hash is not 32 bytes.
    #[error("record {0} has a malformed hash")]
    MalformedHash(u64),
    /// The newest record has the witnessed number but another hash.
    #[error(
        "the newest record {0} is not the one its head file witnessed; run `toolgate audit verify`"
    )]
    Replaced(u64),
}

/// Why zeros could not be written past the WAL's end (see `Writer::reserve_wal`).
#[derive(Debug, thiserror::Error)]
pub(super) enum ReserveError {
    #[error("cannot reserve the audit WAL: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot reserve the audit WAL: {0}")]
    Io(#[from] std::io::Error),
}
