//! Outcomes as MCP tool results: what a model reads, and what a program can parse.
//!
//! A completed call returns its output as text (compact JSON) and, when it is an object, as
//! `structuredContent`. A rejected or failed call is a result with `isError: true` — never a
//! JSON-RPC error, which clients tend to hide from the model — whose text says where the call
//! stopped and what to change, and whose `structuredContent` is the whole outcome (status,
//! rejection or error, evidence, unknowns). Every result carries the call's id in
//! `_meta["toolgate/call_id"]`, the key to its audit record.

use std::fmt::Write as _;

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;
use toolgate_core::{Outcome, Rejection, Status};

/// The `_meta` key of every tool result that holds the call's id, which names its audit
/// record.
pub const CALL_ID_META: &str = "toolgate/call_id";

/// The tool result for `outcome`, with the call's id in `_meta`.
pub fn tool_result(outcome: Outcome) -> CallToolResult {
    let call_id = Value::String(outcome.evidence.call_id.clone());
    let mut result = if outcome.status == Status::Completed {
        completed(outcome)
    } else {
        let text = explain(&outcome);
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        result.structured_content = serde_json::to_value(&outcome).ok();
        result
    };
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(CALL_ID_META.to_owned(), call_id);
    result.meta = Some(meta);
    result
}

fn completed(outcome: Outcome) -> CallToolResult {
    let output = outcome.output.unwrap_or(Value::Null);
    if let Some(mut blocks) = content_blocks(&output) {
        for unknown in &outcome.unknowns {
            blocks.push(ContentBlock::text(format!("[toolgate] unknown: {unknown}")));
        }
        return CallToolResult::success(blocks);
    }
    let mut text = serde_json::to_string(&output).unwrap_or_default();
    for unknown in &outcome.unknowns {
        let _ = write!(text, "\n[toolgate] unknown: {unknown}");
    }
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    if output.is_object() {
        result.structured_content = Some(output);
    }
    result
}

/// An output that is MCP content already: `{"content": [blocks]}` and nothing else, as an
/// upstream server's result without structured content. Its blocks are passed on as they are
/// (after stage 8 bounded and redacted them), so images, audio and embedded resources reach the
/// client as such rather than as JSON text.
fn content_blocks(output: &Value) -> Option<Vec<ContentBlock>> {
    let object = output.as_object()?;
    if object.len() != 1 {
        return None;
    }
    serde_json::from_value(object.get("content")?.clone()).ok()
}

/// A rejection or failure in words a model can act on.
fn explain(outcome: &Outcome) -> String {
    let mut text = String::new();
    match (&outcome.rejection, &outcome.error) {
        (Some(rejection), _) => explain_rejection(&mut text, rejection),
        (None, Some(error)) => {
            let _ = write!(
                text,
                "`{}` ran and failed ({}): {}",
                outcome.evidence.tool, error.code, error.message
            );
        }
        (None, None) => text.push_str(&outcome.summary()),
    }
    for unknown in &outcome.unknowns {
        let _ = write!(text, "\nUnknown: {unknown}");
    }
    text
}

fn explain_rejection(text: &mut String, rejection: &Rejection) {
    let _ = write!(
        text,
        "toolgate rejected this call at the {} stage ({}); nothing ran.\n{}",
        rejection.stage, rejection.code, rejection.message
    );
    if rejection.details.len() > 1 {
        for detail in &rejection.details {
            let _ = write!(
                text,
                "\n- `{}` ({}): {}",
                detail.pointer, detail.code, detail.message
            );
            if let Some(hint) = &detail.hint {
                let _ = write!(text, " — {hint}");
            }
        }
    }
    if let Some(hint) = &rejection.hint {
        let _ = write!(text, "\nHint: {hint}");
    }
    if !rejection.policies.is_empty() {
        let _ = write!(text, "\nPolicies: {}", rejection.policies.join(", "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::{FieldError, RejectCode};

    #[test]
    fn mcp_content_passes_through_and_other_objects_do_not() {
        let image = serde_json::json!({"type": "image", "data": "AAAA", "mimeType": "image/png"});
        let blocks = content_blocks(&serde_json::json!({"content": [image]})).unwrap();
        assert_eq!(
            serde_json::to_value(&blocks).unwrap(),
            serde_json::json!([image])
        );
        assert!(
            content_blocks(&serde_json::json!({"content": "text", "total_lines": 1})).is_none()
        );
        assert!(content_blocks(&serde_json::json!({"content": "a file's text"})).is_none());
        assert!(content_blocks(&serde_json::json!({"content": [{"type": "bogus"}]})).is_none());
    }

    #[test]
    fn rejections_say_stage_code_and_what_to_change() {
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new(
                "/file_path",
                RejectCode::UnknownArgument,
                "unknown argument",
            )
            .with_hint(Some("did you mean `path`?".into())),
            FieldError::new("/path", RejectCode::MissingInput, "required"),
        ]);
        let mut text = String::new();
        explain_rejection(&mut text, &rejection);
        assert!(
            text.starts_with(
                "toolgate rejected this call at the validate stage (unknown_argument)"
            ),
            "{text}"
        );
        assert!(text.contains("Hint: did you mean `path`?"), "{text}");
        assert!(
            text.contains("- `/path` (missing_input): required"),
            "{text}"
        );
    }
}
