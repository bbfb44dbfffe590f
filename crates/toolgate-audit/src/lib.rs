//! toolgate's audit trail: every outcome, appended to a hash-chained SQLite log before its
//! caller sees it, and the start of every call with effects, before it runs.
//!
//! [`AuditLog`] implements [`toolgate_core::Recorder`]. Before the executor of a call with
//! effects starts, a *started* record is flushed to the disk; if it cannot be, the call does
//! not run. Its outcome names the start. A start left without an outcome by a toolgate that
//! stopped is recorded as *interrupted* by the next one to open the log.
//!
//! How durable a record is depends on the call (see [`SyncMode`]): records of calls with
//! effects are flushed (`synchronous=FULL`) before the caller goes on and survive a power
//! cut; outcomes of read-only calls and rejections are committed to the WAL first — they
//! survive a crash of toolgate — and flushed by a background thread within
//! [`FLUSH_INTERVAL`]. The first caller to find no commit under way commits everything
//! queued (group commit), so a lone caller commits on its own thread and concurrent callers
//! share each fsync. If a record cannot be committed, the call fails closed
//! (`audit_unavailable`).
//!
//! Each record's hash covers the previous record's hash, its sequence number and its body
//! (see [`chain`]), so [`verify`] finds any record that was edited, deleted, reordered or
//! inserted. A small *head file* beside the database witnesses the newest flushed record, so
//! deleting the newest records — or rolling the whole database back to an older copy — is
//! found too. Sealing ([`seal_setup`]) adds forward-secure proof of every ended epoch, checked
//! by [`verify_with`] and the verification key.
//!
//! ```no_run
//! use std::sync::Arc;
//! use toolgate_audit::{AuditLog, AuditOptions, Verdict};
//! # fn pipeline() -> toolgate_core::Pipeline { unimplemented!() }
//!
//! let log = Arc::new(AuditLog::open("/home/me/.local/state/toolgate/audit.db", AuditOptions::default())?);
//! let pipeline = pipeline().with_recorder(log);
//! // … calls …
//! match toolgate_audit::verify("/home/me/.local/state/toolgate/audit.db".as_ref())?.verdict {
//!     Verdict::Intact => println!("intact"),
//!     Verdict::Broken(finding) => println!("{finding}"),
//! }
//! # Ok::<(), toolgate_audit::AuditError>(())
//! ```

pub mod chain;
mod head;
mod log;
mod read;
mod record;
mod seal;
mod verify;

pub use head::head_path;
pub use log::{
    AuditLog, AuditOptions, Durability, FLUSH_INTERVAL, INTERRUPTED, SyncMode, UnknownSyncMode,
};
pub use read::{LogHead, StoredRecord, after, export_jsonl, last, log_head};
pub use record::{record_body, record_body_after, start_body};
pub use seal::seal_setup;
pub use seal::{Epochs, NotAVerificationKey, VerificationKey, seal_key_path};
pub use verify::{
    Finding, Interrupted, SealFinding, Sealing, Verdict, Verification, verify, verify_with,
};

/// Why the audit log could not be opened, read or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// The directory that holds the log could not be created.
    #[error("cannot create the audit directory `{path}`: {source}")]
    CreateDir {
        path: String,
        source: std::io::Error,
    },
    /// The database file could not be created or opened.
    #[error("cannot open the audit log `{path}`: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    /// A reader was pointed at a log that does not exist (readers never create one).
    #[error("no audit log at `{0}`")]
    Missing(String),
    /// SQLite failed.
    #[error("audit log `{path}`: {source}")]
    Sqlite {
        path: String,
        source: rusqlite::Error,
    },
    /// The database would not switch to write-ahead logging, which durable group commit and
    /// readers that never block the writer both rely on.
    #[error("audit log `{path}`: journal mode `{mode}` instead of `wal`")]
    JournalMode { path: String, mode: String },
    /// The log was written in a record format this toolgate does not know.
    #[error("audit log `{path}`: record format {found}; this toolgate writes format {supported}")]
    Format {
        path: String,
        found: i64,
        supported: i64,
    },
    /// The log cannot be appended to without hiding damage: its newest record does not verify,
    /// or its head file is missing, invalid or names a record the log no longer holds.
    #[error("audit log `{path}`: {message}")]
    Refused { path: String, message: String },
    /// The head file could not be read or written.
    #[error("head file `{path}`: {source}")]
    Head {
        path: String,
        source: std::io::Error,
    },
    /// The writer thread could not be started.
    #[error("cannot start the audit writer: {0}")]
    Thread(std::io::Error),
    /// The sealing key file could not be read, written or created.
    #[error("sealing key `{path}`: {source}")]
    SealKey {
        path: String,
        source: std::io::Error,
    },
    /// Sealing was set up already: a second setup would leave the first verification key
    /// unable to check the epochs to come.
    #[error(
        "the audit log `{0}` is sealed already; its verification key was printed when it was set up"
    )]
    SealedAlready(String),
    /// The export could not be written to its destination.
    #[error("cannot write the export: {0}")]
    Write(std::io::Error),
}
