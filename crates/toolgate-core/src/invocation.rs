//! Stage 1: a raw request becomes an [`Invocation`].
//!
//! Everything here is bounded *before* it is parsed: the tool name's length, the argument
//! text's size and its nesting depth. A hostile request costs at most one linear scan.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::rejection::{RejectCode, Rejection};

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

impl FromStr for Surface {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Surface::ALL
            .into_iter()
            .find(|surface| surface.as_str() == s)
            .ok_or_else(|| format!("unknown surface `{s}`; expected one of chat, cli, console"))
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
fn bounded_claim(claim: String) -> String {
    if claim.chars().count() <= MAX_CLIENT_CHARS {
        return claim;
    }
    let mut cut: String = claim.chars().take(MAX_CLIENT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Stage 1.
pub fn normalize(raw: RawCall, bounds: &NormalizeBounds) -> Result<Invocation, Rejection> {
    let (tool, version) = parse_tool_name(&raw.tool, bounds)?;
    check_label("actor", &raw.actor, bounds)?;
    check_label("profile", &raw.profile, bounds)?;
    let arguments = match raw.arguments {
        RawArguments::Text(text) => parse_arguments(&text, bounds)?,
        RawArguments::Value(value) => {
            check_value_bounds(&value, bounds)?;
            value
        }
    };
    let arguments = match arguments {
        Value::Object(map) => map,
        // An absent argument list is an empty one (MCP allows omitting `arguments`).
        Value::Null => Map::new(),
        other => {
            return Err(Rejection::new(
                RejectCode::Malformed,
                format!(
                    "arguments must be a JSON object, not {}",
                    json_type_name(&other)
                ),
            )
            .with_hint(Some(
                "pass the arguments as an object such as {\"path\": \"src/main.rs\"}".into(),
            )));
        }
    };
    Ok(Invocation {
        tool,
        version,
        arguments,
        surface: raw.surface,
        actor: raw.actor,
        profile: raw.profile,
        request_id: raw.request_id,
        client: raw.client.map(bounded_claim),
    })
}

/// Splits `name@major` and checks the name's spelling: ASCII letters, digits, `_`, `-`, `.`.
fn parse_tool_name(
    raw: &str,
    bounds: &NormalizeBounds,
) -> Result<(String, Option<u32>), Rejection> {
    if raw.len() > bounds.max_name_bytes {
        return Err(Rejection::new(
            RejectCode::TooLarge,
            format!(
                "tool name is {} bytes; the limit is {}",
                raw.len(),
                bounds.max_name_bytes
            ),
        ));
    }
    let (name, version) = match raw.rsplit_once('@') {
        Some((name, major)) => {
            let parsed = (!major.is_empty() && major.bytes().all(|b| b.is_ascii_digit()))
                .then(|| major.parse::<u32>().ok())
                .flatten();
            let Some(parsed) = parsed else {
                return Err(Rejection::new(
                    RejectCode::Malformed,
                    format!("`{}` is not a major version number", escape(major)),
                )
                .with_hint(Some("name a version as `tool@2`, or leave it out".into())));
            };
            (name, Some(parsed))
        }
        None => (raw, None),
    };
    let well_formed = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !well_formed {
        return Err(Rejection::new(
            RejectCode::Malformed,
            format!(
                "tool name `{}` may contain only ASCII letters, digits, `_`, `-` and `.`",
                escape(name)
            ),
        ));
    }
    Ok((name.to_owned(), version))
}

fn check_label(what: &str, label: &str, bounds: &NormalizeBounds) -> Result<(), Rejection> {
    if label.len() > bounds.max_label_bytes {
        return Err(Rejection::new(
            RejectCode::TooLarge,
            format!(
                "{what} name is longer than {} bytes",
                bounds.max_label_bytes
            ),
        ));
    }
    if label.is_empty() || label.chars().any(char::is_control) {
        return Err(Rejection::new(
            RejectCode::Malformed,
            format!(
                "{what} name `{}` is empty or has control characters",
                escape(label)
            ),
        ));
    }
    Ok(())
}

fn parse_arguments(text: &str, bounds: &NormalizeBounds) -> Result<Value, Rejection> {
    if text.len() > bounds.max_argument_bytes {
        return Err(too_large_arguments(text.len(), bounds));
    }
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    let depth = scan_depth(text.as_bytes());
    if depth > bounds.max_depth {
        return Err(too_deep(bounds));
    }
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let value = serde::Deserializer::deserialize_any(&mut deserializer, StrictValue)
        .and_then(|value| deserializer.end().map(|()| value));
    value.map_err(|e| {
        Rejection::new(
            RejectCode::Malformed,
            format!("arguments are not valid JSON: {e}"),
        )
    })
}

/// Builds a [`Value`] like serde_json does, but refuses an object that names a key twice.
/// `{"path": "a", "path": "/etc/passwd"}` means one thing to one parser and another to the
/// next; toolgate takes neither.
struct StrictValue;

impl<'de> serde::de::Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictValue)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(StrictValue)?;
            if object.contains_key(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "the key `{}` appears twice",
                    escape(&key)
                )));
            }
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

/// The deepest bracket nesting in JSON text, ignoring brackets inside strings. Runs before the
/// parser so that depth bombs cost one pass and no allocation.
fn scan_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

fn check_value_bounds(value: &Value, bounds: &NormalizeBounds) -> Result<(), Rejection> {
    // Walk iteratively so that a deep value cannot exhaust the stack here either.
    let mut stack = vec![(value, 1usize)];
    let mut bytes = 0usize;
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                if depth > bounds.max_depth {
                    return Err(too_deep(bounds));
                }
                bytes += 2 + items.len();
                stack.extend(items.iter().map(|item| (item, depth + 1)));
            }
            Value::Object(map) => {
                if depth > bounds.max_depth {
                    return Err(too_deep(bounds));
                }
                bytes += 2 + map.len();
                for (key, item) in map {
                    bytes += key.len() + 3;
                    stack.push((item, depth + 1));
                }
            }
            Value::String(text) => bytes += text.len() + 2,
            Value::Number(_) | Value::Bool(_) | Value::Null => bytes += 5,
        }
        if bytes > bounds.max_argument_bytes {
            return Err(too_large_arguments(bytes, bounds));
        }
    }
    Ok(())
}

fn too_large_arguments(bytes: usize, bounds: &NormalizeBounds) -> Rejection {
    Rejection::new(
        RejectCode::TooLarge,
        format!(
            "arguments are at least {bytes} bytes; the limit is {}",
            bounds.max_argument_bytes
        ),
    )
    .with_hint(Some("send less data per call".into()))
}

fn too_deep(bounds: &NormalizeBounds) -> Rejection {
    Rejection::new(
        RejectCode::TooLarge,
        format!("arguments nest deeper than {} levels", bounds.max_depth),
    )
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
        run(tool, args).unwrap_err().code
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
        let message = run("x", r#"{"path": 1, "path": 2}"#).unwrap_err().message;
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
        assert_eq!(err.code, RejectCode::TooLarge);
        let raw = RawCall {
            arguments: RawArguments::Value(json!({ "a": "x".repeat(2 * 1024 * 1024) })),
            ..RawCall::text("x", "", Surface::Chat)
        };
        let err = normalize(raw, &NormalizeBounds::default()).unwrap_err();
        assert_eq!(err.code, RejectCode::TooLarge);
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
                .code,
            RejectCode::Malformed
        );
        let raw = RawCall::text("x", "{}", Surface::Cli).in_profile("p".repeat(200));
        assert_eq!(
            normalize(raw, &NormalizeBounds::default())
                .unwrap_err()
                .code,
            RejectCode::TooLarge
        );
    }
}
