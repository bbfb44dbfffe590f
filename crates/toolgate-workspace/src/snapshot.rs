//! A snapshot of chosen files of a workspace, taken before a process runs and compared after
//! it, so that what the process changed there is found and put back: the guard of the files
//! that another program runs later (git's hooks and config, agent clients' configuration, …).
//! Which paths a snapshot holds is the caller's choice ([`Watch`]); this module only walks,
//! keeps, compares and restores.
//!
//! The walk never follows a symbolic link (it records the link) and reads through a
//! [`cap_std::fs::Dir`] for the root, so nothing outside the workspace is ever read or
//! written, whatever a process made of the tree meanwhile. Files of up to
//! [`KEPT_BYTES`] are kept whole and can be put back; a larger one is kept as its length and
//! a digest, so a change to it is found but cannot be undone (the report says so).
//!
//! ```
//! use toolgate_workspace::snapshot::{Snapshot, Watch};
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::create_dir(dir.path().join(".claude")).unwrap();
//! std::fs::write(dir.path().join(".claude/settings.json"), "{}").unwrap();
//! let watch = |path: &str, _is_dir: bool| {
//!     if path == ".claude" { Watch::Whole } else { Watch::Descend }
//! };
//! let root = cap_std::fs::Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
//! let before = Snapshot::take(&root, &watch).unwrap();
//! std::fs::write(dir.path().join(".claude/settings.json"), r#"{"hooks": {}}"#).unwrap();
//! let after = Snapshot::take(&root, &watch).unwrap();
//! let changes = before.changes(&after);
//! assert_eq!(changes[0].path, ".claude/settings.json");
//! before.restore(&root, &after, &changes).unwrap();
//! assert_eq!(std::fs::read(dir.path().join(".claude/settings.json")).unwrap(), b"{}");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Read as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _StdPermissionsExt;
use std::path::{Path, PathBuf};

use cap_std::fs::{
    Dir, MetadataExt as _, OpenOptions, OpenOptionsExt as _, Permissions, PermissionsExt as _,
};
use sha2::{Digest as _, Sha256};

/// Files larger than this are kept as their length and digest only.
pub const KEPT_BYTES: u64 = 1024 * 1024;

/// Most entries a walk looks at before it gives up: a snapshot that cannot see the whole
/// workspace cannot vouch for it.
pub const MAX_ENTRIES: usize = 2_000_000;

/// Deepest a walk goes: a process can nest directories far deeper than a thread's stack
/// can follow, and a snapshot that cannot see the whole tree cannot vouch for it either.
pub const MAX_DEPTH: usize = 256;

/// How a snapshot treats one entry of the workspace, asked with its workspace-relative path
/// (`/`-separated; bytes that are not UTF-8 replaced) and whether it is a directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// Not kept, and not looked into.
    Skip,
    /// Not kept; a directory to look into.
    Descend,
    /// Kept itself (its kind and permissions) and its identity, and looked into: a directory
    /// that must stay the one it is (a repository's git directory), not only look the same.
    /// Where it went, if it was moved within the workspace, is found and it is moved back.
    Enter,
    /// Kept, with everything beneath it.
    Whole,
    /// Inside a [`Watch::Whole`] directory: kept. Only the walk gives this.
    Inside,
}

/// One kept entry.
#[derive(Clone, PartialEq, Eq)]
pub enum Kept {
    Dir {
        mode: u32,
    },
    File {
        mode: u32,
        len: u64,
        digest: [u8; 32],
        /// The bytes, when the file is no larger than [`KEPT_BYTES`].
        bytes: Option<Vec<u8>>,
    },
    Link {
        target: PathBuf,
    },
    /// A socket, device or pipe: kept by kind only.
    Other {
        mode: u32,
    },
}

impl fmt::Debug for Kept {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Kept::Dir { mode } => write!(f, "Dir({mode:o})"),
            Kept::File { mode, len, .. } => write!(f, "File({mode:o}, {len} bytes)"),
            Kept::Link { target } => write!(f, "Link({})", target.display()),
            Kept::Other { mode } => write!(f, "Other({mode:o})"),
        }
    }
}

/// What happened to one kept path between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Workspace-relative, `/`-separated.
    pub path: String,
    pub what: ChangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Created,
    Removed,
    /// Contents, target or permissions.
    Changed,
    /// A file became a directory, a directory a link, …
    Replaced,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.what {
            ChangeKind::Created => "created",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed => "changed",
            ChangeKind::Replaced => "replaced",
        };
        write!(f, "`{}` {what}", self.path)
    }
}

/// The kept entries of a workspace at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    entries: BTreeMap<String, (PathBuf, Kept)>,
    /// The identity (device, inode) of each [`Watch::Enter`] directory.
    identities: BTreeMap<String, (u64, u64)>,
    /// Every directory the walk entered, by identity: where a moved one went.
    dirs: BTreeMap<(u64, u64), PathBuf>,
    /// The entries `watch` chose [`Watch::Whole`] for (not those inside them).
    tops: Vec<String>,
}

/// Why a snapshot could not be taken, or a change not undone.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read `{path}`: {source}")]
    Read { path: String, source: io::Error },
    #[error("more than {MAX_ENTRIES} entries in the workspace")]
    TooLarge,
    #[error("directories nested more than {MAX_DEPTH} deep in the workspace")]
    TooDeep,
    #[error("cannot put back `{path}`: {reason}")]
    Restore { path: String, reason: String },
}

impl Snapshot {
    /// Notes the directory `dir`, at `path`, by its identity.
    fn note_dir(&mut self, dir: &Dir, path: &Path) -> io::Result<(u64, u64)> {
        let meta = dir.dir_metadata()?;
        let identity = (meta.dev(), meta.ino());
        self.dirs.insert(identity, path.to_path_buf());
        Ok(identity)
    }

    /// The [`Watch::Enter`] directories that are no longer themselves in `after` (renamed,
    /// replaced, removed), each with where it is now if `after` found it elsewhere.
    pub fn moved(&self, after: &Snapshot) -> Vec<(String, Option<PathBuf>)> {
        self.identities
            .iter()
            .filter(|(name, identity)| after.identities.get(*name) != Some(*identity))
            .map(|(name, identity)| {
                let now = after
                    .dirs
                    .get(identity)
                    .filter(|path| name_of(path) != **name)
                    .cloned();
                (name.clone(), now)
            })
            .collect()
    }

    /// Walks `root`, keeping what `watch` chooses.
    pub fn take(
        root: &Dir,
        watch: &dyn Fn(&str, bool) -> Watch,
    ) -> Result<Snapshot, SnapshotError> {
        let mut snapshot = Snapshot::default();
        let mut seen = 0usize;
        walk(root, Path::new(""), watch, &mut snapshot, &mut seen)?;
        Ok(snapshot)
    }

    /// How many entries it keeps.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The kept entries: each one's workspace-relative name, its path and what was kept.
    pub fn paths(&self) -> impl Iterator<Item = (&str, &Path, &Kept)> {
        self.entries
            .iter()
            .map(|(name, (path, kept))| (name.as_str(), path.as_path(), kept))
    }

    /// What changed from `self` to `after`, in path order.
    pub fn changes(&self, after: &Snapshot) -> Vec<Change> {
        let mut out = Vec::new();
        for (name, (_, before)) in &self.entries {
            let what = match after.entries.get(name) {
                None => Some(ChangeKind::Removed),
                Some((_, now)) if std::mem::discriminant(now) != std::mem::discriminant(before) => {
                    Some(ChangeKind::Replaced)
                }
                Some((_, now)) if !same(before, now) => Some(ChangeKind::Changed),
                Some(_) => None,
            };
            if let Some(what) = what {
                out.push(Change {
                    path: name.clone(),
                    what,
                });
            }
        }
        for name in after.entries.keys() {
            if !self.entries.contains_key(name) {
                out.push(Change {
                    path: name.clone(),
                    what: ChangeKind::Created,
                });
            }
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        out
    }

    /// Puts `changes` (found from `self` to `after`) back as they were in `self`: what was
    /// created is removed, what was removed, changed or replaced is written again. Returns the
    /// paths that could not be put back (a file larger than [`KEPT_BYTES`] that changed).
    pub fn restore(
        &self,
        root: &Dir,
        after: &Snapshot,
        changes: &[Change],
    ) -> Result<Vec<String>, SnapshotError> {
        // Remove first, deepest first, what is not as it was: created entries, and the
        // present form of replaced ones.
        for change in changes.iter().rev() {
            let remove = match change.what {
                ChangeKind::Created | ChangeKind::Replaced => true,
                ChangeKind::Changed => matches!(
                    after.entries.get(&change.path),
                    Some((_, Kept::Link { .. }))
                ),
                ChangeKind::Removed => false,
            };
            if remove && let Some((path, kept)) = after.entries.get(&change.path) {
                remove_entry(root, path, kept).map_err(|e| restore_error(&change.path, &e))?;
            }
        }
        // Then write back, shallowest first, so that a directory exists before its files.
        let mut lost = Vec::new();
        for change in changes {
            if change.what == ChangeKind::Created {
                continue;
            }
            let Some((path, kept)) = self.entries.get(&change.path) else {
                continue;
            };
            if !put_back(root, path, kept, change.what)
                .map_err(|e| restore_error(&change.path, &e))?
            {
                lost.push(change.path.clone());
            }
        }
        Ok(lost)
    }
}

/// What a [`Guarded`] keeps: a `watch` of the caller's, which may hold what it learnt of the
/// workspace (the paths its configuration names).
pub type WatchFn = Box<dyn Fn(&str, bool) -> Watch + Send + Sync>;

/// A snapshot of a workspace held across a process: [`Guarded::take`] before it runs,
/// [`Guarded::check`] after it ended, which puts back every change outside `allowed` and
/// returns them.
pub struct Guarded {
    root_path: PathBuf,
    root: Dir,
    watch: WatchFn,
    before: Snapshot,
    /// Workspace-relative paths (and everything beneath them) the process may change.
    allowed: Vec<String>,
}

impl fmt::Debug for Guarded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("root_path", &self.root_path)
            .field("before", &self.before)
            .field("allowed", &self.allowed)
            .finish_non_exhaustive()
    }
}

/// What [`Guarded::check`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undone {
    /// The changes put back.
    pub changes: Vec<Change>,
    /// Those that could not be put back (files larger than [`KEPT_BYTES`]).
    pub lost: Vec<String>,
}

/// Most changes an [`Undone`] names; the rest are counted.
const NAMED_CHANGES: usize = 16;

/// What was found and done, in words: the changes (at most [`NAMED_CHANGES`], the rest
/// counted), then whether all were put back.
impl fmt::Display for Undone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, change) in self.changes.iter().take(NAMED_CHANGES).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{change}")?;
        }
        let more = self.changes.len().saturating_sub(NAMED_CHANGES);
        if more > 0 {
            write!(f, " and {more} more")?;
        }
        if self.lost.is_empty() {
            return f.write_str("; they were put back as they were");
        }
        let lost: Vec<String> = self.lost.iter().map(|p| format!("`{p}`")).collect();
        write!(
            f,
            "; they were put back but for {} (larger than the copy kept, or gone out of reach), which the user must check",
            lost.join(", ")
        )
    }
}

impl Guarded {
    /// Takes the snapshot of `root` that `watch` chooses.
    pub fn take(
        root_path: &Path,
        watch: impl Fn(&str, bool) -> Watch + Send + Sync + 'static,
        allowed: Vec<String>,
    ) -> Result<Guarded, SnapshotError> {
        let watch: WatchFn = Box::new(watch);
        let root =
            Dir::open_ambient_dir(root_path, cap_std::ambient_authority()).map_err(|source| {
                SnapshotError::Read {
                    path: String::new(),
                    source,
                }
            })?;
        let before = Snapshot::take(&root, &watch)?;
        Ok(Guarded {
            root_path: root_path.to_path_buf(),
            root,
            watch,
            before,
            allowed,
        })
    }

    /// The snapshot taken.
    pub fn before(&self) -> &Snapshot {
        &self.before
    }

    /// What a mount namespace can make read-only for the process: each real file or directory
    /// kept whole (not one inside another), but those it may change or that hold one it may
    /// change; at most `limit`.
    pub fn read_only_paths(&self, limit: usize) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for name in &self.before.tops {
            let Some((path, kept)) = self.before.entries.get(name) else {
                continue;
            };
            let holds_allowed = self.allowed.iter().any(|allowed| {
                allowed.starts_with(name.as_str())
                    && allowed.as_bytes().get(name.len()) == Some(&b'/')
            });
            if matches!(kept, Kept::Dir { .. } | Kept::File { .. })
                && !self.allows(name)
                && !holds_allowed
            {
                out.push(self.root_path.join(path));
            }
            if out.len() == limit {
                break;
            }
        }
        out
    }

    /// The directories that must stay themselves ([`Watch::Enter`]), to be pinned where a
    /// mount namespace can be made (a mount point cannot be renamed or removed), but those
    /// the process may change; at most `limit`.
    pub fn pinned_paths(&self, limit: usize) -> Vec<PathBuf> {
        self.before
            .identities
            .keys()
            .filter(|name| !self.allows(name))
            .filter_map(|name| self.before.entries.get(name))
            .map(|(path, _)| self.root_path.join(path))
            .take(limit)
            .collect()
    }

    /// Takes the snapshot again, as the state the next [`Guarded::check`] compares with.
    pub fn renew(&mut self) -> Result<(), SnapshotError> {
        self.before = Snapshot::take(&self.root, &self.watch)?;
        Ok(())
    }

    /// Takes the snapshot again with `watch`, which chooses from now on: for a caller that
    /// learnt from the first snapshot what else to keep.
    pub fn rewatch(
        &mut self,
        watch: impl Fn(&str, bool) -> Watch + Send + Sync + 'static,
    ) -> Result<(), SnapshotError> {
        self.watch = Box::new(watch);
        self.renew()
    }

    /// Whether `path` is one the process may change.
    pub fn allows(&self, path: &str) -> bool {
        self.allowed.iter().any(|allowed| {
            path == allowed
                || (path.starts_with(allowed.as_str())
                    && path.as_bytes().get(allowed.len()) == Some(&b'/'))
        })
    }

    /// Compares the workspace with the snapshot and puts back what changed outside the
    /// allowed paths: `Ok(None)` when nothing did.
    pub fn check(&self) -> Result<Option<Undone>, SnapshotError> {
        let mut after = Snapshot::take(&self.root, &self.watch)?;
        // A git directory renamed and another put in its place: the original goes back where
        // it was, and what took its place goes. Then the rest is compared as usual.
        let mut replaced = Vec::new();
        let mut lost = Vec::new();
        for (name, now) in self.before.moved(&after) {
            if self.allows(&name) {
                continue;
            }
            let Some((path, _)) = self.before.entries.get(&name) else {
                continue;
            };
            match now {
                Some(now) => {
                    if let Some((_, kept)) = after.entries.get(&name) {
                        remove_entry(&self.root, path, kept)
                            .map_err(|e| restore_error(&name, &e))?;
                    }
                    self.root
                        .rename(&now, &self.root, path)
                        .map_err(|e| restore_error(&name, &e))?;
                }
                // Gone where the walk does not look, or out of reach: what is kept of it is
                // written again below, the rest is lost.
                None => lost.push(name.clone()),
            }
            replaced.push(Change {
                path: name,
                what: ChangeKind::Replaced,
            });
        }
        if !replaced.is_empty() {
            after = Snapshot::take(&self.root, &self.watch)?;
        }
        let mut changes: Vec<Change> = self
            .before
            .changes(&after)
            .into_iter()
            .filter(|change| !self.allows(&change.path))
            .collect();
        if changes.is_empty() && replaced.is_empty() {
            return Ok(None);
        }
        lost.extend(self.before.restore(&self.root, &after, &changes)?);
        for change in replaced {
            if !changes.iter().any(|c| c.path == change.path) {
                changes.push(change);
            }
        }
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(Undone { changes, lost }))
    }
}

fn restore_error(path: &str, e: &io::Error) -> SnapshotError {
    SnapshotError::Restore {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

fn same(before: &Kept, now: &Kept) -> bool {
    match (before, now) {
        (
            Kept::File {
                mode: m1,
                len: l1,
                digest: d1,
                ..
            },
            Kept::File {
                mode: m2,
                len: l2,
                digest: d2,
                ..
            },
        ) => m1 == m2 && l1 == l2 && d1 == d2,
        _ => before == now,
    }
}

fn name_of(path: &Path) -> String {
    String::from_utf8_lossy(path.as_os_str().as_bytes()).into_owned()
}

fn walk(
    dir: &Dir,
    at: &Path,
    watch: &dyn Fn(&str, bool) -> Watch,
    out: &mut Snapshot,
    seen: &mut usize,
) -> Result<(), SnapshotError> {
    if at.components().count() > MAX_DEPTH {
        return Err(SnapshotError::TooDeep);
    }
    let read_error = |path: &Path, source: io::Error| SnapshotError::Read {
        path: name_of(path),
        source,
    };
    let entries = dir.entries().map_err(|e| read_error(at, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| read_error(at, e))?;
        *seen += 1;
        if *seen > MAX_ENTRIES {
            return Err(SnapshotError::TooLarge);
        }
        let path = at.join(entry.file_name());
        let file_type = entry.file_type().map_err(|e| read_error(&path, e))?;
        let name = name_of(&path);
        match watch(&name, file_type.is_dir()) {
            Watch::Skip => {}
            Watch::Descend if file_type.is_dir() => {
                let sub = entry.open_dir().map_err(|e| read_error(&path, e))?;
                out.note_dir(&sub, &path)
                    .map_err(|e| read_error(&path, e))?;
                walk(&sub, &path, watch, out, seen)?;
            }
            Watch::Descend => {}
            Watch::Enter => {
                keep(dir, &path, &entry.file_name(), out)?;
                if file_type.is_dir() {
                    let sub = entry.open_dir().map_err(|e| read_error(&path, e))?;
                    let identity = out
                        .note_dir(&sub, &path)
                        .map_err(|e| read_error(&path, e))?;
                    out.identities.insert(name.clone(), identity);
                    walk(&sub, &path, watch, out, seen)?;
                }
            }
            Watch::Inside => {
                keep(dir, &path, &entry.file_name(), out)?;
                if file_type.is_dir() {
                    let sub = entry.open_dir().map_err(|e| read_error(&path, e))?;
                    walk(&sub, &path, watch, out, seen)?;
                }
            }
            Watch::Whole => {
                out.tops.push(name.clone());
                keep(dir, &path, &entry.file_name(), out)?;
                if file_type.is_dir() {
                    let sub = entry.open_dir().map_err(|e| read_error(&path, e))?;
                    walk(&sub, &path, &|_, _| Watch::Inside, out, seen)?;
                }
            }
        }
    }
    Ok(())
}

/// Keeps the entry `name` of `dir` (at `path` from the root), not following a link.
fn keep(
    dir: &Dir,
    path: &Path,
    name: &std::ffi::OsStr,
    out: &mut Snapshot,
) -> Result<(), SnapshotError> {
    let read_error = |source: io::Error| SnapshotError::Read {
        path: name_of(path),
        source,
    };
    let meta = dir.symlink_metadata(name).map_err(read_error)?;
    let mode = meta.permissions().mode() & 0o7777;
    let kept = if meta.is_symlink() {
        Kept::Link {
            target: dir.read_link_contents(name).map_err(read_error)?,
        }
    } else if meta.is_dir() {
        Kept::Dir { mode }
    } else if meta.is_file() {
        let mut options = OpenOptions::new();
        options.read(true).custom_flags(libc_nofollow());
        let mut file = dir.open_with(name, &options).map_err(read_error)?;
        let mut hasher = Sha256::new();
        let mut bytes = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut len = 0u64;
        loop {
            let n = file.read(&mut buf).map_err(read_error)?;
            if n == 0 {
                break;
            }
            let chunk = buf.get(..n).unwrap_or_default();
            hasher.update(chunk);
            len += n as u64;
            if len <= KEPT_BYTES {
                bytes.extend_from_slice(chunk);
            }
        }
        Kept::File {
            mode,
            len,
            digest: hasher.finalize().into(),
            bytes: (len <= KEPT_BYTES).then_some(bytes),
        }
    } else {
        Kept::Other { mode }
    };
    out.entries
        .insert(name_of(path), (path.to_path_buf(), kept));
    Ok(())
}

fn libc_nofollow() -> i32 {
    // INVARIANT: `O_NOFOLLOW` is a small positive flag.
    i32::try_from(rustix::fs::OFlags::NOFOLLOW.bits()).unwrap_or(0o400_000)
}

fn remove_entry(root: &Dir, path: &Path, kept: &Kept) -> io::Result<()> {
    let result = match kept {
        Kept::Dir { .. } => root.remove_dir_all(path),
        _ => root.remove_file(path),
    };
    match result {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Writes `kept` back at `path`; `false` when its bytes were not kept.
fn put_back(root: &Dir, path: &Path, kept: &Kept, what: ChangeKind) -> io::Result<bool> {
    match kept {
        Kept::Dir { mode } => {
            match root.create_dir(path) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                other => other?,
            }
            root.set_permissions(
                path,
                Permissions::from_std(std::fs::Permissions::from_mode(*mode)),
            )?;
        }
        Kept::File { mode, bytes, .. } => {
            let Some(bytes) = bytes else {
                return Ok(false);
            };
            // A changed file may have been made a link meanwhile; never write through one.
            if what != ChangeKind::Removed {
                remove_entry(root, path, kept)?;
            }
            let mut options = OpenOptions::new();
            options
                .write(true)
                .create_new(true)
                .custom_flags(libc_nofollow())
                .mode(*mode);
            let mut file = root.open_with(path, &options)?;
            std::io::Write::write_all(&mut file, bytes)?;
            file.set_permissions(Permissions::from_std(std::fs::Permissions::from_mode(
                *mode,
            )))?;
        }
        Kept::Link { target } => {
            if what != ChangeKind::Removed {
                remove_entry(root, path, kept)?;
            }
            root.symlink_contents(target, path)?;
        }
        // A socket or device that went cannot be made again here; its going runs nothing.
        Kept::Other { .. } => {}
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    /// `.claude` and `.git/hooks` and `.git/config` kept whole, `.git` entered, `.mcp.json`
    /// kept wherever it is.
    fn watch(path: &str, _is_dir: bool) -> Watch {
        match path {
            ".git" => Watch::Enter,
            ".claude" | ".git/hooks" | ".git/config" => Watch::Whole,
            p if p.ends_with(".mcp.json") => Watch::Whole,
            p if p.starts_with(".git/") => Watch::Skip,
            _ => Watch::Descend,
        }
    }

    fn workspace() -> (tempfile::TempDir, Dir) {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::create_dir_all(p.join(".git/hooks")).unwrap();
        fs::create_dir_all(p.join(".git/objects")).unwrap();
        fs::write(p.join(".git/config"), "[core]\n").unwrap();
        fs::write(p.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        fs::create_dir(p.join(".claude")).unwrap();
        fs::write(p.join(".claude/settings.json"), "{}").unwrap();
        fs::create_dir(p.join("src")).unwrap();
        fs::write(p.join("src/a.rs"), "fn a() {}").unwrap();
        let root = Dir::open_ambient_dir(p, cap_std::ambient_authority()).unwrap();
        (dir, root)
    }

    /// Everything under the workspace, as (path, kind, bytes).
    fn listing(p: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![p.to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let path = entry.path();
                let rel = path.strip_prefix(p).unwrap().display().to_string();
                let meta = fs::symlink_metadata(&path).unwrap();
                let what = if meta.is_symlink() {
                    format!("link {}", fs::read_link(&path).unwrap().display())
                } else if meta.is_dir() {
                    stack.push(path.clone());
                    format!("dir {:o}", meta.permissions().mode() & 0o7777)
                } else {
                    format!(
                        "file {:o} {}",
                        meta.permissions().mode() & 0o7777,
                        String::from_utf8_lossy(&fs::read(&path).unwrap())
                    )
                };
                out.push((rel, what));
            }
        }
        out.sort();
        out
    }

    #[test]
    fn every_spelling_of_a_change_is_found_and_put_back() {
        type Attack = fn(&Path);
        let table: &[(&str, Attack, &[&str])] = &[
            (
                "write a hook",
                |p| fs::write(p.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap(),
                &[".git/hooks/pre-commit"],
            ),
            (
                "change the config",
                |p| fs::write(p.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap(),
                &[".git/config"],
            ),
            (
                "make a sample executable",
                |p| {
                    fs::set_permissions(
                        p.join(".git/hooks/pre-commit.sample"),
                        fs::Permissions::from_mode(0o755),
                    )
                    .unwrap()
                },
                &[".git/hooks/pre-commit.sample"],
            ),
            (
                "replace the config by rename",
                |p| {
                    fs::write(p.join("new"), "[core]\nfsmonitor = evil\n").unwrap();
                    fs::rename(p.join("new"), p.join(".git/config")).unwrap();
                },
                &[".git/config"],
            ),
            (
                "replace hooks with a link",
                |p| {
                    fs::create_dir(p.join("evil")).unwrap();
                    fs::write(p.join("evil/pre-commit"), "evil").unwrap();
                    fs::remove_dir_all(p.join(".git/hooks")).unwrap();
                    symlink("../evil", p.join(".git/hooks")).unwrap();
                },
                &[".git/hooks", ".git/hooks/pre-commit.sample"],
            ),
            (
                "rename the git dir and build another",
                |p| {
                    fs::rename(p.join(".git"), p.join("old-git")).unwrap();
                    fs::create_dir_all(p.join(".git/hooks")).unwrap();
                    fs::write(p.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
                    fs::write(p.join(".git/hooks/post-checkout"), "evil").unwrap();
                },
                &[
                    ".git/config",
                    ".git/hooks/post-checkout",
                    ".git/hooks/pre-commit.sample",
                ],
            ),
            (
                "remove the settings",
                |p| fs::remove_file(p.join(".claude/settings.json")).unwrap(),
                &[".claude/settings.json"],
            ),
            (
                "create a server file deep down",
                |p| fs::write(p.join("src/.mcp.json"), "{}").unwrap(),
                &["src/.mcp.json"],
            ),
            (
                "link the settings elsewhere",
                |p| {
                    fs::remove_dir_all(p.join(".claude")).unwrap();
                    symlink("src", p.join(".claude")).unwrap();
                },
                &[".claude", ".claude/settings.json"],
            ),
        ];
        for (what, attack, changed) in table {
            let (dir, root) = workspace();
            let p = dir.path();
            let before = Snapshot::take(&root, &watch).unwrap();
            let listed = listing(p);
            attack(p);
            let after = Snapshot::take(&root, &watch).unwrap();
            let changes = before.changes(&after);
            let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
            assert_eq!(&paths, changed, "{what}: {changes:?}");
            let lost = before.restore(&root, &after, &changes).unwrap();
            assert!(lost.is_empty(), "{what}");
            let again = Snapshot::take(&root, &watch).unwrap();
            assert!(
                before.changes(&again).is_empty(),
                "{what}: {:?}",
                before.changes(&again)
            );
            // Outside the kept paths, what the process did stays.
            let now: Vec<_> = listing(p)
                .into_iter()
                .filter(|(path, _)| {
                    !path.starts_with("evil") && !path.starts_with("old-git") && path != "new"
                })
                .collect();
            let was: Vec<_> = listed
                .into_iter()
                .filter(|(path, _)| !path.starts_with(".git/objects"))
                .collect();
            let now: Vec<_> = now
                .into_iter()
                .filter(|(path, _)| !path.starts_with(".git/objects"))
                .collect();
            assert_eq!(now, was, "{what}");
        }
    }

    #[test]
    fn a_git_directory_renamed_and_replaced_is_moved_back() {
        let (dir, _root) = workspace();
        let p = dir.path();
        fs::write(p.join(".git/objects/original"), "object").unwrap();
        let guarded = Guarded::take(p, watch, Vec::new()).unwrap();
        fs::rename(p.join(".git"), p.join("src/old-git")).unwrap();
        fs::create_dir_all(p.join(".git/hooks")).unwrap();
        fs::write(p.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        let undone = guarded.check().unwrap().unwrap();
        assert_eq!(undone.changes[0].path, ".git", "{undone:?}");
        assert!(undone.lost.is_empty());
        assert_eq!(
            fs::read(p.join(".git/objects/original")).unwrap(),
            b"object"
        );
        assert_eq!(fs::read(p.join(".git/config")).unwrap(), b"[core]\n");
        assert!(!p.join("src/old-git").exists());
        assert_eq!(guarded.check().unwrap(), None, "nothing left to undo");

        // Allowed by name, it stays as the process left it.
        let allowed = Guarded::take(p, watch, vec![".git".to_owned()]).unwrap();
        fs::write(p.join(".git/hooks/post-commit"), "#!/bin/sh\n").unwrap();
        assert_eq!(allowed.check().unwrap(), None);
    }

    #[test]
    fn nothing_changed_is_nothing_found() {
        let (dir, root) = workspace();
        let before = Snapshot::take(&root, &watch).unwrap();
        fs::write(dir.path().join("src/a.rs"), "changed").unwrap();
        fs::write(dir.path().join(".git/objects/x"), "object").unwrap();
        let after = Snapshot::take(&root, &watch).unwrap();
        assert!(before.changes(&after).is_empty());
        assert_eq!(before.len(), 6, "{before:?}");
    }

    #[test]
    fn directories_nested_deeper_than_a_walk_follows_are_refused_not_followed() {
        let (dir, root) = workspace();
        // Made by relative steps, as a process may, beyond what one path can name.
        let mut at = cap_std::fs::Dir::open_ambient_dir(
            dir.path().join("src"),
            cap_std::ambient_authority(),
        )
        .unwrap();
        for _ in 0..=MAX_DEPTH {
            at.create_dir("d").unwrap();
            at = at.open_dir("d").unwrap();
        }
        assert!(matches!(
            Snapshot::take(&root, &watch),
            Err(SnapshotError::TooDeep)
        ));
    }

    #[test]
    fn a_large_file_is_found_changed_but_not_put_back() {
        let (dir, root) = workspace();
        let big = vec![b'a'; usize::try_from(KEPT_BYTES).unwrap() + 1];
        fs::write(dir.path().join(".claude/big"), &big).unwrap();
        let before = Snapshot::take(&root, &watch).unwrap();
        fs::write(dir.path().join(".claude/big"), "small").unwrap();
        let after = Snapshot::take(&root, &watch).unwrap();
        let changes = before.changes(&after);
        assert_eq!(changes.len(), 1);
        assert_eq!(
            before.restore(&root, &after, &changes).unwrap(),
            [".claude/big"]
        );
    }
}
