//! Patterns that need a backtracking engine, with every match bounded.
//!
//! JSON Schema patterns are ECMA-262 regular expressions, which have lookaround and
//! backreferences; the linear-time engine that compiles every other pattern has neither, and
//! real servers use them (zod writes `hostname`, `emoji` and ISO 8601 `duration` with
//! lookahead). A backtracking engine's time is the steps it takes times the length of what it
//! reads, and a call may hold many strings, so all three are bounded here: such a pattern is
//! matched only against a string of at most [`MAX_SUBJECT_CHARS`] characters, in at most
//! [`BACKTRACK_LIMIT`] backtracking steps, and one check of a call's arguments makes at most
//! [`MAX_BACKTRACKING_MATCHES`] such matches. A longer string, a match that does not finish
//! within the steps, or a string past the last match allowed does not satisfy the pattern, and
//! the call is refused with a message that says which.
//!
//! The validator's own pattern keyword runs the linear engine only: each such `pattern` at a
//! schema position is handed to [`KEYWORD`] instead, a keyword of toolgate's own, which a
//! schema itself may not use. A pattern that needs backtracking anywhere else (a
//! `patternProperties` key) does not compile, and its schema is refused.

use std::cell::Cell;

use jsonschema::{Keyword, ValidationError, paths::Location};
use serde_json::{Map, Value};

use crate::schema::{Holds, holds};

/// Backtracking steps one match may take. Real patterns (zod's, a password policy's
/// lookaheads, a backreference over 500 characters) finish in a few dozen; one built to
/// backtrack without end stops here after 20–130 µs (release build).
pub const BACKTRACK_LIMIT: usize = 1_000;

/// Matches of backtracking patterns one check of a call's arguments may make.
pub const MAX_BACKTRACKING_MATCHES: usize = 256;

/// The longest string, in characters, a backtracking pattern is matched against.
pub const MAX_SUBJECT_CHARS: usize = 512;

/// The name a backtracking `pattern` takes in the schema the validator compiles.
pub(crate) const KEYWORD: &str = "toolgate:bounded-pattern";

/// The compiled size the engine may give one pattern, in bytes.
pub(crate) const SIZE_LIMIT: usize = 1 << 20;

thread_local! {
    /// Matches the check running on this thread may still make; `None` outside a check, where
    /// every match is refused.
    static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
}

/// `check` run with a fresh allowance of [`MAX_BACKTRACKING_MATCHES`] matches.
pub(crate) fn budgeted<T>(check: impl FnOnce() -> T) -> T {
    let outer = LEFT.replace(Some(MAX_BACKTRACKING_MATCHES));
    let checked = check();
    LEFT.set(outer);
    checked
}

/// Takes one match from this thread's allowance; false when none is left.
fn take_match() -> bool {
    match LEFT.get() {
        Some(left) if left > 0 => {
            LEFT.set(Some(left - 1));
            true
        }
        _ => false,
    }
}

/// Whether `pattern` uses what only a backtracking engine runs: lookahead, lookbehind, an
/// atomic group or a backreference. Read from the text, so an escaped or bracketed look-alike
/// counts too: a schema is refused for one pattern too many, never accepted for one too few.
pub(crate) fn needs_backtracking(pattern: &str) -> bool {
    if ["(?=", "(?!", "(?<=", "(?<!", "(?>", "\\k<"]
        .iter()
        .any(|marker| pattern.contains(marker))
    {
        return true;
    }
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c == '\\' && chars.next().is_some_and(|next| matches!(next, '1'..='9')) {
            return true;
        }
    }
    false
}

/// Renames every `pattern` at a schema position of `schema` that needs backtracking to
/// [`KEYWORD`].
pub(crate) fn hand_over(schema: &mut Value) {
    let Value::Object(map) = schema else { return };
    if let Some(Value::String(pattern)) = map.get("pattern")
        && needs_backtracking(pattern)
        && let Some(pattern) = map.remove("pattern")
    {
        map.insert(KEYWORD.to_owned(), pattern);
    }
    for (keyword, value) in map.iter_mut() {
        match (holds(keyword), value) {
            (Some(Holds::NamedSchemas), Value::Object(named)) => {
                named.values_mut().for_each(hand_over);
            }
            (Some(Holds::Schemas), Value::Array(list)) => list.iter_mut().for_each(hand_over),
            (Some(Holds::Schemas), one) => hand_over(one),
            _ => {}
        }
    }
}

/// [`KEYWORD`]'s factory, for the validator's options.
pub(crate) fn keyword<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    _location: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let Value::String(pattern) = value else {
        return Err(ValidationError::custom("a pattern must be a string"));
    };
    let regex = fancy_regex::RegexBuilder::new(pattern)
        .backtrack_limit(BACKTRACK_LIMIT)
        .delegate_size_limit(SIZE_LIMIT)
        .build()
        .map_err(|e| ValidationError::custom(format!("pattern does not compile: {e}")))?;
    Ok(Box::new(Bounded { regex }))
}

struct Bounded {
    regex: fancy_regex::Regex,
}

impl Bounded {
    /// Why `instance` does not satisfy the pattern, or `None` when it does (or is no string).
    fn refusal(&self, instance: &Value) -> Option<String> {
        let Value::String(text) = instance else {
            return None;
        };
        if text.chars().nth(MAX_SUBJECT_CHARS).is_some() {
            return Some(format!(
                "is longer than {MAX_SUBJECT_CHARS} characters, the most the pattern `{}` \
                 (lookaround or backreferences) is matched against",
                self.regex.as_str()
            ));
        }
        if !take_match() {
            return Some(format!(
                "is past the {MAX_BACKTRACKING_MATCHES} strings one call may have matched against \
                 patterns with lookaround or backreferences"
            ));
        }
        match self.regex.is_match(text) {
            Ok(true) => None,
            Ok(false) => Some(format!("does not match `{}`", self.regex.as_str())),
            Err(_) => Some(format!(
                "could not be matched against `{}` within {BACKTRACK_LIMIT} backtracking steps",
                self.regex.as_str()
            )),
        }
    }
}

impl<'i> Keyword<'i> for Bounded {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        match self.refusal(instance) {
            None => Ok(()),
            Some(message) => Err(ValidationError::custom(message)),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        self.refusal(instance).is_none()
    }
}
