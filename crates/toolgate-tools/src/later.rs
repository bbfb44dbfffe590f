//! The guard of the files that another program runs later ([`toolgate_core::runs_later`])
//! around the processes a call starts: a snapshot before the first, compared when the last
//! has ended; whatever changed there that the call's `may_change` argument did not name (and
//! so the person did not approve by name) is put back, and the call fails with
//! `runs_later_changed`. Where the kernel gives a mount namespace, the existing ones are also
//! bound read-only for the processes and git directories pinned (`Guarded::read_only_paths`,
//! `Guarded::pinned_paths`), so that most changes fail at once. Beside the table's files, the
//! guard keeps those a repository's git configuration names ([`crate::git_named`]).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};
use toolgate_core::runs_later::{self, Guard};
use toolgate_core::{FieldError, RejectCode, ToolError, ToolErrorCode};
use toolgate_workspace::Workspace;
use toolgate_workspace::snapshot::{Guarded, Watch};

use crate::git_named;

/// Most entries `may_change` may name.
pub const MAX_MAY_CHANGE: usize = 16;

/// The `may_change` argument's schema, shared by `run_command` and `run_script`.
pub(crate) fn may_change_schema() -> Value {
    json!({
        "type": "array",
        "maxItems": MAX_MAY_CHANGE,
        "uniqueItems": true,
        "items": {"type": "string", "minLength": 1, "maxLength": 4096},
        "description": "Files that other programs run later which this command is meant to change, workspace-relative, e.g. [\".git/config\"] for `git config`, [\".git/hooks\"] for a hook installer, [\"sub/.git\"] for `git init sub`. Default: none. Git's own files (config, hooks, commondir, alternates, a new `.git`), agent clients' configuration (`.mcp.json`, `.claude/`, `.vscode/`, …), `.envrc`, package managers' configuration (`.npmrc`, `.cargo/config.toml`, …) and startup files (`.bashrc`, …) changed by a command without being named here are put back as they were, and the call fails. The person approving sees every path named here."
    })
}

/// How a snapshot of the files that run later walks a workspace (or any tree a confined
/// process may write).
pub fn watch(path: &str, is_dir: bool) -> Watch {
    watch_with(path, is_dir, &[])
}

/// [`watch`], where `named` are the paths a repository's git configuration names.
fn watch_with(path: &str, is_dir: bool, named: &[String]) -> Watch {
    match runs_later::guard_with(path, is_dir, named) {
        Guard::Skip => Watch::Skip,
        Guard::Descend => Watch::Descend,
        Guard::GitDir => Watch::Enter,
        Guard::Whole => Watch::Whole,
    }
}

/// The snapshot of the files that run later in `root` (a workspace, or any tree a confined
/// process may write), but `allowed`: the table's, found by a first walk, and then, where the
/// git configuration of the repositories it found names others (`core.hooksPath`,
/// `include.path`, a filter's program, …), those too, by a second.
pub fn guard(root: &Path, allowed: Vec<String>) -> Result<Guarded, String> {
    let mut guarded = Guarded::take(root, watch, allowed).map_err(|e| e.to_string())?;
    let workspace = Workspace::open(root).map_err(|e| e.to_string())?;
    let named = git_named::in_snapshot(&workspace, guarded.before())?;
    if !named.is_empty() {
        guarded
            .rewatch(move |path, is_dir| watch_with(path, is_dir, &named))
            .map_err(|e| e.to_string())?;
    }
    Ok(guarded)
}

/// Stage 3: every `may_change` path is workspace-relative and a file that runs later: the
/// table's, or one the git configuration of a repository holding it names.
pub(crate) fn check(workspace: &Workspace, may_change: &[String]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (i, path) in may_change.iter().enumerate() {
        let pointer = format!("/may_change/{i}");
        let plain = toolgate_workspace::RelPath::parse(path)
            .is_ok_and(|rel| rel.as_str() == path.as_str() && !rel.is_root());
        if !plain {
            errors.push(FieldError::new(
                pointer,
                RejectCode::ConstraintViolation,
                format!(
                    "`{path}` is not a plain workspace-relative path (no `..`, `.`, absolute or doubled `/`)"
                ),
            ));
        } else if runs_later::kind_of(path).is_none() {
            let message = match git_named::around(workspace, path) {
                Ok(named) if runs_later::kind_of_with(path, &named).is_some() => continue,
                Ok(_) => format!(
                    "`{path}` is not a file that another program runs later; name only those (git's config and hooks, `.mcp.json`, `.npmrc`, …): every other workspace file is the command's to change"
                ),
                // The configuration of a repository holding it does not parse (or is past
                // the limits): whether git runs it cannot be known.
                Err(error) => format!(
                    "whether `{path}` is a file that another program runs later cannot be known: {error}"
                ),
            };
            errors.push(FieldError::new(
                pointer,
                RejectCode::ConstraintViolation,
                message,
            ));
        }
    }
    errors
}

/// Stage 4: the preview's lines, one per `may_change` path and one for the rest.
pub(crate) fn preview(may_change: &[String]) -> String {
    let mut lines = String::new();
    for path in may_change {
        // Stage 3 let through only the table's files and those a repository's config names.
        let runs =
            runs_later::kind_of(path).map_or(runs_later::NAMED_BY_GIT.runs, |file| file.runs);
        let _ = write!(
            lines,
            "\nmay change `{path}`, CODE THAT RUNS LATER outside any sandbox, with your full authority: {runs}"
        );
    }
    lines.push_str(
        "\nfiles that run later (git's config and hooks, agent clients' configuration, `.envrc`, \
         package managers' configuration, startup files): a change the command makes to one not \
         named above is put back, and the call fails",
    );
    lines
}

/// Stage 7, before the first process: the snapshot.
pub(crate) fn take(workspace: &Path, may_change: &[String]) -> Result<Guarded, ToolError> {
    guard(workspace, may_change.to_vec()).map_err(|e| {
        ToolError::new(
            ToolErrorCode::SandboxFailed,
            format!("the files that run later could not be taken stock of, so nothing ran: {e}"),
        )
    })
}

/// Stage 7, after the last process ended: what changed is put back; the call fails if
/// anything had.
pub(crate) fn check_after(guarded: &Guarded) -> Result<(), ToolError> {
    let undone = guarded.check().map_err(|e| {
        ToolError::new(
            ToolErrorCode::RunsLaterChanged,
            format!(
                "the files that run later could not be compared with how they were before the command, or not put back: {e}"
            ),
        )
    })?;
    let Some(undone) = undone else {
        return Ok(());
    };
    let message = format!(
        "the command changed files that other programs run later, which the approval did not name (a command meant to change one names it in `may_change`, which the person approving sees): {undone}"
    );
    Err(ToolError::new(ToolErrorCode::RunsLaterChanged, message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_may_change_path_is_refused_with_why() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let refused = |path: &str| {
            let errors = check(&workspace, &[path.to_owned()]);
            assert_eq!(errors.len(), 1, "{path}: {errors:?}");
            errors[0].message.clone()
        };
        std::fs::write(
            dir.path().join(".git/config"),
            "[core]\n\thooksPath = tools/hooks\n",
        )
        .unwrap();
        assert!(check(&workspace, &["tools/hooks/pre-commit".to_owned()]).is_empty());
        assert!(refused("src/a.rs").contains("is not a file that another program runs later"));
        // A repository's configuration that does not parse: not said to be an ordinary file.
        std::fs::write(dir.path().join(".git/config"), "[core\n\tsecret = 1\n").unwrap();
        let message = refused("tools/hooks/pre-commit");
        assert!(message.contains("cannot be known"), "{message}");
        assert!(message.contains("does not parse"), "{message}");
        assert!(!message.contains("secret"), "{message}");
    }
}
