//! Writing a file beneath the root: atomically, never through a link, and only if the file is
//! still what the caller expects.
//!
//! A write goes to a new temporary file in the same directory, is flushed to disk, and is
//! renamed over the old name; readers see the old file or the new one, never half of each. A
//! rename replaces a *name*, so a hard link from outside the workspace to a file inside keeps
//! its old content instead of being written through. The caller's expectation (the digest of
//! what it read) is checked once more immediately before the rename.

use std::io::{self, Read as _, Write as _};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt as _, Permissions, PermissionsExt as _};

use crate::{PathError, PathKind, RelPath, Workspace};

/// Mode of a file created new, before the process's umask.
const NEW_FILE_MODE: u32 = 0o644;

/// Distinguishes temporary names made by one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A file about to be written: its directory, opened beneath the root, and its name there.
#[derive(Debug)]
pub struct WriteTarget {
    rel: RelPath,
    dir: Dir,
    name: String,
    /// The permission bits of the file being replaced; `None` for a new file.
    mode: Option<u32>,
}

/// Why a write did not happen. The file is untouched in every case.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Path(#[from] PathError),
    /// The file is no longer what the caller expected.
    #[error("`{path}` changed since it was read; nothing was written")]
    Stale { path: String },
}

impl Workspace {
    /// Prepares to write `rel`. Its parent directories are created beneath the root if missing;
    /// the name itself must not be a symbolic link, a directory or a special file.
    pub fn write_target(&self, rel: &RelPath) -> Result<WriteTarget, PathError> {
        let components: Vec<&str> = rel.components().collect();
        let Some((name, parents)) = components.split_last() else {
            return Err(PathError::NotAFile {
                path: rel.to_string(),
                kind: PathKind::Dir,
            });
        };
        let parent =
            RelPath::from_components(parents.iter().copied()).unwrap_or_else(RelPath::root);
        // Walk the parent as `resolve` does, so a link that leads out is refused with a clear
        // error; then create what is missing and open it through the root's capability.
        let parent_dir = match self.resolve(&parent) {
            Ok(resolved) if resolved.kind == PathKind::Dir => resolved.target,
            Ok(resolved) => {
                return Err(PathError::NotFound {
                    path: format!("{} (`{}` is a {})", rel, parent, resolved.kind),
                });
            }
            Err(PathError::NotFound { .. }) => {
                self.dir
                    .create_dir_all(super::target_path(&parent))
                    .map_err(|e| self.open_error(rel, &e))?;
                self.resolve(&parent)?.target
            }
            Err(other) => return Err(other),
        };
        let dir = if parent_dir.is_root() {
            self.dir.try_clone().map_err(|e| PathError::io(rel, &e))?
        } else {
            self.dir
                .open_dir(super::target_path(&parent_dir))
                .map_err(|e| self.open_error(rel, &e))?
        };
        let mode = match dir.symlink_metadata(name) {
            Ok(metadata) if metadata.is_file() => Some(metadata.permissions().mode() & 0o7777),
            Ok(metadata) => {
                return Err(PathError::NotAFile {
                    path: rel.to_string(),
                    kind: PathKind::of(metadata.file_type()),
                });
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(PathError::io(rel, &e)),
        };
        Ok(WriteTarget {
            rel: rel.clone(),
            dir,
            name: (*name).to_owned(),
            mode,
        })
    }
}

impl WriteTarget {
    /// Whether the file exists (it did when the target was prepared).
    pub fn exists(&self) -> bool {
        self.mode.is_some()
    }

    /// The file's current bytes, at most `max_bytes` of them, or `None` if there is no file.
    /// Never follows a link: a name swapped for one since is an error.
    pub fn current(&self, max_bytes: u64) -> Result<Option<Vec<u8>>, PathError> {
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(
            (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK)
                .bits()
                .cast_signed(),
        );
        let file = match self.dir.open_with(&self.name, &options) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.refused(&e)),
        };
        let metadata = file.metadata().map_err(|e| PathError::io(&self.rel, &e))?;
        if !metadata.is_file() {
            return Err(PathError::NotAFile {
                path: self.rel.to_string(),
                kind: PathKind::of(metadata.file_type()),
            });
        }
        let mut bytes = Vec::new();
        file.take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| PathError::io(&self.rel, &e))?;
        Ok(Some(bytes))
    }

    /// Replaces the file with `content` if `still_expected` accepts what is there just before
    /// the rename (`None`: no file). Keeps the old file's permission bits.
    pub fn replace(
        &self,
        content: &[u8],
        max_current_bytes: u64,
        still_expected: impl FnOnce(Option<&[u8]>) -> bool,
    ) -> Result<(), WriteError> {
        let temp = format!(
            ".{}.toolgate-{}-{}.tmp",
            self.name,
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let result = self.write_temp(&temp, content).and_then(|()| {
            let current = self.current(max_current_bytes)?;
            if !still_expected(current.as_deref()) {
                return Err(WriteError::Stale {
                    path: self.rel.to_string(),
                });
            }
            self.dir
                .rename(&temp, &self.dir, &self.name)
                .map_err(|e| WriteError::Path(PathError::io(&self.rel, &e)))?;
            // The rename is durable once the directory is. The directory handle may be a path
            // handle, so it is opened again for reading to be flushed.
            self.dir
                .open_with(".", OpenOptions::new().read(true))
                .and_then(|dir| dir.sync_all())
                .map_err(|e| WriteError::Path(PathError::io(&self.rel, &e)))
        });
        if result.is_err() {
            // Best effort: the temporary file may not exist, or may already be renamed.
            let _ = self.dir.remove_file(&temp);
        }
        result
    }

    fn write_temp(&self, temp: &str, content: &[u8]) -> Result<(), WriteError> {
        let mode = self.mode.unwrap_or(NEW_FILE_MODE);
        let mut options = OpenOptions::new();
        options.write(true).create_new(true).mode(mode);
        let mut file = self
            .dir
            .open_with(Path::new(temp), &options)
            .map_err(|e| self.refused(&e))?;
        let io_error = |e: io::Error| WriteError::Path(PathError::io(&self.rel, &e));
        if self.mode.is_some() {
            // `mode` above is reduced by the umask; the old file's bits are kept exactly.
            file.set_permissions(Permissions::from_mode(mode))
                .map_err(io_error)?;
        }
        file.write_all(content).map_err(io_error)?;
        file.sync_all().map_err(io_error)?;
        Ok(())
    }

    /// An open refused because the name became a link (`ELOOP`) or similar.
    fn refused(&self, error: &io::Error) -> PathError {
        if error.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
            return PathError::NotAFile {
                path: self.rel.to_string(),
                kind: PathKind::Symlink,
            };
        }
        PathError::io(&self.rel, error)
    }
}
