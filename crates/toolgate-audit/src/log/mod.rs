//! The writer: group commit of records, durability by effect, write-ahead intents, seals, and
//! the head file.
//!
//! A caller of [`AuditLog::append`] builds its record on its own thread and queues it. If no
//! one is committing, it commits itself — everything queued, in one `BEGIN IMMEDIATE`
//! transaction — and answers the others; otherwise it waits for the committer to answer it.
//! A lone caller therefore commits without handing its record to another thread, and a burst
//! of callers shares one commit (group commit): the first waiter commits for all.
//!
//! Each record asks for one of two durabilities. *Flushed* records (the start and outcome of
//! a call with effects, every record under `sync = "always"`) are in a commit made with
//! `synchronous=FULL`: the WAL is on the disk before the caller goes on, so the record
//! survives a power cut. *Committed* records (outcomes of read-only calls and rejections) are
//! in a commit made with `synchronous=NORMAL`: written to the WAL, and so safe from a crash of
//! toolgate, before the caller goes on, and flushed to the disk by a background thread within
//! [`FLUSH_INTERVAL`]. A commit holding both kinds is flushed.
//!
//! Several processes (a `serve` and a `call`) can append to one log and keep one chain. Inside
//! each transaction the committer asks SQLite whether another connection has committed since
//! its own last commit (`PRAGMA data_version`); if one has, or if this is its first commit, it
//! reads the newest record and the head file again rather than trusting what it wrote last. A
//! newest record it did not write is checked before anything is chained to it, and one that
//! does not verify stops every append (fail closed).
//!
//! A call with effects is recorded as *started* before its executor runs, and the log keeps a
//! table of starts without an outcome, each with the process that made it. Every process that
//! opens the log holds a lock on a file of its own, `<log>-owner-<pid>-<time>`; a start whose process
//! no longer holds its lock will never get an outcome, and the next process to open the log
//! records it as *interrupted*.
//!
//! The parts: [`AuditLog`] here opens the log, records outcomes and starts, and recovers
//! interrupted starts; `options` holds what the caller chooses; `group_commit` queues records
//! and picks the committer; `writer` chains a batch into one transaction; `background` flushes,
//! writes the head file and seals ended epochs; `owner` keeps the lock files that tell a live
//! start from an interrupted one; `schema` sets up the database and its directory.

mod background;
mod error;
mod group_commit;
mod options;
mod owner;
mod schema;
mod writer;

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rusqlite::{Connection, OpenFlags};
use serde_json::json;
use toolgate_core::record::Intent;
use toolgate_core::{EffectClass, Outcome, RecordError, Recorder, Status, canonical_json};

use crate::AuditError;
use crate::head::{HeadFile, head_path};
use crate::seal::{self, SealKeyFile};

use background::{Mailbox, background_loop};
use error::AppendError;
use group_commit::{Entry, Pending, Queue, Shared, lock};
use owner::{claim_owner, owner_alive, owner_path, remove_dead_owner_files};
use schema::{create_private_dir, prepare_waiting, wal_path};
use writer::{Sealer, Writer, check_newest, newest};

pub use background::FLUSH_INTERVAL;
pub use options::{AuditOptions, Durability, SyncMode, UnknownSyncMode};

/// What an interrupted record says happened.
pub const INTERRUPTED: &str = "outcome unknown: toolgate stopped while it ran";

/// A durable, hash-chained audit log in SQLite. Cloning the `Arc` shares one queue.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    options: AuditOptions,
    shared: Option<Arc<Shared>>,
    background: Mutex<Option<JoinHandle<()>>>,
    /// Starts recorded by this process and not yet closed: call id → the start's number.
    started: Mutex<HashMap<String, u64>>,
    /// This process's owner file, locked while the log is open.
    owner_file: Option<(PathBuf, File)>,
}

impl AuditLog {
    /// Opens the log at `path`, creating it (and its directory, user-only) if needed. An
    /// existing log's newest record must verify and must be the one its head file witnesses
    /// or newer; otherwise nothing is appended to it. Starts left open by processes that have
    /// stopped are recorded as interrupted before this returns.
    pub fn open(path: impl AsRef<Path>, options: AuditOptions) -> Result<AuditLog, AuditError> {
        let path = path.as_ref().to_owned();
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            create_private_dir(dir)?;
        }
        let exists = path.exists();
        let head_error = |source| AuditError::Head {
            path: head_path(&path).display().to_string(),
            source,
        };
        let head_file = if exists {
            // The head file is made before the database, so a log without one lost it: its
            // newest records can no longer be checked, and nothing is appended to it.
            HeadFile::open_existing(&head_path(&path)).map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => AuditError::Refused {
                    path: shown.clone(),
                    message: "its head file is missing, so the newest records cannot be checked; run `toolgate audit verify`".to_owned(),
                },
                _ => head_error(e),
            })?
        } else {
            let head_file = HeadFile::open_or_create(&head_path(&path)).map_err(head_error)?;
            // SQLite would create the file readable by everyone; create it user-only first.
            // Its `-wal` and `-shm` files take the same permissions.
            use std::os::unix::fs::OpenOptionsExt as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map_err(|source| AuditError::Open {
                    path: shown.clone(),
                    source,
                })?;
            head_file
        };
        let sqlite = |source| AuditError::Sqlite {
            path: shown.clone(),
            source,
        };
        let mut connection = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(sqlite)?;
        prepare_waiting(&connection, &options, &shown)?;
        // Check the head now, so that a log that cannot be appended to stops toolgate from
        // starting instead of failing every call.
        let witnessed = head_file.read().map_err(head_error)?;
        let transaction = connection.transaction().map_err(sqlite)?;
        let newest = newest(&transaction).map_err(sqlite)?;
        check_newest(newest.as_ref(), witnessed).map_err(|error| AuditError::Refused {
            path: shown.clone(),
            message: error.to_string(),
        })?;
        drop(transaction);

        let key_path = seal::seal_key_path(&path);
        let key_error = |source| AuditError::SealKey {
            path: key_path.display().to_string(),
            source,
        };
        let sealer = match SealKeyFile::open(&key_path).map_err(key_error)? {
            Some(file) => {
                let key = file.read().map_err(key_error)?;
                Some(Sealer { file, key })
            }
            None => None,
        };
        let epochs = sealer.as_ref().map(|s| s.key.epochs);

        let (owner, owner_file) = claim_owner(&path)?;
        let head_file = Arc::new(head_file);
        let to_background = Arc::new(Mailbox::default());
        let inbox = Arc::clone(&to_background);
        let background_failed = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                expected: 1,
                ..Queue::default()
            }),
            answered: Condvar::new(),
            arrived: Condvar::new(),
            writer: Mutex::new(Writer {
                connection,
                head_file: Arc::clone(&head_file),
                sealer,
                owner,
                full: true,
                known: None,
            }),
            to_background,
            background_failed: Arc::clone(&background_failed),
        });
        let background = {
            let weak = Arc::downgrade(&shared);
            let wal = wal_path(&path);
            let reserve = options.reserve_wal;
            std::thread::Builder::new()
                .name("toolgate-audit-flush".to_owned())
                .spawn(move || {
                    if reserve
                        && let Some(shared) = weak.upgrade()
                        && let Ok(writer) = lock(&shared.writer)
                    {
                        // Only an optimization: a log whose WAL could not be given its size
                        // grows it as it goes, as any SQLite database does.
                        let _ = writer.reserve_wal(&wal);
                    }
                    background_loop(&head_file, &wal, &inbox, &background_failed, epochs, &weak)
                })
                .map_err(AuditError::Thread)?
        };
        let log = AuditLog {
            path,
            options,
            shared: Some(shared),
            background: Mutex::new(Some(background)),
            started: Mutex::new(HashMap::new()),
            owner_file: Some(owner_file),
        };
        log.recover().map_err(|error| AuditError::Refused {
            path: shown.clone(),
            message: error.to_string(),
        })?;
        Ok(log)
    }

    /// The database file this log appends to, as given to [`AuditLog::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one call's record and returns its sequence number once it is flushed.
    pub fn append(&self, call: String) -> Result<u64, RecordError> {
        self.append_with(call, Durability::Flushed)
    }

    /// Appends one call's record and returns its sequence number once it is as durable as
    /// `durability` says.
    pub fn append_with(&self, call: String, durability: Durability) -> Result<u64, RecordError> {
        self.submit(Entry::Plain(call), durability)
    }

    /// Seals the epoch that ended, if one did and its records are not sealed yet. The
    /// background thread does this at the end of every epoch; calling it does no harm.
    pub fn seal_due(&self) -> Result<(), RecordError> {
        self.submit(Entry::Tick, Durability::Flushed).map(|_| ())
    }

    fn submit(&self, entry: Entry, durability: Durability) -> Result<u64, RecordError> {
        let flush = durability == Durability::Flushed || self.options.sync == SyncMode::Always;
        let shared = self
            .shared
            .as_ref()
            .ok_or_else(|| RecordError("the audit log is closed".to_owned()))?;
        shared
            .submit(Pending {
                ticket: 0,
                entry,
                flush,
            })
            .map_err(|error| RecordError(error.to_string()))
    }

    /// Records an interrupted outcome for every start whose process has stopped.
    fn recover(&self) -> Result<(), AppendError> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let open: Vec<(i64, String, String, String)> = {
            let writer = lock(&shared.writer)?;
            let mut statement = writer
                .connection
                .prepare("SELECT seq, call_id, tool, owner FROM intents ORDER BY seq")
                .map_err(|e| AppendError::OpenStarts(Arc::new(e)))?;
            statement
                .query_map([], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(|e| AppendError::OpenStarts(Arc::new(e)))?
        };
        let own = self.owner_file.as_ref().map(|(p, _)| p.clone());
        let mut alive: HashMap<String, bool> = HashMap::new();
        for (seq, call_id, tool, owner) in open {
            let is_alive = *alive
                .entry(owner.clone())
                .or_insert_with(|| owner_alive(&owner_path(&self.path, &owner), own.as_deref()));
            if is_alive {
                continue;
            }
            let started = u64::try_from(seq).unwrap_or(0);
            let call = canonical_json(&json!({
                "call_id": call_id,
                "reason": INTERRUPTED,
                "started": started,
                "status": "interrupted",
                "tool": tool,
            }));
            shared.submit(Pending {
                ticket: 0,
                entry: Entry::Outcome {
                    call,
                    started: Some(started),
                },
                flush: true,
            })?;
        }
        remove_dead_owner_files(&self.path, own.as_deref());
        Ok(())
    }
}

impl Recorder for AuditLog {
    fn record(&self, outcome: &Outcome) -> Result<(), RecordError> {
        let started = self
            .started
            .lock()
            .ok()
            .and_then(|mut open| open.remove(&outcome.evidence().call_id));
        let call = crate::record::record_body_after(outcome, self.options.store_values, started);
        let with_effects = outcome.status() != Status::Rejected
            && outcome
                .evidence()
                .effect
                .is_some_and(|e| e != EffectClass::ReadOnly);
        let durability = if with_effects {
            Durability::Flushed
        } else {
            Durability::Committed
        };
        self.submit(Entry::Outcome { call, started }, durability)
            .map(|_| ())
    }

    fn intend(&self, intent: &Intent<'_>) -> Result<(), RecordError> {
        let call = crate::record::start_body(intent);
        let seq = self.submit(
            Entry::Start {
                call,
                call_id: intent.call_id.to_owned(),
                tool: intent.tool.to_owned(),
            },
            Durability::Flushed,
        )?;
        if let Ok(mut open) = self.started.lock() {
            open.insert(intent.call_id.to_owned(), seq);
        }
        Ok(())
    }
}

impl Drop for AuditLog {
    /// Lets the background thread flush what is committed and bring the head file up to date.
    fn drop(&mut self) {
        self.shared.take();
        if let Some(thread) = self.background.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
        if let Some((path, file)) = self.owner_file.take() {
            drop(file);
            let _ = std::fs::remove_file(path);
        }
    }
}
