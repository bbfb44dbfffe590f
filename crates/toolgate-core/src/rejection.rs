//! Why a call stopped: the stage, a stable code, and words that help the caller fix it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The most field errors a rejection names. Arguments of a megabyte can hold hundreds of
/// thousands of problems (an array of empty objects, each missing its required fields); the
/// model needs the first few to mend its call, and past this many a rejection says there are
/// more.
pub const MAX_FIELD_ERRORS: usize = 64;

/// The stages of the pipeline, in order: the eight, and the operator's hooks, which run
/// before the policy (pre_call) and before describe (post_call).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    Normalize,
    Resolve,
    Validate,
    Classify,
    Hook,
    Authorize,
    Approve,
    Execute,
    Describe,
}

impl Stage {
    /// Every stage, in pipeline order.
    pub const ALL: [Stage; 9] = [
        Stage::Normalize,
        Stage::Resolve,
        Stage::Validate,
        Stage::Classify,
        Stage::Hook,
        Stage::Authorize,
        Stage::Approve,
        Stage::Execute,
        Stage::Describe,
    ];

    /// The stage's name as written in outcomes, `snake_case`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Normalize => "normalize",
            Stage::Resolve => "resolve",
            Stage::Validate => "validate",
            Stage::Classify => "classify",
            Stage::Hook => "hook",
            Stage::Authorize => "authorize",
            Stage::Approve => "approve",
            Stage::Execute => "execute",
            Stage::Describe => "describe",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stable, machine-readable reason for a rejection. Each belongs to exactly one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectCode {
    // normalize
    Malformed,
    TooLarge,
    // resolve
    UnknownTool,
    NotInProfile,
    Disabled,
    VersionIncompatible,
    AmbiguousVersion,
    StaleDescriptor,
    Unavailable,
    // validate
    MissingInput,
    InvalidType,
    UnknownArgument,
    ConstraintViolation,
    PathOutsideWorkspace,
    ReadRequired,
    StaleWrite,
    /// The call runs a program, and this machine cannot confine it as the rules in force ask.
    SandboxUnavailable,
    // authorize
    SurfaceNotAllowed,
    PolicyDenied,
    // hook
    /// An operator's hook refused the call, with its reason.
    HookDenied,
    /// An operator's hook gave no clean answer; the kind is in the message and the record.
    HookFailed,
    // approve
    ApprovalRequired,
    ApprovalDenied,
    ApprovalExpired,
    ApprovalInvalid,
}

impl RejectCode {
    /// Every code, for tables and tests.
    pub const ALL: [RejectCode; 25] = [
        RejectCode::Malformed,
        RejectCode::TooLarge,
        RejectCode::UnknownTool,
        RejectCode::NotInProfile,
        RejectCode::Disabled,
        RejectCode::VersionIncompatible,
        RejectCode::AmbiguousVersion,
        RejectCode::StaleDescriptor,
        RejectCode::Unavailable,
        RejectCode::MissingInput,
        RejectCode::InvalidType,
        RejectCode::UnknownArgument,
        RejectCode::ConstraintViolation,
        RejectCode::PathOutsideWorkspace,
        RejectCode::ReadRequired,
        RejectCode::StaleWrite,
        RejectCode::SandboxUnavailable,
        RejectCode::SurfaceNotAllowed,
        RejectCode::PolicyDenied,
        RejectCode::HookDenied,
        RejectCode::HookFailed,
        RejectCode::ApprovalRequired,
        RejectCode::ApprovalDenied,
        RejectCode::ApprovalExpired,
        RejectCode::ApprovalInvalid,
    ];

    /// The stage that issues this code.
    pub fn stage(self) -> Stage {
        use RejectCode::*;
        match self {
            Malformed | TooLarge => Stage::Normalize,
            UnknownTool | NotInProfile | Disabled | VersionIncompatible | AmbiguousVersion
            | StaleDescriptor | Unavailable => Stage::Resolve,
            MissingInput | InvalidType | UnknownArgument | ConstraintViolation
            | PathOutsideWorkspace | ReadRequired | StaleWrite | SandboxUnavailable => {
                Stage::Validate
            }
            SurfaceNotAllowed | PolicyDenied => Stage::Authorize,
            HookDenied | HookFailed => Stage::Hook,
            ApprovalRequired | ApprovalDenied | ApprovalExpired | ApprovalInvalid => Stage::Approve,
        }
    }

    /// The code as written in outcomes, `snake_case`.
    pub fn as_str(self) -> &'static str {
        use RejectCode::*;
        match self {
            Malformed => "malformed",
            TooLarge => "too_large",
            UnknownTool => "unknown_tool",
            NotInProfile => "not_in_profile",
            Disabled => "disabled",
            VersionIncompatible => "version_incompatible",
            AmbiguousVersion => "ambiguous_version",
            StaleDescriptor => "stale_descriptor",
            Unavailable => "unavailable",
            MissingInput => "missing_input",
            InvalidType => "invalid_type",
            UnknownArgument => "unknown_argument",
            ConstraintViolation => "constraint_violation",
            PathOutsideWorkspace => "path_outside_workspace",
            ReadRequired => "read_required",
            StaleWrite => "stale_write",
            SandboxUnavailable => "sandbox_unavailable",
            SurfaceNotAllowed => "surface_not_allowed",
            PolicyDenied => "policy_denied",
            HookDenied => "hook_denied",
            HookFailed => "hook_failed",
            ApprovalRequired => "approval_required",
            ApprovalDenied => "approval_denied",
            ApprovalExpired => "approval_expired",
            ApprovalInvalid => "approval_invalid",
        }
    }
}

impl fmt::Display for RejectCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem with one argument, located by a JSON pointer into the arguments object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldError {
    /// JSON pointer (RFC 6901) to the offending value, `""` for the arguments object itself.
    pub pointer: String,
    pub code: RejectCode,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl FieldError {
    /// A field error at `pointer`.
    pub fn new(pointer: impl Into<String>, code: RejectCode, message: impl Into<String>) -> Self {
        FieldError {
            pointer: pointer.into(),
            code,
            message: message.into(),
            hint: None,
        }
    }

    /// The same error with a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }
}

/// A call that stopped before it ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
///
/// Its fields are private: a rejection is made only by the stage that owns its code (see
/// [`RejectCode::stage`] and the `pipeline` module of that stage), and nothing after it can
/// change what was decided; stage 8 only redacts its words.
pub struct Rejection {
    stage: Stage,
    code: RejectCode,
    message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hint: Option<String>,
    /// Every argument problem found, when the stage is `validate`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    details: Vec<FieldError>,
    /// The policies that decided, when the stage is `authorize`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    policies: Vec<String>,
}

impl Rejection {
    /// A rejection with `code` at the code's own stage.
    pub fn new(code: RejectCode, message: impl Into<String>) -> Self {
        Rejection {
            stage: code.stage(),
            code,
            message: message.into(),
            hint: None,
            details: Vec::new(),
            policies: Vec::new(),
        }
    }

    /// The same rejection with a hint.
    #[must_use]
    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }

    /// The same rejection naming the policies that decided it.
    #[must_use]
    pub(crate) fn with_policies(mut self, policies: Vec<String>) -> Self {
        self.policies = policies;
        self
    }

    /// The stage that refused the call: always its code's own.
    pub fn stage(&self) -> Stage {
        self.stage
    }

    pub fn code(&self) -> RejectCode {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// Every argument problem found, when the stage is `validate`.
    pub fn details(&self) -> &[FieldError] {
        &self.details
    }

    /// The policies that decided, when the stage is `authorize`.
    pub fn policies(&self) -> &[String] {
        &self.policies
    }

    /// Replaces secrets in everything the rejection says (stage 8); the number replaced.
    pub(crate) fn redact(&mut self) -> usize {
        use crate::redact::redact_string;
        redact_string(&mut self.message)
            + self.hint.as_mut().map_or(0, redact_string)
            + self
                .details
                .iter_mut()
                .map(|detail| {
                    redact_string(&mut detail.message)
                        + detail.hint.as_mut().map_or(0, redact_string)
                })
                .sum::<usize>()
    }

    /// A validation rejection from a non-empty list of field errors: the code is the most
    /// actionable one present, the message states every problem once, and the hint is the
    /// errors' own hints in one line. `details` keeps the errors as found, the first
    /// [`MAX_FIELD_ERRORS`] of them in that order; the message says when there were more.
    pub fn from_field_errors(mut errors: Vec<FieldError>) -> Self {
        // Order of precedence: a misspelt name explains a missing one, a missing one explains
        // nothing else, a wrong type comes before a wrong value.
        fn rank(code: RejectCode) -> u8 {
            match code {
                RejectCode::UnknownArgument => 0,
                RejectCode::MissingInput => 1,
                RejectCode::InvalidType => 2,
                RejectCode::PathOutsideWorkspace => 3,
                _ => 4,
            }
        }
        errors.sort_by(|a, b| {
            (rank(a.code), &a.pointer, &a.message).cmp(&(rank(b.code), &b.pointer, &b.message))
        });
        errors.dedup();
        let more = errors.len() > MAX_FIELD_ERRORS;
        errors.truncate(MAX_FIELD_ERRORS);
        let Some(first) = errors.first() else {
            return Rejection::new(RejectCode::ConstraintViolation, "arguments are invalid");
        };
        // A field error speaks for stage 3 only: a check that names another stage's code (a
        // tool's `check` saying `policy_denied`) is a constraint its arguments broke.
        let code = match first.code.stage() {
            Stage::Validate => first.code,
            _ => RejectCode::ConstraintViolation,
        };
        let shown: Vec<&FieldError> = errors
            .iter()
            .filter(|e| !explained_by_a_misspelling(e, &errors))
            .collect();
        Rejection {
            stage: Stage::Validate,
            code,
            message: if more {
                format!(
                    "{}; and more problems than these {MAX_FIELD_ERRORS}",
                    field_message(&shown)
                )
            } else {
                field_message(&shown)
            },
            hint: field_hint(&shown),
            details: errors.clone(),
            policies: Vec::new(),
        }
    }
}

/// A missing argument that a misspelt one next to it is suggested for: `pth` given and `path`
/// missing is one mistake, which the misspelling's hint already names.
fn explained_by_a_misspelling(error: &FieldError, errors: &[FieldError]) -> bool {
    if error.code != RejectCode::MissingInput {
        return false;
    }
    let (parent, name) = split_pointer(&error.pointer);
    let suggestion = crate::hint::hint_for(Some(&name));
    errors.iter().any(|other| {
        other.code == RejectCode::UnknownArgument
            && split_pointer(&other.pointer).0 == parent
            && other.hint == suggestion
    })
}

/// Every error's message, each clause once: siblings that share a clause (`expected one of
/// …`) say it once, after the last of them. An error whose message does not name its argument
/// is prefixed with it.
fn field_message(errors: &[&FieldError]) -> String {
    let clauses: Vec<Vec<&str>> = errors
        .iter()
        .map(|e| {
            e.message
                .split("; ")
                // A misspelling's hint names the argument it meant; the list of every argument
                // would name it a second time, and the schema has the list.
                .filter(|clause| {
                    !(e.code == RejectCode::UnknownArgument
                        && e.hint.is_some()
                        && clause.starts_with("expected one of "))
                })
                .collect()
        })
        .collect();
    let mut parts: Vec<String> = Vec::new();
    for (i, (error, own)) in errors.iter().zip(&clauses).enumerate() {
        let later = clauses.get(i + 1..).unwrap_or_default();
        let kept: Vec<&str> = own
            .iter()
            .copied()
            .filter(|clause| !later.iter().any(|l| l.contains(clause)))
            .collect();
        if kept.is_empty() {
            continue;
        }
        let text = kept.join("; ");
        match located(error) {
            Some(place) => parts.push(format!("{place}: {text}")),
            None => parts.push(text),
        }
    }
    parts.join("; ")
}

/// What to do about arguments that are missing, when nothing else says: the message names
/// them, so the hint does not.
const ADD_MISSING: &str = "add it and call again; the tool's input schema says what it holds";

/// The errors' hints as one line: one as it is, several suggestions as one question (in the
/// order the message names the arguments), other hints one after another.
fn field_hint(errors: &[&FieldError]) -> Option<String> {
    let mut hints: Vec<&str> = Vec::new();
    for hint in errors.iter().filter_map(|e| e.hint.as_deref()) {
        if !hints.contains(&hint) {
            hints.push(hint);
        }
    }
    let suggested: Vec<&str> = hints
        .iter()
        .filter_map(|h| h.strip_prefix("did you mean ")?.strip_suffix('?'))
        .collect();
    match hints.as_slice() {
        [] if errors.iter().any(|e| e.code == RejectCode::MissingInput) => {
            Some(ADD_MISSING.to_owned())
        }
        [] => None,
        [hint] => Some((*hint).to_owned()),
        several if suggested.len() == several.len() => {
            let (last, rest) = suggested.split_last()?;
            Some(format!("did you mean {} and {last}?", rest.join(", ")))
        }
        several => Some(several.join("; ")),
    }
}

/// Where an error is, when its message does not say: `` `limit` `` for a top-level argument,
/// the pointer for a nested value.
fn located(error: &FieldError) -> Option<String> {
    if error.pointer.is_empty() {
        return None;
    }
    let (_, name) = split_pointer(&error.pointer);
    let quoted = format!("`{name}`");
    // A hint that names the argument says where the problem is, and saying it twice helps
    // nobody.
    let named = error.message.contains(&quoted)
        || error.message.starts_with(&format!("{name} "))
        || error.hint.as_deref().is_some_and(|h| h.contains(&quoted));
    (!named).then(|| display_pointer(&error.pointer))
}

/// A top-level argument by its name, anything deeper by its JSON pointer.
fn display_pointer(pointer: &str) -> String {
    let (parent, name) = split_pointer(pointer);
    if parent.is_empty() {
        format!("`{name}`")
    } else {
        format!("`{pointer}`")
    }
}

/// `/edits/0/old_text` as (`/edits/0`, `old_text`), the last segment unescaped.
fn split_pointer(pointer: &str) -> (&str, String) {
    let (parent, last) = pointer.rsplit_once('/').unwrap_or(("", pointer));
    (parent, last.replace("~1", "/").replace("~0", "~"))
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rejected at {} ({}): {}",
            self.stage, self.code, self.message
        )?;
        if let Some(hint) = &self.hint {
            write!(f, ". Hint: {hint}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_name_and_round_trips() {
        let mut names: Vec<&str> = RejectCode::ALL.iter().map(|c| c.as_str()).collect();
        for code in RejectCode::ALL {
            let json = serde_json::to_string(&code).unwrap();
            assert_eq!(json, format!("\"{}\"", code.as_str()));
            assert_eq!(serde_json::from_str::<RejectCode>(&json).unwrap(), code);
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), RejectCode::ALL.len());
    }

    #[test]
    fn a_field_error_cannot_issue_another_stages_code() {
        let rejection = Rejection::from_field_errors(vec![FieldError::new(
            "/a",
            RejectCode::PolicyDenied,
            "forbidden",
        )]);
        assert_eq!(
            (rejection.stage(), rejection.code()),
            (Stage::Validate, RejectCode::ConstraintViolation)
        );
    }

    #[test]
    fn field_errors_rank_misspellings_first() {
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new("/path", RejectCode::MissingInput, "required"),
            FieldError::new("/file_path", RejectCode::UnknownArgument, "unknown")
                .with_hint(Some("did you mean `path`?".into())),
        ]);
        assert_eq!(rejection.code, RejectCode::UnknownArgument);
        assert_eq!(rejection.stage, Stage::Validate);
        assert_eq!(rejection.hint.as_deref(), Some("did you mean `path`?"));
        // The missing `path` is the misspelt `file_path`: one mistake, said once.
        assert_eq!(rejection.message, "`file_path`: unknown");
        assert_eq!(rejection.details.len(), 2, "details keep every error");
    }

    #[test]
    fn each_problem_is_said_once() {
        let expected = "expected one of `path`, `offset`, `limit`";
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new(
                "/pth",
                RejectCode::UnknownArgument,
                format!("unknown argument `pth`; {expected}"),
            )
            .with_hint(Some("did you mean `path`?".into())),
            FieldError::new(
                "/lmit",
                RejectCode::UnknownArgument,
                format!("unknown argument `lmit`; {expected}"),
            )
            .with_hint(Some("did you mean `limit`?".into())),
            FieldError::new(
                "/path",
                RejectCode::MissingInput,
                "missing required argument `path`",
            ),
            FieldError::new(
                "/edits/0/old_text",
                RejectCode::ConstraintViolation,
                "\"\" is shorter than 1 character",
            ),
        ]);
        // Each misspelling's hint names what it meant, so the list of every argument is left
        // out.
        assert_eq!(
            rejection.message,
            "unknown argument `lmit`; unknown argument `pth`; \
             `/edits/0/old_text`: \"\" is shorter than 1 character"
        );
        assert!(!rejection.message.contains(expected));
        assert_eq!(
            rejection.hint.as_deref(),
            Some("did you mean `limit` and `path`?")
        );
    }

    #[test]
    fn a_missing_argument_no_misspelling_explains_is_reported() {
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new(
                "/banana",
                RejectCode::UnknownArgument,
                "unknown argument `banana`",
            ),
            FieldError::new(
                "/path",
                RejectCode::MissingInput,
                "missing required argument `path`",
            ),
        ]);
        assert_eq!(
            rejection.message,
            "unknown argument `banana`; missing required argument `path`"
        );
        assert_eq!(rejection.hint.as_deref(), Some(ADD_MISSING));
    }

    #[test]
    fn an_argument_the_hint_names_is_not_named_again() {
        let rejection = Rejection::from_field_errors(vec![
            FieldError::new(
                "/expected_digest",
                RejectCode::ReadRequired,
                "`a.txt` exists; changing it requires proof that you read it",
            )
            .with_hint(Some("pass the `digest` as `expected_digest`".into())),
        ]);
        assert_eq!(
            rejection.message,
            "`a.txt` exists; changing it requires proof that you read it"
        );
        let typed = Rejection::from_field_errors(vec![FieldError::new(
            "/limit",
            RejectCode::InvalidType,
            "\"5\" is not of type \"integer\"",
        )]);
        assert_eq!(typed.message, "`limit`: \"5\" is not of type \"integer\"");
    }

    #[test]
    fn the_summary_is_one_paragraph() {
        let rejection =
            Rejection::new(RejectCode::UnknownTool, "no tool `reed_file` is registered")
                .with_hint(Some("did you mean `read_file`?".into()));
        assert_eq!(
            rejection.to_string(),
            "rejected at resolve (unknown_tool): no tool `reed_file` is registered. \
             Hint: did you mean `read_file`?"
        );
    }

    #[test]
    fn a_rejection_names_at_most_so_many_field_errors_and_says_there_were_more() {
        // 200,000 missing fields: quadratic work over them took two minutes.
        let errors: Vec<FieldError> = (0..100_000)
            .flat_map(|i| {
                ["oldText", "newText"].map(|name| {
                    FieldError::new(
                        format!("/edits/{i}/{name}"),
                        RejectCode::MissingInput,
                        format!("missing required argument `{name}`"),
                    )
                })
            })
            .collect();
        let rejection = Rejection::from_field_errors(errors);
        assert_eq!(rejection.details.len(), MAX_FIELD_ERRORS);
        assert!(
            rejection
                .message
                .ends_with("; and more problems than these 64"),
            "{}",
            rejection.message
        );
        let few = Rejection::from_field_errors(vec![FieldError::new(
            "/a",
            RejectCode::MissingInput,
            "missing required argument `a`",
        )]);
        assert!(!few.message.contains("more problems"), "{}", few.message);
    }
}
