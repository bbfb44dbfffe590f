//! `run_script`: the project's own `test`, `build`, `lint`, `typecheck` or `format` command,
//! found in the project files at the workspace root.
//!
//! When several project files define the same script, the first of these wins:
//!
//! 1. a **Makefile** target of that name (`GNUmakefile`, `makefile` or `Makefile`, the first
//!    that exists, as make itself looks) → `make <script>`;
//! 2. a **package.json** `scripts` entry of that name → `npm run <script>`;
//! 3. **Cargo.toml** (with `[package]` or `[workspace]`) → `cargo test`, `cargo build`,
//!    `cargo clippy` (lint), `cargo check` (typecheck), `cargo fmt` (format);
//! 4. tools configured in **pyproject.toml** → `python3 -m pytest` (`[tool.pytest…]`),
//!    `ruff check` / `ruff format` (`[tool.ruff]`), `black .` (`[tool.black]`, format when
//!    ruff is not configured), `mypy .` (`[tool.mypy]`).
//!
//! A Makefile target or a package.json script is the project naming a task on purpose, and
//! often wraps the others (`make test` running `cargo test` with the right features), so they
//! come first. Cargo.toml's commands are implied by the build tool rather than chosen by the
//! project; pyproject.toml's `[tool.*]` tables say a tool is configured, not that it is how the
//! project runs that task, so they come last.
//!
//! The resolved argv, the project file's digest and, for Makefile and package.json, the
//! script's own text are bound into the approval and shown in its preview: `npm run test` and
//! `make test` run whatever the file says, so the file is what the person approves. Execution
//! reads the project again and refuses to run if any of it changed.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_core::{
    Authorized, Classification, Descriptor, Digest, ExecContext, Executor, FieldError, RejectCode,
    ToolError, ToolOutput, sha256_digest,
};
use toolgate_exec::{ambient_env, resolve_program, scrub_env};
use toolgate_workspace::{PathError, RelPath, Workspace};

use crate::run_command::{Plan, command_entry, path_of, program_field_error, resource, unresolved};
use crate::{Builtin, stopped};

pub(crate) const NAME: &str = "run_script";

/// The scripts a project may define.
pub const SCRIPTS: [&str; 5] = ["test", "build", "lint", "typecheck", "format"];

/// Largest project file read.
const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// Recipe lines of a Makefile target shown in the preview.
const MAX_RECIPE_LINES: usize = 20;

const DESCRIPTION: &str = "Run one of the project's own scripts — `test`, `build`, `lint`, \
`typecheck` or `format` — the way the project defines it, without spelling out the command. \
It is looked up at the workspace root, first match wins: a Makefile target of that name \
(`make test`); a package.json script (`npm run test`); Cargo.toml (`cargo test`, `cargo build`, \
`cargo clippy` for lint, `cargo check` for typecheck, `cargo fmt` for format); tools configured \
in pyproject.toml (pytest for test, ruff for lint and format, black for format, mypy for \
typecheck). A script the project does not define is refused with the list of those it does; \
use `run_command` for anything else. `format` rewrites files. The script runs at the workspace \
root and is killed after 10 minutes. Every call needs the user's approval, each time: they see \
the resolved command and the script's text. If they refuse, the call fails with \
`approval_denied`; do not repeat it unchanged. The result is `run_command`'s: `exit_code` (a \
non-zero exit, e.g. failing tests, is a normal result: read `stdout` and `stderr`), `stdout`, \
`stderr` (each at most 64 KiB: the first and last 32 KiB) and `duration_ms`.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "script": {
                "type": "string",
                "enum": SCRIPTS,
                "description": "Which of the project's scripts to run: `test`, `build`, `lint`, `typecheck` or `format`."
            }
        },
        "required": ["script"],
        "additionalProperties": false
    });
    let mut descriptor = Descriptor::new(NAME, DESCRIPTION, schema);
    descriptor.title = Some("Run a project script".to_owned());
    Builtin {
        descriptor,
        // No argument asks for less time, so a script gets the whole maximum.
        entry: command_entry(NAME, None),
        executor: Arc::new(RunScript { workspace }),
    }
}

/// The executor for `run_script`.
#[derive(Debug)]
pub struct RunScript {
    workspace: Arc<Workspace>,
}

impl Executor for RunScript {
    fn check(&self, arguments: &Map<String, Value>) -> Vec<FieldError> {
        let Some(script) = arguments.get("script").and_then(Value::as_str) else {
            return Vec::new();
        };
        let project = Project::read(&self.workspace);
        let Some(definition) = project.find(script) else {
            return vec![
                FieldError::new(
                    "/script",
                    RejectCode::ConstraintViolation,
                    format!("this project does not define a `{script}` script"),
                )
                .with_hint(Some(project.defined())),
            ];
        };
        let env = scrub_env(ambient_env());
        let program = definition.argv.first().map_or("", String::as_str);
        match resolve_program(program, path_of(&env), self.workspace.root()) {
            Ok(_) => Vec::new(),
            Err(error) => vec![program_field_error("/script", program, &error)],
        }
    }

    fn classify(&self, arguments: &Map<String, Value>) -> Classification {
        let script = arguments
            .get("script")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let project = Project::read(&self.workspace);
        let Some(definition) = project.find(script) else {
            return unresolved(&ToolError::new(
                "script_changed",
                format!("the project no longer defines `{script}`"),
            ));
        };
        match definition.plan(&self.workspace) {
            Ok(plan) => definition.classification(&self.workspace, &plan),
            Err(error) => unresolved(&error),
        }
    }

    fn execute(&self, call: &Authorized, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let script = call
            .arguments()
            .get("script")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let project = Project::read(&self.workspace);
        let definition = project.find(script).ok_or_else(|| {
            ToolError::new(
                "script_changed",
                format!("the project no longer defines `{script}`; the call did not run"),
            )
        })?;
        let plan = definition.plan(&self.workspace)?;
        definition.verify(&self.workspace, &plan, call.classification())?;
        plan.verify(&self.workspace, call.classification())?;
        plan.run(&self.workspace, call, cx, None, None)
    }
}

/// One script as a project file defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Definition {
    script: &'static str,
    /// The project file, at the workspace root.
    file: &'static str,
    /// The command, its program unresolved (`npm`, `cargo`).
    argv: Vec<String>,
    /// What the project file says the script does, when the command runs that text.
    body: Option<String>,
    /// How the file defines it, for the preview.
    how: String,
    /// The project file's digest.
    digest: Digest,
}

impl Definition {
    fn plan(&self, workspace: &Workspace) -> Result<Plan, ToolError> {
        let argv: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        Plan::new(workspace, &argv, None)
    }

    fn classification(&self, workspace: &Workspace, plan: &Plan) -> Classification {
        let mut heading = format!("run_script `{}`: {}", self.script, self.how);
        if let Some(body) = &self.body {
            for line in body.lines() {
                heading.push_str("\n    ");
                heading.push_str(line);
            }
        }
        heading.push_str("\nthe command below runs exactly as shown");
        let mut classification = plan.classification(workspace, heading, None, None);
        classification.resources.extend([
            format!("script:{}", self.script),
            format!("source:{}", self.file),
            format!("argv:{}", argv_text(workspace, plan)),
        ]);
        classification
            .preimages
            .push((format!("source:{}", self.file), self.digest.clone()));
        classification
    }

    /// Stage 7: refuses to run unless the command and the project file are what was approved.
    fn verify(
        &self,
        workspace: &Workspace,
        plan: &Plan,
        classified: &Classification,
    ) -> Result<(), ToolError> {
        let changed = |what: String| {
            ToolError::new(
                "script_changed",
                format!("{what} since the call was approved; the call did not run"),
            )
        };
        if resource(classified, "source:") != Some(self.file) {
            return Err(changed(format!(
                "`{}` now comes from `{}`",
                self.script, self.file
            )));
        }
        if resource(classified, "argv:") != Some(argv_text(workspace, plan).as_str()) {
            return Err(changed(format!("the command of `{}` changed", self.script)));
        }
        let approved = classified
            .preimages
            .iter()
            .find(|(name, _)| name.starts_with("source:"))
            .map(|(_, digest)| digest);
        if approved != Some(&self.digest) {
            return Err(changed(format!("`{}` changed", self.file)));
        }
        Ok(())
    }
}

/// The resolved argv as a resource value: JSON, the program as in its own resource.
fn argv_text(workspace: &Workspace, plan: &Plan) -> String {
    let argv: Vec<String> = std::iter::once(plan.program_resource(workspace))
        .chain(plan.args.iter().cloned())
        .collect();
    serde_json::to_string(&argv).unwrap_or_default()
}

/// What the project files at the workspace root define, and what could not be read.
#[derive(Debug, Default)]
struct Project {
    /// In precedence order; the first definition of a script wins.
    definitions: Vec<Definition>,
    problems: Vec<String>,
}

impl Project {
    fn read(workspace: &Workspace) -> Project {
        let mut project = Project::default();
        if let Some(file) = ["GNUmakefile", "makefile", "Makefile"]
            .into_iter()
            .find(|name| matches!(read(workspace, name), Ok(Some(_)) | Err(_)))
        {
            project.add(workspace, file, makefile);
        }
        project.add(workspace, "package.json", package_json);
        project.add(workspace, "Cargo.toml", cargo_toml);
        project.add(workspace, "pyproject.toml", pyproject_toml);
        project
    }

    /// Reads `file` and adds what `parse` finds in it.
    fn add(
        &mut self,
        workspace: &Workspace,
        file: &'static str,
        parse: fn(&str) -> Result<Vec<Found>, String>,
    ) {
        let (text, digest) = match read(workspace, file) {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(problem) => {
                self.problems.push(problem);
                return;
            }
        };
        match parse(&text) {
            Ok(found) => {
                self.definitions
                    .extend(found.into_iter().map(|found| Definition {
                        script: found.script,
                        file,
                        argv: found.argv,
                        body: found.body,
                        how: found.how,
                        digest: digest.clone(),
                    }));
            }
            Err(reason) => self.problems.push(format!(
                "`{file}` could not be read as a project file: {reason}"
            )),
        }
    }

    fn find(&self, script: &str) -> Option<&Definition> {
        self.definitions.iter().find(|d| d.script == script)
    }

    /// The scripts this project defines, and why some files were not used, for a hint.
    fn defined(&self) -> String {
        let mut listed: Vec<String> = Vec::new();
        for script in SCRIPTS {
            if let Some(d) = self.find(script) {
                listed.push(format!("`{script}` ({}: `{}`)", d.file, d.argv.join(" ")));
            }
        }
        let mut hint = if listed.is_empty() {
            "no Makefile, package.json, Cargo.toml or pyproject.toml at the workspace root \
             defines test, build, lint, typecheck or format; use `run_command` instead"
                .to_owned()
        } else {
            format!("this project defines: {}", listed.join(", "))
        };
        for problem in &self.problems {
            hint.push_str("; ");
            hint.push_str(problem);
        }
        hint
    }
}

/// A script a project file defines, before it is tied to the file.
#[derive(Debug)]
struct Found {
    script: &'static str,
    argv: Vec<String>,
    body: Option<String>,
    how: String,
}

impl Found {
    fn new(script: &'static str, argv: &[&str], how: String) -> Found {
        Found {
            script,
            argv: argv.iter().map(|a| (*a).to_owned()).collect(),
            body: None,
            how,
        }
    }
}

/// A project file at the root as text, with its digest; `None` when there is none.
fn read(workspace: &Workspace, name: &str) -> Result<Option<(String, Digest)>, String> {
    let rel = RelPath::parse(name).map_err(|e| e.to_string())?;
    match workspace.read_file(&rel, MAX_PROJECT_FILE_BYTES + 1) {
        Ok((_, total)) if total > MAX_PROJECT_FILE_BYTES => Err(format!(
            "`{name}` is {total} bytes, more than the {MAX_PROJECT_FILE_BYTES} read"
        )),
        Ok((bytes, _)) => {
            let digest = sha256_digest(&bytes);
            String::from_utf8(bytes)
                .map(|text| Some((text, digest)))
                .map_err(|_| format!("`{name}` is not UTF-8"))
        }
        Err(PathError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.to_string()),
    }
}

/// Targets of a Makefile named like a script, with their recipes.
fn makefile(text: &str) -> Result<Vec<Found>, String> {
    let mut targets: Vec<(String, Vec<String>)> = Vec::new();
    // The targets the rule line above named, which recipe lines belong to.
    let mut current: Vec<usize> = Vec::new();
    for line in text.lines() {
        if let Some(recipe) = line.strip_prefix('\t') {
            for &i in &current {
                if let Some((_, lines)) = targets.get_mut(i) {
                    lines.push(recipe.trim().to_owned());
                }
            }
            continue;
        }
        let trimmed = line.trim();
        if trimmed.is_empty() {
            continue;
        }
        current.clear();
        if trimmed.starts_with('#') {
            continue;
        }
        let Some((lhs, rhs)) = line.split_once(':') else {
            continue;
        };
        // `X := y`, `X ::= y`, `X = a:b`, and targets made of variables are not rules we can
        // name.
        if rhs.starts_with('=') || rhs.starts_with(":=") || lhs.contains(['=', '$', '%']) {
            continue;
        }
        let inline = rhs
            .split_once(';')
            .map(|(_, recipe)| recipe.trim().to_owned());
        for name in lhs.split_whitespace() {
            // `.PHONY` and the other special targets start with a dot.
            if name.starts_with('.') {
                continue;
            }
            let index = match targets.iter().position(|(n, _)| n == name) {
                Some(index) => index,
                None => {
                    targets.push((name.to_owned(), Vec::new()));
                    targets.len() - 1
                }
            };
            if let (Some(recipe), Some((_, lines))) = (&inline, targets.get_mut(index)) {
                lines.push(recipe.clone());
            }
            current.push(index);
        }
    }
    Ok(SCRIPTS
        .into_iter()
        .filter_map(|script| {
            let (_, recipe) = targets.iter().find(|(name, _)| name == script)?;
            let mut found = Found::new(
                script,
                &["make", script],
                format!("Makefile target `{script}`, whose recipe make runs with a shell:"),
            );
            let mut body: Vec<&str> = recipe
                .iter()
                .take(MAX_RECIPE_LINES)
                .map(String::as_str)
                .collect();
            if recipe.len() > MAX_RECIPE_LINES {
                body.push("…");
            }
            if body.is_empty() {
                body.push("(no recipe of its own: only its prerequisites run)");
            }
            found.body = Some(body.join("\n"));
            Some(found)
        })
        .collect())
}

/// Scripts of a package.json named like a script.
fn package_json(text: &str) -> Result<Vec<Found>, String> {
    let value: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let scripts = value.get("scripts").and_then(Value::as_object);
    Ok(SCRIPTS
        .into_iter()
        .filter_map(|script| {
            let body = scripts?.get(script)?.as_str()?;
            let mut found = Found::new(
                script,
                &["npm", "run", script],
                format!("package.json script `{script}`, which npm runs with a shell:"),
            );
            found.body = Some(body.to_owned());
            Some(found)
        })
        .collect())
}

/// Cargo's commands, for a manifest with a package or a workspace.
fn cargo_toml(text: &str) -> Result<Vec<Found>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_owned())?;
    if !table.contains_key("package") && !table.contains_key("workspace") {
        return Ok(Vec::new());
    }
    Ok(SCRIPTS
        .into_iter()
        .map(|script| {
            let command = match script {
                "test" => "test",
                "build" => "build",
                "lint" => "clippy",
                "typecheck" => "check",
                _ => "fmt",
            };
            Found::new(
                script,
                &["cargo", command],
                format!("Cargo.toml, so `cargo {command}`"),
            )
        })
        .collect())
}

/// The tools a pyproject.toml configures.
fn pyproject_toml(text: &str) -> Result<Vec<Found>, String> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| e.message().to_owned())?;
    let tool = table.get("tool").and_then(toml::Value::as_table);
    let has = |name: &str| tool.is_some_and(|t| t.contains_key(name));
    let mut found = Vec::new();
    let how = |table: &str| format!("pyproject.toml configures `[tool.{table}]`");
    if has("pytest") {
        found.push(Found::new(
            "test",
            &["python3", "-m", "pytest"],
            how("pytest"),
        ));
    }
    if has("ruff") {
        found.push(Found::new("lint", &["ruff", "check"], how("ruff")));
        found.push(Found::new("format", &["ruff", "format"], how("ruff")));
    } else if has("black") {
        found.push(Found::new("format", &["black", "."], how("black")));
    }
    if has("mypy") {
        found.push(Found::new("typecheck", &["mypy", "."], how("mypy")));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scripts(found: &[Found]) -> Vec<(&str, String)> {
        found.iter().map(|f| (f.script, f.argv.join(" "))).collect()
    }

    #[test]
    fn makefile_targets_are_found_by_a_line_scan() {
        let text = "\
.PHONY: test lint
VAR := value
OTHER = a:b
X ::= y
# build: not a target, a comment
test: build
\tcargo test --all
\t@echo done

lint format:
\tcargo clippy
%.o: %.c
\tcc $<
$(OUT): x
typecheck: ; cargo check
";
        let found = makefile(text).unwrap();
        assert_eq!(
            scripts(&found),
            [
                ("test", "make test".to_owned()),
                ("lint", "make lint".to_owned()),
                ("typecheck", "make typecheck".to_owned()),
                ("format", "make format".to_owned()),
            ]
        );
        assert_eq!(
            found[0].body.as_deref(),
            Some("cargo test --all\n@echo done")
        );
        assert_eq!(found[2].body.as_deref(), Some("cargo check"));
        assert_eq!(found[3].body.as_deref(), Some("cargo clippy"));
    }

    #[test]
    fn package_json_scripts_count_only_when_defined() {
        let found = package_json(
            r#"{"scripts": {"test": "jest", "typecheck": "tsc --noEmit", "start": "node ."}}"#,
        )
        .unwrap();
        assert_eq!(
            scripts(&found),
            [
                ("test", "npm run test".to_owned()),
                ("typecheck", "npm run typecheck".to_owned())
            ]
        );
        assert_eq!(found[0].body.as_deref(), Some("jest"));
        assert!(package_json(r#"{"name": "x"}"#).unwrap().is_empty());
        assert!(
            package_json(r#"{"scripts": {"test": 1}}"#)
                .unwrap()
                .is_empty()
        );
        assert!(package_json("{nope").is_err());
    }

    #[test]
    fn cargo_manifests_define_every_script() {
        let found = cargo_toml("[package]\nname = \"x\"\n").unwrap();
        assert_eq!(
            scripts(&found),
            [
                ("test", "cargo test".to_owned()),
                ("build", "cargo build".to_owned()),
                ("lint", "cargo clippy".to_owned()),
                ("typecheck", "cargo check".to_owned()),
                ("format", "cargo fmt".to_owned()),
            ]
        );
        assert_eq!(cargo_toml("[workspace]\nmembers = []\n").unwrap().len(), 5);
        assert!(cargo_toml("[dependencies]\n").unwrap().is_empty());
        assert!(cargo_toml("[package\n").is_err());
    }

    #[test]
    fn pyproject_defines_what_it_configures() {
        let found = pyproject_toml(
            "[tool.pytest.ini_options]\naddopts = \"-q\"\n[tool.ruff]\n[tool.black]\n[tool.mypy]\n",
        )
        .unwrap();
        assert_eq!(
            scripts(&found),
            [
                ("test", "python3 -m pytest".to_owned()),
                ("lint", "ruff check".to_owned()),
                ("format", "ruff format".to_owned()),
                ("typecheck", "mypy .".to_owned()),
            ]
        );
        let black = pyproject_toml("[tool.black]\n").unwrap();
        assert_eq!(scripts(&black), [("format", "black .".to_owned())]);
        assert!(
            pyproject_toml("[project]\nname = \"x\"\n")
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn precedence_and_the_list_of_defined_scripts() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        std::fs::write(
            dir.path().join("package.json"),
            r#"{"scripts": {"test": "jest"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("Makefile"), "lint:\n\techo lint\n").unwrap();
        std::fs::write(dir.path().join("pyproject.toml"), "[tool.mypy\n").unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let project = Project::read(&workspace);
        let from = |script| project.find(script).map(|d| d.file);
        assert_eq!(from("lint"), Some("Makefile"));
        assert_eq!(from("test"), Some("package.json"));
        assert_eq!(from("build"), Some("Cargo.toml"));
        let hint = project.defined();
        assert!(hint.starts_with("this project defines: `test` (package.json: `npm run test`)"));
        assert!(
            hint.contains("`pyproject.toml` could not be read"),
            "{hint}"
        );

        let empty = tempfile::tempdir().unwrap();
        let project = Project::read(&Workspace::open(empty.path()).unwrap());
        assert!(project.find("test").is_none());
        assert!(project.defined().starts_with("no Makefile, package.json"));
    }
}
