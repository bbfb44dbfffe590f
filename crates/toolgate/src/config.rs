//! `toolgate.toml`: the operator's registry entries, profiles, policy file and bounds.
//!
//! Parsing is strict. An unknown key, an unknown tool, a profile naming a tool that does not
//! exist, or the same tool twice is an error that names the file and line; toolgate refuses
//! to start rather than guess. With no configuration at all the defaults apply, and they are
//! safe: builtin read-only tools only, the default policy, approvals refused headlessly.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;
use toolgate_core::{ApprovalMode, EffectClass, NormalizeBounds, Surface, Version};

/// A configuration problem, located in its file.
#[derive(Debug, Error)]
#[error("{file}:{line}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// The file as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// An operator's Cedar policy file, relative to this file.
    pub policy: Option<Spanned<String>>,
    /// Whether the built-in default policy is loaded alongside the operator's (default true).
    pub default_policy: Option<bool>,
    #[serde(default)]
    pub limits: BoundsSection,
    #[serde(default, rename = "tool")]
    pub tools: Vec<Spanned<ToolSection>>,
    #[serde(default)]
    pub profiles: BTreeMap<Spanned<String>, ProfileSection>,
    #[serde(default)]
    pub serve: ServeSection,
    /// Upstream MCP servers whose tools may be admitted (see `toolgate_upstream`).
    #[serde(default, rename = "upstream")]
    pub upstreams: Vec<Spanned<toolgate_upstream::UpstreamSection>>,
    #[serde(default)]
    pub audit: AuditSection,
    #[serde(default)]
    pub approval: ApprovalSection,
    /// How approved commands are confined (see [`crate::sandbox`]).
    #[serde(default)]
    pub sandbox: crate::sandbox::SandboxSection,
}

/// `[audit]`: where the audit log lives and what it keeps.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSection {
    /// The log's SQLite file, relative to this file (default: the user's state directory).
    pub path: Option<Spanned<String>>,
    /// Also keep each call's redacted messages and output: a local debugging aid, off by
    /// default, since they can quote arguments and file contents.
    #[serde(default)]
    pub debug_store_redacted_values: bool,
}

/// `[approval]`: how long a call waits for a person in the approval console.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSection {
    /// Seconds before an unanswered request is `approval_expired` (default 300).
    pub timeout_secs: Option<Spanned<u64>>,
    /// Profiles whose sessions may also be asked by MCP elicitation, when their client can
    /// show a form (default: none).
    #[serde(default)]
    pub elicitation: Vec<Spanned<String>>,
}

/// The approval timeout when `[approval] timeout_secs` is not set.
pub const DEFAULT_APPROVAL_TIMEOUT_SECS: u64 = 300;
/// The longest approval timeout: a call should not hold a client for longer than a day.
pub const MAX_APPROVAL_TIMEOUT_SECS: u64 = 24 * 60 * 60;

/// Bounds on requests, before anything is parsed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsSection {
    pub max_name_bytes: Option<usize>,
    pub max_argument_bytes: Option<usize>,
    pub max_depth: Option<usize>,
}

/// One `[[tool]]`: changes to a known tool's registry entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSection {
    pub name: Spanned<String>,
    pub enabled: Option<bool>,
    pub version: Option<Version>,
    pub capability: Option<String>,
    pub effect: Option<EffectClass>,
    pub surfaces: Option<BTreeSet<Surface>>,
    pub profiles: Option<BTreeSet<String>>,
    pub approval: Option<ApprovalMode>,
    pub description: Option<String>,
    pub timeout_ms: Option<u64>,
    pub default_timeout_ms: Option<u64>,
    pub max_output_bytes: Option<usize>,
    pub max_results: Option<usize>,
}

/// One `[profiles.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSection {
    /// Tools added to this profile.
    #[serde(default)]
    pub tools: Vec<Spanned<String>>,
}

/// `[serve]`: how `toolgate serve --http` accepts requests.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeSection {
    /// Listen on a non-loopback address (as `--dangerous-bind-any`).
    #[serde(default)]
    pub dangerous_bind_any: bool,
    /// `Host` values accepted beyond the bound address and `localhost`, as `host:port`.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Bearer tokens and whom they stand for.
    #[serde(default, rename = "token")]
    pub tokens: Vec<Spanned<TokenSection>>,
    /// Most open sessions of all tokens together (default 128).
    pub max_sessions: Option<Spanned<u64>>,
    /// Most open sessions begun with any one token (default 64, or `max_sessions` if lower).
    pub max_sessions_per_token: Option<Spanned<u64>>,
    /// Seconds a session may go without a request before it ends (default 600).
    pub session_idle_timeout_secs: Option<Spanned<u64>>,
}

/// The most sessions `[serve] max_sessions` may allow: about 6 GB of sessions, beyond any
/// loopback server's needs; a larger number is more likely a typo than a plan.
pub const MAX_SESSIONS: u64 = 100_000;
/// The longest idle timeout of a session: a day, as for approvals.
pub const MAX_SESSION_IDLE_TIMEOUT_SECS: u64 = 24 * 60 * 60;

/// One `[[serve.token]]`. The token itself is never written in the file: `env` names the
/// environment variable that holds it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSection {
    pub env: Spanned<String>,
    pub actor: String,
    pub profile: Spanned<String>,
}

/// A loaded configuration, with where it came from.
#[derive(Debug, Default)]
pub struct Config {
    /// The file, or `None` when running on defaults.
    pub path: Option<PathBuf>,
    pub file: ConfigFile,
    text: String,
}

impl Config {
    /// `--config F` if given; else the user's `toolgate/toolgate.toml` in the XDG config
    /// directory if it exists; else the defaults.
    pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        let path = match explicit {
            Some(path) => Some(path.to_owned()),
            None => user_config_path().filter(|p| p.is_file()),
        };
        let Some(path) = path else {
            return Ok(Config::default());
        };
        let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: 0,
            message: format!("cannot read the configuration: {e}"),
        })?;
        Config::parse(&path, text)
    }

    /// Parses `text` as the file at `path`.
    pub fn parse(path: &Path, text: String) -> Result<Config, ConfigError> {
        let file: ConfigFile = toml::from_str(&text).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: e.span().map_or(0, |span| line_of(&text, span.start)),
            message: e.message().trim().to_owned(),
        })?;
        let config = Config {
            path: Some(path.to_owned()),
            file,
            text,
        };
        config.check_duplicates()?;
        config.approval_timeout()?;
        config.session_limits()?;
        Ok(config)
    }

    /// An error at `span` in this file.
    pub fn error_at(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.display_path(),
            line: line_of(&self.text, span.start),
            message: message.into(),
        }
    }

    /// An error about the file as a whole.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.display_path(),
            line: 0,
            message: message.into(),
        }
    }

    pub fn display_path(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "<defaults>".to_owned(), |p| p.display().to_string())
    }

    /// The operator's policy file, resolved against the configuration's directory.
    pub fn policy_path(&self) -> Option<(PathBuf, Range<usize>)> {
        let policy = self.file.policy.as_ref()?;
        let relative = Path::new(policy.get_ref());
        let base = self
            .path
            .as_ref()
            .and_then(|p| p.parent())
            .unwrap_or(Path::new("."));
        Some((base.join(relative), policy.span()))
    }

    /// The audit log's file: `[audit] path`, resolved against the configuration's directory;
    /// else `$XDG_STATE_HOME/toolgate/audit.db`; else `~/.local/state/toolgate/audit.db`.
    pub fn audit_path(&self) -> Result<PathBuf, ConfigError> {
        if let Some(path) = &self.file.audit.path {
            let base = self
                .path
                .as_ref()
                .and_then(|p| p.parent())
                .unwrap_or(Path::new("."));
            return Ok(base.join(path.get_ref()));
        }
        let base = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| {
                std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".local/state"))
            })
            .ok_or_else(|| {
                self.error("no place for the audit log: set `[audit] path`, XDG_STATE_HOME or HOME")
            })?;
        Ok(base.join("toolgate").join("audit.db"))
    }

    /// Whether the built-in default policy applies.
    pub fn default_policy(&self) -> bool {
        self.file.default_policy.unwrap_or(true)
    }

    /// Normalize bounds: the defaults, overridden where the file says so.
    pub fn bounds(&self) -> NormalizeBounds {
        let mut bounds = NormalizeBounds::default();
        let limits = &self.file.limits;
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
    pub fn approval_timeout(&self) -> Result<std::time::Duration, ConfigError> {
        let Some(secs) = &self.file.approval.timeout_secs else {
            return Ok(std::time::Duration::from_secs(
                DEFAULT_APPROVAL_TIMEOUT_SECS,
            ));
        };
        let value = *secs.get_ref();
        if value == 0 || value > MAX_APPROVAL_TIMEOUT_SECS {
            return Err(self.error_at(
                secs.span(),
                format!(
                    "approval timeout_secs `{value}` is out of range; use 1 to {MAX_APPROVAL_TIMEOUT_SECS}"
                ),
            ));
        }
        Ok(std::time::Duration::from_secs(value))
    }

    /// `[serve]`'s session limits, the defaults where the file says nothing. Each number must
    /// be at least 1, and one token may not be allowed more sessions than all together.
    pub fn session_limits(&self) -> Result<toolgate_mcp::http::SessionLimits, ConfigError> {
        let serve = &self.file.serve;
        let mut limits = toolgate_mcp::http::SessionLimits::default();
        let in_range = |key: &str, value: &Spanned<u64>, max: u64| {
            let v = *value.get_ref();
            if v == 0 || v > max {
                return Err(self.error_at(
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
                return Err(self.error_at(
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
            limits.idle_timeout = std::time::Duration::from_secs(in_range(
                "session_idle_timeout_secs",
                secs,
                MAX_SESSION_IDLE_TIMEOUT_SECS,
            )?);
        }
        Ok(limits)
    }

    /// The profiles `[approval] elicitation` names (checked against the registry's profiles
    /// when the gate is built).
    pub fn elicitation_profiles(&self) -> BTreeSet<String> {
        self.file
            .approval
            .elicitation
            .iter()
            .map(|p| p.get_ref().clone())
            .collect()
    }

    fn check_duplicates(&self) -> Result<(), ConfigError> {
        let mut seen = BTreeSet::new();
        for tool in &self.file.tools {
            let name = &tool.get_ref().name;
            if !seen.insert(name.get_ref().as_str()) {
                return Err(self.error_at(
                    name.span(),
                    format!("tool `{}` is configured twice", name.get_ref()),
                ));
            }
        }
        let mut upstreams = BTreeSet::new();
        for upstream in &self.file.upstreams {
            let name = &upstream.get_ref().name;
            if !upstreams.insert(name.as_str()) {
                return Err(self.error_at(
                    upstream.span(),
                    format!("upstream `{name}` is configured twice"),
                ));
            }
        }
        Ok(())
    }
}

fn user_config_path() -> Option<PathBuf> {
    Some(user_config_dir()?.join("toolgate.toml"))
}

/// toolgate's directory in the user's XDG configuration directory.
pub(crate) fn user_config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".config")))?;
    Some(base.join("toolgate"))
}

/// The 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(Path::new("t.toml"), text.to_owned())
    }

    #[test]
    fn empty_file_is_the_defaults() {
        let config = parse("").unwrap();
        assert!(config.file.tools.is_empty());
        assert!(config.default_policy());
        assert!(
            Config::default().default_policy(),
            "no file at all means the default policy"
        );
        assert_eq!(config.bounds(), NormalizeBounds::default());
    }

    #[test]
    fn the_audit_log_is_relative_to_the_configuration() {
        let config = Config::parse(
            Path::new("/etc/toolgate/t.toml"),
            "[audit]\npath = \"logs/audit.db\"\n".to_owned(),
        )
        .unwrap();
        assert_eq!(
            config.audit_path().unwrap(),
            Path::new("/etc/toolgate/logs/audit.db")
        );
        assert!(!config.file.audit.debug_store_redacted_values);
    }

    #[test]
    fn session_limits_default_and_follow_the_file() {
        let defaults = parse("").unwrap().session_limits().unwrap();
        assert_eq!(defaults, toolgate_mcp::http::SessionLimits::default());
        assert_eq!(
            (defaults.max_sessions, defaults.max_sessions_per_token),
            (128, 64)
        );
        assert_eq!(defaults.idle_timeout.as_secs(), 600);
        let small = parse("[serve]\nmax_sessions = 4\n").unwrap();
        let small = small.session_limits().unwrap();
        assert_eq!((small.max_sessions, small.max_sessions_per_token), (4, 4));
        let set = parse(
            "[serve]\nmax_sessions = 200\nmax_sessions_per_token = 50\nsession_idle_timeout_secs = 2\n",
        )
        .unwrap()
        .session_limits()
        .unwrap();
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
                "unknown variant",
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
