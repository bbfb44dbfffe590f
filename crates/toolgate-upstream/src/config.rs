//! `[[upstream]]` and `[[upstream.tool]]` as the operator writes them, and the checked values
//! the rest of the crate runs on.
//!
//! An upstream is a child process: its argv, its working directory, and the names of the
//! environment variables it may see. Nothing else of the gateway's environment is passed on
//! except `PATH` and `HOME` (see [`PASSED_THROUGH`]), so a secret in the gateway's environment
//! reaches an upstream only when the operator names it. What the process may read, write and
//! reach on the network is its `[upstream.sandbox]` (see [`crate::sandbox`]); besides it, it
//! gets `TMPDIR` (and the proxy's variables when it has network hosts).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use toolgate_core::{ApprovalMode, Descriptor, Digest, EffectClass, Limits, Surface, ToolEntry};

use crate::UpstreamError;
use crate::sandbox::{SandboxSection, UpstreamConfinement, UpstreamSandbox};

/// Variables every upstream gets, when the gateway has them: programs need `PATH` to find
/// their interpreter and `HOME` to find their own caches (`npx`, `uv`).
pub const PASSED_THROUGH: [&str; 2] = ["PATH", "HOME"];

/// The separator between an upstream's name and its tool's in a namespaced name.
pub const NAMESPACE_SEPARATOR: &str = "__";

/// One `[[upstream]]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamSection {
    pub name: String,
    /// Program and arguments; the program is looked up on `PATH` if it has no slash.
    #[serde(default)]
    pub command: Vec<String>,
    /// A streamable-HTTP endpoint instead of a command.
    pub url: Option<String>,
    /// Request headers for `url`, each taken from the named environment variable.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// PEM certificates trusted for an `https://` `url` besides the built-in web roots
    /// (a private CA), relative to the configuration file.
    pub ca_file: Option<PathBuf>,
    /// Working directory of the command, relative to the configuration file.
    pub cwd: Option<PathBuf>,
    /// Names of environment variables passed to the command, beyond `PATH` and `HOME`.
    #[serde(default)]
    pub env: Vec<String>,
    pub startup_timeout_ms: Option<u64>,
    pub call_timeout_ms: Option<u64>,
    /// How often the tool list is fetched again even without `list_changed`; 0 never.
    pub refresh_secs: Option<u64>,
    /// The longest line the upstream may write; a longer one is refused without being held.
    pub max_message_bytes: Option<usize>,
    /// The operator's admitted tools.
    #[serde(default, rename = "tool")]
    pub tools: Vec<AdmittedSection>,
    /// What the command may reach besides the defaults (see [`crate::sandbox`]).
    pub sandbox: Option<SandboxSection>,
}

/// One `[[upstream.tool]]`: an upstream tool the operator admitted, with its pin.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmittedSection {
    /// The tool's name on the upstream.
    pub tool: String,
    /// The name a model sees; default `<upstream>__<tool>`.
    pub name: Option<String>,
    /// Missing means `irreversible`: upstream annotations never decide this.
    pub effect: Option<EffectClass>,
    pub enabled: Option<bool>,
    pub capability: Option<String>,
    pub surfaces: Option<std::collections::BTreeSet<Surface>>,
    pub profiles: Option<std::collections::BTreeSet<String>>,
    pub approval: Option<ApprovalMode>,
    pub description: Option<String>,
    pub timeout_ms: Option<u64>,
    pub max_output_bytes: Option<usize>,
    /// Digest of the pinned descriptor, as the upstream named it.
    pub digest: String,
    /// The pinned descriptor, as canonical JSON.
    pub pinned: String,
}

/// How toolgate reaches an upstream: a process it starts, or a streamable-HTTP endpoint it
/// connects to. One or the other, never both, so nothing downstream has to guess which.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A child process; `program` is looked up on `PATH` if it has no slash.
    Command { program: String, args: Vec<String> },
    /// A streamable-HTTP endpoint, `http://` or `https://`, its host checked.
    Http { url: String },
}

/// A checked upstream.
#[derive(Debug, Clone)]
pub struct UpstreamSpec {
    pub name: String,
    pub endpoint: Endpoint,
    /// Request headers for an [`Endpoint::Http`], with their values.
    pub headers: Vec<(String, String)>,
    /// Certificates trusted for an `https://` endpoint besides the built-in web roots.
    pub ca_file: Option<PathBuf>,
    /// Working directory of an [`Endpoint::Command`].
    pub cwd: Option<PathBuf>,
    /// The environment the command gets, resolved from the gateway's own.
    pub env: Vec<(String, String)>,
    /// Files of the workspace its command runs that a person's trust in the project binds,
    /// each with its digest as trusted (`sha256:…`): the process is not started, a restart
    /// included, while one holds other bytes (see [`crate::connection::Connection::spawn`]).
    /// Set by the caller; empty for an upstream of the operator's own.
    pub bound_files: Vec<(PathBuf, String)>,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
    pub refresh: Option<Duration>,
    pub max_message_bytes: usize,
    pub admitted: Vec<Admission>,
    /// The upstream's own `[upstream.sandbox]`, checked.
    pub sandbox: UpstreamSandbox,
    /// How toolgate confines the process: the operator's settings (the deny list with
    /// toolgate's own files, limits, pins, or `dangerous-unconfined`), as the caller resolved
    /// them.
    pub confinement: UpstreamConfinement,
}

/// An admitted tool: the operator's entry and the descriptor it pinned.
#[derive(Debug, Clone)]
pub struct Admission {
    pub upstream: String,
    pub tool: String,
    pub entry: ToolEntry,
    /// The descriptor as the upstream served it when it was pinned (upstream's own name).
    pub pinned: Descriptor,
    pub digest: Digest,
}

const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 20_000;
const DEFAULT_CALL_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_REFRESH_SECS: u64 = 300;
const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

impl UpstreamSection {
    /// Checks the section; `base` is the configuration file's directory, `lookup` reads the
    /// gateway's environment (this crate reads none itself), and `confinement` is how the
    /// caller confines every upstream process.
    pub fn check(
        &self,
        base: &std::path::Path,
        lookup: impl Fn(&str) -> Option<String>,
        confinement: UpstreamConfinement,
    ) -> Result<UpstreamSpec, UpstreamError> {
        check_upstream_name(&self.name)?;
        let headers = self.check_url(&lookup)?;
        let endpoint = match (&self.url, self.command.split_first()) {
            (Some(url), _) => Endpoint::Http { url: url.clone() },
            (None, Some((program, args))) if !program.is_empty() => Endpoint::Command {
                program: program.clone(),
                args: args.to_vec(),
            },
            (None, _) => {
                return Err(UpstreamError::Config(format!(
                    "upstream `{}` needs a `command` (program and arguments) or a `url`",
                    self.name
                )));
            }
        };
        let mut env = Vec::new();
        for name in PASSED_THROUGH
            .iter()
            .copied()
            .chain(self.env.iter().map(String::as_str))
        {
            let well_formed =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !well_formed {
                return Err(UpstreamError::Config(format!(
                    "upstream `{}`: `{name}` is not an environment variable name",
                    self.name
                )));
            }
            if env.iter().any(|(n, _)| n == name) {
                continue;
            }
            if let Some(value) = lookup(name) {
                env.push((name.to_owned(), value));
            }
        }
        let call_timeout =
            Duration::from_millis(self.call_timeout_ms.unwrap_or(DEFAULT_CALL_TIMEOUT_MS));
        let mut admitted = Vec::new();
        for section in &self.tools {
            let admission = section.check(&self.name, call_timeout)?;
            if admitted
                .iter()
                .any(|a: &Admission| a.entry.name == admission.entry.name)
            {
                return Err(UpstreamError::Config(format!(
                    "upstream `{}` admits `{}` twice",
                    self.name, admission.entry.name
                )));
            }
            admitted.push(admission);
        }
        let home = lookup("HOME");
        let sandbox = match &self.sandbox {
            None => UpstreamSandbox::default(),
            Some(_) if self.url.is_some() => {
                return Err(UpstreamError::Config(format!(
                    "upstream `{}`: `[upstream.sandbox]` goes with a `command`; a `url` upstream \
                     is not a process toolgate starts",
                    self.name
                )));
            }
            Some(section) => section.check(&self.name, base, home.as_deref())?,
        };
        let ca_file = self.ca_file.as_ref().map(|file| base.join(file));
        if let Some(file) = &ca_file {
            // A missing or unreadable file is the configuration's fault, said now, not a
            // connection failure at every start.
            crate::http::certificates(file)
                .map_err(|e| UpstreamError::Config(format!("upstream `{}`: {e}", self.name)))?;
        }
        Ok(UpstreamSpec {
            name: self.name.clone(),
            endpoint,
            headers,
            ca_file,
            cwd: self.cwd.as_ref().map(|cwd| base.join(cwd)),
            env,
            bound_files: Vec::new(),
            startup_timeout: Duration::from_millis(
                self.startup_timeout_ms
                    .unwrap_or(DEFAULT_STARTUP_TIMEOUT_MS),
            ),
            call_timeout,
            refresh: match self.refresh_secs.unwrap_or(DEFAULT_REFRESH_SECS) {
                0 => None,
                secs => Some(Duration::from_secs(secs)),
            },
            max_message_bytes: self.max_message_bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES),
            admitted,
            sandbox,
            confinement,
        })
    }
}

impl UpstreamSection {
    /// For a `url` upstream: the URL checked, and the headers with their values read from the
    /// environment variables they name. A variable that is not set stops the check: sending the
    /// request without its credential would only fail later, less clearly.
    fn check_url(
        &self,
        lookup: &impl Fn(&str) -> Option<String>,
    ) -> Result<Vec<(String, String)>, UpstreamError> {
        let name = &self.name;
        let Some(url) = &self.url else {
            if !self.headers.is_empty() || self.ca_file.is_some() {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: `headers` and `ca_file` go with a `url`"
                )));
            }
            return Ok(Vec::new());
        };
        if !self.command.is_empty() || self.cwd.is_some() || !self.env.is_empty() {
            return Err(UpstreamError::Config(format!(
                "upstream `{name}` has both a `url` and a `command`; choose one"
            )));
        }
        let rest = match crate::http::scheme_of(url) {
            Some((true, rest)) => rest,
            Some((false, rest)) if self.ca_file.is_none() => rest,
            Some((false, _)) => {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: `ca_file` goes with an `https://` URL"
                )));
            }
            None => {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: `{url}` must be an `http://` or `https://` URL"
                )));
            }
        };
        if rest.is_empty() || rest.starts_with('/') || rest.contains(char::is_whitespace) {
            return Err(UpstreamError::Config(format!(
                "upstream `{name}`: `{url}` has no host"
            )));
        }
        let mut headers = Vec::new();
        for (header, variable) in &self.headers {
            let token = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            if !token {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: `{header}` is not a header name"
                )));
            }
            // These frame the request; one set from configuration could split or redirect it.
            if ["host", "content-length", "transfer-encoding", "connection"]
                .iter()
                .any(|framing| header.eq_ignore_ascii_case(framing))
            {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: header `{header}` is set by toolgate and cannot be configured"
                )));
            }
            let value = lookup(variable).filter(|v| !v.is_empty()).ok_or_else(|| {
                UpstreamError::Config(format!(
                    "upstream `{name}`: the environment variable `{variable}` that should hold header `{header}` is not set"
                ))
            })?;
            if value.contains(char::is_control) {
                return Err(UpstreamError::Config(format!(
                    "upstream `{name}`: the value of `{variable}` holds a control character"
                )));
            }
            headers.push((header.clone(), value));
        }
        Ok(headers)
    }
}

impl AdmittedSection {
    fn check(&self, upstream: &str, call_timeout: Duration) -> Result<Admission, UpstreamError> {
        let name = self
            .name
            .clone()
            .unwrap_or_else(|| namespaced(upstream, &self.tool));
        check_tool_name(&name)?;
        let digest = Digest::parse(&self.digest).ok_or_else(|| {
            UpstreamError::Config(format!(
                "tool `{name}`: `{}` is not a digest (`sha256:<64 hex digits>`)",
                self.digest
            ))
        })?;
        let pinned: Descriptor = serde_json::from_str(&self.pinned).map_err(|e| {
            UpstreamError::Config(format!("tool `{name}`: `pinned` is not a descriptor: {e}"))
        })?;
        if pinned.name != self.tool {
            return Err(UpstreamError::Config(format!(
                "tool `{name}`: the pinned descriptor is of `{}`, not `{}`",
                pinned.name, self.tool
            )));
        }
        if pinned.digest() != digest {
            return Err(UpstreamError::Config(format!(
                "tool `{name}`: the pinned descriptor does not match its digest `{digest}`; re-pin with `toolgate tools pin {name}`"
            )));
        }
        let mut entry = ToolEntry::new(&name, self.capability.as_deref().unwrap_or("upstream"));
        entry.effect = self.effect;
        entry.limits = Limits {
            timeout_ms: self.timeout_ms.unwrap_or(
                u64::try_from(call_timeout.as_millis()).unwrap_or(DEFAULT_CALL_TIMEOUT_MS),
            ),
            ..Limits::default()
        };
        if let Some(v) = self.max_output_bytes {
            entry.limits.max_output_bytes = v;
        }
        if let Some(v) = self.enabled {
            entry.enabled = v;
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
        entry.description.clone_from(&self.description);
        Ok(Admission {
            upstream: upstream.to_owned(),
            tool: self.tool.clone(),
            entry,
            pinned,
            digest,
        })
    }
}

/// `<upstream>__<tool>`.
pub fn namespaced(upstream: &str, tool: &str) -> String {
    format!("{upstream}{NAMESPACE_SEPARATOR}{tool}")
}

/// An upstream name: ASCII letters, digits and `-`, so that `__` in a namespaced name can only
/// be the separator.
pub fn check_upstream_name(name: &str) -> Result<(), UpstreamError> {
    let well_formed = !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if well_formed {
        Ok(())
    } else {
        Err(UpstreamError::Config(format!(
            "upstream name `{name}` must be 1–32 ASCII letters, digits or `-`"
        )))
    }
}

/// A name a model API accepts: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn check_tool_name(name: &str) -> Result<(), UpstreamError> {
    let well_formed = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    if well_formed {
        Ok(())
    } else {
        Err(UpstreamError::Config(format!(
            "tool name `{name}` must match `^[a-zA-Z0-9_-]{{1,64}}$`; choose one with `--name`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The section `text` checked, or why it is refused.
    fn section(text: &str) -> Result<UpstreamSpec, Box<dyn std::error::Error>> {
        let parsed: UpstreamSection =
            serde_json::from_value(serde_json::from_str::<serde_json::Value>(text)?)?;
        Ok(parsed.check(
            std::path::Path::new("/etc/toolgate"),
            |name| (name != "UNSET").then(|| format!("value of {name}")),
            UpstreamConfinement::dangerous_unconfined(),
        )?)
    }

    fn pinned() -> (String, String) {
        let descriptor = Descriptor::new("echo", "echoes", json!({"type": "object"}));
        (
            descriptor.digest().to_string(),
            serde_json::to_string(&descriptor).unwrap(),
        )
    }

    #[test]
    fn environment_is_an_allowlist() {
        let spec = section(
            r#"{"name": "fs", "command": ["server"], "env": ["TOKEN", "UNSET", "PATH"], "cwd": "data"}"#,
        )
        .unwrap();
        let names: Vec<&str> = spec.env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "TOKEN"]);
        assert_eq!(
            spec.endpoint,
            Endpoint::Command {
                program: "server".to_owned(),
                args: Vec::new()
            }
        );
        assert_eq!(spec.cwd, Some(PathBuf::from("/etc/toolgate/data")));
        assert_eq!(spec.refresh, Some(Duration::from_secs(300)));
    }

    #[test]
    fn bad_sections_say_what_is_wrong() {
        let cases = [
            (
                r#"{"name": "a__b", "command": ["x"]}"#,
                "upstream name `a__b`",
            ),
            (r#"{"name": "", "command": ["x"]}"#, "upstream name ``"),
            (r#"{"name": "a", "command": []}"#, "needs a `command`"),
            (
                r#"{"name": "a", "url": "ftp://x/mcp"}"#,
                "must be an `http://` or `https://` URL",
            ),
            (r#"{"name": "a", "url": "https:///mcp"}"#, "has no host"),
            (
                r#"{"name": "a", "url": "http://x/mcp", "ca_file": "ca.pem"}"#,
                "`ca_file` goes with an `https://` URL",
            ),
            (
                r#"{"name": "a", "url": "https://x/mcp", "ca_file": "/nonexistent/ca.pem"}"#,
                "cannot read certificates from `/nonexistent/ca.pem`",
            ),
            (
                r#"{"name": "a", "command": ["x"], "ca_file": "ca.pem"}"#,
                "go with a `url`",
            ),
            (
                r#"{"name": "a", "url": "http://x/mcp", "command": ["y"]}"#,
                "both a `url` and a `command`",
            ),
            (
                r#"{"name": "a", "url": "http://x/mcp", "headers": {"Authorization": "UNSET"}}"#,
                "`UNSET` that should hold header `Authorization` is not set",
            ),
            (
                r#"{"name": "a", "url": "http://x/mcp", "headers": {"Transfer-Encoding": "T"}}"#,
                "header `Transfer-Encoding` is set by toolgate",
            ),
            (
                r#"{"name": "a", "url": "http://x/mcp", "headers": {"host": "T"}}"#,
                "header `host` is set by toolgate",
            ),
            (
                r#"{"name": "a", "command": ["x"], "headers": {"A": "B"}}"#,
                "`headers` and `ca_file` go with a `url`",
            ),
            (
                r#"{"name": "a", "command": ["x"], "env": ["A=B"]}"#,
                "`A=B` is not an environment variable name",
            ),
            (
                r#"{"name": "a", "command": ["x"], "bogus": 1}"#,
                "unknown field",
            ),
            (
                r#"{"name": "a", "command": ["x"], "sandbox": {"reed": ["/srv"]}}"#,
                "unknown field `reed`",
            ),
            (
                r#"{"name": "a", "url": "http://x/mcp", "sandbox": {"read": ["/srv"]}}"#,
                "`[upstream.sandbox]` goes with a `command`",
            ),
            (
                r#"{"name": "a", "command": ["x"], "sandbox": {"network": ["http://x/"]}}"#,
                "[upstream.sandbox] network `http://x/` is not a host the proxy can allow",
            ),
            (
                r#"{"name": "a", "command": ["x"], "sandbox": {"write": [""]}}"#,
                "[upstream.sandbox] write: an empty path",
            ),
            (
                r#"{"name": "a", "command": ["x"], "sandbox": {"read": ["~ada/x"]}}"#,
                "only `~/` (the home directory) is understood",
            ),
        ];
        for (text, needle) in cases {
            let error = section(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }

    #[test]
    fn sandbox_paths_resolve_like_cwd() {
        let spec = section(
            r#"{"name": "fs", "command": ["server"], "sandbox": {"read": ["docs", "/srv/a", "~/notes"], "write": ["docs/out"], "network": ["api.example.com", "api.example.com"]}}"#,
        )
        .unwrap();
        assert_eq!(
            spec.sandbox.read,
            [
                PathBuf::from("/etc/toolgate/docs"),
                PathBuf::from("/srv/a"),
                PathBuf::from("value of HOME/notes"),
            ]
        );
        assert_eq!(
            spec.sandbox.write,
            [PathBuf::from("/etc/toolgate/docs/out")]
        );
        let hosts: Vec<String> = spec
            .sandbox
            .network
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(hosts, ["api.example.com"]);
        // Without a section: nothing beyond the defaults (how it is confined is the caller's:
        // see toolgate's settings).
        let spec = section(r#"{"name": "fs", "command": ["server"]}"#).unwrap();
        assert_eq!(spec.sandbox, crate::UpstreamSandbox::default());
    }

    #[test]
    fn http_headers_come_from_the_environment() {
        let spec = section(
            r#"{"name": "api", "url": "http://127.0.0.1:3001/mcp", "headers": {"Authorization": "TOKEN"}}"#,
        )
        .unwrap();
        assert_eq!(
            spec.endpoint,
            Endpoint::Http {
                url: "http://127.0.0.1:3001/mcp".to_owned()
            }
        );
        assert_eq!(
            spec.headers,
            [("Authorization".to_owned(), "value of TOKEN".to_owned())]
        );
    }

    #[test]
    fn admissions_check_name_and_pin() {
        let (digest, descriptor) = pinned();
        let admitted = |extra: serde_json::Value| {
            let mut tool = json!({"tool": "echo", "digest": digest, "pinned": descriptor});
            if let (Some(tool), Some(extra)) = (tool.as_object_mut(), extra.as_object()) {
                tool.extend(extra.clone());
            }
            section(&json!({"name": "t", "command": ["x"], "tool": [tool]}).to_string())
        };
        let spec = admitted(json!({})).unwrap();
        let admission = spec.admitted.first().unwrap();
        assert_eq!(admission.entry.name, "t__echo");
        assert_eq!(admission.entry.effect(), EffectClass::Irreversible);
        assert_eq!(admission.entry.limits.timeout_ms, 30_000);

        let error = admitted(json!({"name": "has.dot"}))
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("must match `^[a-zA-Z0-9_-]{1,64}$`"),
            "{error}"
        );
        let error = admitted(json!({"digest": "sha256:00"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("is not a digest"), "{error}");
        let other = Descriptor::new("echo", "changed", json!({"type": "object"}));
        let error = admitted(json!({"digest": other.digest().to_string()}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not match its digest"), "{error}");
        let error = admitted(json!({"tool": "other"})).unwrap_err().to_string();
        assert!(error.contains("is of `echo`, not `other`"), "{error}");
        let error = admitted(json!({"pinned": "{"})).unwrap_err().to_string();
        assert!(error.contains("`pinned` is not a descriptor"), "{error}");
    }
}
