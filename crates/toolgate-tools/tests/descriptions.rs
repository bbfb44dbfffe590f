//! Every builtin tool's description agrees with its schema: a model reads both, and when they
//! disagree it follows whichever it read last.
//!
//! - An argument the description calls required is in the schema's `required`, and an
//!   argument in `required` is not described as optional: an optional argument says what
//!   happens without it (its default, or when it is needed), a required one does not.
//! - Every name the description puts in backticks exists: an argument of the tool, another
//!   builtin tool, a rejection code, or one of the result fields, values and error codes the
//!   tool's own list below declares.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::Value;
use toolgate_tools::Builtin;
use toolgate_workspace::Workspace;

/// Names a tool's descriptions use that are not its arguments: fields and values of its
/// result, and the error codes it fails with.
fn result_words(tool: &str) -> &'static [&'static str] {
    match tool {
        "read_file" => &["content", "total_lines", "digest"],
        "list_dir" => &["path", "kind", "file", "dir", "symlink", "size"],
        // `Foo`, `foo` and `FOO` show what ignoring case finds.
        "search_text" => &["line", "text", "files_searched", "Foo", "foo", "FOO"],
        "git_status" => &[
            "branch",
            "commit",
            "entries",
            "path",
            "index_status",
            "worktree_status",
            "added",
            "modified",
            "deleted",
            "renamed",
            "old_path",
            "type_changed",
            "unmodified",
            "untracked",
            "conflicted",
            "entries_total",
            "not_a_repository",
            // What makes a repository reach outside the workspace, and the code for it.
            "commondir",
            "repository_outside_workspace",
        ],
        "git_diff" => &[
            "files",
            "status",
            "added",
            "removed",
            "modified",
            "deleted",
            "renamed",
            "copied",
            "old_path",
            "type_changed",
            "unmerged",
            "too_large",
            "omitted",
            "diff",
            "files_total",
            // An example of `path`.
            "src",
        ],
        "write_file" | "edit_file" => &["digest"],
        "run_command" => &[
            "timeout",
            "script_changed",
            "exit_code",
            "stdout",
            "stderr",
            "stdout_elided",
            "stderr_elided",
            "duration_ms",
        ],
        "run_script" => &[
            "test",
            "build",
            "lint",
            "typecheck",
            "format",
            "pre",
            "post",
            "script_changed",
            "exit_code",
            "stdout",
            "stderr",
            "duration_ms",
            "steps",
            "include",
            "SHELL",
        ],
        _ => &[],
    }
}

/// The rejection codes the documentation names, from the table the binary's tests check the
/// code against (tests/corpus/reject_codes.jsonl).
fn reject_codes() -> BTreeSet<String> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/corpus/reject_codes.jsonl"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let codes: BTreeSet<String> = text
        .lines()
        .filter(|line| !line.trim().is_empty() && !line.trim_start().starts_with("//"))
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            row["code"].as_str().unwrap().to_owned()
        })
        .collect();
    assert!(codes.len() > 20, "{path}: {codes:?}");
    codes
}

fn builtins() -> (tempfile::TempDir, Vec<Builtin>) {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Arc::new(Workspace::open(dir.path()).unwrap());
    let tools = toolgate_tools::builtin(
        workspace,
        std::env::home_dir().as_deref(),
        std::env::vars_os(),
    );
    (dir, tools)
}

/// Every property name declared anywhere in `schema`, nested objects and array items included.
fn property_names(schema: &Value, into: &mut BTreeSet<String>) {
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            into.insert(name.clone());
            property_names(property, into);
        }
    }
    if let Some(items) = schema.get("items") {
        property_names(items, into);
    }
}

/// The names in backticks that could name a field: one word of letters, digits and `_`.
fn backticked_names(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|name| {
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        })
        .collect()
}

/// The description says the argument is needed, without condition.
fn says_required(description: &str) -> bool {
    description.starts_with("Required:")
        || description.starts_with("Required.")
        || description.contains("(required)")
}

/// The description says what happens without the argument, or when it is needed.
fn says_optional(description: &str) -> bool {
    [
        "Default",
        "Optional",
        "optional",
        "Instead of",
        "without it",
        "Required to ",
        "Required when ",
    ]
    .iter()
    .any(|marker| description.contains(marker))
}

/// `` `x` is required `` and `` requires `x` `` in a tool's description.
fn required_in_prose(description: &str) -> Vec<String> {
    let mut names = Vec::new();
    let parts: Vec<&str> = description.split('`').collect();
    for (i, name) in parts.iter().enumerate().skip(1).step_by(2) {
        let after = parts.get(i + 1).copied().unwrap_or_default();
        let before = parts.get(i - 1).copied().unwrap_or_default();
        if after.starts_with(" is required") || before.ends_with("requires ") {
            names.push((*name).to_owned());
        }
    }
    names
}

#[test]
fn required_arguments_agree_with_the_schema() {
    let (_dir, tools) = builtins();
    let mut problems = Vec::new();
    for tool in &tools {
        let name = &tool.descriptor.name;
        let schema = &tool.descriptor.input_schema;
        let required: BTreeSet<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        let properties = schema["properties"].as_object().unwrap();
        for (argument, property) in properties {
            let Some(description) = property["description"].as_str() else {
                problems.push(format!("{name}: `{argument}` has no description"));
                continue;
            };
            let in_schema = required.contains(argument.as_str());
            if says_required(description) && !in_schema {
                problems.push(format!(
                    "{name}: `{argument}` is described as required but the schema does not require it: {description}"
                ));
            }
            if in_schema && says_optional(description) {
                problems.push(format!(
                    "{name}: `{argument}` is required by the schema but described as optional: {description}"
                ));
            }
            if !in_schema && !says_optional(description) {
                problems.push(format!(
                    "{name}: `{argument}` is optional in the schema, but its description says not what happens without it: {description}"
                ));
            }
        }
        for argument in required_in_prose(&tool.descriptor.description) {
            if !required.contains(argument.as_str()) {
                problems.push(format!(
                    "{name}: the description requires `{argument}`, the schema does not"
                ));
            }
        }
        for argument in &required {
            assert!(
                properties.contains_key(*argument),
                "{name}: `{argument}` is required but not declared"
            );
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_name_a_description_uses_exists() {
    let (_dir, tools) = builtins();
    let tool_names: BTreeSet<&str> = tools.iter().map(|t| t.descriptor.name.as_str()).collect();
    let codes = reject_codes();
    let codes: BTreeSet<&str> = codes.iter().map(String::as_str).collect();
    // A description may point to another tool's argument (`read_file` with an `offset`).
    let mut every_argument = BTreeSet::new();
    for tool in &tools {
        property_names(&tool.descriptor.input_schema, &mut every_argument);
    }
    let mut problems = Vec::new();
    for tool in &tools {
        let name = tool.descriptor.name.as_str();
        let mut arguments = BTreeSet::new();
        property_names(&tool.descriptor.input_schema, &mut arguments);
        let words = result_words(name);
        let known = |word: &str| {
            arguments.contains(word)
                || every_argument.contains(word)
                || tool_names.contains(word)
                || codes.contains(word)
                || words.contains(&word)
                || word == "true"
                || word == "false"
        };
        let mut texts = vec![tool.descriptor.description.clone()];
        let mut stack = vec![&tool.descriptor.input_schema];
        while let Some(schema) = stack.pop() {
            if let Some(description) = schema.get("description").and_then(Value::as_str) {
                texts.push(description.to_owned());
            }
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                stack.extend(properties.values());
            }
            if let Some(items) = schema.get("items") {
                stack.push(items);
            }
        }
        for text in &texts {
            for word in backticked_names(text) {
                if !known(word) {
                    problems.push(format!("{name}: `{word}` is neither an argument, a tool, a code nor a declared result name"));
                }
            }
        }
        // The list declares nothing the descriptions no longer use, or it would hide a name
        // that came to be wrong.
        let used: BTreeSet<&str> = texts.iter().flat_map(|t| backticked_names(t)).collect();
        for word in words {
            if !used.contains(word) {
                problems.push(format!(
                    "{name}: `{word}` is declared but no description uses it"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_checks_can_fail() {
    assert!(says_required(
        "Required: the `digest` from your latest `read_file` of this file."
    ));
    assert!(!says_optional(
        "The file to read, relative to the workspace root."
    ));
    assert!(says_optional("The 1-based line to start at. Default 1."));
    assert_eq!(
        required_in_prose("Pass `path`; `expected_digest` is required, and it requires `edits`."),
        ["expected_digest", "edits"]
    );
    assert_eq!(
        backticked_names("`content` holds `src/main.rs`, `offset + 1` and `a_b2`"),
        ["content", "a_b2"]
    );
}
