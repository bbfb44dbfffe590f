//! `list_dir`: a directory's entries, `.gitignore`-aware, sorted by path.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use toolgate_core::{
    Call, Classification, ExecContext, FieldError, ToolError, ToolErrorCode, ToolOutput,
    TypedExecutor,
};
use toolgate_workspace::{PathKind, RelPath, Workspace};

use crate::descriptor::{closed_schema, titled};
use crate::walk::{Found, WalkOptions, walk};
use crate::{Builtin, ENVELOPE_BYTES, json_len, path_argument, read_only_entry, to_usize};

pub(crate) const NAME: &str = "list_dir";

pub const DEFAULT_DEPTH: u64 = 1;
pub const MAX_DEPTH: u64 = 8;
pub const DEFAULT_MAX_ENTRIES: u64 = 200;

const DESCRIPTION: &str = "List the files and directories in a workspace directory. Use it to \
learn the project's layout or to find a file's exact path; to find files by what they contain, \
use `search_text` instead. Files ignored by `.gitignore`, the `.git` directory and directories \
that hold secrets or toolgate's own state (`.ssh`, `.aws`) are left out; hidden files are shown. `path` is a directory relative to the workspace root (default: the root \
itself); `depth` 1 lists only its direct children, up to 8 descends further. Each entry has a \
workspace-relative `path` you can pass to `read_file` as is, a `kind` (`file`, `dir` or \
`symlink`; links are shown, not followed) and, for files, a `size` in bytes. Entries are sorted \
by path. `truncated: true` means there are more entries than returned: list a subdirectory or \
lower `depth`.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "path": path_argument::schema("The directory to list, relative to the workspace root. Default: the root (`.`)."),
        "depth": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_DEPTH,
            "description": "How many levels to descend: 1 for direct children only. Default 1, at most 8."
        },
        "max_entries": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "description": "The most entries to return. Default 200, at most 1000."
        }
    });
    let schema = closed_schema(properties, &[]);
    Builtin {
        descriptor: titled(NAME, "List a directory", DESCRIPTION, schema),
        entry: read_only_entry(NAME, "workspace_list", 512 * 1024),
        executor: Arc::new(ListDir { workspace }),
    }
}

/// The executor for `list_dir`.
#[derive(Debug)]
pub struct ListDir {
    workspace: Arc<Workspace>,
}

/// `list_dir`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    path: Option<String>,
    depth: Option<u64>,
    max_entries: Option<u64>,
    #[serde(skip)]
    looked: path_argument::Looked,
}

/// What a `list_dir` call will list: the directory stage 4 named, how deep, how much.
#[derive(Debug)]
pub struct ListPlan {
    rel: Result<RelPath, ToolError>,
    depth: u64,
    max_entries: u64,
}

impl TypedExecutor for ListDir {
    type Args = ListArgs;
    type Plan = ListPlan;

    fn check(&self, arguments: &ListArgs) -> Vec<FieldError> {
        path_argument::check(
            &self.workspace,
            arguments.path.as_deref(),
            "path",
            &arguments.looked,
        )
    }

    fn plan(&self, arguments: ListArgs) -> (ListPlan, Classification) {
        let (rel, classification) =
            path_argument::plan(&self.workspace, arguments.path.as_deref(), arguments.looked);
        let plan = ListPlan {
            rel,
            depth: arguments.depth.unwrap_or(DEFAULT_DEPTH).clamp(1, MAX_DEPTH),
            max_entries: arguments.max_entries.unwrap_or(DEFAULT_MAX_ENTRIES),
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &ListPlan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let resolved = path_argument::resolve(&self.workspace, &plan.rel)?;
        if resolved.kind != PathKind::Dir {
            return Err(ToolError::new(
                ToolErrorCode::NotADirectory,
                format!(
                    "`{}` is a {}, not a directory; use `read_file` to read a file",
                    resolved.rel, resolved.kind
                ),
            ));
        }
        let depth = plan.depth;
        let max_entries = to_usize(plan.max_entries)
            .min(call.limits().max_results)
            .max(1);
        let budget = call
            .limits()
            .max_output_bytes
            .saturating_sub(ENVELOPE_BYTES);

        let mut entries: Vec<(String, Value)> = Vec::new();
        let mut used = 0usize;
        let mut truncated = false;
        let options = WalkOptions {
            depth: Some(to_usize(depth)),
            overrides: None,
        };
        // Entries are listed under where the path leads: a link to `src` lists `src/…`, paths
        // that read_file accepts and that name what they are.
        let summary = walk(
            &self.workspace,
            &resolved.target,
            &options,
            cx,
            |Found { entry, rel, .. }| {
                let kind = PathKind::from(entry.file_type());
                let mut item = Map::new();
                item.insert("path".to_owned(), json!(rel.as_str()));
                item.insert("kind".to_owned(), json!(kind.as_str()));
                if kind == PathKind::File
                    && let Ok(metadata) = entry.metadata()
                {
                    item.insert("size".to_owned(), json!(metadata.len()));
                }
                // Path, kind and size, with punctuation.
                let cost = json_len(rel.as_str()) + 48;
                if entries.len() == max_entries || used + cost > budget {
                    truncated = true;
                    return ControlFlow::Break(());
                }
                used += cost;
                entries.push((rel.as_str().to_owned(), Value::Object(item)));
                ControlFlow::Continue(())
            },
        )?;
        // The walk is already in path order; sorting again keeps the promise if it ever is not.
        entries.sort_by(|a, b| std::path::Path::new(&a.0).cmp(std::path::Path::new(&b.0)));
        let output = json!({
            "path": resolved.rel.as_str(),
            "entries": entries.into_iter().map(|(_, item)| item).collect::<Vec<_>>(),
            "truncated": truncated,
        });
        let mut output = ToolOutput::new(output).truncated(truncated);
        if summary.unreadable > 0 {
            output.unknowns.push(format!(
                "{} entries could not be read and are not listed",
                summary.unreadable
            ));
        }
        if summary.unnamed > 0 {
            output.unknowns.push(format!(
                "{} entries have names that are not UTF-8 and are not listed",
                summary.unnamed
            ));
        }
        Ok(output)
    }
}
