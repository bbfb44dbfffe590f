//! The `path` argument every builtin takes: refused in stage 3, planned and named in stage 4,
//! resolved again in stage 7. Stage 4 names what stage 3 found, kept with the arguments in a
//! [`Looked`], rather than asking the file system a second time a few microseconds later.
//!
//! Stage 3 rejects only what is wrong with the *path* (it leads out, it is not a usable
//! name). A path that is merely missing, or names a directory where a file is wanted, passes:
//! that is the tool's answer to give (`not_found`, `is_a_directory`), and the model learns
//! more from it than from a rejection.

use std::borrow::Cow;
use std::sync::OnceLock;

use serde_json::{Value, json};
use toolgate_core::{Classification, FieldError, RejectCode, Resource, ToolError, ToolErrorCode};
use toolgate_workspace::{PathError, PathKind, RelPath, ResolvedPath, Workspace};

const HINT: &str = "paths are relative to the workspace root, e.g. `src/main.rs`";

/// The longest `path` a schema accepts, in bytes.
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

/// What stage 3 found of a path argument: the path as given, as parsed, and where it leads in
/// the file system. An argument type keeps one beside its path (`#[serde(skip)]`).
#[derive(Debug, Default)]
pub(crate) struct Looked(OnceLock<(String, Found)>);

/// A path parsed, and where it leads in the file system.
type Found = Result<(RelPath, Result<ResolvedPath, PathError>), PathError>;

impl Looked {
    /// What `raw` is, looked at the first time only.
    fn at(&self, workspace: &Workspace, raw: &str) -> Cow<'_, Found> {
        let (given, found) = self
            .0
            .get_or_init(|| (raw.to_owned(), look(workspace, raw)));
        if given == raw {
            Cow::Borrowed(found)
        } else {
            Cow::Owned(look(workspace, raw))
        }
    }

    /// What `raw` is, as looked at already or now: a `Looked` of another path is not used.
    fn into_found(self, workspace: &Workspace, raw: &str) -> Found {
        match self.0.into_inner() {
            Some((given, found)) if given == raw => found,
            _ => look(workspace, raw),
        }
    }
}

fn look(workspace: &Workspace, raw: &str) -> Found {
    workspace.check_path(raw).map(|rel| {
        let resolved = workspace.resolve(&rel);
        (rel, resolved)
    })
}

/// Stage 3: field errors for the path `raw` given as `field`, if any. An absent path is the
/// schema's business (required) or the root (optional).
pub(crate) fn check(
    workspace: &Workspace,
    raw: Option<&str>,
    field: &str,
    looked: &Looked,
) -> Vec<FieldError> {
    let Some(raw) = raw else {
        return Vec::new();
    };
    let seen = looked.at(workspace, raw);
    let found = match &*seen {
        Ok((_, resolved)) => resolved.as_ref().map(|_| ()),
        Err(error) => Err(error),
    };
    let pointer = || format!("/{field}");
    match found {
        Err(error @ PathError::Outside { .. }) => vec![
            FieldError::new(
                pointer(),
                RejectCode::PathOutsideWorkspace,
                error.to_string(),
            )
            .with_hint(Some(HINT.to_owned())),
        ],
        Err(error @ PathError::Invalid { .. }) => vec![
            FieldError::new(
                pointer(),
                RejectCode::ConstraintViolation,
                error.to_string(),
            )
            .with_hint(Some(HINT.to_owned())),
        ],
        Ok(_)
        | Err(PathError::NotFound { .. } | PathError::NotAFile { .. } | PathError::Io { .. }) => {
            Vec::new()
        }
    }
}

/// Stage 4: the path `raw` names (the root when absent), for the plan, and what it touches:
/// the path as given and, when a link inside the workspace redirects it, where it leads — a
/// policy about `secrets/` must see `secrets/key` even when it is reached as
/// `innocent_link`. Stage 7 opens the planned path beneath the root again, since the file
/// system may have changed in between.
pub(crate) fn plan(
    workspace: &Workspace,
    raw: Option<&str>,
    looked: Looked,
) -> (Result<RelPath, ToolError>, Classification) {
    let (rel, classification, _) = plan_sized(workspace, raw, looked);
    (rel, classification)
}

/// [`plan`], and the size of the file the path named when stage 3 looked (`None` for what
/// is not a file, or was not found). The file may change before stage 7 opens it.
pub(crate) fn plan_sized(
    workspace: &Workspace,
    raw: Option<&str>,
    looked: Looked,
) -> (Result<RelPath, ToolError>, Classification, Option<u64>) {
    let (rel, resolved) = match raw {
        Some(raw) => match looked.into_found(workspace, raw) {
            Ok(found) => found,
            // Stage 3 refused it already; nothing to classify, and nothing will run.
            Err(error) => return (Err(tool_error(error)), Classification::default(), None),
        },
        None => {
            let rel = RelPath::root();
            let resolved = workspace.resolve(&rel);
            (rel, resolved)
        }
    };
    let mut paths = vec![rel.to_string()];
    let mut size = None;
    if let Ok(resolved) = resolved {
        if resolved.target != rel {
            paths.push(resolved.target.to_string());
        }
        size = (resolved.kind == PathKind::File).then_some(resolved.len);
    }
    let classification = Classification {
        resources: paths.iter().cloned().map(Resource::Path).collect(),
        paths,
        ..Classification::default()
    };
    (Ok(rel), classification, size)
}

/// Stage 7: the planned path resolved again, now as the tool's error if it fails.
pub(crate) fn resolve(
    workspace: &Workspace,
    rel: &Result<RelPath, ToolError>,
) -> Result<ResolvedPath, ToolError> {
    workspace.resolve(planned(rel)?).map_err(tool_error)
}

/// The planned path, or why stage 4 could not plan one.
pub(crate) fn planned(rel: &Result<RelPath, ToolError>) -> Result<&RelPath, ToolError> {
    rel.as_ref().map_err(Clone::clone)
}

/// A path error as the tool's error, with a stable code.
pub(crate) fn tool_error(error: PathError) -> ToolError {
    let code = match &error {
        PathError::NotFound { .. } => ToolErrorCode::NotFound,
        PathError::NotAFile {
            kind: PathKind::Dir,
            ..
        } => ToolErrorCode::IsADirectory,
        PathError::NotAFile { .. } => ToolErrorCode::NotAFile,
        PathError::Outside { .. } => ToolErrorCode::OutsideWorkspace,
        PathError::Invalid { .. } => ToolErrorCode::InvalidPath,
        PathError::Io { .. } => ToolErrorCode::IoError,
    };
    ToolError::new(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Stage 4 names what stage 3 followed, and never what was followed for another path.
    #[test]
    fn stage_4_uses_what_stage_3_looked_at_for_the_same_path_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let looked = Looked::default();
        assert!(check(&workspace, Some("a.txt"), "path", &looked).is_empty());
        let (rel, classification) = plan(&workspace, Some("a.txt"), looked);
        assert_eq!(rel.unwrap().as_str(), "a.txt");
        assert_eq!(classification.paths, ["a.txt"]);

        let looked = Looked::default();
        assert!(check(&workspace, Some("a.txt"), "path", &looked).is_empty());
        let errors = check(&workspace, Some("../x"), "path", &looked);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let (rel, _) = plan(&workspace, Some("b.txt"), looked);
        assert_eq!(rel.unwrap().as_str(), "b.txt");
    }
}
