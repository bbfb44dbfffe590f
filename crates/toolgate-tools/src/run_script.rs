//! `run_script`: the project's own `test`, `build`, `lint`, `typecheck` or `format` command,
//! found in the project files at the workspace root.
//!
//! When several project files define the same script, the first of these wins:
//!
//! 1. a **Makefile** target of that name (`GNUmakefile`, `makefile` or `Makefile`, the first
//!    that exists, as make itself looks) → `make --no-builtin-rules -f <that file> <script>`;
//! 2. a **package.json** `scripts` entry of that name → its text, run by `/bin/sh -c` the way
//!    npm runs it, with `pre<script>` and `post<script>` as steps of their own;
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
//! The preview lists every program that will run, in order, and every file at the workspace
//! that decides what runs is bound by its digest (stage 4's preimages) and digested again
//! just before each step starts (`script_changed` if any differs):
//!
//! - **make**: the Makefile is scanned ([`crate::makefile`]); a construct that would make the
//!   preview unreliable (`SHELL`, `include`, `$(shell …)`, …) refuses the call in stage 3 with
//!   its line. The preview shows the goal's recipe after its prerequisites', the pattern rules
//!   make may use and the variables they refer to. make runs with the file named (`-f`), its
//!   built-in rules off, and no `MAKEFLAGS`, `MAKEFILES`, `MAKELEVEL` or `MFLAGS` from the
//!   environment.
//! - **npm**: npm itself is not run for the script, so neither a workspace `.npmrc`
//!   (`script-shell`, `ignore-scripts`, `node-options`) nor npm's lifecycle handling can change
//!   how its text runs. An npm, npx, pnpm or yarn that the text starts does read its
//!   configuration: the keys that name a program are pinned through the environment for every
//!   process of the call ([`interpreter::PACKAGE_MANAGER_PINS`]), and `.npmrc`, `.yarnrc`,
//!   `.yarnrc.yml` and `.pnpmfile.cjs` at the root are shown whole and bound. The script's
//!   text runs as npm would run it: `/bin/sh -c TEXT` at the root, with
//!   `node_modules/.bin` first in `PATH` and `npm_lifecycle_event`, `npm_lifecycle_script`,
//!   `npm_package_name`, `npm_package_version`, `npm_package_json` and `npm_command` set; a
//!   `pre`/`post` script is a step of its own, shown and checked again before it starts, and
//!   a failing step ends the script as in npm.
//! - **cargo**: `.cargo/config.toml`, `.cargo/config`, `rust-toolchain.toml` and
//!   `rust-toolchain` at the root are bound and shown verbatim, with the keys among them that
//!   name a program (`runner`, `rustc-wrapper`, `linker`, `[alias]`, …) listed first. Cargo's
//!   configuration outside the workspace (the user's `$CARGO_HOME`) is not the project's and
//!   is not bound.
//! - **pyproject**: the tool's argv, and plainly that the project's own test code runs.
//!
//! Files inside the workspace that a recipe line or a package.json script names by a plain
//! word (`sh scripts/check.sh`), and for npm the program a word finds in `node_modules/.bin`,
//! are bound like `run_command`'s arguments, within the same limits; so are the files a
//! package.json script's commands run without naming them (`python3 -m job` → `job.py`, what
//! `sh -c` text sources), which [`crate::interpreter`] finds and the preview names. What the
//! programs then
//! read and run by themselves — `build.rs`, test code, `conftest.py`, what a bound program
//! imports — is the project's code, which the person approves by running the project's
//! command at all; it is not bound.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    Call, Classification, Descriptor, Digest, ExecContext, FieldError, RejectCode, Resource,
    ToolError, ToolErrorCode, ToolOutput, TypedExecutor, sha256_digest,
};
use toolgate_exec::{ambient_env, resolve_program, scrub_env};
use toolgate_workspace::{PathError, RelPath, Workspace};

use crate::confine::{self, Confined, Confinement};
use crate::makefile::Makefile;
use crate::run_command::{Plan, command_entry, path_of, program_field_error, unresolved};
use crate::{Builtin, interpreter, stopped};

pub(crate) const NAME: &str = "run_script";

/// The scripts a project may define.
pub const SCRIPTS: [&str; 5] = ["test", "build", "lint", "typecheck", "format"];

/// Largest project file read.
const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// Largest configuration file shown whole in a preview; a larger one refuses the call.
const MAX_CONFIG_SHOWN_BYTES: usize = 16 * 1024;

/// The shell a package.json script runs with, as npm runs it on POSIX systems.
const SCRIPT_SHELL: &str = "/bin/sh";

/// Environment variables make would take options or makefiles from.
const MAKE_ENV: [&str; 5] = [
    "MAKEFLAGS",
    "MAKEFILES",
    "MAKELEVEL",
    "MFLAGS",
    "GNUMAKEFLAGS",
];

/// Cargo's configuration files at the root that decide what it runs, in the order shown.
const CARGO_CONFIG: [&str; 4] = [
    ".cargo/config.toml",
    ".cargo/config",
    "rust-toolchain.toml",
    "rust-toolchain",
];

/// Keys of cargo's configuration that name a program cargo runs, or change its arguments.
const CARGO_PROGRAM_KEYS: [&str; 13] = [
    "runner",
    "rustc-wrapper",
    "rustc-workspace-wrapper",
    "rustc",
    "rustdoc",
    "linker",
    "alias",
    "env",
    "rustflags",
    "path",
    "credential-provider",
    "global-credential-providers",
    "browser",
];

const DESCRIPTION: &str = "Run one of the project's own scripts — `test`, `build`, `lint`, \
`typecheck` or `format` — the way the project defines it, without spelling out the command. \
It is looked up at the workspace root, first match wins: a Makefile target of that name \
(`make test`); a package.json script (its text, run with `/bin/sh -c` as npm would, with its \
`pre`/`post` scripts as steps of their own); Cargo.toml (`cargo test`, `cargo build`, \
`cargo clippy` for lint, `cargo check` for typecheck, `cargo fmt` for format); tools configured \
in pyproject.toml (pytest for test, ruff for lint and format, black for format, mypy for \
typecheck). A script the project does not define is refused with the list of those it does; \
so is every script of a Makefile that uses `SHELL`, `include`, `$(shell …)`, `$(eval …)` or \
another construct whose effect cannot be shown (the refusal names it and its line); use \
`run_command` for anything else. `format` rewrites files. The script runs at the workspace \
root and is killed after 10 minutes. Every call needs the user's approval, each time: they see \
every program that will run, the script's text and the project files that decide it, which \
are bound to the approval — if one changes before the script starts, the call fails with \
`script_changed`. If they refuse, the call fails with `approval_denied`; do not repeat it \
unchanged. The script runs in `run_command`'s sandbox: writes only in the workspace and its own \
TMPDIR, and no network unless `network` names the hosts it needs (a test suite that downloads \
packages needs their registry's hosts). The result is `run_command`'s: `exit_code` (a non-zero exit, e.g. failing tests, is \
a normal result: read `stdout` and `stderr`), `stdout`, `stderr` (each at most 64 KiB: the \
first and last 32 KiB) and `duration_ms`; a script of several steps also has `steps`, one \
entry per step that ran, and stops at the first that fails.";

pub(crate) fn builtin(workspace: Arc<Workspace>, confinement: Arc<Confinement>) -> Builtin {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "script": {
                "type": "string",
                "enum": SCRIPTS,
                "description": "Which of the project's scripts to run: `test`, `build`, `lint`, `typecheck` or `format`."
            },
            "network": crate::confine::network_schema(),
            "may_change": crate::later::may_change_schema()
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
        executor: Arc::new(RunScript {
            workspace,
            confinement,
        }),
    }
}

/// The executor for `run_script`.
#[derive(Debug)]
pub struct RunScript {
    workspace: Arc<Workspace>,
    confinement: Arc<Confinement>,
}

/// `run_script`'s arguments, as its closed schema admits them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptArgs {
    script: String,
    #[serde(default)]
    network: Vec<String>,
    #[serde(default)]
    may_change: Vec<String>,
}

/// What a `run_script` call will run: the script, and everything stage 4 found to decide
/// what runs — each step's program and argv, the project file and configuration, with their
/// digests — which every step must find again before it starts.
#[derive(Debug)]
pub struct ScriptPlan {
    script: String,
    network: Vec<String>,
    may_change: Vec<String>,
    approved: Approved,
}

/// What decides what a script runs, as stage 4 found it. The confinement's resources are
/// not here: they are bound once for the call, not found again before each step.
#[derive(Debug, Default, PartialEq, Eq)]
struct Approved {
    resources: Vec<Resource>,
    preimages: Vec<(String, Digest)>,
}

impl Approved {
    fn of(classification: &Classification) -> Approved {
        Approved {
            resources: classification
                .resources
                .iter()
                .filter(|r| !confine::is_confinement_resource(r))
                .cloned()
                .collect(),
            preimages: classification.preimages.clone(),
        }
    }
}

impl TypedExecutor for RunScript {
    type Args = ScriptArgs;
    type Plan = ScriptPlan;

    fn check(&self, arguments: &ScriptArgs) -> Vec<FieldError> {
        let unconfinable =
            confine::check(&self.confinement, &arguments.network, &arguments.may_change);
        if !unconfinable.is_empty() {
            return unconfinable;
        }
        let script = arguments.script.as_str();
        let project = Project::read(&self.workspace);
        if let Some(blocker) = &project.blocker {
            return vec![
                FieldError::new("/script", RejectCode::ConstraintViolation, blocker.clone())
                    .with_hint(Some(BLOCKED_HINT.to_owned())),
            ];
        }
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
        for step in &definition.steps {
            let program = step.argv.first().map_or("", String::as_str);
            if let Err(error) = resolve_program(program, path_of(&env), self.workspace.root()) {
                return vec![program_field_error("/script", program, &error)];
            }
        }
        Vec::new()
    }

    fn plan(&self, arguments: ScriptArgs) -> (ScriptPlan, Classification) {
        let classification =
            match Project::read(&self.workspace).resolve(&self.workspace, &arguments.script) {
                Ok((definition, plans)) => {
                    let mut classification = definition.classification(&self.workspace, &plans);
                    confine::bind(
                        &self.confinement,
                        &arguments.network,
                        &arguments.may_change,
                        &mut classification,
                    );
                    classification
                }
                Err(error) => unresolved(&error),
            };
        let plan = ScriptPlan {
            script: arguments.script,
            network: arguments.network,
            may_change: arguments.may_change,
            approved: Approved::of(&classification),
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &ScriptPlan,
        call: &Call<'_>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let confined = confine::start(
            &self.confinement,
            self.workspace.root(),
            &plan.network,
            &plan.may_change,
        )?;
        let output = self.steps(call, cx, &plan.script, &plan.approved, &confined);
        confined.attach(output)
    }
}

impl RunScript {
    /// Runs the script's steps in order, each checked again against what was approved, until
    /// one fails.
    fn steps(
        &self,
        call: &Call<'_>,
        cx: &ExecContext,
        script: &str,
        approved: &Approved,
        confined: &Confined,
    ) -> Result<ToolOutput, ToolError> {
        let mut results: Vec<(String, ToolOutput)> = Vec::new();
        let mut step = 0;
        let mut total;
        loop {
            if cx.should_stop() {
                return Err(stopped(cx));
            }
            // Each step reads the project again and must find exactly what was approved: a
            // step that changed the files a later one reads cannot run that one unseen.
            let (definition, mut plans) =
                Project::read(&self.workspace).resolve(&self.workspace, script)?;
            definition.verify(&self.workspace, &plans, approved)?;
            let count = plans.len();
            total = count;
            if step >= count {
                break;
            }
            let name = definition
                .steps
                .get(step)
                .map_or_else(|| script.to_owned(), |s| s.name.clone());
            let plan = plans.swap_remove(step);
            let output = plan
                .run(&self.workspace, call, cx, confined, None, None)
                .map_err(|mut error| {
                    if count > 1 {
                        error.message = format!("step `{name}`: {}", error.message);
                    }
                    error
                })?;
            let failed = field(&output.value, "exit_code") != json!(0);
            results.push((name, output));
            step += 1;
            if failed || step >= count {
                break;
            }
        }
        Ok(combine(results, total))
    }
}

const BLOCKED_HINT: &str = "toolgate runs a project script only when it can show what will \
run; remove the construct, or run the command you mean with `run_command`";

/// One result of a script of `count` steps: the last step's exit and command, every step's
/// output in order, and a summary of each step that ran (so a failing `pretest` reads as
/// one, with `test` not run).
fn combine(mut results: Vec<(String, ToolOutput)>, count: usize) -> ToolOutput {
    if count == 1
        && results.len() == 1
        && let Some((_, only)) = results.pop()
    {
        return only;
    }
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut steps = Vec::new();
    let mut unknowns = Vec::new();
    let mut truncated = false;
    let mut sums = [0u64; 5];
    let mut last = Value::Null;
    for (name, output) in results {
        let value = output.value;
        stdout.push_str(field(&value, "stdout").as_str().unwrap_or_default());
        stderr.push_str(field(&value, "stderr").as_str().unwrap_or_default());
        for (sum, key) in sums.iter_mut().zip([
            "duration_ms",
            "stdout_bytes",
            "stderr_bytes",
            "stdout_elided",
            "stderr_elided",
        ]) {
            *sum = sum.saturating_add(field(&value, key).as_u64().unwrap_or(0));
        }
        steps.push(json!({
            "step": name,
            "argv_resolved": field(&value, "argv_resolved"),
            "exit_code": field(&value, "exit_code"),
            "signal": field(&value, "signal"),
            "duration_ms": field(&value, "duration_ms"),
            "stdout_bytes": field(&value, "stdout_bytes"),
            "stderr_bytes": field(&value, "stderr_bytes"),
        }));
        unknowns.extend(output.unknowns);
        truncated |= output.truncated;
        last = value;
    }
    let [duration, out_bytes, err_bytes, out_elided, err_elided] = sums;
    let value = json!({
        "argv_resolved": field(&last, "argv_resolved"),
        "cwd": field(&last, "cwd"),
        "exit_code": field(&last, "exit_code"),
        "signal": field(&last, "signal"),
        "timed_out": false,
        "cancelled": false,
        "duration_ms": duration,
        "stdout": stdout,
        "stderr": stderr,
        "stdout_bytes": out_bytes,
        "stderr_bytes": err_bytes,
        "stdout_elided": out_elided,
        "stderr_elided": err_elided,
        "steps": steps,
    });
    let mut output = ToolOutput::new(value).truncated(truncated);
    output.unknowns = unknowns;
    output
}

/// A field of a step's result, `null` when absent.
fn field(value: &Value, key: &str) -> Value {
    value.get(key).cloned().unwrap_or(Value::Null)
}

/// One program a script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Step {
    /// `test`, or `pretest` and `posttest` around it.
    name: String,
    /// The command, its program unresolved (`make`, `/bin/sh`).
    argv: Vec<String>,
    /// Variables set for this step, shown with their values.
    env: Vec<(String, String)>,
    /// Variables left out of this step's environment.
    unset: Vec<&'static str>,
    /// What the person should read about this step.
    about: String,
}

/// One script as a project file defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Definition {
    script: &'static str,
    /// The project file, at the workspace root.
    file: &'static str,
    steps: Vec<Step>,
    /// How the file defines it, for the preview.
    how: String,
    /// What the preview says after the steps: rules, configuration, what else runs.
    shown: String,
    /// The project file's digest.
    digest: Digest,
    /// Other files that decide what runs, as `config:<path>` and their digests.
    bound: Vec<(String, Digest)>,
    /// Words of the script's text that may name files inside the workspace, relative to the
    /// root: bound like `run_command`'s arguments.
    named: Vec<String>,
}

impl Definition {
    fn plans(&self, workspace: &Workspace) -> Result<Vec<Plan>, ToolError> {
        let count = self.steps.len().max(1);
        self.steps
            .iter()
            .map(|step| {
                let argv: Vec<&str> = step.argv.iter().map(String::as_str).collect();
                let mut plan = Plan::new(workspace, &argv, None)?;
                for name in &step.unset {
                    plan.remove_env(name);
                }
                for (name, value) in &step.env {
                    plan.set_env(name, value.clone());
                }
                // Several steps share the one result's budget.
                plan.capture_bytes /= count;
                Ok(plan)
            })
            .collect()
    }

    /// Stage 4: every step's program and arguments, the project file and the configuration
    /// that decide them, and a preview that lists them in the order they run.
    fn classification(&self, workspace: &Workspace, plans: &[Plan]) -> Classification {
        let mut preview = format!("run_script `{}`: {}", self.script, self.how);
        let mut classification = Classification::default();
        let count = plans.len();
        for (i, (step, plan)) in self.steps.iter().zip(plans).enumerate() {
            let mut heading = if count > 1 {
                format!("\nstep {} of {count}, `{}`:", i + 1, step.name)
            } else {
                String::new()
            };
            if !step.about.is_empty() {
                heading.push('\n');
                heading.push_str(&step.about);
            }
            let part = plan.classification(workspace, heading, None, None);
            if let Some(text) = &part.preview {
                preview.push_str(text);
            }
            for (name, value) in &step.env {
                let _ = write!(preview, "\n  set for this step: {name}={value:?}");
            }
            for name in &step.unset {
                let _ = write!(preview, "\n  left out of the environment: {name}");
            }
            for resource in part.resources {
                if !classification.resources.contains(&resource) {
                    classification.resources.push(resource);
                }
            }
            for path in part.paths {
                if !classification.paths.contains(&path) {
                    classification.paths.push(path);
                }
            }
            classification.preimages.extend(part.preimages);
            classification
                .resources
                .push(Resource::Argv(argv_text(workspace, plan)));
        }
        preview.push_str(&self.shown);
        preview.push_str(&interpreter::pins_preview());
        classification.preview = Some(preview);
        if let Some(plan) = plans.first()
            && !self.named.is_empty()
        {
            let named: Vec<(String, &str)> = self
                .named
                .iter()
                .map(|word| ("word".to_owned(), word.as_str()))
                .collect();
            plan.inputs_of(workspace, &named)
                .bind(&mut classification, "the script's text");
        }
        let preview = classification.preview.take().unwrap_or_default();
        classification.resources.extend([
            Resource::Script(self.script.to_owned()),
            Resource::Source(self.file.to_owned()),
        ]);
        classification
            .preimages
            .push((format!("source:{}", self.file), self.digest.clone()));
        classification.preimages.extend(self.bound.iter().cloned());
        for (name, _) in &self.bound {
            if let Some(path) = name.strip_prefix("config:") {
                classification.paths.push(path.to_owned());
            }
        }
        classification.preview = Some(preview);
        classification
    }

    /// Stage 7, before each step: refuses to run unless every program, argument and file
    /// that decides what runs is what stage 4 found (`approved`) and the user approved.
    fn verify(
        &self,
        workspace: &Workspace,
        plans: &[Plan],
        approved: &Approved,
    ) -> Result<(), ToolError> {
        let now = Approved::of(&self.classification(workspace, plans));
        let changed = |what: String| {
            ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("{what} since the call was approved; the call did not run"),
            )
        };
        if let Some((name, _)) = now
            .preimages
            .iter()
            .find(|entry| !approved.preimages.contains(entry))
            .or_else(|| {
                approved
                    .preimages
                    .iter()
                    .find(|entry| !now.preimages.contains(entry))
            })
        {
            let file = name.split_once(':').map_or(name.as_str(), |(_, f)| f);
            return Err(changed(format!("`{file}` changed")));
        }
        if now.resources != approved.resources {
            return Err(changed(format!(
                "the commands of `{}` changed",
                self.script
            )));
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
    /// Why no script may run at all: a Makefile whose preview could not be trusted might
    /// define any of them.
    blocker: Option<String>,
}

/// What one project file's parser is given.
struct Source<'a> {
    workspace: &'a Workspace,
    file: &'static str,
    text: &'a str,
}

/// What a parser found, or why the whole project is refused.
enum Parsed {
    Found(Vec<Found>),
    Problem(String),
    Blocked(String),
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
    fn add(&mut self, workspace: &Workspace, file: &'static str, parse: fn(&Source) -> Parsed) {
        let (text, digest) = match read(workspace, file) {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(problem) => {
                self.problems.push(problem);
                return;
            }
        };
        let source = Source {
            workspace,
            file,
            text: &text,
        };
        match parse(&source) {
            Parsed::Found(found) => {
                self.definitions
                    .extend(found.into_iter().map(|found| Definition {
                        script: found.script,
                        file,
                        steps: found.steps,
                        how: found.how,
                        shown: found.shown,
                        digest: digest.clone(),
                        bound: found.bound,
                        named: found.named,
                    }));
            }
            Parsed::Problem(reason) => self.problems.push(format!(
                "`{file}` could not be read as a project file: {reason}"
            )),
            Parsed::Blocked(reason) => {
                if self.blocker.is_none() {
                    self.blocker = Some(reason);
                }
            }
        }
    }

    fn find(&self, script: &str) -> Option<&Definition> {
        self.definitions.iter().find(|d| d.script == script)
    }

    /// The definition of `script` and its steps' plans, or why it cannot run.
    fn resolve(
        self,
        workspace: &Workspace,
        script: &str,
    ) -> Result<(Definition, Vec<Plan>), ToolError> {
        if let Some(blocker) = self.blocker {
            return Err(ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("{blocker}; the call did not run"),
            ));
        }
        let definition = self.find(script).cloned().ok_or_else(|| {
            ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("the project no longer defines `{script}`; the call did not run"),
            )
        })?;
        let plans = definition.plans(workspace)?;
        Ok((definition, plans))
    }

    /// The scripts this project defines, and why some files were not used, for a hint.
    fn defined(&self) -> String {
        let mut listed: Vec<String> = Vec::new();
        for script in SCRIPTS {
            if let Some(d) = self.find(script) {
                let commands: Vec<String> = d.steps.iter().map(|s| s.argv.join(" ")).collect();
                listed.push(format!(
                    "`{script}` ({}: `{}`)",
                    d.file,
                    commands.join("`, then `")
                ));
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
    steps: Vec<Step>,
    how: String,
    shown: String,
    bound: Vec<(String, Digest)>,
    named: Vec<String>,
}

impl Found {
    fn new(script: &'static str, argv: &[&str], how: String) -> Found {
        Found {
            script,
            steps: vec![Step {
                name: script.to_owned(),
                argv: argv.iter().map(|a| (*a).to_owned()).collect(),
                env: Vec::new(),
                unset: Vec::new(),
                about: String::new(),
            }],
            how,
            shown: String::new(),
            bound: Vec::new(),
            named: Vec::new(),
        }
    }
}

/// The words of shell text that could name a file: split where the shell splits or
/// quotes, leaving out words with expansions or globs, which only the shell could resolve.
fn words_of(text: &str, into: &mut Vec<String>) {
    let separators = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                ';' | '|' | '&' | '(' | ')' | '<' | '>' | '"' | '\'' | '`' | '\\'
            )
    };
    for word in text.split(separators) {
        if word.is_empty()
            || word.contains(['$', '*', '?', '[', '~'])
            || into.iter().any(|w| w == word)
        {
            continue;
        }
        into.push(word.to_owned());
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

/// Targets of a Makefile named like a script, with the rules make runs for them.
fn makefile(source: &Source) -> Parsed {
    let file = source.file;
    let makefile = match Makefile::parse(source.text, file) {
        Ok(makefile) => makefile,
        Err(unreliable) => return Parsed::Blocked(format!("`{file}` {unreliable}")),
    };
    let mut found = Vec::new();
    for script in SCRIPTS {
        if !makefile.defines(script) {
            continue;
        }
        let shown = match makefile.show(script) {
            Ok(shown) => shown,
            Err(unreliable) => return Parsed::Blocked(format!("`{file}` {unreliable}")),
        };
        let mut definition = Found::new(
            script,
            &["make", "--no-builtin-rules", "-f", file, script],
            format!(
                "{file} target `{script}`; make runs each recipe line below with `/bin/sh -c` \
                 (the Makefile sets no `SHELL`), prerequisites first:"
            ),
        );
        if let Some(step) = definition.steps.first_mut() {
            step.unset = MAKE_ENV.to_vec();
            step.about = "  make, with the file named and its built-in rules off:".to_owned();
        }
        definition.shown = format!(
            "\nthe rules make runs, as {file} writes them:{}",
            shown.text
        );
        for recipe in &shown.recipes {
            // make's own prefixes, `@` (silent), `-` (ignore errors), `+` (always run).
            words_of(
                recipe.trim_start_matches(['@', '-', '+', ' ', '\t']),
                &mut definition.named,
            );
        }
        // What `$<` and `$^` name: each prerequisite, wherever `vpath` may find it.
        for prerequisite in shown.prerequisites {
            if !definition.named.contains(&prerequisite) {
                definition.named.push(prerequisite);
            }
        }
        if !shown.has_recipe {
            definition
                .shown
                .push_str("\n(no recipe line at all: make only checks the prerequisites)");
        }
        definition.shown.push_str(
            "\nthe programs those lines start read their own files and configuration, which \
             are not bound",
        );
        found.push(definition);
    }
    Parsed::Found(found)
}

/// Scripts of a package.json named like a script, with their `pre` and `post` scripts.
fn package_json(source: &Source) -> Parsed {
    let value: Value = match serde_json::from_str(source.text) {
        Ok(value) => value,
        Err(error) => return Parsed::Problem(error.to_string()),
    };
    let Some(scripts) = value.get("scripts").and_then(Value::as_object) else {
        return Parsed::Found(Vec::new());
    };
    let text_of = |name: &str| scripts.get(name).and_then(Value::as_str);
    let package_json = source
        .workspace
        .ambient_path(&RelPath::root())
        .join(source.file)
        .display()
        .to_string();
    let bin = source
        .workspace
        .ambient_path(&RelPath::root())
        .join("node_modules/.bin")
        .display()
        .to_string();
    let path = path_of(&scrub_env(ambient_env()))
        .map_or_else(|| bin.clone(), |path| format!("{bin}:{path}"));
    let field = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut found = Vec::new();
    for script in SCRIPTS {
        if text_of(script).is_none() {
            continue;
        }
        let mut steps = Vec::new();
        for name in [
            format!("pre{script}"),
            script.to_owned(),
            format!("post{script}"),
        ] {
            let Some(text) = text_of(&name) else {
                continue;
            };
            steps.push(Step {
                argv: vec![SCRIPT_SHELL.to_owned(), "-c".to_owned(), text.to_owned()],
                env: vec![
                    ("PATH".to_owned(), path.clone()),
                    ("npm_command".to_owned(), "run-script".to_owned()),
                    ("npm_lifecycle_event".to_owned(), name.clone()),
                    ("npm_lifecycle_script".to_owned(), text.to_owned()),
                    ("npm_package_json".to_owned(), package_json.clone()),
                    ("npm_package_name".to_owned(), field("name")),
                    ("npm_package_version".to_owned(), field("version")),
                ],
                unset: Vec::new(),
                about: format!("  package.json script `{name}`, whose text the shell runs:"),
                name,
            });
        }
        let names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
        let mut named = Vec::new();
        let mut shown = String::new();
        for step in &steps {
            if let Some(text) = step.argv.get(2) {
                words_of(text, &mut named);
                // What the text's own commands run without naming a file: `python3 -m job`,
                // `sh -c '. ./x.sh'`, and the text of the scripts a nested `npm run` runs,
                // from this package.json.
                let mut analysis = interpreter::shell_text(text, &format!("`{}`", step.name));
                interpreter::show_package_scripts(&mut analysis, scripts, &names);
                for (_, path) in analysis.candidates {
                    if !named.contains(&path) {
                        named.push(path);
                    }
                }
                for note in analysis.notes {
                    let _ = write!(shown, "\n  {note}");
                }
            }
        }
        if !shown.is_empty() {
            shown.insert_str(
                0,
                "\nwhat the scripts' commands read or run (the approval covers only the files \
                 bound below):",
            );
        }
        let mut bound = Vec::new();
        let mut config_shown = String::new();
        if let Err(problem) =
            package_manager_config(source.workspace, &mut config_shown, &mut bound, &mut named)
        {
            return Parsed::Blocked(problem);
        }
        // A plain word the shell finds in node_modules/.bin first: the program it runs.
        let programs: Vec<String> = named
            .iter()
            .filter(|w| !w.contains('/') && !w.starts_with('-') && !w.starts_with('.'))
            .map(|w| format!("node_modules/.bin/{w}"))
            .collect();
        named.extend(programs);
        found.push(Found {
            script,
            how: format!(
                "package.json script `{script}`, run as npm would run it ({}), each with \
                 `/bin/sh -c` at the workspace root; npm itself is not run for it, so no \
                 `.npmrc` changes how its text runs (an npm, npx, pnpm or yarn the text starts \
                 does read its configuration: the keys that name a program are pinned, the \
                 files at the root shown below):",
                names.join(", then ")
            ),
            steps,
            shown: format!(
                "{shown}\nthe programs the scripts name are looked up in node_modules/.bin \
                 first, then in PATH; what those programs load in turn is not bound\
                 {config_shown}"
            ),
            bound,
            named,
        });
    }
    Parsed::Found(found)
}

/// The configuration files at the root that npm, npx, pnpm and yarn read when a script's
/// text starts one of them, with what each can make them run. The keys in
/// [`interpreter::PACKAGE_MANAGER_PINS`] are pinned for every process; the rest (`call`,
/// `node-gyp`, yarn's `plugins`, pnpm's hooks) can still run code, so the files are shown
/// whole and bound: one written by an earlier step refuses the later ones.
const PACKAGE_MANAGER_CONFIG: [(&str, &str); 5] = [
    (
        ".npmrc",
        "npm, npx and pnpm: `call`, `node-gyp` and other keys; the keys that name a \
         program are pinned",
    ),
    (
        ".yarnrc.yml",
        "yarn 2+: `plugins` it loads and runs, `yarnPath` (pinned off)",
    ),
    (
        ".yarnrc",
        "yarn 1: `yarn-path` (pinned off) and default flags",
    ),
    (".pnpmfile.cjs", "pnpm: hooks it runs as it installs"),
    ("pnpm-workspace.yaml", "pnpm 10: settings, as `.npmrc`'s"),
];

/// Shows ([`PACKAGE_MANAGER_CONFIG`]) the package managers' configuration files at the root
/// whole, and binds them, with the files their words name (`node-gyp=./x.js`, a yarn plugin's
/// path) into `named`; a file too large to show is a problem that refuses the script.
fn package_manager_config(
    workspace: &Workspace,
    shown: &mut String,
    bound: &mut Vec<(String, Digest)>,
    named: &mut Vec<String>,
) -> Result<(), String> {
    for (name, runs) in PACKAGE_MANAGER_CONFIG {
        let (text, digest) = match read(workspace, name) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(problem) => {
                return Err(format!(
                    "package managers' configuration cannot be shown: {problem}"
                ));
            }
        };
        if text.len() > MAX_CONFIG_SHOWN_BYTES {
            return Err(format!(
                "`{name}` is {} bytes, more than the {MAX_CONFIG_SHOWN_BYTES} a preview shows \
                 whole",
                text.len()
            ));
        }
        let _ = write!(
            shown,
            "\nan npm, npx, pnpm or yarn the scripts start reads `{name}` (bound to this \
             approval; {runs}):"
        );
        for (i, line) in text.lines().enumerate() {
            let _ = write!(shown, "\n  {:>4}| {line}", i + 1);
        }
        bound.push((format!("config:{name}"), digest));
        for line in text.lines() {
            // `key=value` (`.npmrc`) and `key: value` (`.yarnrc.yml`): the value may be a path.
            words_of(&line.replace(['=', ':'], " "), named);
        }
    }
    // Bound by digest, never shown: an environment file holds secrets. Its name is not one of
    // the call's paths either, so the sensitive-file rules do not refuse the script for it.
    match read(workspace, YARN_ENV_FILE) {
        Ok(Some((_, digest))) => {
            let _ = write!(
                shown,
                "\na yarn 4 the scripts start loads `{YARN_ENV_FILE}` into every script's \
                 environment (`NODE_OPTIONS` there makes node load a file): bound to this \
                 approval, not shown, since environment files hold secrets"
            );
            bound.push((format!("env:{YARN_ENV_FILE}"), digest));
        }
        Ok(None) => {}
        Err(problem) => {
            return Err(format!(
                "package managers' configuration cannot be read: {problem}"
            ));
        }
    }
    Ok(())
}

/// The environment file yarn 4 loads into scripts by default (`injectEnvironmentFiles`).
const YARN_ENV_FILE: &str = ".env.yarn";

/// Cargo's commands, for a manifest with a package or a workspace, with the configuration at
/// the root that decides what cargo runs.
fn cargo_toml(source: &Source) -> Parsed {
    let table: toml::Table = match source.text.parse() {
        Ok(table) => table,
        Err(error) => {
            let error: toml::de::Error = error;
            return Parsed::Problem(error.message().to_owned());
        }
    };
    if !table.contains_key("package") && !table.contains_key("workspace") {
        return Parsed::Found(Vec::new());
    }
    let mut shown = String::new();
    let mut bound = Vec::new();
    for name in CARGO_CONFIG {
        let (text, digest) = match read(source.workspace, name) {
            Ok(Some(found)) => found,
            Ok(None) => continue,
            Err(problem) => {
                return Parsed::Blocked(format!(
                    "cargo's configuration cannot be shown: {problem}"
                ));
            }
        };
        if text.len() > MAX_CONFIG_SHOWN_BYTES {
            return Parsed::Blocked(format!(
                "`{name}` is {} bytes, more than the {MAX_CONFIG_SHOWN_BYTES} a preview shows \
                 whole",
                text.len()
            ));
        }
        let programs = program_keys(&text);
        let _ = write!(shown, "\ncargo reads `{name}` (bound to this approval)");
        if programs.is_empty() {
            shown.push(':');
        } else {
            let _ = write!(
                shown,
                "; it names programs or arguments cargo uses: {}:",
                programs.join(", ")
            );
        }
        for (i, line) in text.lines().enumerate() {
            let _ = write!(shown, "\n  {:>4}| {line}", i + 1);
        }
        bound.push((format!("config:{name}"), digest));
    }
    shown.push_str(
        "\nthe project's build scripts (`build.rs`), procedural macros and tests are its own \
         code and run as part of the command; cargo's configuration outside the workspace is \
         not bound",
    );
    let found = SCRIPTS
        .into_iter()
        .map(|script| {
            let command = match script {
                "test" => "test",
                "build" => "build",
                "lint" => "clippy",
                "typecheck" => "check",
                _ => "fmt",
            };
            let mut found = Found::new(
                script,
                &["cargo", command],
                format!("Cargo.toml, so `cargo {command}`"),
            );
            found.shown = shown.clone();
            found.bound = bound.clone();
            found
        })
        .collect();
    Parsed::Found(found)
}

/// The dotted keys of a cargo configuration that name a program or change what runs; a file
/// that is not TOML names them all, since cargo would refuse it anyway.
fn program_keys(text: &str) -> Vec<String> {
    let Ok(table) = text.parse::<toml::Table>() else {
        return vec!["(not TOML)".to_owned()];
    };
    let mut found = Vec::new();
    let mut stack: Vec<(String, &toml::Table)> = vec![(String::new(), &table)];
    while let Some((prefix, table)) = stack.pop() {
        for (key, value) in table {
            let dotted = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            if CARGO_PROGRAM_KEYS.contains(&key.as_str()) {
                found.push(format!("`{dotted}`"));
            } else if let Some(inner) = value.as_table() {
                stack.push((dotted, inner));
            }
        }
    }
    found.sort();
    found
}

/// The tools a pyproject.toml configures.
fn pyproject_toml(source: &Source) -> Parsed {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `parse` finds in `text`, as the file `file` of an otherwise empty workspace that
    /// also holds `others`.
    fn parse_in(
        parse: fn(&Source) -> Parsed,
        file: &'static str,
        text: &str,
        others: &[(&str, &str)],
    ) -> Parsed {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in others {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, body).unwrap();
        }
        let workspace = Workspace::open(dir.path()).unwrap();
        parse(&Source {
            workspace: &workspace,
            file,
            text,
        })
    }

    fn found_in(parsed: Parsed) -> Vec<Found> {
        match parsed {
            Parsed::Found(found) => found,
            Parsed::Problem(p) | Parsed::Blocked(p) => panic!("not found: {p}"),
        }
    }

    fn scripts(found: &[Found]) -> Vec<(&str, String)> {
        found
            .iter()
            .map(|f| {
                let steps: Vec<String> = f.steps.iter().map(|s| s.argv.join(" ")).collect();
                (f.script, steps.join(" && "))
            })
            .collect()
    }

    #[test]
    fn makefile_targets_run_with_the_file_named_and_show_their_rules() {
        let text = "\
.PHONY: test lint
VAR := value
# build: not a target, a comment
test: build
\tcargo test --all
\t@echo done

build:
\tcargo build
lint format:
\tcargo clippy
typecheck: ; cargo check
";
        let found = found_in(parse_in(makefile, "Makefile", text, &[]));
        assert_eq!(
            scripts(&found),
            [
                (
                    "test",
                    "make --no-builtin-rules -f Makefile test".to_owned()
                ),
                (
                    "build",
                    "make --no-builtin-rules -f Makefile build".to_owned()
                ),
                (
                    "lint",
                    "make --no-builtin-rules -f Makefile lint".to_owned()
                ),
                (
                    "typecheck",
                    "make --no-builtin-rules -f Makefile typecheck".to_owned()
                ),
                (
                    "format",
                    "make --no-builtin-rules -f Makefile format".to_owned()
                ),
            ]
        );
        let test = &found[0];
        assert!(test.shown.find("cargo build") < test.shown.find("cargo test --all"));
        assert!(test.shown.contains("@echo done"), "{}", test.shown);
        assert_eq!(test.steps[0].unset, MAKE_ENV);
        match parse_in(
            makefile,
            "GNUmakefile",
            "SHELL = ./x.sh\ntest:\n\techo\n",
            &[],
        ) {
            Parsed::Blocked(why) => {
                assert!(why.starts_with("`GNUmakefile` line 1: "), "{why}");
                assert!(why.contains("`SHELL`"), "{why}");
            }
            _ => panic!("an unreliable Makefile is refused"),
        }
    }

    #[test]
    fn package_json_scripts_run_as_steps_of_their_own() {
        let found = found_in(parse_in(
            package_json,
            "package.json",
            r#"{"name": "tiny", "version": "1.2.3", "scripts": {"test": "jest", "pretest": "lint-staged",
                "posttest": "echo done", "typecheck": "tsc --noEmit", "start": "node ."}}"#,
            &[],
        ));
        assert_eq!(
            scripts(&found),
            [
                (
                    "test",
                    "/bin/sh -c lint-staged && /bin/sh -c jest && /bin/sh -c echo done".to_owned()
                ),
                ("typecheck", "/bin/sh -c tsc --noEmit".to_owned())
            ]
        );
        let main = &found[0].steps[1];
        let env = |name: &str| {
            main.env
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(env("npm_lifecycle_event"), Some("test"));
        assert_eq!(env("npm_lifecycle_script"), Some("jest"));
        assert_eq!(env("npm_package_name"), Some("tiny"));
        assert_eq!(env("npm_package_version"), Some("1.2.3"));
        assert!(env("npm_package_json").unwrap().ends_with("/package.json"));
        assert!(env("PATH").unwrap().contains("/node_modules/.bin:"));
        assert_eq!(found[0].steps[0].name, "pretest");
        assert!(
            found_in(parse_in(
                package_json,
                "package.json",
                r#"{"name": "x"}"#,
                &[]
            ))
            .is_empty()
        );
        assert!(
            found_in(parse_in(
                package_json,
                "package.json",
                r#"{"scripts": {"test": 1}}"#,
                &[]
            ))
            .is_empty()
        );
        assert!(matches!(
            parse_in(package_json, "package.json", "{nope", &[]),
            Parsed::Problem(_)
        ));
    }

    #[test]
    fn cargo_manifests_define_every_script_and_show_their_configuration() {
        let found = found_in(parse_in(
            cargo_toml,
            "Cargo.toml",
            "[package]\nname = \"x\"\n",
            &[],
        ));
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
        assert!(found[0].bound.is_empty());
        let configured = found_in(parse_in(
            cargo_toml,
            "Cargo.toml",
            "[workspace]\nmembers = []\n",
            &[
                (
                    ".cargo/config.toml",
                    "[target.x86_64-unknown-linux-gnu]\nrunner = \"./x.sh\"\n[alias]\nt = \"test\"\n",
                ),
                ("rust-toolchain.toml", "[toolchain]\nchannel = \"stable\"\n"),
            ],
        ));
        assert_eq!(configured.len(), 5);
        let shown = &configured[0].shown;
        assert!(
            shown.contains("`alias`, `target.x86_64-unknown-linux-gnu.runner`"),
            "{shown}"
        );
        assert!(shown.contains("   2| runner = \"./x.sh\""), "{shown}");
        assert!(
            shown.contains("cargo reads `rust-toolchain.toml`"),
            "{shown}"
        );
        let bound: Vec<&str> = configured[0]
            .bound
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            bound,
            ["config:.cargo/config.toml", "config:rust-toolchain.toml"]
        );
        assert!(found_in(parse_in(cargo_toml, "Cargo.toml", "[dependencies]\n", &[])).is_empty());
        assert!(matches!(
            parse_in(cargo_toml, "Cargo.toml", "[package\n", &[]),
            Parsed::Problem(_)
        ));
    }

    #[test]
    fn pyproject_defines_what_it_configures_and_says_what_runs() {
        let found = found_in(parse_in(
            pyproject_toml,
            "pyproject.toml",
            "[tool.pytest.ini_options]\naddopts = \"-q\"\n[tool.ruff]\n[tool.black]\n[tool.mypy]\n",
            &[],
        ));
        assert_eq!(
            scripts(&found),
            [
                ("test", "python3 -m pytest".to_owned()),
                ("lint", "ruff check".to_owned()),
                ("format", "ruff format".to_owned()),
                ("typecheck", "mypy .".to_owned()),
            ]
        );
        assert!(
            found[0].shown.contains("project's own test code"),
            "{}",
            found[0].shown
        );
        assert!(found[0].shown.contains("conftest.py"));
        let black = parse_in(pyproject_toml, "pyproject.toml", "[tool.black]\n", &[]);
        assert_eq!(
            scripts(&found_of(black)),
            [("format", "black .".to_owned())]
        );
        assert!(
            found_of(parse_in(
                pyproject_toml,
                "pyproject.toml",
                "[project]\nname = \"x\"\n",
                &[]
            ))
            .is_empty()
        );
    }

    fn found_of(parsed: Parsed) -> Vec<Found> {
        found_in(parsed)
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
        assert!(
            hint.starts_with("this project defines: `test` (package.json: `/bin/sh -c jest`)"),
            "{hint}"
        );
        assert!(
            hint.contains("`pyproject.toml` could not be read"),
            "{hint}"
        );
        assert!(project.blocker.is_none());

        std::fs::write(dir.path().join("Makefile"), "include extra.mk\n").unwrap();
        let project = Project::read(&workspace);
        let blocker = project.blocker.clone().unwrap();
        assert!(
            blocker.contains("line 1") && blocker.contains("`include`"),
            "{blocker}"
        );

        let empty = tempfile::tempdir().unwrap();
        let project = Project::read(&Workspace::open(empty.path()).unwrap());
        assert!(project.find("test").is_none());
        assert!(project.defined().starts_with("no Makefile, package.json"));
    }
}
