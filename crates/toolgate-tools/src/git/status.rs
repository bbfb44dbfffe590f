//! `git_status`: where HEAD is and every path that differs from it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::Repository;
use gix::bstr::{BString, ByteSlice};
use gix::status::index_worktree;
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use serde_json::{Map, Value, json};
use toolgate_core::ToolError;
use toolgate_workspace::Workspace;

use super::diff::same_kind;
use super::repository::{git_error, text};

/// Where HEAD is.
#[derive(Debug)]
pub(super) struct HeadState {
    pub(super) branch: Option<String>,
    pub(super) commit: Option<String>,
    pub(super) detached: bool,
}

pub(super) fn head_state(repo: &Repository, workspace: &Workspace) -> Result<HeadState, ToolError> {
    let head = repo
        .head()
        .map_err(|e| git_error(workspace, "reading HEAD", &e))?;
    Ok(HeadState {
        branch: head
            .referent_name()
            .map(|name| name.shorten().to_str_lossy().into_owned()),
        commit: head.id().map(|id| id.to_string()),
        detached: head.is_detached(),
    })
}

/// One path in `git_status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StatusEntry {
    path: String,
    old_path: Option<String>,
    index: &'static str,
    worktree: &'static str,
}

impl StatusEntry {
    pub(super) fn to_json(&self) -> Value {
        let mut item = Map::new();
        item.insert("path".to_owned(), json!(self.path));
        if let Some(old_path) = &self.old_path {
            item.insert("old_path".to_owned(), json!(old_path));
        }
        item.insert("index_status".to_owned(), json!(self.index));
        item.insert("worktree_status".to_owned(), json!(self.worktree));
        Value::Object(item)
    }
}

pub(super) const UNMODIFIED: &str = "unmodified";

/// Every changed path outside `pathspecs`' exclusions, keyed (and so sorted) by path.
pub(super) fn status_entries(
    repo: &Repository,
    pathspecs: Vec<BString>,
    interrupt: Arc<AtomicBool>,
) -> Result<BTreeMap<String, StatusEntry>, gix::Error> {
    let iter = repo
        .status(gix::progress::Discard)?
        .should_interrupt_owned(Arc::clone(&interrupt))
        .index_worktree_submodules(None)
        .untracked_files(gix::status::UntrackedFiles::Collapsed)
        .dirwalk_options(|options| {
            options
                .emit_ignored(None)
                .emit_tracked(false)
                .emit_pruned(false)
                .emit_empty_directories(false)
        })
        .into_iter(pathspecs)?;
    let mut entries: BTreeMap<String, StatusEntry> = BTreeMap::new();
    for item in iter {
        if interrupt.load(Ordering::Acquire) {
            break;
        }
        match item? {
            gix::status::Item::TreeIndex(change) => {
                let (path, old_path, status) = staged_status(&change);
                let entry = slot(&mut entries, path);
                entry.index = status;
                entry.old_path = old_path;
            }
            gix::status::Item::IndexWorktree(item) => {
                if let Some((path, index, worktree)) = worktree_status(&item) {
                    let entry = slot(&mut entries, path);
                    if let Some(index) = index {
                        entry.index = index;
                    }
                    entry.worktree = worktree;
                }
            }
        }
    }
    Ok(entries)
}

/// The entry for `path`, unmodified until told otherwise.
pub(super) fn slot(entries: &mut BTreeMap<String, StatusEntry>, path: String) -> &mut StatusEntry {
    entries.entry(path.clone()).or_insert(StatusEntry {
        path,
        old_path: None,
        index: UNMODIFIED,
        worktree: UNMODIFIED,
    })
}

/// `entries` without the paths `hidden` names: a rename or copy out of a hidden path is an
/// addition, and a rename into one is the deletion of its source.
pub(super) fn withhold_entries(
    entries: BTreeMap<String, StatusEntry>,
    hidden: impl Fn(&str) -> bool,
) -> BTreeMap<String, StatusEntry> {
    let mut shown: BTreeMap<String, StatusEntry> = BTreeMap::new();
    for (path, mut entry) in entries {
        let source_hidden = entry.old_path.as_deref().is_some_and(&hidden);
        if hidden(&path) {
            if let Some(source) = entry
                .old_path
                .filter(|_| !source_hidden && entry.index == "renamed")
            {
                slot(&mut shown, source).index = "deleted";
            }
            continue;
        }
        if source_hidden {
            entry.old_path = None;
            entry.index = "added";
        }
        // A source's deletion may have been recorded already; what git said of the path
        // itself comes on top.
        let merged = slot(&mut shown, path);
        if entry.index != UNMODIFIED {
            merged.index = entry.index;
        }
        if entry.worktree != UNMODIFIED {
            merged.worktree = entry.worktree;
        }
        merged.old_path = entry.old_path;
    }
    shown
}

/// A staged change as (path, old path, index status).
pub(super) fn staged_status(
    change: &gix::diff::index::Change,
) -> (String, Option<String>, &'static str) {
    use gix::diff::index::ChangeRef;
    match change {
        ChangeRef::Addition { location, .. } => (text(location), None, "added"),
        ChangeRef::Deletion { location, .. } => (text(location), None, "deleted"),
        ChangeRef::Modification {
            location,
            previous_entry_mode,
            entry_mode,
            ..
        } => {
            let status = if same_kind(*previous_entry_mode, *entry_mode) {
                "modified"
            } else {
                "type_changed"
            };
            (text(location), None, status)
        }
        ChangeRef::Rewrite {
            source_location,
            location,
            copy,
            ..
        } => (
            text(location),
            Some(text(source_location)),
            if *copy { "copied" } else { "renamed" },
        ),
    }
}

/// An unstaged change as (path, index status if it sets one, worktree status); `None` for
/// what `git status` does not show.
pub(super) fn worktree_status(
    item: &index_worktree::Item,
) -> Option<(String, Option<&'static str>, &'static str)> {
    match item {
        index_worktree::Item::Modification {
            rela_path, status, ..
        } => {
            let path = text(rela_path.as_ref());
            match status {
                EntryStatus::Conflict { .. } => Some((path, Some("conflicted"), "conflicted")),
                EntryStatus::Change(Change::Removed) => Some((path, None, "deleted")),
                EntryStatus::Change(Change::Type { .. }) => Some((path, None, "type_changed")),
                EntryStatus::Change(Change::Modification { .. })
                | EntryStatus::Change(Change::SubmoduleModification(_)) => {
                    Some((path, None, "modified"))
                }
                EntryStatus::IntentToAdd => Some((path, None, "added")),
                EntryStatus::NeedsUpdate(_) => None,
            }
        }
        index_worktree::Item::DirectoryContents { entry, .. } => {
            if entry.status != gix::dir::entry::Status::Untracked {
                return None;
            }
            let mut path = text(entry.rela_path.as_ref());
            if matches!(
                entry.disk_kind,
                Some(gix::dir::entry::Kind::Directory | gix::dir::entry::Kind::Repository)
            ) {
                path.push('/');
            }
            Some((path, Some("untracked"), "untracked"))
        }
        // Rename tracking between the index and the worktree is off, as in `git status`.
        index_worktree::Item::Rewrite { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, old_path: Option<&str>, index: &'static str) -> (String, StatusEntry) {
        let entry = StatusEntry {
            path: path.to_owned(),
            old_path: old_path.map(str::to_owned),
            index,
            worktree: UNMODIFIED,
        };
        (path.to_owned(), entry)
    }

    #[test]
    fn hidden_status_entries_are_withheld_and_renames_across_the_line_rewritten() {
        let hidden = |path: &str| path.starts_with("state/");
        let entries = BTreeMap::from([
            entry("a.txt", None, "modified"),
            entry("state/", None, "untracked"),
            entry("state/grants.json", None, "modified"),
            // Out of the hidden directory: an addition; into it: its source is gone.
            entry("b.txt", Some("state/b.txt"), "renamed"),
            entry("state/c.txt", Some("c.txt"), "renamed"),
            entry("d.txt", Some("state/d.txt"), "copied"),
            entry("state/e.txt", Some("e.txt"), "copied"),
        ]);
        let shown = withhold_entries(entries, hidden);
        assert_eq!(
            shown.into_values().collect::<Vec<_>>(),
            [
                entry("a.txt", None, "modified").1,
                entry("b.txt", None, "added").1,
                entry("c.txt", None, "deleted").1,
                entry("d.txt", None, "added").1,
            ]
        );
    }
}
