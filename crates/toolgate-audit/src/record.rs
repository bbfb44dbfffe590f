//! What a record keeps of an outcome, and what it leaves out.
//!
//! By default a record holds the outcome's evidence — tool, version, descriptor digest,
//! surface, actor, profile, the workspace's digest, effect class, argument *names* and
//! *digest*, workspace-relative resources, approval id, policies, per-stage timings, byte
//! counts, truncation, redactions — with the status, the stage and code of a rejection, the
//! code of a tool error and the number of unknowns. It never holds argument values, output,
//! file bodies, environment, or the messages of rejections and errors, which can quote
//! arguments. The local debug setting adds those messages, the unknowns and the output,
//! redacted once more and bounded.

use serde_json::{Map, Value, json};
use toolgate_core::{Outcome, canonical_json, redact};

/// The most output a debug record keeps, in bytes of its JSON text.
const DEBUG_OUTPUT_BYTES: usize = 64 << 10;

/// The canonical JSON a record keeps of `outcome`; with `store_values`, also the redacted
/// messages and output (the local debug setting).
pub fn record_body(outcome: &Outcome, store_values: bool) -> String {
    let mut call = match serde_json::to_value(&outcome.evidence) {
        Ok(Value::Object(map)) => map,
        // Evidence is a plain struct; should it ever fail to serialize, the record still says
        // so rather than vanish.
        _ => Map::from_iter([("evidence".to_owned(), json!("unserializable"))]),
    };
    call.insert("status".to_owned(), json!(outcome.status));
    if let Some(rejection) = &outcome.rejection {
        call.insert(
            "rejection".to_owned(),
            json!({"stage": rejection.stage, "code": rejection.code}),
        );
    }
    if let Some(error) = &outcome.error {
        call.insert("error".to_owned(), json!({"code": error.code}));
    }
    call.insert("unknowns".to_owned(), json!(outcome.unknowns.len()));
    if store_values {
        call.insert("debug".to_owned(), debug_values(outcome));
    }
    canonical_json(&Value::Object(call))
}

/// The values a debug record adds, each redacted again: the pipeline redacts output already,
/// but messages quote arguments, which it does not.
fn debug_values(outcome: &Outcome) -> Value {
    let mut values = Map::new();
    if let Some(rejection) = &outcome.rejection {
        values.insert("rejection_message".to_owned(), json!(rejection.message));
        if let Some(hint) = &rejection.hint {
            values.insert("hint".to_owned(), json!(hint));
        }
    }
    if let Some(error) = &outcome.error {
        values.insert("error_message".to_owned(), json!(error.message));
    }
    values.insert("unknowns".to_owned(), json!(outcome.unknowns));
    if let Some(output) = &outcome.output {
        let text = output.to_string();
        let kept = if text.len() > DEBUG_OUTPUT_BYTES {
            let mut end = DEBUG_OUTPUT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            json!({"truncated_json": text.get(..end).unwrap_or_default()})
        } else {
            output.clone()
        };
        values.insert("output".to_owned(), kept);
    }
    let mut values = Value::Object(values);
    redact::redact_value(&mut values);
    values
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use toolgate_core::{Evidence, RejectCode, Rejection, Status, Surface};

    use super::*;

    fn rejected() -> Outcome {
        Outcome {
            status: Status::Rejected,
            rejection: Some(
                Rejection::new(
                    RejectCode::UnknownArgument,
                    "unknown argument `API_KEY=hunter2`",
                )
                .with_hint(Some("did you mean `path`?".to_owned())),
            ),
            output: None,
            error: None,
            evidence: Evidence {
                call_id: "c-1".to_owned(),
                request_id: None,
                tool: "read_file".to_owned(),
                version: None,
                descriptor_digest: None,
                surface: Surface::Chat,
                actor: "local".to_owned(),
                profile: "default".to_owned(),
                workspace: "sha256:00".to_owned(),
                effect: None,
                argument_names: Vec::new(),
                argument_digest: None,
                resources: Vec::new(),
                approval_id: None,
                policies: Vec::new(),
                durations_ns: BTreeMap::new(),
                total_ns: 5,
                output_bytes: 0,
                truncated: false,
                redactions: 0,
            },
            unknowns: Vec::new(),
        }
    }

    #[test]
    fn records_keep_stage_and_code_but_not_messages() {
        let body = record_body(&rejected(), false);
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            value["rejection"],
            json!({"stage": "validate", "code": "unknown_argument"})
        );
        assert_eq!(value["call_id"], "c-1");
        assert!(
            !body.contains("hunter2") && !body.contains("API_KEY"),
            "{body}"
        );
    }

    #[test]
    fn debug_records_keep_messages_redacted() {
        let body = record_body(&rejected(), true);
        assert!(body.contains("API_KEY=[REDACTED]"), "{body}");
        assert!(!body.contains("hunter2"), "{body}");
    }
}
