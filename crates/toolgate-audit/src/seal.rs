//! Sealed epochs: forward-secure proof that the log up to the end of each epoch is unaltered.
//!
//! The hash chain alone has no key: whoever can write the database and its head file can
//! rewrite the log from any record on and recompute every hash. Sealing closes that gap for
//! the past, in the manner of journald's forward-secure sealing. `toolgate audit seal-setup`
//! draws a random key `k_0`, prints it once as the *verification key* (to be kept away from
//! this machine) and stores it in the *sealing key* file beside the log. Time is cut into
//! epochs of a fixed length from the moment of setup. When an epoch ends, the newest record is
//! *sealed*: a seal record, appended to the chain, holds
//!
//! ```text
//! mac = HMAC-SHA256(k_e, "toolgate-seal" ‖ e (8 bytes BE) ‖ head_seq (8 bytes BE) ‖ head_hash)
//! ```
//!
//! and the key file is overwritten with `k_{e'} = SHA-256("evolve" ‖ k_{e'-1})` applied up to
//! the current epoch `e'`. The function is one-way, so the key left on the machine cannot be
//! turned back into the key of any sealed epoch; someone who takes the machine over can
//! rewrite the epoch still open, not the sealed ones. The verification key derives every
//! `k_e`, so `toolgate audit verify --verification-key K` checks every seal: a record of a
//! sealed epoch rewritten with all hashes recomputed no longer hashes to the head its seal
//! names. Records after the last seal are reported as unsealed, never as verified.
//!
//! The old key is overwritten in place and flushed; on a copy-on-write or journalling file
//! system, or a flash disk that remaps blocks, an old copy may survive on the medium.

use std::fs::File;
use std::io::ErrorKind;
use std::os::unix::fs::{FileExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use sha2::{Digest as _, Sha256};

const MAGIC: &[u8; 4] = b"TGSK";
/// Magic, epoch, start, interval, key, checksum.
const FILE_LEN: usize = 4 + 8 + 8 + 8 + 32 + 8;
const VERIFICATION_PREFIX: &str = "toolgate-seal-v1";

/// The sealing key file beside the log at `db`.
pub fn seal_key_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-seal");
    PathBuf::from(name)
}

/// How time is cut into epochs: from `start_ms` (milliseconds since the Unix epoch), each
/// `interval_ms` long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epochs {
    pub start_ms: u64,
    pub interval_ms: u64,
}

impl Epochs {
    /// The epoch `at_ms` falls in (0 before the start).
    pub fn at(&self, at_ms: u64) -> u64 {
        at_ms.saturating_sub(self.start_ms) / self.interval_ms.max(1)
    }

    /// When `epoch` ends, in milliseconds since the Unix epoch.
    pub fn end_of(&self, epoch: u64) -> u64 {
        self.start_ms.saturating_add(
            epoch
                .saturating_add(1)
                .saturating_mul(self.interval_ms.max(1)),
        )
    }
}

/// The key of one epoch.
#[derive(Clone, PartialEq, Eq)]
pub struct EpochKey {
    pub epoch: u64,
    pub key: [u8; 32],
}

impl std::fmt::Debug for EpochKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EpochKey({})", self.epoch)
    }
}

impl EpochKey {
    /// This key carried forward to `epoch` (no earlier than its own).
    pub fn evolved_to(&self, epoch: u64) -> EpochKey {
        let mut key = self.key;
        for _ in self.epoch..epoch {
            key = evolve(&key);
        }
        EpochKey {
            epoch: epoch.max(self.epoch),
            key,
        }
    }

    /// The seal of the head `(seq, hash)` at the end of this key's epoch.
    pub fn seal(&self, seq: u64, hash: &[u8]) -> [u8; 32] {
        let mut message = Vec::with_capacity(13 + 16 + hash.len());
        message.extend_from_slice(b"toolgate-seal");
        message.extend_from_slice(&self.epoch.to_be_bytes());
        message.extend_from_slice(&seq.to_be_bytes());
        message.extend_from_slice(hash);
        hmac_sha256(&self.key, &message)
    }
}

/// One step of the one-way key evolution.
fn evolve(key: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"evolve");
    hasher.update(key);
    hasher.finalize().into()
}

/// HMAC-SHA256 (RFC 2104) with a 32-byte key.
pub fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = [0x36u8; 64];
    let mut outer_pad = [0x5cu8; 64];
    for ((i, o), k) in inner_pad.iter_mut().zip(outer_pad.iter_mut()).zip(key) {
        *i ^= k;
        *o ^= k;
    }
    let inner: [u8; 32] = Sha256::new()
        .chain_update(inner_pad)
        .chain_update(message)
        .finalize()
        .into();
    Sha256::new()
        .chain_update(outer_pad)
        .chain_update(inner)
        .finalize()
        .into()
}

/// Whether two byte strings are equal, taking the same time wherever they differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the verifier keeps: `k_0` and the epochs.
#[derive(Clone, PartialEq, Eq)]
pub struct VerificationKey {
    pub first: EpochKey,
    pub epochs: Epochs,
}

impl std::fmt::Debug for VerificationKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VerificationKey({:?})", self.epochs)
    }
}

impl std::fmt::Display for VerificationKey {
    /// `toolgate-seal-v1:<k_0 in hex>:<start ms>:<interval ms>`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hex = crate::chain::hex(&self.first.key);
        let hex = hex.strip_prefix("sha256:").unwrap_or(&hex);
        write!(
            f,
            "{VERIFICATION_PREFIX}:{hex}:{}:{}",
            self.epochs.start_ms, self.epochs.interval_ms
        )
    }
}

/// Text that is not a verification key as `toolgate audit seal-setup` prints one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a verification key printed by `toolgate audit seal-setup`")]
pub struct NotAVerificationKey(String);

impl std::str::FromStr for VerificationKey {
    type Err = NotAVerificationKey;

    fn from_str(text: &str) -> Result<Self, NotAVerificationKey> {
        let bad = || NotAVerificationKey(text.to_owned());
        let mut parts = text.trim().split(':');
        if parts.next() != Some(VERIFICATION_PREFIX) {
            return Err(bad());
        }
        let hex = parts.next().ok_or_else(bad)?;
        let start_ms = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        let interval_ms: u64 = parts.next().and_then(|p| p.parse().ok()).ok_or_else(bad)?;
        if parts.next().is_some() || hex.len() != 64 || interval_ms == 0 {
            return Err(bad());
        }
        let mut key = [0u8; 32];
        for (byte, pair) in key.iter_mut().zip(hex.as_bytes().chunks(2)) {
            let pair = std::str::from_utf8(pair).map_err(|_| bad())?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(VerificationKey {
            first: EpochKey { epoch: 0, key },
            epochs: Epochs {
                start_ms,
                interval_ms,
            },
        })
    }
}

/// The sealing key file: the current epoch's key, and the epochs.
#[derive(Debug)]
pub struct SealKeyFile {
    file: File,
}

/// What the sealing key file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealKey {
    pub current: EpochKey,
    pub epochs: Epochs,
}

impl SealKeyFile {
    /// Creates the key file for a new verification key; refuses to replace an existing one,
    /// whose epochs a verifier may still need.
    pub fn create(path: &Path, key: &SealKey) -> std::io::Result<SealKeyFile> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        let sealing = SealKeyFile { file };
        sealing.write(key)?;
        if let Some(dir) = path.parent() {
            File::open(dir)?.sync_all()?;
        }
        Ok(sealing)
    }

    /// Opens the key file at `path`; `Ok(None)` when there is none (the log is not sealed).
    pub fn open(path: &Path) -> std::io::Result<Option<SealKeyFile>> {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
        {
            Ok(file) => Ok(Some(SealKeyFile { file })),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The key it holds now (another process may have evolved it).
    pub fn read(&self) -> std::io::Result<SealKey> {
        let mut bytes = [0u8; FILE_LEN];
        self.file.read_exact_at(&mut bytes, 0)?;
        decode(&bytes).ok_or_else(|| {
            std::io::Error::new(
                ErrorKind::InvalidData,
                "the sealing key file is damaged".to_owned(),
            )
        })
    }

    /// Overwrites the key in place, so the old one is gone from the file, and flushes it.
    pub fn write(&self, key: &SealKey) -> std::io::Result<()> {
        self.file.write_all_at(&encode(key), 0)?;
        self.file.sync_data()
    }
}

fn encode(key: &SealKey) -> [u8; FILE_LEN] {
    let mut bytes = [0u8; FILE_LEN];
    let mut payload = Vec::with_capacity(FILE_LEN);
    payload.extend_from_slice(MAGIC);
    payload.extend_from_slice(&key.current.epoch.to_be_bytes());
    payload.extend_from_slice(&key.epochs.start_ms.to_be_bytes());
    payload.extend_from_slice(&key.epochs.interval_ms.to_be_bytes());
    payload.extend_from_slice(&key.current.key);
    let check = Sha256::digest(&payload);
    for (to, from) in bytes
        .iter_mut()
        .zip(payload.iter().chain(check.iter().take(8)))
    {
        *to = *from;
    }
    bytes
}

fn decode(bytes: &[u8]) -> Option<SealKey> {
    let payload = bytes.get(..FILE_LEN - 8)?;
    let check = bytes.get(FILE_LEN - 8..FILE_LEN)?;
    if payload.get(..4)? != MAGIC || Sha256::digest(payload).get(..8)? != check {
        return None;
    }
    let number = |at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(
            payload.get(at..at + 8)?.try_into().ok()?,
        ))
    };
    Some(SealKey {
        current: EpochKey {
            epoch: number(4)?,
            key: payload.get(28..60)?.try_into().ok()?,
        },
        epochs: Epochs {
            start_ms: number(12)?,
            interval_ms: number(20)?.max(1),
        },
    })
}

/// A seal as a record holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    pub epoch: u64,
    pub head_seq: u64,
    pub head_hash: Vec<u8>,
    pub mac: Vec<u8>,
}

/// The call JSON of a seal record (canonical: its keys in order).
pub fn seal_call(epoch: u64, head_seq: u64, head_hash: &[u8], mac: &[u8]) -> String {
    let hash = crate::chain::hex(head_hash);
    let mac = crate::chain::hex(mac);
    let mac = mac.strip_prefix("sha256:").unwrap_or(&mac);
    format!(
        r#"{{"epoch":{epoch},"head_hash":"{hash}","head_seq":{head_seq},"mac":"hmac-sha256:{mac}","status":"sealed"}}"#
    )
}

/// The offset of the call's JSON in a body (`{"at":"<24 characters>","call":`).
const CALL_AT: usize = 7 + 24 + 9;

/// The seal a record body holds, if it is a seal record. Only seal records' calls start with
/// `epoch`: every other record's first key sorts before it.
pub fn parse_seal(body: &str) -> Option<Seal> {
    let call = body.get(CALL_AT..)?;
    if !call.starts_with("{\"epoch\":") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let call = value.get("call")?;
    if call.get("status")?.as_str()? != "sealed" {
        return None;
    }
    Some(Seal {
        epoch: call.get("epoch")?.as_u64()?,
        head_seq: call.get("head_seq")?.as_u64()?,
        head_hash: unhex(call.get("head_hash")?.as_str()?.strip_prefix("sha256:")?)?,
        mac: unhex(call.get("mac")?.as_str()?.strip_prefix("hmac-sha256:")?)?,
    })
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// Sets sealing up for the log at `db`: draws `k_0`, stores it as the sealing key of epoch 0
/// (epochs `interval` long from now) and returns the verification key, which is shown once
/// and kept nowhere on this machine. A log already sealed is refused. A process that has the
/// log open starts sealing once it opens it again.
pub fn seal_setup(
    db: &Path,
    interval: std::time::Duration,
) -> Result<VerificationKey, crate::AuditError> {
    let path = seal_key_path(db);
    let key_error = |source| crate::AuditError::SealKey {
        path: path.display().to_string(),
        source,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| crate::AuditError::CreateDir {
                path: dir.display().to_string(),
                source,
            })?;
    }
    let first = EpochKey {
        epoch: 0,
        key: random_key().map_err(key_error)?,
    };
    let epochs = Epochs {
        start_ms: crate::chain::now_ms(),
        interval_ms: u64::try_from(interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1),
    };
    let key = SealKey {
        current: first.clone(),
        epochs,
    };
    match SealKeyFile::create(&path, &key) {
        Ok(_) => Ok(VerificationKey { first, epochs }),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            Err(crate::AuditError::SealedAlready(db.display().to_string()))
        }
        Err(e) => Err(key_error(e)),
    }
}

/// A new random `k_0`.
pub fn random_key() -> std::io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom::fill(&mut key).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231_case_1() {
        // RFC 4231 test case 1 uses a 20-byte key; zero-padding it to 32 bytes gives the same
        // HMAC, since HMAC pads short keys with zeros.
        let mut key = [0u8; 32];
        key[..20].copy_from_slice(&[0x0b; 20]);
        let mac = hmac_sha256(&key, b"Hi There");
        assert_eq!(
            crate::chain::hex(&mac),
            "sha256:b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn keys_evolve_one_way_and_the_verifier_derives_each() {
        let first = EpochKey {
            epoch: 0,
            key: [7; 32],
        };
        let third = first.evolved_to(3);
        assert_eq!(third.epoch, 3);
        assert_eq!(third, first.evolved_to(1).evolved_to(3));
        assert_ne!(third.key, first.key);
        assert_ne!(
            third.seal(5, &[1; 32]),
            first.evolved_to(2).seal(5, &[1; 32])
        );
    }

    #[test]
    fn verification_keys_and_key_files_round_trip() {
        let key = VerificationKey {
            first: EpochKey {
                epoch: 0,
                key: [0xab; 32],
            },
            epochs: Epochs {
                start_ms: 1_000,
                interval_ms: 900_000,
            },
        };
        assert_eq!(key.to_string().parse::<VerificationKey>().unwrap(), key);
        assert!(
            "toolgate-seal-v1:ab:1:1"
                .parse::<VerificationKey>()
                .is_err()
        );
        let sealed = SealKey {
            current: key.first.evolved_to(4),
            epochs: key.epochs,
        };
        assert_eq!(decode(&encode(&sealed)), Some(sealed));
        let call = seal_call(4, 9, &[1; 32], &[2; 32]);
        let body = crate::chain::body(10, 0, &call);
        let seal = parse_seal(&body).unwrap();
        assert_eq!((seal.epoch, seal.head_seq), (4, 9));
        assert_eq!(seal.mac, vec![2; 32]);
    }
}
