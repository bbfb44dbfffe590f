//! The head file: a witness, outside the database, of the newest record committed.
//!
//! A hash chain shows that no record *inside* it was changed, but not that none was cut off
//! its end: a log whose newest records were deleted, or a database replaced by an older copy
//! of itself, is still a perfectly good chain. So after each commit the writer records the
//! newest record's number and hash in `<log>-head`, and `verify` requires the log to still
//! hold that record with that hash.
//!
//! The file holds two 64-byte slots, written alternately (record *n* goes to slot *n* mod 2)
//! and each with its own checksum, so a write torn by a crash leaves the other slot intact;
//! the valid slot with the higher number is the head. The file is written *after* the
//! database commits, so it never names a record that is not committed: it may lag the log
//! (by the records of the last commits before a crash), never lead it.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

const MAGIC: &[u8; 4] = b"TGAH";
const SLOT: usize = 64;

/// The head file beside the log at `db`.
pub fn head_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-head");
    PathBuf::from(name)
}

/// The newest record a head file witnesses: its number (0 for none yet) and hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    pub seq: u64,
    pub hash: [u8; 32],
}

/// An open head file.
#[derive(Debug)]
pub struct HeadFile {
    file: File,
}

impl HeadFile {
    /// Opens the head file of an existing log.
    pub fn open_existing(path: &Path) -> std::io::Result<HeadFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)?;
        Ok(HeadFile { file })
    }

    /// Creates the head file for an empty log, or opens the existing one.
    pub fn open_or_create(path: &Path) -> std::io::Result<HeadFile> {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
        {
            Ok(file) => {
                let head = HeadFile { file };
                head.write(Head {
                    seq: 0,
                    hash: crate::chain::GENESIS,
                })?;
                // The new name must outlive a crash as surely as the records it will witness.
                if let Some(dir) = path.parent() {
                    File::open(dir)?.sync_all()?;
                }
                Ok(head)
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => HeadFile::open_existing(path),
            Err(e) => Err(e),
        }
    }

    /// Records `head` and flushes it to the disk.
    pub fn write(&self, head: Head) -> std::io::Result<()> {
        let slot = encode(head);
        let offset = (head.seq % 2) * SLOT as u64;
        self.file.write_all_at(&slot, offset)?;
        self.file.sync_data()
    }

    /// The head this file witnesses.
    pub fn read(&self) -> std::io::Result<Option<Head>> {
        read_from(&self.file)
    }
}

/// The head witnessed by the file at `path`: `Ok(None)` when the file holds no valid slot,
/// an error (`NotFound` included) when it cannot be read.
pub fn read_head(path: &Path) -> std::io::Result<Option<Head>> {
    read_from(&File::open(path)?)
}

fn read_from(file: &File) -> std::io::Result<Option<Head>> {
    let mut bytes = [0u8; 2 * SLOT];
    let mut filled = 0;
    while filled < bytes.len() {
        let Some(rest) = bytes.get_mut(filled..) else {
            break;
        };
        match file.read_at(rest, filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let (first, second) = bytes.split_at(SLOT);
    Ok([decode(first), decode(second)]
        .into_iter()
        .flatten()
        .max_by_key(|head| head.seq))
}

fn encode(head: Head) -> [u8; SLOT] {
    let mut slot = [0u8; SLOT];
    let mut payload = Vec::with_capacity(44);
    payload.extend_from_slice(MAGIC);
    payload.extend_from_slice(&head.seq.to_be_bytes());
    payload.extend_from_slice(&head.hash);
    let check = Sha256::digest(&payload);
    for (to, from) in slot
        .iter_mut()
        .zip(payload.iter().chain(check.iter().take(8)))
    {
        *to = *from;
    }
    slot
}

fn decode(slot: &[u8]) -> Option<Head> {
    let payload = slot.get(..44)?;
    let check = slot.get(44..52)?;
    if payload.get(..4)? != MAGIC || Sha256::digest(payload).get(..8)? != check {
        return None;
    }
    let seq = u64::from_be_bytes(payload.get(4..12)?.try_into().ok()?);
    let hash = payload.get(12..44)?.try_into().ok()?;
    Some(Head { seq, hash })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_higher_valid_slot_is_the_head_and_a_torn_slot_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log-head");
        let file = HeadFile::open_or_create(&path).unwrap();
        assert_eq!(file.read().unwrap().unwrap().seq, 0);
        file.write(Head {
            seq: 7,
            hash: [7; 32],
        })
        .unwrap();
        file.write(Head {
            seq: 8,
            hash: [8; 32],
        })
        .unwrap();
        assert_eq!(
            read_head(&path).unwrap(),
            Some(Head {
                seq: 8,
                hash: [8; 32]
            })
        );
        // Tear slot 0 (record 8): slot 1 (record 7) still stands.
        file.file.write_all_at(&[0xff; 10], 20).unwrap();
        assert_eq!(
            read_head(&path).unwrap(),
            Some(Head {
                seq: 7,
                hash: [7; 32]
            })
        );
        HeadFile::open_existing(&path).unwrap();
    }
}
