//! `verify`: walks the chain once, in storage order, and names the first record that is not
//! where and what the chain says it should be.
//!
//! What it finds, for a log changed with any SQLite tool:
//!
//! - **edited** — a record's body, hash or previous hash changed: its hash no longer matches
//!   what it covers; or it was rewritten with a recomputed hash, and the next record no longer
//!   links to it;
//! - **missing** — records deleted from the middle: the next record claims a later number;
//! - **out of order** — records moved: a record claims another number than its place;
//! - **inserted** — a record added between two others: the record after it links past it;
//! - **truncated** — the newest records deleted, or the database replaced by an older copy:
//!   the log ends before the record its head file witnessed; a head file that is missing, or
//!   emptied or overwritten so that it holds no valid head, beside a log with records is a
//!   finding of its own, since it would otherwise hide such a cut.
//!
//! What it cannot find: a log rewritten from some record to its end *together with* its head
//! file (SHA-256 has no key, so whoever can write both can recompute both); and the newest
//! records written after the head file was last updated (at most the last commits before a
//! crash), which can be deleted or appended to unnoticed. Keeping a copy of the head (`verify`
//! prints it) somewhere else closes both gaps up to that copy.

use std::fmt;
use std::io::ErrorKind;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use sha2::Digest as _;

use crate::AuditError;
use crate::chain::{self, GENESIS};
use crate::head::{Head, head_path, read_head};
use crate::read::{StoredRecord, open_for_reading, sqlite};
use crate::seal::{self, EpochKey, VerificationKey};

/// What `verify` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Records that verified, from the first.
    pub records: u64,
    /// The newest record that verified: number and hash.
    pub head: Option<(u64, String)>,
    /// The record the head file witnesses, if it holds one.
    pub witnessed: Option<u64>,
    /// Whether the log is intact, and if not, the first thing wrong with it.
    pub verdict: Verdict,
    /// The calls toolgate was stopped in the middle of, as their interrupted records say.
    pub interrupted: Vec<Interrupted>,
    /// What the seals prove, when a verification key was given.
    pub sealing: Option<Sealing>,
}

/// A call whose outcome is unknown: toolgate stopped while it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interrupted {
    /// The interrupted record.
    pub seq: u64,
    /// The call's start.
    pub started: u64,
    pub call_id: String,
    pub tool: String,
}

/// What the seals of a log prove, checked with its verification key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sealing {
    /// Each epoch whose seal verified: the epoch, and the records it seals (first, last).
    pub sealed: Vec<(u64, u64, u64)>,
    /// The first seal that did not verify.
    pub broken: Option<SealFinding>,
    /// The records after the last seal that verified (first, last), which no seal covers yet.
    pub unsealed: Option<(u64, u64)>,
}

/// A seal that does not verify: the records of its epoch were altered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealFinding {
    pub epoch: u64,
    /// The records the epoch's seal was made over (after the previous seal, to its head).
    pub first: u64,
    pub last: u64,
    /// The seal record.
    pub seal_seq: u64,
    pub reason: String,
}

impl fmt::Display for SealFinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "epoch {} (records {} to {}) was altered: {} (seal record {})",
            self.epoch, self.first, self.last, self.reason, self.seal_seq
        )
    }
}

/// Whether the log is intact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every record is in the chain and the log still holds what its head file witnesses.
    Intact,
    /// The first thing found wrong.
    Broken(Finding),
}

/// The first thing wrong with a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// Record `seq` was changed.
    Edited { seq: u64, reason: String },
    /// Records `first` to `last` were deleted from the middle.
    Missing { first: u64, last: u64 },
    /// The record stored as `position` is record `holds`.
    OutOfOrder { position: u64, holds: u64 },
    /// The record stored as `seq` is not part of the chain.
    Inserted { seq: u64 },
    /// The log ends at `last`, before the record its head file witnessed.
    Truncated { last: u64, witnessed: u64 },
    /// The log has records but no head file.
    HeadMissing,
    /// The log has records but its head file holds no valid head (it was emptied, zeroed or
    /// overwritten), so the newest records cannot be checked.
    HeadInvalid,
}

impl Finding {
    /// The first bad record's number (for a truncated log, the first one missing).
    pub fn seq(&self) -> Option<u64> {
        match self {
            Finding::Edited { seq, .. } | Finding::Inserted { seq } => Some(*seq),
            Finding::Missing { first, .. } => Some(*first),
            Finding::OutOfOrder { position, .. } => Some(*position),
            Finding::Truncated { last, .. } => Some(last + 1),
            Finding::HeadMissing | Finding::HeadInvalid => None,
        }
    }
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::Edited { seq, reason } => write!(f, "record {seq} was edited: {reason}"),
            Finding::Missing { first, last } if first == last => {
                write!(f, "record {first} is missing: it was deleted")
            }
            Finding::Missing { first, last } => {
                write!(
                    f,
                    "records {first} to {last} are missing: they were deleted"
                )
            }
            Finding::OutOfOrder { position, holds } => write!(
                f,
                "record {position} is out of order: the record stored there is record {holds}"
            ),
            Finding::Inserted { seq } => write!(
                f,
                "record {seq} was inserted: it is not part of the chain, which continues past it"
            ),
            Finding::Truncated { last, witnessed } => write!(
                f,
                "record {} is missing: the log was truncated; it ends at record {last} but its head file witnessed record {witnessed}",
                last + 1
            ),
            Finding::HeadMissing => write!(
                f,
                "the head file is missing: the newest records cannot be checked"
            ),
            Finding::HeadInvalid => write!(
                f,
                "the head file holds no valid head (it was emptied or overwritten): the newest records cannot be checked"
            ),
        }
    }
}

/// A record as the walk sees it.
struct Seen {
    record: StoredRecord,
    /// The number its body claims, if its hash covers that body under that number.
    intact_as: Option<u64>,
}

impl Seen {
    fn new(record: StoredRecord) -> Seen {
        let intact_as = chain::claimed_seq(&record.body).filter(|&claimed| {
            record.prev_hash.len() == 32
                && chain::record_hash(&record.prev_hash, claimed, &record.body).as_slice()
                    == record.hash.as_slice()
        });
        Seen { record, intact_as }
    }
}

/// Verifies the log at `path` and its head file.
pub fn verify(path: &Path) -> Result<Verification, AuditError> {
    verify_with(path, None)
}

/// Verifies the log at `path` and its head file and, with the log's verification key, every
/// seal in it.
pub fn verify_with(path: &Path, key: Option<&VerificationKey>) -> Result<Verification, AuditError> {
    // Each record's hash covers only what the record stores, so the hashes can be checked on
    // a second thread while this one reads on and checks the links. Should any hash fail, the
    // log is walked again one record at a time, to name exactly what is wrong.
    let failed = AtomicBool::new(false);
    let walked = std::thread::scope(|scope| {
        let (to_hasher, batches) = mpsc::sync_channel::<HashBatch>(4);
        let hasher = scope.spawn(|| {
            for batch in batches {
                if !batch.holds() {
                    failed.store(true, Ordering::Release);
                    return;
                }
            }
        });
        let mut deferred = Deferred {
            batch: HashBatch::default(),
            to_hasher: Some(to_hasher),
            failed: &failed,
        };
        let walked = walk_log(path, key, Some(&mut deferred));
        deferred.finish();
        drop(deferred);
        if hasher.join().is_err() {
            failed.store(true, Ordering::Release);
        }
        walked
    });
    match walked? {
        Some(verification) if !failed.load(Ordering::Acquire) => Ok(verification),
        _ => walk_log(path, key, None)?.ok_or_else(|| AuditError::Refused {
            path: path.display().to_string(),
            message: "the log changed while it was verified".to_owned(),
        }),
    }
}

/// Records whose hashes are still to be checked, copied out of the database.
#[derive(Default)]
struct HashBatch {
    bodies: Vec<u8>,
    /// Number, end of its body in `bodies`, previous hash, hash.
    records: Vec<(u64, usize, [u8; 32], [u8; 32])>,
}

impl HashBatch {
    /// The bytes of bodies a batch holds before it goes to the hasher.
    const BYTES: usize = 1 << 20;

    /// Whether every record in it hashes to its stored hash.
    fn holds(&self) -> bool {
        let mut start = 0;
        self.records.iter().all(|(seq, end, prev, hash)| {
            let body = self.bodies.get(start..*end).unwrap_or_default();
            start = *end;
            let mut hasher = sha2::Sha256::new();
            hasher.update(prev);
            hasher.update(seq.to_be_bytes());
            hasher.update(body);
            let computed: [u8; 32] = hasher.finalize().into();
            computed == *hash
        })
    }
}

/// Hands records' hashes to the hasher thread.
struct Deferred<'a> {
    batch: HashBatch,
    to_hasher: Option<mpsc::SyncSender<HashBatch>>,
    failed: &'a AtomicBool,
}

impl Deferred<'_> {
    /// Queues record `seq`; false if it cannot be (a hash of the wrong length, or the hasher
    /// has found a record that does not hold already).
    fn push(&mut self, seq: u64, body: &str, prev_hash: &[u8], hash: &[u8]) -> bool {
        let (Ok(prev), Ok(hash)) = (<[u8; 32]>::try_from(prev_hash), <[u8; 32]>::try_from(hash))
        else {
            return false;
        };
        self.batch.bodies.extend_from_slice(body.as_bytes());
        self.batch
            .records
            .push((seq, self.batch.bodies.len(), prev, hash));
        if self.batch.bodies.len() >= HashBatch::BYTES {
            self.send();
            if self.failed.load(Ordering::Acquire) {
                return false;
            }
        }
        true
    }

    fn send(&mut self) {
        let batch = std::mem::take(&mut self.batch);
        if let Some(to_hasher) = &self.to_hasher
            && to_hasher.send(batch).is_err()
        {
            self.failed.store(true, Ordering::Release);
        }
    }

    /// Sends what is left and lets the hasher finish.
    fn finish(&mut self) {
        self.send();
        self.to_hasher.take();
    }
}

/// Walks the log. With `deferred`, hashes are handed to it rather than checked here, and a
/// log that does not fit returns `None` (to be walked again without); without, the first
/// record that does not fit is named.
fn walk_log(
    path: &Path,
    key: Option<&VerificationKey>,
    mut deferred: Option<&mut Deferred<'_>>,
) -> Result<Option<Verification>, AuditError> {
    let witnessed = match read_head(&head_path(path)) {
        Ok(head) => Some(head),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(source) => {
            return Err(AuditError::Head {
                path: head_path(path).display().to_string(),
                source,
            });
        }
    };
    let connection = open_for_reading(path)?;
    // Reading the log through a memory map spares a system call per page.
    connection
        .pragma_update(None, "mmap_size", 1i64 << 40)
        .map_err(|e| sqlite(path, e))?;
    // `open` creates the database file before its table, so a crash between the two leaves a
    // log without the table: it holds no records, like an empty one.
    let has_table = connection
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'records'",
            [],
            |row| row.get::<_, i64>(0),
        )
        .map_err(|e| sqlite(path, e))?
        > 0;
    let query = if has_table {
        "SELECT seq, body, prev_hash, hash FROM records ORDER BY seq"
    } else {
        "SELECT 0, '', x'', x'' WHERE 0"
    };
    let mut statement = connection.prepare(query).map_err(|e| sqlite(path, e))?;
    let mut rows = statement.query([]).map_err(|e| sqlite(path, e))?;
    let witnessed_head: Option<Head> = witnessed.flatten();
    let mut walk = Walk {
        expected: 1,
        last_hash: GENESIS.to_vec(),
        before_last: GENESIS.to_vec(),
        witnessed_hash: None,
        interrupted: Vec::new(),
        seals: key.map(|key| SealWalk {
            key: key.first.clone(),
            sealing: Sealing {
                sealed: Vec::new(),
                broken: None,
                unsealed: None,
            },
            sealed_through: 0,
        }),
    };
    // The common case — every record fits — reads each row in place, without copying it;
    // only the first record that does not fit is copied out, with the one after it, to say
    // why.
    loop {
        let Some(row) = rows.next().map_err(|e| sqlite(path, e))? else {
            break;
        };
        let seq = row.get_ref(0).and_then(|v| Ok(v.as_i64()?));
        let body = row.get_ref(1).and_then(|v| Ok(v.as_str()?));
        let prev_hash = row.get_ref(2).and_then(|v| Ok(v.as_blob()?));
        let hash = row.get_ref(3).and_then(|v| Ok(v.as_blob()?));
        if let (Ok(seq), Ok(body), Ok(prev_hash), Ok(hash)) = (seq, body, prev_hash, hash) {
            let linked = u64::try_from(seq).ok() == Some(walk.expected)
                && prev_hash == walk.last_hash.as_slice()
                && chain::claimed_seq(body) == Some(walk.expected);
            let fits = linked
                && match deferred.as_deref_mut() {
                    Some(deferred) => deferred.push(walk.expected, body, prev_hash, hash),
                    None => chain::record_hash(prev_hash, walk.expected, body).as_slice() == hash,
                };
            if fits {
                walk.note(walk.expected, body);
                if witnessed_head.is_some_and(|h| h.seq == walk.expected) {
                    walk.witnessed_hash = Some(hash.to_vec());
                }
                // The two buffers trade places rather than a new one being made per record.
                std::mem::swap(&mut walk.before_last, &mut walk.last_hash);
                walk.last_hash.clear();
                walk.last_hash.extend_from_slice(hash);
                walk.expected += 1;
                continue;
            }
        }
        if deferred.is_some() {
            return Ok(None);
        }
        let seen = Seen::new(owned(row).map_err(|e| sqlite(path, e))?);
        let mut fetch = || -> Result<Option<Seen>, AuditError> {
            match rows.next().map_err(|e| sqlite(path, e))? {
                Some(row) => Ok(Some(Seen::new(owned(row).map_err(|e| sqlite(path, e))?))),
                None => Ok(None),
            }
        };
        let next = fetch()?;
        let finding = diagnose(&walk, &seen, next.as_ref(), &mut fetch)?;
        return Ok(Some(walk.finish(witnessed_head, Verdict::Broken(finding))));
    }
    let last = walk.expected - 1;
    let verdict = match (witnessed, witnessed_head) {
        (None, _) if last > 0 => Verdict::Broken(Finding::HeadMissing),
        // A head file is written with record 0 before the database is created, so one with no
        // valid slot beside records was emptied or overwritten since: treating it as no
        // witness would let the newest records be cut off unnoticed.
        (Some(None), _) if last > 0 => Verdict::Broken(Finding::HeadInvalid),
        (_, Some(head)) if head.seq > last => Verdict::Broken(Finding::Truncated {
            last,
            witnessed: head.seq,
        }),
        (_, Some(head))
            if head.seq > 0 && walk.witnessed_hash.as_deref() != Some(head.hash.as_slice()) =>
        {
            Verdict::Broken(Finding::Edited {
                seq: head.seq,
                reason: "it is not the record its head file witnessed: the log was rewritten from there on".to_owned(),
            })
        }
        _ => Verdict::Intact,
    };
    Ok(Some(walk.finish(witnessed_head, verdict)))
}

/// A row copied out of the database, read leniently: a value of the wrong type (a number
/// where text belongs) reads as empty, so that `diagnose` can still name the record.
fn owned(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRecord> {
    let text = |i| -> rusqlite::Result<String> {
        Ok(match row.get_ref(i)? {
            rusqlite::types::ValueRef::Text(t) => String::from_utf8_lossy(t).into_owned(),
            _ => String::new(),
        })
    };
    let blob = |i| -> rusqlite::Result<Vec<u8>> {
        Ok(match row.get_ref(i)? {
            rusqlite::types::ValueRef::Blob(b) => b.to_vec(),
            _ => Vec::new(),
        })
    };
    Ok(StoredRecord {
        seq: row.get_ref(0)?.as_i64().unwrap_or(0),
        body: text(1)?,
        prev_hash: blob(2)?,
        hash: blob(3)?,
    })
}

/// How far the chain verified.
struct Walk {
    /// The number the next record must have.
    expected: u64,
    last_hash: Vec<u8>,
    /// The hash before `last_hash`: what a record links to if the last one was inserted.
    before_last: Vec<u8>,
    /// The hash of the record the head file witnesses, once the walk passed it.
    witnessed_hash: Option<Vec<u8>>,
    interrupted: Vec<Interrupted>,
    seals: Option<SealWalk>,
}

/// The seals checked so far.
struct SealWalk {
    /// The key of the epoch of the last seal checked (evolved forward as seals come).
    key: EpochKey,
    sealing: Sealing,
    /// The last record a verified seal covers.
    sealed_through: u64,
}

impl Walk {
    /// Looks at a record that fits the chain, `seq` with `body`, for what it says beyond the
    /// chain: a seal, or a call that was interrupted. `last_hash` is still the hash of the
    /// record before it.
    fn note(&mut self, seq: u64, body: &str) {
        if let Some(interrupted) = parse_interrupted(seq, body) {
            self.interrupted.push(interrupted);
            return;
        }
        let Some(seals) = &mut self.seals else {
            return;
        };
        if seals.sealing.broken.is_some() {
            return;
        }
        let Some(seal) = seal::parse_seal(body) else {
            return;
        };
        let first = seals.sealed_through + 1;
        let broken = |reason: String| SealFinding {
            epoch: seal.epoch,
            first,
            last: seal.head_seq,
            seal_seq: seq,
            reason,
        };
        if seal.epoch < seals.key.epoch {
            seals.sealing.broken = Some(broken(format!(
                "its seal names epoch {} after a seal of epoch {}",
                seal.epoch, seals.key.epoch
            )));
            return;
        }
        seals.key = seals.key.evolved_to(seal.epoch);
        let mac = seals.key.seal(seal.head_seq, &seal.head_hash);
        if !seal::same(&mac, &seal.mac) {
            seals.sealing.broken = Some(broken(
                "its seal does not verify with the verification key".to_owned(),
            ));
        } else if seal.head_seq + 1 != seq || !seal::same(&seal.head_hash, &self.last_hash) {
            seals.sealing.broken = Some(broken(format!(
                "record {} is not the record its seal names: the epoch was rewritten and its hashes recomputed",
                seal.head_seq
            )));
        } else {
            seals
                .sealing
                .sealed
                .push((seal.epoch, first, seal.head_seq));
            // The seal record itself is covered by the next seal.
            seals.sealed_through = seal.head_seq;
        }
    }

    fn finish(mut self, witnessed: Option<Head>, verdict: Verdict) -> Verification {
        let records = self.expected - 1;
        let sealing = self.seals.take().map(|mut seals| {
            if seals.sealing.broken.is_none() && seals.sealed_through < records {
                seals.sealing.unsealed = Some((seals.sealed_through + 1, records));
            }
            seals.sealing
        });
        Verification {
            records,
            head: (records > 0).then(|| (records, chain::hex(&self.last_hash))),
            witnessed: witnessed.map(|h| h.seq),
            verdict,
            interrupted: self.interrupted,
            sealing,
        }
    }
}

/// The offset of the call's JSON in a body (`{"at":"<24 characters>","call":`).
const CALL_AT: usize = 7 + 24 + 9;

/// The interrupted call a record body tells of, if it is an interrupted record. Only those
/// records' calls start with `call_id`: every other kind has an earlier first key.
fn parse_interrupted(seq: u64, body: &str) -> Option<Interrupted> {
    if !body.get(CALL_AT..)?.starts_with("{\"call_id\":") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let call = value.get("call")?;
    if call.get("status")?.as_str()? != "interrupted" {
        return None;
    }
    Some(Interrupted {
        seq,
        started: call.get("started")?.as_u64()?,
        call_id: call.get("call_id")?.as_str()?.to_owned(),
        tool: call.get("tool")?.as_str()?.to_owned(),
    })
}

/// Why `seen`, the first record that does not fit, does not fit.
fn diagnose(
    walk: &Walk,
    seen: &Seen,
    next: Option<&Seen>,
    fetch: &mut dyn FnMut() -> Result<Option<Seen>, AuditError>,
) -> Result<Finding, AuditError> {
    let expected = walk.expected;
    let position = u64::try_from(seen.record.seq).unwrap_or(0);
    let Some(claimed) = seen.intact_as else {
        // Its hash does not cover it. If the record after it continues the chain from the
        // record before it, it was never in the chain: it was inserted.
        let bypassed = next
            .is_some_and(|n| n.intact_as == Some(expected) && n.record.prev_hash == walk.last_hash);
        return Ok(if bypassed {
            Finding::Inserted { seq: position }
        } else {
            Finding::Edited {
                seq: position,
                reason: "its hash does not match its contents".to_owned(),
            }
        });
    };
    Ok(if claimed < expected {
        if seen.record.prev_hash == walk.before_last && expected > 1 {
            // A second record claims the last one's place and links where it did; the chain
            // continues from this one, so the last was inserted.
            Finding::Inserted { seq: expected - 1 }
        } else {
            Finding::OutOfOrder {
                position,
                holds: claimed,
            }
        }
    } else if claimed > expected {
        // Moved or deleted: the record that belongs here is either later in the log or gone.
        let mut later = next.is_some_and(|n| n.intact_as == Some(expected));
        while !later {
            match fetch()? {
                Some(other) => later = other.intact_as == Some(expected),
                None => break,
            }
        }
        if later {
            Finding::OutOfOrder {
                position: expected,
                holds: claimed,
            }
        } else {
            Finding::Missing {
                first: expected,
                last: claimed - 1,
            }
        }
    } else if position != expected {
        Finding::Edited {
            seq: expected,
            reason: format!("it is stored under number {}", seen.record.seq),
        }
    } else if expected == 1 {
        Finding::Edited {
            seq: 1,
            reason: "it does not start the chain".to_owned(),
        }
    } else {
        Finding::Edited {
            seq: expected - 1,
            reason: format!(
                "record {expected} does not link to it: it was altered and its hash recomputed"
            ),
        }
    })
}
