//! What `write_file` and `edit_file` share: the compare-and-swap precondition, the diff a
//! person approves, and the atomic write.
//!
//! A write is worked out three times from the file as it is: in stage 3 (to reject a stale or
//! unread file, or edits that do not apply), in stage 4 (for the diff and the pre-image digest
//! that the approval is bound to, which the plan keeps) and in stage 7, where the file must
//! still be exactly the planned pre-image; otherwise the call fails with `stale_write` and the
//! file is untouched. Edits are pure functions of (file, arguments), so the same pre-image always
//! gives the same diff.

use std::sync::Arc;

use std::marker::PhantomData;

use serde::de::DeserializeOwned;
use serde_json::json;
use similar::TextDiff;
use toolgate_core::{
    Call, Classification, Digest, ExecContext, FieldError, RejectCode, Resource, ToolError,
    ToolErrorCode, ToolOutput, TypedExecutor, sha256_digest,
};
use toolgate_workspace::{PathError, PathKind, RelPath, Workspace, WriteError};

use crate::path_argument;

/// Largest file either tool reads or writes, as `read_file`'s limit: an edit must be able to
/// read back what it wrote.
pub(crate) const MAX_FILE_BYTES: u64 = crate::read_file::MAX_FILE_BYTES;

/// Largest diff shown to the person approving; the approval covers the whole change anyway.
const MAX_PREVIEW_BYTES: usize = 256 * 1024;

const READ_FIRST: &str = "call `read_file` on it first and pass the `digest` it returns as \
`expected_digest`";

/// What a tool makes of the file: its arguments, as its closed schema accepts them, and the
/// new bytes they make of the file as it is.
pub trait Change: DeserializeOwned + Send + Sync + std::fmt::Debug + 'static {
    /// The file, as the caller named it.
    fn path(&self) -> &str;

    /// The digest the caller read the file at.
    fn expected_digest(&self) -> Option<&str>;

    /// The text the caller read the file as.
    fn expected_content(&self) -> Option<&str> {
        None
    }

    /// The new bytes, or what is wrong with the arguments.
    fn apply(&self, current: Option<&[u8]>) -> Result<Vec<u8>, Vec<FieldError>>;
}

/// The executor of both tools: the same checks and write around each tool's [`Change`].
#[derive(Debug)]
pub struct FileWriter<C> {
    workspace: Arc<Workspace>,
    change: PhantomData<fn() -> C>,
}

impl<C> FileWriter<C> {
    pub(crate) fn new(workspace: Arc<Workspace>) -> Self {
        FileWriter {
            workspace,
            change: PhantomData,
        }
    }
}

/// What a write will do: change the file stage 4 named, and only if it is still the
/// pre-image stage 4 read (`None`: the file did not exist).
#[derive(Debug)]
pub struct WritePlan<C> {
    rel: Result<RelPath, ToolError>,
    approved: Option<Digest>,
    change: C,
}

impl<C: Change> TypedExecutor for FileWriter<C> {
    type Args = C;
    type Plan = WritePlan<C>;

    fn check(&self, change: &C) -> Vec<FieldError> {
        check(&self.workspace, change)
    }

    fn plan(&self, change: C) -> (WritePlan<C>, Classification) {
        classify(&self.workspace, change)
    }

    fn execute(
        &self,
        plan: &WritePlan<C>,
        _call: &Call<'_, Self>,
        _cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        execute(&self.workspace, plan)
    }
}

/// Stage 3 for both tools.
fn check<C: Change>(workspace: &Workspace, change: &C) -> Vec<FieldError> {
    let errors = path_argument::check(
        workspace,
        Some(change.path()),
        "path",
        &path_argument::Looked::default(),
    );
    if !errors.is_empty() {
        return errors;
    }
    let current = match read_current(workspace, change.path()) {
        Ok(current) => current,
        Err(error) => return vec![error],
    };
    let mut errors = expectation_errors(change, current.as_deref());
    if !errors.is_empty() {
        return errors;
    }
    match change.apply(current.as_deref()) {
        Ok(new) if current.as_deref() == Some(new.as_slice()) => {
            errors.push(FieldError::new(
                "",
                RejectCode::ConstraintViolation,
                "the new content is the same as the file's; there is nothing to write",
            ));
        }
        Ok(new) if new.len() as u64 > MAX_FILE_BYTES => errors.push(FieldError::new(
            "",
            RejectCode::ConstraintViolation,
            format!(
                "the file would be {} bytes, over the {MAX_FILE_BYTES}-byte limit",
                new.len()
            ),
        )),
        Ok(_) => {}
        Err(plan_errors) => errors.extend(plan_errors),
    }
    errors
}

/// Stage 4: the file and its link target, the pre-image digest, and the diff.
fn classify<C: Change>(workspace: &Workspace, change: C) -> (WritePlan<C>, Classification) {
    let (rel, mut classification) = path_argument::plan(
        workspace,
        Some(change.path()),
        path_argument::Looked::default(),
    );
    let mut plan = WritePlan {
        rel,
        approved: None,
        change,
    };
    let Some(path) = classification.paths.first().cloned() else {
        return (plan, classification);
    };
    classification.named_runs_later = named_by_git(workspace, &classification.paths);
    // Stage 3 passed moments ago; if the file changed since, the call cannot be approved
    // meaningfully, and execution will find it stale.
    let Ok(current) = read_current(workspace, plan.change.path()) else {
        return (plan, classification);
    };
    match &current {
        Some(bytes) => {
            let digest = sha256_digest(bytes);
            plan.approved = Some(digest.clone());
            classification.preimages.push((path.clone(), digest));
        }
        None => classification
            .resources
            .push(Resource::Create(path.clone())),
    }
    if let Ok(new) = plan.change.apply(current.as_deref()) {
        let diff = unified_diff(&path, current.as_deref(), &new);
        classification
            .resources
            .push(Resource::Diff(sha256_digest(diff.as_bytes())));
        classification.preview = Some(bounded(diff));
    }
    (plan, classification)
}

/// What the git configuration of the repositories holding `paths` names as code git runs
/// later (`core.hooksPath`, `include.path`, a filter's program, …), for stage 4 to tag a write
/// of one `git`. A configuration that cannot be read names `paths` themselves: what it would
/// name cannot be known, so the write is taken for one.
fn named_by_git(workspace: &Workspace, paths: &[String]) -> Vec<String> {
    let mut named = Vec::new();
    for path in paths {
        match crate::git_named::around(workspace, path) {
            Ok(found) => named.extend(found),
            Err(_) => return paths.to_vec(),
        }
    }
    named
}

/// Stage 7 for both tools: the file must still be the pre-image stage 4 planned on.
fn execute<C: Change>(workspace: &Workspace, plan: &WritePlan<C>) -> Result<ToolOutput, ToolError> {
    let rel = path_argument::planned(&plan.rel)?;
    let target = workspace
        .write_target(rel)
        .map_err(path_argument::tool_error)?;
    let current = target
        .current(MAX_FILE_BYTES + 1)
        .map_err(path_argument::tool_error)?;
    let approved = plan.approved.as_ref();
    let now = current.as_deref().map(sha256_digest);
    if now.as_ref() != approved {
        return Err(stale(rel));
    }
    let new = plan.change.apply(current.as_deref()).map_err(|errors| {
        ToolError::new(
            ToolErrorCode::StaleWrite,
            format!(
                "the edit no longer applies to `{rel}`: {}",
                errors
                    .iter()
                    .map(|e| e.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        )
    })?;
    let (added, removed) = line_counts(current.as_deref(), &new);
    target
        .replace(&new, MAX_FILE_BYTES + 1, |now| {
            now.map(sha256_digest).as_ref() == approved
        })
        .map_err(|error| match error {
            WriteError::Stale { .. } => stale(rel),
            WriteError::Path(error) => path_argument::tool_error(error),
        })?;
    Ok(ToolOutput::new(json!({
        "path": rel.as_str(),
        "created": current.is_none(),
        "bytes": new.len(),
        "digest": sha256_digest(&new),
        "lines_added": added,
        "lines_removed": removed,
    })))
}

fn stale(rel: &RelPath) -> ToolError {
    let mut error = ToolError::new(
        ToolErrorCode::StaleWrite,
        format!(
            "`{rel}` changed after this write was checked and approved; nothing was written. \
             Read it again and redo the change on what is there now"
        ),
    );
    error.unknowns.push(format!(
        "`{rel}` was changed by someone else during the call"
    ));
    error
}

/// The file's bytes, `None` if it does not exist, or why it cannot be written.
fn read_current(workspace: &Workspace, raw: &str) -> Result<Option<Vec<u8>>, FieldError> {
    let violation =
        |message: String| FieldError::new("/path", RejectCode::ConstraintViolation, message);
    let rel = workspace
        .check_path(raw)
        .map_err(|e| violation(path_argument::tool_error(e).message))?;
    let resolved = match workspace.resolve(&rel) {
        Ok(resolved) => resolved,
        Err(PathError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(violation(error.to_string())),
    };
    if resolved.through_symlink {
        return Err(violation(format!(
            "`{rel}` leads through a symbolic link; toolgate does not write through links"
        ))
        .with_hint(Some(format!("write to `{}` instead", resolved.target))));
    }
    match resolved.kind {
        PathKind::File => {}
        kind => {
            return Err(violation(format!(
                "`{rel}` is a {kind}; only regular files can be written"
            )));
        }
    }
    if resolved.len > MAX_FILE_BYTES {
        return Err(violation(format!(
            "`{rel}` is {} bytes, over the {MAX_FILE_BYTES}-byte limit",
            resolved.len
        )));
    }
    workspace
        .read_file(&rel, MAX_FILE_BYTES + 1)
        .map(|(bytes, _)| Some(bytes))
        .map_err(|e| violation(e.to_string()))
}

/// `read_required` or `stale_write` when the caller's idea of the file is not the file.
fn expectation_errors(change: &impl Change, current: Option<&[u8]>) -> Vec<FieldError> {
    let digest = change.expected_digest();
    let content = change.expected_content();
    let path = change.path();
    let stale = |pointer: &str, message: String| {
        vec![
            FieldError::new(pointer, RejectCode::StaleWrite, message)
                .with_hint(Some(format!("read `{path}` again, then redo the change"))),
        ]
    };
    match (current, digest, content) {
        (_, Some(_), Some(_)) => vec![FieldError::new(
            "",
            RejectCode::ConstraintViolation,
            "give `expected_digest` or `expected_content`, not both",
        )],
        (None, None, None) => Vec::new(),
        (None, Some(_), _) => stale(
            "/expected_digest",
            format!("`{path}` does not exist, so it cannot match `expected_digest`"),
        ),
        (None, _, Some(_)) => stale(
            "/expected_content",
            format!("`{path}` does not exist, so it cannot match `expected_content`"),
        ),
        (Some(_), None, None) => vec![
            FieldError::new(
                "/expected_digest",
                RejectCode::ReadRequired,
                format!(
                    "`{path}` exists; changing it requires proof that you read its current \
                     contents"
                ),
            )
            .with_hint(Some(READ_FIRST.to_owned())),
        ],
        (Some(bytes), Some(expected), None) => {
            let now = sha256_digest(bytes);
            if now.as_str() == expected {
                Vec::new()
            } else {
                stale(
                    "/expected_digest",
                    format!(
                        "`{path}` changed since you read it: expected `{expected}`, it is now \
                         `{now}`"
                    ),
                )
            }
        }
        (Some(bytes), None, Some(expected)) => {
            if bytes == expected.as_bytes() {
                Vec::new()
            } else {
                stale(
                    "/expected_content",
                    format!("`{path}` is not the `expected_content`; it changed or was misread"),
                )
            }
        }
    }
}

/// The unified diff a person approves, with `a/` and `b/` headers as git writes them.
pub(crate) fn unified_diff(path: &str, old: Option<&[u8]>, new: &[u8]) -> String {
    let (Ok(old_text), Ok(new_text)) = (
        std::str::from_utf8(old.unwrap_or_default()),
        std::str::from_utf8(new),
    ) else {
        return format!(
            "binary file `{path}`: {} bytes replaced by {} bytes\n",
            old.map_or(0, <[u8]>::len),
            new.len()
        );
    };
    let old_header = if old.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    TextDiff::from_lines(old_text, new_text)
        .unified_diff()
        .context_radius(3)
        .header(&old_header, &format!("b/{path}"))
        .to_string()
}

/// Lines added and removed, for the result.
fn line_counts(old: Option<&[u8]>, new: &[u8]) -> (usize, usize) {
    let old = String::from_utf8_lossy(old.unwrap_or_default());
    let new = String::from_utf8_lossy(new);
    let diff = TextDiff::from_lines(old.as_ref(), new.as_ref());
    let mut counts = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => counts.0 += 1,
            similar::ChangeTag::Delete => counts.1 += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    counts
}

fn bounded(mut diff: String) -> String {
    if diff.len() <= MAX_PREVIEW_BYTES {
        return diff;
    }
    let mut cut = MAX_PREVIEW_BYTES;
    while !diff.is_char_boundary(cut) {
        cut -= 1;
    }
    let rest = diff.len() - cut;
    diff.truncate(cut);
    diff.push_str(&format!(
        "\n… diff cut here for display; {rest} more bytes are part of the approved change\n"
    ));
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_name_the_file_and_show_creation() {
        let diff = unified_diff("src/a.rs", Some(b"one\ntwo\n"), b"one\n2\n");
        assert!(
            diff.starts_with("--- a/src/a.rs\n+++ b/src/a.rs\n"),
            "{diff}"
        );
        assert!(diff.contains("-two\n+2\n"), "{diff}");
        let created = unified_diff("new.txt", None, b"hi\n");
        assert!(
            created.starts_with("--- /dev/null\n+++ b/new.txt\n"),
            "{created}"
        );
        assert!(unified_diff("x.bin", Some(&[0xff, 0]), b"a").starts_with("binary file"));
        assert_eq!(line_counts(Some(b"a\nb\n"), b"a\nc\nd\n"), (2, 1));
    }

    #[test]
    fn long_diffs_are_cut_for_display_only() {
        let long = "x".repeat(MAX_PREVIEW_BYTES + 10);
        let shown = bounded(long);
        assert!(shown.len() < MAX_PREVIEW_BYTES + 200);
        assert!(shown.ends_with("part of the approved change\n"));
    }
}
