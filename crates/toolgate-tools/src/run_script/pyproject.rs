//! The tools pyproject.toml configures (pytest, ruff, black, mypy) as scripts.

use super::project::{Found, Parsed, Source};

/// The tools a pyproject.toml configures.
pub(super) fn pyproject_toml(source: &Source) -> Parsed {
    let table: toml::Table = match source.text.parse() {
        Ok(table) => table,
        Err(error) => {
            let error: toml::de::Error = error;
            return Parsed::Problem(error.message().to_owned());
        }
    };
    let tool = table.get("tool").and_then(toml::Value::as_table);
    let has = |name: &str| tool.is_some_and(|t| t.contains_key(name));
    let mut found = Vec::new();
    let how = |table: &str| format!("pyproject.toml configures `[tool.{table}]`");
    let own_code = |found: &mut Found, what: &str| {
        found.shown = format!(
            "\n{what}; its configuration comes from pyproject.toml and the files the tool \
             reads itself, which are not bound"
        );
    };
    if has("pytest") {
        let mut test = Found::new("test", &["python3", "-m", "pytest"], how("pytest"));
        own_code(
            &mut test,
            "pytest imports and runs the project's own test code: every `test_*.py`, \
             `conftest.py` and plugin it finds",
        );
        found.push(test);
    }
    if has("ruff") {
        let mut lint = Found::new("lint", &["ruff", "check"], how("ruff"));
        own_code(
            &mut lint,
            "ruff reads the project's files and runs none of them",
        );
        found.push(lint);
        let mut format = Found::new("format", &["ruff", "format"], how("ruff"));
        own_code(
            &mut format,
            "ruff rewrites the project's files and runs none of them",
        );
        found.push(format);
    } else if has("black") {
        let mut format = Found::new("format", &["black", "."], how("black"));
        own_code(
            &mut format,
            "black rewrites the project's files and runs none of them",
        );
        found.push(format);
    }
    if has("mypy") {
        let mut typecheck = Found::new("typecheck", &["mypy", "."], how("mypy"));
        own_code(
            &mut typecheck,
            "mypy reads the project's code and may load the plugins its configuration names",
        );
        found.push(typecheck);
    }
    Parsed::Found(found)
}
