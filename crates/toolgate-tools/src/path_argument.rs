//! The `path` argument every builtin takes: refused in stage 3, named in stage 4, resolved
//! again in stage 7.
//!
//! Stage 3 rejects only what is wrong with the *path* (it leads out, it is not a usable
//! name). A path that is merely missing, or names a directory where a file is wanted, passes:
//! that is the tool's answer to give (`not_found`, `is_a_directory`), and the model learns
//! more from it than from a rejection.

use serde_json::{Map, Value, json};
use toolgate_core::{Classification, FieldError, RejectCode, ToolError};
use toolgate_workspace::{PathError, PathKind, RelPath, ResolvedPath, Workspace};

const HINT: &str = "paths are relative to the workspace root, e.g. `src/main.rs`";

/// The longest `path` a schema admits, in bytes.
const MAX_PATH_BYTES: usize = 4096;

/// The schema of a `path` the tool needs (a file): required by the tool's schema, and never
/// empty.
pub(crate) fn required_schema(description: &str) -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_PATH_BYTES,
        "description": description
    })
}

/// The schema of a `path` the tool may go without: absent, it is the workspace root.
pub(crate) fn schema(description: &str) -> Value {
    json!({
        "type": "string",
        "maxLength": MAX_PATH_BYTES,
        "description": description
    })
}

/// Stage 3: field errors for the path in `field`, if any. An absent path is the schema's
/// business (required) or the root (optional).
pub(crate) fn check(
    workspace: &Workspace,
    arguments: &Map<String, Value>,
    field: &str,
) -> Vec<FieldError> {
    let Some(raw) = raw(arguments, field) else {
        return Vec::new();
    };
    let pointer = format!("/{field}");
    match workspace
        .check_path(raw)
        .and_then(|rel| workspace.resolve(&rel))
    {
        Err(error @ PathError::Outside { .. }) => vec![
            FieldError::new(pointer, RejectCode::PathOutsideWorkspace, error.to_string())
                .with_hint(Some(HINT.to_owned())),
        ],
        Err(error @ PathError::Invalid { .. }) => vec![
            FieldError::new(pointer, RejectCode::ConstraintViolation, error.to_string())
                .with_hint(Some(HINT.to_owned())),
        ],
        Ok(_)
        | Err(PathError::NotFound { .. } | PathError::NotAFile { .. } | PathError::Io { .. }) => {
            Vec::new()
        }
    }
}

/// Stage 4: the path as given and, when a link inside the workspace redirects it, where it
/// leads — a policy about `secrets/` must see `secrets/key` even when it is reached as
/// `innocent_link`.
pub(crate) fn classify(
    workspace: &Workspace,
    arguments: &Map<String, Value>,
    field: &str,
) -> Classification {
    let rel = match raw(arguments, field) {
        Some(raw) => match workspace.check_path(raw) {
            Ok(rel) => rel,
            // Stage 3 refused it already; nothing to classify.
            Err(_) => return Classification::default(),
        },
        None => RelPath::root(),
    };
    let mut paths = vec![rel.to_string()];
    if let Ok(resolved) = workspace.resolve(&rel)
        && resolved.target != rel
    {
        paths.push(resolved.target.to_string());
    }
    Classification {
        resources: paths.iter().map(|p| format!("path:{p}")).collect(),
        paths,
        ..Classification::default()
    }
}

/// Stage 7: the path checked and resolved again, now as the tool's error if it fails. An
/// absent path is the workspace root.
pub(crate) fn resolve(
    workspace: &Workspace,
    arguments: &Map<String, Value>,
    field: &str,
) -> Result<ResolvedPath, ToolError> {
    workspace
        .resolve(&rel(workspace, arguments, field)?)
        .map_err(tool_error)
}

/// The argument `field` as a workspace-relative path, or the root when it is absent.
pub(crate) fn rel(
    workspace: &Workspace,
    arguments: &Map<String, Value>,
    field: &str,
) -> Result<RelPath, ToolError> {
    match raw(arguments, field) {
        Some(raw) => workspace.check_path(raw).map_err(tool_error),
        None => Ok(RelPath::root()),
    }
}

/// The argument `field` as the model sent it, if it is a string.
fn raw<'a>(arguments: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    arguments.get(field).and_then(Value::as_str)
}

/// A path error as the tool's error, with a stable code.
pub(crate) fn tool_error(error: PathError) -> ToolError {
    let code = match &error {
        PathError::NotFound { .. } => "not_found",
        PathError::NotAFile {
            kind: PathKind::Dir,
            ..
        } => "is_a_directory",
        PathError::NotAFile { .. } => "not_a_file",
        PathError::Outside { .. } => "outside_workspace",
        PathError::Invalid { .. } => "invalid_path",
        PathError::Io { .. } => "io_error",
    };
    ToolError::new(code, error.to_string())
}
