//! Where "allow for this workspace" grants are kept between runs: a JSON file, mode 0600,
//! replaced whole on every change. Once grants are never written anywhere, so they end with
//! the process.
//!
//! A file that cannot be read or parsed restores nothing: the person is asked again, which
//! is the closed side of the mistake.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The largest grants file read; far more than any person allows by hand.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// One standing grant as stored: what it covers and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoredGrant {
    pub workspace: String,
    pub tool: String,
    pub expires_at_ms: u64,
}

/// Why the grants file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GrantsFileError {
    #[error("cannot read the grants file `{path}`: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the grants file `{path}` is larger than {MAX_FILE_BYTES} bytes")]
    TooLarge { path: PathBuf },
    #[error("the grants file `{path}` is not a list of grants: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("the grants file `{path}` {problem}; it could have been written by someone else")]
    Untrusted {
        path: PathBuf,
        problem: &'static str,
    },
    #[error("cannot write the grants file `{path}`: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The grants in `path`; none when it does not exist. A file another user owns, or that
/// others may write or read, is refused: a grant in it would let calls run without asking.
pub fn load(path: &Path) -> Result<Vec<StoredGrant>, GrantsFileError> {
    let read = |source| GrantsFileError::Read {
        path: path.to_owned(),
        source,
    };
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(read(e)),
    };
    let metadata = file.metadata().map_err(read)?;
    let untrusted = |problem| GrantsFileError::Untrusted {
        path: path.to_owned(),
        problem,
    };
    if Some(metadata.uid()) != current_uid() {
        return Err(untrusted("is not owned by the current user"));
    }
    if metadata.mode() & 0o077 != 0 {
        return Err(untrusted("is open to the group or to others"));
    }
    if metadata.len() > MAX_FILE_BYTES {
        return Err(GrantsFileError::TooLarge {
            path: path.to_owned(),
        });
    }
    serde_json::from_reader(std::io::BufReader::new(file)).map_err(|source| {
        GrantsFileError::Parse {
            path: path.to_owned(),
            source,
        }
    })
}

/// Replaces `path` with `grants`: written to a 0600 temporary file beside it, then renamed,
/// so a reader never sees half a list. Each write has its own temporary file, so two writers
/// never write into, or rename away, each other's.
pub fn save(path: &Path, grants: &[StoredGrant]) -> Result<(), GrantsFileError> {
    let write = |source| GrantsFileError::Write {
        path: path.to_owned(),
        source,
    };
    let text = serde_json::to_string_pretty(grants).map_err(|e| write(e.into()))?;
    let temporary = temporary_path(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(write)?;
    file.write_all(text.as_bytes()).map_err(write)?;
    file.sync_all().map_err(write)?;
    std::fs::rename(&temporary, path).map_err(write)
}

/// The grants file as the store of the pipeline's ledger: every change of the standing
/// grants replaces it whole. The ledger hands it each list under its own lock, so a slower
/// writer with an older list cannot bring back a grant revoked meanwhile.
#[derive(Debug, Clone)]
pub struct GrantsFile {
    path: PathBuf,
}

impl GrantsFile {
    pub fn new(path: PathBuf) -> GrantsFile {
        GrantsFile { path }
    }
}

impl toolgate_core::GrantStore for GrantsFile {
    fn keep(&self, standing: &[toolgate_core::Grant]) -> Result<(), String> {
        let stored: Vec<StoredGrant> = standing
            .iter()
            .map(|g| StoredGrant {
                workspace: g.workspace.clone(),
                tool: g.tool.clone(),
                expires_at_ms: g.expires_at_ms,
            })
            .collect();
        save(&self.path, &stored).map_err(|e| e.to_string())
    }
}

/// The user this process runs as, from the owner of `/proc/self`; `None` where that cannot
/// be read, which refuses every grants file.
fn current_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// A name beside `path` that no other write, in this process or another, is using.
fn temporary_path(path: &Path) -> PathBuf {
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        WRITES.fetch_add(1, Ordering::Relaxed)
    ));
    PathBuf::from(temporary)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn grants_round_trip_through_a_user_only_file() {
        let dir = std::env::temp_dir().join(format!("toolgate-standing-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grants.json");
        assert_eq!(load(&path).unwrap(), vec![]);
        let grants = vec![StoredGrant {
            workspace: "ws".into(),
            tool: "edit_file".into(),
            expires_at_ms: 42,
        }];
        save(&path, &grants).unwrap();
        assert_eq!(load(&path).unwrap(), grants);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        std::fs::write(
            &path,
            r#"[{"workspace": "ws", "tool": "x", "scope": "all"}]"#,
        )
        .unwrap();
        assert!(matches!(load(&path), Err(GrantsFileError::Parse { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_grants_file_others_can_read_or_write_is_refused() {
        let dir =
            std::env::temp_dir().join(format!("toolgate-standing-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grants.json");
        let grants = vec![StoredGrant {
            workspace: "ws".into(),
            tool: "edit_file".into(),
            expires_at_ms: 42,
        }];
        save(&path, &grants).unwrap();
        for mode in [0o620, 0o604, 0o640] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            assert!(
                matches!(load(&path), Err(GrantsFileError::Untrusted { .. })),
                "mode {mode:o}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn concurrent_writers_each_use_their_own_temporary_file() {
        let path = Path::new("/state/grants.json");
        assert_ne!(temporary_path(path), temporary_path(path));
        let dir = std::env::temp_dir().join(format!(
            "toolgate-standing-concurrent-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("grants.json");
        let writers: Vec<_> = (0..8)
            .map(|n| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for round in 0..50 {
                        let grants = vec![StoredGrant {
                            workspace: format!("ws{n}"),
                            tool: format!("tool{round}"),
                            expires_at_ms: 1,
                        }];
                        save(&path, &grants).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        assert_eq!(load(&path).unwrap().len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
