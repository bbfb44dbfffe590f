//! Opening the workspace root's own repository, and what both tools share in reading it:
//! errors, interruption, what is hidden from them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use gix::Repository;
use gix::bstr::{BStr, BString, ByteSlice};
use toolgate_core::sensitive::Visibility;
use toolgate_core::{ExecContext, Sensitivity, ToolError, ToolErrorCode};
use toolgate_workspace::{PathError, PathKind, Workspace};

use crate::{path_argument, stopped, walk};

use super::contained::{check_git_dir, confine_thread, describe};

/// The workspace root's own repository, or why there is none that may be read: its `.git`
/// must be a directory reached without a link, holding nothing that leads elsewhere
/// ([`check_git_dir`], done right before gix opens it). Stops when `interrupt` is raised.
pub(super) fn open_repository(
    workspace: &Workspace,
    interrupt: &AtomicBool,
) -> Result<Repository, ToolError> {
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
    check_git_dir(workspace.root(), interrupt)?;
    // Isolated: no global or system configuration, no includes, and no environment variable
    // (`GIT_DIR`, `GIT_INDEX_FILE`, `GIT_ALTERNATE_OBJECT_DIRECTORIES`, …) steers it.
    let options = gix::open::Options::isolated().filter_config_section(trust_no_section);
    let repo = gix::open_opts(workspace.root(), options)
        .map_err(|e| not_a_repository(Some(describe(workspace.root(), &e))))?;
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
pub(super) fn trust_no_section(_: &gix::config::file::Metadata) -> bool {
    false
}

pub(super) fn canonical(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

pub(super) fn not_a_repository(detail: Option<String>) -> ToolError {
    let mut message = "the workspace root is not a git repository".to_owned();
    match detail {
        Some(detail) => {
            message.push_str(": ");
            message.push_str(&detail);
        }
        None => message.push_str(" (it has no `.git` directory)"),
    }
    message.push_str("; only the workspace root's own repository can be read");
    ToolError::new(ToolErrorCode::NotARepository, message)
}

/// The repository reaches outside the workspace, for `reason`.
pub(super) fn elsewhere(reason: &str) -> ToolError {
    ToolError::new(
        ToolErrorCode::RepositoryOutsideWorkspace,
        format!(
            "the workspace's git repository is not wholly inside the workspace: {reason}; only a \
             repository whose `.git` directory is at the workspace root, holding nothing that \
             leads elsewhere, can be read"
        ),
    )
}

/// A gix failure while doing `what` as the tool's error, told without gix's own text
/// ([`describe`]).
pub(super) fn git_error(workspace: &Workspace, what: &str, error: &gix::Error) -> ToolError {
    ToolError::new(
        ToolErrorCode::GitError,
        format!(
            "cannot read the git repository ({what}): {}",
            describe(workspace.root(), error)
        ),
    )
}

/// How long gix is given to notice its interrupt flag before a stopped call ends without it.
const GRACE: Duration = Duration::from_millis(500);

/// How many threads of stopped calls may still be blocked in gix, for one workspace, before
/// its git tools start no more.
const MAX_STRANDED: usize = 4;

/// The threads of stopped git calls still blocked in gix, by workspace root: for the whole
/// process, so that no rebuilt registry or new session starts the count again.
static STRANDED: Mutex<BTreeMap<PathBuf, usize>> = Mutex::new(BTreeMap::new());

/// Adds `change` (1 or -1) to the count of stranded threads for `root`; the count now.
fn strand(root: &Path, change: isize) -> usize {
    let mut stranded = STRANDED.lock().unwrap_or_else(PoisonError::into_inner);
    let count = stranded.entry(root.to_path_buf()).or_default();
    *count = count.saturating_add_signed(change);
    let now = *count;
    if now == 0 {
        stranded.remove(root);
    }
    now
}

/// How a call's thread stands, as its caller and the thread itself see it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fate {
    Running,
    /// Its caller stopped waiting; it is counted in [`STRANDED`] until it ends.
    Stranded,
    Ended,
}

/// What the caller's thread hears while a git call runs.
enum Heard<T> {
    /// The call's answer, from its thread.
    Answer(Result<T, ToolError>),
    /// The caller gave up.
    Cancelled,
}

/// Runs `f` (a git tool's whole execution) on a thread of its own — confined first, where the
/// kernel has Landlock, to reading beneath `root` ([`confine_thread`]) — with a copy of `cx`
/// and an interrupt flag for gix that is raised as soon as `cx` says to stop: gix polls a
/// flag of its own and cannot see `cx`. The caller's thread sleeps until the answer, the deadline or a
/// cancellation, whichever comes first. A stopped call (whatever gix was doing, or failed at)
/// ends with the `timeout`/`cancelled` error. If gix has not returned [`GRACE`] after the flag
/// was raised, it is blocked where it cannot look at the flag — opening a FIFO put where it
/// reads a file, such as a `.gitignore` — and the call ends without it: the thread is left to
/// end when what blocks it does, counted as stranded for the workspace at `root`. While
/// [`MAX_STRANDED`] are, no call on that workspace starts another.
pub(super) fn interruptibly<T: Send + 'static>(
    cx: &ExecContext,
    root: &Path,
    f: impl FnOnce(Arc<AtomicBool>, &ExecContext) -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    let left = strand(root, 0);
    if left >= MAX_STRANDED {
        return Err(ToolError::new(
            ToolErrorCode::GitError,
            format!(
                "{left} earlier git calls on this workspace stopped but are still blocked reading \
                 the repository (a FIFO where git reads a file blocks it until something writes \
                 to it); no more start until they end"
            ),
        ));
    }
    let interrupt = Arc::new(AtomicBool::new(false));
    // Room for the answer and one cancellation: neither sender ever waits.
    let (tell, heard) = std::sync::mpsc::sync_channel(2);
    let _on_cancel = cx.cancel().on_cancel({
        let interrupt = Arc::clone(&interrupt);
        let tell = tell.clone();
        move || {
            interrupt.store(true, Ordering::Release);
            let _ = tell.try_send(Heard::Cancelled);
        }
    });
    let gone = || {
        ToolError::new(
            ToolErrorCode::ToolPanicked,
            "reading the git repository stopped unexpectedly",
        )
    };
    let fate = Arc::new(Mutex::new(Fate::Running));
    let (flag, own, ends, own_root) = (
        Arc::clone(&interrupt),
        cx.clone(),
        Arc::clone(&fate),
        root.to_path_buf(),
    );
    std::thread::Builder::new()
        .name("toolgate-git".to_owned())
        .spawn(move || {
            // Confined before anything is read, for the rest of this thread's life (it ends
            // with the call): see `contained`.
            let answer = confine_thread(&own_root).and_then(|_| {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(flag, &own)))
                    .unwrap_or_else(|_| Err(gone()))
            });
            let mut fate = ends.lock().unwrap_or_else(PoisonError::into_inner);
            if *fate == Fate::Stranded {
                strand(&own_root, -1);
            }
            *fate = Fate::Ended;
            drop(fate);
            let _ = tell.send(Heard::Answer(answer));
        })
        .map_err(|e| {
            ToolError::new(
                ToolErrorCode::IoError,
                format!("cannot start a thread to read the repository: {e}"),
            )
        })?;
    let until_deadline = cx.deadline().saturating_duration_since(Instant::now());
    match heard.recv_timeout(until_deadline) {
        // An answer that comes as the call stops is not given: the call stopped.
        Ok(Heard::Answer(_)) if cx.should_stop() => return Err(stopped(cx)),
        Ok(Heard::Answer(answer)) => return answer,
        Ok(Heard::Cancelled) | Err(RecvTimeoutError::Timeout) => {}
        Err(RecvTimeoutError::Disconnected) => return Err(gone()),
    }
    interrupt.store(true, Ordering::Release);
    let grace_ends = Instant::now() + GRACE;
    loop {
        match heard.recv_timeout(grace_ends.saturating_duration_since(Instant::now())) {
            Ok(Heard::Cancelled) => {}
            Ok(Heard::Answer(_)) | Err(RecvTimeoutError::Disconnected) => return Err(stopped(cx)),
            Err(RecvTimeoutError::Timeout) => break,
        }
    }
    let mut fate = fate.lock().unwrap_or_else(PoisonError::into_inner);
    if *fate == Fate::Running {
        *fate = Fate::Stranded;
        strand(root, 1);
    }
    Err(stopped(cx))
}

/// Pathspecs that keep gix out of the directories `sensitivity` hides, so that its walk of
/// the worktree prunes them as the walkers do: an untracked directory that holds nothing else
/// is then not listed either. (`.git` gix never walks.) What a pattern cannot say (a link
/// that leads into one) is withheld afterwards.
pub(super) fn hidden_pathspecs(sensitivity: &Sensitivity) -> Vec<BString> {
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

/// What the git tools may show of a path git names (a directory as `dir/`), a link judged by
/// where it leads as well.
pub(super) fn visibility(
    workspace: &Workspace,
    sensitivity: &Sensitivity,
    path: &str,
) -> Visibility {
    let path = path.trim_end_matches('/');
    match workspace.check_path(path) {
        Ok(rel) => walk::visibility(workspace, sensitivity, &rel, true),
        // A name no tool could pass back (git's bytes shown lossily) is judged as it reads.
        Err(_) => sensitivity.visibility(path),
    }
}

/// A git path as text. Git paths are bytes; one that is not UTF-8 is shown with replacement
/// characters, and cannot be read back, which the diff then reports as an error for that file.
pub(super) fn text(path: &BStr) -> String {
    path.to_str_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_directories_become_exclusion_pathspecs() {
        let sensitivity = Sensitivity::default().with_config_dir(".local/state/toolgate");
        assert_eq!(
            hidden_pathspecs(&sensitivity),
            [
                ":(exclude,icase,glob)**/.ssh/**",
                ":(exclude,icase,glob)**/.aws/**",
                ":(exclude,icase,glob)**/.gnupg/**",
                ":(exclude,icase,glob)**/.kube/**",
                ":(exclude,icase,glob)**/.azure/**",
                ":(exclude,icase,glob)**/.config/gcloud/**",
                ":(exclude,icase,glob)**/.toolgate/**",
                ":(exclude,icase,literal).local/state/toolgate",
            ]
        );
        // The workspace itself cannot be excluded from itself; the policy refuses such a call.
        let whole = Sensitivity::default().with_config_dir(".");
        assert_eq!(hidden_pathspecs(&whole).len(), 7);
    }
}
