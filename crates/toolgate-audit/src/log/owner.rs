//! Owner files: each process that opens the log locks a file of its own beside it, so a start
//! whose process no longer holds its lock is known to be interrupted.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::AuditError;

/// The lock file of owner `name` (a process that has the log at `db` open): a file beside
/// the log, `<log>-owner-<name>`, since the log's directory holds nothing but files.
pub(super) fn owner_path(db: &Path, name: &str) -> PathBuf {
    let mut path = db.as_os_str().to_owned();
    path.push("-owner-");
    path.push(name);
    PathBuf::from(path)
}

/// Creates and locks this process's owner file; returns its name.
pub(super) fn claim_owner(db: &Path) -> Result<(String, (PathBuf, File)), AuditError> {
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
pub(super) fn owner_alive(path: &Path, own: Option<&Path>) -> bool {
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
pub(super) fn remove_dead_owner_files(db: &Path, own: Option<&Path>) {
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

#[cfg(test)]
mod tests {
    use super::*;

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
