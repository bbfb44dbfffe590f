//! What a call is before and after stage 1: the [`RawCall`] a transport hands in, the
//! [`Invocation`] stage 1 (`pipeline/normalize.rs`) makes of it, and the bounds it keeps.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use crate::pipeline::normalize::normalize;

/// Where a call comes from. Entries list the surfaces they may be called on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Surface {
    /// A model, through MCP.
    Chat,
    /// A person at the `toolgate` command line.
    Cli,
    /// A person's action in the approval console.
    Console,
}

impl Surface {
    /// Every surface.
    pub const ALL: [Surface; 3] = [Surface::Chat, Surface::Cli, Surface::Console];

    /// The surface's name, `snake_case`.
    pub fn as_str(self) -> &'static str {
        match self {
            Surface::Chat => "chat",
            Surface::Cli => "cli",
            Surface::Console => "console",
        }
    }
}

impl fmt::Display for Surface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A surface's name that names none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown surface `{0}`; expected one of chat, cli, console")]
pub struct UnknownSurface(pub String);

impl FromStr for Surface {
    type Err = UnknownSurface;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Surface::ALL
            .into_iter()
            .find(|surface| surface.as_str() == s)
            .ok_or_else(|| UnknownSurface(s.to_owned()))
    }
}

/// A call's arguments as they arrived.
#[derive(Debug, Clone)]
pub enum RawArguments {
    /// JSON text, not yet parsed (the CLI, a raw JSON-RPC body).
    Text(String),
    /// An already-parsed value (a transport that parsed the envelope). Bounds are checked by
    /// walking it.
    Value(Value),
}

/// A request as a caller made it: nothing about it is trusted yet.
#[derive(Debug, Clone)]
pub struct RawCall {
    /// The tool name, optionally `name@major`.
    pub tool: String,
    pub arguments: RawArguments,
    pub surface: Surface,
    /// Who asks: a token's actor, the local user.
    pub actor: String,
    /// The profile whose tools the caller may use.
    pub profile: String,
    /// The caller's id for this request, for the evidence.
    pub request_id: Option<String>,
    /// What the client says it is and which of its sessions asked (MCP `initialize`'s
    /// `clientInfo`): shown to a person as the client's claim, never trusted, and bound into
    /// nothing (not the approval digest, not a policy's context).
    pub client: Option<String>,
}

impl RawCall {
    /// A call with JSON-text arguments from actor `local` in profile `default`.
    pub fn text(tool: impl Into<String>, arguments: impl Into<String>, surface: Surface) -> Self {
        RawCall {
            tool: tool.into(),
            arguments: RawArguments::Text(arguments.into()),
            surface,
            actor: "local".to_owned(),
            profile: "default".to_owned(),
            request_id: None,
            client: None,
        }
    }

    /// The same call in `profile`.
    #[must_use]
    pub fn in_profile(mut self, profile: impl Into<String>) -> Self {
        self.profile = profile.into();
        self
    }

    /// The same call from `actor`.
    #[must_use]
    pub fn by(mut self, actor: impl Into<String>) -> Self {
        self.actor = actor.into();
        self
    }
}

/// The limits stage 1 enforces before parsing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NormalizeBounds {
    /// Longest tool name, in bytes, including an `@major` suffix.
    pub max_name_bytes: usize,
    /// Largest argument text, in bytes.
    pub max_argument_bytes: usize,
    /// Deepest nesting of arrays and objects in the arguments (the arguments object is 1).
    pub max_depth: usize,
    /// Longest actor or profile name, in bytes.
    pub max_label_bytes: usize,
}

impl Default for NormalizeBounds {
    fn default() -> Self {
        NormalizeBounds {
            max_name_bytes: 128,
            max_argument_bytes: 1024 * 1024,
            max_depth: 32,
            max_label_bytes: 128,
        }
    }
}

/// A well-formed request: a plausible tool name, an optional major version, an arguments
/// object within bounds. Nothing about the tool is known yet.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub tool: String,
    pub version: Option<u32>,
    pub arguments: Map<String, Value>,
    pub surface: Surface,
    pub actor: String,
    pub profile: String,
    pub request_id: Option<String>,
    /// The client's claim of what it is, cut to [`MAX_CLIENT_CHARS`]: for display only.
    pub client: Option<String>,
}

/// The longest client claim kept, in characters; a longer one is cut and marked with `…`.
pub const MAX_CLIENT_CHARS: usize = 120;

/// `claim` cut to [`MAX_CLIENT_CHARS`] characters.
pub(crate) fn bounded_claim(claim: String) -> String {
    if claim.chars().count() <= MAX_CLIENT_CHARS {
        return claim;
    }
    let mut cut: String = claim.chars().take(MAX_CLIENT_CHARS - 1).collect();
    cut.push('…');
    cut
}

pub(crate) fn json_type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// User input for a message: control characters escaped, long text cut.
pub(crate) fn escape(text: &str) -> String {
    // Printable ASCII but for the quotes and the backslash is its own escape: most names are.
    if text.len() <= 80
        && text
            .bytes()
            .all(|byte| matches!(byte, b' '..=b'~') && !matches!(byte, b'"' | b'\'' | b'\\'))
    {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(80).flat_map(char::escape_debug).collect();
    if text.chars().nth(80).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::normalize::scan_depth;
    use crate::rejection::{RejectCode, Rejection};
    use serde_json::json;

    fn run(tool: &str, args: &str) -> Result<Invocation, Rejection> {
        normalize(
            RawCall::text(tool, args, Surface::Cli),
            &NormalizeBounds::default(),
        )
    }

    /// The shortcut for plain names gives what the whole escape gives.
    #[test]
    fn plain_names_escape_as_themselves() {
        for byte in 0u8..=0x7f {
            let text = char::from(byte).to_string();
            let slow: String = text.chars().flat_map(char::escape_debug).collect();
            assert_eq!(escape(&text), slow, "{byte:#x}");
        }
        assert_eq!(escape(&"a".repeat(80)), "a".repeat(80));
        assert_eq!(escape(&"a".repeat(81)), format!("{}…", "a".repeat(80)));
        assert_eq!(escape("a\"b"), r#"a\"b"#);
    }

    fn code(tool: &str, args: &str) -> RejectCode {
        run(tool, args).unwrap_err().code()
    }

    #[test]
    fn accepts_plain_and_versioned_names() {
        let inv = run("read_file", r#"{"path": "a"}"#).unwrap();
        assert_eq!((inv.tool.as_str(), inv.version), ("read_file", None));
        assert_eq!(inv.arguments["path"], json!("a"));
        let inv = run("fs__read_file@2", "").unwrap();
        assert_eq!((inv.tool.as_str(), inv.version), ("fs__read_file", Some(2)));
        assert!(inv.arguments.is_empty());
        assert!(run("x", "null").unwrap().arguments.is_empty());
    }

    #[test]
    fn rejects_bad_names_and_arguments() {
        assert_eq!(code("", "{}"), RejectCode::Malformed);
        assert_eq!(code("read file", "{}"), RejectCode::Malformed);
        assert_eq!(code("read_file\0", "{}"), RejectCode::Malformed);
        assert_eq!(code("ｒead_file", "{}"), RejectCode::Malformed);
        assert_eq!(code("read_file@", "{}"), RejectCode::Malformed);
        assert_eq!(code("read_file@x", "{}"), RejectCode::Malformed);
        assert_eq!(code("read_file@99999999999", "{}"), RejectCode::Malformed);
        assert_eq!(code("@1", "{}"), RejectCode::Malformed);
        assert_eq!(code(&"a".repeat(129), "{}"), RejectCode::TooLarge);
        assert_eq!(code("x", "[1]"), RejectCode::Malformed);
        assert_eq!(code("x", "\"s\""), RejectCode::Malformed);
        assert_eq!(code("x", "{"), RejectCode::Malformed);
        assert_eq!(code("x", "{} {}"), RejectCode::Malformed);
        let deep = format!("{}{}", "[".repeat(33), "]".repeat(33));
        assert_eq!(
            code("x", &format!("{{\"a\": {deep}}}")),
            RejectCode::TooLarge
        );
        let huge = format!("{{\"a\": \"{}\"}}", "x".repeat(1024 * 1024));
        assert_eq!(code("x", &huge), RejectCode::TooLarge);
    }

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert_eq!(
            code("x", r#"{"path": "a", "path": "/etc/passwd"}"#),
            RejectCode::Malformed
        );
        assert_eq!(
            code("x", r#"{"o": {"k": 1, "k": 2}}"#),
            RejectCode::Malformed
        );
        assert_eq!(
            code("x", r#"{"a": [{"k": 1, "\u006b": 2}]}"#),
            RejectCode::Malformed
        );
        let message = run("x", r#"{"path": 1, "path": 2}"#)
            .unwrap_err()
            .message()
            .to_owned();
        assert!(
            message.contains("the key `path` appears twice"),
            "{message}"
        );
        let ok = run(
            "x",
            r#"{"a": {"k": 1}, "b": {"k": [1, 2.5, -3, true, null, "s"]}}"#,
        )
        .unwrap();
        assert_eq!(
            ok.arguments["b"],
            json!({"k": [1, 2.5, -3, true, null, "s"]})
        );
    }

    #[test]
    fn brackets_inside_strings_do_not_count_as_depth() {
        let text = format!("{{\"a\": \"{}\\\"{}\"}}", "[".repeat(100), "{".repeat(100));
        assert!(run("x", &text).is_ok());
        assert_eq!(scan_depth(br#"{"a":[{"b":[]}]}"#), 4);
    }

    #[test]
    fn parsed_values_are_bounded_too() {
        let mut deep = json!(1);
        for _ in 0..40 {
            deep = json!([deep]);
        }
        let raw = RawCall {
            arguments: RawArguments::Value(json!({ "a": deep })),
            ..RawCall::text("x", "", Surface::Chat)
        };
        let err = normalize(raw, &NormalizeBounds::default()).unwrap_err();
        assert_eq!(err.code(), RejectCode::TooLarge);
        let raw = RawCall {
            arguments: RawArguments::Value(json!({ "a": "x".repeat(2 * 1024 * 1024) })),
            ..RawCall::text("x", "", Surface::Chat)
        };
        let err = normalize(raw, &NormalizeBounds::default()).unwrap_err();
        assert_eq!(err.code(), RejectCode::TooLarge);
    }

    #[test]
    fn a_clients_claim_is_kept_for_display_and_cut_when_long() {
        let call = |client: Option<String>| RawCall {
            client,
            ..RawCall::text("x", "{}", Surface::Chat)
        };
        let bounds = NormalizeBounds::default();
        let kept = normalize(call(Some("mcp 0.1.0".into())), &bounds).unwrap();
        assert_eq!(kept.client.as_deref(), Some("mcp 0.1.0"));
        assert_eq!(normalize(call(None), &bounds).unwrap().client, None);
        // A long claim is no reason to refuse the call: it is cut, and says so.
        let long = normalize(call(Some("é".repeat(500))), &bounds).unwrap();
        let shown = long.client.unwrap();
        assert_eq!(shown.chars().count(), MAX_CLIENT_CHARS);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn labels_are_checked() {
        let raw = RawCall::text("x", "{}", Surface::Cli).by("");
        assert_eq!(
            normalize(raw, &NormalizeBounds::default())
                .unwrap_err()
                .code(),
            RejectCode::Malformed
        );
        let raw = RawCall::text("x", "{}", Surface::Cli).in_profile("p".repeat(200));
        assert_eq!(
            normalize(raw, &NormalizeBounds::default())
                .unwrap_err()
                .code(),
            RejectCode::TooLarge
        );
    }
}
