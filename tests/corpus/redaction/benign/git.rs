//! `git_status` and `git_diff`: the workspace root's own git repository, read in process with
//! gix. No `git` process is ever started.
//!
//! What gix may touch, and why that keeps the tools read-only and inside the workspace:
//!
//! - Only the repository whose `.git` *directory* sits at the workspace root is opened. A
//!   `.git` file (a linked worktree, a submodule) or link points elsewhere and is refused
//!   rather than followed out of the workspace; so is a repository whose working tree is not
//!   the workspace root.
//! - Configuration is read in isolation: the repository's own file only, no global or system
//!   file, no environment. And no configuration section is trusted to name a program, so no
//!   filter driver, diff driver or helper can run.
//! - gix reads the index and the object database under `.git` by path, and, to decide whether
//!   a tracked file changed, it stats and hashes worktree files itself (refusing any path that
//!   goes through a symbolic link). Only names and hashes come out of that.
//! - Everything `git_diff` *shows* from the worktree is read through [`Workspace`]: file
//!   contents with [`Workspace::read_file`], a tracked link as its link text, never followed.
//! - What either tool shows is what the pipeline's sensitivity lets it show, as for the
//!   walkers ([`Sensitivity::visibility`]): nothing in a sensitive directory (`.ssh`,
//!   toolgate's state directory) is listed, counted or diffed — a rename out of one is an
//!   addition, a rename into one the deletion of its source — and a sensitive file is listed
//!   with the rule that hides it, never read. A link counts as where it leads, and so does a
//!   tracked link's text.
//! - Neither tool writes: the index gix would refresh (stat information) is left as it is.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::Mode;
use gix::status::index_worktree;
use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
use gix::status::tree_index::TrackRenames;
use gix::{ObjectId, Repository};
use serde_json::{Map, Value, json};
use similar::{Algorithm, ChangeTag, TextDiff};
use toolgate_core::sensitive::Visibility;
use toolgate_core::{
    Authorized, Classification, Descriptor, ExecContext, Executor, FieldError, Sensitivity,
    ToolError, ToolOutput,
};
use toolgate_workspace::{PathError, PathKind, RelPath, Workspace};

use crate::{
    Builtin, ENVELOPE_BYTES, bool_argument, json_len, path_argument, read_only_entry, stopped, walk,
};

pub(crate) const STATUS_NAME: &str = "git_status";
pub(crate) const DIFF_NAME: &str = "git_diff";

/// Largest blob or file `git_diff` reads to compare; larger ones are listed as `too_large`.
pub const MAX_DIFF_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Git's own test for binary content: a NUL byte in the first 8000 bytes.
const BINARY_PROBE_BYTES: usize = 8000;

/// Lines of context around each change, as `git diff`.
const CONTEXT_LINES: usize = 3;

const STATUS_DESCRIPTION: &str = "Show the state of the workspace's git repository, like `git \
status`: the current branch and every path that differs from it. Read-only: it changes no \
file and not the index, and runs no git command. `branch` is the checked-out branch (null when \
HEAD is detached), `commit` the commit HEAD points to (null before the first commit). Each of \
`entries` has a workspace-relative `path`, an `index_status` (staged for the next commit: \
`added`, `modified`, `deleted`, `renamed` with the `old_path` it came from, `type_changed`, or \
`unmodified`) and a `worktree_status` (changed in the working tree but not staged: \
`modified`, `deleted`, `type_changed`, `added` for intent-to-add, or `unmodified`). Untracked \
paths have both set to `untracked`; an untracked directory is listed once, as `dir/`. Merge \
conflicts are `conflicted`. Ignored files are not listed, nor are directories that hold \
secrets or toolgate's own state (`.ssh`, `.aws`); submodules are not inspected. \
Entries are sorted by path; `entries_total` counts them all, and `truncated: true` means fewer \
were returned. `clean: true` means nothing changed and nothing is untracked. To see the changes \
themselves use `git_diff`. Only the repository whose `.git` directory is at \
the workspace root is read; without one the error is `not_a_repository`.";

const DIFF_DESCRIPTION: &str = "Show the changes in the workspace's git repository as a unified \
diff, like `git diff`. By default it compares the working tree with the index (changes not yet \
staged); with `staged: true` it compares the index with HEAD (what the next commit would \
contain). Read-only: it changes nothing and runs no git command. `path` narrows it to one file \
or directory, relative to the workspace root (`src` or `src/main.rs`). In the result, `files` \
lists every changed file with its `status` (`added`, `modified`, `deleted`, `renamed` or \
`copied` with `old_path`, `type_changed`, `unmerged`) and its `added` and `removed` line \
counts; `binary: true` files show only a \"Binary files … differ\" line, files over 8 MiB are \
marked `too_large`, and files that commonly hold secrets (`.env`, keys, …) are listed with \
`omitted` (the rule that hides them) and never shown. `diff` holds the unified diff text. \
`files_total` counts every changed file; `truncated: true` means the text was cut at a line \
boundary or fewer files were listed: call again with a `path` to see the rest. Untracked files are not diffed; `git_status` lists them.";

pub(crate) fn status_builtin(workspace: Arc<Workspace>) -> Builtin {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {},
        "required": [],
        "additionalProperties": false
    });
    let mut descriptor = Descriptor::new(STATUS_NAME, STATUS_DESCRIPTION, schema);
    descriptor.title = Some("Show the git status".to_owned());
    Builtin {
        descriptor,
        entry: read_only_entry(STATUS_NAME, "git_read", 512 * 1024),
        executor: Arc::new(GitStatus { workspace }),
    }
}

pub(crate) fn diff_builtin(workspace: Arc<Workspace>) -> Builtin {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "maxLength": 4096,
                "description": "A file or directory to limit the diff to, relative to the workspace root (`src/main.rs`, `src`). Default: the whole repository."
            },
            "staged": {
                "type": "boolean",
                "description": "`true` to diff the index against HEAD (staged changes) instead of the working tree against the index. Default false."
            }
        },
        "required": [],
        "additionalProperties": false
    });
    let mut descriptor = Descriptor::new(DIFF_NAME, DIFF_DESCRIPTION, schema);
    descriptor.title = Some("Show a git diff".to_owned());
    Builtin {
        descriptor,
        // Diff text is escaped as JSON, like read_file's content; the same generous limit.
        entry: read_only_entry(DIFF_NAME, "git_read", 1024 * 1024),
        executor: Arc::new(GitDiff { workspace }),
    }
}

/// The executor for `git_status`.
#[derive(Debug)]
pub struct GitStatus {
    workspace: Arc<Workspace>,
}

/// The executor for `git_diff`.
#[derive(Debug)]
pub struct GitDiff {
    workspace: Arc<Workspace>,
}

impl Executor for GitStatus {
    fn classify(&self, arguments: &Map<String, Value>) -> Classification {
        // The whole workspace: no `path` argument means the root.
        path_argument::classify(&self.workspace, arguments, "path")
    }

    fn execute(&self, call: &Authorized, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let repo = open_repository(&self.workspace)?;
        let head = head_state(&repo, &self.workspace)?;
        let entries = with_interrupt(cx, |interrupt| {
            status_entries(&repo, hidden_pathspecs(cx.sensitivity()), interrupt)
        })
        .map_err(|e| git_error(&self.workspace, cx, &e))?;
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let entries = withhold_entries(entries, |path| {
            visibility(&self.workspace, cx.sensitivity(), path) == Visibility::Hidden
        });

        let total = entries.len();
        let max_results = call.limits().max_results;
        let budget = call
            .limits()
            .max_output_bytes
            .saturating_sub(ENVELOPE_BYTES);
        let mut used = 2usize;
        let mut listed = Vec::new();
        for entry in entries.into_values() {
            let item = entry.to_json();
            let cost = value_len(&item) + 1;
            if listed.len() == max_results || used + cost > budget {
                break;
            }
            used += cost;
            listed.push(item);
        }
        let truncated = listed.len() < total;
        let output = json!({
            "branch": head.branch,
            "commit": head.commit,
            "detached": head.detached,
            "clean": total == 0,
            "entries": listed,
            "entries_total": total,
            "truncated": truncated,
        });
        Ok(ToolOutput::new(output).truncated(truncated))
    }
}

impl Executor for GitDiff {
    fn check(&self, arguments: &Map<String, Value>) -> Vec<FieldError> {
        path_argument::check(&self.workspace, arguments, "path")
    }

    fn classify(&self, arguments: &Map<String, Value>) -> Classification {
        path_argument::classify(&self.workspace, arguments, "path")
    }

    fn execute(&self, call: &Authorized, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let arguments = call.arguments();
        let staged = bool_argument(arguments, "staged").unwrap_or(false);
        let scope = path_argument::rel(&self.workspace, arguments, "path")?;
        let repo = open_repository(&self.workspace)?;
        let changes = with_interrupt(cx, |interrupt| {
            if staged {
                staged_changes(&repo, interrupt)
            } else {
                unstaged_changes(&repo, hidden_pathspecs(cx.sensitivity()), interrupt)
            }
        })
        .map_err(|e| git_error(&self.workspace, cx, &e))?;
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let hidden =
            |path: &str| visibility(&self.workspace, cx.sensitivity(), path) == Visibility::Hidden;
        let mut changes: Vec<FileChange> = changes
            .into_iter()
            .filter_map(|change| withhold_change(change, hidden))
            .collect();
        changes.retain(|change| {
            in_scope(&change.path, &scope)
                || change
                    .old_path
                    .as_deref()
                    .is_some_and(|old| in_scope(old, &scope))
        });
        changes.sort_by(|a, b| a.path.cmp(&b.path));

        let total = changes.len();
        changes.truncate(call.limits().max_results);
        let budget = call
            .limits()
            .max_output_bytes
            .saturating_sub(ENVELOPE_BYTES);
        let reader = ContentReader {
            repo: &repo,
            workspace: &self.workspace,
            sensitivity: cx.sensitivity(),
        };
        // Every file is rendered first. Its text is kept only while it could still fit (escaped
        // JSON is never shorter than the text), so memory stays within the budget.
        let mut files = Vec::with_capacity(changes.len());
        let mut pending = String::new();
        let mut starts = Vec::with_capacity(changes.len());
        for change in &changes {
            if cx.should_stop() {
                return Err(stopped(cx));
            }
            let rendered = render(&reader, change, cx);
            starts.push(pending.len());
            if pending.len() <= budget {
                pending.push_str(&rendered.text);
            }
            files.push(rendered.summary);
        }
        // The file list comes first and may take half the budget; the text gets the rest.
        let mut list_used = 2usize;
        let mut listed = 0usize;
        for file in &files {
            let cost = value_len(file) + 1;
            if list_used + cost > budget / 2 {
                break;
            }
            list_used += cost;
            listed += 1;
        }
        files.truncate(listed);
        if let Some(end) = starts.get(listed) {
            // Text only for the files listed.
            pending.truncate(*end);
        }
        let mut text = DiffText::new(budget.saturating_sub(list_used));
        text.push(&pending);
        let truncated = listed < total || text.truncated;
        let output = json!({
            "staged": staged,
            "files": files,
            "files_total": total,
            "diff": text.text,
            "truncated": truncated,
        });
        Ok(ToolOutput::new(output).truncated(truncated))
    }
}

// ---------------------------------------------------------------------------------------------
// Opening the repository

/// The workspace root's own repository, or why there is none that may be read.
fn open_repository(workspace: &Workspace) -> Result<Repository, ToolError> {
    let dot_git = workspace
        .check_path(".git")
        .map_err(path_argument::tool_error)?;
    match workspace.resolve(&dot_git) {
        Ok(resolved) if resolved.kind == PathKind::Dir && !resolved.through_symlink => {}
        Ok(resolved) if resolved.through_symlink => {
            return Err(elsewhere("`.git` is a symbolic link"));
        }
        Ok(_) => {
            return Err(elsewhere(
                "`.git` is a file that points to a repository elsewhere (a linked worktree or a \
                 submodule)",
            ));
        }
        Err(PathError::NotFound { .. }) => return Err(not_a_repository(None)),
        Err(PathError::Outside { .. }) => return Err(elsewhere("`.git` is a symbolic link")),
        Err(other) => return Err(path_argument::tool_error(other)),
    }
    let options = gix::open::Options::isolated().filter_config_section(trust_no_section);
    let repo = gix::open_opts(workspace.root(), options)
        .map_err(|e| not_a_repository(Some(scrub(workspace, &e.to_string()))))?;
    // The repository gix opened must be this one, with this worktree: `core.worktree` or a
    // `commondir` file would lead elsewhere.
    let root = workspace.root();
    let workdir = repo.workdir().and_then(canonical);
    if workdir.as_deref() != Some(root) {
        return Err(elsewhere(
            "its working tree is not the workspace root (`core.worktree` points elsewhere)",
        ));
    }
    if canonical(repo.common_dir()) != Some(root.join(".git"))
        || canonical(repo.git_dir()) != Some(root.join(".git"))
    {
        return Err(elsewhere(
            "its `.git` directory shares data with a repository elsewhere",
        ));
    }
    Ok(repo)
}

/// No configuration section is trusted with anything gix would execute or hand to a program
/// (filter and diff drivers, credential helpers); gix then falls back to its built-in behaviour.
fn trust_no_section(_: &gix::config::file::Metadata) -> bool {
    false
}

fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

fn not_a_repository(detail: Option<String>) -> ToolError {
    let mut message = "the workspace root is not a git repository".to_owned();
    match detail {
        Some(detail) => {
            message.push_str(": ");
            message.push_str(&detail);
        }
        None => message.push_str(" (it has no `.git` directory)"),
    }
    message.push_str("; only the workspace root's own repository can be read");
    ToolError::new("not_a_repository", message)
}

fn elsewhere(reason: &str) -> ToolError {
    ToolError::new(
        "repository_outside_workspace",
        format!(
            "the workspace's git repository is not wholly inside the workspace: {reason}; only a \
             repository whose `.git` directory is at the workspace root can be read"
        ),
    )
}

/// A gix failure as the tool's error, unless the call was stopped, which is what made gix fail.
fn git_error(workspace: &Workspace, cx: &ExecContext, error: &gix::Error) -> ToolError {
    if cx.should_stop() {
        return stopped(cx);
    }
    ToolError::new(
        "git_error",
        format!(
            "cannot read the git repository: {}",
            scrub(workspace, &error.to_string())
        ),
    )
}

/// `message` without the workspace's absolute path, which the model has no use for.
fn scrub(workspace: &Workspace, message: &str) -> String {
    let root = workspace.root().to_string_lossy();
    message.replace(root.as_ref(), "<workspace>")
}

/// Runs `f` with an interrupt flag for gix that is raised as soon as `cx` says to stop: gix
/// polls a flag of its own and cannot see `cx`, so a watcher thread relays it.
fn with_interrupt<T>(cx: &ExecContext, f: impl FnOnce(Arc<AtomicBool>) -> T) -> T {
    let interrupt = Arc::new(AtomicBool::new(false));
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            while !done.load(Ordering::Acquire) {
                if cx.should_stop() {
                    interrupt.store(true, Ordering::Release);
                    return;
                }
                std::thread::park_timeout(Duration::from_millis(10));
            }
        });
        let out = f(Arc::clone(&interrupt));
        done.store(true, Ordering::Release);
        watcher.thread().unpark();
        out
    })
}

// ---------------------------------------------------------------------------------------------
// git_status

/// Where HEAD is.
#[derive(Debug)]
struct HeadState {
    branch: Option<String>,
    commit: Option<String>,
    detached: bool,
}

fn head_state(repo: &Repository, workspace: &Workspace) -> Result<HeadState, ToolError> {
    let head = repo.head().map_err(|e| {
        ToolError::new(
            "git_error",
            format!("cannot read HEAD: {}", scrub(workspace, &e.to_string())),
        )
    })?;
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
struct StatusEntry {
    path: String,
    old_path: Option<String>,
    index: &'static str,
    worktree: &'static str,
}

impl StatusEntry {
    fn to_json(&self) -> Value {
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

const UNMODIFIED: &str = "unmodified";

/// Pathspecs that keep gix out of the directories `sensitivity` hides, so that its walk of
/// the worktree prunes them as the walkers do: an untracked directory that holds nothing else
/// is then not listed either. (`.git` gix never walks.) What a pattern cannot say (a link
/// that leads into one) is withheld afterwards.
fn hidden_pathspecs(sensitivity: &Sensitivity) -> Vec<BString> {
    let anywhere = sensitivity
        .hidden_dir_names()
        .filter(|name| *name != ".git")
        .map(|name| format!(":(exclude,icase,glob)**/{name}/**"));
    let here = sensitivity
        .hidden_dir_paths()
        .filter(|path| !path.is_empty())
        .map(|path| format!(":(exclude,icase,literal){path}"));
    anywhere.chain(here).map(BString::from).collect()
}

/// Every changed path outside `pathspecs`' exclusions, keyed (and so sorted) by path.
fn status_entries(
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
fn slot(entries: &mut BTreeMap<String, StatusEntry>, path: String) -> &mut StatusEntry {
    entries.entry(path.clone()).or_insert(StatusEntry {
        path,
        old_path: None,
        index: UNMODIFIED,
        worktree: UNMODIFIED,
    })
}

/// `entries` without the paths `hidden` names: a rename or copy out of a hidden path is an
/// addition, and a rename into one is the deletion of its source.
fn withhold_entries(
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

/// `change` as it may be shown when `hidden` names some of its paths (see
/// [`withhold_entries`]); `None` when nothing of it may.
fn withhold_change(mut change: FileChange, hidden: impl Fn(&str) -> bool) -> Option<FileChange> {
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

/// What the git tools may show of a path git names (a directory as `dir/`), a link judged by
/// where it leads as well.
fn visibility(workspace: &Workspace, sensitivity: &Sensitivity, path: &str) -> Visibility {
    let path = path.trim_end_matches('/');
    match workspace.check_path(path) {
        Ok(rel) => walk::visibility(workspace, sensitivity, &rel, true),
        // A name no tool could pass back (git's bytes shown lossily) is judged as it reads.
        Err(_) => sensitivity.visibility(path),
    }
}

/// A staged change as (path, old path, index status).
fn staged_status(change: &gix::diff::index::Change) -> (String, Option<String>, &'static str) {
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
fn worktree_status(
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

// ---------------------------------------------------------------------------------------------
// git_diff: what changed

/// One side of a change.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Side {
    /// The file does not exist on this side.
    Absent,
    /// A blob (or, for a submodule, a commit) in the object database.
    Object { id: ObjectId, mode: Mode },
    /// The file in the working tree, of this kind.
    Worktree { mode: Mode },
}

impl Side {
    fn mode(&self) -> Option<Mode> {
        match self {
            Side::Absent => None,
            Side::Object { mode, .. } | Side::Worktree { mode } => Some(*mode),
        }
    }
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileChange {
    path: String,
    /// The source of a rename or copy.
    old_path: Option<String>,
    status: &'static str,
    old: Side,
    new: Side,
}

/// The index against HEAD, with renames detected as `git status` does.
fn staged_changes(
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
fn unstaged_changes(
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

fn flip_executable(mode: Mode) -> Mode {
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
fn same_kind(a: Mode, b: Mode) -> bool {
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
fn in_scope(path: &str, scope: &RelPath) -> bool {
    if scope.is_root() {
        return true;
    }
    let scope = scope.as_str();
    path.strip_prefix(scope)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

// ---------------------------------------------------------------------------------------------
// git_diff: contents and text

/// Reads each side of a change: objects from the repository, worktree files through the
/// workspace.
struct ContentReader<'a> {
    repo: &'a Repository,
    workspace: &'a Workspace,
    sensitivity: &'a Sensitivity,
}

/// Why a side could not be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Unreadable {
    TooLarge,
    Failed(String),
}

impl ContentReader<'_> {
    fn read(&self, path: &str, side: &Side) -> Result<Vec<u8>, Unreadable> {
        match side {
            Side::Absent => Ok(Vec::new()),
            // Git shows a submodule as the commit it records.
            Side::Object { id, mode } if *mode == Mode::COMMIT => {
                Ok(format!("Subproject commit {id}\n").into_bytes())
            }
            Side::Object { id, .. } => self.object(id),
            Side::Worktree { mode } if *mode == Mode::SYMLINK => self.link_text(path),
            Side::Worktree { mode } if *mode == Mode::FILE || *mode == Mode::FILE_EXECUTABLE => {
                self.worktree_file(path)
            }
            Side::Worktree { .. } => Err(Unreadable::Failed(
                "it is a directory or submodule in the working tree".to_owned(),
            )),
        }
    }

    fn object(&self, id: &ObjectId) -> Result<Vec<u8>, Unreadable> {
        let failed = |e: gix::Error| Unreadable::Failed(scrub(self.workspace, &e.to_string()));
        let header = self.repo.find_header(*id).map_err(failed)?;
        if header.size() > MAX_DIFF_FILE_BYTES {
            return Err(Unreadable::TooLarge);
        }
        let object = self.repo.find_object(*id).map_err(failed)?;
        Ok(object.detach().data)
    }

    fn worktree_file(&self, path: &str) -> Result<Vec<u8>, Unreadable> {
        let rel = self.rel(path)?;
        let (bytes, len) = self
            .workspace
            .read_file(&rel, MAX_DIFF_FILE_BYTES + 1)
            .map_err(|e| Unreadable::Failed(e.to_string()))?;
        if len > MAX_DIFF_FILE_BYTES || bytes.len() as u64 > MAX_DIFF_FILE_BYTES {
            return Err(Unreadable::TooLarge);
        }
        Ok(bytes)
    }

    /// A tracked link is diffed as its text, as git does; it is never followed. The link is
    /// read by path, so its directory must first be shown to be a real directory inside the
    /// workspace, reached without links.
    fn link_text(&self, path: &str) -> Result<Vec<u8>, Unreadable> {
        let rel = self.rel(path)?;
        let components: Vec<&str> = rel.components().collect();
        let parent = match components.split_last() {
            Some((_, [])) | None => RelPath::root(),
            Some((_, parents)) => RelPath::from_components(parents.iter().copied())
                .ok_or_else(|| Unreadable::Failed(format!("`{path}` has no parent")))?,
        };
        let resolved = self
            .workspace
            .resolve(&parent)
            .map_err(|e| Unreadable::Failed(e.to_string()))?;
        if resolved.kind != PathKind::Dir || resolved.through_symlink {
            return Err(Unreadable::Failed(format!(
                "`{parent}` is not a directory reached without symbolic links"
            )));
        }
        let target = std::fs::read_link(self.workspace.ambient_path(&rel))
            .map_err(|e| Unreadable::Failed(format!("cannot read the link `{path}`: {e}")))?;
        Ok(target.into_os_string().into_encoded_bytes())
    }

    /// The rule that keeps `path` from being shown, if one does.
    fn sensitive_rule(&self, path: &str) -> Option<&'static str> {
        match visibility(self.workspace, self.sensitivity, path) {
            Visibility::Visible => None,
            Visibility::NameOnly(kind) => Some(kind.rule),
            // Hidden paths were withheld before rendering; never shown if one were not.
            Visibility::Hidden => Some(
                self.sensitivity
                    .kind_of(path.trim_end_matches('/'))
                    .map_or("sensitive", |kind| kind.rule),
            ),
        }
    }

    /// The rule that keeps the text of a link at `path` from being shown: the text names a
    /// sensitive path, which, in a link the tree once held, no longer has to exist.
    fn link_text_rule(&self, path: &str, side: &Side, text: &[u8]) -> Option<&'static str> {
        if side.mode() != Some(Mode::SYMLINK) {
            return None;
        }
        let target = link_target(self.workspace.root(), path, text)?;
        self.sensitivity.kind_of(&target).map(|kind| kind.rule)
    }

    fn rel(&self, path: &str) -> Result<RelPath, Unreadable> {
        self.workspace
            .check_path(path)
            .map_err(|e| Unreadable::Failed(e.to_string()))
    }
}

/// One file's part of the output.
#[derive(Debug)]
struct Rendered {
    summary: Value,
    text: String,
}

/// The entry in `files` and the diff text for `change`.
fn render(reader: &ContentReader<'_>, change: &FileChange, cx: &ExecContext) -> Rendered {
    let mut summary = Map::new();
    summary.insert("path".to_owned(), json!(change.path));
    if let Some(old_path) = &change.old_path {
        summary.insert("old_path".to_owned(), json!(old_path));
    }
    summary.insert("status".to_owned(), json!(change.status));
    let done = |summary: Map<String, Value>, text: String| Rendered {
        summary: Value::Object(summary),
        text,
    };

    if change.status == "unmerged" {
        let text = format!("* Unmerged path {}\n", change.path);
        return done(summary, text);
    }
    let sensitive = reader.sensitive_rule(&change.path).or_else(|| {
        change
            .old_path
            .as_deref()
            .and_then(|old| reader.sensitive_rule(old))
    });
    if let Some(rule) = sensitive {
        // Neither side is read: not even line counts come from a file that may hold secrets.
        summary.insert("omitted".to_owned(), json!(rule));
        return done(summary, String::new());
    }

    let old_path = change.old_path.as_deref().unwrap_or(&change.path);
    let mut text = header(change, old_path);
    let (old, new) = match (
        reader.read(old_path, &change.old),
        reader.read(&change.path, &change.new),
    ) {
        (Ok(old), Ok(new)) => {
            let link_rule = reader
                .link_text_rule(old_path, &change.old, &old)
                .or_else(|| reader.link_text_rule(&change.path, &change.new, &new));
            if let Some(rule) = link_rule {
                summary.insert("omitted".to_owned(), json!(rule));
                return done(summary, String::new());
            }
            (old, new)
        }
        (Err(Unreadable::TooLarge), _) | (_, Err(Unreadable::TooLarge)) => {
            summary.insert("too_large".to_owned(), json!(true));
            text.push_str(&format!(
                "File over {MAX_DIFF_FILE_BYTES} bytes; not compared\n"
            ));
            return done(summary, text);
        }
        (Err(Unreadable::Failed(message)), _) | (_, Err(Unreadable::Failed(message))) => {
            summary.insert("error".to_owned(), json!(capped(message)));
            return done(summary, text);
        }
    };
    if old == new {
        // A mode change or an exact rename: the header says it all.
        summary.insert("added".to_owned(), json!(0));
        summary.insert("removed".to_owned(), json!(0));
        return done(summary, text);
    }
    let (old_text, new_text) = match (text_of(&old), text_of(&new)) {
        (Some(old_text), Some(new_text)) => (old_text, new_text),
        _ => {
            summary.insert("binary".to_owned(), json!(true));
            let (a, b) = file_labels(change, old_path);
            text.push_str(&format!("Binary files {a} and {b} differ\n"));
            return done(summary, text);
        }
    };
    // One file may take a quarter of the time left: a pathological file then ends in a
    // coarser (still correct) diff instead of a timeout for the whole call.
    let now = Instant::now();
    let deadline = now + cx.deadline().saturating_duration_since(now) / 4;
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .deadline(deadline)
        .diff_lines(old_text, new_text);
    let (mut added, mut removed) = (0usize, 0usize);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                ChangeTag::Insert => added += 1,
                ChangeTag::Delete => removed += 1,
                ChangeTag::Equal => {}
            }
        }
    }
    summary.insert("added".to_owned(), json!(added));
    summary.insert("removed".to_owned(), json!(removed));
    let (a, b) = file_labels(change, old_path);
    text.push_str(&format!("--- {a}\n+++ {b}\n"));
    let mut unified = diff.unified_diff();
    unified.context_radius(CONTEXT_LINES);
    for hunk in unified.iter_hunks() {
        text.push_str(&hunk.to_string());
    }
    done(summary, text)
}

/// The `diff --git` header and the lines git prints before the hunks.
fn header(change: &FileChange, old_path: &str) -> String {
    let mut text = format!("diff --git a/{old_path} b/{}\n", change.path);
    match (change.old.mode(), change.new.mode()) {
        (None, Some(mode)) => text.push_str(&format!("new file mode {:o}\n", mode.bits())),
        (Some(mode), None) => text.push_str(&format!("deleted file mode {:o}\n", mode.bits())),
        (Some(old), Some(new)) if old != new => {
            text.push_str(&format!(
                "old mode {:o}\nnew mode {:o}\n",
                old.bits(),
                new.bits()
            ));
        }
        _ => {}
    }
    if let Some(source) = &change.old_path {
        let verb = if change.status == "copied" {
            "copy"
        } else {
            "rename"
        };
        text.push_str(&format!(
            "{verb} from {source}\n{verb} to {}\n",
            change.path
        ));
    }
    text
}

/// Where a link at `link` whose text is `text` leads, as a workspace-relative path worked out
/// from the text alone (the link may be gone); `None` when it leads out of `root` or is not
/// UTF-8.
fn link_target(root: &Path, link: &str, text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    let (mut parts, rest): (Vec<&str>, &str) = if text.starts_with('/') {
        (
            Vec::new(),
            Path::new(text).strip_prefix(root).ok()?.to_str()?,
        )
    } else {
        let mut parent: Vec<&str> = link.split('/').collect();
        parent.pop();
        (parent, text)
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    Some(parts.join("/"))
}

/// `message` cut to a length that keeps one file's entry small.
fn capped(message: String) -> String {
    const MAX_CHARS: usize = 300;
    match message.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", message.get(..at).unwrap_or_default()),
        None => message,
    }
}

/// `a/…` and `b/…`, or `/dev/null` for a side that does not exist.
fn file_labels(change: &FileChange, old_path: &str) -> (String, String) {
    let a = match change.old {
        Side::Absent => "/dev/null".to_owned(),
        _ => format!("a/{old_path}"),
    };
    let b = match change.new {
        Side::Absent => "/dev/null".to_owned(),
        _ => format!("b/{}", change.path),
    };
    (a, b)
}

/// `bytes` as text, or `None` when git would call it binary (a NUL early on) or it is not
/// UTF-8, which a model could not read either.
fn text_of(bytes: &[u8]) -> Option<&str> {
    let probe = bytes.get(..BINARY_PROBE_BYTES).unwrap_or(bytes);
    if probe.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// The diff text, cut on a line boundary once it reaches its budget (bytes as escaped JSON).
#[derive(Debug)]
struct DiffText {
    text: String,
    budget: usize,
    used: usize,
    truncated: bool,
}

impl DiffText {
    fn new(budget: usize) -> Self {
        DiffText {
            text: String::new(),
            budget,
            used: 2,
            truncated: false,
        }
    }

    fn push(&mut self, text: &str) {
        if self.truncated {
            return;
        }
        for line in text.split_inclusive('\n') {
            let cost = json_len(line) - 2;
            if self.used + cost > self.budget {
                self.truncated = true;
                return;
            }
            self.used += cost;
            self.text.push_str(line);
        }
    }
}

/// What `value` takes as JSON.
fn value_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |text| text.len())
}

/// A git path as text. Git paths are bytes; one that is not UTF-8 is shown with replacement
/// characters, and cannot be read back, which the diff then reports as an error for that file.
fn text(path: &BStr) -> String {
    path.to_str_lossy().into_owned()
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
    fn binary_is_a_nul_early_on_or_not_utf8() {
        assert_eq!(text_of(b"plain\n"), Some("plain\n"));
        assert_eq!(text_of(b"a\0b"), None);
        assert_eq!(text_of(b"\xff\xfe"), None);
        let mut late = vec![b'a'; BINARY_PROBE_BYTES];
        late.push(0);
        assert!(text_of(&late).is_some());
    }

    #[test]
    fn diff_text_cuts_on_a_line_boundary() {
        // Each line costs five bytes once escaped: three letters and `\n`.
        let mut text = DiffText::new(2 + 10);
        text.push("abc\ndef\nghi\n");
        assert_eq!(text.text, "abc\ndef\n");
        assert!(text.truncated);
        text.push("x\n");
        assert_eq!(text.text, "abc\ndef\n");
    }

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
    fn a_links_text_is_followed_on_paper_only() {
        let root = Path::new("/home/me");
        let table = [
            (
                "tok",
                "state/toolgate/console.token",
                Some("state/toolgate/console.token"),
            ),
            ("a/b/tok", "../../state/x", Some("state/x")),
            ("a/tok", "./b/../c", Some("a/c")),
            ("tok", "../outside", None),
            (
                "tok",
                "/home/me/.local/state/toolgate/x",
                Some(".local/state/toolgate/x"),
            ),
            ("tok", "/etc/passwd", None),
        ];
        for (link, text, expected) in table {
            assert_eq!(
                link_target(root, link, text.as_bytes()).as_deref(),
                expected,
                "{link} -> {text}"
            );
        }
        assert_eq!(link_target(root, "tok", b"\xff"), None);
    }

    #[test]
    fn hidden_directories_become_exclusion_pathspecs() {
        let sensitivity = Sensitivity::default().with_config_dir(".local/state/toolgate");
        assert_eq!(
            hidden_pathspecs(&sensitivity),
            [
                ":(exclude,icase,glob)**/.ssh/**",
                ":(exclude,icase,glob)**/.aws/**",
                ":(exclude,icase,glob)**/.toolgate/**",
                ":(exclude,icase,literal).local/state/toolgate",
            ]
        );
        // The workspace itself cannot be excluded from itself; the policy refuses such a call.
        let whole = Sensitivity::default().with_config_dir(".");
        assert_eq!(hidden_pathspecs(&whole).len(), 3);
    }

    #[test]
    fn kinds_of_modes() {
        assert!(same_kind(Mode::FILE, Mode::FILE_EXECUTABLE));
        assert!(!same_kind(Mode::FILE, Mode::SYMLINK));
        assert_eq!(flip_executable(Mode::FILE), Mode::FILE_EXECUTABLE);
        assert_eq!(flip_executable(Mode::SYMLINK), Mode::SYMLINK);
    }
}
