//! The writer: group commit of records, and the head file after each commit.
//!
//! Callers of [`AuditLog::record`] build their record's call JSON on their own thread, hand
//! it to the one writer thread and wait. The writer takes every record waiting, numbers and
//! chains them inside one `BEGIN IMMEDIATE` transaction, commits (an fsync of the WAL, as
//! `synchronous=FULL` requires), and only then answers each caller. A caller therefore
//! returns only once its record is durable, and a burst of callers shares one fsync.
//!
//! Inside each transaction the writer reads the newest record again rather than trusting what
//! it wrote last, so several processes (a `serve` and a `call`) can append to one log and
//! keep one chain; a newest record it did not write is checked before anything is chained to
//! it, and one that does not verify stops every append (fail closed). A dead writer fails
//! every later call too: the request cannot be sent or its answer never comes.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags, OptionalExtension as _, TransactionBehavior};
use toolgate_core::{Outcome, RecordError, Recorder};

use crate::AuditError;
use crate::chain;
use crate::head::{Head, HeadFile, head_path};

/// The most records one transaction takes; more wait for the next.
const MAX_BATCH: usize = 4096;

/// The longest a commit waits for the callers of the last batch to send their next records.
const LINGER: Duration = Duration::from_millis(1);

/// The least time between two writes of the head file while records keep coming.
const WITNESS_INTERVAL: Duration = Duration::from_millis(50);

/// The version of the record layout, in `PRAGMA user_version`.
const FORMAT: i64 = 1;

/// How a log is opened.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Also keep the redacted messages and output of each call (a local debug setting; off by
    /// default).
    pub store_values: bool,
    /// How long a commit waits for another process's transaction before it fails.
    pub busy_timeout: Duration,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            store_values: false,
            busy_timeout: Duration::from_secs(5),
        }
    }
}

/// A record waiting for the writer.
struct Pending {
    call: String,
    reply: mpsc::SyncSender<Result<u64, String>>,
}

/// A durable, hash-chained audit log in SQLite. Cloning the `Arc` shares one writer.
#[derive(Debug)]
pub struct AuditLog {
    path: PathBuf,
    options: AuditOptions,
    queue: Mutex<Option<mpsc::Sender<Pending>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pending")
    }
}

impl AuditLog {
    /// Opens the log at `path`, creating it (and its directory, user-only) if needed. An
    /// existing log's newest record must verify and must be the one its head file witnesses
    /// or newer; otherwise nothing is appended to it.
    pub fn open(path: impl AsRef<Path>, options: AuditOptions) -> Result<AuditLog, AuditError> {
        let path = path.as_ref().to_owned();
        let shown = path.display().to_string();
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::DirBuilderExt as _;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|source| AuditError::CreateDir {
                    path: dir.display().to_string(),
                    source,
                })?;
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
        prepare(&connection, &options, &shown)?;
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

        let (queue, inbox) = mpsc::channel::<Pending>();
        let writer = std::thread::Builder::new()
            .name("toolgate-audit".to_owned())
            .spawn(move || write_loop(connection, head_file, &inbox))
            .map_err(AuditError::Thread)?;
        Ok(AuditLog {
            path,
            options,
            queue: Mutex::new(Some(queue)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// The database file this log appends to, as given to [`AuditLog::open`].
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one call's record and returns its sequence number once it is committed.
    pub fn append(&self, call: String) -> Result<u64, RecordError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = self
            .queue
            .lock()
            .ok()
            .and_then(|queue| queue.as_ref().map(|q| q.send(Pending { call, reply })));
        match sent {
            Some(Ok(())) => {}
            _ => return Err(RecordError("the audit writer has stopped".to_owned())),
        }
        match answer.recv() {
            Ok(Ok(seq)) => Ok(seq),
            Ok(Err(message)) => Err(RecordError(message)),
            Err(_) => Err(RecordError(
                "the audit writer stopped before committing the record".to_owned(),
            )),
        }
    }
}

impl Recorder for AuditLog {
    fn record(&self, outcome: &Outcome) -> Result<(), RecordError> {
        self.append(crate::record_body(outcome, self.options.store_values))
            .map(|_| ())
    }
}

impl Drop for AuditLog {
    /// Lets the writer finish what is queued and bring the head file up to date.
    fn drop(&mut self) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.take();
        }
        if let Some(writer) = self.writer.lock().ok().and_then(|mut w| w.take()) {
            let _ = writer.join();
        }
    }
}

/// Sets the connection up for durable appends and creates the table if it is missing (a new
/// log, or one whose creation a crash cut short).
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
    connection
        .query_row(
            "SELECT seq, body, prev_hash, hash FROM records ORDER BY seq DESC LIMIT 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
        )
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

/// The writer thread: batches until every sender is gone, then brings the head file up to
/// date and returns.
fn write_loop(mut connection: Connection, head_file: HeadFile, inbox: &mpsc::Receiver<Pending>) {
    let head_file = Arc::new(head_file);
    let (witness, witness_inbox) = mpsc::channel::<Head>();
    let witness_failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let witness_thread = {
        let head_file = Arc::clone(&head_file);
        let failed = Arc::clone(&witness_failed);
        std::thread::Builder::new()
            .name("toolgate-audit-head".to_owned())
            .spawn(move || witness_loop(&head_file, &witness_inbox, &failed))
            .ok()
    };
    let mut batch: Vec<Pending> = Vec::new();
    // Callers answered together come back together, but not at once: right after a commit
    // the first of them would otherwise make a batch of one or two and leave the rest for a
    // commit later. So the writer waits up to `LINGER` for as many records as the last batch
    // had; a lone caller (a last batch of one) never waits.
    let mut expected = 1;
    while let Ok(first) = inbox.recv() {
        batch.push(first);
        let linger_until = Instant::now() + LINGER;
        while batch.len() < MAX_BATCH {
            match inbox.try_recv() {
                Ok(pending) => batch.push(pending),
                Err(mpsc::TryRecvError::Empty) if batch.len() < expected => {
                    match inbox.recv_timeout(linger_until.saturating_duration_since(Instant::now()))
                    {
                        Ok(pending) => batch.push(pending),
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        expected = batch.len();
        let result = if witness_thread.is_none()
            || witness_failed.load(std::sync::atomic::Ordering::Acquire)
        {
            Err("the audit head file cannot be written".to_owned())
        } else {
            append_batch(&mut connection, &head_file, &batch)
        };
        match result {
            Ok(head) => {
                let first_seq = head.seq + 1 - batch.len() as u64;
                for (i, pending) in batch.drain(..).enumerate() {
                    let _ = pending.reply.send(Ok(first_seq + i as u64));
                }
                // The head file is written beside the next commit, not before answering: it
                // only ever lags, and a caller waits for one fsync, not two.
                hand_to_witness(&witness, head, &witness_failed);
            }
            Err(message) => {
                for pending in batch.drain(..) {
                    let _ = pending.reply.send(Err(message.clone()));
                }
            }
        }
    }
    drop(witness);
    if let Some(thread) = witness_thread {
        let _ = thread.join();
    }
}

/// Hands `head` to the head-file thread. Should that thread be gone, the head file would
/// stop following the log without anyone noticing, and a later truncation would go unfound;
/// so its loss sets `failed`, and every later record fails closed.
fn hand_to_witness(
    witness: &mpsc::Sender<Head>,
    head: Head,
    failed: &std::sync::atomic::AtomicBool,
) {
    if witness.send(head).is_err() {
        failed.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// Appends `batch` in one transaction; returns the new newest record.
fn append_batch(
    connection: &mut Connection,
    head_file: &HeadFile,
    batch: &[Pending],
) -> Result<Head, String> {
    let failed = |e: rusqlite::Error| format!("cannot append to the audit log: {e}");
    let transaction = connection
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(failed)?;
    let witnessed = head_file
        .read()
        .map_err(|e| format!("cannot read the audit head file: {e}"))?;
    let newest = newest(&transaction).map_err(failed)?;
    let mut head = check_newest(newest.as_ref(), witnessed)?;
    {
        let mut insert = transaction
            .prepare_cached(
                "INSERT INTO records (seq, body, prev_hash, hash) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(failed)?;
        let at = chain::now_ms();
        for pending in batch {
            let seq = head.seq + 1;
            let body = chain::body(seq, at, &pending.call);
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
            head = Head { seq, hash };
        }
    }
    transaction.commit().map_err(failed)?;
    Ok(head)
}

/// Writes the newest head it is given, skipping those already overtaken, at most once per
/// [`WITNESS_INTERVAL`] while records keep coming: each write is an fsync on the same disk as
/// the commits, and under load they would halve the commits' pace. When the writer stops, the
/// newest head is written at once.
fn witness_loop(
    head_file: &HeadFile,
    inbox: &mpsc::Receiver<Head>,
    failed: &std::sync::atomic::AtomicBool,
) {
    let write = |head: Head| {
        if head_file.write(head).is_err() {
            failed.store(true, std::sync::atomic::Ordering::Release);
        }
    };
    let mut last_write: Option<Instant> = None;
    let mut pending: Option<Head> = None;
    loop {
        let due = last_write.map(|t| t + WITNESS_INTERVAL);
        let received = match (pending, due) {
            (Some(_), Some(due)) => {
                inbox.recv_timeout(due.saturating_duration_since(Instant::now()))
            }
            _ => inbox
                .recv()
                .map_err(|_| mpsc::RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(head) => pending = Some(head),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some(head) = pending {
                    write(head);
                }
                return;
            }
        }
        while let Ok(newer) = inbox.try_recv() {
            pending = Some(newer);
        }
        let ready = last_write.is_none_or(|t| t.elapsed() >= WITNESS_INTERVAL);
        if let (true, Some(head)) = (ready, pending) {
            write(head);
            pending = None;
            last_write = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[test]
    fn a_head_thread_that_is_gone_fails_later_records() {
        let failed = AtomicBool::new(false);
        let (witness, inbox) = mpsc::channel();
        let head = Head {
            seq: 1,
            hash: chain::GENESIS,
        };
        hand_to_witness(&witness, head, &failed);
        assert!(!failed.load(Ordering::Acquire));
        drop(inbox);
        hand_to_witness(&witness, head, &failed);
        assert!(failed.load(Ordering::Acquire));
    }
}
