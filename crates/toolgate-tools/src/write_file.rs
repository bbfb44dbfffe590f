//! `write_file`: create a file, or replace one the caller has read.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::json;
use toolgate_core::FieldError;
use toolgate_workspace::Workspace;

use crate::descriptor::{closed_schema, titled};
use crate::file_write::{Change, FileWriter};
use crate::{Builtin, path_argument, write_entry};

pub(crate) const NAME: &str = "write_file";

/// Largest `content`, in bytes.
pub const MAX_CONTENT_BYTES: usize = 4 * 1024 * 1024;

const DESCRIPTION: &str = "Create a UTF-8 text file in the workspace, or replace the whole of \
an existing one. To change part of a file prefer `edit_file`. `path` is relative to the \
workspace root; missing parent directories are created. Replacing an existing file requires \
proof that you read it: pass the `digest` that `read_file` returned as `expected_digest` (or \
the exact current text as `expected_content`); if the file changed since you read it the call \
fails with `stale_write` and nothing is written — read it again. A person approves each write \
after seeing its diff. Symbolic links, directories and paths outside the workspace are \
refused. The result gives the new `digest`, for a following edit.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "path": path_argument::required_schema("The file to write, relative to the workspace root (`src/new.rs`)."),
        "content": {
            "type": "string",
            "maxLength": MAX_CONTENT_BYTES,
            "description": "The complete new contents of the file, as UTF-8 text (at most 4 MiB)."
        },
        "expected_digest": {
            "type": "string",
            "pattern": "^sha256:[0-9a-f]{64}$",
            "description": "Required to replace an existing file: the `digest` from your `read_file` of it."
        },
        "expected_content": {
            "type": "string",
            "maxLength": MAX_CONTENT_BYTES,
            "description": "Instead of `expected_digest`: the file's exact current text."
        }
    });
    let schema = closed_schema(properties, &["path", "content"]);
    Builtin {
        descriptor: titled(NAME, "Write a file", DESCRIPTION, schema),
        entry: write_entry(NAME),
        executor: Arc::new(FileWriter::<WriteArgs>::new(workspace)),
    }
}

/// `write_file`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    path: String,
    content: String,
    expected_digest: Option<String>,
    expected_content: Option<String>,
}

impl Change for WriteArgs {
    fn path(&self) -> &str {
        &self.path
    }

    fn expected_digest(&self) -> Option<&str> {
        self.expected_digest.as_deref()
    }

    fn expected_content(&self) -> Option<&str> {
        self.expected_content.as_deref()
    }

    /// The new bytes: `content`, whatever is there.
    fn apply(&self, _current: Option<&[u8]>) -> Result<Vec<u8>, Vec<FieldError>> {
        let content = &self.content;
        if content.len() > MAX_CONTENT_BYTES {
            return Err(vec![FieldError::new(
                "/content",
                toolgate_core::RejectCode::ConstraintViolation,
                format!(
                    "`content` is {} bytes; write_file writes at most {MAX_CONTENT_BYTES}",
                    content.len()
                ),
            )]);
        }
        Ok(content.as_bytes().to_vec())
    }
}
