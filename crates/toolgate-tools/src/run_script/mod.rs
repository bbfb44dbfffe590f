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
//!
//! The parts: this module is the tool (its schema, the plan and preview it approves, the steps
//! it runs); `project` reads the project files at the root in precedence order into
//! definitions; `make`, `npm`, `cargo` and `pyproject` each read one ecosystem's file.

mod cargo;
mod make;
mod npm;
mod project;
mod pyproject;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    Call, Classification, Digest, ExecContext, FieldError, RejectCode, Resource, ToolError,
    ToolOutput, TypedExecutor,
};
use toolgate_exec::resolve_program;
use toolgate_workspace::Workspace;

use crate::confine::{self, Confined, Confinement};
use crate::descriptor::{closed_schema, titled};
use crate::run_command::{command_entry, path_of, program_field_error, unresolved};
use crate::{Builtin, stopped};

use project::Project;

pub(crate) const NAME: &str = "run_script";

/// The scripts a project may define.
pub const SCRIPTS: [&str; 5] = ["test", "build", "lint", "typecheck", "format"];

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
    let properties = json!({
        "script": {
            "type": "string",
            "enum": SCRIPTS,
            "description": "Which of the project's scripts to run: `test`, `build`, `lint`, `typecheck` or `format`."
        },
        "network": crate::confine::network_schema(),
        "may_change": crate::later::may_change_schema()
    });
    let schema = closed_schema(properties, &["script"]);
    Builtin {
        descriptor: titled(NAME, "Run a project script", DESCRIPTION, schema),
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

/// `run_script`'s arguments, as its closed schema accepts them.
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
        let unconfinable = confine::check(
            &self.confinement,
            &self.workspace,
            &arguments.network,
            &arguments.may_change,
        );
        if !unconfinable.is_empty() {
            return unconfinable;
        }
        let script = arguments.script.as_str();
        let environment = self.confinement.environment();
        let project = Project::read(&self.workspace, environment);
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
        for step in &definition.steps {
            let program = step.argv.first().map_or("", String::as_str);
            if let Err(error) =
                resolve_program(program, path_of(environment), self.workspace.root())
            {
                return vec![program_field_error("/script", program, &error)];
            }
        }
        Vec::new()
    }

    fn plan(&self, arguments: ScriptArgs) -> (ScriptPlan, Classification) {
        let classification = match Project::read(&self.workspace, self.confinement.environment())
            .resolve(
                &self.workspace,
                self.confinement.environment(),
                &arguments.script,
            ) {
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
        call: &Call<'_, Self>,
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
        call: &Call<'_, Self>,
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
            let (definition, mut plans) = Project::read(
                &self.workspace,
                self.confinement.environment(),
            )
            .resolve(&self.workspace, self.confinement.environment(), script)?;
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
