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

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension as _};
use serde_json::json;
use toolgate_core::record::Intent;
use toolgate_core::{EffectClass, Outcome, RecordError, Recorder, Status, canonical_json};

use crate::AuditError;
use crate::chain;
use crate::head::{Head, HeadFile, head_path};
use crate::seal::{self, SealKey, SealKeyFile};

/// The most records one transaction takes; more wait for the next.
const MAX_BATCH: usize = 4096;

/// The longest a committer waits for the callers of the last batch to send their next records.
const LINGER: Duration = Duration::from_millis(1);

/// The longest a committed record waits to be flushed to the disk, and the least time between
/// two writes of the head file while records keep coming.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// The version of the record layout, in `PRAGMA user_version`.
const FORMAT: i64 = 1;

/// What an interrupted record says happened.
pub const INTERRUPTED: &str = "outcome unknown: toolgate stopped while it ran";

/// When records are flushed to the disk, as `[audit] sync` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Records of calls with effects are flushed before the call runs and before its result
    /// returns; the others are committed before their result returns and flushed within
    /// [`FLUSH_INTERVAL`].
    #[default]
    Effects,
    /// Every record is flushed before its result returns.
    Always,
}

impl SyncMode {
    /// The setting's value in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Effects => "effects",
            SyncMode::Always => "always",
        }
    }
}

impl std::str::FromStr for SyncMode {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "effects" => Ok(SyncMode::Effects),
            "always" => Ok(SyncMode::Always),
            _ => Err(format!(
                "unknown audit sync setting `{text}`: expected `effects` or `always`"
            )),
        }
    }
}

/// How durable a record is once [`AuditLog::append_with`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On the disk: survives a power cut.
    Flushed,
    /// In the WAL: survives a crash of toolgate; on the disk within [`FLUSH_INTERVAL`].
    Committed,
}

/// How a log is opened.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Also keep the redacted messages and output of each call (a local debug setting; off by
    /// default).
    pub store_values: bool,
    /// How long a commit waits for another process's transaction before it fails.
    pub busy_timeout: Duration,
    /// When records are flushed.
    pub sync: SyncMode,
    /// Give the WAL, once the log is open, the size it reaches between two checkpoints, as
    /// blocks written with zeros past its end. A flush of a commit that grows the file also
    /// commits the file's new size to the file system's journal; one that overwrites blocks
    /// the file already has does not (about 0.05 of 0.15 ms per flush on the development
    /// machine). For a process that appends for long (`serve`): a one-shot `call` would write
    /// 4 MiB for one record.
    pub reserve_wal: bool,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            store_values: false,
            busy_timeout: Duration::from_secs(5),
            sync: SyncMode::Effects,
            reserve_wal: false,
        }
    }
}

/// What a queued record does besides being appended.
#[derive(Debug)]
enum Entry {
    /// A record and nothing more.
    Plain(String),
    /// A call's start: also noted as open, under this process.
    Start {
        call: String,
        call_id: String,
        tool: String,
    },
    /// A call's outcome: closes its start, if it had one.
    Outcome { call: String, started: Option<u64> },
    /// Appends nothing: lets the committer seal an epoch that ended without records.
    Tick,
}

/// A record waiting to be committed.
#[derive(Debug)]
struct Pending {
    ticket: u64,
    entry: Entry,
    flush: bool,
}

/// The queue the callers share.
#[derive(Debug, Default)]
struct Queue {
    waiting: Vec<Pending>,
    committing: bool,
    done: HashMap<u64, Result<u64, String>>,
    next_ticket: u64,
    /// How many records the last commit took.
    expected: usize,
    /// How many queued records a lingering committer waits for (see `LINGER`), 0 when none
    /// lingers: only the caller whose record makes that many wakes it.
    linger_for: usize,
    /// How many callers wait for their answer: only if any does is anyone woken after a
    /// commit. A lone caller wakes no one.
    awaiting: usize,
}

/// What the background thread hears after commits: the newest record, and whether every
/// commit since it last heard was flushed.
#[derive(Debug, Clone, Copy)]
struct Committed {
    head: Head,
    flushed: bool,
}

/// Where committers leave what the background thread is to hear.
///
/// A committer wakes the thread only when it sleeps with nothing to flush; while it waits
/// out [`FLUSH_INTERVAL`] with records pending, it reads the news when it wakes. Under a
/// steady stream of calls the thread is woken once per interval, not once per commit.
#[derive(Debug, Default)]
struct Mailbox {
    inbox: Mutex<Inbox>,
    news: Condvar,
}

#[derive(Debug, Default)]
struct Inbox {
    news: Option<Committed>,
    /// The thread sleeps until news comes.
    idle: bool,
    /// The log is closing: flush what is there and stop.
    closed: bool,
}

impl Mailbox {
    fn post(&self, committed: Committed) {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        let flushed = inbox.news.is_none_or(|news| news.flushed) && committed.flushed;
        inbox.news = Some(Committed {
            head: committed.head,
            flushed,
        });
        if inbox.idle {
            inbox.idle = false;
            self.news.notify_one();
        }
    }

    fn close(&self) {
        self.inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.news.notify_one();
    }

    /// Waits until `deadline` (forever without one), or until news comes if `woken` — then
    /// returns the news, and whether the log is closing (which ends any wait).
    fn take(&self, deadline: Option<Instant>, woken: bool) -> (Option<Committed>, bool) {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if inbox.closed || (woken && inbox.news.is_some()) {
                break;
            }
            let now = Instant::now();
            if deadline.is_some_and(|at| at <= now) {
                break;
            }
            inbox.idle = woken;
            inbox = match deadline {
                None => self
                    .news
                    .wait(inbox)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let waited = self.news.wait_timeout(inbox, at - now);
                    waited.unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        inbox.idle = false;
        (inbox.news.take(), inbox.closed)
    }
}

/// What the callers share.
#[derive(Debug)]
struct Shared {
    queue: Mutex<Queue>,
    /// Wakes callers once their records are answered or no one is committing.
    answered: Condvar,
    /// Wakes a lingering committer when as many records as it waits for are queued.
    arrived: Condvar,
    writer: Mutex<Writer>,
    to_background: Arc<Mailbox>,
    background_failed: Arc<AtomicBool>,
}

impl Drop for Shared {
    /// The last caller is gone: the background thread flushes what is committed and stops.
    fn drop(&mut self) {
        self.to_background.close();
    }
}

/// The committer's connection and files.
#[derive(Debug)]
struct Writer {
    connection: Connection,
    head_file: Arc<HeadFile>,
    sealer: Option<Sealer>,
    owner: String,
    /// Whether the connection is at `synchronous=FULL` now.
    full: bool,
    /// The newest record as of this connection's last commit, and the log's data version then:
    /// while no other connection commits, the version stays and the newest record is this one.
    known: Option<Known>,
}

#[derive(Debug, Clone, Copy)]
struct Known {
    head: Head,
    version: i64,
}

#[derive(Debug)]
struct Sealer {
    file: SealKeyFile,
    key: SealKey,
}

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
        check_newest(newest.as_ref(), witnessed).map_err(|message| AuditError::Refused {
            path: shown.clone(),
            message,
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
        log.recover().map_err(|message| AuditError::Refused {
            path: shown.clone(),
            message,
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
            .map_err(RecordError)
    }

    /// Records an interrupted outcome for every start whose process has stopped.
    fn recover(&self) -> Result<(), String> {
        let Some(shared) = &self.shared else {
            return Ok(());
        };
        let open: Vec<(i64, String, String, String)> = {
            let writer = lock(&shared.writer)?;
            let mut statement = writer
                .connection
                .prepare("SELECT seq, call_id, tool, owner FROM intents ORDER BY seq")
                .map_err(|e| format!("cannot read the open starts: {e}"))?;
            statement
                .query_map([], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                })
                .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
                .map_err(|e| format!("cannot read the open starts: {e}"))?
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

fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, String> {
    mutex
        .lock()
        .map_err(|_| "the audit writer stopped unexpectedly".to_owned())
}

impl Shared {
    /// Queues `pending` and returns its number once it is committed, committing it (with
    /// everything else queued) if no one else is.
    fn submit(&self, mut pending: Pending) -> Result<u64, String> {
        let mut queue = lock(&self.queue)?;
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        pending.ticket = ticket;
        queue.waiting.push(pending);
        if queue.linger_for > 0 && queue.waiting.len() >= queue.linger_for {
            self.arrived.notify_one();
        }
        loop {
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            if queue.committing {
                queue.awaiting += 1;
                queue = self
                    .answered
                    .wait(queue)
                    .map_err(|_| "the audit writer stopped unexpectedly".to_owned())?;
                queue.awaiting -= 1;
                continue;
            }
            queue.committing = true;
            // Callers answered together come back together, but not at once: right after a
            // commit the first of them would otherwise commit alone and leave the rest for
            // the commit after. So the committer waits up to `LINGER` for half as many records
            // as the last commit had; a lone caller (a last commit of one) never waits. Half,
            // not all: while one half's records are committed the other half's callers run
            // their calls, so the commits and the calls share the cores instead of taking
            // turns (docs/audit.md has the figures).
            let target = queue.expected.div_ceil(2).min(MAX_BATCH);
            if queue.waiting.len() < target {
                let linger_until = Instant::now() + LINGER;
                queue.linger_for = target;
                while queue.waiting.len() < target {
                    let left = linger_until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    queue = match self.arrived.wait_timeout(queue, left) {
                        Ok((queue, _)) => queue,
                        Err(_) => return Err("the audit writer stopped unexpectedly".to_owned()),
                    };
                }
                queue.linger_for = 0;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            let batch: Vec<Pending> = queue.waiting.drain(..take).collect();
            queue.expected = batch.len();
            drop(queue);
            let results = self.commit(&batch);
            queue = lock(&self.queue)?;
            for (pending, result) in batch.iter().zip(results) {
                queue.done.insert(pending.ticket, result);
            }
            queue.committing = false;
            if queue.awaiting > 0 {
                self.answered.notify_all();
            }
        }
    }

    /// Commits `batch`; the result of each record, in order.
    fn commit(&self, batch: &[Pending]) -> Vec<Result<u64, String>> {
        let failed = |message: String| batch.iter().map(|_| Err(message.clone())).collect();
        if self.background_failed.load(Ordering::Acquire) {
            return failed(
                "the audit log cannot be flushed or its head file cannot be written".to_owned(),
            );
        }
        let mut writer = match lock(&self.writer) {
            Ok(writer) => writer,
            Err(message) => return failed(message),
        };
        // A panic in SQLite's wrapper must not leave every later caller waiting for a commit
        // that never ends.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.append(batch)));
        match outcome {
            Ok(Ok((seqs, committed))) => {
                if let Some(committed) = committed {
                    self.to_background.post(committed);
                }
                seqs.into_iter().map(Ok).collect()
            }
            Ok(Err(message)) => failed(message),
            Err(_) => failed("the audit writer stopped unexpectedly".to_owned()),
        }
    }
}

impl Writer {
    /// Appends `batch` in one transaction; returns each record's number (0 for a tick) and,
    /// if anything was committed, the new newest record.
    fn append(&mut self, batch: &[Pending]) -> Result<(Vec<u64>, Option<Committed>), String> {
        let failed = |e: rusqlite::Error| format!("cannot append to the audit log: {e}");
        let now = chain::now_ms();
        let seal_due = self
            .sealer
            .as_ref()
            .is_some_and(|s| s.key.epochs.at(now) > s.key.current.epoch);
        let ticks_only = batch.iter().all(|p| matches!(p.entry, Entry::Tick));
        if ticks_only && !seal_due {
            return Ok((batch.iter().map(|_| 0).collect(), None));
        }
        let flush = seal_due || batch.iter().any(|p| p.flush);
        if flush != self.full {
            let mode = if flush { "FULL" } else { "NORMAL" };
            self.connection
                .pragma_update(None, "synchronous", mode)
                .map_err(failed)?;
            self.full = flush;
        }
        // Whatever fails below, the next commit reads the newest record again.
        let known = self.known.take();
        let transaction = Immediate::begin(&self.connection).map_err(failed)?;
        let version: i64 = transaction
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))
            .map_err(failed)?;
        // Sealing looks at the newest record itself (another process may have sealed it).
        let unchanged = known.filter(|k| k.version == version && !seal_due);
        let (mut head, newest_record) = match unchanged {
            Some(known) => (known.head, None),
            None => {
                let witnessed = self
                    .head_file
                    .read()
                    .map_err(|e| format!("cannot read the audit head file: {e}"))?;
                let newest_record = newest(&transaction).map_err(failed)?;
                let head = check_newest(newest_record.as_ref(), witnessed)?;
                (head, newest_record)
            }
        };
        let mut insert = transaction
            .prepare_cached(
                "INSERT INTO records (seq, body, prev_hash, hash) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(failed)?;
        let mut push = |call: &str, head: &mut Head| -> Result<u64, String> {
            let seq = head.seq + 1;
            let body = chain::body(seq, now, call);
            let hash = chain::record_hash(&head.hash, seq, &body);
            let number = i64::try_from(seq).map_err(|_| "the log is full".to_owned())?;
            insert
                .execute(rusqlite::params![
                    number,
                    body,
                    head.hash.as_slice(),
                    hash.as_slice()
                ])
                .map_err(failed)?;
            *head = Head { seq, hash };
            Ok(seq)
        };
        // The epoch that ended is sealed before anything of the new one is appended, so a
        // seal covers exactly the records of its epoch (and of the epochs before it).
        let mut evolve_to = None;
        if seal_due && let Some(sealer) = &mut self.sealer {
            // Another process may have sealed and evolved the key since this one read it.
            sealer.key = sealer
                .file
                .read()
                .map_err(|e| format!("cannot read the sealing key: {e}"))?;
            let current = sealer.key.epochs.at(now);
            if current > sealer.key.current.epoch {
                let already = newest_record
                    .as_ref()
                    .is_some_and(|(_, body, _, _)| seal::parse_seal(body).is_some());
                if head.seq > 0 && !already {
                    let mac = sealer.key.current.seal(head.seq, &head.hash);
                    let call =
                        seal::seal_call(sealer.key.current.epoch, head.seq, &head.hash, &mac);
                    push(&call, &mut head)?;
                }
                evolve_to = Some(current);
            }
        }
        let mut seqs = Vec::with_capacity(batch.len());
        for pending in batch {
            let seq = match &pending.entry {
                Entry::Tick => 0,
                Entry::Plain(call) => push(call, &mut head)?,
                Entry::Start {
                    call,
                    call_id,
                    tool,
                } => {
                    let seq = push(call, &mut head)?;
                    transaction
                        .prepare_cached(
                            "INSERT INTO intents (seq, call_id, tool, owner) VALUES (?1, ?2, ?3, ?4)",
                        )
                        .and_then(|mut s| {
                            s.execute(rusqlite::params![
                                i64::try_from(seq).unwrap_or(i64::MAX),
                                call_id,
                                tool,
                                self.owner
                            ])
                        })
                        .map_err(failed)?;
                    seq
                }
                Entry::Outcome { call, started } => {
                    if let Some(started) = started {
                        let closed = transaction
                            .prepare_cached("DELETE FROM intents WHERE seq = ?1")
                            .and_then(|mut s| {
                                s.execute([i64::try_from(*started).unwrap_or(i64::MAX)])
                            })
                            .map_err(failed)?;
                        // Two processes that find the same stopped process's start both
                        // record it as interrupted; only the first may.
                        if closed == 0 && call.contains("\"status\":\"interrupted\"") {
                            seqs.push(0);
                            continue;
                        }
                    }
                    push(call, &mut head)?
                }
            };
            seqs.push(seq);
        }
        drop(insert);
        transaction.commit().map_err(failed)?;
        self.known = Some(Known { head, version });
        if let (Some(epoch), Some(sealer)) = (evolve_to, &mut self.sealer) {
            // The seal is committed before the key that made it is erased: a crash between
            // the two leaves the epoch sealed twice, never not at all.
            sealer.key.current = sealer.key.current.evolved_to(epoch);
            sealer
                .file
                .write(&sealer.key)
                .map_err(|e| format!("cannot evolve the sealing key: {e}"))?;
        }
        Ok((
            seqs,
            Some(Committed {
                head,
                flushed: flush,
            }),
        ))
    }

    /// Writes zeros past the end of the WAL up to [`wal_reserve`] bytes, and flushes them.
    ///
    /// Under the database's write lock, so that no connection, in this process or another,
    /// writes frames meanwhile; and only past the file's end, where no frame is. SQLite reads
    /// a WAL's frames only up to the last one whose checksum and salt follow the frame
    /// before, so zeros read as the WAL's end, both to readers and to the recovery after a
    /// crash; a frame written later overwrites them in place.
    fn reserve_wal(&self, wal: &Path) -> Result<(), String> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let failed = |e: &dyn std::fmt::Display| format!("cannot reserve the audit WAL: {e}");
        let size = wal_reserve(&self.connection).map_err(|e| failed(&e))?;
        let _lock = Immediate::begin(&self.connection).map_err(|e| failed(&e))?;
        let mut file = open_regular(wal).map_err(|e| failed(&e))?;
        let end = file.seek(SeekFrom::End(0)).map_err(|e| failed(&e))?;
        if end >= size {
            return Ok(());
        }
        std::io::copy(&mut std::io::repeat(0).take(size - end), &mut file)
            .map_err(|e| failed(&e))?;
        file.sync_data().map_err(|e| failed(&e))
    }
}

/// `path` opened for writing, if it is a regular file of its own name: not created (a WAL
/// that is missing is SQLite's to create), and not through a symbolic link (SQLite opens the
/// WAL with `O_NOFOLLOW`), so that nothing is written to a file a link in the state
/// directory names.
fn open_regular(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::MetadataExt as _;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let opened = file.metadata()?;
    let named = std::fs::symlink_metadata(path)?;
    if named.file_type().is_file() && (named.dev(), named.ino()) == (opened.dev(), opened.ino()) {
        Ok(file)
    } else {
        Err(std::io::Error::other(
            "it is not a regular file of its own name",
        ))
    }
}

/// The WAL's size when it holds as many frames as start a checkpoint, and a few more: its
/// header, then each frame's header and page.
fn wal_reserve(connection: &Connection) -> rusqlite::Result<u64> {
    const HEADER: u64 = 32;
    const FRAME_HEADER: u64 = 24;
    const SLACK_FRAMES: u64 = 64;
    let page: i64 = connection.query_row("PRAGMA page_size", [], |row| row.get(0))?;
    let frames: i64 = connection.query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))?;
    let page = u64::try_from(page).unwrap_or(0);
    let frames = u64::try_from(frames).unwrap_or(0);
    Ok(HEADER + (frames + SLACK_FRAMES) * (FRAME_HEADER + page))
}

/// A `BEGIN IMMEDIATE` transaction on the writer's connection, rolled back unless committed.
/// Unlike rusqlite's `Transaction`, which parses `BEGIN` and `COMMIT` anew each time, it runs
/// statements the connection has cached: a commit per call makes the parsing show.
struct Immediate<'c> {
    connection: &'c Connection,
    committed: bool,
}

impl<'c> Immediate<'c> {
    fn begin(connection: &'c Connection) -> rusqlite::Result<Immediate<'c>> {
        connection.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Immediate {
            connection,
            committed: false,
        })
    }

    fn commit(mut self) -> rusqlite::Result<()> {
        self.connection.prepare_cached("COMMIT")?.execute([])?;
        self.committed = true;
        Ok(())
    }
}

impl std::ops::Deref for Immediate<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.connection
    }
}

impl Drop for Immediate<'_> {
    fn drop(&mut self) {
        if !self.committed && !self.connection.is_autocommit() {
            let _ = self.connection.execute_batch("ROLLBACK");
        }
    }
}

/// Creates `dir` user-only if it is missing.
fn create_private_dir(dir: &Path) -> Result<(), AuditError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| AuditError::CreateDir {
            path: dir.display().to_string(),
            source,
        })
}

fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// The lock file of owner `name` (a process that has the log at `db` open): a file beside
/// the log, `<log>-owner-<name>`, since the log's directory holds nothing but files.
fn owner_path(db: &Path, name: &str) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push("-owner-");
    path.push(name);
    PathBuf::from(path)
}

/// Creates and locks this process's owner file; returns its name.
fn claim_owner(db: &Path) -> Result<(String, (PathBuf, File)), AuditError> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{}-{nanos}", std::process::id());
    let path = owner_path(db, &name);
    let open_error = |source| AuditError::Open {
        path: path.display().to_string(),
        source,
    };
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(open_error)?;
    file.lock().map_err(open_error)?;
    Ok((name, (path, file)))
}

/// Whether the process that made the owner file at `path` still has the log open.
fn owner_alive(path: &Path, own: Option<&Path>) -> bool {
    if own == Some(path) {
        return true;
    }
    match File::open(path) {
        // Its process is gone without a trace, or removed its file on the way out.
        Err(_) => false,
        Ok(file) => match file.try_lock() {
            Ok(()) => false,
            Err(std::fs::TryLockError::WouldBlock) => true,
            // A lock that cannot be tested is taken as held: a live call is never declared
            // interrupted.
            Err(std::fs::TryLockError::Error(_)) => true,
        },
    }
}

/// Removes the files of owners that have stopped (a killed process leaves its file behind).
fn remove_dead_owner_files(db: &Path, own: Option<&Path>) {
    let (Some(dir), Some(name)) = (db.parent(), db.file_name()) else {
        return;
    };
    let mut prefix = name.to_owned();
    prefix.push("-owner-");
    let prefix = prefix.to_string_lossy().into_owned();
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let ours = entry.file_name().to_string_lossy().starts_with(&prefix);
        if ours && !owner_alive(&path, own) {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// [`prepare`], tried again while the database is locked, until the busy timeout has passed.
/// A new database starts in SQLite's rollback journal mode, and while another process turns
/// it to WAL, asking the same holds a read lock that SQLite will not wait with (the two could
/// deadlock): it answers "database is locked" at once instead of calling the busy handler.
/// Trying again from the start, with no lock held, waits as any other lock is waited for.
fn prepare_waiting(
    connection: &Connection,
    options: &AuditOptions,
    shown: &str,
) -> Result<(), AuditError> {
    let deadline = Instant::now() + options.busy_timeout;
    loop {
        match prepare(connection, options, shown) {
            Err(AuditError::Sqlite { ref source, .. })
                if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => return result,
        }
    }
}

/// Sets the connection up for durable appends and creates the tables if they are missing (a
/// new log, or one whose creation a crash cut short).
fn prepare(connection: &Connection, options: &AuditOptions, shown: &str) -> Result<(), AuditError> {
    let sqlite = |source| AuditError::Sqlite {
        path: shown.to_owned(),
        source,
    };
    connection
        .busy_timeout(options.busy_timeout)
        .map_err(sqlite)?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .map_err(sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(AuditError::JournalMode {
            path: shown.to_owned(),
            mode,
        });
    }
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(sqlite)?;
    connection
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS records (
                 seq INTEGER PRIMARY KEY,
                 body TEXT NOT NULL,
                 prev_hash BLOB NOT NULL,
                 hash BLOB NOT NULL
             ) STRICT;
             CREATE TABLE IF NOT EXISTS intents (
                 seq INTEGER PRIMARY KEY,
                 call_id TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 owner TEXT NOT NULL
             ) STRICT;",
        )
        .map_err(sqlite)?;
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(sqlite)?;
    match version {
        0 => connection
            .pragma_update(None, "user_version", FORMAT)
            .map_err(sqlite),
        FORMAT => Ok(()),
        found => Err(AuditError::Format {
            path: shown.to_owned(),
            found,
            supported: FORMAT,
        }),
    }
}

/// The newest record: number, body, previous hash, hash.
type Newest = (i64, String, Vec<u8>, Vec<u8>);

fn newest(connection: &Connection) -> rusqlite::Result<Option<Newest>> {
    // Prepared once per connection: parsing the statement cost as much as running it.
    connection
        .prepare_cached("SELECT seq, body, prev_hash, hash FROM records ORDER BY seq DESC LIMIT 1")?
        .query_row([], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()
}

/// Whether records may be chained after `newest`: it must hash to its stored hash, say its
/// own number, and be no older than what the head file witnesses. Returns the head to chain
/// from.
fn check_newest(newest: Option<&Newest>, witnessed: Option<Head>) -> Result<Head, String> {
    let witnessed_seq = witnessed.map_or(0, |h| h.seq);
    if witnessed.is_none() && newest.is_some() {
        // The head file is written with record 0 before the database is created, so a log
        // with records whose head file holds no valid head had it emptied or overwritten: its
        // newest records can no longer be checked.
        return Err(
            "its head file holds no valid head, so the newest records cannot be checked; run `toolgate audit verify`"
                .to_owned(),
        );
    }
    let Some((seq, body, prev_hash, hash)) = newest else {
        if witnessed_seq > 0 {
            return Err(format!(
                "the log is empty but its head file witnessed record {witnessed_seq}; run `toolgate audit verify`"
            ));
        }
        return Ok(Head {
            seq: 0,
            hash: chain::GENESIS,
        });
    };
    let seq = u64::try_from(*seq).map_err(|_| format!("the newest record has number {seq}"))?;
    let intact = chain::claimed_seq(body) == Some(seq)
        && prev_hash.len() == 32
        && chain::record_hash(prev_hash, seq, body).as_slice() == hash.as_slice();
    if !intact {
        return Err(format!(
            "the newest record {seq} does not verify; refusing to append to it (run `toolgate audit verify`)"
        ));
    }
    if seq < witnessed_seq {
        return Err(format!(
            "the log ends at record {seq} but its head file witnessed record {witnessed_seq}; run `toolgate audit verify`"
        ));
    }
    let hash: [u8; 32] = hash
        .as_slice()
        .try_into()
        .map_err(|_| format!("record {seq} has a malformed hash"))?;
    if witnessed.is_some_and(|w| w.seq == seq && w.hash != hash) {
        return Err(format!(
            "the newest record {seq} is not the one its head file witnessed; run `toolgate audit verify`"
        ));
    }
    Ok(Head { seq, hash })
}

/// The background thread: flushes committed records within [`FLUSH_INTERVAL`], writes the
/// head file of what is flushed at most once per interval, and seals each epoch as it ends.
/// When the log is dropped, it flushes and writes the newest head at once.
///
/// The head file only ever names a flushed record: one that named a record lost in a power
/// cut would make the log look truncated, and stop toolgate from appending to it.
fn background_loop(
    head_file: &HeadFile,
    wal: &Path,
    inbox: &Mailbox,
    failed: &AtomicBool,
    epochs: Option<seal::Epochs>,
    shared: &Weak<Shared>,
) {
    // Should this thread stop unexpectedly, committed records would never be flushed and the
    // head file would stop following the log unnoticed: every later commit is refused.
    let _guard = FailOnPanic(failed);
    let write = |head: Head, unflushed: bool| {
        if unflushed && flush_file(wal).is_err() {
            failed.store(true, Ordering::Release);
            return;
        }
        if head_file.write(head).is_err() {
            failed.store(true, Ordering::Release);
        }
    };
    let mut last_write: Option<Instant> = None;
    let mut pending: Option<Head> = None;
    let mut unflushed = false;
    let next_seal = |now_ms: u64| epochs.map(|e| e.end_of(e.at(now_ms)));
    let mut seal_at = next_seal(chain::now_ms());
    loop {
        let mut deadline: Option<Instant> = None;
        if pending.is_some() {
            deadline = Some(last_write.map_or_else(Instant::now, |t| t + FLUSH_INTERVAL));
        }
        if let Some(at) = seal_at {
            // A few milliseconds late, so the clock is past the end when the committer looks.
            let until =
                Instant::now() + Duration::from_millis(at.saturating_sub(chain::now_ms()) + 5);
            deadline = Some(deadline.map_or(until, |d| d.min(until)));
        }
        let (news, closed) = inbox.take(deadline, pending.is_none());
        if let Some(committed) = news {
            pending = Some(committed.head);
            unflushed |= !committed.flushed;
        }
        if closed {
            if let Some(head) = pending {
                write(head, unflushed);
            }
            return;
        }
        let ready = last_write.is_none_or(|t| t.elapsed() >= FLUSH_INTERVAL);
        if let (true, Some(head)) = (ready, pending) {
            write(head, unflushed);
            pending = None;
            unflushed = false;
            last_write = Some(Instant::now());
        }
        if let Some(at) = seal_at
            && chain::now_ms() >= at
        {
            if let Some(shared) = shared.upgrade() {
                let _ = shared.submit(Pending {
                    ticket: 0,
                    entry: Entry::Tick,
                    flush: true,
                });
            }
            seal_at = next_seal(chain::now_ms());
        }
    }
}

/// Marks the log failed if the thread holding it unwinds.
struct FailOnPanic<'a>(&'a AtomicBool);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Flushes the WAL of records committed without a flush. Once a checkpoint has moved them
/// into the database (and flushed it), the WAL may be gone or start over; flushing what is
/// there then is still right.
fn flush_file(wal: &Path) -> std::io::Result<()> {
    match File::open(wal) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the WAL's zeros are written to: the regular file of that name, never what a
    /// symbolic link there names, and nothing that does not exist.
    #[test]
    fn only_a_regular_file_of_its_own_name_is_opened_for_the_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let wal = dir.path().join("audit.db-wal");
        assert!(open_regular(&wal).is_err());
        assert!(!wal.exists());
        let elsewhere = dir.path().join("elsewhere");
        std::fs::write(&elsewhere, "kept").unwrap();
        std::os::unix::fs::symlink(&elsewhere, &wal).unwrap();
        assert!(open_regular(&wal).is_err());
        std::fs::remove_file(&wal).unwrap();
        std::fs::create_dir(&wal).unwrap();
        assert!(open_regular(&wal).is_err());
        std::fs::remove_dir(&wal).unwrap();
        std::fs::write(&wal, "").unwrap();
        assert!(open_regular(&wal).is_ok());
        assert_eq!(std::fs::read_to_string(&elsewhere).unwrap(), "kept");
    }

    #[test]
    fn sync_settings_parse_and_unknown_ones_are_refused_by_name() {
        assert_eq!("effects".parse::<SyncMode>(), Ok(SyncMode::Effects));
        assert_eq!("always".parse::<SyncMode>(), Ok(SyncMode::Always));
        let error = "never".parse::<SyncMode>().unwrap_err();
        assert!(error.contains("`never`"), "{error}");
    }

    #[test]
    fn an_owner_whose_lock_is_released_has_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("audit.db");
        let (_, (path, file)) = claim_owner(&db).unwrap();
        assert!(owner_alive(&path, None));
        drop(file);
        assert!(!owner_alive(&path, None));
        assert!(!owner_alive(&dir.path().join("gone"), None));
    }
}
