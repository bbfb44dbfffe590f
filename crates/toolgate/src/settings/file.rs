//! `toolgate.toml` as written: the shapes serde reads, nothing resolved. Only
//! [`crate::settings`] reads these; everything else runs on the [`Settings`] made from them.
//!
//! [`Settings`]: crate::settings::Settings

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use toolgate_core::hint::did_you_mean;
use toolgate_core::{ApprovalMode, EffectClass, Surface, Version};

use super::ConfigError;

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
    /// How approved commands are confined (see [`SandboxSection`]).
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// The operator's hooks (see `settings::hooks`).
    #[serde(default, rename = "hook")]
    pub hooks: Vec<Spanned<super::hooks::HookSection>>,
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
    /// When records are flushed to the disk: `effects` (default) or `always`.
    pub sync: Option<Spanned<String>>,
    /// The length of a sealed epoch, in seconds, for `toolgate audit seal-setup` (default 900).
    pub seal_epoch_secs: Option<Spanned<u64>>,
}

/// `[approval]`: how long a call waits for a person in the approval console.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSection {
    /// Seconds before an unanswered request is `approval_expired` (default 300).
    pub timeout_secs: Option<Spanned<u64>>,
    /// Seconds a printed console login link works, once (default 300).
    pub login_link_secs: Option<Spanned<u64>>,
    /// Profiles whose sessions may also be asked by MCP elicitation, when their client can
    /// show a form (default: none).
    #[serde(default)]
    pub elicitation: Vec<Spanned<String>>,
}

/// Bounds on requests, before anything is parsed.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsSection {
    pub max_name_bytes: Option<usize>,
    pub max_argument_bytes: Option<usize>,
    pub max_depth: Option<usize>,
}

/// One `[[tool]]`: changes to a known tool's registry entry.
#[derive(Debug, Clone, Deserialize)]
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

/// One `[[serve.token]]`. The token itself is never written in the file: `env` names the
/// environment variable that holds it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSection {
    pub env: Spanned<String>,
    pub actor: String,
    pub profile: Spanned<String>,
}

/// `[sandbox]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    /// `enforce` (the default) or `dangerous-unconfined`.
    pub mode: Option<Spanned<super::Mode>>,
    /// Paths denied besides the defaults: absolute, or `~/` for the home directory.
    #[serde(default)]
    pub deny: Vec<Spanned<String>>,
    /// Default entries lifted.
    #[serde(default)]
    pub allow: Vec<Spanned<String>>,
    /// Paths readable besides the system, even inside a denied place.
    #[serde(default)]
    pub read: Vec<Spanned<String>>,
    /// Paths writable besides the workspace and the call's temporary directory.
    #[serde(default)]
    pub write: Vec<Spanned<String>>,
    /// Every command reaches the network unfiltered.
    #[serde(default)]
    pub dangerous_unconfined_network: bool,
    /// Commands may make any Unix socket, and so reach every pathname socket they can name.
    #[serde(default)]
    pub dangerous_allow_unix_sockets: bool,
    /// Names the proxy resolves to these addresses instead of asking the system (the
    /// addresses are checked like any other).
    #[serde(default)]
    pub resolve: BTreeMap<String, Vec<IpAddr>>,
    #[serde(default)]
    pub limits: super::SandboxLimits,
}

/// The text of a configuration file with its path, for locating errors by line.
#[derive(Debug, Default)]
pub struct Located {
    /// The file, or `None` when running on defaults.
    pub path: Option<std::path::PathBuf>,
    text: String,
}

impl Located {
    /// Parses `text` as the file at `path`.
    pub fn parse(path: &Path, text: String) -> Result<(Located, ConfigFile), ConfigError> {
        let file: ConfigFile = toml::from_str(&text).map_err(|e| ConfigError {
            file: path.display().to_string(),
            line: e.span().map_or(0, |span| line_of(&text, span.start)),
            message: in_words(
                e.message().trim(),
                e.span().and_then(|span| key_at(&text, span.start)),
            ),
        })?;
        Ok((
            Located {
                path: Some(path.to_owned()),
                text,
            },
            file,
        ))
    }

    /// The 1-based line of byte `offset`.
    pub fn line(&self, span: Range<usize>) -> usize {
        line_of(&self.text, span.start)
    }

    pub fn display_path(&self) -> String {
        self.path
            .as_ref()
            .map_or_else(|| "<defaults>".to_owned(), |p| p.display().to_string())
    }

    /// An error at `span` in this file.
    pub fn error_at(&self, span: Range<usize>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.display_path(),
            line: self.line(span),
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
}

/// serde's message about the file, said for the person who wrote it: a misspelt key or value
/// gets a did-you-mean (as a misspelt tool argument does), and a value of the wrong type is
/// named by what its `key` takes ("a whole number of bytes") rather than by a Rust type.
fn in_words(message: &str, key: Option<&str>) -> String {
    for (prefix, said) in [
        ("unknown field ", "unknown field "),
        ("unknown variant ", "unknown value "),
    ] {
        let Some(rest) = message.strip_prefix(prefix) else {
            continue;
        };
        let Some((name, expected)) = rest.split_once(", ") else {
            return format!("{said}{rest}");
        };
        let hint = code_spans(name)
            .first()
            .and_then(|name| did_you_mean(name, code_spans(expected)))
            .map(|found| format!(": did you mean `{found}`?"))
            .unwrap_or_else(|| ",".to_owned());
        return format!("{said}{name}{hint} {expected}");
    }
    for prefix in ["invalid type: ", "invalid value: "] {
        let Some((found, expected)) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.rsplit_once(", expected "))
        else {
            continue;
        };
        let Some(wanted) = wanted(expected, key.unwrap_or_default()) else {
            break;
        };
        let key = key.map_or_else(|| "this key".to_owned(), |key| format!("`{key}`"));
        return format!("{prefix}{key} takes {wanted}, not the {found}");
    }
    message.to_owned()
}

/// `message`, which refuses `input` and then lists what is `expected` in backticks, with a
/// did-you-mean before that list when one of its entries is close to `input`.
pub fn with_guess(message: String, input: &str) -> String {
    let Some((refusal, expected)) = message.split_once(": expected ") else {
        return message;
    };
    match did_you_mean(input, code_spans(expected)) {
        Some(found) => format!("{refusal}: did you mean `{found}`? expected {expected}"),
        None => message,
    }
}

/// What a value described by serde as `expected` is, in words, for `key`.
fn wanted(expected: &str, key: &str) -> Option<String> {
    let unit = [
        ("_bytes", " of bytes"),
        ("_secs", " of seconds"),
        ("_ms", " of milliseconds"),
    ]
    .into_iter()
    .find(|(suffix, _)| key.ends_with(suffix))
    .map_or("", |(_, unit)| unit);
    Some(match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => format!("a whole number{unit}, 0 or more"),
        "isize" | "i64" | "i32" | "i16" | "i8" => format!("a whole number{unit}"),
        "f64" | "f32" => format!("a number{unit}"),
        "a boolean" => "`true` or `false`".to_owned(),
        "a string" => "text in quotes".to_owned(),
        "a sequence" => "a list in brackets, `[...]`".to_owned(),
        _ => return None,
    })
}

/// The texts between backticks in `text`.
fn code_spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The key being set on the line holding byte `offset` of `text` (`key = value`), if any.
fn key_at(text: &str, offset: usize) -> Option<&str> {
    let start = text.get(..offset)?.rfind('\n').map_or(0, |at| at + 1);
    let line = text.get(start..)?.lines().next()?;
    let (key, _) = line.split_once('=')?;
    let key = key
        .trim()
        .rsplit('.')
        .next()?
        .trim()
        .trim_matches(['"', '\'']);
    (!key.is_empty() && !key.contains(['[', ' '])).then_some(key)
}

/// The 1-based line holding byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(text: &str) -> String {
        match Located::parse(Path::new("t.toml"), text.to_owned()) {
            Err(e) => e.message,
            Ok(_) => String::from("parsed"),
        }
    }

    #[test]
    fn misspelt_keys_and_values_get_a_did_you_mean() {
        for (text, said) in [
            (
                "[[tool]]\nname = \"read_file\"\nenabeld = false\n",
                "unknown field `enabeld`: did you mean `enabled`? expected one of `name`,",
            ),
            (
                "[limitz]\n",
                "unknown field `limitz`: did you mean `limits`?",
            ),
            (
                "[[tool]]\nname = \"read_file\"\neffect = \"readonly\"\n",
                "unknown value `readonly`: did you mean `read_only`? expected one of",
            ),
            (
                "[sandbox]\nmode = \"enforced\"\n",
                "unknown value `enforced`: did you mean `enforce`?",
            ),
            (
                "[[tool]]\nname = \"read_file\"\nsurfaces = [\"chatt\"]\n",
                "did you mean `chat`?",
            ),
            // Nothing close: the keys it takes, and no guess.
            (
                "[audit]\nbanana = 1\n",
                "unknown field `banana`, expected one of `path`,",
            ),
        ] {
            let message = message(text);
            assert!(message.contains(said), "{text}: {message}");
        }
    }

    #[test]
    fn a_refusal_that_lists_the_values_guesses_among_them() {
        let refusal = |input: &str| {
            with_guess(
                format!("unknown setting `{input}`: expected `effects` or `always`"),
                input,
            )
        };
        assert_eq!(
            refusal("allways"),
            "unknown setting `allways`: did you mean `always`? expected `effects` or `always`"
        );
        assert_eq!(
            refusal("sometimes"),
            "unknown setting `sometimes`: expected `effects` or `always`"
        );
    }

    #[test]
    fn a_wrong_type_is_named_in_words() {
        for (text, said) in [
            (
                "[limits]\nmax_argument_bytes = \"1MB\"\n",
                "invalid type: `max_argument_bytes` takes a whole number of bytes, 0 or more, \
                 not the string \"1MB\"",
            ),
            (
                "[approval]\ntimeout_secs = -1\n",
                "invalid value: `timeout_secs` takes a whole number of seconds, 0 or more, \
                 not the integer `-1`",
            ),
            (
                "[limits]\nmax_depth = 2.5\n",
                "invalid type: `max_depth` takes a whole number, 0 or more, not the floating point \
                 `2.5`",
            ),
            (
                "[[tool]]\nname = \"read_file\"\nenabled = \"no\"\n",
                "invalid type: `enabled` takes `true` or `false`, not the string \"no\"",
            ),
            (
                "[serve]\nallowed_hosts = \"a:1\"\n",
                "invalid type: `allowed_hosts` takes a list in brackets, `[...]`, not the string \
                 \"a:1\"",
            ),
        ] {
            let message = message(text);
            assert_eq!(message, said, "{text}");
            assert!(!message.contains("usize") && !message.contains("u64"));
        }
    }
}
