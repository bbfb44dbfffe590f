//! A project's own configuration: `.toolgate/toolgate.toml` and `.toolgate/*.cedar` in the
//! workspace, shipped with the repository.
//!
//! A repository is not the user: its files are written by whoever wrote the repository. Until
//! the person trusts the project's configuration as it stands (`toolgate trust`, see
//! [`crate::trust`]), it is read as data and applied only where it narrows what the user's
//! own configuration allows: a `forbid` policy that replaces none, a tool turned off, a tool
//! made to ask each call, a limit or a timeout lowered, a tool's surfaces or profiles cut, a
//! path denied to commands. Everything that would widen — a `permit`, a policy replacing one
//! by its `@id`, an upstream to start, a hook to run, a profile's tools, a readable or
//! writable path, a longer time, a tool's description or effect — has no effect and is
//! listed as [`ProjectState::pending`]. Sections that steer toolgate itself (`policy`,
//! `default_policy`, `[serve]`, `[audit]`, `[approval] login_link_secs` and `elicitation`,
//! and `[sandbox]`'s `mode`, `allow`, `resolve` and `dangerous_*`) are never read from a
//! project, trusted or not, and are listed as [`ProjectState::ignored`].
//!
//! The files are read beneath the workspace without following a link: `.toolgate` or any
//! file in it that is a symbolic link (to elsewhere in the workspace or outside it) stops
//! toolgate with an error naming it.

use std::collections::BTreeSet;
use std::io::Read as _;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use toml::Spanned;
use toolgate_console::ProjectItem;
use toolgate_core::ApprovalMode;

use super::file::{ConfigFile, Located, ToolSection};
use super::{ConfigError, ToolOverride};
use crate::trust::{Closure, TrustState};

/// The project's directory in the workspace.
pub const PROJECT_DIR: &str = ".toolgate";
/// The project's configuration file in [`PROJECT_DIR`].
pub const PROJECT_FILE: &str = "toolgate.toml";
/// The most files `.toolgate/` may hold, and the largest one: a project's configuration is
/// a handful of small files.
const MAX_FILES: usize = 256;
const MAX_DEPTH: usize = 8;
const MAX_FILE_BYTES: u64 = 1 << 20;

/// `.toolgate/` as read: its configuration parsed, its policies, every file in it.
#[derive(Debug)]
pub(super) struct ProjectSource {
    /// The workspace's root, canonical.
    pub root: PathBuf,
    /// `.toolgate/toolgate.toml`, or an empty file when there is none.
    pub origin: Located,
    pub file: ConfigFile,
    /// `.toolgate/*.cedar`: (its path as shown, its text).
    pub policies: Vec<(String, String)>,
    /// Every file of `.toolgate/`, and every file inside the workspace its hooks and
    /// upstreams run or read.
    pub closure: Closure,
}

/// The project's configuration as it applies.
#[derive(Debug, Clone)]
pub struct ProjectState {
    /// The workspace's root, canonical.
    pub root: PathBuf,
    pub closure: Closure,
    pub trust: TrustState,
    /// What narrows and applies now.
    pub applied: Vec<ProjectItem>,
    /// What would widen and has no effect until the person trusts the project as it stands
    /// (empty when trusted).
    pub pending: Vec<ProjectItem>,
    /// What a project may never set.
    pub ignored: Vec<ProjectItem>,
}

impl ProjectState {
    pub fn is_trusted(&self) -> bool {
        matches!(self.trust, TrustState::Trusted)
    }
}

/// Reads `.toolgate/` of the workspace at `root` (canonical). `None` when there is none.
pub(super) fn read(root: &Path) -> Result<Option<ProjectSource>, ConfigError> {
    let dir = root.join(PROJECT_DIR);
    let error = |path: &Path, message: String| ConfigError {
        file: path.display().to_string(),
        line: 0,
        message,
    };
    let metadata = match std::fs::symlink_metadata(&dir) {
        Ok(metadata) => metadata,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(error(
                &dir,
                format!("cannot read the project's configuration: {e}"),
            ));
        }
    };
    if !metadata.is_dir() {
        return Err(error(
            &dir,
            format!(
                "the project's configuration `{PROJECT_DIR}` is {}, not a directory of the workspace; toolgate reads no project configuration through it",
                kind(&metadata)
            ),
        ));
    }
    let mut files = Vec::new();
    walk(&dir, &dir, 0, &mut 0, &mut files)?;
    let mut closure = Closure::default();
    let text_of = |rel: &str, bytes: &[u8]| -> Result<String, ConfigError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| {
            error(
                &dir.join(rel),
                "is not UTF-8 text; toolgate reads no project configuration from it".to_owned(),
            )
        })
    };
    let mut origin = Located::default();
    let mut file = ConfigFile::default();
    let mut policies = Vec::new();
    for (rel, bytes) in &files {
        let shown = format!("{PROJECT_DIR}/{rel}");
        closure.add(&shown, bytes);
        if rel == PROJECT_FILE {
            (origin, file) = Located::parse(&dir.join(rel), text_of(rel, bytes)?)?;
        } else if rel.ends_with(".cedar") && !rel.contains('/') {
            policies.push((dir.join(rel).display().to_string(), text_of(rel, bytes)?));
        }
    }
    // What the hooks and upstreams would run or read, where it is the repository's: each word
    // of their commands that names a file inside the workspace, as a path from `.toolgate/`
    // (where a hook's program is found), from the root (where hooks run) or from an
    // upstream's `cwd`.
    let hooks = file
        .hooks
        .iter()
        .map(|h| (h.get_ref().command.get_ref().clone(), None));
    let upstreams = file.upstreams.iter().map(|u| {
        let u = u.get_ref();
        (u.command.clone(), u.cwd.as_ref().map(|cwd| root.join(cwd)))
    });
    for (words, cwd) in hooks.chain(upstreams) {
        let bases: Vec<PathBuf> = [Some(dir.clone()), Some(root.to_path_buf()), cwd]
            .into_iter()
            .flatten()
            .collect();
        for real in words.iter().flat_map(|word| {
            bases
                .iter()
                .filter_map(|base| std::fs::canonicalize(base.join(word)).ok())
                .collect::<Vec<_>>()
        }) {
            if !real.starts_with(root) || real.starts_with(&dir) || !real.is_file() {
                continue;
            }
            // Without blocking: a file swapped for a FIFO since it was looked at is refused,
            // not waited on.
            let (_, bytes) = crate::hook::read_regular(&real).map_err(|e| {
                error(
                    &real,
                    format!("cannot read what the project's configuration runs: {e}"),
                )
            })?;
            let shown = real
                .strip_prefix(root)
                .unwrap_or(&real)
                .display()
                .to_string();
            closure.add(&shown, &bytes);
        }
    }
    Ok(Some(ProjectSource {
        root: root.to_path_buf(),
        origin,
        file,
        policies,
        closure,
    }))
}

/// The closure of the project configuration of the workspace at `root`, as it is now.
pub fn closure_of(root: &Path) -> Result<Option<Closure>, ConfigError> {
    Ok(read(root)?.map(|source| source.closure))
}

/// Every regular file beneath `dir`, by its path relative to `top`, read without following
/// a link. Directories count against [`MAX_FILES`] too and nest at most [`MAX_DEPTH`] deep: a
/// repository of a million empty directories, or of one a million deep, is refused rather
/// than walked.
fn walk(
    top: &Path,
    dir: &Path,
    depth: usize,
    seen: &mut usize,
    files: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), ConfigError> {
    let error = |path: &Path, message: String| ConfigError {
        file: path.display().to_string(),
        line: 0,
        message,
    };
    if depth > MAX_DEPTH {
        return Err(error(
            dir,
            format!("the project's configuration may nest directories at most {MAX_DEPTH} deep"),
        ));
    }
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| error(dir, format!("cannot read the project's configuration: {e}")))?
        .collect::<Result<_, _>>()
        .map_err(|e| error(dir, format!("cannot read the project's configuration: {e}")))?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        let path = entry.path();
        // A name with a control character (a newline) would print as a line of its own in
        // `check` and the console, where it could pass for one of toolgate's.
        if entry.file_name().to_str().is_none_or(|name| {
            name.chars()
                .any(|c| c.is_control() || toolgate_core::visible::is_invisible(c))
        }) {
            return Err(error(
                &path,
                "is named with a control or invisible character, or not in UTF-8; toolgate reads no project configuration with such a name".to_owned(),
            ));
        }
        let metadata = std::fs::symlink_metadata(&path).map_err(|e| {
            error(
                &path,
                format!("cannot read the project's configuration: {e}"),
            )
        })?;
        *seen += 1;
        if *seen > MAX_FILES {
            return Err(error(
                &path,
                format!(
                    "the project's configuration may hold at most {MAX_FILES} files and directories"
                ),
            ));
        }
        if metadata.is_dir() {
            walk(top, &path, depth + 1, seen, files)?;
            continue;
        }
        if !metadata.is_file() {
            return Err(error(
                &path,
                format!(
                    "is {} in the project's configuration; toolgate reads only regular files there",
                    kind(&metadata)
                ),
            ));
        }
        // The count of files is bounded with the directories', above.
        if metadata.len() > MAX_FILE_BYTES {
            return Err(error(
                &path,
                format!(
                    "the project's configuration may hold files of at most {MAX_FILE_BYTES} bytes"
                ),
            ));
        }
        // Opened without following a link or blocking, and checked to be the file just looked
        // at: a file swapped for a link or a FIFO since is refused.
        let mut opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(
                (rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK)
                    .bits()
                    .cast_signed(),
            )
            .open(&path)
            .map_err(|e| {
                error(
                    &path,
                    format!("cannot read the project's configuration: {e}"),
                )
            })?;
        let now = opened.metadata().map_err(|e| {
            error(
                &path,
                format!("cannot read the project's configuration: {e}"),
            )
        })?;
        if (now.dev(), now.ino()) != (metadata.dev(), metadata.ino()) || !now.is_file() {
            return Err(error(&path, "changed while it was read".to_owned()));
        }
        let mut bytes = Vec::new();
        opened
            .by_ref()
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| {
                error(
                    &path,
                    format!("cannot read the project's configuration: {e}"),
                )
            })?;
        let rel = path
            .strip_prefix(top)
            .unwrap_or(&path)
            .to_string_lossy()
            .into_owned();
        files.push((rel, bytes));
    }
    Ok(())
}

fn kind(metadata: &std::fs::Metadata) -> &'static str {
    if metadata.is_symlink() {
        "a symbolic link"
    } else if metadata.is_file() {
        "a file"
    } else {
        "a special file"
    }
}

/// What of the project's configuration applies: split into what narrows (applied), what
/// widens (pending unless `trusted`) and what a project may never set (ignored). `file` is the
/// user's, changed in place where the project's `[sandbox]` applies.
pub(super) struct Split {
    pub applied: Vec<ProjectItem>,
    pub pending: Vec<ProjectItem>,
    pub ignored: Vec<ProjectItem>,
    /// The project's `[[tool]]` sections as they apply.
    pub tools: Vec<ToolOverride>,
}

impl ProjectSource {
    /// Refuses a hook of the trusted configuration whose files inside the workspace were read
    /// with other bytes than the closure that was trusted: one swapped between the two reads.
    pub fn check_trusted_files(&self, hook: &super::hooks::HookSpec) -> Result<(), ConfigError> {
        for file in &hook.files {
            let Ok(shown) = file.path.strip_prefix(&self.root) else {
                continue;
            };
            let kept = self.closure.files.get(&shown.display().to_string());
            let now = file.digest.as_ref().map(ToString::to_string);
            if let Some(kept) = kept
                && now.as_ref() != Some(&kept.digest)
            {
                return Err(self.origin.error(format!(
                    "hook `{}`: `{}` changed while the configuration was read",
                    hook.name,
                    shown.display()
                )));
            }
        }
        Ok(())
    }

    /// The files of the closure by their real paths, with their digests as read: what a
    /// trusted configuration's hooks and upstreams may run inside the workspace.
    pub fn trusted_files(&self) -> std::collections::BTreeMap<PathBuf, String> {
        self.closure
            .files
            .iter()
            .map(|(shown, kept)| (self.root.join(shown), kept.digest.clone()))
            .collect()
    }

    fn place(&self, span: std::ops::Range<usize>) -> String {
        format!("{PROJECT_DIR}/{PROJECT_FILE}:{}", self.origin.line(span))
    }

    fn whole(&self) -> String {
        format!("{PROJECT_DIR}/{PROJECT_FILE}")
    }

    /// Splits the project's `toolgate.toml` (its policies are split by the policy engine).
    pub fn split(
        &self,
        user: &mut ConfigFile,
        trusted: bool,
        home: Option<&Path>,
    ) -> Result<Split, ConfigError> {
        let mut split = Split {
            applied: Vec::new(),
            pending: Vec::new(),
            ignored: Vec::new(),
            tools: Vec::new(),
        };
        let file = &self.file;
        let whole = self.whole();
        let widen = |split: &mut Split, place: String, what: String| {
            if trusted {
                split.applied.push(ProjectItem { place, what });
            } else {
                split.pending.push(ProjectItem { place, what });
            }
        };
        // Never from a project: these steer toolgate itself, its state and who approves.
        let never = [
            (
                file.policy.is_some(),
                "`policy` (a project's policies are `.toolgate/*.cedar`)",
            ),
            (file.default_policy.is_some(), "`default_policy`"),
            (!is_default_serve(file), "`[serve]`"),
            (!is_default_audit(file), "`[audit]`"),
            (
                file.approval.login_link_secs.is_some(),
                "`[approval] login_link_secs`",
            ),
            (
                !file.approval.elicitation.is_empty(),
                "`[approval] elicitation`",
            ),
            (file.sandbox.mode.is_some(), "`[sandbox] mode`"),
            (!file.sandbox.allow.is_empty(), "`[sandbox] allow`"),
            (!file.sandbox.resolve.is_empty(), "`[sandbox] resolve`"),
            (
                file.sandbox.dangerous_unconfined_network
                    || file.sandbox.dangerous_allow_unix_sockets,
                "`[sandbox] dangerous_*`",
            ),
        ];
        for (set, what) in never {
            if set {
                split.ignored.push(ProjectItem {
                    place: whole.clone(),
                    what: format!("{what} is never read from a project's configuration"),
                });
            }
        }
        // Limits and times: a lower value narrows.
        let limits = [
            (
                "max_name_bytes",
                file.limits.max_name_bytes,
                &mut user.limits.max_name_bytes,
                toolgate_core::NormalizeBounds::default().max_name_bytes,
            ),
            (
                "max_argument_bytes",
                file.limits.max_argument_bytes,
                &mut user.limits.max_argument_bytes,
                toolgate_core::NormalizeBounds::default().max_argument_bytes,
            ),
            (
                "max_depth",
                file.limits.max_depth,
                &mut user.limits.max_depth,
                toolgate_core::NormalizeBounds::default().max_depth,
            ),
        ];
        for (key, project, user, default) in limits {
            let Some(project) = project else { continue };
            let current = user.unwrap_or(default);
            let what = format!("[limits] {key} = {project}");
            if project <= current {
                *user = Some(project);
                split.applied.push(ProjectItem {
                    place: whole.clone(),
                    what,
                });
            } else {
                widen(
                    &mut split,
                    whole.clone(),
                    format!("{what} raises {current}"),
                );
                if trusted {
                    *user = Some(project);
                }
            }
        }
        if let Some(secs) = &file.approval.timeout_secs {
            // Checked here, where its place is known: applied, it would be reported as the
            // user's.
            super::approval_timeout(&self.origin, &self.file)?;
            let current = user
                .approval
                .timeout_secs
                .as_ref()
                .map_or(super::DEFAULT_APPROVAL_TIMEOUT_SECS, |s| *s.get_ref());
            let what = format!("[approval] timeout_secs = {}", secs.get_ref());
            if *secs.get_ref() <= current || trusted {
                user.approval.timeout_secs = Some(Spanned::new(0..0, *secs.get_ref()));
            }
            if *secs.get_ref() <= current {
                split.applied.push(ProjectItem {
                    place: self.place(secs.span()),
                    what,
                });
            } else {
                widen(
                    &mut split,
                    self.place(secs.span()),
                    format!("{what} is longer than {current}"),
                );
            }
        }
        // `[sandbox]`: a denied path narrows; a readable or writable one widens; lower limits
        // narrow.
        let resolved = |path: &Spanned<String>| {
            super::resolve(path.get_ref(), home)
                .map(|p| Spanned::new(0..0, p.display().to_string()))
                .map_err(|message| self.origin.error_at(path.span(), message))
        };
        for path in &file.sandbox.deny {
            user.sandbox.deny.push(resolved(path)?);
            split.applied.push(ProjectItem {
                place: self.place(path.span()),
                what: format!("[sandbox] deny `{}`", path.get_ref()),
            });
        }
        for (key, paths, target) in [
            ("read", &file.sandbox.read, &mut user.sandbox.read),
            ("write", &file.sandbox.write, &mut user.sandbox.write),
        ] {
            for path in paths {
                let absolute = resolved(path)?;
                widen(
                    &mut split,
                    self.place(path.span()),
                    format!(
                        "[sandbox] {key} `{}` grants commands a path",
                        path.get_ref()
                    ),
                );
                if trusted {
                    target.push(absolute);
                }
            }
        }
        let project_limits = &file.sandbox.limits;
        let user_limits = &mut user.sandbox.limits;
        for (key, project, user, default) in [
            (
                "file_size_bytes",
                project_limits.file_size_bytes,
                &mut user_limits.file_size_bytes,
                Some(super::DEFAULT_FILE_SIZE_BYTES),
            ),
            (
                "address_space_bytes",
                project_limits.address_space_bytes,
                &mut user_limits.address_space_bytes,
                None,
            ),
            (
                "open_files",
                project_limits.open_files,
                &mut user_limits.open_files,
                None,
            ),
            (
                "processes",
                project_limits.processes,
                &mut user_limits.processes,
                None,
            ),
            (
                "pids_max",
                project_limits.pids_max,
                &mut user_limits.pids_max,
                Some(super::DEFAULT_PIDS_MAX),
            ),
            (
                "memory_max_bytes",
                project_limits.memory_max_bytes,
                &mut user_limits.memory_max_bytes,
                None,
            ),
        ] {
            let Some(project) = project else { continue };
            let what = format!("[sandbox.limits] {key} = {project}");
            match user.or(default) {
                Some(current) if project > current => {
                    widen(
                        &mut split,
                        whole.clone(),
                        format!("{what} raises {current}"),
                    );
                    if trusted {
                        *user = Some(project);
                    }
                }
                _ => {
                    *user = Some(project);
                    split.applied.push(ProjectItem {
                        place: whole.clone(),
                        what,
                    });
                }
            }
        }
        // Tools: off, asking each call, lower limits, fewer surfaces or profiles narrow.
        let mut names = BTreeSet::new();
        for section in &file.tools {
            let tool = section.get_ref();
            let place = self.place(tool.name.span());
            if !names.insert(tool.name.get_ref().clone()) {
                return Err(self.origin.error_at(
                    tool.name.span(),
                    format!("tool `{}` is configured twice", tool.name.get_ref()),
                ));
            }
            let (narrowing, widening) = narrow_tool(tool);
            for what in widening {
                widen(
                    &mut split,
                    place.clone(),
                    format!("[[tool]] `{}`: {what}", tool.name.get_ref()),
                );
            }
            let mut applied =
                super::tool_override(&self.origin, if trusted { tool } else { &narrowing });
            applied.file = Some(self.origin.display_path());
            applied.narrowing = !trusted;
            split.applied.push(ProjectItem {
                place,
                what: format!(
                    "[[tool]] `{}`: {}",
                    tool.name.get_ref(),
                    summary(&narrowing)
                ),
            });
            split.tools.push(applied);
        }
        for (profile, section) in &file.profiles {
            widen(
                &mut split,
                self.place(profile.span()),
                format!(
                    "[profiles.{}] gives the profile {} tool(s)",
                    profile.get_ref(),
                    section.tools.len()
                ),
            );
        }
        for upstream in &file.upstreams {
            let section = upstream.get_ref();
            let what = if section.command.is_empty() {
                format!(
                    "[[upstream]] `{}` would be reached at `{}`",
                    section.name,
                    section.url.as_deref().unwrap_or("")
                )
            } else {
                format!(
                    "[[upstream]] `{}` would start `{}`",
                    section.name,
                    section.command.join(" ")
                )
            };
            widen(&mut split, self.place(upstream.span()), what);
        }
        for hook in &file.hooks {
            let section = hook.get_ref();
            widen(
                &mut split,
                self.place(section.name.span()),
                format!(
                    "[[hook]] `{}` would run `{}`",
                    section.name.get_ref(),
                    section.command.get_ref().join(" ")
                ),
            );
        }
        Ok(split)
    }
}

/// `tool` cut to what narrows, and what of it widens.
fn narrow_tool(tool: &ToolSection) -> (ToolSection, Vec<String>) {
    let mut widening = Vec::new();
    // Limits are applied as the least of the two, surfaces and profiles as what both allow:
    // never more than the user's (see [`ToolOverride::apply`]).
    let mut narrow = ToolSection {
        name: tool.name.clone(),
        enabled: None,
        version: None,
        capability: None,
        effect: None,
        surfaces: tool.surfaces.clone(),
        profiles: tool.profiles.clone(),
        approval: None,
        description: None,
        timeout_ms: tool.timeout_ms,
        default_timeout_ms: tool.default_timeout_ms,
        max_output_bytes: tool.max_output_bytes,
        max_results: tool.max_results,
    };
    match tool.enabled {
        Some(false) => narrow.enabled = Some(false),
        Some(true) => widening.push("`enabled = true` turns the tool on".to_owned()),
        None => {}
    }
    match tool.approval {
        Some(ApprovalMode::EachCall) => narrow.approval = Some(ApprovalMode::EachCall),
        Some(ApprovalMode::Policy) => {
            widening.push("`approval = \"policy\"` may lift asking each call".to_owned());
        }
        None => {}
    }
    for (set, key) in [
        (tool.version.is_some(), "version"),
        (tool.capability.is_some(), "capability"),
        (tool.effect.is_some(), "effect"),
        (tool.description.is_some(), "description"),
    ] {
        if set {
            widening.push(format!("`{key}` changes what the tool is"));
        }
    }
    (narrow, widening)
}

/// What a narrowing `[[tool]]` does, in words.
fn summary(tool: &ToolSection) -> String {
    let mut said = Vec::new();
    if tool.enabled == Some(false) {
        said.push("turned off".to_owned());
    }
    if tool.approval == Some(ApprovalMode::EachCall) {
        said.push("asks each call".to_owned());
    }
    for (key, value) in [
        ("timeout_ms", tool.timeout_ms.map(|v| v.to_string())),
        (
            "default_timeout_ms",
            tool.default_timeout_ms.map(|v| v.to_string()),
        ),
        (
            "max_output_bytes",
            tool.max_output_bytes.map(|v| v.to_string()),
        ),
        ("max_results", tool.max_results.map(|v| v.to_string())),
    ] {
        if let Some(value) = value {
            said.push(format!("{key} at most {value}"));
        }
    }
    if let Some(surfaces) = &tool.surfaces {
        let names: Vec<&str> = surfaces.iter().map(|s| s.as_str()).collect();
        said.push(if names.is_empty() {
            "on no surface".to_owned()
        } else {
            format!("only on {}", names.join(", "))
        });
    }
    if let Some(profiles) = &tool.profiles {
        let names: Vec<&str> = profiles.iter().map(String::as_str).collect();
        said.push(if names.is_empty() {
            "in no profile".to_owned()
        } else {
            format!("only in {}", names.join(", "))
        });
    }
    if said.is_empty() {
        "nothing that narrows".to_owned()
    } else {
        said.join("; ")
    }
}

fn is_default_serve(file: &ConfigFile) -> bool {
    let serve = &file.serve;
    !serve.dangerous_bind_any
        && serve.allowed_hosts.is_empty()
        && serve.tokens.is_empty()
        && serve.max_sessions.is_none()
        && serve.max_sessions_per_token.is_none()
        && serve.session_idle_timeout_secs.is_none()
}

fn is_default_audit(file: &ConfigFile) -> bool {
    let audit = &file.audit;
    audit.path.is_none()
        && !audit.debug_store_redacted_values
        && audit.sync.is_none()
        && audit.seal_epoch_secs.is_none()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_too_deep_or_too_many_are_refused_not_walked() {
        let ws = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let deep = (0..=MAX_DEPTH).fold(root.join(PROJECT_DIR), |p, i| p.join(i.to_string()));
        std::fs::create_dir_all(&deep).unwrap();
        let message = read(&root).unwrap_err().message;
        assert!(message.contains("at most 8 deep"), "{message}");
        std::fs::remove_dir_all(root.join(PROJECT_DIR)).unwrap();
        for i in 0..=MAX_FILES {
            std::fs::create_dir_all(root.join(PROJECT_DIR).join(i.to_string())).unwrap();
        }
        let message = read(&root).unwrap_err().message;
        assert!(
            message.contains("at most 256 files and directories"),
            "{message}"
        );
    }

    #[test]
    fn a_narrowing_tool_is_said_in_words_and_an_empty_list_as_none() {
        let text = "[[tool]]\nname = \"read_file\"\nenabled = true\ntimeout_ms = 5\nprofiles = []\nsurfaces = [\"cli\"]\n";
        let (_, file) = Located::parse(Path::new("t.toml"), text.to_owned()).unwrap();
        let (narrow, widening) = narrow_tool(file.tools[0].get_ref());
        assert_eq!(
            summary(&narrow),
            "timeout_ms at most 5; only on cli; in no profile"
        );
        assert_eq!(widening, ["`enabled = true` turns the tool on"]);
    }
}
