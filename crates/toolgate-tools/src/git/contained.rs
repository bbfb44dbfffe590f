//! Keeping gix inside the workspace: what the git directory may hold before gix is let open
//! it, the kernel rule that keeps the reading thread beneath the workspace root, and the
//! words a gix failure is told in (never the bytes of a file it read).
//!
//! gix opens the files of a git directory by path and follows symbolic links, and a git
//! directory can name other places to read from: `objects/info/alternates` (objects of other
//! repositories), `commondir` (another git directory's objects, references and
//! configuration). A link or one of those files leads gix out of the workspace, and what it
//! then reads comes back as a diff, a branch name or a parser's error. So, before gix opens
//! the repository, every entry of `.git` (submodules' `.git/modules/*` and worktrees'
//! `.git/worktrees/*` included) is looked at without following links ([`check_git_dir`]):
//! a link anywhere, `alternates`, `http-alternates` or a `commondir` (other than a linked
//! worktree's own, which opening this repository never reads) is refused with
//! `repository_outside_workspace`; an entry that is neither a file nor a directory (a FIFO,
//! a socket) with `git_error`.
//!
//! The look and gix's open are two steps, and something writing the workspace at the same
//! time (an approved command still running, an upstream server) could put a link in between.
//! Where the kernel has Landlock, the thread that runs gix is confined first
//! ([`confine_thread`]): it can open files and list directories beneath the workspace root
//! and nothing else, whatever path a link makes it resolve, so such a race (and a nested
//! repository's `.git` file naming a directory elsewhere, which gix's walk probes) ends in
//! an error rather than in a read outside. Without Landlock the window between the look and
//! the open stays.

use std::fmt::Display;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use gix::error::Class;
use toolgate_core::{ToolError, ToolErrorCode};

use super::repository::elsewhere;

/// The git directory's name at the workspace root.
const DOT_GIT: &str = ".git";

/// How many entries of `.git` are looked at between two looks at the interrupt flag.
const BETWEEN_INTERRUPT_CHECKS: usize = 256;

/// Refuses a git directory at `root/.git` that leads anywhere else: see the module's
/// documentation. Entries are looked at with `lstat` semantics (a directory entry's type),
/// never followed. Stops, with an error, when `interrupt` is raised.
pub(super) fn check_git_dir(root: &Path, interrupt: &AtomicBool) -> Result<(), ToolError> {
    let mut pending = vec![DOT_GIT.to_owned()];
    let mut looked = 0usize;
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(root.join(&dir)).map_err(|e| unreadable(&dir, &e))?;
        for entry in entries {
            looked += 1;
            if looked.is_multiple_of(BETWEEN_INTERRUPT_CHECKS) && interrupt.load(Ordering::Acquire)
            {
                return Err(ToolError::new(
                    ToolErrorCode::GitError,
                    "stopped while checking the git directory",
                ));
            }
            let entry = entry.map_err(|e| unreadable(&dir, &e))?;
            let name = entry.file_name();
            let path = format!("{dir}/{}", name.to_string_lossy());
            let kind = entry.file_type().map_err(|e| unreadable(&path, &e))?;
            if kind.is_symlink() {
                return Err(elsewhere(&format!(
                    "`{path}` is a symbolic link, which could lead gix outside the workspace"
                )));
            }
            // Whatever its kind: a directory where gix reads such a file is refused as well.
            if let Some(reason) = leads_elsewhere(&path) {
                return Err(elsewhere(&reason));
            }
            if kind.is_dir() {
                pending.push(path);
                continue;
            }
            if !kind.is_file() {
                return Err(ToolError::new(
                    ToolErrorCode::GitError,
                    format!(
                        "cannot read the git repository: `{path}` is neither a file nor a \
                         directory (a FIFO, socket or device)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Why the file at `path` (a file in `.git`, `/`-separated from the workspace root) would
/// make gix read another repository, if it would.
fn leads_elsewhere(path: &str) -> Option<String> {
    let mut names = path.rsplit('/');
    let (name, parent, grandparent) = (names.next(), names.next(), names.next());
    match name? {
        "alternates" | "http-alternates"
            if grandparent == Some("objects") && parent == Some("info") =>
        {
            Some(format!(
                "`{path}` names object stores of other repositories (alternates)"
            ))
        }
        // A linked worktree's private directory names the repository it belongs to; opening
        // this repository never reads it. Anywhere else it makes a git directory share
        // another's objects, references and configuration.
        "commondir" if grandparent != Some("worktrees") => Some(format!(
            "`{path}` makes its git directory share another's data (`commondir`)"
        )),
        _ => None,
    }
}

fn unreadable(path: &str, error: &std::io::Error) -> ToolError {
    ToolError::new(
        ToolErrorCode::GitError,
        format!(
            "cannot read the git repository: cannot list `{path}`: {}",
            io_kind(error.kind())
        ),
    )
}

/// Confines the calling thread (and the threads it starts) with Landlock: from now on it can
/// open files and list directories beneath `root` only, and write nothing. Returns whether
/// the kernel enforces it; where it has no Landlock the thread runs unconfined and only
/// [`check_git_dir`] stands (see the module's documentation).
pub(super) fn confine_thread(root: &Path) -> Result<bool, ToolError> {
    use landlock::{
        ABI, Access, AccessFs, PathBeneath, PathFd, Ruleset, RulesetAttr, RulesetCreatedAttr,
        RulesetStatus,
    };
    // The model has no use for the workspace's absolute path.
    let failed = |e: &dyn Display| {
        let said = e
            .to_string()
            .replace(root.to_string_lossy().as_ref(), "<workspace>");
        ToolError::new(
            ToolErrorCode::GitError,
            format!("cannot confine reading the repository to the workspace: {said}"),
        )
    };
    // Best effort: every right the running kernel knows of is handled, the newest ABI asked
    // for, and an older kernel handles fewer (none without Landlock).
    let abi = ABI::V6;
    let root_fd = PathFd::new(root).map_err(|e| failed(&e))?;
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(|e| failed(&e))?
        .create()
        .map_err(|e| failed(&e))?
        .add_rule(PathBeneath::new(root_fd, AccessFs::from_read(abi)))
        .map_err(|e| failed(&e))?
        .restrict_self()
        .map_err(|e| failed(&e))?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// What went wrong in gix, told without any of the bytes it read: the kind of problem, and
/// the files of the repository its message names (workspace-relative). A parser's message
/// quotes the input it could not parse, which, in a file that is not what it should be, can
/// be anything, so gix's own text is never passed on.
pub(super) fn describe(root: &Path, error: &gix::Error) -> String {
    let mut kind = None;
    for source in error.iter_errors() {
        if let Some(io) = source.downcast_ref::<std::io::Error>() {
            kind = Some(io_kind(io.kind()));
            break;
        }
    }
    let kind = kind.unwrap_or_else(|| class_kind(error.dominant_class()));
    // Where gix's messages, or the paths they carry as metadata, name a file, it is named
    // again, if it is one of the repository's own (see `files_named`). The text is searched,
    // never shown.
    let mut text = String::new();
    for source in error.iter_errors() {
        let message = source.to_string();
        for file in files_meant(&message) {
            text.push_str(&format!("\n{}/{DOT_GIT}/{file}\n", root.display()));
        }
        text.push_str(&message);
        text.push('\n');
    }
    for metadata in error.metadata() {
        for (_, value) in metadata.iter() {
            // A relative path is one in the git directory (`HEAD`).
            if let gix::error::MetadataValue::Path(path) = value {
                let path = root.join(DOT_GIT).join(path);
                text.push_str(&format!("\n{}\n", path.display()));
            }
        }
    }
    let files = files_named(root, &text);
    if files.is_empty() {
        kind.to_owned()
    } else {
        let names: Vec<String> = files.iter().map(|file| format!("`{file}`")).collect();
        format!("{kind} (in {})", names.join(", "))
    }
}

/// The files of the git directory a gix message is about when it does not give their path:
/// judged by gix's own words, which come before any input it quotes (after the first `"` or
/// `=`), and, for a reference, the name gix gives it.
fn files_meant(message: &str) -> Vec<String> {
    let words = message[..message.find(['"', '=']).unwrap_or(message.len())].to_lowercase();
    let mut files = Vec::new();
    if words.contains("packed ref") {
        files.push("packed-refs".to_owned());
    }
    // The index's decoder names no file: "File is too small even for header …",
    // "Signature mismatch - this doesn't claim to be a header file".
    // A pack's index is not the index.
    if (words.contains("index") && !words.contains("pack"))
        || words.contains("header with zero entries")
        || words.contains("claim to be a header")
    {
        files.push("index".to_owned());
    }
    if let Some(name) = message
        .strip_prefix("The reference at \"")
        .and_then(|rest| rest.split_once('"'))
        .map(|(name, _)| name)
    {
        files.push(name.to_owned());
    }
    files
}

/// How many files a description names at most.
const MAX_NAMED: usize = 3;

/// The files of the repository that `text` names by absolute path: only names that exist
/// under `root`, in `.git` or git's own files in the working tree (`.gitmodules`,
/// `.gitignore`, `.gitattributes`, a submodule's `.git`), so that nothing else of `text`
/// can come through as a name.
fn files_named(root: &Path, text: &str) -> Vec<String> {
    let mut prefix = root.to_string_lossy().into_owned();
    prefix.push('/');
    let mut named: Vec<String> = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(&prefix) {
        let after = &rest[at + prefix.len()..];
        let end = after
            .find(|c: char| c == '"' || c == '\'' || c == '`' || c.is_whitespace() || c == ':')
            .unwrap_or(after.len());
        let candidate = after[..end].trim_end_matches(['.', ',', ')', '/']);
        rest = &after[end..];
        if named.len() == MAX_NAMED || named.iter().any(|name| name == candidate) {
            continue;
        }
        if is_git_file(candidate) && root.join(candidate).symlink_metadata().is_ok() {
            named.push(candidate.to_owned());
        }
    }
    named
}

/// Whether `rel` is in the git directory or one of git's own files in the working tree.
fn is_git_file(rel: &str) -> bool {
    if rel.is_empty()
        || rel
            .split('/')
            .any(|name| name == ".." || name == "." || name.is_empty())
    {
        return false;
    }
    let file = rel.rsplit('/').next().unwrap_or(rel);
    rel == DOT_GIT
        || rel.starts_with(".git/")
        || matches!(
            file,
            ".gitmodules" | ".gitignore" | ".gitattributes" | ".git"
        )
}

fn io_kind(kind: std::io::ErrorKind) -> &'static str {
    use std::io::ErrorKind as K;
    match kind {
        K::NotFound => "a file it needs is missing",
        K::PermissionDenied => {
            "permission denied (a file outside the workspace, or one not readable)"
        }
        K::InvalidData | K::UnexpectedEof => "a file holds malformed data",
        K::Interrupted => "it was interrupted",
        K::OutOfMemory | K::FileTooLarge => "a file is too large",
        _ => "a file could not be read",
    }
}

fn class_kind(class: Option<Class>) -> &'static str {
    match class {
        Some(Class::Corruption) => "a file holds malformed data",
        Some(Class::NotFound) => "something it refers to is missing",
        Some(Class::Unsupported) => "it uses a format or extension gix cannot read",
        Some(Class::PermissionDenied) => "permission denied",
        Some(Class::ResourceExhaustion(_)) => "it is too large",
        Some(Class::Cancelled) => "it was interrupted",
        Some(Class::Validation) => "it holds a value that is not valid",
        _ => "it could not be read",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_that_lead_elsewhere() {
        let table = [
            (".git/objects/info/alternates", true),
            (".git/objects/info/http-alternates", true),
            (".git/modules/sub/objects/info/alternates", true),
            (".git/commondir", true),
            (".git/modules/sub/commondir", true),
            (".git/worktrees/feature/commondir", false),
            (".git/modules/sub/worktrees/w/commondir", false),
            (".git/objects/info/packs", false),
            (".git/info/alternates", false),
            (".git/HEAD", false),
            (".git/alternates", false),
        ];
        for (path, refused) in table {
            assert_eq!(leads_elsewhere(path).is_some(), refused, "{path}");
        }
    }

    #[test]
    fn a_description_names_existing_git_files_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join(".git/refs")).unwrap();
        std::fs::write(root.join(".git/packed-refs"), "x").unwrap();
        std::fs::write(root.join("secret.txt"), "x").unwrap();
        let r = root.display();
        let text = format!(
            "Invalid packed reference, input=\"TOKEN-1234 {r}/secret.txt\" in \"{r}/.git/packed-refs\": \
             {r}/.git/TOKEN-5678 {r}/.git/../secret.txt {r}/.git/packed-refs"
        );
        assert_eq!(files_named(root, &text), [".git/packed-refs"]);
        assert!(files_named(root, "no path here").is_empty());
    }

    #[test]
    fn a_confined_thread_opens_nothing_outside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("ws/.git")).unwrap();
        std::fs::write(base.join("ws/inside.txt"), "inside").unwrap();
        std::fs::write(base.join("secret.txt"), "secret").unwrap();
        std::os::unix::fs::symlink(base.join("secret.txt"), base.join("ws/.git/link")).unwrap();
        let root = base.join("ws");
        let confined = std::thread::spawn(move || {
            let enforced = confine_thread(&root).unwrap();
            let inside = std::fs::read_to_string(root.join("inside.txt"));
            let outside = std::fs::read_to_string(root.join("../secret.txt"));
            let linked = std::fs::read_to_string(root.join(".git/link"));
            let listed = std::fs::read_dir(root.join("..")).map(|_| ());
            // Threads it starts are confined as well.
            let child = std::thread::spawn(move || std::fs::read_to_string(root.join(".git/link")))
                .join()
                .unwrap();
            (enforced, inside, outside, linked, listed, child)
        })
        .join()
        .unwrap();
        let (enforced, inside, outside, linked, listed, child) = confined;
        assert_eq!(inside.unwrap(), "inside");
        // This thread, not confined, still reads it.
        assert_eq!(
            std::fs::read_to_string(base.join("secret.txt")).unwrap(),
            "secret"
        );
        if !enforced {
            eprintln!("no Landlock on this kernel: only the look at `.git` stands");
            return;
        }
        for (what, result) in [("outside", outside), ("linked", linked), ("child", child)] {
            let error = result.expect_err(what);
            assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied, "{what}");
        }
        assert_eq!(
            listed.unwrap_err().kind(),
            std::io::ErrorKind::PermissionDenied
        );
    }

    #[test]
    fn files_a_message_is_about() {
        let table: [(&str, &[&str]); 7] = [
            (
                "Invalid packed reference, input=\"x\", line=1",
                &["packed-refs"],
            ),
            (
                "The reference at \"refs/heads/main\" could not be decoded",
                &["refs/heads/main"],
            ),
            (
                "File is too small even for header with zero entries",
                &["index"],
            ),
            ("Object header is invalid", &[]),
            ("The pack index file is corrupt", &[]),
            ("Could not parse entry at index 3", &["index"]),
            // What a message quotes is not its words.
            (
                "Invalid packed reference, input=\"index\"",
                &["packed-refs"],
            ),
        ];
        for (message, files) in table {
            assert_eq!(files_meant(message), files, "{message}");
        }
    }

    #[test]
    fn git_files_in_the_working_tree() {
        for (rel, git) in [
            (".git/HEAD", true),
            (".gitmodules", true),
            ("sub/.git", true),
            ("src/.gitignore", true),
            ("secret.txt", false),
            (".git/../secret.txt", false),
            ("", false),
        ] {
            assert_eq!(is_git_file(rel), git, "{rel}");
        }
    }
}
