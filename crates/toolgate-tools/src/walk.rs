//! A `.gitignore`-aware walk of one directory of the workspace, in path order.
//!
//! The walk starts at the workspace root and prunes everything that is neither an ancestor of
//! the requested directory nor inside it. Starting at the root (rather than at the directory)
//! means the ignore files between the root and the directory apply, while no ignore file above
//! the root does, nor the user's global one: what is listed depends on the workspace alone.
//!
//! A directory that is itself ignored (`target/`) is never reached that way. A caller who names
//! it explicitly still gets its contents, as ripgrep searches an ignored directory it is given:
//! a second walk then starts at the directory itself.
//!
//! What the walk yields is only what the pipeline's [`Sensitivity`] (in the [`ExecContext`])
//! lets a tool show: a sensitive directory (`.git`, `.ssh`, toolgate's state directory when it
//! lies in the workspace) is pruned as the walk reaches it, so nothing in it is ever read,
//! visited, named or counted; a sensitive file is yielded with its kind, for the caller to list
//! without reading it. A link is as sensitive as where it leads ([`visibility`]).
//!
//! The rules are ripgrep's, matched by the `ignore` crate's own matchers: `.ignore` over
//! `.gitignore` over `.git/info/exclude`, a deeper file over a shallower one of its kind, a
//! search's globs over all of them. The walk itself is toolgate's, so that it reads a directory
//! only to descend into it (a pruned directory, hidden, ignored or outside the walk's stretch,
//! is never opened), finds ignore files among the names it has read rather than by looking for
//! each, and reads them as git does and as a hostile repository cannot abuse: never through a
//! link (`.gitignore -> /dev/zero`), only a regular file (a FIFO cannot stall the walk), through
//! the workspace's capability, and at most [`MAX_IGNORE_BYTES`] of them along any one path, so
//! that the rules a walk holds at once stay small. The `info/exclude` of a repository whose
//! `.git` is a file (a worktree's, a submodule's) is not read: it lies outside the workspace,
//! or in another repository's `.git`.
//!
//! The walk uses ambient paths under the canonical root. That is sound because the starting
//! directory was resolved inside the workspace, links are reported and never followed, and
//! every entry is made relative to the root (anything that is not is dropped). File *contents*
//! are still opened through the workspace's capability by the callers.

use std::ffi::OsString;
use std::fs::{FileType, Metadata};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::overrides::Override;
use toolgate_core::sensitive::{SensitiveKind, Visibility};
use toolgate_core::{ExecContext, Sensitivity, ToolError};
use toolgate_workspace::{RelPath, Workspace};

use crate::stopped;

/// The most bytes of ignore files applied along one path: the files of a directory and of all
/// the directories above it, which the walk holds compiled while it is inside. A file that
/// would go past it is not applied, and is counted as unreadable. Real ones are a few
/// kilobytes; 128 KiB of costly globs (`**/d1*x[a-c]?/**/*.e1`, ...) compile to about 55 MB,
/// in about 0.15 s.
const MAX_IGNORE_BYTES: u64 = 128 << 10;

/// What to walk.
#[derive(Debug, Clone)]
pub(crate) struct WalkOptions {
    /// Levels below the starting directory; `None` for all.
    pub depth: Option<usize>,
    /// File-name globs to keep or drop (`search_text`'s `glob`).
    pub overrides: Option<Override>,
}

/// What the walk passed over without visiting.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WalkSummary {
    /// Entries the walker could not read (permissions, races), and ignore files it would not.
    pub unreadable: usize,
    /// Entries whose names are not UTF-8, which no caller could name anyway.
    pub unnamed: usize,
}

/// An entry of a directory the walk read.
pub(crate) struct Entry {
    path: PathBuf,
    file_type: FileType,
}

impl Entry {
    /// Its ambient path, under the workspace root.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What it is, as the directory listed it: a link is a link.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }

    /// Its status, not following a link.
    pub fn metadata(&self) -> std::io::Result<Metadata> {
        std::fs::symlink_metadata(&self.path)
    }
}

/// One entry the walk yields: never a hidden one.
pub(crate) struct Found<'a> {
    pub entry: &'a Entry,
    pub rel: RelPath,
    /// The kind of sensitive file it is (or leads to), to list by name and never read.
    pub sensitive: Option<&'static SensitiveKind>,
}

/// Visits every entry strictly below `start` (a directory inside the workspace) that `cx`'s
/// sensitivity does not hide, in path order, until `visit` breaks. Stops with the
/// `timeout`/`cancelled` error when `cx` says so.
pub(crate) fn walk(
    workspace: &Workspace,
    start: &RelPath,
    options: &WalkOptions,
    cx: &ExecContext,
    visit: impl FnMut(Found<'_>) -> ControlFlow<()>,
) -> Result<WalkSummary, ToolError> {
    walk_stretch(workspace, start, options, &Stretch::default(), cx, visit)
}

/// [`walk`], visiting only the entries in `stretch` of the walk's order: the walks of the
/// stretches [`stretches`] gives, one after another, visit what one walk does, in its order.
pub(crate) fn walk_stretch(
    workspace: &Workspace,
    start: &RelPath,
    options: &WalkOptions,
    stretch: &Stretch,
    cx: &ExecContext,
    mut visit: impl FnMut(Found<'_>) -> ControlFlow<()>,
) -> Result<WalkSummary, ToolError> {
    let root = workspace.root();
    let start_path = workspace.ambient_path(start);
    let sensitivity = cx.sensitivity();
    let mut summary = WalkSummary::default();
    let mut walker = Walker {
        workspace,
        sensitivity,
        overrides: options.overrides.as_ref().filter(|o| !o.is_empty()),
        stretch: (!stretch.is_whole()).then_some(stretch),
        only: (!start.is_root()).then_some(start_path.as_path()),
        max_depth: options.depth.map(|d| d.saturating_add(start.depth())),
        cx,
    };
    // A directory the stretch begins inside is walked into, but visited by the stretch before.
    let holds = |entry: &Entry| {
        stretch.is_whole() || under(entry.path(), root).is_some_and(|below| stretch.holds(below))
    };

    let mut reached_start = false;
    walker.walk(root, &mut summary, &mut |entry, summary| {
        let Some(below) = under(entry.path(), &start_path) else {
            // An ancestor of the start, walked only to get there.
            return ControlFlow::Continue(());
        };
        if below.is_empty() {
            reached_start = true;
            return ControlFlow::Continue(());
        }
        if !holds(entry) {
            return ControlFlow::Continue(());
        }
        visit_entry(workspace, sensitivity, entry, summary, &mut visit)
    })?;
    if reached_start || start.is_root() {
        return Ok(summary);
    }

    // The start is ignored (or inside something ignored); walk it on its own.
    walker.only = None;
    walker.max_depth = options.depth;
    walker.walk(&start_path, &mut summary, &mut |entry, summary| {
        if !holds(entry) {
            return ControlFlow::Continue(());
        }
        visit_entry(workspace, sensitivity, entry, summary, &mut visit)
    })?;
    Ok(summary)
}

/// How one walk goes: what it prunes, how deep, until when.
struct Walker<'a> {
    workspace: &'a Workspace,
    sensitivity: &'a Sensitivity,
    overrides: Option<&'a Override>,
    /// Directories that reach nothing in the stretch are not walked into.
    stretch: Option<&'a Stretch>,
    /// Only this directory's ancestors and what lies below it are walked.
    only: Option<&'a Path>,
    /// The deepest level walked, counted from the workspace root's children at 1 (from the
    /// walk's own start when it is not the root).
    max_depth: Option<usize>,
    cx: &'a ExecContext,
}

/// A directory being walked: what is left of its entries, and the ignore rules it adds.
struct Level {
    dir: PathBuf,
    depth: usize,
    entries: std::vec::IntoIter<(OsString, FileType)>,
    rules: Option<Box<Rules>>,
    /// The bytes of its ignore files: the walk holds at most [`MAX_IGNORE_BYTES`] along a path.
    ignore_bytes: u64,
}

/// The matchers of one directory's `.ignore`, `.gitignore` and `.git/info/exclude`, rooted
/// there, in the order they take precedence.
type Rules = [Gitignore; 3];

impl Walker<'_> {
    /// Walks `from` (a directory at or under the root), handing `visit` every entry not
    /// pruned, in path order, a directory before what it holds. Directories that cannot be read
    /// are counted in `summary`, not visited.
    fn walk(
        &self,
        from: &Path,
        summary: &mut WalkSummary,
        visit: &mut dyn FnMut(&Entry, &mut WalkSummary) -> ControlFlow<()>,
    ) -> Result<(), ToolError> {
        let mut levels = Vec::new();
        if self.max_depth != Some(0) {
            match self.level(from.to_path_buf(), 0, MAX_IGNORE_BYTES, summary) {
                Some(level) => levels.push(level),
                None => summary.unreadable += 1,
            }
        }
        while let Some(level) = levels.last_mut() {
            let Some((name, file_type)) = level.entries.next() else {
                levels.pop();
                continue;
            };
            if self.cx.should_stop() {
                return Err(stopped(self.cx));
            }
            let path = level.dir.join(name);
            let depth = level.depth + 1;
            let is_dir = file_type.is_dir();
            if !self.keeps(&path, is_dir) || ignored(&levels, self.overrides, &path, is_dir) {
                continue;
            }
            let below = if is_dir && self.max_depth.is_none_or(|max| depth < max) {
                // A directory that cannot be read is not visited, as if it were gone.
                let held: u64 = levels.iter().map(|level| level.ignore_bytes).sum();
                let room = MAX_IGNORE_BYTES.saturating_sub(held);
                let Some(level) = self.level(path.clone(), depth, room, summary) else {
                    summary.unreadable += 1;
                    continue;
                };
                Some(level)
            } else {
                None
            };
            let entry = Entry { path, file_type };
            if visit(&entry, summary).is_break() {
                break;
            }
            levels.extend(below);
        }
        Ok(())
    }

    /// Whether an entry stays in the walk by where it is: for a directory, whether it is
    /// walked into at all.
    fn keeps(&self, path: &Path, is_dir: bool) -> bool {
        let root = self.workspace.root();
        self.only
            .is_none_or(|only| only.starts_with(path) || path.starts_with(only))
            && self.stretch.is_none_or(|stretch| {
                under(path, root).is_some_and(|below| stretch.reaches(below, is_dir))
            })
            && !(is_dir && hidden(root, self.sensitivity, path))
    }

    /// Reads the directory at `dir` (`None` if it cannot be): its entries in order, and the
    /// ignore files among them, of at most `room` bytes.
    fn level(
        &self,
        dir: PathBuf,
        depth: usize,
        room: u64,
        summary: &mut WalkSummary,
    ) -> Option<Level> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&dir).ok()? {
            match entry.and_then(|e| Ok((e.file_name(), e.file_type()?))) {
                Ok(named) => entries.push(named),
                Err(_) => summary.unreadable += 1,
            }
        }
        entries.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut left = room;
        let rules = self.rules(&dir, &entries, &mut left, summary);
        Some(Level {
            dir,
            depth,
            entries: entries.into_iter(),
            rules,
            ignore_bytes: room - left,
        })
    }

    /// The rules the ignore files among `entries` (the directory `dir`'s) add, if any, taking
    /// what they read from `room`.
    fn rules(
        &self,
        dir: &Path,
        entries: &[(OsString, FileType)],
        room: &mut u64,
        summary: &mut WalkSummary,
    ) -> Option<Box<Rules>> {
        let has = |name: &str, is: fn(&FileType) -> bool| {
            entries
                .binary_search_by(|(n, _)| n.as_os_str().cmp(name.as_ref()))
                .is_ok_and(|at| entries.get(at).is_some_and(|(_, t)| is(t)))
        };
        // As git reads them: a link is not followed.
        let wanted = [
            has(".ignore", FileType::is_file).then_some(".ignore"),
            has(".gitignore", FileType::is_file).then_some(".gitignore"),
            has(".git", FileType::is_dir).then_some(".git/info/exclude"),
        ];
        if wanted.iter().all(Option::is_none) {
            return None;
        }
        let rel = relative(self.workspace.root(), dir)?;
        Some(Box::new(wanted.map(|name| {
            name.map_or_else(Gitignore::empty, |name| {
                self.ignore_file(dir, &rel, name, room, summary)
            })
        })))
    }

    /// The matcher of the ignore file `name` (`/`-separated) in the directory `dir` (`rel` in
    /// the workspace), read through the workspace as a regular file of at most `room` bytes,
    /// which its bytes are taken from; empty if it is missing, and counted in `summary` if it
    /// is anything else that cannot be read, or larger.
    fn ignore_file(
        &self,
        dir: &Path,
        rel: &RelPath,
        name: &str,
        room: &mut u64,
        summary: &mut WalkSummary,
    ) -> Gitignore {
        let Some(file) = RelPath::from_components(rel.components().chain(name.split('/'))) else {
            return Gitignore::empty();
        };
        let bytes = match self.workspace.open_file(&file) {
            Ok(open) if open.len <= *room => open.read(&file, *room),
            Err(toolgate_workspace::PathError::NotFound { .. }) => return Gitignore::empty(),
            Ok(_) | Err(_) => {
                summary.unreadable += 1;
                return Gitignore::empty();
            }
        };
        let Ok(bytes) = bytes else {
            summary.unreadable += 1;
            return Gitignore::empty();
        };
        *room = room.saturating_sub(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        let from = dir.join(name);
        let mut builder = GitignoreBuilder::new(dir);
        // Line by line as the `ignore` crate reads them: a line that is not UTF-8, or not a
        // glob, is passed over; a byte order mark before the first is dropped.
        let mut lines = bytes.split(|&b| b == b'\n').enumerate().peekable();
        while let Some((i, line)) = lines.next() {
            // A line's end is `\n` or `\r\n`; a last line without one keeps its `\r`.
            let line = match lines.peek() {
                Some(_) => line.strip_suffix(b"\r").unwrap_or(line),
                None => line,
            };
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            let line = if i == 0 {
                line.trim_start_matches('\u{feff}')
            } else {
                line
            };
            let _ = builder.add_line(Some(from.clone()), line);
        }
        builder.build().unwrap_or_else(|_| Gitignore::empty())
    }
}

/// Whether the rules of `levels` (the walk's directories, outermost first) and the `overrides`
/// ignore `path`: a search's globs first, then the deepest `.ignore` that says anything about
/// it, else the deepest `.gitignore`, else the deepest `info/exclude`.
fn ignored(levels: &[Level], overrides: Option<&Override>, path: &Path, is_dir: bool) -> bool {
    if let Some(overrides) = overrides {
        match overrides.matched(path, is_dir) {
            Match::None => {}
            said => return said.is_ignore(),
        }
    }
    for kind in 0..3 {
        for rules in levels
            .iter()
            .rev()
            .filter_map(|level| level.rules.as_deref())
        {
            let Some(matcher) = rules.get(kind) else {
                continue;
            };
            match matcher.matched(path, is_dir) {
                Match::None => {}
                said => return said.is_ignore(),
            }
        }
    }
    false
}

fn visit_entry(
    workspace: &Workspace,
    sensitivity: &Sensitivity,
    entry: &Entry,
    summary: &mut WalkSummary,
    visit: &mut impl FnMut(Found<'_>) -> ControlFlow<()>,
) -> ControlFlow<()> {
    let Some(rel) = relative(workspace.root(), entry.path()) else {
        summary.unnamed += 1;
        return ControlFlow::Continue(());
    };
    let sensitive = match visibility(workspace, sensitivity, &rel, entry.file_type().is_symlink()) {
        Visibility::Hidden => return ControlFlow::Continue(()),
        Visibility::NameOnly(kind) => Some(kind),
        Visibility::Visible => None,
    };
    visit(Found {
        entry,
        rel,
        sensitive,
    })
}

/// What a tool may show of `rel`: by its own path and, when it may be a link (or lead through
/// one), by where it leads inside the workspace, as `read_file`'s policy check sees it. A link
/// that leads out, or nowhere, is judged by its own path: nothing it leads to can be read.
pub(crate) fn visibility(
    workspace: &Workspace,
    sensitivity: &Sensitivity,
    rel: &RelPath,
    may_be_link: bool,
) -> Visibility {
    let own = sensitivity.visibility(rel.as_str());
    if own == Visibility::Hidden || !may_be_link {
        return own;
    }
    match workspace.resolve(rel) {
        Ok(resolved) if resolved.target != *rel => {
            own.or(sensitivity.visibility(resolved.target.as_str()))
        }
        _ => own,
    }
}

/// Whether `path` (under `root`) is hidden. A name that is not UTF-8 is judged by its readable
/// parts, so that it cannot shield a `.ssh` below it from pruning.
///
/// The walker builds every path by joining names to `root` (see [`relative`]), so what follows
/// `root` is read as bytes: a `/` is never part of a longer UTF-8 sequence, so reading the
/// whole path lossily reads each name as it would alone.
fn hidden(root: &Path, sensitivity: &Sensitivity, path: &Path) -> bool {
    let Some(below) = under(path, root) else {
        return false;
    };
    sensitivity.visibility(&String::from_utf8_lossy(below)) == Visibility::Hidden
}

/// The workspace path of an entry the walker found under `root`; `None` for anything not
/// under it (which a walk that follows no links never yields) or not named in UTF-8.
///
/// The walker builds every path by joining names to `root`, so the path is `root`, a slash
/// and the names: it is read as bytes. Read as components, it took about 9,000 instructions
/// an entry (callgrind), most of what the walk spent on an entry of its own.
fn relative(root: &Path, path: &Path) -> Option<RelPath> {
    let names = std::str::from_utf8(under(path, root)?).ok()?;
    if names.is_empty() {
        return Some(RelPath::root());
    }
    // A name that is empty, `.` or `..` (which a walk never yields) makes this `None`.
    RelPath::from_components(names.split('/'))
}

/// What follows `dir` in `path`, if `path` is `dir` (nothing follows) or below it, compared
/// as bytes: `a/bc` is not below `a/b`.
fn under<'a>(path: &'a Path, dir: &Path) -> Option<&'a [u8]> {
    use std::os::unix::ffi::OsStrExt as _;
    let rest = path
        .as_os_str()
        .as_bytes()
        .strip_prefix(dir.as_os_str().as_bytes())?;
    if rest.is_empty() || dir.as_os_str().as_bytes().ends_with(b"/") {
        return Some(rest);
    }
    rest.strip_prefix(b"/")
}

/// The most stretches a walk is cut into.
const MAX_STRETCHES: usize = 16;

/// How many directories down a single subdirectory is followed to find one worth cutting.
const MAX_DESCENT: usize = 8;

/// A directory with more entries than this is not cut (its names are read once more to cut
/// it, and that read should stay small beside the walk).
const MAX_CUT_ENTRIES: usize = 1 << 16;

/// A stretch of a walk's order, from `from` (included) to `to` (left out), each a path below
/// the workspace root as its names; `None` leaves that end open. Paths are compared name by
/// name, as the walk orders them (a directory's contents right after it, names by their
/// bytes), so `a/b` comes before `a.b`, and a directory's contents lie in one stretch unless
/// a bound is inside the directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stretch {
    from: Option<Vec<Vec<u8>>>,
    to: Option<Vec<Vec<u8>>>,
}

impl Stretch {
    fn is_whole(&self) -> bool {
        self.from.is_none() && self.to.is_none()
    }

    /// Whether the entry at `below` (its path under the root, `/`-separated) is in the
    /// stretch or, for a directory, holds something that is: a directory before the stretch
    /// is walked into only when the stretch begins inside it.
    fn reaches(&self, below: &[u8], is_dir: bool) -> bool {
        if below.is_empty() {
            return true;
        }
        self.holds(below)
            || (is_dir
                && self.to.as_deref().is_none_or(|to| order(below, to).is_lt())
                && self.from.as_deref().is_some_and(|from| {
                    names(below).count() < from.len()
                        && names(below)
                            .zip(from)
                            .all(|(name, bound)| name == bound.as_slice())
                }))
    }

    /// Whether the entry at `below` is in the stretch itself.
    fn holds(&self, below: &[u8]) -> bool {
        self.from
            .as_deref()
            .is_none_or(|from| order(below, from).is_ge())
            && self.to.as_deref().is_none_or(|to| order(below, to).is_lt())
    }
}

/// How the walk orders the path `below` (`/`-separated) and a bound given as its names: name
/// by name, by their bytes, a directory before what it holds.
fn order(below: &[u8], bound: &[Vec<u8>]) -> std::cmp::Ordering {
    names(below).cmp(bound.iter().map(Vec::as_slice))
}

/// The names of a `/`-separated path.
fn names(path: &[u8]) -> impl Iterator<Item = &[u8]> {
    path.split(|&b| b == b'/')
}

/// Cuts the walk below `start` into at most `pieces` stretches, in order, so that several
/// threads can walk it at once and their findings be put back in order. The cuts fall
/// between the subdirectories of the first directory at or below `start` that has more than
/// one (a lone subdirectory is followed down, as in `~/.cargo/registry/src/<index>/`), spread
/// evenly by count. A directory that cannot be read, or holds no two subdirectories, gives
/// one stretch: the whole walk.
///
/// Only names are read here, never contents, and nothing read here is yielded: the stretches
/// decide which walker visits an entry, not whether it is visited. So a directory swapped
/// for a link meanwhile can only make the cuts uneven. A directory `sensitivity` hides is
/// neither followed nor cut at, so its names are never read, as the walk never reads them.
pub(crate) fn stretches(
    workspace: &Workspace,
    sensitivity: &Sensitivity,
    start: &RelPath,
    pieces: usize,
) -> Vec<Stretch> {
    let whole = vec![Stretch::default()];
    let root = workspace.root();
    let mut dir = workspace.ambient_path(start);
    for _ in 0..MAX_DESCENT {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return whole;
        };
        let mut subdirs = Vec::new();
        for (count, entry) in entries.enumerate() {
            if count >= MAX_CUT_ENTRIES {
                return whole;
            }
            let Ok(entry) = entry else { continue };
            if entry.file_type().is_ok_and(|t| t.is_dir())
                && !hidden(root, sensitivity, &entry.path())
            {
                subdirs.push(entry.file_name());
            }
        }
        subdirs.sort();
        match subdirs.as_slice() {
            [] => return whole,
            [only] => {
                dir.push(only);
                continue;
            }
            _ => {}
        }
        let Some(below) = under(&dir, root) else {
            return whole;
        };
        let base: Vec<Vec<u8>> = if below.is_empty() {
            Vec::new()
        } else {
            names(below).map(<[u8]>::to_vec).collect()
        };
        let pieces = pieces.clamp(1, subdirs.len().min(MAX_STRETCHES));
        use std::os::unix::ffi::OsStrExt as _;
        let cuts: Vec<Vec<Vec<u8>>> = (1..pieces)
            .filter_map(|i| subdirs.get(i * subdirs.len() / pieces))
            .map(|name| {
                let mut path = base.clone();
                path.push(name.as_bytes().to_vec());
                path
            })
            .collect();
        let mut bounds = Vec::with_capacity(cuts.len() + 2);
        bounds.push(None);
        bounds.extend(cuts.into_iter().map(Some));
        bounds.push(None);
        return bounds
            .windows(2)
            .map(|pair| Stretch {
                from: pair.first().cloned().flatten(),
                to: pair.get(1).cloned().flatten(),
            })
            .collect();
    }
    whole
}

#[cfg(test)]
mod tests {
    use super::*;
    use ignore::overrides::OverrideBuilder;
    use std::fs;
    use std::sync::Arc;
    use std::time::Duration;
    use toolgate_core::Cancel;

    fn cx() -> ExecContext {
        ExecContext::new(Duration::from_secs(60), Cancel::new())
    }

    fn paths(workspace: &Workspace, start: &str, depth: Option<usize>) -> Vec<String> {
        found(workspace, start, depth, &cx())
            .into_iter()
            .map(|(path, _)| path)
            .collect()
    }

    /// Each entry walked, with the rule of the sensitive file it is, if it is one.
    fn found(
        workspace: &Workspace,
        start: &str,
        depth: Option<usize>,
        cx: &ExecContext,
    ) -> Vec<(String, Option<&'static str>)> {
        let start = workspace.check_path(start).unwrap();
        let mut seen = Vec::new();
        let options = WalkOptions {
            depth,
            overrides: None,
        };
        walk(workspace, &start, &options, cx, |found| {
            seen.push((found.rel.to_string(), found.sensitive.map(|k| k.rule)));
            ControlFlow::Continue(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn paths_below_a_directory_are_told_by_whole_names() {
        let p = Path::new;
        assert_eq!(under(p("/ws/a/b"), p("/ws")), Some(&b"a/b"[..]));
        assert_eq!(under(p("/ws"), p("/ws")), Some(&b""[..]));
        assert_eq!(under(p("/wsx/a"), p("/ws")), None);
        assert_eq!(under(p("/w"), p("/ws")), None);
        assert_eq!(under(p("/etc/x"), p("/")), Some(&b"etc/x"[..]));
        let rel = |path| relative(p("/ws"), p(path)).map(|r| r.to_string());
        assert_eq!(rel("/ws/src/lib.rs").as_deref(), Some("src/lib.rs"));
        assert_eq!(rel("/ws").as_deref(), Some("."));
        assert_eq!(rel("/ws/a//b"), None);
        assert_eq!(rel("/ws/a/../b"), None);
        assert_eq!(rel("/other/a"), None);
        use std::os::unix::ffi::OsStrExt as _;
        let unnamed = std::ffi::OsStr::from_bytes(b"/ws/a\xff");
        assert_eq!(relative(p("/ws"), Path::new(unnamed)), None);
    }

    /// Each entry walked, with the rule of the sensitive file it is, if it is one.
    type Walked = Vec<(String, Option<&'static str>)>;

    /// Every entry of the walk, as [`found`] gives it, once through the whole walk and once
    /// stretch after stretch.
    fn walked_in_stretches(workspace: &Workspace, start: &str, pieces: usize) -> (Walked, Walked) {
        let whole = found(workspace, start, None, &cx());
        let start = workspace.check_path(start).unwrap();
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let mut stretched = Vec::new();
        for stretch in stretches(workspace, &Sensitivity::default(), &start, pieces) {
            walk_stretch(workspace, &start, &options, &stretch, &cx(), |found| {
                stretched.push((found.rel.to_string(), found.sensitive.map(|k| k.rule)));
                ControlFlow::Continue(())
            })
            .unwrap();
        }
        (whole, stretched)
    }

    #[test]
    fn stretches_follow_the_walks_order() {
        let stretch = |from: Option<&str>, to: Option<&str>| {
            let names = |p: &str| p.split('/').map(|n| n.as_bytes().to_vec()).collect();
            Stretch {
                from: from.map(names),
                to: to.map(names),
            }
        };
        let s = stretch(Some("a/m"), Some("a/t"));
        // A directory's contents come right after it, before a name that sorts after it.
        assert!(s.holds(b"a/m"));
        assert!(s.holds(b"a/m/zzz"));
        assert!(s.holds(b"a/s.txt"));
        assert!(!s.holds(b"a/t"));
        assert!(!s.holds(b"a/t/x"));
        assert!(!s.holds(b"a/l/zzz"));
        assert!(!s.holds(b"a"));
        assert!(!s.holds(b"a.b"));
        // `a` holds the stretch's start, so it is walked into; `a.b` and `b` lie after it.
        assert!(s.reaches(b"a", true));
        assert!(!s.reaches(b"a", false));
        assert!(!s.reaches(b"a.b", true));
        assert!(!s.reaches(b"0", true));
        assert!(s.reaches(b"", true));
        // Before the cut `a/m`, nothing after it: `a-b` comes after all of `a`, as the walk
        // goes through `a` before it, though `-` is a smaller byte than `/`.
        let first = stretch(None, Some("a/m"));
        assert!(first.holds(b"a"));
        assert!(first.holds(b"a/l/zzz"));
        assert!(!first.holds(b"a-b"));
        assert!(!s.holds(b"a-b"));
        assert!(!first.holds(b"a/m"));
        assert!(!first.reaches(b"a/m", true));
        assert!(!first.holds(b"a.b"));
        assert!(!first.holds(b"b"));
        assert!(stretch(None, None).is_whole());
    }

    #[test]
    fn stretch_after_stretch_walks_what_one_walk_does() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // A lone directory to follow down, files beside it at each level, names that sort
        // differently as paths and as strings (`a`, `a-b`, `a.b`), ignore rules at several
        // levels, sensitive directories and files.
        let files = [
            "0.txt",
            "z.txt",
            "only/1.txt",
            "only/inner/a/x.rs",
            "only/inner/a/deep/y.rs",
            "only/inner/a-b/x.rs",
            "only/inner/a.b/x.rs",
            "only/inner/b/ignored.log",
            "only/inner/b/kept.rs",
            "only/inner/c/.env",
            "only/inner/c/.ssh/id_rsa",
            "only/inner/d/build/out.bin",
            "only/inner/d/src/main.rs",
            "only/inner/e/é.txt",
            "only/inner/f/.git/HEAD",
            "only/inner/f/g.rs",
            "only/inner/z.md",
            "only/zz.txt",
        ];
        for file in files {
            fs::create_dir_all(root.join(file).parent().unwrap()).unwrap();
            fs::write(root.join(file), "x\n").unwrap();
        }
        for n in 0..30 {
            fs::create_dir_all(root.join(format!("only/inner/m{n:02}/sub"))).unwrap();
            fs::write(root.join(format!("only/inner/m{n:02}/sub/f.txt")), "x\n").unwrap();
        }
        fs::write(root.join(".gitignore"), "*.log\n").unwrap();
        fs::write(root.join("only/inner/d/.gitignore"), "build/\n").unwrap();
        let workspace = Workspace::open(root).unwrap();

        let start = workspace.check_path(".").unwrap();
        let cut = stretches(&workspace, &Sensitivity::default(), &start, 8);
        assert_eq!(cut.len(), 8, "{cut:?}");
        assert!(cut.first().unwrap().from.is_none() && cut.last().unwrap().to.is_none());
        for pair in cut.windows(2) {
            assert_eq!(pair[0].to, pair[1].from);
        }
        for pieces in [1, 2, 3, 5, 8, 16, 40] {
            for start in [".", "only", "only/inner", "only/inner/d"] {
                let (whole, stretched) = walked_in_stretches(&workspace, start, pieces);
                assert!(!whole.is_empty());
                assert_eq!(stretched, whole, "{pieces} pieces from {start}");
            }
        }
        // An ignored directory named as the start is walked on its own, stretches too.
        fs::create_dir_all(root.join("only/inner/d/build/x/y")).unwrap();
        fs::create_dir_all(root.join("only/inner/d/build/w")).unwrap();
        fs::write(root.join("only/inner/d/build/x/y/1"), "").unwrap();
        fs::write(root.join("only/inner/d/build/w/2"), "").unwrap();
        let (whole, stretched) = walked_in_stretches(&workspace, "only/inner/d/build", 4);
        assert_eq!(whole.len(), 6, "{whole:?}");
        assert_eq!(stretched, whole);
    }

    #[test]
    fn a_hidden_directory_is_neither_followed_nor_cut_at() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        // The lone readable subdirectory is `src`: `.ssh` beside it is not followed, however
        // many directories it holds, and the cuts fall inside `src`.
        for n in 0..20 {
            fs::create_dir_all(root.join(format!(".ssh/k{n:02}"))).unwrap();
        }
        for n in 0..6 {
            fs::create_dir_all(root.join(format!("src/m{n}"))).unwrap();
        }
        let workspace = Workspace::open(root).unwrap();
        let start = workspace.check_path(".").unwrap();
        let cut = stretches(&workspace, &Sensitivity::default(), &start, 4);
        assert_eq!(cut.len(), 4, "{cut:?}");
        for stretch in &cut {
            for bound in [&stretch.from, &stretch.to].into_iter().flatten() {
                assert_eq!(
                    bound.first().map(Vec::as_slice),
                    Some(&b"src"[..]),
                    "{cut:?}"
                );
            }
        }
        // Only hidden directories: nothing to cut.
        let only_hidden = tempfile::tempdir().unwrap();
        for n in 0..5 {
            fs::create_dir_all(only_hidden.path().join(format!(".git/d{n}"))).unwrap();
        }
        let workspace = Workspace::open(only_hidden.path()).unwrap();
        let start = workspace.check_path(".").unwrap();
        assert_eq!(
            stretches(&workspace, &Sensitivity::default(), &start, 4),
            [Stretch::default()]
        );
    }

    #[test]
    fn walks_in_path_order_respecting_gitignore() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::create_dir_all(root.join("target/debug")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/HEAD"), "ref\n").unwrap();
        fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        fs::write(root.join("a/b/c.txt"), "").unwrap();
        fs::write(root.join("a/x.log"), "").unwrap();
        fs::write(root.join("a.txt"), "").unwrap();
        fs::write(root.join(".hidden"), "").unwrap();
        fs::write(root.join("target/debug/out"), "").unwrap();
        let workspace = Workspace::open(root).unwrap();

        assert_eq!(
            paths(&workspace, ".", None),
            [".gitignore", ".hidden", "a", "a/b", "a/b/c.txt", "a.txt"]
        );
        assert_eq!(
            paths(&workspace, ".", Some(1)),
            [".gitignore", ".hidden", "a", "a.txt"]
        );
        assert_eq!(paths(&workspace, "a", None), ["a/b", "a/b/c.txt"]);
        assert_eq!(paths(&workspace, "a", Some(1)), ["a/b"]);
        // Named explicitly, an ignored directory is walked on its own.
        assert_eq!(
            paths(&workspace, "target", None),
            ["target/debug", "target/debug/out"]
        );
        assert_eq!(
            paths(&workspace, "target/debug", None),
            ["target/debug/out"]
        );
    }

    #[test]
    fn hidden_directories_are_pruned_and_sensitive_files_marked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in [
            "home/.ssh",
            "state/toolgate/nested",
            "src",
            "target/state/toolgate",
        ] {
            fs::create_dir_all(root.join(sub)).unwrap();
        }
        fs::write(root.join(".gitignore"), "target/\n").unwrap();
        fs::write(root.join("home/.ssh/config"), "").unwrap();
        fs::write(root.join("state/toolgate/console-1.token"), "").unwrap();
        fs::write(root.join("state/toolgate/nested/audit.db"), "").unwrap();
        fs::write(root.join("state/toolgate.toml"), "").unwrap();
        fs::write(root.join("target/state/toolgate/grants.json"), "").unwrap();
        fs::write(root.join("src/.env"), "").unwrap();
        fs::write(root.join("src/lib.rs"), "").unwrap();
        std::os::unix::fs::symlink("../state/toolgate/console-1.token", root.join("src/tok"))
            .unwrap();
        std::os::unix::fs::symlink("../state/toolgate", root.join("src/dir")).unwrap();
        std::os::unix::fs::symlink(".env", root.join("src/env_link")).unwrap();
        std::os::unix::fs::symlink("lib.rs", root.join("src/lib_link")).unwrap();
        let workspace = Workspace::open(root).unwrap();
        let sensitivity = Sensitivity::default()
            .with_config_dir("state/toolgate")
            .with_config_dir("target/state/toolgate");
        let fixed_kinds = cx();
        let cx = cx().with_sensitivity(Arc::new(sensitivity));

        let everything = vec![
            (".gitignore".to_owned(), None),
            ("home".to_owned(), None),
            ("src".to_owned(), None),
            ("src/.env".to_owned(), Some("sensitive-dotenv")),
            // A link is as sensitive as where it leads.
            ("src/env_link".to_owned(), Some("sensitive-dotenv")),
            ("src/lib.rs".to_owned(), None),
            ("src/lib_link".to_owned(), None),
            ("state".to_owned(), None),
            (
                "state/toolgate.toml".to_owned(),
                Some("sensitive-toolgate-config"),
            ),
        ];
        assert_eq!(found(&workspace, ".", None, &cx), everything);
        // Named, a parent of a hidden directory still shows nothing of it.
        assert_eq!(
            found(&workspace, "state", None, &cx),
            [(
                "state/toolgate.toml".to_owned(),
                Some("sensitive-toolgate-config")
            )]
        );
        assert_eq!(found(&workspace, "home", None, &cx), []);
        // An ignored directory named explicitly is walked on its own, and pruned the same.
        assert_eq!(
            found(&workspace, "target", None, &cx),
            [("target/state".to_owned(), None)]
        );
        // Even a walk that starts in a hidden directory shows nothing of it.
        assert_eq!(found(&workspace, "state/toolgate", None, &cx), []);

        // The fixed kinds alone still hide `.ssh`, and nothing of the state directory.
        let fixed = found(&workspace, ".", None, &fixed_kinds);
        assert!(fixed.iter().all(|(p, _)| !p.contains(".ssh")), "{fixed:?}");
        assert!(
            fixed
                .iter()
                .any(|(p, _)| p == "state/toolgate/console-1.token")
        );
    }

    #[test]
    fn a_hidden_directory_is_never_read() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("state/toolgate")).unwrap();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9.token");
        if fs::write(dir.path().join("state/toolgate").join(name), "").is_err() {
            return;
        }
        let workspace = Workspace::open(dir.path()).unwrap();
        let sensitivity = Sensitivity::default().with_config_dir("state/toolgate");
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let cx = cx().with_sensitivity(Arc::new(sensitivity));
        let mut seen = Vec::new();
        let summary = walk(&workspace, &RelPath::root(), &options, &cx, |found| {
            seen.push(found.rel.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
        // Had the walker read the directory, the name it cannot show would have been counted.
        assert_eq!(seen, ["state"]);
        assert_eq!((summary.unnamed, summary.unreadable), (0, 0));
    }

    #[test]
    fn hidden_is_judged_on_the_path_below_the_root() {
        let root = Path::new("/ws");
        let sensitivity = Sensitivity::default().with_config_dir(".local/state/toolgate");
        let table = [
            ("/ws/.local/state/toolgate", true),
            ("/ws/.local/state/TOOLGATE/x", true),
            ("/ws/.local/state", false),
            ("/ws/a/.ssh", true),
            ("/ws/.git", true),
            ("/ws/src", false),
            // Not under the root: not the walker's to judge (it never yields such a path).
            ("/elsewhere/.ssh", false),
        ];
        for (path, expected) in table {
            assert_eq!(
                hidden(root, &sensitivity, Path::new(path)),
                expected,
                "{path}"
            );
        }
        // A name that is not UTF-8 above a hidden directory does not shield it.
        use std::os::unix::ffi::OsStrExt as _;
        let odd = Path::new("/ws").join(std::ffi::OsStr::from_bytes(b"caf\xe9/.ssh"));
        assert!(hidden(root, &sensitivity, &odd));
    }

    #[test]
    fn entries_are_made_relative_to_the_root_or_dropped() {
        let root = Path::new("/work/ws");
        assert_eq!(
            relative(root, Path::new("/work/ws/src/lib.rs")).map(|r| r.to_string()),
            Some("src/lib.rs".to_owned())
        );
        assert_eq!(relative(root, root), Some(RelPath::root()));
        assert_eq!(relative(root, Path::new("/etc/passwd")), None);
        assert_eq!(relative(root, Path::new("/work/ws/../outside")), None);
    }

    #[test]
    fn names_that_are_not_utf8_are_counted_not_listed() {
        use std::os::unix::ffi::OsStrExt as _;
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("ok.txt"), "").unwrap();
        let name = std::ffi::OsStr::from_bytes(b"caf\xe9.txt");
        if fs::write(dir.path().join(name), "").is_err() {
            // Some file systems refuse such names; nothing to test there.
            return;
        }
        let workspace = Workspace::open(dir.path()).unwrap();
        let mut seen = Vec::new();
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let summary = walk(&workspace, &RelPath::root(), &options, &cx(), |found| {
            seen.push(found.rel.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(seen, ["ok.txt"]);
        assert_eq!(summary.unnamed, 1);
    }

    #[test]
    fn a_cancelled_walk_stops() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a"), "").unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let cancelled = ExecContext::new(Duration::from_secs(60), Cancel::given());
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let error = walk(&workspace, &RelPath::root(), &options, &cancelled, |_| {
            ControlFlow::Continue(())
        })
        .unwrap_err();
        assert_eq!(error.code, "cancelled");
    }

    /// What ripgrep's walker (the `ignore` crate's, set up as toolgate's walk was before it had
    /// its own) yields below `start`, as workspace paths, leaving out what `sensitivity` hides.
    fn ripgreps_walk(
        root: &Path,
        start: &str,
        depth: Option<usize>,
        overrides: Option<&Override>,
    ) -> Vec<String> {
        let sensitivity = Sensitivity::default();
        let start_path = if start == "." {
            root.to_path_buf()
        } else {
            root.join(start)
        };
        let walker = |from: &Path, max_depth: Option<usize>, only: Option<PathBuf>| {
            let mut builder = ignore::WalkBuilder::new(from);
            builder
                .standard_filters(true)
                .hidden(false)
                .parents(false)
                .git_global(false)
                .require_git(false)
                .follow_links(false)
                .max_depth(max_depth)
                .sort_by_file_name(|a, b| a.cmp(b));
            if let Some(overrides) = overrides {
                builder.overrides(overrides.clone());
            }
            let root = root.to_path_buf();
            let sensitivity = sensitivity.clone();
            builder.filter_entry(move |entry| {
                let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
                only.as_ref().is_none_or(|only| {
                    only.starts_with(entry.path()) || entry.path().starts_with(only)
                }) && !(is_dir && hidden(&root, &sensitivity, entry.path()))
            });
            builder.build().filter_map(Result::ok)
        };
        let shown = |path: &Path| {
            let rel = relative(root, path)?;
            (sensitivity.visibility(rel.as_str()) != Visibility::Hidden).then(|| rel.to_string())
        };
        let depth_from_root = depth.map(|d| d + start.split('/').filter(|c| *c != ".").count());
        let mut seen = Vec::new();
        let mut reached = false;
        for entry in walker(
            root,
            depth_from_root,
            (start != ".").then(|| start_path.clone()),
        ) {
            match under(entry.path(), &start_path) {
                Some(b"") => reached = true,
                Some(_) => seen.extend(shown(entry.path())),
                None => {}
            }
        }
        if !reached {
            for entry in walker(&start_path, depth, None).filter(|e| e.depth() > 0) {
                seen.extend(shown(entry.path()));
            }
        }
        seen
    }

    /// A small generator of numbers, the same in every run.
    struct Numbers(u64);

    impl Numbers {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            usize::try_from(self.0 >> 33).unwrap() % n
        }
    }

    #[test]
    fn the_walk_ignores_what_ripgreps_walker_does() {
        const NAMES: &[&str] = &[
            "a",
            "b",
            "src",
            "target",
            "build",
            "x.log",
            "keep.log",
            "gen.rs",
            "lib.rs",
            "notes.md",
            "a b",
            "é.txt",
            "Cargo.toml",
            "node_modules",
            "x.tmp",
            ".hidden",
            ".env",
            "local.txt",
            "vendor",
            "deep",
        ];
        const LINES: &[&str] = &[
            "target/",
            "*.log",
            "!keep.log",
            "/build",
            "**/*.tmp",
            "gen.rs",
            "!*.log",
            "/a",
            "b/",
            "vendor",
            "!vendor/",
            "# a comment",
            "",
            "deep/**",
            "*.md",
            "!notes.md",
            "src/*.rs",
            "\\!x",
            "a b",
            "*.txt ",
            "é.txt",
            "node_modules/",
            "!/a",
            "**/src",
            "[ab]",
            "*",
            "!*/",
            ".hidden",
            "\u{feff}*.toml",
            "lib.rs\r",
        ];
        let mut numbers = Numbers(0x70_01_9a_7e);
        let mut compared = 0;
        for _ in 0..120 {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().canonicalize().unwrap();
            let mut dirs = vec![root.clone()];
            for _ in 0..24 {
                let parent = dirs[numbers.below(dirs.len())].clone();
                if parent.components().count() > root.components().count() + 3 {
                    continue;
                }
                let path = parent.join(NAMES[numbers.below(NAMES.len())]);
                if path.exists() {
                    continue;
                }
                if numbers.below(3) == 0 {
                    fs::write(&path, "x\n").unwrap();
                } else {
                    fs::create_dir(&path).unwrap();
                    dirs.push(path);
                }
            }
            for _ in 0..3 {
                let at = dirs[numbers.below(dirs.len())].clone();
                let file = match numbers.below(4) {
                    0 => at.join(".ignore"),
                    1 => {
                        fs::create_dir_all(at.join(".git/info")).unwrap();
                        at.join(".git/info/exclude")
                    }
                    _ => at.join(".gitignore"),
                };
                let lines: Vec<&str> = (0..1 + numbers.below(4))
                    .map(|_| LINES[numbers.below(LINES.len())])
                    .collect();
                fs::write(file, lines.join("\n")).unwrap();
            }
            let workspace = Workspace::open(&root).unwrap();
            let mut globs = OverrideBuilder::new(&root);
            let overrides = match numbers.below(4) {
                0 => {
                    globs.add("*.rs").unwrap();
                    globs.add("!a").unwrap();
                    Some(globs.build().unwrap())
                }
                _ => None,
            };
            for start in dirs.iter().take(3) {
                let start = relative(&root, start).unwrap();
                for depth in [None, Some(1), Some(2)] {
                    let options = WalkOptions {
                        depth,
                        overrides: overrides.clone(),
                    };
                    let mut ours = Vec::new();
                    walk(&workspace, &start, &options, &cx(), |found| {
                        ours.push(found.rel.to_string());
                        ControlFlow::Continue(())
                    })
                    .unwrap();
                    let theirs = ripgreps_walk(&root, start.as_str(), depth, overrides.as_ref());
                    assert_eq!(ours, theirs, "from {start} to depth {depth:?} in {root:?}");
                    compared += 1;
                }
            }
        }
        assert!(compared > 300, "{compared}");
    }

    #[test]
    fn ignore_files_are_read_as_git_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for name in ["a.log", "b.log", "c.tmp", "keep.txt"] {
            fs::write(root.join(name), "").unwrap();
        }
        let workspace = Workspace::open(root).unwrap();
        let walked = |workspace: &Workspace| {
            let mut seen = Vec::new();
            let options = WalkOptions {
                depth: None,
                overrides: None,
            };
            let summary = walk(workspace, &RelPath::root(), &options, &cx(), |found| {
                seen.push(found.rel.to_string());
                ControlFlow::Continue(())
            })
            .unwrap();
            (seen, summary.unreadable)
        };
        // A link is not followed, as git does not: not even to a file that says something.
        fs::write(root.join("rules"), "*.log\n").unwrap();
        std::os::unix::fs::symlink("rules", root.join(".gitignore")).unwrap();
        let (seen, unreadable) = walked(&workspace);
        assert!(seen.contains(&"a.log".to_owned()), "{seen:?}");
        assert_eq!(unreadable, 0);
        // Nor to one that never ends.
        fs::remove_file(root.join(".gitignore")).unwrap();
        std::os::unix::fs::symlink("/dev/zero", root.join(".gitignore")).unwrap();
        let (seen, _) = walked(&workspace);
        assert!(seen.contains(&"a.log".to_owned()), "{seen:?}");
        // A FIFO is passed over, not waited on for a writer.
        fs::remove_file(root.join(".gitignore")).unwrap();
        let made = std::process::Command::new("mkfifo")
            .arg(root.join(".ignore"))
            .status();
        if made.is_ok_and(|status| status.success()) {
            let (seen, _) = walked(&workspace);
            assert!(seen.contains(&"a.log".to_owned()), "{seen:?}");
            fs::remove_file(root.join(".ignore")).unwrap();
        }
        // One larger than the bound is not applied, and counted.
        let mut big = "*.log\n".to_owned();
        big.push_str(&"#".repeat(usize::try_from(MAX_IGNORE_BYTES).unwrap()));
        fs::write(root.join(".gitignore"), big).unwrap();
        let (seen, unreadable) = walked(&workspace);
        assert!(seen.contains(&"a.log".to_owned()), "{seen:?}");
        assert_eq!(unreadable, 1);
        // A regular one applies.
        fs::write(root.join(".gitignore"), "*.log\r\n!b.log\n").unwrap();
        let (seen, unreadable) = walked(&workspace);
        assert_eq!(seen, [".gitignore", "b.log", "c.tmp", "keep.txt", "rules"]);
        assert_eq!(unreadable, 0);
    }

    /// The bound is on the ignore files along one path, which the walk holds at once: a
    /// directory's file that would take the path past it is not applied, while a sibling's
    /// that fits is; and so it is in every stretch.
    #[test]
    fn the_ignore_files_along_a_path_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let padded = |rules: &str, kib: usize| {
            let mut text = rules.to_owned();
            text.push_str(&"#".repeat(kib << 10));
            text
        };
        fs::write(root.join(".gitignore"), padded("*.tmp\n", 100)).unwrap();
        for (sub, kib) in [("big", 40), ("fits", 20), ("plain", 0)] {
            fs::create_dir(root.join(sub)).unwrap();
            fs::write(root.join(sub).join(".gitignore"), padded("*.log\n", kib)).unwrap();
            for file in ["a.log", "a.tmp", "a.txt"] {
                fs::write(root.join(sub).join(file), "").unwrap();
            }
        }
        let workspace = Workspace::open(root).unwrap();
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let mut seen = Vec::new();
        let summary = walk(&workspace, &RelPath::root(), &options, &cx(), |found| {
            seen.push(found.rel.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
        assert_eq!(
            seen,
            [
                ".gitignore",
                "big",
                "big/.gitignore",
                "big/a.log",
                "big/a.txt",
                "fits",
                "fits/.gitignore",
                "fits/a.txt",
                "plain",
                "plain/.gitignore",
                "plain/a.txt",
            ]
        );
        assert_eq!(summary.unreadable, 1);
        let (whole, stretched) = walked_in_stretches(&workspace, ".", 3);
        assert_eq!(whole, stretched);
    }
}
