//! Outcomes as MCP tool results: what a model reads, and what a program can parse.
//!
//! A completed call returns its output as text (compact JSON) and, when it is an object, as
//! `structuredContent`. A rejected or failed call is a result with `isError: true` — never a
//! JSON-RPC error, which clients tend to hide from the model — whose text says where the call
//! stopped and what to change, one hint at most, each fact once.
//!
//! Clients forward different parts to their model: Claude Code the text, Codex CLI the
//! `structuredContent`. So a refusal's `structuredContent` reads well on its own and says only
//! what the model can act on — status, whether anything ran, and the stage, code, message and
//! hint of a rejection or the code and message of a failure — while the evidence (digests,
//! resources, per-stage times), which is for people and logs, goes in
//! `_meta["toolgate/evidence"]` and the audit log. Every result carries the call's id in
//! `_meta["toolgate/call_id"]`, the key to its audit record.

use std::fmt::Write as _;

use rmcp::model::{CallToolResult, ContentBlock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use toolgate_core::{Outcome, RejectCode, Rejection, Stage, Status, ToolErrorCode};

/// The `_meta` key of every tool result that holds the call's id, which names its audit
/// record.
pub const CALL_ID_META: &str = "toolgate/call_id";

/// The `_meta` key of every tool result that holds the call's evidence, as the audit log
/// records it.
pub const EVIDENCE_META: &str = "toolgate/evidence";

/// The `structuredContent` of a call that did not complete: a refusal or failure as a model
/// should read it when it reads nothing else, what happened and what to change, without
/// evidence. This is the MCP wire, defined here rather than by the core's outcome, so that the
/// core's types can change without changing what clients parse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    pub status: RefusalStatus,
    /// Whether the tool ran, as stage 7's time says: a rejection never has one, nor does a
    /// refusal that became a failure because it could not be recorded.
    pub executed: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<RefusalRejection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RefusalError>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknowns: Vec<String>,
}

/// How a call that did not complete ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefusalStatus {
    /// A stage stopped it before the tool ran.
    Rejected,
    /// The tool ran and failed, or its result could not be recorded.
    Failed,
}

/// Where a rejected call stopped and what to change: the rejection without its field
/// details and policies, which the message already states.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusalRejection {
    pub stage: Stage,
    pub code: RejectCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// Why a call that ran failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefusalError {
    pub code: ToolErrorCode,
    pub message: String,
}

impl Refusal {
    /// What `outcome`, which did not complete, says to a model.
    pub fn of(outcome: &Outcome) -> Refusal {
        let status = match outcome.status() {
            Status::Rejected => RefusalStatus::Rejected,
            Status::Failed | Status::Completed => RefusalStatus::Failed,
        };
        Refusal {
            status,
            executed: status != RefusalStatus::Rejected
                && outcome.evidence().durations_ns.contains_key("execute"),
            rejection: outcome.rejection().map(|rejection| RefusalRejection {
                stage: rejection.stage(),
                code: rejection.code(),
                message: rejection.message().to_owned(),
                hint: rejection.hint().map(str::to_owned),
            }),
            error: match outcome.rejection() {
                Some(_) => None,
                None => outcome.error().map(|error| RefusalError {
                    code: error.code,
                    message: error.message.clone(),
                }),
            },
            unknowns: outcome.unknowns().to_vec(),
        }
    }
}

/// The tool result for `outcome`, with the call's id and evidence in `_meta`.
pub fn tool_result(outcome: Outcome) -> CallToolResult {
    let call_id = Value::String(outcome.evidence().call_id.clone());
    let evidence = serde_json::to_value(outcome.evidence()).unwrap_or(Value::Null);
    let mut result = if outcome.status() == Status::Completed {
        completed(outcome)
    } else {
        let text = explain(&outcome);
        let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
        result.structured_content = serde_json::to_value(Refusal::of(&outcome)).ok();
        result
    };
    let mut meta = result.meta.take().unwrap_or_default();
    meta.0.insert(CALL_ID_META.to_owned(), call_id);
    meta.0.insert(EVIDENCE_META.to_owned(), evidence);
    result.meta = Some(meta);
    result
}

fn completed(outcome: Outcome) -> CallToolResult {
    let unknowns = outcome.unknowns().to_vec();
    let output = outcome.into_output().unwrap_or(Value::Null);
    if let Some(mut blocks) = content_blocks(&output) {
        for unknown in &unknowns {
            blocks.push(ContentBlock::text(format!("[toolgate] unknown: {unknown}")));
        }
        return CallToolResult::success(blocks);
    }
    let mut text = serde_json::to_string(&output).unwrap_or_default();
    for unknown in &unknowns {
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
    // Only an array can be blocks. Anything else (an upstream's `{"content": "<the file>"}`)
    // is not read as blocks at all: failing, serde would quote it whole in its error.
    object
        .get("content")?
        .as_array()?
        .iter()
        .map(|block| ContentBlock::deserialize(block).ok())
        .collect()
}

/// A rejection or failure in words a model can act on.
fn explain(outcome: &Outcome) -> String {
    let mut text = String::new();
    match (outcome.rejection(), outcome.error()) {
        (Some(rejection), _) => explain_rejection(&mut text, rejection),
        (None, Some(error)) => {
            let _ = write!(
                text,
                "`{}` ran and failed ({}): {}",
                outcome.evidence().tool,
                error.code,
                error.message
            );
        }
        (None, None) => text.push_str(&outcome.summary()),
    }
    for unknown in outcome.unknowns() {
        let _ = write!(text, "\nUnknown: {unknown}");
    }
    text
}

/// Where the call stopped, the message (which states every argument problem once, and names
/// the deciding policies), and the one hint. The field errors and the policies are not listed
/// again: they are in the message, and in the evidence.
fn explain_rejection(text: &mut String, rejection: &Rejection) {
    let _ = write!(
        text,
        "toolgate rejected this call at the {} stage ({}); nothing ran.\n{}",
        rejection.stage(),
        rejection.code(),
        rejection.message()
    );
    if let Some(hint) = rejection.hint() {
        let _ = write!(text, "\nHint: {hint}");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use toolgate_core::FieldError;

    use super::*;

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
    fn rejections_say_stage_code_and_what_to_change_once() {
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new(
                "/file_path",
                RejectCode::UnknownArgument,
                "unknown argument `file_path`; expected one of `path`, `limit`",
            )
            .with_hint(Some("did you mean `path`?".into())),
            FieldError::new(
                "/path",
                RejectCode::MissingInput,
                "missing required argument `path`",
            ),
        ]);
        let mut text = String::new();
        explain_rejection(&mut text, &rejection);
        assert_eq!(
            text,
            "toolgate rejected this call at the validate stage (unknown_argument); nothing ran.\n\
             unknown argument `file_path`\n\
             Hint: did you mean `path`?"
        );
    }

    #[test]
    fn a_refusal_carries_its_evidence_in_meta_only() {
        let outcome: Outcome = serde_json::from_value(json!({
            "status": "rejected",
            "rejection": {"stage": "resolve", "code": "unknown_tool",
                          "message": "no tool `reed_file` is registered",
                          "hint": "did you mean `read_file`?"},
            "evidence": {"call_id": "c-1", "tool": "reed_file", "surface": "chat",
                         "actor": "a", "profile": "default", "workspace": "sha256:00",
                         "argument_names": [], "resources": [], "policies": [],
                         "durations_ns": {"normalize": 5}, "total_ns": 5,
                         "output_bytes": 0, "truncated": false, "redactions": 0},
            "unknowns": []
        }))
        .unwrap();
        let result = serde_json::to_value(tool_result(outcome)).unwrap();
        assert_eq!(
            result["structuredContent"],
            json!({"status": "rejected", "executed": false, "rejection": {
                "stage": "resolve", "code": "unknown_tool",
                "message": "no tool `reed_file` is registered",
                "hint": "did you mean `read_file`?"}})
        );
        assert_eq!(result["_meta"][CALL_ID_META], "c-1");
        assert_eq!(
            result["_meta"][EVIDENCE_META]["durations_ns"]["normalize"],
            5
        );
    }
}
