//! The committer's connection: one batch chained and written in one `BEGIN IMMEDIATE`
//! transaction, after the newest record (its own, or another process's, checked first), with
//! starts noted and closed and ended epochs sealed.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension as _};

use crate::chain;
use crate::head::{Head, HeadFile};
use crate::seal::{self, SealKey, SealKeyFile};

use super::background::Committed;
use super::error::{AppendError, ChainRefusal, ReserveError};
use super::group_commit::{Entry, Pending};

/// The committer's connection and files.
#[derive(Debug)]
pub(super) struct Writer {
    pub(super) connection: Connection,
    pub(super) head_file: Arc<HeadFile>,
    pub(super) sealer: Option<Sealer>,
    pub(super) owner: String,
    /// Whether the connection is at `synchronous=FULL` now.
    pub(super) full: bool,
    /// The newest record as of this connection's last commit, and the log's data version then:
    /// while no other connection commits, the version stays and the newest record is this one.
    pub(super) known: Option<Known>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Known {
    head: Head,
    version: i64,
}

#[derive(Debug)]
pub(super) struct Sealer {
    pub(super) file: SealKeyFile,
    pub(super) key: SealKey,
}

impl Writer {
    /// Appends `batch` in one transaction; returns each record's number (0 for a tick) and,
    /// if anything was committed, the new newest record.
    pub(super) fn append(
        &mut self,
        batch: &[Pending],
    ) -> Result<(Vec<u64>, Option<Committed>), AppendError> {
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
            self.connection.pragma_update(None, "synchronous", mode)?;
            self.full = flush;
        }
        // Whatever fails below, the next commit reads the newest record again.
        let known = self.known.take();
        let transaction = Immediate::begin(&self.connection)?;
        let version: i64 = transaction
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |row| row.get(0)))?;
        // Sealing looks at the newest record itself (another process may have sealed it).
        let unchanged = known.filter(|k| k.version == version && !seal_due);
        let (mut head, newest_record) = match unchanged {
            Some(known) => (known.head, None),
            None => {
                let witnessed = self
                    .head_file
                    .read()
                    .map_err(|e| AppendError::HeadFile(Arc::new(e)))?;
                let newest_record = newest(&transaction)?;
                let head = check_newest(newest_record.as_ref(), witnessed)?;
                (head, newest_record)
            }
        };
        let mut insert = transaction.prepare_cached(
            "INSERT INTO records (seq, body, prev_hash, hash) VALUES (?1, ?2, ?3, ?4)",
        )?;
        let mut push = |call: &str, head: &mut Head| -> Result<u64, AppendError> {
            let seq = head.seq + 1;
            let body = chain::body(seq, now, call);
            let hash = chain::record_hash(&head.hash, seq, &body);
            let number = i64::try_from(seq).map_err(|_| AppendError::Full)?;
            insert.execute(rusqlite::params![
                number,
                body,
                head.hash.as_slice(),
                hash.as_slice()
            ])?;
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
                .map_err(|e| AppendError::ReadSealKey(Arc::new(e)))?;
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
                        })?;
                    seq
                }
                Entry::Outcome { call, started } => {
                    if let Some(started) = started {
                        let closed = transaction
                            .prepare_cached("DELETE FROM intents WHERE seq = ?1")
                            .and_then(|mut s| {
                                s.execute([i64::try_from(*started).unwrap_or(i64::MAX)])
                            })?;
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
        transaction.commit()?;
        self.known = Some(Known { head, version });
        if let (Some(epoch), Some(sealer)) = (evolve_to, &mut self.sealer) {
            // The seal is committed before the key that made it is erased: a crash between
            // the two leaves the epoch sealed twice, never not at all.
            sealer.key.current = sealer.key.current.evolved_to(epoch);
            sealer
                .file
                .write(&sealer.key)
                .map_err(|e| AppendError::EvolveSealKey(Arc::new(e)))?;
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
    pub(super) fn reserve_wal(&self, wal: &Path) -> Result<(), ReserveError> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        let size = wal_reserve(&self.connection)?;
        let _lock = Immediate::begin(&self.connection)?;
        let mut file = open_regular(wal)?;
        let end = file.seek(SeekFrom::End(0))?;
        if end >= size {
            return Ok(());
        }
        std::io::copy(&mut std::io::repeat(0).take(size - end), &mut file)?;
        Ok(file.sync_data()?)
    }
}

/// The newest record: number, body, previous hash, hash.
type Newest = (i64, String, Vec<u8>, Vec<u8>);

pub(super) fn newest(connection: &Connection) -> rusqlite::Result<Option<Newest>> {
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
pub(super) fn check_newest(
    newest: Option<&Newest>,
    witnessed: Option<Head>,
) -> Result<Head, ChainRefusal> {
    let witnessed_seq = witnessed.map_or(0, |h| h.seq);
    if witnessed.is_none() && newest.is_some() {
        // The head file is written with record 0 before the database is created, so a log
        // with records whose head file holds no valid head had it emptied or overwritten: its
        // newest records can no longer be checked.
        return Err(ChainRefusal::NoHead);
    }
    let Some((seq, body, prev_hash, hash)) = newest else {
        if witnessed_seq > 0 {
            return Err(ChainRefusal::Emptied {
                witnessed: witnessed_seq,
            });
        }
        return Ok(Head {
            seq: 0,
            hash: chain::GENESIS,
        });
    };
    let seq = u64::try_from(*seq).map_err(|_| ChainRefusal::Number(*seq))?;
    let intact = chain::claimed_seq(body) == Some(seq)
        && prev_hash.len() == 32
        && chain::record_hash(prev_hash, seq, body).as_slice() == hash.as_slice();
    if !intact {
        return Err(ChainRefusal::Unverified(seq));
    }
    if seq < witnessed_seq {
        return Err(ChainRefusal::Truncated {
            seq,
            witnessed: witnessed_seq,
        });
    }
    let hash: [u8; 32] = hash
        .as_slice()
        .try_into()
        .map_err(|_| ChainRefusal::MalformedHash(seq))?;
    if witnessed.is_some_and(|w| w.seq == seq && w.hash != hash) {
        return Err(ChainRefusal::Replaced(seq));
    }
    Ok(Head { seq, hash })
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
}
