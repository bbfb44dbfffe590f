//! A workspace directory whose files are opened beneath its root by the kernel.
//!
//! A path from a model crosses two checks before any byte of a file is read:
//!
//! 1. [`Workspace::check_path`] refuses it *lexically*: absolute, drive, UNC, `~`, URLs, `..`
//!    — in every decoding we know of (see [`rel_path`]).
//! 2. [`Workspace::resolve`] asks the file system, one component at a time and without
//!    following anything, where the path leads, and refuses a symbolic link that leads out.
//!
//! Then every open goes through a [`cap_std::fs::Dir`] for the root, so the kernel itself
//! refuses to resolve beyond it (`openat2` with `RESOLVE_BENEATH` on Linux, cap-std's own
//! component-wise resolution elsewhere). The two checks give a clear error; the `Dir` is what
//! holds when a link is swapped between the check and the open.
//!
//! ```
//! use toolgate_workspace::{PathError, PathKind, Workspace};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
//! let workspace = Workspace::open(dir.path()).unwrap();
//!
//! let path = workspace.check_path("./a.txt").unwrap();
//! assert_eq!(workspace.resolve(&path).unwrap().kind, PathKind::File);
//! assert_eq!(workspace.read_file(&path, 1024).unwrap(), (b"alpha\n".to_vec(), 6));
//!
//! assert!(matches!(workspace.check_path("%2e%2e/etc/passwd"), Err(PathError::Outside { .. })));
//! ```

pub mod rel_path;
pub mod snapshot;
mod write;

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read as _};
use std::path::{Component, Path, PathBuf};

use cap_std::fs::Dir;
use cap_std::fs::OpenOptionsExt as _;
use thiserror::Error;

pub use rel_path::RelPath;
pub use write::{WriteError, WriteTarget};

/// Most symbolic links followed while resolving one path, as Linux's `MAXSYMLINKS`.
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a workspace could not be opened.
#[derive(Debug, Error)]
pub enum WorkspaceError {
    #[error("cannot open workspace root `{path}`: {source}")]
    Open { path: String, source: io::Error },
    #[error("workspace root `{path}` is not a directory")]
    NotADirectory { path: String },
}

/// Why a path was refused, or could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PathError {
    /// Not a usable path at all: control characters, too long.
    #[error("path `{path}` is invalid: {reason}")]
    Invalid { path: String, reason: String },
    /// Absolute, climbing, or through a symbolic link that leads out.
    #[error("path `{path}` is outside the workspace: {reason}")]
    Outside { path: String, reason: String },
    #[error("`{path}` does not exist")]
    NotFound { path: String },
    /// The path exists but is not a regular file (a directory, a FIFO, a device).
    #[error("`{path}` is a {kind}, not a file")]
    NotAFile { path: String, kind: PathKind },
    #[error("cannot access `{path}`: {message}")]
    Io {
        path: String,
        kind: io::ErrorKind,
        message: String,
    },
}

impl PathError {
    fn invalid(raw: &str, reason: impl Into<String>) -> Self {
        PathError::Invalid {
            path: shown(raw),
            reason: reason.into(),
        }
    }

    fn outside(raw: &str, reason: impl Into<String>) -> Self {
        PathError::Outside {
            path: shown(raw),
            reason: reason.into(),
        }
    }

    fn io(rel: &RelPath, error: &io::Error) -> Self {
        // `a.txt/below`: a file where a directory should be means there is no such path.
        if matches!(
            error.kind(),
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
        ) {
            return PathError::NotFound {
                path: rel.to_string(),
            };
        }
        PathError::Io {
            path: rel.to_string(),
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}

/// What a path names, after following symbolic links that stay inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    File,
    Dir,
    /// Only in directory listings, which do not follow links.
    Symlink,
    /// A FIFO, socket or device: never opened, since opening a FIFO can block forever.
    Other,
}

impl PathKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PathKind::File => "file",
            PathKind::Dir => "dir",
            PathKind::Symlink => "symlink",
            PathKind::Other => "other",
        }
    }

    fn of(file_type: cap_std::fs::FileType) -> PathKind {
        PathKind::told(
            file_type.is_symlink(),
            file_type.is_dir(),
            file_type.is_file(),
        )
    }

    /// What a file type says, a link first: a link is a link, wherever it leads.
    fn told(symlink: bool, dir: bool, file: bool) -> PathKind {
        if symlink {
            PathKind::Symlink
        } else if dir {
            PathKind::Dir
        } else if file {
            PathKind::File
        } else {
            PathKind::Other
        }
    }
}

/// What a directory listing's entry is (`DirEntry::file_type`, which does not follow links).
impl From<std::fs::FileType> for PathKind {
    fn from(file_type: std::fs::FileType) -> PathKind {
        PathKind::told(
            file_type.is_symlink(),
            file_type.is_dir(),
            file_type.is_file(),
        )
    }
}

impl fmt::Display for PathKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathKind::File => "file",
            PathKind::Dir => "directory",
            PathKind::Symlink => "symbolic link",
            PathKind::Other => "special file",
        })
    }
}

/// A path that exists inside the workspace, with what it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedPath {
    /// The path as the caller gave it (normalized).
    pub rel: RelPath,
    /// Where it leads once symbolic links are followed; equal to `rel` without links.
    pub target: RelPath,
    /// What `target` is; never [`PathKind::Symlink`].
    pub kind: PathKind,
    /// Size in bytes, for files.
    pub len: u64,
    /// Whether a symbolic link was followed on the way.
    pub through_symlink: bool,
}

/// One entry of [`Workspace::read_dir`]. Links are reported, not followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntryInfo {
    pub path: RelPath,
    pub kind: PathKind,
    pub len: u64,
}

/// A workspace root, opened once with ambient authority; everything below goes through it.
#[derive(Debug)]
pub struct Workspace {
    root: PathBuf,
    dir: Dir,
}

/// A regular file opened beneath the root, with its size when it was opened.
#[derive(Debug)]
pub struct OpenFile {
    pub file: std::fs::File,
    pub len: u64,
}

impl OpenFile {
    /// Reads at most `max_bytes`.
    pub fn read(self, rel: &RelPath, max_bytes: u64) -> Result<Vec<u8>, PathError> {
        let capacity = usize::try_from(self.len.min(max_bytes)).unwrap_or(0);
        let mut bytes = Vec::with_capacity(capacity);
        self.file
            .take(max_bytes)
            .read_to_end(&mut bytes)
            .map_err(|e| PathError::io(rel, &e))?;
        Ok(bytes)
    }
}

impl Workspace {
    /// Canonicalizes `root` and opens it as a capability. This is the only place the process's
    /// ambient file-system authority is used.
    pub fn open(root: &Path) -> Result<Workspace, WorkspaceError> {
        let open_error = |source| WorkspaceError::Open {
            path: root.display().to_string(),
            source,
        };
        let root = std::fs::canonicalize(root).map_err(open_error)?;
        if !root.is_dir() {
            return Err(WorkspaceError::NotADirectory {
                path: root.display().to_string(),
            });
        }
        let dir = Dir::open_ambient_dir(&root, cap_std::ambient_authority()).map_err(open_error)?;
        Ok(Workspace { root, dir })
    }

    /// The canonical root, for display and for walkers that need an ambient path.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Validates a caller's path lexically; see [`RelPath::parse`].
    pub fn check_path(&self, raw: &str) -> Result<RelPath, PathError> {
        RelPath::parse(raw)
    }

    /// Follows `rel` through the file system, one component at a time, without letting the
    /// operating system follow anything: each symbolic link is read and its target resolved
    /// here, so a link that leads out is named in the error.
    pub fn resolve(&self, rel: &RelPath) -> Result<ResolvedPath, PathError> {
        // Components resolved so far, each a real directory (never a link).
        let mut resolved: Vec<String> = Vec::new();
        let mut pending: VecDeque<String> = rel.components().map(str::to_owned).collect();
        let mut hops = 0;
        // The last link followed, to name in an escape.
        let mut last_link: Option<String> = None;
        let mut metadata = None;
        while let Some(component) = pending.pop_front() {
            match component.as_str() {
                "" | "." => continue,
                ".." => {
                    // Only a link's target can say `..`; `rel` itself has none.
                    if resolved.pop().is_none() {
                        let link = last_link.as_deref().unwrap_or_default();
                        return Err(PathError::outside(
                            rel.as_str(),
                            format!("`{link}` is a symbolic link that leads outside the workspace"),
                        ));
                    }
                    metadata = None;
                    continue;
                }
                _ => {}
            }
            resolved.push(component);
            let here = resolved.join("/");
            let found = self
                .dir
                .symlink_metadata(&here)
                .map_err(|e| PathError::io(rel, &e))?;
            if found.file_type().is_symlink() {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(PathError::Io {
                        path: rel.to_string(),
                        kind: io::ErrorKind::Other,
                        message: format!("more than {MAX_SYMLINK_HOPS} symbolic links"),
                    });
                }
                let target = self
                    .dir
                    .read_link_contents(&here)
                    .map_err(|e| PathError::io(rel, &e))?;
                resolved.pop();
                let mut parts = Vec::new();
                for part in target.components() {
                    match part {
                        Component::Normal(name) => match name.to_str() {
                            Some(name) => parts.push(name.to_owned()),
                            None => {
                                return Err(PathError::invalid(
                                    rel.as_str(),
                                    format!(
                                        "symbolic link `{here}` has a target that is not UTF-8"
                                    ),
                                ));
                            }
                        },
                        Component::ParentDir => parts.push("..".to_owned()),
                        Component::CurDir => {}
                        Component::RootDir | Component::Prefix(_) => {
                            return Err(PathError::outside(
                                rel.as_str(),
                                format!(
                                    "`{here}` is a symbolic link to an absolute path, which leads \
                                     outside the workspace"
                                ),
                            ));
                        }
                    }
                }
                for part in parts.into_iter().rev() {
                    pending.push_front(part);
                }
                last_link = Some(here);
                metadata = None;
            } else {
                if !pending.is_empty() && !found.is_dir() {
                    return Err(PathError::NotFound {
                        path: rel.to_string(),
                    });
                }
                metadata = Some(found);
            }
        }
        let target =
            RelPath::from_components(resolved.iter().map(String::as_str)).ok_or_else(|| {
                PathError::invalid(rel.as_str(), "it resolves to a name that is not plain")
            })?;
        let metadata = match metadata {
            Some(metadata) => metadata,
            // The root, or a path whose last step was `..`.
            None => self
                .dir
                .symlink_metadata(target_path(&target))
                .map_err(|e| PathError::io(rel, &e))?,
        };
        Ok(ResolvedPath {
            rel: rel.clone(),
            target,
            kind: PathKind::of(metadata.file_type()),
            len: metadata.len(),
            through_symlink: last_link.is_some(),
        })
    }

    /// Opens a regular file for reading, beneath the root.
    pub fn open_file(&self, rel: &RelPath) -> Result<OpenFile, PathError> {
        // Non-blocking, so that a FIFO (or a file swapped for one since it was checked) cannot
        // hang the open waiting for a writer; it is refused below like any non-file. Reads of
        // a regular file are unaffected by the flag.
        let mut options = cap_std::fs::OpenOptions::new();
        options
            .read(true)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed());
        let file = self
            .dir
            .open_with(target_path(rel), &options)
            .map_err(|e| self.open_error(rel, &e))?;
        let metadata = file.metadata().map_err(|e| PathError::io(rel, &e))?;
        if !metadata.is_file() {
            return Err(PathError::NotAFile {
                path: rel.to_string(),
                kind: PathKind::of(metadata.file_type()),
            });
        }
        Ok(OpenFile {
            len: metadata.len(),
            file: file.into_std(),
        })
    }

    /// Opens a directory beneath the root. A process started with `/proc/self/fd/<fd>` of it as
    /// its working directory enters exactly this directory, even if the path has been swapped
    /// for a link since it was checked.
    pub fn open_dir(&self, rel: &RelPath) -> Result<Dir, PathError> {
        if rel.is_root() {
            return self.dir.try_clone().map_err(|e| PathError::io(rel, &e));
        }
        self.dir
            .open_dir(target_path(rel))
            .map_err(|e| self.open_error(rel, &e))
    }

    /// Reads at most `max_bytes` of a regular file; returns them and the file's size when
    /// opened.
    pub fn read_file(&self, rel: &RelPath, max_bytes: u64) -> Result<(Vec<u8>, u64), PathError> {
        let file = self.open_file(rel)?;
        let total = file.len;
        Ok((file.read(rel, max_bytes)?, total))
    }

    /// The entries of a directory, sorted by name. Links are reported as links.
    pub fn read_dir(&self, rel: &RelPath) -> Result<Vec<DirEntryInfo>, PathError> {
        let entries = self
            .dir
            .read_dir(target_path(rel))
            .map_err(|e| self.open_error(rel, &e))?;
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| PathError::io(rel, &e))?;
            let name = entry.file_name();
            // A name that is not UTF-8 cannot be named by a caller either; leave it out.
            let Some(name) = name.to_str() else { continue };
            let Some(path) = RelPath::from_components(rel.components().chain([name])) else {
                continue;
            };
            let file_type = entry.file_type().map_err(|e| PathError::io(rel, &e))?;
            let len = if file_type.is_file() {
                entry.metadata().map(|m| m.len()).unwrap_or(0)
            } else {
                0
            };
            out.push(DirEntryInfo {
                path,
                kind: PathKind::of(file_type),
                len,
            });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// `rel` as an ambient path under the root. Opening it directly bypasses the kernel's
    /// beneath-root check, so it is only for walkers that do not follow links and whose
    /// starting point [`Workspace::resolve`] has already confined.
    pub fn ambient_path(&self, rel: &RelPath) -> PathBuf {
        if rel.is_root() {
            self.root.clone()
        } else {
            self.root.join(rel.as_str())
        }
    }

    /// cap-std reports an escape it refused as `PermissionDenied`; say so in our words.
    fn open_error(&self, rel: &RelPath, error: &io::Error) -> PathError {
        if error.kind() == io::ErrorKind::PermissionDenied
            && error.to_string().contains("outside of the filesystem")
        {
            return PathError::outside(rel.as_str(), "it leads outside the workspace");
        }
        PathError::io(rel, error)
    }
}

/// `rel` as cap-std wants it: the root is `.`.
fn target_path(rel: &RelPath) -> &Path {
    Path::new(rel.as_str())
}

/// User input as it may appear in a message: control characters escaped, cut to 200
/// characters.
pub(crate) fn shown(raw: &str) -> String {
    let mut out = String::new();
    for (i, c) in raw.chars().enumerate() {
        if i == 200 {
            out.push('…');
            break;
        }
        if c.is_control() || c == '`' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// `ws/` with files, inside and outside links; `outside/` next to it.
    struct Fixture {
        _dir: tempfile::TempDir,
        workspace: Workspace,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(ws.join("src/nested")).unwrap();
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("a.txt"), "alpha\nbeta\n").unwrap();
        fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        symlink("a.txt", ws.join("link_in")).unwrap();
        symlink("../a.txt", ws.join("src/up_in")).unwrap();
        symlink("src", ws.join("dir_in")).unwrap();
        symlink("link_in", ws.join("chain_in")).unwrap();
        symlink(outside.join("secret.txt"), ws.join("link_out")).unwrap();
        symlink("link_out", ws.join("chain_out")).unwrap();
        symlink("../outside/secret.txt", ws.join("rel_out")).unwrap();
        symlink(&outside, ws.join("dir_out")).unwrap();
        symlink("../outside", ws.join("rel_dir_out")).unwrap();
        symlink("..", ws.join("sub/up")).unwrap();
        symlink("up/..", ws.join("sub/up_up")).unwrap();
        symlink("../../outside/secret.txt", ws.join("sub/deep_out")).unwrap();
        symlink("loop_b", ws.join("loop_a")).unwrap();
        symlink("loop_a", ws.join("loop_b")).unwrap();
        let workspace = Workspace::open(&ws).unwrap();
        Fixture {
            _dir: dir,
            workspace,
        }
    }

    fn resolve(f: &Fixture, raw: &str) -> Result<ResolvedPath, PathError> {
        let rel = f.workspace.check_path(raw)?;
        f.workspace.resolve(&rel)
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let f = fixture();
        let status = std::process::Command::new("mkfifo")
            .arg(f.workspace.root().join("pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        let rel = f.workspace.check_path("pipe").unwrap();
        // Nobody writes to the pipe: a blocking open would hang this test forever.
        let error = f.workspace.open_file(&rel).unwrap_err();
        assert!(
            matches!(
                error,
                PathError::NotAFile {
                    kind: PathKind::Other,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn plain_files_and_dirs_resolve() {
        let f = fixture();
        let file = resolve(&f, "a.txt").unwrap();
        assert_eq!(file.kind, PathKind::File);
        assert_eq!(file.len, 11);
        assert!(!file.through_symlink);
        assert_eq!(resolve(&f, "src").unwrap().kind, PathKind::Dir);
        let root = resolve(&f, ".").unwrap();
        assert_eq!(root.kind, PathKind::Dir);
        assert!(root.target.is_root());
    }

    #[test]
    fn links_that_stay_inside_resolve_to_their_target() {
        let f = fixture();
        for (raw, target, kind) in [
            ("link_in", "a.txt", PathKind::File),
            ("chain_in", "a.txt", PathKind::File),
            ("src/up_in", "a.txt", PathKind::File),
            ("dir_in", "src", PathKind::Dir),
            ("dir_in/lib.rs", "src/lib.rs", PathKind::File),
            ("sub/up", ".", PathKind::Dir),
            ("sub/up/a.txt", "a.txt", PathKind::File),
        ] {
            let resolved = resolve(&f, raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
            assert_eq!(resolved.target.as_str(), target, "{raw}");
            assert_eq!(resolved.kind, kind, "{raw}");
            assert!(resolved.through_symlink, "{raw}");
        }
    }

    #[test]
    fn links_that_lead_out_are_outside() {
        let f = fixture();
        for raw in [
            "link_out",
            "chain_out",
            "rel_out",
            "dir_out",
            "dir_out/secret.txt",
            "rel_dir_out/secret.txt",
            "sub/deep_out",
            "sub/up_up",
            "sub/up_up/outside/secret.txt",
        ] {
            match resolve(&f, raw) {
                Err(PathError::Outside { reason, .. }) => {
                    assert!(reason.contains("symbolic link"), "{raw}: {reason}");
                }
                other => panic!("{raw}: expected outside, got {other:?}"),
            }
        }
    }

    #[test]
    fn missing_paths_and_loops() {
        let f = fixture();
        assert!(matches!(
            resolve(&f, "nope.txt"),
            Err(PathError::NotFound { .. })
        ));
        assert!(matches!(
            resolve(&f, "a.txt/below"),
            Err(PathError::NotFound { .. })
        ));
        assert!(matches!(resolve(&f, "loop_a"), Err(PathError::Io { .. })));
    }

    #[test]
    fn reads_go_through_the_dir() {
        let f = fixture();
        let rel = f.workspace.check_path("a.txt").unwrap();
        assert_eq!(
            f.workspace.read_file(&rel, 5).unwrap(),
            (b"alpha".to_vec(), 11)
        );
        let link = f.workspace.check_path("link_in").unwrap();
        assert_eq!(f.workspace.read_file(&link, 100).unwrap().1, 11);
        let out = f.workspace.check_path("link_out").unwrap();
        assert!(matches!(
            f.workspace.read_file(&out, 100),
            Err(PathError::Outside { .. })
        ));
        let dir = f.workspace.check_path("src").unwrap();
        assert!(matches!(
            f.workspace.read_file(&dir, 100),
            Err(PathError::NotAFile {
                kind: PathKind::Dir,
                ..
            })
        ));
    }

    #[test]
    fn the_dir_refuses_escapes_even_without_resolve() {
        // The kernel-level check, on its own: what holds if a link changes after `resolve`.
        let f = fixture();
        for path in ["link_out", "dir_out/secret.txt", "sub/deep_out"] {
            let error = f.workspace.dir.open(path).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::PermissionDenied, "{path}");
        }
    }

    #[test]
    fn read_dir_lists_without_following() {
        let f = fixture();
        let entries = f.workspace.read_dir(&RelPath::root()).unwrap();
        let names: Vec<(&str, PathKind)> =
            entries.iter().map(|e| (e.path.as_str(), e.kind)).collect();
        assert!(names.contains(&("a.txt", PathKind::File)));
        assert!(names.contains(&("dir_out", PathKind::Symlink)));
        assert!(names.contains(&("src", PathKind::Dir)));
        let src = f
            .workspace
            .read_dir(&f.workspace.check_path("src").unwrap())
            .unwrap();
        assert_eq!(src.first().unwrap().path.as_str(), "src/lib.rs");
    }

    #[test]
    fn ambient_paths_are_under_the_root() {
        let f = fixture();
        let root = f.workspace.root();
        assert_eq!(f.workspace.ambient_path(&RelPath::root()), root);
        let rel = f.workspace.check_path("src/lib.rs").unwrap();
        assert_eq!(f.workspace.ambient_path(&rel), root.join("src/lib.rs"));
    }

    #[test]
    fn opening_a_file_as_root_fails() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        fs::write(&file, "x").unwrap();
        assert!(matches!(
            Workspace::open(&file),
            Err(WorkspaceError::NotADirectory { .. })
        ));
        assert!(matches!(
            Workspace::open(&dir.path().join("missing")),
            Err(WorkspaceError::Open { .. })
        ));
    }

    #[test]
    fn messages_escape_control_characters() {
        let error = RelPath::parse("a\u{1b}[2J").unwrap_err();
        assert_eq!(
            error.to_string(),
            "path `a\\u{1b}[2J` is invalid: it contains the control character U+001B"
        );
        let error = RelPath::parse("../x").unwrap_err();
        assert_eq!(
            error.to_string(),
            "path `../x` is outside the workspace: it climbs out with `..`"
        );
    }
}
