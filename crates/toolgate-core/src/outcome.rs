//! Stage 8's value: what happened, with evidence and explicit unknowns.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::canonical::Digest;
use crate::invocation::Surface;
use crate::registry::EffectClass;
use crate::rejection::Rejection;

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The tool ran and succeeded.
    Completed,
    /// A stage stopped the call before the tool ran.
    Rejected,
    /// The tool ran and failed.
    Failed,
}

/// What an executor returns on success.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub value: Value,
    /// The executor cut its output to stay within limits.
    pub truncated: bool,
    /// Things the executor cannot vouch for.
    pub unknowns: Vec<String>,
}

impl ToolOutput {
    pub fn new(value: Value) -> Self {
        ToolOutput {
            value,
            truncated: false,
            unknowns: Vec::new(),
        }
    }

    /// The same output, marked truncated.
    #[must_use]
    pub fn truncated(mut self, truncated: bool) -> Self {
        self.truncated = truncated;
        self
    }
}

/// What an executor returns on failure. A tool error ends the call, not the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolError {
    /// A stable, `snake_case` code: `not_found`, `timeout`, `not_utf8`.
    pub code: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknowns: Vec<String>,
}

impl ToolError {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            unknowns: Vec::new(),
        }
    }
}

/// What a reviewer needs to know about a call, without argument values, file bodies,
/// environment or absolute paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// toolgate's own id for this call, unique across processes, assigned at stage 1: it
    /// matches a result a caller received to its audit record.
    #[serde(default)]
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The tool as named by the caller (normalized), or as resolved.
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub descriptor_digest: Option<Digest>,
    pub surface: Surface,
    pub actor: String,
    pub profile: String,
    /// The workspace, identified by a digest of its root.
    pub workspace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<EffectClass>,
    /// Argument names that passed validation.
    pub argument_names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argument_digest: Option<Digest>,
    /// Resources the call touches, workspace-relative (`path:src/lib.rs`).
    pub resources: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// Policies that decided the call.
    pub policies: Vec<String>,
    /// Time spent in each stage reached, in nanoseconds.
    pub durations_ns: BTreeMap<String, u64>,
    pub total_ns: u64,
    /// Size of the output returned, after redaction.
    pub output_bytes: usize,
    pub truncated: bool,
    /// Secrets replaced in the output.
    pub redactions: usize,
}

/// The result of one call through the pipeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolError>,
    pub evidence: Evidence,
    /// What nobody can vouch for: side effects of a killed process, a file changed
    /// concurrently, output cut short.
    pub unknowns: Vec<String>,
}

impl Outcome {
    /// A one-paragraph summary for a model or a terminal.
    pub fn summary(&self) -> String {
        match (&self.rejection, &self.error) {
            (Some(rejection), _) => rejection.to_string(),
            (None, Some(error)) => format!("tool failed ({}): {}", error.code, error.message),
            (None, None) => format!("{} completed", self.evidence.tool),
        }
    }
}
