//! toolgate's settings: `toolgate.toml` and the environment, read and checked once.
//!
//! [`Settings::load`] is the one place the configuration file is read ([`Settings::load_for`]
//! also reads a workspace's `.toolgate/`, applied as far as a person trusts it: see
//! [`project`] and [`crate::trust`]), and this module the one
//! place the environment the configuration depends on is read (`HOME`, the XDG directories,
//! the variables `[[serve.token]]` and `[[upstream]]` name): the library crates are given
//! these values and read none themselves. It parses the file strictly
//! (an unknown key, the same tool or upstream twice, a number out of range is an error that
//! names the file and line), resolves every path against the file's directory or the user's
//! directories, parses and validates the policies once into the [`PolicyEngine`] every
//! registry gets a copy of, resolves `[sandbox]` into the [`Confinement`] commands run under
//! and the one [`UpstreamConfinement`] of every upstream, and checks each `[[upstream]]` into
//! an [`UpstreamSpec`] with its [`Endpoint`](toolgate_upstream::Endpoint). What it returns is
//! only values: nothing has been started. With no configuration at all the defaults apply, and
//! they are safe: builtin read-only tools only, the default policy, approvals refused
//! headlessly.
//!
//! What can only be checked against the tools themselves (a `[[tool]]` or profile naming a
//! tool that does not exist, an `[approval] elicitation` or `[[serve.token]]` profile no tool
//! is in) is checked once by [`Settings::configured_tools`], when the builtin tools are made
//! for a workspace, before any upstream is started, with errors located in the file the same
//! way.

mod file;
pub mod hooks;
pub mod project;
mod tools;
pub mod upstream_files;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;
use toolgate_audit::UnknownSyncMode;
use toolgate_core::{
    ApprovalMode, EffectClass, NormalizeBounds, PolicyEngine, Surface, ToolEntry, Version,
    policy::DEFAULT_POLICY,
};
use toolgate_exec::CgroupLimits;
use toolgate_mcp::http::SessionLimits;
use toolgate_mcp::{Principal, TokenTable};
use toolgate_sandbox::{DenyList, Limits, Sandbox, UserDirs};
use toolgate_tools::Confinement;
use toolgate_upstream::{UpstreamConfinement, UpstreamSpec};

use file::{ConfigFile, Located, ToolSection};
pub use tools::ConfiguredTools;

/// A configuration problem, located in its file.
#[derive(Debug, Error)]
#[error("{file}:{line}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// The approval timeout when `[approval] timeout_secs` is not set.
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 300;
/// The longest approval timeout: a call should not hold a client for longer than a day.
pub const MAX_APPROVAL_TIMEOUT_SECS: u64 = 24 * 60 * 60;
/// The longest a console login link may work: it is printed where logs keep it, so it
/// should be dead soon after the person has had time to open it.
pub const MAX_LOGIN_LINK_SECS: u64 = 60 * 60;
/// The most sessions `[serve] max_sessions` may allow: about 6 GB of sessions, beyond any
/// loopback server's needs; a larger number is more likely a typo than a plan.
pub const MAX_SESSIONS: u64 = 100_000;
/// The longest idle timeout of a session: a day, as for approvals.
pub const MAX_SESSION_IDLE_TIMEOUT_SECS: u64 = 24 * 60 * 60;
/// The largest file a command may write unless the operator says otherwise.
pub const DEFAULT_FILE_SIZE_BYTES: u64 = 4 << 30;
/// Processes in a call's own cgroup unless the operator says otherwise.
pub const DEFAULT_PIDS_MAX: u64 = 4096;

/// Everything toolgate runs on, resolved from the configuration and the environment.
#[derive(Debug)]
pub struct Settings {
    origin: Located,
    /// The operator's Cedar policy file, resolved against the configuration's directory.
    pub policy_path: Option<PathBuf>,
    /// The policies in force (the default policy unless turned off, then the operator's
    /// file), parsed and validated once; each registry gets a copy prepared for its tools
    /// (see [`Settings::policy_engine`]).
    pub policy: PolicyEngine,
    /// Bounds on requests, before anything is parsed.
    pub bounds: NormalizeBounds,
    /// The `[[tool]]` sections: changes to builtin registry entries.
    pub tools: Vec<ToolOverride>,
    /// The `[profiles.NAME]` sections, by name.
    pub profiles: Vec<ProfileTools>,
    pub serve: ServeSettings,
    pub approval: ApprovalSettings,
    pub audit: AuditSettings,
    /// The `[[upstream]]` servers, checked, each with the confinement `[sandbox]` asks for.
    pub upstreams: Vec<UpstreamSpec>,
    /// Where each of `upstreams` is configured, by name (see
    /// [`upstream_files::outside_workspace`]).
    pub upstream_origins: std::collections::BTreeMap<String, upstream_files::UpstreamOrigin>,
    pub sandbox: SandboxSettings,
    /// The `[[hook]]` sections, checked, with the digests of their files at load.
    pub hooks: Vec<hooks::HookSpec>,
    /// toolgate's state directory: the console's token file, the standing grants, and the
    /// audit log unless `[audit] path` says otherwise.
    pub state_dir: StateDir,
    /// toolgate's configuration directory (`$XDG_CONFIG_HOME/toolgate`), denied to every
    /// command as the state directory is.
    pub config_dir: Option<PathBuf>,
    /// The workspace's `.toolgate/` configuration, when it has one (see [`project`]).
    pub project: Option<project::ProjectState>,
}

/// One `[[tool]]`, with the line it starts on.
#[derive(Debug, Clone)]
pub struct ToolOverride {
    pub name: String,
    /// The line of its `name`, for an error about it.
    pub line: usize,
    /// Its file when it is not the user's configuration (a project's).
    pub file: Option<String>,
    /// From a project's configuration nobody trusts: it may only narrow the entry (see
    /// [`ToolOverride::apply`]).
    pub narrowing: bool,
    pub enabled: Option<bool>,
    pub version: Option<Version>,
    pub capability: Option<String>,
    pub effect: Option<EffectClass>,
    pub surfaces: Option<std::collections::BTreeSet<Surface>>,
    pub profiles: Option<std::collections::BTreeSet<String>>,
    pub approval: Option<ApprovalMode>,
    pub description: Option<String>,
    pub timeout_ms: Option<u64>,
    pub default_timeout_ms: Option<u64>,
    pub max_output_bytes: Option<usize>,
    pub max_results: Option<usize>,
}

/// One `[profiles.NAME]`: the tools it adds, each with its line.
#[derive(Debug, Clone)]
pub struct ProfileTools {
    pub name: String,
    /// Its file when it is not the user's configuration (a trusted project's).
    pub file: Option<String>,
    pub tools: Vec<(String, usize)>,
}

/// `[serve]`, for `toolgate serve --http`.
#[derive(Debug, Clone)]
pub struct ServeSettings {
    /// Listen on a non-loopback address (as `--dangerous-bind-any`).
    pub dangerous_bind_any: bool,
    /// `Host` values accepted beyond the bound address and `localhost`, as `host:port`.
    pub allowed_hosts: Vec<String>,
    pub tokens: Vec<TokenSetting>,
    /// The session limits, the defaults where the file says nothing.
    pub sessions: SessionLimits,
}

/// One `[[serve.token]]`: the token is read from the environment variable `env`.
#[derive(Clone)]
pub struct TokenSetting {
    pub env: String,
    /// The variable's value, `None` when it is unset or empty.
    pub value: Option<String>,
    pub actor: String,
    pub profile: String,
    /// The lines of `env` and `profile`, for errors found when serving.
    pub env_line: usize,
    pub profile_line: usize,
}

// By hand, so that the token itself is never printed with the settings.
impl std::fmt::Debug for TokenSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSetting")
            .field("env", &self.env)
            .field("value", &self.value.as_ref().map(|_| "<set>"))
            .field("actor", &self.actor)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

/// `[approval]`.
#[derive(Debug, Clone)]
pub struct ApprovalSettings {
    /// How long a request waits in the console before it is `approval_expired`.
    pub timeout: Duration,
    /// Profiles whose sessions may also be asked by MCP elicitation, each with its line.
    pub elicitation: Vec<(String, usize)>,
    /// How long a printed console login link works, once.
    pub login_link_ttl: Duration,
}

/// `[audit]`.
#[derive(Debug, Clone)]
pub struct AuditSettings {
    /// The log's file; `None` when neither `[audit] path` nor a state directory gives one.
    pub path: Option<PathBuf>,
    /// Also keep each call's redacted messages and output.
    pub store_values: bool,
    /// When records are flushed to the disk.
    pub sync: toolgate_audit::SyncMode,
    /// How long an epoch lasts when sealing is set up.
    pub seal_epoch: Duration,
}

/// `[sandbox]`, resolved.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    pub mode: Mode,
    /// How commands are confined: this machine's sandbox, the deny list with toolgate's own
    /// files, the operator's additions.
    pub confinement: Arc<Confinement>,
    pub limits: SandboxLimits,
    /// Every command reaches the network unfiltered.
    pub dangerous_unconfined_network: bool,
}

/// Whether commands are confined.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Confined, or refused with `sandbox_unavailable` where this machine cannot.
    #[default]
    Enforce,
    /// Not confined at all.
    DangerousUnconfined,
}

/// `[sandbox.limits]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxLimits {
    pub file_size_bytes: Option<u64>,
    pub address_space_bytes: Option<u64>,
    pub open_files: Option<u64>,
    pub processes: Option<u64>,
    pub pids_max: Option<u64>,
    pub memory_max_bytes: Option<u64>,
}

/// toolgate's state directory, as the environment names it and with symbolic links resolved.
#[derive(Debug, Clone, Default)]
pub struct StateDir {
    /// `$XDG_STATE_HOME/toolgate`, else `~/.local/state/toolgate`; `None` without either.
    pub dir: Option<PathBuf>,
    /// `dir`, absolute and with symbolic links resolved as far as it exists (it may not exist
    /// yet: toolgate creates it when it first writes there).
    pub resolved: Option<PathBuf>,
}

impl StateDir {
    /// The one place the state directory is looked up.
    pub fn from_environment() -> StateDir {
        let dir = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state"))
            })
            .map(|base| base.join("toolgate"));
        let resolved = dir.as_deref().map(resolve_existing);
        StateDir { dir, resolved }
    }
}

/// `dir` with its longest existing prefix canonicalized.
fn resolve_existing(dir: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = dir;
    loop {
        if let Ok(resolved) = std::fs::canonicalize(existing) {
            return missing
                .iter()
                .rev()
                .fold(resolved, |path, name| path.join(name));
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            // A name such as `..` cannot be resolved before it exists: take it as written.
            _ => return dir.to_path_buf(),
        }
    }
}

impl Settings {
    /// `--config F` if given; else the user's `toolgate/toolgate.toml` in the XDG config
    /// directory if it exists; else the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Settings, ConfigError> {
        let (origin, file) = user_file(explicit)?;
        Settings::resolve(origin, file, Sandbox::detect())
    }

    /// As [`Settings::load`], with the project configuration of the workspace at `root` (its
    /// canonical root) applied as far as the person trusts it (see [`project`]).
    pub fn load_for(explicit: Option<&Path>, root: &Path) -> Result<Settings, ConfigError> {
        let project = project::read(root)?;
        let (origin, file) = user_file(explicit)?;
        Settings::resolve_with(origin, file, Sandbox::detect(), project)
    }

    /// The settings with no configuration file.
    pub fn defaults() -> Result<Settings, ConfigError> {
        Settings::resolve(Located::default(), ConfigFile::default(), Sandbox::detect())
    }

    /// Parses and checks `text` as the file at `path`.
    pub fn parse(path: &Path, text: String) -> Result<Settings, ConfigError> {
        Settings::parse_on(path, text, Sandbox::detect())
    }

    /// As [`Settings::parse`], on a machine whose sandbox is `sandbox`.
    pub fn parse_on(path: &Path, text: String, sandbox: Sandbox) -> Result<Settings, ConfigError> {
        let (origin, file) = Located::parse(path, text)?;
        Settings::resolve(origin, file, sandbox)
    }

    /// Every check that needs only the file and the environment, and every path resolved.
    fn resolve(
        origin: Located,
        file: ConfigFile,
        sandbox: Sandbox,
    ) -> Result<Settings, ConfigError> {
        Settings::resolve_with(origin, file, sandbox, None)
    }

    /// As [`Settings::resolve`], with a project's configuration split into what applies.
    fn resolve_with(
        origin: Located,
        mut file: ConfigFile,
        sandbox: Sandbox,
        project: Option<project::ProjectSource>,
    ) -> Result<Settings, ConfigError> {
        check_duplicates(&origin, &file)?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let state_dir = StateDir::from_environment();
        let project = match project {
            None => None,
            Some(source) => {
                let trust = crate::trust::state_of(
                    state_dir.resolved.as_deref(),
                    &source.root,
                    &source.closure,
                );
                let trusted = trust == crate::trust::TrustState::Trusted;
                let split = source.split(&mut file, trusted, home.as_deref())?;
                Some((source, trust, split))
            }
        };
        let approval = ApprovalSettings {
            timeout: approval_timeout(&origin, &file)?,
            elicitation: file
                .approval
                .elicitation
                .iter()
                .map(|p| (p.get_ref().clone(), origin.line(p.span())))
                .collect(),
            login_link_ttl: login_link_ttl(&origin, &file)?,
        };
        let sessions = session_limits(&origin, &file)?;
        let base = origin
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let policy_file = file
            .policy
            .as_ref()
            .map(|policy| (base.join(policy.get_ref()), policy.span()));
        let audit = AuditSettings {
            path: match &file.audit.path {
                Some(path) => Some(base.join(path.get_ref())),
                None => state_dir.dir.as_ref().map(|dir| dir.join("audit.db")),
            },
            store_values: file.audit.debug_store_redacted_values,
            sync: match &file.audit.sync {
                None => toolgate_audit::SyncMode::default(),
                Some(sync) => sync.get_ref().parse().map_err(|unknown: UnknownSyncMode| {
                    let message = unknown.to_string();
                    origin.error_at(sync.span(), file::with_guess(message, sync.get_ref()))
                })?,
            },
            seal_epoch: match &file.audit.seal_epoch_secs {
                None => Duration::from_secs(900),
                Some(secs) if *secs.get_ref() == 0 => {
                    return Err(
                        origin.error_at(secs.span(), "`seal_epoch_secs` must be at least 1 second")
                    );
                }
                Some(secs) => Duration::from_secs(*secs.get_ref()),
            },
        };
        let profiles = profiles(&origin, &file)?;
        let mode = file
            .sandbox
            .mode
            .as_ref()
            .map_or(Mode::Enforce, |m| *m.get_ref());
        let policy_path = policy_file.as_ref().map(|(path, _)| path.clone());
        // The home directory (read above) is what the deny list of commands and upstreams,
        // and every `~/` path of `[sandbox]`, are resolved against.
        let own_files = toolgate_paths(
            &state_dir,
            origin.path.as_deref(),
            policy_path.as_deref(),
            audit.path.as_deref(),
        );
        let mut confinement = confinement(
            &origin,
            &file.sandbox,
            mode,
            sandbox,
            home.as_deref(),
            &own_files,
        )?;
        // The environment commands start from, read once here: no library crate reads it.
        confinement.set_environment(std::env::vars_os());
        let (mut upstreams, mut upstream_origins): (Vec<_>, std::collections::BTreeMap<_, _>) =
            upstream_specs(&origin, &file.upstreams, &file.sandbox, &base, &confinement)?
                .into_iter()
                .map(|(spec, origin)| {
                    let name = spec.name.clone();
                    (spec, (name, origin))
                })
                .unzip();
        let project_policies = project.as_ref().map(|(source, trust, _)| {
            (
                source.policies.as_slice(),
                *trust == crate::trust::TrustState::Trusted,
            )
        });
        let (policy, withheld) = policies(&origin, &file, policy_file, project_policies)?;
        let mut hooks = hooks::hook_specs(&origin, &file.hooks, &base)?;
        let mut tools: Vec<ToolOverride> = file
            .tools
            .iter()
            .map(|section| tool_override(&origin, section.get_ref()))
            .collect();
        let mut profiles = profiles;
        let project = match project {
            None => None,
            Some((source, trust, mut split)) => {
                tools.append(&mut split.tools);
                for withheld in withheld {
                    let file = Path::new(&withheld.file);
                    let file = file.strip_prefix(&source.root).unwrap_or(file);
                    split.pending.push(toolgate_console::ProjectItem {
                        place: format!("{}:{}", file.display(), withheld.line),
                        what: format!("a policy is not loaded: {}", withheld.why),
                    });
                }
                if trust == crate::trust::TrustState::Trusted {
                    let dir = source.root.join(project::PROJECT_DIR);
                    for mut hook in hooks::hook_specs(&source.origin, &source.file.hooks, &dir)? {
                        source.check_trusted_files(&hook)?;
                        hook.trusted = source.trusted_files();
                        if hooks.iter().any(|h| h.name == hook.name) {
                            return Err(source.origin.error(format!(
                                "hook `{}` is configured by the user too",
                                hook.name
                            )));
                        }
                        hooks.push(hook);
                    }
                    for (spec, mut origin) in upstream_specs(
                        &source.origin,
                        &source.file.upstreams,
                        &file.sandbox,
                        &source.root,
                        &confinement,
                    )? {
                        if upstreams.iter().any(|u| u.name == spec.name) {
                            return Err(source.origin.error(format!(
                                "upstream `{}` is configured by the user too",
                                spec.name
                            )));
                        }
                        origin.trusted = source.trusted_files();
                        let mut spec = spec;
                        spec.bound_files = upstream_files::bound_files(&spec, &origin.trusted);
                        upstream_origins.insert(spec.name.clone(), origin);
                        upstreams.push(spec);
                    }
                    for mut profile in self::profiles(&source.origin, &source.file)? {
                        profile.file = Some(source.origin.display_path());
                        profiles.push(profile);
                    }
                }
                Some(project::ProjectState {
                    root: source.root,
                    closure: source.closure,
                    trust,
                    applied: split.applied,
                    pending: split.pending,
                    ignored: split.ignored,
                })
            }
        };
        Ok(Settings {
            policy_path,
            policy,
            bounds: bounds(&file.limits),
            tools,
            profiles,
            serve: ServeSettings {
                dangerous_bind_any: file.serve.dangerous_bind_any,
                allowed_hosts: file.serve.allowed_hosts.clone(),
                tokens: file
                    .serve
                    .tokens
                    .iter()
                    .map(|token| {
                        let token = token.get_ref();
                        TokenSetting {
                            env: token.env.get_ref().clone(),
                            value: std::env::var(token.env.get_ref())
                                .ok()
                                .filter(|t| !t.is_empty()),
                            actor: token.actor.clone(),
                            profile: token.profile.get_ref().clone(),
                            env_line: origin.line(token.env.span()),
                            profile_line: origin.line(token.profile.span()),
                        }
                    })
                    .collect(),
                sessions,
            },
            approval,
            audit,
            upstreams,
            upstream_origins,
            sandbox: SandboxSettings {
                mode,
                confinement: Arc::new(confinement),
                limits: file.sandbox.limits.clone(),
                dangerous_unconfined_network: file.sandbox.dangerous_unconfined_network,
            },
            hooks,
            state_dir,
            config_dir: user_config_dir(),
            project,
            origin,
        })
    }

    /// The configuration file, or `None` when running on defaults.
    pub fn path(&self) -> Option<&Path> {
        self.origin.path.as_deref()
    }

    pub fn display_path(&self) -> String {
        self.origin.display_path()
    }

    /// An error at `line` of the configuration file (0: the file as a whole).
    pub fn error_at_line(&self, line: usize, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.display_path(),
            line,
            message: message.into(),
        }
    }

    /// An error at `line` of `file`, or of the configuration file when `None`.
    pub fn error_in(
        &self,
        file: Option<&str>,
        line: usize,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: file.map_or_else(|| self.display_path(), str::to_owned),
            line,
            message: message.into(),
        }
    }

    /// An error about the configuration as a whole.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        self.origin.error(message)
    }

    /// The audit log's file: `[audit] path`, resolved against the configuration's directory;
    /// else `audit.db` in the state directory.
    pub fn audit_path(&self) -> Result<PathBuf, ConfigError> {
        self.audit.path.clone().ok_or_else(|| {
            self.error("no place for the audit log: set `[audit] path`, XDG_STATE_HOME or HOME")
        })
    }

    /// The tokens `[[serve.token]]` configures, read from the environment variables it
    /// names, for `toolgate serve --http`. A variable that is unset or holds a weak token stops
    /// the server from starting (their profiles are checked by
    /// [`Settings::configured_tools`]).
    pub fn token_table(&self) -> Result<TokenTable, ConfigError> {
        let mut table = TokenTable::new();
        for token in &self.serve.tokens {
            let name = &token.env;
            let Some(value) = &token.value else {
                return Err(self.error_at_line(
                    token.env_line,
                    format!(
                        "the environment variable `{name}` that should hold this token is not set"
                    ),
                ));
            };
            let principal = Principal::new(&token.actor, &token.profile);
            table
                .insert(value.trim(), principal)
                .map_err(|e| self.error_at_line(token.env_line, format!("`{name}`: {e}")))?;
        }
        Ok(table)
    }

    /// The profiles `[approval] elicitation` names.
    pub fn elicitation_profiles(&self) -> std::collections::BTreeSet<String> {
        self.approval
            .elicitation
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// A copy of [`Settings::policy`] to prepare for a registry: the policies are not parsed
    /// again.
    pub fn policy_engine(&self) -> PolicyEngine {
        self.policy.clone()
    }
}

impl ToolOverride {
    /// Applies this section's changes to `entry`. A narrowing section lowers each limit to
    /// the least of the two and keeps only the surfaces and profiles both name; it carries
    /// nothing else that could widen (see `project::narrow_tool`).
    pub fn apply(&self, entry: &mut ToolEntry) {
        if self.narrowing {
            let limits = &mut entry.limits;
            if let Some(v) = self.timeout_ms {
                limits.timeout_ms = limits.timeout_ms.min(v);
            }
            if let Some(v) = self.default_timeout_ms {
                limits.default_timeout_ms = Some(limits.default_timeout_ms.map_or(v, |d| d.min(v)));
            }
            if let Some(v) = self.max_output_bytes {
                limits.max_output_bytes = limits.max_output_bytes.min(v);
            }
            if let Some(v) = self.max_results {
                limits.max_results = limits.max_results.min(v);
            }
            if let Some(v) = &self.surfaces {
                // On no surface both allow, the tool is off: the registry refuses an entry
                // with no surface, and would blame the user's configuration.
                if entry.surfaces.iter().any(|s| v.contains(s)) {
                    entry.surfaces.retain(|s| v.contains(s));
                } else {
                    entry.enabled = false;
                }
            }
            if let Some(v) = &self.profiles {
                entry.profiles.retain(|p| v.contains(p));
            }
            if self.enabled == Some(false) {
                entry.enabled = false;
            }
            if self.approval == Some(ApprovalMode::EachCall) {
                entry.approval = ApprovalMode::EachCall;
            }
            return;
        }
        if let Some(v) = self.enabled {
            entry.enabled = v;
        }
        if let Some(v) = self.version {
            entry.version = v;
        }
        if let Some(v) = &self.capability {
            entry.capability.clone_from(v);
        }
        if let Some(v) = self.effect {
            entry.effect = Some(v);
        }
        if let Some(v) = &self.surfaces {
            entry.surfaces.clone_from(v);
        }
        if let Some(v) = &self.profiles {
            entry.profiles.clone_from(v);
        }
        if let Some(v) = self.approval {
            entry.approval = v;
        }
        if let Some(v) = &self.description {
            entry.description = Some(v.clone());
        }
        if let Some(v) = self.timeout_ms {
            entry.limits.timeout_ms = v;
        }
        if let Some(v) = self.default_timeout_ms {
            entry.limits.default_timeout_ms = Some(v);
        }
        if let Some(v) = self.max_output_bytes {
            entry.limits.max_output_bytes = v;
        }
        if let Some(v) = self.max_results {
            entry.limits.max_results = v;
        }
    }
}

fn tool_override(origin: &Located, section: &ToolSection) -> ToolOverride {
    ToolOverride {
        name: section.name.get_ref().clone(),
        line: origin.line(section.name.span()),
        file: None,
        narrowing: false,
        enabled: section.enabled,
        version: section.version,
        capability: section.capability.clone(),
        effect: section.effect,
        surfaces: section.surfaces.clone(),
        profiles: section.profiles.clone(),
        approval: section.approval,
        description: section.description.clone(),
        timeout_ms: section.timeout_ms,
        default_timeout_ms: section.default_timeout_ms,
        max_output_bytes: section.max_output_bytes,
        max_results: section.max_results,
    }
}

/// The `[profiles.NAME]` sections, each tool with its line. `default` is every tool's own.
fn profiles(origin: &Located, file: &ConfigFile) -> Result<Vec<ProfileTools>, ConfigError> {
    let mut profiles = Vec::new();
    for (profile, section) in &file.profiles {
        if profile.get_ref() == toolgate_core::registry::DEFAULT_PROFILE {
            return Err(origin.error_at(
                profile.span(),
                "the `default` profile is defined by each tool's `profiles`; it cannot be redefined",
            ));
        }
        profiles.push(ProfileTools {
            name: profile.get_ref().clone(),
            file: None,
            tools: section
                .tools
                .iter()
                .map(|t| (t.get_ref().clone(), origin.line(t.span())))
                .collect(),
        });
    }
    Ok(profiles)
}

/// The default policy (unless turned off) and the operator's file, parsed and validated: the
/// one place Cedar text is parsed. A policy file that cannot be read or parsed stops toolgate
/// from starting.
fn policies(
    origin: &Located,
    file: &ConfigFile,
    policy_file: Option<(PathBuf, std::ops::Range<usize>)>,
    project: Option<(&[(String, String)], bool)>,
) -> Result<(PolicyEngine, Vec<toolgate_core::Withheld>), ConfigError> {
    let mut sources = Vec::new();
    if file.default_policy.unwrap_or(true) {
        sources.push(("<default policy>".to_owned(), DEFAULT_POLICY.to_owned()));
    }
    if let Some((path, span)) = policy_file {
        let text = std::fs::read_to_string(&path).map_err(|e| {
            origin.error_at(
                span,
                format!("cannot read policy file `{}`: {e}", path.display()),
            )
        })?;
        sources.push((path.display().to_string(), text));
    }
    // A project's policies: beside the user's when trusted, else only as far as they narrow.
    let mut narrowing = Vec::new();
    match project {
        Some((policies, true)) => sources.extend_from_slice(policies),
        Some((policies, false)) => narrowing.extend_from_slice(policies),
        None => {}
    }
    policy_engine_of(&sources, &narrowing, &origin.display_path())
}

/// The `[[upstream]]` sections, checked, with their environment read from toolgate's own
/// and the confinement `[sandbox]` asks for (see [`upstream_confinement`]), each with where
/// it is configured.
fn upstream_specs(
    origin: &Located,
    sections: &[Spanned<toolgate_upstream::UpstreamSection>],
    sandbox: &file::SandboxSection,
    base: &Path,
    commands: &Confinement,
) -> Result<Vec<(UpstreamSpec, upstream_files::UpstreamOrigin)>, ConfigError> {
    if sections.is_empty() {
        return Ok(Vec::new());
    }
    let confinement = upstream_confinement(commands, sandbox);
    sections
        .iter()
        .map(|section| {
            section
                .get_ref()
                .check(base, |name| std::env::var(name).ok(), confinement.clone())
                .map(|spec| {
                    let at = (origin.display_path(), origin.line(section.span()));
                    (
                        spec,
                        upstream_files::UpstreamOrigin {
                            at,
                            ..Default::default()
                        },
                    )
                })
                .map_err(|e| origin.error_at(section.span(), e.to_string()))
        })
        .collect()
}

/// How every upstream process is confined, from `[sandbox]` as resolved for `commands`: its
/// mode (`dangerous-unconfined` leaves upstreams unconfined too), the deny list commands get
/// (toolgate's own files, the credential stores, the shared scratch places, the operator's
/// `deny` and `allow`), `dangerous_allow_unix_sockets`, `read`, the rlimits and the `resolve`
/// pins of the proxies. Not `write` nor `dangerous_unconfined_network`: those widen what
/// commands reach, and an upstream gets only what its own `[upstream.sandbox]` grants.
fn upstream_confinement(
    commands: &Confinement,
    section: &file::SandboxSection,
) -> UpstreamConfinement {
    let Some(sandbox) = commands.sandbox() else {
        return UpstreamConfinement::dangerous_unconfined();
    };
    let mut confinement = UpstreamConfinement::new(*sandbox, commands.denied().clone());
    confinement.guard_files_that_run_later(toolgate_tools::guard_files_that_run_later);
    confinement.set_unix_sockets(commands.unix_sockets());
    for path in commands.read_paths() {
        confinement.add_readable(path.clone());
    }
    confinement.set_limits(rlimits(&section.limits));
    for (host, addresses) in &section.resolve {
        confinement.pin(host, addresses.clone());
    }
    confinement
}

/// The rlimits `[sandbox.limits]` sets in every command and upstream process.
fn rlimits(limits: &SandboxLimits) -> Limits {
    Limits {
        file_size: Some(limits.file_size_bytes.unwrap_or(DEFAULT_FILE_SIZE_BYTES)),
        address_space: limits.address_space_bytes,
        processes: limits.processes,
        open_files: limits.open_files,
    }
}

/// The confinement `[sandbox]` asks for, on a machine whose sandbox is `sandbox`, with the
/// default deny list for `home` and `own_files` (toolgate's). A path that is neither absolute
/// nor `~/…`, or an `allow` entry that names no default entry, is an error at its line.
fn confinement(
    origin: &Located,
    section: &file::SandboxSection,
    mode: Mode,
    sandbox: Sandbox,
    home: Option<&Path>,
    own_files: &[PathBuf],
) -> Result<Confinement, ConfigError> {
    let mut confinement = match mode {
        Mode::DangerousUnconfined => Confinement::dangerous_unconfined(),
        Mode::Enforce => Confinement::new(sandbox, home, own_files),
    };
    // The credential stores where the XDG variables, or a store's own variable, put them,
    // when that is elsewhere than `~/.config` and its siblings (which `Confinement::new`
    // denies already); before `allow`, so that the operator can lift one of these too.
    if mode == Mode::Enforce
        && let Some(dirs) = user_dirs(home)
    {
        for store in DenyList::credential_stores(&dirs) {
            confinement.deny(&store);
        }
    }
    let resolved = |path: &Spanned<String>| {
        resolve(path.get_ref(), home).map_err(|message| origin.error_at(path.span(), message))
    };
    for path in &section.deny {
        confinement.deny(&resolved(path)?);
    }
    for path in &section.allow {
        if !confinement.allow(&resolved(path)?) {
            return Err(origin.error_at(
                path.span(),
                format!(
                    "[sandbox] allow `{}` is not on the deny list; its entries: {}",
                    path.get_ref(),
                    shown(confinement.denied().entries())
                ),
            ));
        }
    }
    for path in &section.read {
        confinement.readable(resolved(path)?);
    }
    for path in &section.write {
        confinement.writable(resolved(path)?);
    }
    if section.dangerous_unconfined_network {
        confinement.dangerous_unconfined_network();
    }
    if section.dangerous_allow_unix_sockets {
        confinement.dangerous_allow_unix_sockets();
    }
    for (host, addresses) in &section.resolve {
        confinement.pin(host, addresses.clone());
    }
    let limits = &section.limits;
    confinement.set_limits(rlimits(limits));
    confinement.set_cgroup_limits(CgroupLimits {
        pids_max: Some(limits.pids_max.unwrap_or(DEFAULT_PIDS_MAX)),
        memory_max: limits.memory_max_bytes,
    });
    Ok(confinement)
}

/// toolgate's own files, denied to every command: the state directory, the configuration
/// directory, the configuration and policy files in use, and the audit log with its journal
/// files (`audit.db*`).
fn toolgate_paths(
    state_dir: &StateDir,
    config: Option<&Path>,
    policy: Option<&Path>,
    audit: Option<&Path>,
) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    let state = &state_dir.resolved;
    paths.extend(state.clone());
    paths.extend(user_config_dir());
    paths.extend(config.map(absolute));
    paths.extend(policy.map(absolute));
    if let Some(audit) = audit
        && !state.as_ref().is_some_and(|dir| audit.starts_with(dir))
    {
        let audit = absolute(audit);
        let mut prefix = audit.clone().into_os_string();
        prefix.push("*");
        paths.push(PathBuf::from(prefix));
        paths.push(audit);
    }
    paths
}

/// Normalize bounds: the defaults, overridden where the file says so.
fn bounds(limits: &file::BoundsSection) -> NormalizeBounds {
    let mut bounds = NormalizeBounds::default();
    if let Some(v) = limits.max_name_bytes {
        bounds.max_name_bytes = v;
    }
    if let Some(v) = limits.max_argument_bytes {
        bounds.max_argument_bytes = v;
    }
    if let Some(v) = limits.max_depth {
        bounds.max_depth = v;
    }
    bounds
}

/// `[approval] timeout_secs`, between 1 s and a day.
fn approval_timeout(origin: &Located, file: &ConfigFile) -> Result<Duration, ConfigError> {
    let Some(secs) = &file.approval.timeout_secs else {
        return Ok(Duration::from_secs(DEFAULT_APPROVAL_TIMEOUT_SECS));
    };
    let value = *secs.get_ref();
    if value == 0 || value > MAX_APPROVAL_TIMEOUT_SECS {
        return Err(origin.error_at(
            secs.span(),
            format!(
                "approval timeout_secs `{value}` is out of range; use 1 to {MAX_APPROVAL_TIMEOUT_SECS}"
            ),
        ));
    }
    Ok(Duration::from_secs(value))
}

/// `[approval] login_link_secs`, between 1 s and an hour.
fn login_link_ttl(origin: &Located, file: &ConfigFile) -> Result<Duration, ConfigError> {
    let Some(secs) = &file.approval.login_link_secs else {
        return Ok(toolgate_console::DEFAULT_LOGIN_TTL);
    };
    let value = *secs.get_ref();
    if value == 0 || value > MAX_LOGIN_LINK_SECS {
        return Err(origin.error_at(
            secs.span(),
            format!(
                "approval login_link_secs `{value}` is out of range; use 1 to {MAX_LOGIN_LINK_SECS}"
            ),
        ));
    }
    Ok(Duration::from_secs(value))
}

/// `[serve]`'s session limits, the defaults where the file says nothing. Each number must be
/// at least 1, and one token may not be allowed more sessions than all together.
fn session_limits(origin: &Located, file: &ConfigFile) -> Result<SessionLimits, ConfigError> {
    let serve = &file.serve;
    let mut limits = SessionLimits::default();
    let in_range = |key: &str, value: &Spanned<u64>, max: u64| {
        let v = *value.get_ref();
        if v == 0 || v > max {
            return Err(origin.error_at(
                value.span(),
                format!("[serve] {key} `{v}` is out of range; use 1 to {max}"),
            ));
        }
        Ok(v)
    };
    if let Some(max) = &serve.max_sessions {
        limits.max_sessions =
            usize::try_from(in_range("max_sessions", max, MAX_SESSIONS)?).unwrap_or(usize::MAX);
    }
    limits.max_sessions_per_token = limits.max_sessions_per_token.min(limits.max_sessions);
    if let Some(per_token) = &serve.max_sessions_per_token {
        let v = in_range("max_sessions_per_token", per_token, MAX_SESSIONS)?;
        let v = usize::try_from(v).unwrap_or(usize::MAX);
        if v > limits.max_sessions {
            return Err(origin.error_at(
                per_token.span(),
                format!(
                    "[serve] max_sessions_per_token `{v}` is more than max_sessions `{}`, which no token could reach; raise max_sessions too",
                    limits.max_sessions
                ),
            ));
        }
        limits.max_sessions_per_token = v;
    }
    if let Some(secs) = &serve.session_idle_timeout_secs {
        limits.idle_timeout = Duration::from_secs(in_range(
            "session_idle_timeout_secs",
            secs,
            MAX_SESSION_IDLE_TIMEOUT_SECS,
        )?);
    }
    Ok(limits)
}

fn check_duplicates(origin: &Located, file: &ConfigFile) -> Result<(), ConfigError> {
    let mut seen = std::collections::BTreeSet::new();
    for tool in &file.tools {
        let name = &tool.get_ref().name;
        if !seen.insert(name.get_ref().as_str()) {
            return Err(origin.error_at(
                name.span(),
                format!("tool `{}` is configured twice", name.get_ref()),
            ));
        }
    }
    let mut upstreams = std::collections::BTreeSet::new();
    for upstream in &file.upstreams {
        let name = &upstream.get_ref().name;
        if !upstreams.insert(name.as_str()) {
            return Err(origin.error_at(
                upstream.span(),
                format!("upstream `{name}` is configured twice"),
            ));
        }
    }
    Ok(())
}

/// The user's configuration as written: `explicit`, else the file in the XDG configuration
/// directory if there is one, else nothing (the defaults).
fn user_file(explicit: Option<&Path>) -> Result<(Located, ConfigFile), ConfigError> {
    let path = match explicit {
        Some(path) => Some(path.to_owned()),
        None => user_config_path().filter(|p| p.is_file()),
    };
    let Some(path) = path else {
        return Ok((Located::default(), ConfigFile::default()));
    };
    let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
        file: path.display().to_string(),
        line: 0,
        message: format!("cannot read the configuration: {e}"),
    })?;
    Located::parse(&path, text)
}

fn user_config_path() -> Option<PathBuf> {
    Some(user_config_dir()?.join("toolgate.toml"))
}

/// toolgate's directory in the user's XDG configuration directory.
fn user_config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("toolgate"))
}

/// Where the user's files are: `home`, the XDG base directories the environment names (a
/// relative value is ignored, as the XDG specification says), and the values of the variables
/// that move a credential store (`GNUPGHOME`, `DOCKER_CONFIG`, …; `UserDirs::variables`).
fn user_dirs(home: Option<&Path>) -> Option<UserDirs> {
    let var = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let mut dirs = UserDirs::new(home?);
    dirs.config_home = var("XDG_CONFIG_HOME");
    dirs.data_home = var("XDG_DATA_HOME");
    dirs.cache_home = var("XDG_CACHE_HOME");
    dirs.runtime_dir = var("XDG_RUNTIME_DIR");
    for name in UserDirs::variables() {
        if let Some(value) = std::env::var_os(name) {
            dirs.moved.push((name.to_owned(), value));
        }
    }
    Some(dirs)
}

/// `text` as a path: absolute, or under `home` for `~/…`.
fn resolve(text: &str, home: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(rest) = text.strip_prefix("~/") {
        return home
            .map(|h| h.join(rest))
            .ok_or_else(|| format!("`{text}` names the home directory, and HOME is not set"));
    }
    let path = PathBuf::from(text);
    if path.is_absolute() {
        Ok(path)
    } else {
        Err(format!(
            "sandbox path `{text}` must be absolute or start with `~/`"
        ))
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

fn shown(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The policy engine of `sources`, each policy validated against toolgate's schema. A policy
/// that does not parse or does not fit is an error at its own place in the policy file,
/// printed `rules.cedar:3:12: …` like a compiler's; any other error is about `file`, the
/// configuration that names the policies.
fn borrowed(sources: &[(String, String)]) -> Vec<(&str, &str)> {
    sources
        .iter()
        .map(|(name, text)| (name.as_str(), text.as_str()))
        .collect()
}

fn policy_engine_of(
    sources: &[(String, String)],
    narrowing: &[(String, String)],
    file: &str,
) -> Result<(PolicyEngine, Vec<toolgate_core::Withheld>), ConfigError> {
    let (sources, narrowing) = (borrowed(sources), borrowed(narrowing));
    PolicyEngine::from_sources_narrowed(&sources, &narrowing).map_err(|e| match e.location() {
        // A `ConfigError` prints `file:line: message` and has no column: the policy file's
        // name carries the line, so that the column follows it.
        Some((policy_file, line, column)) => ConfigError {
            file: format!("{policy_file}:{line}"),
            line: column,
            message: e.reason(),
        },
        None => ConfigError {
            file: file.to_owned(),
            line: 0,
            message: format!("bad policy: {e}"),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Settings, ConfigError> {
        Settings::parse(Path::new("t.toml"), text.to_owned())
    }

    #[test]
    fn empty_file_is_the_defaults() {
        let settings = parse("").unwrap();
        assert!(settings.tools.is_empty());
        let default_policy = PolicyEngine::default_policy().unwrap().len();
        assert_eq!(
            settings.policy.len(),
            default_policy,
            "the default policy alone"
        );
        assert_eq!(
            Settings::defaults().unwrap().policy.len(),
            default_policy,
            "no file at all means the default policy"
        );
        assert_eq!(settings.bounds, NormalizeBounds::default());
        let off = parse("default_policy = false\n").unwrap();
        assert!(off.policy.is_empty());
        assert_eq!(settings.approval.login_link_ttl.as_secs(), 300);
        let short = parse("[approval]\nlogin_link_secs = 2\n").unwrap();
        assert_eq!(short.approval.login_link_ttl.as_secs(), 2);
    }

    #[test]
    fn the_audit_log_is_relative_to_the_configuration() {
        let settings = Settings::parse(
            Path::new("/etc/toolgate/t.toml"),
            "[audit]\npath = \"logs/audit.db\"\n".to_owned(),
        )
        .unwrap();
        assert_eq!(
            settings.audit_path().unwrap(),
            Path::new("/etc/toolgate/logs/audit.db")
        );
        assert!(!settings.audit.store_values);
    }

    #[test]
    fn by_default_the_audit_log_is_in_the_state_directory() {
        let settings = parse("").unwrap();
        let state = StateDir::from_environment();
        assert_eq!(settings.state_dir.dir, state.dir);
        assert_eq!(
            settings.audit.path,
            state.dir.map(|dir| dir.join("audit.db"))
        );
    }

    #[test]
    fn upstream_endpoints_are_one_or_the_other() {
        let settings = parse(
            "[[upstream]]\nname = \"fs\"\ncommand = [\"node\", \"fs.js\"]\n\n\
             [[upstream]]\nname = \"remote\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        )
        .unwrap();
        let endpoints: Vec<&toolgate_upstream::Endpoint> =
            settings.upstreams.iter().map(|u| &u.endpoint).collect();
        assert_eq!(
            endpoints,
            [
                &toolgate_upstream::Endpoint::Command {
                    program: "node".to_owned(),
                    args: vec!["fs.js".to_owned()]
                },
                &toolgate_upstream::Endpoint::Http {
                    url: "http://127.0.0.1:1/mcp".to_owned()
                }
            ]
        );
    }

    #[test]
    fn upstreams_are_confined_as_the_sandbox_section_says() {
        let upstream = "[[upstream]]\nname = \"fs\"\ncommand = [\"server\"]\n";
        let enforced = parse(upstream).unwrap();
        let spec = enforced.upstreams.first().unwrap();
        assert!(spec.confinement.sandbox().is_some());
        assert_eq!(
            spec.confinement.denied().entries(),
            enforced.sandbox.confinement.denied().entries(),
            "the deny list commands get"
        );
        let unconfined = parse(&format!(
            "[sandbox]\nmode = \"dangerous-unconfined\"\n\n{upstream}"
        ))
        .unwrap();
        assert!(
            unconfined
                .upstreams
                .first()
                .unwrap()
                .confinement
                .sandbox()
                .is_none()
        );
    }

    #[test]
    fn a_token_is_read_once_and_never_shown() {
        let settings =
            parse("[[serve.token]]\nenv = \"PATH\"\nactor = \"a\"\nprofile = \"default\"\n")
                .unwrap();
        let token = settings.serve.tokens.first().unwrap();
        assert_eq!(token.value, std::env::var("PATH").ok());
        assert_eq!((token.env_line, token.profile_line), (2, 4));
        let shown = format!("{settings:?}");
        assert!(!shown.contains(token.value.as_deref().unwrap()), "{shown}");
    }

    #[test]
    fn session_limits_default_and_follow_the_file() {
        let defaults = parse("").unwrap().serve.sessions;
        assert_eq!(defaults, SessionLimits::default());
        assert_eq!(
            (defaults.max_sessions, defaults.max_sessions_per_token),
            (128, 64)
        );
        assert_eq!(defaults.idle_timeout.as_secs(), 600);
        let small = parse("[serve]\nmax_sessions = 4\n").unwrap().serve.sessions;
        assert_eq!((small.max_sessions, small.max_sessions_per_token), (4, 4));
        let set = parse(
            "[serve]\nmax_sessions = 200\nmax_sessions_per_token = 50\nsession_idle_timeout_secs = 2\n",
        )
        .unwrap()
        .serve
        .sessions;
        assert_eq!((set.max_sessions, set.max_sessions_per_token), (200, 50));
        assert_eq!(set.idle_timeout.as_secs(), 2);
    }

    #[test]
    fn errors_name_file_and_line() {
        let cases = [
            ("\n\nbogus = 1\n", 3, "unknown field `bogus`"),
            (
                "[[tool]]\nname = \"read_file\"\nenabeld = false\n",
                3,
                "unknown field `enabeld`",
            ),
            (
                "[[tool]]\nname = \"a\"\n[[tool]]\nname = \"a\"\n",
                4,
                "configured twice",
            ),
            (
                "[[tool]]\nname = \"a\"\neffect = \"dangerous\"\n",
                3,
                "unknown value `dangerous`",
            ),
            ("[limits]\nmax_depth = \"deep\"\n", 2, "invalid type"),
            (
                "[serve]\n\n[[serve.token]]\nenv = \"T\"\nactor = \"a\"\ntoken = \"secret\"\n",
                6,
                "unknown field `token`",
            ),
            ("x = [\n", 1, "unclosed array"),
            (
                "[[upstream]]\nname = \"a\"\ncommand = [\"x\"]\n\n[[upstream]]\nname = \"a\"\ncommand = [\"y\"]\n",
                5,
                "upstream `a` is configured twice",
            ),
            (
                "[[upstream]]\nname = \"a\"\ncomand = [\"x\"]\n",
                3,
                "unknown field `comand`",
            ),
            (
                "[audit]\npath = \"a.db\"\npth = 1\n",
                3,
                "unknown field `pth`",
            ),
            (
                "[approval]\nlogin_link_secs = 0\n",
                2,
                "login_link_secs `0` is out of range; use 1 to 3600",
            ),
            (
                "[approval]\n\nlogin_link_secs = 3601\n",
                3,
                "login_link_secs `3601` is out of range",
            ),
            ("[serve]\n\nmax_sessions = \"many\"\n", 3, "invalid type"),
            ("[serve]\nmax_sessions = -1\n", 2, "invalid value"),
            (
                "[serve]\nmax_sessions = 0\n",
                2,
                "out of range; use 1 to 100000",
            ),
            (
                "[serve]\nmax_sessions = 8\nmax_sessions_per_token = 9\n",
                3,
                "more than max_sessions `8`",
            ),
            (
                "[serve]\nsession_idle_timeout_secs = 86401\n",
                2,
                "out of range; use 1 to 86400",
            ),
            ("[serve]\nsession_idle_timeout = 60\n", 2, "unknown field"),
            (
                "[serve]\nsession_idle_timeout_secs = 1.5\n",
                2,
                "invalid type",
            ),
            (
                "[[upstream]]\nname = \"a\"\ncommand = []\n",
                1,
                "needs a `command`",
            ),
            (
                "\n[sandbox]\ndeny = [\"relative\"]\n",
                3,
                "must be absolute or start with `~/`",
            ),
            ("[profiles.default]\ntools = []\n", 1, "cannot be redefined"),
        ];
        for (text, line, needle) in cases {
            let error = parse(text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}: {error}");
            assert!(
                error.to_string().starts_with(&format!("t.toml:{line}: ")),
                "{error}"
            );
            assert!(error.message.contains(needle), "{text:?}: {error}");
        }
    }
}
