//! toolgate's builtin workspace tools: `read_file`, `list_dir`, `search_text`, `git_status`
//! and `git_diff` (read-only, in the `default` and `readonly` profiles); `write_file` and
//! `edit_file` (local writes, approved by policy); `run_command` and `run_script` (irreversible,
//! a fresh approval every call).
//!
//! Each tool is a [`Builtin`]: the descriptor a model sees, the entry the operator starts from
//! and the [`Executor`] that owns it. An
//! executor checks its `path` argument twice: in stage 3 (`check`, so an escape is a
//! `path_outside_workspace` rejection before anything runs) and again when it executes, since
//! the file system may have changed in between. File contents are only ever read through the
//! workspace's capability ([`Workspace::read_file`], [`Workspace::open_file`]); directory walks
//! start from a checked directory and never follow links.
//!
//! ```
//! use std::sync::Arc;
//! use toolgate_core::*;
//! use toolgate_workspace::Workspace;
//!
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
//! let workspace = Arc::new(Workspace::open(dir.path()).unwrap());
//!
//! let mut registry = RegistryBuilder::new();
//! for tool in toolgate_tools::builtin(Arc::clone(&workspace), std::env::home_dir().as_deref(), std::env::vars_os()) {
//!     registry.register(tool.descriptor, tool.entry, tool.executor).unwrap();
//! }
//! let registry = registry.build().unwrap();
//! let mut policy = PolicyEngine::default_policy().unwrap();
//! policy.prepare(&registry).unwrap();
//! let pipeline = Pipeline::new(
//!     Arc::new(registry),
//!     Arc::new(policy),
//!     Arc::new(HeadlessBroker),
//!     WorkspaceId::new(&workspace.root().to_string_lossy()),
//! );
//!
//! let read = pipeline.run(RawCall::text("read_file", r#"{"path": "a.txt"}"#, Surface::Chat));
//! assert_eq!(read.output().unwrap()["content"], "alpha\n");
//! let escape = pipeline.run(RawCall::text("read_file", r#"{"path": "../x"}"#, Surface::Chat));
//! assert_eq!(escape.rejection().unwrap().code(), RejectCode::PathOutsideWorkspace);
//! ```

mod confine;
mod descriptor;
mod edit_file;
mod file_write;
mod git;
mod git_keys;
mod git_named;
mod interpreter;
mod later;
mod list_dir;
mod makefile;
mod path_argument;
mod read_file;
mod run_command;
mod run_script;
mod search_text;
mod walk;
mod write_file;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use toolgate_core::registry::{DEFAULT_PROFILE, READONLY_PROFILE};
use toolgate_core::{
    Descriptor, EffectClass, ExecContext, Executor, Limits, ToolEntry, ToolError, ToolErrorCode,
};
use toolgate_workspace::Workspace;

pub use confine::{Confinement, MAX_NETWORK_HOSTS};
pub use file_write::FileWriter;
pub use git::{GitDiff, GitStatus};
pub use later::{guard as guard_files_that_run_later, watch as watch_files_that_run_later};
pub use list_dir::ListDir;
pub use read_file::ReadFile;
pub use run_command::RunCommand;
pub use run_script::RunScript;
pub use search_text::SearchText;

/// One builtin tool: what the model sees, what the operator starts from, and who runs it.
#[derive(Debug)]
pub struct Builtin {
    pub descriptor: Descriptor,
    pub entry: ToolEntry,
    pub executor: Arc<dyn Executor>,
}

/// Every builtin tool, over `workspace`, with commands confined by this machine's sandbox
/// and the default deny list for the user's `home` ([`Confinement::detect`]), starting from
/// the variables of `environment` that pass the scrub ([`Confinement::set_environment`]).
/// The caller reads both: this crate reads no environment.
pub fn builtin(
    workspace: Arc<Workspace>,
    home: Option<&std::path::Path>,
    environment: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<Builtin> {
    let mut confinement = Confinement::detect(home);
    confinement.set_environment(environment);
    builtin_confined(workspace, Arc::new(confinement))
}

/// Every builtin tool, over `workspace`, with commands confined as `confinement` says.
pub fn builtin_confined(workspace: Arc<Workspace>, confinement: Arc<Confinement>) -> Vec<Builtin> {
    vec![
        read_file::builtin(Arc::clone(&workspace)),
        list_dir::builtin(Arc::clone(&workspace)),
        search_text::builtin(Arc::clone(&workspace)),
        git::status_builtin(Arc::clone(&workspace)),
        git::diff_builtin(Arc::clone(&workspace)),
        write_file::builtin(Arc::clone(&workspace)),
        edit_file::builtin(Arc::clone(&workspace)),
        run_command::builtin(Arc::clone(&workspace), Arc::clone(&confinement)),
        run_script::builtin(Arc::clone(&workspace), confinement),
    ]
}

/// Wall time every builtin gets.
const TIMEOUT_MS: u64 = 10_000;

/// Room kept in `max_output_bytes` for everything around the bulk of an output (field names,
/// the path, the digest), so that the bulk can be budgeted on its own.
const ENVELOPE_BYTES: usize = 16 * 1024;

/// A read-only entry in the `default` and `readonly` profiles.
fn read_only_entry(name: &str, capability: &str, max_output_bytes: usize) -> ToolEntry {
    let mut entry = ToolEntry::new(name, capability);
    entry.effect = Some(EffectClass::ReadOnly);
    entry.profiles = BTreeSet::from([DEFAULT_PROFILE.to_owned(), READONLY_PROFILE.to_owned()]);
    entry.limits = Limits {
        timeout_ms: TIMEOUT_MS,
        max_output_bytes,
        ..Limits::default()
    };
    entry
}

/// A file-writing entry: `local_write`, in the `default` profile only, approved by policy
/// (which lets a person allow the tool for the whole workspace).
fn write_entry(name: &str) -> ToolEntry {
    let mut entry = ToolEntry::new(name, "workspace_write");
    entry.effect = Some(EffectClass::LocalWrite);
    entry.profiles = BTreeSet::from([DEFAULT_PROFILE.to_owned()]);
    entry.limits = Limits {
        timeout_ms: TIMEOUT_MS,
        max_output_bytes: ENVELOPE_BYTES,
        ..Limits::default()
    };
    entry
}

/// The error for an execution that stopped early: the deadline passed or the caller gave up.
fn stopped(cx: &ExecContext) -> ToolError {
    if Instant::now() >= cx.deadline() {
        ToolError::new(
            ToolErrorCode::Timeout,
            "the tool ran out of time and stopped",
        )
    } else {
        ToolError::new(ToolErrorCode::Cancelled, "the call was cancelled")
    }
}

/// The bytes `text` takes as a JSON string, quotes included. Output budgets count these, not
/// raw bytes, since control characters grow sixfold when escaped.
fn json_len(text: &str) -> usize {
    toolgate_core::canonical::json_string_len(text)
}

/// `value` as a `usize`, saturating on 32-bit targets.
fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::{RegistryBuilder, ToolSchema};

    #[test]
    fn json_len_matches_serde_json() {
        for text in [
            "",
            "plain",
            "quote\"back\\slash",
            "tab\tnl\n",
            "\u{1}\u{1f}\u{7f}",
            "日本",
        ] {
            let written = serde_json::to_string(text).unwrap();
            assert_eq!(json_len(text), written.len(), "{text:?}");
        }
    }

    /// A value `schema` accepts, for the schemas the builtins use.
    fn example(schema: &serde_json::Value) -> serde_json::Value {
        use serde_json::json;
        match schema["type"].as_str() {
            Some("string")
                if schema["pattern"]
                    .as_str()
                    .is_some_and(|p| p.contains("sha256")) =>
            {
                json!(format!("sha256:{}", "0".repeat(64)))
            }
            Some("string") => json!("x"),
            Some("integer") => schema.get("minimum").cloned().unwrap_or(json!(1)),
            Some("boolean") => json!(true),
            Some("array") => json!([example(&schema["items"])]),
            Some("object") => serde_json::Value::Object(
                schema["properties"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(name, property)| (name.clone(), example(property)))
                    .collect(),
            ),
            other => panic!("no example for a schema of type {other:?}"),
        }
    }

    #[test]
    fn each_builtins_argument_type_takes_every_argument_its_schema_names() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Arc::new(Workspace::open(dir.path()).unwrap());
        for tool in builtin(
            workspace,
            std::env::home_dir().as_deref(),
            std::env::vars_os(),
        ) {
            let schema = &tool.descriptor.input_schema;
            let arguments = example(schema);
            assert_eq!(
                arguments.as_object().map(|o| o.len()),
                schema["properties"].as_object().map(|p| p.len()),
                "{}",
                tool.entry.name
            );
            // The tool's own checks may refuse these values; its type must not.
            let errors = tool.executor.parse(&arguments).err().unwrap_or_default();
            for error in errors {
                assert!(
                    !error
                        .message
                        .starts_with("the arguments do not fit this tool"),
                    "{}: {arguments} was refused by its type: {}",
                    tool.entry.name,
                    error.message
                );
            }
        }
    }

    #[test]
    fn builtins_register_and_their_schemas_are_closed_and_described() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Arc::new(Workspace::open(dir.path()).unwrap());
        let builtins = builtin(
            workspace,
            std::env::home_dir().as_deref(),
            std::env::vars_os(),
        );
        let names: BTreeSet<&str> = builtins.iter().map(|b| b.entry.name.as_str()).collect();
        // The read-only profile is for sub-agents: inspection only.
        let inspect = BTreeSet::from([
            "read_file",
            "list_dir",
            "search_text",
            "git_status",
            "git_diff",
        ]);
        for name in [
            "read_file",
            "list_dir",
            "search_text",
            "write_file",
            "edit_file",
        ] {
            assert!(names.contains(name), "{name} is builtin");
        }
        let mut registry = RegistryBuilder::new();
        for tool in builtins {
            let schema = &tool.descriptor.input_schema;
            assert_eq!(schema["additionalProperties"], false, "{}", tool.entry.name);
            assert!(schema["required"].is_array());
            for (name, property) in schema["properties"].as_object().unwrap() {
                assert!(
                    property["description"]
                        .as_str()
                        .is_some_and(|d| d.len() > 20),
                    "{}.{name} needs a description",
                    tool.entry.name
                );
            }
            ToolSchema::compile(schema, &Default::default()).unwrap();
            let read_only = inspect.contains(tool.entry.name.as_str());
            assert_eq!(
                tool.entry.profiles.contains(READONLY_PROFILE),
                read_only,
                "{}",
                tool.entry.name
            );
            assert_eq!(
                tool.entry.effect == Some(EffectClass::ReadOnly),
                read_only,
                "{}",
                tool.entry.name
            );
            assert!(tool.entry.profiles.contains(DEFAULT_PROFILE));
            registry
                .register(tool.descriptor, tool.entry, tool.executor)
                .unwrap();
        }
        registry.build().unwrap();
    }
}
