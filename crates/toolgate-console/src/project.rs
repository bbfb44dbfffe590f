//! The workspace's project configuration (`.toolgate/`) as the console shows it, and the
//! person's trust in it.
//!
//! The console reads no configuration itself: whoever starts it passes a [`ProjectTrust`]
//! (the `toolgate` binary's reads `.toolgate/` afresh on each call). A person trusts exactly
//! the files they were shown: the page posts the digest it showed, and [`ProjectTrust::trust`]
//! records trust only when the files' digest *now* is that one; otherwise it refuses with the
//! view as the files stand now, for the person to look at again.

use serde::{Deserialize, Serialize};

/// Reads the workspace's project configuration and records a person's trust in it.
pub trait ProjectTrust: Send + Sync + std::fmt::Debug {
    /// The project's configuration as it stands now.
    fn view(&self) -> ProjectView;

    /// Trusts the project's configuration if the digest of its files is `digest` now: the
    /// view after trusting; else why not.
    fn trust(&self, digest: &str) -> Result<ProjectView, TrustRefusal>;
}

/// Whether there is a project configuration, and whether the person trusts it as it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProjectStatus {
    /// The workspace has no `.toolgate/`.
    None,
    /// Never trusted (or trust was revoked): it applies only where it narrows.
    Untrusted,
    /// Trusted, and no byte of its files changed since.
    Trusted,
    /// Trusted once; its files changed since, so it applies only where it narrows again.
    Changed,
    /// It cannot be read or does not check (see [`ProjectView::error`]); nothing can be
    /// trusted.
    Error,
}

impl ProjectStatus {
    /// The status in words, as the terminal says it.
    pub fn as_str(self) -> &'static str {
        match self {
            ProjectStatus::None => "none",
            ProjectStatus::Untrusted => "untrusted",
            ProjectStatus::Trusted => "trusted",
            ProjectStatus::Changed => "changed since trusted",
            ProjectStatus::Error => "error",
        }
    }
}

/// One file of the project's closure: every file its configuration reads or runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectFile {
    /// Its path in the workspace, as `toolgate check` shows it.
    pub path: String,
    pub digest: String,
}

/// One item of the project's configuration, at its place (`.toolgate/toolgate.toml:12`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectItem {
    pub place: String,
    pub what: String,
}

/// The project's configuration as the console shows it: what `toolgate check` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectView {
    pub status: ProjectStatus,
    /// The workspace's real path.
    pub workspace: String,
    /// The digest of all the files, which a trust must name; `None` when there is nothing
    /// to trust.
    pub digest: Option<String>,
    pub files: Vec<ProjectFile>,
    /// What narrows and applies now.
    pub applied: Vec<ProjectItem>,
    /// What would widen and has no effect until trusted.
    pub pending: Vec<ProjectItem>,
    /// What a project may never set.
    pub ignored: Vec<ProjectItem>,
    /// What changed since it was trusted, as a unified diff, when [`ProjectStatus::Changed`].
    pub diff: Option<String>,
    /// Why it cannot be read, when [`ProjectStatus::Error`].
    pub error: Option<String>,
}

impl ProjectView {
    /// A view with nothing in it but its status and workspace.
    pub fn bare(status: ProjectStatus, workspace: impl Into<String>) -> ProjectView {
        ProjectView {
            status,
            workspace: workspace.into(),
            digest: None,
            files: Vec::new(),
            applied: Vec::new(),
            pending: Vec::new(),
            ignored: Vec::new(),
            diff: None,
            error: None,
        }
    }
}

/// Why a trust was not recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustRefusal {
    /// The files are not the ones the person was shown (or there is nothing to trust): the
    /// view as they stand now.
    #[error(
        "the project's configuration is not what was shown: its files changed, or it cannot be trusted as it stands"
    )]
    NotAsShown(Box<ProjectView>),
    /// The record could not be written.
    #[error("cannot record the trust: {0}")]
    Failed(String),
}

/// What the page posts to trust the files it showed.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRequest {
    pub digest: String,
}
