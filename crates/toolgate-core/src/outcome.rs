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
    /// What went wrong, as a stable `snake_case` code on the wire: `not_found`, `timeout`.
    pub code: ToolErrorCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknowns: Vec<String>,
}

impl ToolError {
    pub fn new(code: impl Into<ToolErrorCode>, message: impl Into<String>) -> Self {
        ToolError {
            code: code.into(),
            message: message.into(),
            unknowns: Vec::new(),
        }
    }
}

/// Why a tool failed. The wire spelling of each code is its `snake_case` name, the same
/// string callers, the audit log and the console have always seen; a new failure gets a new
/// variant here rather than a string at the call site, so that every code a caller can meet
/// is listed in one place.
///
/// A tool's own words about a failure travel in [`ToolError::message`]: an upstream's error is
/// `upstream_error` or `tool_error` with what the upstream said, never a code it chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorCode {
    // What a path names, at the moment the tool looks.
    NotFound,
    IsADirectory,
    NotAFile,
    NotADirectory,
    OutsideWorkspace,
    InvalidPath,
    IoError,
    // What a file holds.
    NotUtf8,
    TooLarge,
    OffsetOutOfRange,
    // Searches.
    InvalidPattern,
    InvalidGlob,
    // Writes: the file is no longer the one approved.
    StaleWrite,
    // Commands.
    InvalidCommand,
    InvalidCwd,
    ProgramNotFound,
    NotExecutable,
    SpawnFailed,
    SubreaperUnavailable,
    SandboxUnavailable,
    SandboxFailed,
    SandboxInvalidPath,
    /// What stage 7 found differs from what stage 4 planned and the user approved.
    ProgramChanged,
    CwdChanged,
    ScriptChanged,
    /// A process changed files that another program runs later, which the approval did not
    /// name: they were put back, and the call failed.
    RunsLaterChanged,
    /// A process the call started could not be confirmed ended once it was killed: what it
    /// does after the call's last look is nobody's to vouch for, so the call fails whatever
    /// the command's own result.
    Unkillable,
    // Git.
    NotARepository,
    RepositoryOutsideWorkspace,
    GitError,
    // Upstream MCP servers.
    UpstreamUnavailable,
    UpstreamTimeout,
    UpstreamProtocolError,
    /// The upstream refused the call; its message says why.
    UpstreamError,
    /// The upstream's tool reported a failure (`isError`); its text is the message.
    ToolError,
    StaleDescriptor,
    // Any tool.
    Timeout,
    Cancelled,
    OutputTooLarge,
    ToolPanicked,
    AuditUnavailable,
    /// What stage 7 was handed is not what the tool's stage 4 makes: the call did not run.
    PlanMismatch,
    /// A code this build does not know, read from elsewhere (an older or newer record).
    #[serde(other)]
    Unrecognized,
}

impl ToolErrorCode {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        use ToolErrorCode as C;
        match self {
            C::NotFound => "not_found",
            C::IsADirectory => "is_a_directory",
            C::NotAFile => "not_a_file",
            C::NotADirectory => "not_a_directory",
            C::OutsideWorkspace => "outside_workspace",
            C::InvalidPath => "invalid_path",
            C::IoError => "io_error",
            C::NotUtf8 => "not_utf8",
            C::TooLarge => "too_large",
            C::OffsetOutOfRange => "offset_out_of_range",
            C::InvalidPattern => "invalid_pattern",
            C::InvalidGlob => "invalid_glob",
            C::StaleWrite => "stale_write",
            C::InvalidCommand => "invalid_command",
            C::InvalidCwd => "invalid_cwd",
            C::ProgramNotFound => "program_not_found",
            C::NotExecutable => "not_executable",
            C::SpawnFailed => "spawn_failed",
            C::SubreaperUnavailable => "subreaper_unavailable",
            C::SandboxUnavailable => "sandbox_unavailable",
            C::SandboxFailed => "sandbox_failed",
            C::SandboxInvalidPath => "sandbox_invalid_path",
            C::ProgramChanged => "program_changed",
            C::CwdChanged => "cwd_changed",
            C::ScriptChanged => "script_changed",
            C::RunsLaterChanged => "runs_later_changed",
            C::Unkillable => "unkillable",
            C::NotARepository => "not_a_repository",
            C::RepositoryOutsideWorkspace => "repository_outside_workspace",
            C::GitError => "git_error",
            C::UpstreamUnavailable => "upstream_unavailable",
            C::UpstreamTimeout => "upstream_timeout",
            C::UpstreamProtocolError => "upstream_protocol_error",
            C::UpstreamError => "upstream_error",
            C::ToolError => "tool_error",
            C::StaleDescriptor => "stale_descriptor",
            C::Timeout => "timeout",
            C::Cancelled => "cancelled",
            C::OutputTooLarge => "output_too_large",
            C::ToolPanicked => "tool_panicked",
            C::AuditUnavailable => "audit_unavailable",
            C::PlanMismatch => "plan_mismatch",
            C::Unrecognized => "unrecognized",
        }
    }

    /// Every code, for tests that hold the spellings to serde's.
    pub const ALL: [ToolErrorCode; 43] = {
        use ToolErrorCode as C;
        [
            C::NotFound,
            C::IsADirectory,
            C::NotAFile,
            C::NotADirectory,
            C::OutsideWorkspace,
            C::InvalidPath,
            C::IoError,
            C::NotUtf8,
            C::TooLarge,
            C::OffsetOutOfRange,
            C::InvalidPattern,
            C::InvalidGlob,
            C::StaleWrite,
            C::InvalidCommand,
            C::InvalidCwd,
            C::ProgramNotFound,
            C::NotExecutable,
            C::SpawnFailed,
            C::SubreaperUnavailable,
            C::SandboxUnavailable,
            C::SandboxFailed,
            C::SandboxInvalidPath,
            C::ProgramChanged,
            C::CwdChanged,
            C::ScriptChanged,
            C::RunsLaterChanged,
            C::Unkillable,
            C::NotARepository,
            C::RepositoryOutsideWorkspace,
            C::GitError,
            C::UpstreamUnavailable,
            C::UpstreamTimeout,
            C::UpstreamProtocolError,
            C::UpstreamError,
            C::ToolError,
            C::StaleDescriptor,
            C::Timeout,
            C::Cancelled,
            C::OutputTooLarge,
            C::ToolPanicked,
            C::AuditUnavailable,
            C::PlanMismatch,
            C::Unrecognized,
        ]
    };

    /// The code spelled `wire`, if this build knows it.
    pub fn from_wire(wire: &str) -> Option<ToolErrorCode> {
        ToolErrorCode::ALL
            .into_iter()
            .find(|code| code.as_str() == wire)
    }
}

impl std::fmt::Display for ToolErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ToolErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ToolErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for ToolErrorCode {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
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
    /// What the client that asked says it is, and its session (MCP `clientInfo`): its claim,
    /// unchecked, for display; it decides nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
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
    /// What each hook the call ran answered (see [`crate::pipeline::Hook`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<crate::pipeline::HookRecord>,
}

/// The result of one call through the pipeline, by how it ended, with the evidence and the
/// unknowns every end has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "OutcomeRecord", try_from = "OutcomeRecord")]
pub enum Outcome {
    /// The tool ran and succeeded.
    Done {
        output: Value,
        evidence: Evidence,
        unknowns: Vec<String>,
    },
    /// The tool ran and failed, or its result could not be recorded.
    Failed {
        error: ToolError,
        evidence: Evidence,
        unknowns: Vec<String>,
    },
    /// A stage stopped the call before the tool ran.
    Refused {
        rejection: Rejection,
        evidence: Evidence,
        unknowns: Vec<String>,
    },
}

/// An outcome as it is written out: a status and the one part that status has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct OutcomeRecord {
    status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rejection: Option<Rejection>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<ToolError>,
    evidence: Evidence,
    unknowns: Vec<String>,
}

impl From<Outcome> for OutcomeRecord {
    fn from(outcome: Outcome) -> OutcomeRecord {
        let status = outcome.status();
        let (rejection, output, error, evidence, unknowns) = match outcome {
            Outcome::Done {
                output,
                evidence,
                unknowns,
            } => (None, Some(output), None, evidence, unknowns),
            Outcome::Failed {
                error,
                evidence,
                unknowns,
            } => (None, None, Some(error), evidence, unknowns),
            Outcome::Refused {
                rejection,
                evidence,
                unknowns,
            } => (Some(rejection), None, None, evidence, unknowns),
        };
        OutcomeRecord {
            status,
            rejection,
            output,
            error,
            evidence,
            unknowns,
        }
    }
}

impl TryFrom<OutcomeRecord> for Outcome {
    type Error = &'static str;

    fn try_from(record: OutcomeRecord) -> Result<Outcome, &'static str> {
        let OutcomeRecord {
            status,
            rejection,
            output,
            error,
            evidence,
            unknowns,
        } = record;
        match (status, rejection, output, error) {
            (Status::Completed, None, output, None) => Ok(Outcome::Done {
                output: output.unwrap_or(Value::Null),
                evidence,
                unknowns,
            }),
            (Status::Failed, None, None, Some(error)) => Ok(Outcome::Failed {
                error,
                evidence,
                unknowns,
            }),
            (Status::Rejected, Some(rejection), None, None) => Ok(Outcome::Refused {
                rejection,
                evidence,
                unknowns,
            }),
            _ => Err("an outcome holds exactly the part its status has"),
        }
    }
}

impl Outcome {
    /// The tool ran and succeeded with `output`.
    pub fn done(output: Value, evidence: Evidence, unknowns: Vec<String>) -> Outcome {
        Outcome::Done {
            output,
            evidence,
            unknowns,
        }
    }

    /// The tool ran, or its result could not be kept, and the call failed with `error`.
    pub fn failed(error: ToolError, evidence: Evidence, unknowns: Vec<String>) -> Outcome {
        Outcome::Failed {
            error,
            evidence,
            unknowns,
        }
    }

    /// A stage stopped the call before the tool ran.
    pub fn refused(rejection: Rejection, evidence: Evidence, unknowns: Vec<String>) -> Outcome {
        Outcome::Refused {
            rejection,
            evidence,
            unknowns,
        }
    }

    /// How the call ended.
    pub fn status(&self) -> Status {
        match self {
            Outcome::Done { .. } => Status::Completed,
            Outcome::Failed { .. } => Status::Failed,
            Outcome::Refused { .. } => Status::Rejected,
        }
    }

    /// What stopped the call, when a stage did.
    pub fn rejection(&self) -> Option<&Rejection> {
        match self {
            Outcome::Refused { rejection, .. } => Some(rejection),
            Outcome::Done { .. } | Outcome::Failed { .. } => None,
        }
    }

    /// The tool's output, redacted and bounded, when it completed.
    pub fn output(&self) -> Option<&Value> {
        match self {
            Outcome::Done { output, .. } => Some(output),
            Outcome::Failed { .. } | Outcome::Refused { .. } => None,
        }
    }

    /// The tool's output, when it completed, given up by the outcome.
    pub fn into_output(self) -> Option<Value> {
        match self {
            Outcome::Done { output, .. } => Some(output),
            Outcome::Failed { .. } | Outcome::Refused { .. } => None,
        }
    }

    /// Why the call failed, when it ran and failed.
    pub fn error(&self) -> Option<&ToolError> {
        match self {
            Outcome::Failed { error, .. } => Some(error),
            Outcome::Done { .. } | Outcome::Refused { .. } => None,
        }
    }

    /// What a reviewer needs to know about the call, whatever its end.
    pub fn evidence(&self) -> &Evidence {
        match self {
            Outcome::Done { evidence, .. }
            | Outcome::Failed { evidence, .. }
            | Outcome::Refused { evidence, .. } => evidence,
        }
    }

    /// What nobody can vouch for.
    pub fn unknowns(&self) -> &[String] {
        match self {
            Outcome::Done { unknowns, .. }
            | Outcome::Failed { unknowns, .. }
            | Outcome::Refused { unknowns, .. } => unknowns,
        }
    }

    /// The evidence, for the stages that complete it after the outcome is made.
    pub fn evidence_mut(&mut self) -> &mut Evidence {
        match self {
            Outcome::Done { evidence, .. }
            | Outcome::Failed { evidence, .. }
            | Outcome::Refused { evidence, .. } => evidence,
        }
    }

    /// The unknowns, for the stages that add to them after the outcome is made.
    pub fn unknowns_mut(&mut self) -> &mut Vec<String> {
        match self {
            Outcome::Done { unknowns, .. }
            | Outcome::Failed { unknowns, .. }
            | Outcome::Refused { unknowns, .. } => unknowns,
        }
    }

    /// The same call as a failure with `error` that withholds what it would have returned,
    /// saying in its unknowns what it was: a result that could not be recorded is not given.
    #[must_use]
    pub fn withheld(self, error: ToolError) -> Outcome {
        let said = match &self {
            Outcome::Refused { rejection, .. } => {
                format!("the call was rejected ({})", rejection.code())
            }
            // Stage 7 refused to start it: its start could not be recorded either.
            Outcome::Failed { error, .. } if error.code == ToolErrorCode::AuditUnavailable => {
                "the call did not run: its start could not be recorded".to_owned()
            }
            Outcome::Failed { error, .. } => {
                format!(
                    "the tool ran and failed ({}); its error is withheld",
                    error.code
                )
            }
            Outcome::Done { .. } => "the tool ran; its result is withheld".to_owned(),
        };
        let (mut evidence, mut unknowns) = match self {
            Outcome::Done {
                evidence, unknowns, ..
            }
            | Outcome::Failed {
                evidence, unknowns, ..
            }
            | Outcome::Refused {
                evidence, unknowns, ..
            } => (evidence, unknowns),
        };
        evidence.output_bytes = 0;
        unknowns.push(said);
        Outcome::Failed {
            error,
            evidence,
            unknowns,
        }
    }

    /// A one-paragraph summary for a model or a terminal.
    pub fn summary(&self) -> String {
        match self {
            Outcome::Refused { rejection, .. } => rejection.to_string(),
            Outcome::Failed { error, .. } => {
                format!("tool failed ({}): {}", error.code, error.message)
            }
            Outcome::Done { evidence, .. } => format!("{} completed", evidence.tool),
        }
    }
}

#[cfg(test)]
mod tool_error_tests {
    use super::*;

    #[test]
    fn each_code_is_spelled_on_the_wire_as_serde_spells_it() {
        for code in ToolErrorCode::ALL {
            let wire = serde_json::to_value(code).unwrap();
            assert_eq!(wire, code.as_str(), "{code:?}");
            assert_eq!(ToolErrorCode::from_wire(code.as_str()), Some(code));
            let back: ToolErrorCode = serde_json::from_value(wire).unwrap();
            assert_eq!(back, code);
        }
        let error = ToolError::new(ToolErrorCode::NotUtf8, "binary");
        assert_eq!(
            serde_json::to_string(&error).unwrap(),
            r#"{"code":"not_utf8","message":"binary"}"#
        );
        // A record written by another build still reads.
        let other: ToolError =
            serde_json::from_str(r#"{"code":"from_the_future","message":"m"}"#).unwrap();
        assert_eq!(other.code, ToolErrorCode::Unrecognized);
    }
}

#[cfg(test)]
mod outcome_tests {
    use super::*;
    use crate::rejection::RejectCode;

    fn evidence() -> Evidence {
        serde_json::from_value(serde_json::json!({
            "call_id": "c-1", "tool": "echo", "surface": "chat", "actor": "a",
            "profile": "default", "workspace": "sha256:00", "argument_names": [],
            "resources": [], "policies": [], "durations_ns": {}, "total_ns": 5,
            "output_bytes": 2, "truncated": false, "redactions": 0
        }))
        .unwrap()
    }

    // Audit records and `toolgate call --json` hold these shapes: a status, the one part it
    // has, the evidence and the unknowns, in that order.
    #[test]
    fn each_end_is_written_as_a_status_and_its_one_part() {
        let evidence_json = serde_json::to_string(&evidence()).unwrap();
        let done = Outcome::done(serde_json::json!("hi"), evidence(), vec!["u".to_owned()]);
        assert_eq!(
            serde_json::to_string(&done).unwrap(),
            format!(
                r#"{{"status":"completed","output":"hi","evidence":{evidence_json},"unknowns":["u"]}}"#
            )
        );
        let failed = Outcome::failed(
            ToolError::new(ToolErrorCode::Timeout, "slow"),
            evidence(),
            Vec::new(),
        );
        assert_eq!(
            serde_json::to_string(&failed).unwrap(),
            format!(
                r#"{{"status":"failed","error":{{"code":"timeout","message":"slow"}},"evidence":{evidence_json},"unknowns":[]}}"#
            )
        );
        let refused = Outcome::refused(
            Rejection::new(RejectCode::UnknownTool, "no such tool"),
            evidence(),
            Vec::new(),
        );
        let written = serde_json::to_string(&refused).unwrap();
        assert!(
            written.starts_with(r#"{"status":"rejected","rejection":{"#),
            "{written}"
        );
        assert!(
            !written.contains(r#""output""#) && !written.contains(r#""error""#),
            "{written}"
        );
        for outcome in [done, failed, refused] {
            let back: Outcome =
                serde_json::from_str(&serde_json::to_string(&outcome).unwrap()).unwrap();
            assert_eq!(back, outcome);
        }
    }

    #[test]
    fn a_record_with_a_part_its_status_does_not_have_is_refused() {
        let mut record =
            serde_json::to_value(Outcome::done(serde_json::json!(1), evidence(), Vec::new()))
                .unwrap();
        record["error"] = serde_json::json!({"code": "timeout", "message": "slow"});
        assert!(serde_json::from_value::<Outcome>(record).is_err());
        let mut record = serde_json::to_value(Outcome::failed(
            ToolError::new(ToolErrorCode::Timeout, "slow"),
            evidence(),
            Vec::new(),
        ))
        .unwrap();
        record["status"] = serde_json::json!("rejected");
        assert!(serde_json::from_value::<Outcome>(record).is_err());
    }
}
