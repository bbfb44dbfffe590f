//! `git_status` and `git_diff`: the workspace root's own git repository, read in process with
//! gix. No `git` process is ever started.
//!
//! What gix may touch, and why that keeps the tools read-only and inside the workspace:
//!
//! - Only the repository whose `.git` *directory* sits at the workspace root is opened. A
//!   `.git` file (a linked worktree, a submodule) or link points elsewhere and is refused
//!   rather than followed out of the workspace; so is a repository whose working tree is not
//!   the workspace root, and one whose git directory holds a link, alternates or a
//!   `commondir` ([`contained`]): every file gix opens is inside the workspace, reached
//!   without a link out, and where the kernel has Landlock the thread that runs gix can open
//!   nothing else. gix's own error messages, which quote what they could not parse, never
//!   reach the model.
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
//! - Each call runs on a thread of its own ([`repository::interruptibly`]), so that it ends at
//!   its deadline even when gix is blocked where it cannot be interrupted (opening a FIFO put
//!   where it reads a `.gitignore`); at most a few such blocked threads a workspace are left.
//!
//! The executors are here; `repository` opens the repository and holds what both tools
//! share in reading it, `status` and `diff` ask gix what changed, and `render` reads each
//! side of a change and writes the text the model is shown.

mod contained;
mod diff;
mod render;
mod repository;
mod status;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::sensitive::Visibility;
use toolgate_core::{
    Call, Classification, ExecContext, FieldError, Limits, ToolError, ToolOutput, TypedExecutor,
};
use toolgate_workspace::{RelPath, Workspace};

use crate::descriptor::{closed_schema, titled};
use crate::{Builtin, ENVELOPE_BYTES, path_argument, read_only_entry, stopped};

use diff::{FileChange, in_scope, staged_changes, unstaged_changes, withhold_change};
use render::{ContentReader, DiffText, render};
use repository::{git_error, hidden_pathspecs, interruptibly, open_repository, visibility};
use status::{head_state, status_entries, withhold_entries};

pub(crate) const STATUS_NAME: &str = "git_status";
pub(crate) const DIFF_NAME: &str = "git_diff";

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
the workspace root is read; without one the error is `not_a_repository`, and one that leads \
outside the workspace (a `.git` link or file, links inside `.git`, alternates, a `commondir`) \
is refused with `repository_outside_workspace`.";

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
    let schema = closed_schema(json!({}), &[]);
    Builtin {
        descriptor: titled(
            STATUS_NAME,
            "Show the git status",
            STATUS_DESCRIPTION,
            schema,
        ),
        entry: read_only_entry(STATUS_NAME, "git_read", 512 * 1024),
        executor: Arc::new(GitStatus { workspace }),
    }
}

pub(crate) fn diff_builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "path": path_argument::schema("A file or directory to limit the diff to, relative to the workspace root (`src/main.rs`, `src`). Default: the whole repository."),
        "staged": {
            "type": "boolean",
            "description": "`true` to diff the index against HEAD (staged changes) instead of the working tree against the index. Default false."
        }
    });
    let schema = closed_schema(properties, &[]);
    Builtin {
        descriptor: titled(DIFF_NAME, "Show a git diff", DIFF_DESCRIPTION, schema),
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

/// `git_status` takes no arguments.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {}

/// `git_diff`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    path: Option<String>,
    #[serde(default)]
    staged: bool,
    #[serde(skip)]
    looked: path_argument::Looked,
}

/// What a `git_diff` call will show: the changes under the path stage 4 named.
#[derive(Debug)]
pub struct DiffPlan {
    scope: Result<RelPath, ToolError>,
    staged: bool,
}

impl TypedExecutor for GitStatus {
    type Args = StatusArgs;
    type Plan = ();

    fn plan(&self, _: StatusArgs) -> ((), Classification) {
        // The whole workspace: no `path` means the root.
        let (_, classification) =
            path_argument::plan(&self.workspace, None, path_argument::Looked::default());
        ((), classification)
    }

    fn execute(
        &self,
        (): &(),
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let workspace = Arc::clone(&self.workspace);
        let limits = *call.limits();
        interruptibly(cx, self.workspace.root(), move |interrupt, cx| {
            status(&workspace, limits, cx, interrupt)
        })
    }
}

/// `git_status`'s answer, on the thread [`interruptibly`] gives it.
fn status(
    workspace: &Arc<Workspace>,
    limits: Limits,
    cx: &ExecContext,
    interrupt: Arc<AtomicBool>,
) -> Result<ToolOutput, ToolError> {
    let repo = open_repository(workspace, &interrupt)?;
    let head = head_state(&repo, workspace)?;
    let entries = status_entries(&repo, hidden_pathspecs(cx.sensitivity()), interrupt)
        .map_err(|e| git_error(workspace, "listing what changed", &e))?;
    let entries = withhold_entries(entries, |path| {
        visibility(workspace, cx.sensitivity(), path) == Visibility::Hidden
    });

    let total = entries.len();
    let max_results = limits.max_results;
    let budget = limits.max_output_bytes.saturating_sub(ENVELOPE_BYTES);
    let (listed, _) = fitting(
        entries.into_values().map(|entry| entry.to_json()),
        max_results,
        budget,
    );
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

impl TypedExecutor for GitDiff {
    type Args = DiffArgs;
    type Plan = DiffPlan;

    fn check(&self, arguments: &DiffArgs) -> Vec<FieldError> {
        path_argument::check(
            &self.workspace,
            arguments.path.as_deref(),
            "path",
            &arguments.looked,
        )
    }

    fn plan(&self, arguments: DiffArgs) -> (DiffPlan, Classification) {
        let (scope, classification) =
            path_argument::plan(&self.workspace, arguments.path.as_deref(), arguments.looked);
        let plan = DiffPlan {
            scope,
            staged: arguments.staged,
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &DiffPlan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let workspace = Arc::clone(&self.workspace);
        let scope = path_argument::planned(&plan.scope)?.clone();
        let staged = plan.staged;
        let limits = *call.limits();
        interruptibly(cx, self.workspace.root(), move |interrupt, cx| {
            diff(&workspace, &scope, staged, limits, cx, interrupt)
        })
    }
}

/// `git_diff`'s answer, on the thread [`interruptibly`] gives it.
fn diff(
    workspace: &Arc<Workspace>,
    scope: &RelPath,
    staged: bool,
    limits: Limits,
    cx: &ExecContext,
    interrupt: Arc<AtomicBool>,
) -> Result<ToolOutput, ToolError> {
    let repo = open_repository(workspace, &interrupt)?;
    let changes = if staged {
        staged_changes(&repo, interrupt)
    } else {
        unstaged_changes(&repo, hidden_pathspecs(cx.sensitivity()), interrupt)
    }
    .map_err(|e| git_error(workspace, "listing what changed", &e))?;
    let hidden = |path: &str| visibility(workspace, cx.sensitivity(), path) == Visibility::Hidden;
    let mut changes: Vec<FileChange> = changes
        .into_iter()
        .filter_map(|change| withhold_change(change, hidden))
        .collect();
    changes.retain(|change| {
        in_scope(&change.path, scope)
            || change
                .old_path
                .as_deref()
                .is_some_and(|old| in_scope(old, scope))
    });
    changes.sort_by(|a, b| a.path.cmp(&b.path));

    let total = changes.len();
    changes.truncate(limits.max_results);
    let budget = limits.max_output_bytes.saturating_sub(ENVELOPE_BYTES);
    let reader = ContentReader {
        repo: &repo,
        workspace,
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
    let (files, list_used) = fitting(files, usize::MAX, budget / 2);
    let listed = files.len();
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

/// As many of `items`, from the first, as fit a JSON array of at most `max` items and
/// `budget` bytes; and the bytes that array takes.
fn fitting(
    items: impl IntoIterator<Item = Value>,
    max: usize,
    budget: usize,
) -> (Vec<Value>, usize) {
    let mut used = 2usize;
    let mut listed = Vec::new();
    for item in items {
        let cost = value_len(&item) + 1;
        if listed.len() == max || used + cost > budget {
            break;
        }
        used += cost;
        listed.push(item);
    }
    (listed, used)
}

/// What `value` takes as JSON.
fn value_len(value: &Value) -> usize {
    serde_json::to_string(value).map_or(usize::MAX, |text| text.len())
}
