//! Trust in a project's configuration, given by a person and kept in the user's state
//! directory.
//!
//! A record binds three things: the workspace's real path, the device and inode of its root
//! (a directory removed and cloned again at the same path is another directory; a git worktree
//! or a repository sharing a trusted one's common directory is another path), and the digest
//! of the project's whole closure — every file of `.toolgate/` and every file inside the
//! workspace its hooks and upstreams run or read. Any byte changed anywhere in the closure
//! makes the configuration pending again; the record keeps each file's text (up to
//! [`MAX_KEPT_TEXT`]) so that what changed can be shown as a diff.
//!
//! Nothing here is reachable from a call: the state directory is denied to every confined
//! process, and [`trust`] is called only by `toolgate trust` at a terminal and by the console
//! on a person's decision.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::settings::project::ProjectState;
use crate::terminal::{errln, outln};
use serde::{Deserialize, Serialize};
use toolgate_console::{ProjectFile, ProjectStatus, ProjectView};
use toolgate_core::canonical::sha256_digest;

/// The most text of one file a trust record keeps for the diff shown when it changes.
pub const MAX_KEPT_TEXT: usize = 64 << 10;

/// The files a project's configuration reads or runs, by path as shown, each with its digest
/// and (if it is text and not long) its text; and the digest of them all.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Closure {
    pub files: BTreeMap<String, KeptFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptFile {
    pub digest: String,
    /// The file's text, when it is UTF-8 and at most [`MAX_KEPT_TEXT`] bytes.
    pub text: Option<String>,
}

impl Closure {
    pub fn add(&mut self, path: &str, bytes: &[u8]) {
        let text = std::str::from_utf8(bytes)
            .ok()
            .filter(|t| t.len() <= MAX_KEPT_TEXT)
            .map(str::to_owned);
        self.files.insert(
            path.to_owned(),
            KeptFile {
                digest: sha256_digest(bytes).to_string(),
                text,
            },
        );
    }

    /// One digest over every path and its digest.
    pub fn digest(&self) -> String {
        let mut all = String::new();
        for (path, file) in &self.files {
            all.push_str(path);
            all.push('\0');
            all.push_str(&file.digest);
            all.push('\n');
        }
        sha256_digest(all.as_bytes()).to_string()
    }

    /// What changed from `before` to this closure, as a unified diff per file.
    pub fn diff_from(&self, before: &Closure) -> String {
        let mut out = String::new();
        let paths: std::collections::BTreeSet<&String> =
            self.files.keys().chain(before.files.keys()).collect();
        for path in paths {
            let (old, new) = (before.files.get(path), self.files.get(path));
            if old.map(|f| &f.digest) == new.map(|f| &f.digest) {
                continue;
            }
            let text = |file: Option<&KeptFile>| match file {
                None => String::new(),
                Some(KeptFile { text: Some(t), .. }) => t.clone(),
                Some(KeptFile { digest, .. }) => format!("(not text, or too long: {digest})\n"),
            };
            let (old_text, new_text) = (text(old), text(new));
            let diff = similar::TextDiff::from_lines(&old_text, &new_text);
            let from = if old.is_some() {
                format!("a/{path}")
            } else {
                "/dev/null".to_owned()
            };
            let to = if new.is_some() {
                format!("b/{path}")
            } else {
                "/dev/null".to_owned()
            };
            out.push_str(&diff.unified_diff().header(&from, &to).to_string());
        }
        out
    }
}

/// Whether a person trusts the project's configuration as it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrustState {
    /// Trusted, and nothing has changed since.
    Trusted,
    /// Never trusted (or trust was revoked, or the record is of another directory).
    Untrusted,
    /// Trusted once; the closure has changed since. What was trusted.
    Changed { trusted: Box<TrustRecord> },
}

impl TrustState {
    /// The state as the console and the terminal show it.
    pub fn status(&self) -> ProjectStatus {
        match self {
            TrustState::Trusted => ProjectStatus::Trusted,
            TrustState::Untrusted => ProjectStatus::Untrusted,
            TrustState::Changed { .. } => ProjectStatus::Changed,
        }
    }
}

/// A person's trust in one workspace's project configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// The workspace's real path.
    pub workspace: PathBuf,
    /// The device and inode of its root when trusted.
    pub device: u64,
    pub inode: u64,
    /// [`Closure::digest`] of what was trusted.
    pub digest: String,
    pub closure: Closure,
    /// When, in seconds since the epoch.
    pub trusted_at: u64,
    /// Who: `terminal` or `console`.
    pub by: String,
}

/// The directory of trust records in the state directory.
fn records_dir(state: &Path) -> PathBuf {
    state.join("trust")
}

/// The record file of the workspace at `root` (its real path).
fn record_path(state: &Path, root: &Path) -> PathBuf {
    let digest = sha256_digest(root.as_os_str().as_encoded_bytes()).to_string();
    let hex = digest.trim_start_matches("sha256:");
    records_dir(state).join(format!("{}.json", hex.get(..32).unwrap_or(hex)))
}

fn root_identity(root: &Path) -> std::io::Result<(u64, u64)> {
    let metadata = std::fs::metadata(root)?;
    Ok((metadata.dev(), metadata.ino()))
}

/// The record kept for `root`, if one can be read. A record that cannot be read or parsed, or
/// that names another path, counts as none: nothing is trusted by it.
fn record_of(state: &Path, root: &Path) -> Option<TrustRecord> {
    let text = std::fs::read_to_string(record_path(state, root)).ok()?;
    let record: TrustRecord = serde_json::from_str(&text).ok()?;
    (record.workspace == root).then_some(record)
}

/// Whether the person trusts `closure` as the project configuration of the workspace at
/// `root` (its real path). With no state directory nothing is trusted.
pub fn state_of(state: Option<&Path>, root: &Path, closure: &Closure) -> TrustState {
    let Some(record) = state.and_then(|state| record_of(state, root)) else {
        return TrustState::Untrusted;
    };
    match root_identity(root) {
        Ok(identity) if identity == (record.device, record.inode) => {}
        // Another directory now stands at the trusted path.
        _ => return TrustState::Untrusted,
    }
    if record.digest == closure.digest() {
        TrustState::Trusted
    } else {
        TrustState::Changed {
            trusted: Box::new(record),
        }
    }
}

/// Records that a person trusts `closure` for the workspace at `root`, replacing any earlier
/// record. The file is written whole and renamed into place, readable by the user alone.
pub fn trust(state: &Path, root: &Path, closure: &Closure, by: &str) -> anyhow::Result<()> {
    let (device, inode) =
        root_identity(root).with_context(|| format!("cannot read `{}`", root.display()))?;
    let record = TrustRecord {
        workspace: root.to_path_buf(),
        device,
        inode,
        digest: closure.digest(),
        closure: closure.clone(),
        trusted_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        by: by.to_owned(),
    };
    let dir = records_dir(state);
    create_private_dir(&dir)?;
    let path = record_path(state, root);
    let mut file = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("cannot write in `{}`", dir.display()))?;
    serde_json::to_writer_pretty(&mut file, &record).context("cannot write the trust record")?;
    file.as_file()
        .sync_all()
        .context("cannot write the trust record")?;
    file.persist(&path)
        .with_context(|| format!("cannot write `{}`", path.display()))?;
    Ok(())
}

/// Removes the record of the workspace at `root`. Whether there was one.
pub fn revoke(state: &Path, root: &Path) -> anyhow::Result<bool> {
    let path = record_path(state, root);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("cannot remove `{}`", path.display())),
    }
}

/// Every readable record, by workspace.
pub fn list(state: &Path) -> Vec<TrustRecord> {
    let Ok(entries) = std::fs::read_dir(records_dir(state)) else {
        return Vec::new();
    };
    let mut records: Vec<TrustRecord> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| serde_json::from_str(&std::fs::read_to_string(entry.path()).ok()?).ok())
        .filter(|record: &TrustRecord| record_path(state, &record.workspace).exists())
        .collect();
    records.sort_by(|a, b| a.workspace.cmp(&b.workspace));
    records
}

/// `toolgate trust`: shows the workspace's project configuration, what it would widen and
/// what changed since it was last trusted, and records the person's trust in exactly what was
/// shown once they type `trust` at the terminal; or `--revoke`, or `--list`.
pub fn command(args: &crate::cli::TrustArgs) -> anyhow::Result<u8> {
    use std::io::{BufRead as _, IsTerminal as _};
    let state = crate::settings::StateDir::from_environment();
    let state = state
        .dir
        .context("no state directory to keep trust in: set XDG_STATE_HOME or HOME")?;
    if args.list {
        let records = list(&state);
        if records.is_empty() {
            outln!("no workspace's configuration is trusted");
        }
        for record in records {
            let now = crate::settings::project::closure_of(&record.workspace);
            let standing = match now {
                Ok(Some(closure)) if closure.digest() == record.digest => "as trusted",
                Ok(Some(_)) => "changed since trusted: pending",
                Ok(None) => "no configuration there now",
                Err(_) => "cannot be read now",
            };
            outln!(
                "{}  ({standing}; trusted at {} by {})",
                record.workspace.display(),
                record.trusted_at,
                record.by
            );
        }
        return Ok(crate::EXIT_COMPLETED);
    }
    let workspace = crate::gate::open_workspace(&args.workspace)?;
    let root = workspace.root();
    if args.revoke {
        if revoke(&state, root)? {
            outln!(
                "{}: trust revoked; its configuration applies only where it narrows",
                root.display()
            );
        } else {
            outln!("{}: was not trusted", root.display());
        }
        return Ok(crate::EXIT_COMPLETED);
    }
    let settings = crate::Settings::load_for(args.config.config.as_deref(), root)?;
    let Some(project) = &settings.project else {
        outln!(
            "{}: no `.toolgate/` configuration; nothing to trust",
            root.display()
        );
        return Ok(crate::EXIT_FAILED);
    };
    print_project(&view(project));
    if project.is_trusted() {
        outln!("already trusted as it stands");
        return Ok(crate::EXIT_COMPLETED);
    }
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        errln!(
            "toolgate: trust is given by a person at a terminal (or in the console); standard input or standard error is not a terminal"
        );
        return Ok(crate::EXIT_REJECTED);
    }
    errln!("Type `trust` to trust these files as they stand, anything else to leave them pending:");
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if answer.trim() != "trust" {
        outln!("not trusted");
        return Ok(crate::EXIT_REJECTED);
    }
    trust(&state, root, &project.closure, "terminal")?;
    outln!("trusted: {} ({})", root.display(), project.closure.digest());
    Ok(crate::EXIT_COMPLETED)
}

/// A project's configuration as a person is shown it, in the console (as JSON) and at the
/// terminal ([`print_project`]): its files, what applies, what is pending until trusted, what is
/// ignored, and what changed since it was trusted.
pub fn view(project: &ProjectState) -> ProjectView {
    let diff = match &project.trust {
        TrustState::Changed { trusted } => Some(project.closure.diff_from(&trusted.closure)),
        TrustState::Trusted | TrustState::Untrusted => None,
    };
    ProjectView {
        status: project.trust.status(),
        workspace: project.root.display().to_string(),
        digest: Some(project.closure.digest()),
        files: project
            .closure
            .files
            .iter()
            .map(|(path, file)| ProjectFile {
                path: path.clone(),
                digest: file.digest.clone(),
            })
            .collect(),
        applied: project.applied.clone(),
        pending: project.pending.clone(),
        ignored: project.ignored.clone(),
        diff,
        error: None,
    }
}

/// What `toolgate check` and `toolgate trust` say of a project's configuration ([`view`]).
pub fn print_project(view: &ProjectView) {
    let digest = view.digest.as_deref().map(|d| format!("; {d}"));
    outln!(
        "project configuration: {}/.toolgate ({}{})",
        view.workspace,
        view.status.as_str(),
        digest.unwrap_or_default()
    );
    for file in &view.files {
        outln!("  file {}  {}", file.path, file.digest);
    }
    for (label, items) in [
        ("applies", &view.applied),
        ("pending until trusted", &view.pending),
        ("ignored", &view.ignored),
    ] {
        for item in items {
            outln!("  {label}: {}: {}", item.place, item.what);
        }
    }
    if let Some(diff) = &view.diff {
        outln!("  changed since trusted:");
        for line in diff.lines() {
            outln!("    {line}");
        }
    }
}

fn create_private_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create `{}`", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trust_binds_the_closure_and_the_root_and_any_change_makes_it_pending() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let mut closure = Closure::default();
        closure.add(".toolgate/toolgate.toml", b"[[tool]]\nname = \"x\"\n");
        assert_eq!(
            state_of(Some(state.path()), &root, &closure),
            TrustState::Untrusted
        );
        trust(state.path(), &root, &closure, "terminal").unwrap();
        assert_eq!(
            state_of(Some(state.path()), &root, &closure),
            TrustState::Trusted
        );
        let mut changed = closure.clone();
        changed.add(".toolgate/toolgate.toml", b"[[tool]]\nname = \"y\"\n");
        let TrustState::Changed { trusted } = state_of(Some(state.path()), &root, &changed) else {
            panic!("a changed closure is still trusted");
        };
        let diff = changed.diff_from(&trusted.closure);
        assert!(
            diff.contains("-name = \"x\"") && diff.contains("+name = \"y\""),
            "{diff}"
        );
        // A record of another directory at the same path trusts nothing here.
        let path = record_path(state.path(), &root);
        let mut record = record_of(state.path(), &root).unwrap();
        record.inode += 1;
        std::fs::write(&path, serde_json::to_string(&record).unwrap()).unwrap();
        assert_eq!(
            state_of(Some(state.path()), &root, &closure),
            TrustState::Untrusted
        );
        assert_eq!(list(state.path()).len(), 1);
        assert!(revoke(state.path(), &root).unwrap());
        assert!(!revoke(state.path(), &root).unwrap());
        assert!(list(state.path()).is_empty());
    }
}
