//! `edit_file`: exact text replacements in a file the caller has read.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use toolgate_core::{FieldError, RejectCode};
use toolgate_workspace::Workspace;

use crate::descriptor::{closed_schema, titled};
use crate::file_write::{Change, FileWriter};
use crate::{Builtin, path_argument, write_entry};

pub(crate) const NAME: &str = "edit_file";

/// Most edits in one call.
pub const MAX_EDITS: usize = 100;

/// Largest `old_text` or `new_text`, in bytes.
pub const MAX_EDIT_TEXT_BYTES: usize = 1024 * 1024;

const DESCRIPTION: &str = "Change part of a UTF-8 text file in the workspace by exact text \
replacement. Pass the `digest` that `read_file` returned as `expected_digest`; if the file \
changed since you read it the call fails with `stale_write` and nothing is written — read it \
again. Each edit replaces `old_text` with `new_text`; `old_text` must appear exactly once in \
the file (copy it from `read_file`, whitespace included, and add surrounding lines until it is \
unique). Edits apply in order, each to the result of the ones before, and all or none are \
written. A person approves each change after seeing its diff. The result gives the new \
`digest`, for a following edit.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "path": path_argument::required_schema("The file to edit, relative to the workspace root (`src/main.rs`)."),
        "edits": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_EDITS,
            "description": "Replacements, applied in order: each `old_text` must match exactly once.",
            "items": {
                "type": "object",
                "properties": {
                    "old_text": {
                        "type": "string",
                        "minLength": 1,
                        "maxLength": MAX_EDIT_TEXT_BYTES,
                        "description": "Text that appears exactly once in the file now."
                    },
                    "new_text": {
                        "type": "string",
                        "maxLength": MAX_EDIT_TEXT_BYTES,
                        "description": "What replaces it; empty to delete it."
                    }
                },
                "required": ["old_text", "new_text"],
                "additionalProperties": false
            }
        },
        "expected_digest": {
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$",
            "description": "The `digest` from your latest `read_file` of this file (or from your last edit of it); without it the edit is refused with `read_required`."
        }
    });
    let schema = closed_schema(properties, &["path", "edits"]);
    Builtin {
        descriptor: titled(NAME, "Edit a file", DESCRIPTION, schema),
        entry: write_entry(NAME),
        executor: Arc::new(FileWriter::<EditArgs>::new(workspace)),
    }
}

/// `edit_file`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditArgs {
    path: String,
    edits: Vec<Edit>,
    expected_digest: Option<String>,
}

/// One replacement.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Edit {
    old_text: String,
    new_text: String,
}

impl Change for EditArgs {
    fn path(&self) -> &str {
        &self.path
    }

    fn expected_digest(&self) -> Option<&str> {
        self.expected_digest.as_deref()
    }

    fn apply(&self, current: Option<&[u8]>) -> Result<Vec<u8>, Vec<FieldError>> {
        plan(self, current)
    }
}

/// The file with every edit applied in order, or one error per edit that does not apply.
fn plan(arguments: &EditArgs, current: Option<&[u8]>) -> Result<Vec<u8>, Vec<FieldError>> {
    let path = arguments.path.as_str();
    let Some(current) = current else {
        return Err(vec![
            FieldError::new(
                "/path",
                RejectCode::ConstraintViolation,
                format!("`{path}` does not exist; edit_file changes existing files"),
            )
            .with_hint(Some("create it with `write_file`".to_owned())),
        ]);
    };
    let Ok(text) = std::str::from_utf8(current) else {
        return Err(vec![FieldError::new(
            "/path",
            RejectCode::ConstraintViolation,
            format!("`{path}` is not UTF-8 text; edit_file edits text"),
        )]);
    };
    let mut text = text.to_owned();
    let mut errors = Vec::new();
    for (index, edit) in arguments.edits.iter().enumerate() {
        let old = edit.old_text.as_str();
        let new = edit.new_text.as_str();
        let number = index + 1;
        let pointer = format!("/edits/{index}/old_text");
        if old == new {
            errors.push(FieldError::new(
                pointer,
                RejectCode::ConstraintViolation,
                format!(
                    "edit {number}: `old_text` and `new_text` are the same; it changes nothing"
                ),
            ));
            continue;
        }
        match occurrences(&text, old) {
            (1, Some(at)) => text.replace_range(at..at + old.len(), new),
            (0, _) => errors.push(
                FieldError::new(
                    pointer,
                    RejectCode::ConstraintViolation,
                    format!("edit {number}: `old_text` matches nothing in `{path}`"),
                )
                .with_hint(Some(
                    "copy the text exactly from `read_file`, whitespace and line endings included"
                        .to_owned(),
                )),
            ),
            (count, _) => errors.push(
                FieldError::new(
                    pointer,
                    RejectCode::ConstraintViolation,
                    format!(
                        "edit {number}: `old_text` matches {count} times in `{path}`; it must \
                         match exactly once"
                    ),
                )
                .with_hint(Some(
                    "include more of the surrounding lines in `old_text` so it is unique"
                        .to_owned(),
                )),
            ),
        }
    }
    if errors.is_empty() {
        Ok(text.into_bytes())
    } else {
        Err(errors)
    }
}

/// How many times `needle` occurs in `haystack`, overlaps included, and where the first is.
fn occurrences(haystack: &str, needle: &str) -> (usize, Option<usize>) {
    let mut count = 0;
    let mut first = None;
    let mut from = 0;
    while let Some(found) = haystack.get(from..).and_then(|rest| rest.find(needle)) {
        let at = from + found;
        first.get_or_insert(at);
        count += 1;
        // Step one character, so that `aa` is found twice in `aaa`.
        from = at
            + haystack
                .get(at..)
                .and_then(|s| s.chars().next())
                .map_or(1, char::len_utf8);
    }
    (count, first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_count_overlaps_and_multibyte_text() {
        assert_eq!(occurrences("aaa", "aa"), (2, Some(0)));
        assert_eq!(occurrences("xyz", "q"), (0, None));
        assert_eq!(occurrences("日本日本", "本"), (2, Some(3)));
        assert_eq!(occurrences("fn a() {}\nfn b() {}\n", "fn b"), (1, Some(10)));
    }

    #[test]
    fn edits_apply_in_order_and_report_each_failure() {
        let args = |edits: serde_json::Value| {
            serde_json::from_value::<EditArgs>(json!({"path": "f", "edits": edits})).unwrap()
        };
        let ok = plan(
            &args(json!([{"old_text": "one", "new_text": "two"}, {"old_text": "two two", "new_text": "3"}])),
            Some(b"one two\n"),
        )
        .unwrap();
        assert_eq!(ok, b"3\n");
        let errors = plan(
            &args(json!([
                {"old_text": "a", "new_text": "b"},
                {"old_text": "zzz", "new_text": "y"},
                {"old_text": "same", "new_text": "same"}
            ])),
            Some(b"a a\n"),
        )
        .unwrap_err();
        let messages: Vec<_> = errors
            .iter()
            .map(|e| (e.pointer.as_str(), e.message.as_str()))
            .collect();
        assert_eq!(
            messages,
            [
                (
                    "/edits/0/old_text",
                    "edit 1: `old_text` matches 2 times in `f`; it must match exactly once"
                ),
                (
                    "/edits/1/old_text",
                    "edit 2: `old_text` matches nothing in `f`"
                ),
                (
                    "/edits/2/old_text",
                    "edit 3: `old_text` and `new_text` are the same; it changes nothing"
                ),
            ]
        );
    }
}
