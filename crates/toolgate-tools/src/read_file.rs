//! `read_file`: lines of a UTF-8 text file, with a digest of the whole file.
//!
//! The digest covers every byte of the file, not just the lines returned, so that a later
//! compare-and-swap write can prove the model saw the file as it is.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use toolgate_core::{
    Call, Classification, ExecContext, FieldError, ToolError, ToolErrorCode, ToolOutput,
    TypedExecutor, sha256_digest,
};
use toolgate_workspace::{PathError, PathKind, RelPath, Workspace};

use crate::descriptor::{closed_schema, titled};
use crate::{Builtin, ENVELOPE_BYTES, json_len, path_argument, read_only_entry, stopped, to_usize};

pub(crate) const NAME: &str = "read_file";

/// Largest file read at all; larger ones are refused rather than read in part, since the
/// digest must cover the whole file.
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// The largest file whose read runs where its request arrived (see `brief_plan`); a larger
/// one is read on a thread of its own.
pub const INLINE_BYTES: u64 = 64 * 1024;

/// Most text returned by one call.
pub const MAX_CONTENT_BYTES: usize = 256 * 1024;

/// How often, in lines, the line loop looks at the clock.
const STOP_CHECK_LINES: usize = 4096;

const DESCRIPTION: &str = "Read a UTF-8 text file in the workspace. Use it to look at a file \
once you know its path (find paths with `list_dir` or `search_text`); it refuses directories \
and binary files. `path` is relative to the workspace root, e.g. `src/main.rs`; absolute paths, \
`..` and `~` are refused. For a long file pass `offset` (the 1-based first line) and `limit` \
(how many lines). In the result, `content` holds the lines with their line endings, \
`total_lines` is the file's length in lines, and `truncated: true` means the text was cut at \
256 KiB: call again with `offset` set to `offset + lines_returned`. `digest` is the SHA-256 of \
the whole file; it changes when the file does. Files over 16 MiB are refused.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "path": path_argument::required_schema("The file to read, relative to the workspace root (`src/main.rs`)."),
        "offset": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1_000_000_000u64,
            "description": "The 1-based line to start at. Default 1."
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1_000_000_000u64,
            "description": "The most lines to return. Default: every line up to 256 KiB of text."
        }
    });
    let schema = closed_schema(properties, &["path"]);
    Builtin {
        descriptor: titled(NAME, "Read a file", DESCRIPTION, schema),
        // Content is escaped as JSON; a file of control characters grows sixfold, so the
        // output limit is generous and the content is budgeted against it as escaped text.
        entry: read_only_entry(NAME, "workspace_read", 1024 * 1024),
        executor: Arc::new(ReadFile { workspace }),
    }
}

/// The executor for `read_file`.
#[derive(Debug)]
pub struct ReadFile {
    workspace: Arc<Workspace>,
}

/// `read_file`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
    #[serde(skip)]
    looked: path_argument::Looked,
}

/// What a `read_file` call will read: the file stage 4 named, and which of its lines.
#[derive(Debug)]
pub struct ReadPlan {
    rel: Result<RelPath, ToolError>,
    offset: u64,
    limit: Option<u64>,
    /// The file's size when stage 3 looked, if it was a file.
    size: Option<u64>,
}

impl TypedExecutor for ReadFile {
    type Args = ReadArgs;
    type Plan = ReadPlan;

    /// A read opens one regular file without blocking and reads at most
    /// [`MAX_FILE_BYTES`] of it: it ends soon, and waits on nothing but the file system.
    fn brief(&self) -> bool {
        true
    }

    /// A read of a file over [`INLINE_BYTES`] (as stage 3 saw it) is not brief: reading,
    /// digesting, counting and redacting 64 KiB takes some 0.2 ms, 1 MiB 1.7 ms, 16 MiB
    /// 13 ms, for which a transport serving several sessions on one thread would answer none
    /// of the others.
    fn brief_plan(&self, plan: &ReadPlan) -> bool {
        plan.size.is_none_or(|size| size <= INLINE_BYTES)
    }

    fn check(&self, arguments: &ReadArgs) -> Vec<FieldError> {
        path_argument::check(
            &self.workspace,
            Some(&arguments.path),
            "path",
            &arguments.looked,
        )
    }

    fn plan(&self, arguments: ReadArgs) -> (ReadPlan, Classification) {
        let (rel, classification, size) =
            path_argument::plan_sized(&self.workspace, Some(&arguments.path), arguments.looked);
        let plan = ReadPlan {
            rel,
            offset: arguments.offset.unwrap_or(1).max(1),
            limit: arguments.limit,
            size,
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &ReadPlan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        // Stage 3 checked the path; opening it checks again, beneath the root, and refuses
        // anything but a regular file.
        let rel = path_argument::planned(&plan.rel)?;
        let shown = rel.as_str();
        let file = self.workspace.open_file(rel).map_err(|e| match e {
            PathError::NotAFile {
                kind: PathKind::Dir,
                ..
            } => ToolError::new(
                ToolErrorCode::IsADirectory,
                format!("`{shown}` is a directory; use `list_dir` to see what it holds"),
            ),
            PathError::NotAFile { .. } => ToolError::new(
                ToolErrorCode::NotAFile,
                format!("`{shown}` is not a regular file"),
            ),
            other => path_argument::tool_error(other),
        })?;
        if file.len > MAX_FILE_BYTES {
            return Err(too_large(shown, file.len));
        }
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let bytes = file
            .read(rel, MAX_FILE_BYTES + 1)
            .map_err(path_argument::tool_error)?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > MAX_FILE_BYTES {
            // It grew between the size check and the read.
            return Err(too_large(shown, read));
        }
        let digest = sha256_digest(&bytes);
        // `contains` on bytes is a vectorised search; the position is only needed for the message.
        if bytes.contains(&0)
            && let Some(at) = bytes.iter().position(|b| *b == 0)
        {
            return Err(ToolError::new(
                ToolErrorCode::NotUtf8,
                format!("`{shown}` looks binary (a NUL byte at offset {at}); read_file reads text"),
            ));
        }
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            ToolError::new(
                ToolErrorCode::NotUtf8,
                format!(
                    "`{shown}` is not UTF-8 text (invalid byte at offset {})",
                    e.valid_up_to()
                ),
            )
        })?;

        let offset = plan.offset;
        let limit = plan.limit.map_or(usize::MAX, to_usize);
        let total_lines = count_lines(text);
        if offset > 1 && to_usize(offset) > total_lines {
            return Err(ToolError::new(
                ToolErrorCode::OffsetOutOfRange,
                format!(
                    "offset {offset} is past the end of `{shown}`, which has {total_lines} line(s)"
                ),
            ));
        }
        let budget = Budget {
            raw: MAX_CONTENT_BYTES,
            escaped: call
                .limits()
                .max_output_bytes
                .saturating_sub(ENVELOPE_BYTES),
        };
        let (content, lines_returned, truncated) =
            select_lines(text, to_usize(offset - 1), limit, budget, cx)?;
        let output = json!({
            "path": shown,
            "content": content,
            "offset": offset,
            "lines_returned": lines_returned,
            "total_lines": total_lines,
            "digest": digest,
            "truncated": truncated,
        });
        Ok(ToolOutput::new(output).truncated(truncated))
    }
}

fn too_large(shown: &str, len: u64) -> ToolError {
    ToolError::new(
        ToolErrorCode::TooLarge,
        format!(
            "`{shown}` is {len} bytes; read_file reads files up to {MAX_FILE_BYTES} bytes — use \
             `search_text` to find the part you need"
        ),
    )
}

/// Lines as `str::lines` counts them: a final line without a newline counts, an empty file has
/// none.
fn count_lines(text: &str) -> usize {
    let newlines = text.bytes().filter(|b| *b == b'\n').count();
    newlines + usize::from(!text.is_empty() && !text.ends_with('\n'))
}

/// How much content one call may return: raw bytes, and bytes once escaped as JSON.
#[derive(Debug, Clone, Copy)]
struct Budget {
    raw: usize,
    escaped: usize,
}

/// Up to `limit` lines from line index `skip`, within `budget`. Lines are whole unless the
/// first one alone is over budget, in which case it is cut at a character boundary.
fn select_lines(
    text: &str,
    skip: usize,
    limit: usize,
    budget: Budget,
    cx: &ExecContext,
) -> Result<(String, usize, bool), ToolError> {
    // The common case: the whole file is wanted and fits; one pass, one copy.
    if skip == 0
        && limit == usize::MAX
        && text.len() <= budget.raw
        && json_len(text) <= budget.escaped
    {
        return Ok((text.to_owned(), count_lines(text), false));
    }
    let mut content = String::new();
    let (mut raw, mut escaped) = (0usize, 2usize);
    let mut returned = 0usize;
    for (i, line) in text
        .split_inclusive('\n')
        .skip(skip)
        .take(limit)
        .enumerate()
    {
        if i % STOP_CHECK_LINES == 0 && cx.should_stop() {
            return Err(stopped(cx));
        }
        let line_escaped = json_len(line) - 2;
        if raw + line.len() > budget.raw || escaped + line_escaped > budget.escaped {
            if returned == 0 {
                // One line longer than the whole budget (minified code): return its start.
                for c in line.chars() {
                    let c_escaped = json_len(c.encode_utf8(&mut [0; 4])) - 2;
                    if raw + c.len_utf8() > budget.raw || escaped + c_escaped > budget.escaped {
                        break;
                    }
                    raw += c.len_utf8();
                    escaped += c_escaped;
                    content.push(c);
                }
                return Ok((content, 1, true));
            }
            return Ok((content, returned, true));
        }
        raw += line.len();
        escaped += line_escaped;
        content.push_str(line);
        returned += 1;
    }
    Ok((content, returned, false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use toolgate_core::Cancel;

    fn cx() -> ExecContext {
        ExecContext::new(Duration::from_secs(60), Cancel::new())
    }

    const WIDE: Budget = Budget {
        raw: usize::MAX,
        escaped: usize::MAX,
    };

    #[test]
    fn lines_are_counted_like_str_lines() {
        for text in ["", "a", "a\n", "a\nb", "a\nb\n", "\n", "\n\n", "a\r\nb\r\n"] {
            assert_eq!(count_lines(text), text.lines().count(), "{text:?}");
        }
    }

    #[test]
    fn offset_and_limit_select_whole_lines() {
        let text = "one\ntwo\r\nthree\nfour";
        assert_eq!(
            select_lines(text, 0, usize::MAX, WIDE, &cx()).unwrap(),
            (text.to_owned(), 4, false)
        );
        assert_eq!(
            select_lines(text, 1, 2, WIDE, &cx()).unwrap(),
            ("two\r\nthree\n".to_owned(), 2, false)
        );
        assert_eq!(
            select_lines(text, 3, 10, WIDE, &cx()).unwrap(),
            ("four".to_owned(), 1, false)
        );
    }

    #[test]
    fn the_budget_cuts_at_a_line_boundary() {
        let text = "aaaa\nbbbb\ncccc\n";
        let budget = Budget {
            raw: 12,
            escaped: usize::MAX,
        };
        assert_eq!(
            select_lines(text, 0, usize::MAX, budget, &cx()).unwrap(),
            ("aaaa\nbbbb\n".to_owned(), 2, true)
        );
        // Escaped size counts too: each control character takes six bytes.
        let controls = "\u{1}\u{1}\n\u{1}\u{1}\n";
        let budget = Budget {
            raw: usize::MAX,
            escaped: 2 + 14,
        };
        assert_eq!(
            select_lines(controls, 0, usize::MAX, budget, &cx()).unwrap(),
            ("\u{1}\u{1}\n".to_owned(), 1, true)
        );
    }

    #[test]
    fn an_overlong_first_line_is_cut_at_a_char_boundary() {
        let text = "ééééé\nnext\n";
        let budget = Budget {
            raw: 5,
            escaped: usize::MAX,
        };
        assert_eq!(
            select_lines(text, 0, usize::MAX, budget, &cx()).unwrap(),
            ("éé".to_owned(), 1, true)
        );
    }

    #[test]
    fn a_stopped_context_stops() {
        let cancelled = ExecContext::new(Duration::from_secs(60), Cancel::given());
        let error = select_lines("a\n", 0, 1, WIDE, &cancelled).unwrap_err();
        assert_eq!(error.code, "cancelled");
    }
}
