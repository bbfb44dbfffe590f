//! A `.gitignore`-aware walk of one directory of the workspace, in path order.
//!
//! The walk starts at the workspace root and prunes everything that is neither an ancestor of
//! the requested directory nor inside it. Starting at the root (rather than at the directory)
//! means the ignore files between the root and the directory apply, while no ignore file above
//! the root does (`parents(false)`), nor the user's global one: what is listed depends on the
//! workspace alone.
//!
//! A directory that is itself ignored (`target/`) is never reached that way. A caller who names
//! it explicitly still gets its contents, as ripgrep searches an ignored directory it is given:
//! a second walk then starts at the directory itself.
//!
//! The walk uses ambient paths under the canonical root. That is sound because the starting
//! directory was resolved inside the workspace, links are reported and never followed, and
//! every entry is made relative to the root (anything that is not is dropped). File *contents*
//! are still opened through the workspace's capability by the callers.

use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};

use ignore::overrides::Override;
use ignore::{DirEntry, WalkBuilder};
use toolgate_core::{ExecContext, ToolError};
use toolgate_workspace::{RelPath, Workspace};

use crate::stopped;

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
    /// Entries the walker could not read (permissions, races).
    pub unreadable: usize,
    /// Entries whose names are not UTF-8, which no caller could name anyway.
    pub unnamed: usize,
}

/// Visits every entry strictly below `start` (a directory inside the workspace), in path order,
/// until `visit` breaks. Stops with the `timeout`/`cancelled` error when `cx` says so.
pub(crate) fn walk(
    workspace: &Workspace,
    start: &RelPath,
    options: &WalkOptions,
    cx: &ExecContext,
    mut visit: impl FnMut(&DirEntry, RelPath) -> ControlFlow<()>,
) -> Result<WalkSummary, ToolError> {
    let root = workspace.root();
    let start_path = workspace.ambient_path(start);
    let mut summary = WalkSummary::default();

    let from_root = builder(
        root,
        options.depth.map(|d| d.saturating_add(start.depth())),
        options.overrides.clone(),
        (!start.is_root()).then(|| start_path.clone()),
    );
    let mut reached_start = false;
    for result in from_root.build() {
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let Ok(entry) = result else {
            summary.unreadable += 1;
            continue;
        };
        if entry.path() == start_path {
            reached_start = true;
            continue;
        }
        if !entry.path().starts_with(&start_path) {
            // An ancestor of the start, walked only to get there.
            continue;
        }
        if visit_entry(workspace, &entry, &mut summary, &mut visit).is_break() {
            return Ok(summary);
        }
    }
    if reached_start {
        return Ok(summary);
    }

    // The start is ignored (or inside something ignored); walk it on its own.
    let from_start = builder(&start_path, options.depth, options.overrides.clone(), None);
    for result in from_start.build() {
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let Ok(entry) = result else {
            summary.unreadable += 1;
            continue;
        };
        if entry.depth() == 0 {
            continue;
        }
        if visit_entry(workspace, &entry, &mut summary, &mut visit).is_break() {
            break;
        }
    }
    Ok(summary)
}

fn visit_entry(
    workspace: &Workspace,
    entry: &DirEntry,
    summary: &mut WalkSummary,
    visit: &mut impl FnMut(&DirEntry, RelPath) -> ControlFlow<()>,
) -> ControlFlow<()> {
    match relative(workspace.root(), entry.path()) {
        Some(rel) => visit(entry, rel),
        None => {
            summary.unnamed += 1;
            ControlFlow::Continue(())
        }
    }
}

/// The workspace path of an entry the walker found under `root`; `None` for anything not
/// under it (which a walk that follows no links never yields) or not named in UTF-8.
fn relative(root: &Path, path: &Path) -> Option<RelPath> {
    let names = path
        .strip_prefix(root)
        .ok()?
        .components()
        .map(|component| match component {
            Component::Normal(name) => name.to_str(),
            _ => None,
        })
        .collect::<Option<Vec<&str>>>()?;
    RelPath::from_components(names)
}

/// A walker from `from`, sorted by name, `.gitignore`-aware, showing hidden files but never
/// `.git`, not following links; pruned to the ancestors and descendants of `only`.
fn builder(
    from: &Path,
    max_depth: Option<usize>,
    overrides: Option<Override>,
    only: Option<PathBuf>,
) -> WalkBuilder {
    let mut builder = WalkBuilder::new(from);
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
        builder.overrides(overrides);
    }
    builder.filter_entry(move |entry| {
        entry.file_name() != ".git"
            && only
                .as_ref()
                .is_none_or(|only| only.starts_with(entry.path()) || entry.path().starts_with(only))
    });
    builder
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    fn cx() -> ExecContext {
        ExecContext::new(Duration::from_secs(60), Arc::new(AtomicBool::new(false)))
    }

    fn paths(workspace: &Workspace, start: &str, depth: Option<usize>) -> Vec<String> {
        let start = workspace.check_path(start).unwrap();
        let mut seen = Vec::new();
        let options = WalkOptions {
            depth,
            overrides: None,
        };
        walk(workspace, &start, &options, &cx(), |_, rel| {
            seen.push(rel.to_string());
            ControlFlow::Continue(())
        })
        .unwrap();
        seen
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
        let summary = walk(&workspace, &RelPath::root(), &options, &cx(), |_, rel| {
            seen.push(rel.to_string());
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
        let cancelled = ExecContext::new(Duration::from_secs(60), Arc::new(AtomicBool::new(true)));
        let options = WalkOptions {
            depth: None,
            overrides: None,
        };
        let error = walk(
            &workspace,
            &RelPath::root(),
            &options,
            &cancelled,
            |_, _| ControlFlow::Continue(()),
        )
        .unwrap_err();
        assert_eq!(error.code, "cancelled");
    }
}
