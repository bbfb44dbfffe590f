//! `git_diff`: what changed, as pairs of sides, before anything is read.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::bstr::BString;
use gix::index::entry::Mode;
use gix::status::index_worktree;
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use gix::status::tree_index::TrackRenames;
use gix::{ObjectId, Repository};
use toolgate_workspace::RelPath;

use super::repository::text;

/// One side of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Side {
    /// The file does not exist on this side.
    Absent,
    /// A blob (or, for a submodule, a commit) in the object database.
    Object { id: ObjectId, mode: Mode },
    /// The file in the working tree, of this kind.
    Worktree { mode: Mode },
}

impl Side {
    pub(super) fn mode(&self) -> Option<Mode> {
        match self {
            Side::Absent => None,
            Side::Object { mode, .. } | Side::Worktree { mode } => Some(*mode),
        }
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileChange {
    pub(super) path: String,
    /// The source of a rename or copy.
    pub(super) old_path: Option<String>,
    pub(super) status: &'static str,
    pub(super) old: Side,
    pub(super) new: Side,
}

/// The index against HEAD, with renames detected as `git status` does.
pub(super) fn staged_changes(
    repo: &Repository,
    interrupt: Arc<AtomicBool>,
) -> Result<Vec<FileChange>, gix::Error> {
    use gix::diff::index::ChangeRef;
    let index = repo.index_or_empty()?;
    let tree = repo.head_tree_id_or_empty()?;
    let mut changes = Vec::new();
    repo.tree_index_status(
        &tree,
        &index,
        None,
        TrackRenames::AsConfigured,
        |change, _, _| {
            let object = |id: &gix::oid, mode: Mode| Side::Object {
                id: id.to_owned(),
                mode,
            };
            changes.push(match change {
                ChangeRef::Addition {
                    location,
                    entry_mode,
                    id,
                    ..
                } => FileChange {
                    path: text(&location),
                    old_path: None,
                    status: "added",
                    old: Side::Absent,
                    new: object(&id, entry_mode),
                },
                ChangeRef::Deletion {
                    location,
                    entry_mode,
                    id,
                    ..
                } => FileChange {
                    path: text(&location),
                    old_path: None,
                    status: "deleted",
                    old: object(&id, entry_mode),
                    new: Side::Absent,
                },
                ChangeRef::Modification {
                    location,
                    previous_entry_mode,
                    previous_id,
                    entry_mode,
                    id,
                    ..
                } => FileChange {
                    path: text(&location),
                    old_path: None,
                    status: if same_kind(previous_entry_mode, entry_mode) {
                        "modified"
                    } else {
                        "type_changed"
                    },
                    old: object(&previous_id, previous_entry_mode),
                    new: object(&id, entry_mode),
                },
                ChangeRef::Rewrite {
                    source_location,
                    source_entry_mode,
                    source_id,
                    location,
                    entry_mode,
                    id,
                    copy,
                    ..
                } => FileChange {
                    path: text(&location),
                    old_path: Some(text(&source_location)),
                    status: if copy { "copied" } else { "renamed" },
                    old: object(&source_id, source_entry_mode),
                    new: object(&id, entry_mode),
                },
            });
            Ok(if interrupt.load(Ordering::Acquire) {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            })
        },
    )?;
    Ok(changes)
}

/// The working tree against the index, outside `pathspecs`' exclusions. Untracked files are
/// not part of a diff.
pub(super) fn unstaged_changes(
    repo: &Repository,
    pathspecs: Vec<BString>,
    interrupt: Arc<AtomicBool>,
) -> Result<Vec<FileChange>, gix::Error> {
    let iter = repo
        .status(gix::progress::Discard)?
        .should_interrupt_owned(Arc::clone(&interrupt))
        .index_worktree_submodules(None)
        .untracked_files(gix::status::UntrackedFiles::None)
        .into_index_worktree_iter(pathspecs)?;
    let mut changes = Vec::new();
    for item in iter {
        if interrupt.load(Ordering::Acquire) {
            break;
        }
        let index_worktree::Item::Modification {
            entry,
            rela_path,
            status,
            ..
        } = item?
        else {
            continue;
        };
        let path = text(rela_path.as_ref());
        let indexed = Side::Object {
            id: entry.id,
            mode: entry.mode,
        };
        let (status, old, new) = match status {
            EntryStatus::Conflict { .. } => ("unmerged", Side::Absent, Side::Absent),
            EntryStatus::Change(Change::Removed) => ("deleted", indexed, Side::Absent),
            EntryStatus::Change(Change::Type { worktree_mode }) => (
                "type_changed",
                indexed,
                Side::Worktree {
                    mode: worktree_mode,
                },
            ),
            EntryStatus::Change(Change::Modification {
                executable_bit_changed,
                content_change,
                ..
            }) => {
                let mode = if executable_bit_changed {
                    flip_executable(entry.mode)
                } else {
                    entry.mode
                };
                // Only the mode changed: the content is the index's, no need to read the file.
                let new = if content_change.is_some() {
                    Side::Worktree { mode }
                } else {
                    Side::Object { id: entry.id, mode }
                };
                ("modified", indexed, new)
            }
            EntryStatus::IntentToAdd => {
                ("added", Side::Absent, Side::Worktree { mode: entry.mode })
            }
            EntryStatus::Change(Change::SubmoduleModification(_)) | EntryStatus::NeedsUpdate(_) => {
                continue;
            }
        };
        changes.push(FileChange {
            path,
            old_path: None,
            status,
            old,
            new,
        });
    }
    Ok(changes)
}

pub(super) fn flip_executable(mode: Mode) -> Mode {
    if mode == Mode::FILE {
        Mode::FILE_EXECUTABLE
    } else if mode == Mode::FILE_EXECUTABLE {
        Mode::FILE
    } else {
        mode
    }
}

/// Whether two modes name the same kind of thing (a file, executable or not; a link; a
/// submodule).
pub(super) fn same_kind(a: Mode, b: Mode) -> bool {
    let kind = |mode: Mode| {
        if mode == Mode::FILE_EXECUTABLE {
            Mode::FILE
        } else {
            mode
        }
    };
    kind(a) == kind(b)
}

/// Whether `path` is `scope` or below it.
pub(super) fn in_scope(path: &str, scope: &RelPath) -> bool {
    if scope.is_root() {
        return true;
    }
    let scope = scope.as_str();
    path.strip_prefix(scope)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// `change` as it may be shown when `hidden` names some of its paths (see
/// [`withhold_entries`]); `None` when nothing of it may.
pub(super) fn withhold_change(
    mut change: FileChange,
    hidden: impl Fn(&str) -> bool,
) -> Option<FileChange> {
    let source_hidden = change.old_path.as_deref().is_some_and(&hidden);
    if hidden(&change.path) {
        let source = change
            .old_path
            .filter(|_| !source_hidden && change.status == "renamed")?;
        return Some(FileChange {
            path: source,
            old_path: None,
            status: "deleted",
            old: change.old,
            new: Side::Absent,
        });
    }
    if source_hidden {
        change.old_path = None;
        change.status = "added";
        change.old = Side::Absent;
    }
    Some(change)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scope_matches_whole_components() {
        let src = RelPath::parse("src").unwrap();
        assert!(in_scope("src", &src));
        assert!(in_scope("src/lib.rs", &src));
        assert!(!in_scope("srcs/lib.rs", &src));
        assert!(!in_scope("lib.rs", &src));
        assert!(in_scope("anything", &RelPath::root()));
    }

    #[test]
    fn hidden_changes_are_withheld_and_renames_across_the_line_rewritten() {
        let hidden = |path: &str| path.starts_with("state/");
        let blob = |n: u8| Side::Object {
            id: ObjectId::from_bytes_or_panic(&[n; 20]),
            mode: Mode::FILE,
        };
        let change = |path: &str, old_path: Option<&str>, status: &'static str| FileChange {
            path: path.to_owned(),
            old_path: old_path.map(str::to_owned),
            status,
            old: blob(1),
            new: blob(2),
        };
        let table = [
            (
                change("a.txt", None, "modified"),
                Some(change("a.txt", None, "modified")),
            ),
            (change("state/x", None, "modified"), None),
            (change("state/x", Some("state/y"), "renamed"), None),
            (
                change("b.txt", Some("state/b.txt"), "renamed"),
                Some(FileChange {
                    old: Side::Absent,
                    ..change("b.txt", None, "added")
                }),
            ),
            (
                change("state/c.txt", Some("c.txt"), "renamed"),
                Some(FileChange {
                    new: Side::Absent,
                    ..change("c.txt", None, "deleted")
                }),
            ),
            (change("state/e.txt", Some("e.txt"), "copied"), None),
        ];
        for (given, expected) in table {
            let shown = withhold_change(given.clone(), hidden);
            assert_eq!(shown, expected, "{given:?}");
        }
    }

    #[test]
    fn kinds_of_modes() {
        assert!(same_kind(Mode::FILE, Mode::FILE_EXECUTABLE));
        assert!(!same_kind(Mode::FILE, Mode::SYMLINK));
        assert_eq!(flip_executable(Mode::FILE), Mode::FILE_EXECUTABLE);
        assert_eq!(flip_executable(Mode::SYMLINK), Mode::SYMLINK);
    }
}
