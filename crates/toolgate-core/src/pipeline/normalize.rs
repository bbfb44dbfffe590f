//! Stage 1: a raw request becomes an [`Invocation`], or is refused as `malformed` or
//! `too_large`.
//!
//! Everything here is bounded *before* it is parsed: the tool name's length, the argument
//! text's size and its nesting depth. A hostile request costs at most one linear scan.

use std::fmt;

use serde_json::{Map, Value};

use crate::invocation::{
    Invocation, NormalizeBounds, RawArguments, RawCall, bounded_claim, escape, json_type_name,
};
use crate::rejection::{RejectCode, Rejection};

use super::{Normalized, Pipeline, Placement, Planned, Stopped, Trace, new_call_id};
use crate::rejection::Stage;
use std::time::Instant;

impl Pipeline {
    /// Stage 1.
    pub(crate) fn normalize(&self, mut raw: RawCall) -> Result<Normalized, Stopped> {
        let started = Instant::now();
        // Cut once, for the evidence and the invocation alike.
        let client = raw.client.take().map(crate::invocation::bounded_claim);
        let mut trace = Box::new(Trace {
            pipeline: self.id,
            started,
            durations: [None; Stage::ALL.len()],
            tool: crate::invocation::escape(&raw.tool),
            call_id: new_call_id(),
            request_id: raw.request_id.clone(),
            client,
            surface: raw.surface,
            actor: crate::invocation::escape(&raw.actor),
            profile: crate::invocation::escape(&raw.profile),
            resolved: None,
            argument_names: Vec::new(),
            effect: None,
            resources: Vec::new(),
            policies: Vec::new(),
            approval_id: None,
            arguments: None,
            plan: Planned::untyped(),
            placement: Placement::Worker,
            hooks: Vec::new(),
            hook_asks: false,
            hooks_bound: Vec::new(),
        });
        let result = normalize(raw, &self.bounds);
        trace.record(Stage::Normalize, started);
        match result {
            Ok(mut invocation) => {
                trace.tool.clone_from(&invocation.tool);
                invocation.client.clone_from(&trace.client);
                Ok(Normalized { invocation, trace })
            }
            Err(rejection) => Err(Stopped { rejection, trace }),
        }
    }
}

/// Stage 1's checks, on their own: the invocation `raw` comes to, or why it is refused.
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
pub(crate) fn scan_depth(bytes: &[u8]) -> usize {
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
