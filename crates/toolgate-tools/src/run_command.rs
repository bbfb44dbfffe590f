//! `run_command`: one program with its arguments, never through a shell, in the workspace.
//!
//! The program is resolved to an absolute, canonical path in stage 4, before policy and
//! approval see the call; that path is a resource, so it is bound into the approval digest and
//! shown in the preview with every argument, the working directory and the environment's
//! names. Stage 7 resolves it again and refuses to run anything else. A program that lives
//! inside the workspace (a script the model may have written) is also bound by the digest of
//! its contents, and so is every argument that names a regular file inside the workspace
//! (`["sh", "check.sh"]`, `["python3", "--file=job.py"]`), up to [`MAX_BOUND_INPUTS`] files of
//! at most [`MAX_BOUND_INPUT_BYTES`] each: the interpreter's input is what decides what runs.
//! The preview names the files bound and every argument that names something not bound, and
//! why; stage 7 digests them again just before the spawn and refuses with `script_changed` if
//! any differs, or if an argument that named nothing now names a file. The run itself is `toolgate-exec`'s: own process group, scrubbed
//! environment, bounded capture, the whole tree killed on timeout or cancellation.
//!
//! The pieces shared with `run_script` — a [`Plan`] (what will run), its classification, its
//! re-check and its execution — live here.

use std::fmt::Write as _;
use std::os::fd::AsRawFd as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;
use toolgate_core::registry::DEFAULT_PROFILE;
use toolgate_core::{
    ApprovalMode, Call, Classification, Descriptor, Digest, EffectClass, ExecContext, FieldError,
    Limits, RejectCode, Resource, ToolEntry, ToolError, ToolErrorCode, ToolOutput, TypedExecutor,
    sha256_digest,
};
use toolgate_exec::{
    CancelToken, CommandSpec, ExecError, Exit, RunOutcome, StopReason, resolve_program,
};
use toolgate_workspace::{PathError, PathKind, RelPath, Workspace};

use crate::confine::{self, Confined, Confinement};
use crate::git_keys::{self, Runs};
use crate::{Builtin, git_named, interpreter, makefile, path_argument, stopped};

pub(crate) const NAME: &str = "run_command";

/// Most items in `argv`, program included.
pub const MAX_ARGS: usize = 256;
/// Largest single `argv` item, in bytes.
pub const MAX_ARG_BYTES: usize = 16 * 1024;
/// Largest `argv` in all, in bytes.
pub const MAX_ARGV_BYTES: usize = 64 * 1024;
/// Largest `stdin`, in bytes.
pub const MAX_STDIN_BYTES: usize = 256 * 1024;
/// Bytes kept of each of stdout and stderr: the first half and the last half.
pub const CAPTURE_BYTES: usize = 64 * 1024;
/// The time a command gets unless it asks for less.
pub const DEFAULT_TIMEOUT_MS: u64 = 60_000;
/// The most time any command gets.
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// A program inside the workspace larger than this is not bound by a content digest.
const MAX_DIGESTED_PROGRAM_BYTES: u64 = 16 * 1024 * 1024;
/// Most files named by arguments that are bound by their digests.
pub const MAX_BOUND_INPUTS: usize = 16;
/// Largest file named by an argument that is bound by its digest.
pub const MAX_BOUND_INPUT_BYTES: u64 = 1024 * 1024;
/// Output bytes of each stream quoted in a timeout's message.
const SUMMARY_BYTES: usize = 2 * 1024;

const DESCRIPTION: &str = "Run one program with arguments in the workspace, without a shell. \
Use it to build, test, lint or inspect the project (`[\"cargo\", \"test\", \"--lib\"]`, \
`[\"git\", \"log\", \"-n\", \"5\"]`, `[\"python3\", \"-m\", \"pytest\", \"-x\"]`); for the \
project's standard test/build/lint commands `run_script` is simpler. `argv` is the program \
followed by its arguments, one string per argument, exactly as the program should receive \
them. There is NO shell: `|`, `;`, `&&`, `>`, `<`, `$(...)`, backticks, `*`, `~` and `$VAR` \
are passed to the program as plain text, not interpreted — run separate calls instead of a \
pipeline, and pass file names literally. `argv[0]` is looked up in PATH, or, if it contains a \
`/`, taken relative to `cwd` (`./scripts/check.sh`). `cwd` is a directory relative to the \
workspace root (default: the root). `stdin` is text for the program's standard input \
(default: none). `timeout_ms` can only shorten the limit (default 60 s, at most 10 min); on \
timeout the program and everything it started are killed and the call fails with `timeout`. \
Every call needs the user's approval, each time: they see the resolved program path, every \
argument, the directory and the names of the environment variables. Files inside the \
workspace named by an argument (`[\"sh\", \"check.sh\"]`, up to 16 files of 1 MiB) are bound \
to the approval: if one changes before the program starts, the call fails with \
`script_changed` and nothing runs. If they refuse, the call \
fails with `approval_denied`; do not repeat it unchanged. The program runs in a sandbox: it can \
write only the workspace and its own TMPDIR, cannot read the user's credentials or toolgate's \
files, and has no network at all unless `network` names the hosts it needs (then only those, \
through an HTTP(S) proxy; the person approving sees them). A refused file or connection is an \
ordinary `Permission denied` error of the program. The environment is reduced to \
harmless variables (PATH, HOME, locale, toolchain homes); tokens, keys and passwords are never \
passed. The result has `exit_code` (a non-zero exit, e.g. failing tests, is a normal result to \
read, not an error), `stdout` and `stderr` (each at most 64 KiB: the first and last 32 KiB, \
`stdout_elided`/`stderr_elided` counting the bytes left out in between) and `duration_ms`.";

pub(crate) fn builtin(workspace: Arc<Workspace>, confinement: Arc<Confinement>) -> Builtin {
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {
            "argv": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_ARGS,
                "items": {"type": "string", "maxLength": MAX_ARG_BYTES},
                "description": "The program and its arguments, one string each: [\"cargo\", \"test\", \"--lib\"]. No shell syntax is interpreted."
            },
            "cwd": {
                "type": "string",
                "minLength": 1,
                "maxLength": 4096,
                "description": "The directory to run in, relative to the workspace root (`crates/core`). Default: the root."
            },
            "timeout_ms": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_MS,
                "description": "A shorter time limit in milliseconds. Default 60000; it can never exceed the operator's maximum."
            },
            "stdin": {
                "type": "string",
                "maxLength": MAX_STDIN_BYTES,
                "description": "Text written to the program's standard input, which is then closed. Default: no input."
            },
            "network": crate::confine::network_schema(),
            "may_change": crate::later::may_change_schema()
        },
        "required": ["argv"],
        "additionalProperties": false
    });
    let mut descriptor = Descriptor::new(NAME, DESCRIPTION, schema);
    descriptor.title = Some("Run a command".to_owned());
    Builtin {
        descriptor,
        entry: command_entry(NAME, Some(DEFAULT_TIMEOUT_MS)),
        executor: Arc::new(RunCommand {
            workspace,
            confinement,
        }),
    }
}

/// An entry that runs processes: irreversible, approved call by call, never in `readonly`.
pub(crate) fn command_entry(name: &str, default_timeout_ms: Option<u64>) -> ToolEntry {
    let mut entry = ToolEntry::new(name, "process_exec");
    entry.effect = Some(EffectClass::Irreversible);
    entry.approval = ApprovalMode::EachCall;
    entry.profiles = [DEFAULT_PROFILE.to_owned()].into();
    entry.limits = Limits {
        timeout_ms: MAX_TIMEOUT_MS,
        default_timeout_ms,
        // Two captures of 64 KiB, escaped as JSON (a control character takes six bytes),
        // plus the envelope.
        max_output_bytes: 1024 * 1024,
        ..Limits::default()
    };
    entry
}

/// The executor for `run_command`.
#[derive(Debug)]
pub struct RunCommand {
    workspace: Arc<Workspace>,
    confinement: Arc<Confinement>,
}

/// `run_command`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandArgs {
    argv: Vec<String>,
    cwd: Option<String>,
    timeout_ms: Option<u64>,
    stdin: Option<String>,
    #[serde(default)]
    network: Vec<String>,
    #[serde(default)]
    may_change: Vec<String>,
}

/// What a `run_command` call will run, as stage 4 resolved it and the user approved it.
#[derive(Debug)]
pub struct CommandPlan {
    /// The resolved command, or why it no longer resolved at stage 4 (then nothing runs).
    resolved: Result<Plan, ToolError>,
    /// The program's digest, when it lives inside the workspace.
    program_image: Option<(String, Digest)>,
    /// The files the arguments name, with their digests.
    inputs: Inputs,
    /// The command as given, resolved again at stage 7 to find what changed.
    argv: Vec<String>,
    cwd: Option<String>,
    timeout_ms: Option<u64>,
    stdin: Option<String>,
    network: Vec<String>,
    may_change: Vec<String>,
}

impl TypedExecutor for RunCommand {
    type Args = CommandArgs;
    type Plan = CommandPlan;

    fn check(&self, arguments: &CommandArgs) -> Vec<FieldError> {
        let argv: Vec<&str> = arguments.argv.iter().map(String::as_str).collect();
        let mut errors = confine::check(
            &self.confinement,
            &self.workspace,
            &arguments.network,
            &arguments.may_change,
        );
        errors.extend(check_argv(&argv));
        let cwd_errors = path_argument::check(
            &self.workspace,
            arguments.cwd.as_deref(),
            "cwd",
            &path_argument::Looked::default(),
        );
        let cwd = if cwd_errors.is_empty() {
            match working_dir(&self.workspace, arguments.cwd.as_deref()) {
                Ok(dir) => Some(dir),
                Err(error) => {
                    errors.push(
                        FieldError::new("/cwd", RejectCode::ConstraintViolation, error.message)
                            .with_hint(Some(CWD_HINT.to_owned())),
                    );
                    None
                }
            }
        } else {
            errors.extend(cwd_errors);
            None
        };
        if let Some(stdin) = &arguments.stdin
            && stdin.len() > MAX_STDIN_BYTES
        {
            errors.push(FieldError::new(
                "/stdin",
                RejectCode::ConstraintViolation,
                format!(
                    "stdin is {} bytes; the limit is {MAX_STDIN_BYTES}",
                    stdin.len()
                ),
            ));
        }
        if errors.is_empty()
            && let (Some(argv0), Some((_, cwd_abs))) = (argv.first(), cwd)
        {
            let env = self.confinement.environment();
            if let Err(error) = resolve_program(argv0, path_of(env), &cwd_abs) {
                errors.push(program_field_error("/argv/0", argv0, &error));
            }
        }
        errors
    }

    fn plan(&self, arguments: CommandArgs) -> (CommandPlan, Classification) {
        let argv: Vec<&str> = arguments.argv.iter().map(String::as_str).collect();
        let heading = "run_command: no shell; each argument below reaches the program exactly as \
                       shown"
            .to_owned();
        let resolved = Plan::new(
            &self.workspace,
            self.confinement.environment(),
            &argv,
            arguments.cwd.as_deref(),
        );
        let (classification, program_image, inputs) = match &resolved {
            Ok(plan) => {
                let mut classification = plan.classification(
                    &self.workspace,
                    heading,
                    arguments.timeout_ms,
                    arguments.stdin.as_deref(),
                );
                let inputs = plan.inputs(&self.workspace);
                inputs.clone().bind(&mut classification, "arguments");
                if let Some(preview) = classification.preview.as_mut() {
                    preview.push_str(&interpreter::pins_preview());
                }
                confine::bind(
                    &self.confinement,
                    &arguments.network,
                    &arguments.may_change,
                    &mut classification,
                );
                let image = plan.program_preimage(&self.workspace);
                (classification, image, inputs)
            }
            // Stage 3 resolved it a moment ago; if it no longer resolves, execution will
            // refuse, since no program is planned.
            Err(error) => (unresolved(error), None, Inputs::default()),
        };
        let plan = CommandPlan {
            resolved,
            program_image,
            inputs,
            argv: arguments.argv,
            cwd: arguments.cwd,
            timeout_ms: arguments.timeout_ms,
            stdin: arguments.stdin,
            network: arguments.network,
            may_change: arguments.may_change,
        };
        (plan, classification)
    }

    fn execute(
        &self,
        plan: &CommandPlan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        if cx.should_stop() {
            return Err(stopped(cx));
        }
        let argv: Vec<&str> = plan.argv.iter().map(String::as_str).collect();
        // Resolved again, to refuse a command whose program or files changed since stage 4.
        let now = Plan::new(
            &self.workspace,
            self.confinement.environment(),
            &argv,
            plan.cwd.as_deref(),
        )?;
        now.verify(
            &self.workspace,
            plan.resolved.as_ref().ok(),
            plan.program_image.as_ref(),
        )?;
        now.inputs(&self.workspace).verify(&plan.inputs)?;
        let confined = confine::start(
            &self.confinement,
            self.workspace.root(),
            &plan.network,
            &plan.may_change,
        )?;
        let output = now.run(
            &self.workspace,
            call,
            cx,
            &confined,
            plan.timeout_ms,
            plan.stdin.as_deref(),
        );
        confined.attach(output)
    }
}

const CWD_HINT: &str = "`cwd` is an existing directory relative to the workspace root, e.g. `src`; omit it for the root";

/// Stage 3's checks of the `argv` array that the schema cannot make: bytes, not characters,
/// and NUL bytes, which no program can receive.
fn check_argv(argv: &[&str]) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if argv.len() > MAX_ARGS {
        errors.push(FieldError::new(
            "/argv",
            RejectCode::ConstraintViolation,
            format!("argv has {} items; the limit is {MAX_ARGS}", argv.len()),
        ));
    }
    let total: usize = argv.iter().map(|a| a.len()).sum();
    if total > MAX_ARGV_BYTES {
        errors.push(FieldError::new(
            "/argv",
            RejectCode::ConstraintViolation,
            format!("argv is {total} bytes in all; the limit is {MAX_ARGV_BYTES}"),
        ));
    }
    for (i, arg) in argv.iter().enumerate() {
        let pointer = format!("/argv/{i}");
        if arg.len() > MAX_ARG_BYTES {
            errors.push(FieldError::new(
                pointer.clone(),
                RejectCode::ConstraintViolation,
                format!(
                    "argument {i} is {} bytes; the limit is {MAX_ARG_BYTES}",
                    arg.len()
                ),
            ));
        }
        if arg.contains('\0') {
            errors.push(FieldError::new(
                pointer.clone(),
                RejectCode::ConstraintViolation,
                format!("argument {i} contains a NUL byte, which no program can receive"),
            ));
        }
    }
    if argv.first().is_some_and(|p| p.is_empty()) {
        errors.push(
            FieldError::new(
                "/argv/0",
                RejectCode::ConstraintViolation,
                "argv[0], the program, is empty",
            )
            .with_hint(Some(PROGRAM_HINT.to_owned())),
        );
    }
    errors
}

const PROGRAM_HINT: &str = "name a program installed on PATH (`cargo`, `python3`, `git`), or a \
path to an executable file relative to `cwd` (`./scripts/check.sh`); there is no shell, so \
shell built-ins such as `cd` or `export` cannot be run";

/// The field error for an `argv[0]` (or a script's program) that does not resolve.
pub(crate) fn program_field_error(pointer: &str, program: &str, error: &ExecError) -> FieldError {
    FieldError::new(
        pointer,
        RejectCode::ConstraintViolation,
        format!("cannot run `{program}`: {error}"),
    )
    .with_hint(Some(PROGRAM_HINT.to_owned()))
}

/// What a call will run: the resolved program and arguments, where, and with what
/// environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// The program's absolute, canonical path.
    pub(crate) program: PathBuf,
    /// `argv[0]` as given.
    pub(crate) program_name: String,
    /// The arguments after `argv[0]`.
    pub(crate) args: Vec<String>,
    /// The working directory, workspace-relative, with links followed.
    pub(crate) cwd: RelPath,
    pub(crate) cwd_abs: PathBuf,
    pub(crate) env: Vec<(String, String)>,
    /// Bytes kept of each of stdout and stderr.
    pub(crate) capture_bytes: usize,
}

impl Plan {
    /// Resolves `argv` in `cwd` (workspace-relative, default the root), to run with
    /// `environment` (the confinement's).
    pub(crate) fn new(
        workspace: &Workspace,
        environment: &[(String, String)],
        argv: &[&str],
        cwd: Option<&str>,
    ) -> Result<Plan, ToolError> {
        let (cwd, cwd_abs) = working_dir(workspace, cwd)?;
        let Some((program_name, args)) = argv.split_first() else {
            return Err(ToolError::new(
                ToolErrorCode::InvalidCommand,
                "argv is empty",
            ));
        };
        let mut env = environment.to_vec();
        let program = resolve_program(program_name, path_of(&env), &cwd_abs)
            .map_err(|e| exec_tool_error(&e))?;
        // Every process of the call, whatever it starts: a nested `npm run` finds npm's
        // program-naming keys pinned above any `.npmrc`, even one written during the call.
        interpreter::pin_package_managers(&mut env);
        Ok(Plan {
            program,
            program_name: (*program_name).to_owned(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            cwd,
            cwd_abs,
            env,
            capture_bytes: CAPTURE_BYTES,
        })
    }

    /// The program's absolute path as text.
    pub(crate) fn program_text(&self) -> String {
        self.program.display().to_string()
    }

    /// The argv that runs: the resolved program, then the arguments.
    pub(crate) fn argv_resolved(&self) -> Vec<String> {
        std::iter::once(self.program_text())
            .chain(self.args.iter().cloned())
            .collect()
    }

    /// The program as a resource: its workspace-relative path when it lives inside the
    /// workspace (evidence never holds the workspace's absolute root), else its absolute path.
    /// The two cannot be confused: only the second starts with `/`.
    pub(crate) fn program_resource(&self, workspace: &Workspace) -> String {
        self.program_in_workspace(workspace)
            .map_or_else(|| self.program_text(), |rel| rel.to_string())
    }

    /// The program's path relative to the workspace, if it lives inside.
    fn program_in_workspace(&self, workspace: &Workspace) -> Option<RelPath> {
        let inside = self.program.strip_prefix(workspace.root()).ok()?;
        let components: Option<Vec<&str>> = inside
            .components()
            .map(|c| c.as_os_str().to_str())
            .collect();
        RelPath::from_components(components?)
    }

    /// The digest of the program's contents, when it lives inside the workspace (and so may
    /// have been written by the model) and is small enough to hash.
    pub(crate) fn program_preimage(&self, workspace: &Workspace) -> Option<(String, Digest)> {
        let rel = self.program_in_workspace(workspace)?;
        let (bytes, total) = workspace.read_file(&rel, MAX_DIGESTED_PROGRAM_BYTES).ok()?;
        if total > MAX_DIGESTED_PROGRAM_BYTES {
            return None;
        }
        Some((format!("program:{rel}"), sha256_digest(&bytes)))
    }

    /// Stage 4: the resources (bound into the approval digest) and what the approver sees.
    pub(crate) fn classification(
        &self,
        workspace: &Workspace,
        heading: String,
        timeout_ms: Option<u64>,
        stdin: Option<&str>,
    ) -> Classification {
        let mut paths = vec![self.cwd.to_string()];
        if let Some(rel) = self.program_in_workspace(workspace) {
            paths.push(rel.to_string());
        }
        let mut preview = heading;
        let _ = write!(preview, "\nprogram: {}", self.program_text());
        if self.program_name != self.program_text() {
            let _ = write!(
                preview,
                "\nargv[0]: {:?} (the name the program is given)",
                self.program_name
            );
        }
        for (i, arg) in self.args.iter().enumerate() {
            // Debug quoting shows spaces, quotes, control and invisible characters for what
            // they are.
            let _ = write!(preview, "\nargv[{}]: {arg:?}", i + 1);
        }
        let _ = write!(preview, "\ncwd: {} (in the workspace)", self.cwd);
        let names: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        let _ = write!(
            preview,
            "\nenvironment (names only): {}",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
        match timeout_ms {
            Some(ms) => {
                let _ = write!(
                    preview,
                    "\ntimeout: {ms} ms, or the operator's maximum if lower"
                );
            }
            None => preview.push_str("\ntimeout: the tool's default"),
        }
        if let Some(text) = stdin {
            show_stdin(&mut preview, text);
        }
        Classification {
            effect: None,
            resources: vec![
                Resource::Program(self.program_resource(workspace)),
                Resource::Cwd(self.cwd.to_string()),
            ],
            paths,
            preimages: self.program_preimage(workspace).into_iter().collect(),
            preview: Some(preview),
            ..Classification::default()
        }
    }

    /// Stage 7: refuses to run unless the program, directory and (for a program inside the
    /// workspace) its contents are still what stage 4 planned (`planned`, `planned_image`)
    /// and the user approved.
    pub(crate) fn verify(
        &self,
        workspace: &Workspace,
        planned: Option<&Plan>,
        planned_image: Option<&(String, Digest)>,
    ) -> Result<(), ToolError> {
        let approved = planned.map(|plan| plan.program_resource(workspace));
        if approved.as_deref() != Some(self.program_resource(workspace).as_str()) {
            return Err(ToolError::new(
                ToolErrorCode::ProgramChanged,
                format!(
                    "`{}` now resolves to `{}`, not to {} as classified and approved; the call \
                     did not run",
                    self.program_name,
                    self.program_text(),
                    approved.map_or("nothing".to_owned(), |p| format!("`{p}`"))
                ),
            ));
        }
        if planned.map(|plan| &plan.cwd) != Some(&self.cwd) {
            return Err(ToolError::new(
                ToolErrorCode::CwdChanged,
                format!(
                    "the working directory now leads to `{}`, not to what was approved; the call \
                     did not run",
                    self.cwd
                ),
            ));
        }
        if planned_image != self.program_preimage(workspace).as_ref() {
            return Err(ToolError::new(
                ToolErrorCode::ProgramChanged,
                format!(
                    "`{}` changed since it was approved; the call did not run",
                    self.program_text()
                ),
            ));
        }
        Ok(())
    }

    /// Stage 7: runs the plan within the call's limits, for the executor `E` that planned it.
    pub(crate) fn run<E>(
        &self,
        workspace: &Workspace,
        call: &Call<'_, E>,
        cx: &ExecContext,
        confined: &Confined,
        timeout_ms: Option<u64>,
        stdin: Option<&str>,
    ) -> Result<ToolOutput, ToolError> {
        let timeout = effective_timeout(call.limits(), timeout_ms, cx);
        // The working directory is entered through a handle opened beneath the root, not by
        // its path: a directory swapped for a link that leads out since it was checked is
        // refused by the kernel here, or entered as it was when opened.
        let dir = workspace
            .open_dir(&self.cwd)
            .map_err(path_argument::tool_error)?;
        let cwd = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        let mut spec = CommandSpec::new(self.program.clone(), cwd)
            .arg0(self.program_name.clone())
            .args(self.args.iter().cloned())
            .env(self.env.clone())
            .timeout(timeout)
            .capture_bytes(self.capture_bytes);
        if let Some(text) = stdin {
            spec = spec.stdin(text.as_bytes());
        }
        let spec = confined.apply(spec);
        // The runner waits on the token's descriptor, so the caller's cancellation wakes it
        // the moment it is given. The context's deadline is the entry's maximum, never sooner
        // than the runner's own timeout; only a real cancellation should read as one.
        let token = Arc::new(CancelToken::new().map_err(|source| {
            exec_tool_error(&ExecError::Spawn {
                program: self.program_name.clone(),
                source,
            })
        })?);
        let _on_cancel = cx.cancel().on_cancel({
            let token = Arc::clone(&token);
            move || token.cancel()
        });
        let outcome = toolgate_exec::run(&spec, token.as_ref()).map_err(|e| exec_tool_error(&e))?;
        self.outcome(outcome, timeout)
    }

    fn outcome(&self, outcome: RunOutcome, timeout: Duration) -> Result<ToolOutput, ToolError> {
        let stopped = outcome.stopped.map(|reason| match reason {
            StopReason::Timeout => (
                ToolErrorCode::Timeout,
                format!("did not finish within {} ms", timeout.as_millis()),
            ),
            StopReason::Cancelled => (ToolErrorCode::Cancelled, "was cancelled".to_owned()),
        });
        let summary = |name: &str, capture: &toolgate_exec::Capture| {
            format!(
                "{name} ({} bytes) ended with: {:?}",
                capture.total_bytes(),
                capture.last_text(SUMMARY_BYTES)
            )
        };
        // Written only for a call that fails: not on the path of every call.
        let tails = || {
            format!(
                "{}; {}",
                summary("stdout", &outcome.stdout),
                summary("stderr", &outcome.stderr)
            )
        };
        let said = || {
            let how = match (&stopped, outcome.exit) {
                (Some((_, what)), _) => what.clone(),
                (None, Exit::Code(code)) => format!("exited with status {code}"),
                (None, Exit::Signal(signal)) => format!("was ended by signal {signal}"),
                (None, Exit::Unknown) => "did not die when killed".to_owned(),
            };
            (format!("`{}` {how}", self.program_text()), tails())
        };
        let unknowns = confine::ended(outcome.ended, said, outcome.unknowns)?;
        if let Some((code, what)) = stopped {
            let mut error = ToolError::new(
                code,
                format!(
                    "`{}` {what}; it and every process it started were killed. {}",
                    self.program_text(),
                    tails()
                ),
            );
            error.unknowns = unknowns;
            return Err(error);
        }
        let (exit_code, signal) = match outcome.exit {
            Exit::Code(code) => (Some(code), None),
            Exit::Signal(signal) => (None, Some(signal)),
            Exit::Unknown => (None, None),
        };
        let truncated = outcome.stdout.elided_bytes() > 0 || outcome.stderr.elided_bytes() > 0;
        let value = json!({
            "argv_resolved": self.argv_resolved(),
            "cwd": self.cwd.as_str(),
            "exit_code": exit_code,
            "signal": signal,
            "timed_out": false,
            "cancelled": false,
            "duration_ms": u64::try_from(outcome.duration.as_millis()).unwrap_or(u64::MAX),
            "stdout": outcome.stdout.text(),
            "stderr": outcome.stderr.text(),
            "stdout_bytes": outcome.stdout.total_bytes(),
            "stderr_bytes": outcome.stderr.total_bytes(),
            "stdout_elided": outcome.stdout.elided_bytes(),
            "stderr_elided": outcome.stderr.elided_bytes(),
        });
        let mut output = ToolOutput::new(value).truncated(truncated);
        output.unknowns = unknowns;
        Ok(output)
    }
}

/// The files a call's arguments name, as stage 4 binds them: interpreters (`sh check.sh`,
/// `python3 job.py`) run what those files say, so their contents are part of what is
/// approved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Inputs {
    /// `input:<workspace-relative path>` and the file's digest, in argument order.
    bound: Vec<(String, Digest)>,
    /// Why an argument that names something was not bound, for the preview.
    unbound: Vec<String>,
    /// What the arguments make the program read or run that the approval does not cover,
    /// argument by argument, for the preview ([`interpreter::analyse`]).
    notes: Vec<String>,
}

/// Paths to bind, each with the label the preview gives it.
type Labelled = Vec<(String, String)>;

/// The prefix of an input's preimage name.
const INPUT: &str = "input:";

impl Plan {
    /// Leaves one environment variable out of the run.
    pub(crate) fn remove_env(&mut self, name: &str) {
        self.env.retain(|(k, _)| k != name);
    }

    /// Sets (or adds) one environment variable of the run.
    pub(crate) fn set_env(&mut self, name: &str, value: String) {
        match self.env.iter_mut().find(|(k, _)| k == name) {
            Some(entry) => entry.1 = value,
            None => self.env.push((name.to_owned(), value)),
        }
    }

    /// The files inside the workspace that the arguments name, relative to `cwd`. An argument
    /// `--name=value` is looked at whole and as its value. Arguments that name nothing are
    /// silent: stage 7 looks again, so one that names a file by then refuses the call.
    /// An interpreter's arguments also name what they make it run without naming a file
    /// (`python3 -m job` → `job.py`, the words of `sh -c` text), looked at the same way.
    pub(crate) fn inputs(&self, workspace: &Workspace) -> Inputs {
        let mut named: Vec<(String, &str)> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, arg)| (format!("argv[{}]", i + 1), arg.as_str()))
            .collect();
        let resolved_name = self
            .program
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        let mut analysis =
            interpreter::analyse(&[self.program_name.as_str(), resolved_name], &self.args);
        if !analysis.package_scripts.is_empty() {
            self.show_package_scripts(workspace, &mut analysis);
        }
        if let Some(label) = analysis.git_remote.clone() {
            self.show_git_remotes(workspace, &label, &mut analysis);
        }
        named.extend(
            analysis
                .candidates
                .iter()
                .map(|(label, path)| (label.clone(), path.as_str())),
        );
        let make = self.make_reads(workspace);
        if let Some((candidates, _)) = &make {
            named.extend(
                candidates
                    .iter()
                    .map(|(label, path)| (label.clone(), path.as_str())),
            );
        }
        let mut inputs = self.inputs_of(workspace, &named);
        inputs.notes = analysis.notes;
        if let Some((_, notes)) = make {
            inputs.notes.extend(notes);
        }
        inputs
    }

    /// `npm test`, `npm run NAME`, `yarn NAME`: the text of the package.json scripts they run,
    /// from the package.json in `cwd` (bound as the package manager's project file), into the
    /// analysis's notes, and what those texts run in turn into its candidates.
    fn show_package_scripts(&self, workspace: &Workspace, analysis: &mut interpreter::Analysis) {
        let label = analysis
            .package_scripts
            .first()
            .map(|(label, _)| label.clone())
            .unwrap_or_default();
        let rel = RelPath::from_components(self.cwd.components().chain(["package.json"]));
        let read = rel
            .as_ref()
            .map(|rel| workspace.read_file(rel, MAX_BOUND_INPUT_BYTES + 1));
        let scripts = match read {
            Some(Ok((bytes, total))) if total <= MAX_BOUND_INPUT_BYTES => {
                serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|value| value.get("scripts").and_then(|s| s.as_object()).cloned())
            }
            _ => None,
        };
        match scripts {
            Some(scripts) => interpreter::show_package_scripts(analysis, &scripts, &[]),
            None => {
                analysis.package_scripts.clear();
                analysis.notes.push(format!(
                    "{label}: runs a script of a package.json that toolgate could not read in \
                     the working directory (none there, too large, or not JSON): the package \
                     manager looks in the directories above, whose scripts are not shown"
                ));
            }
        }
    }

    /// A git command that contacts a remote (`git fetch`, `git submodule update`): what the
    /// configuration of the repository in `cwd` makes git run then — the command of an
    /// `ext::` URL (its files bound like arguments), a remote helper, a `protocol.*.allow` —
    /// into the analysis's notes ([`git_named::remotes`]).
    fn show_git_remotes(
        &self,
        workspace: &Workspace,
        label: &str,
        analysis: &mut interpreter::Analysis,
    ) {
        let git_named::Remotes { remotes, read } =
            match git_named::remotes(workspace, self.cwd.as_str()) {
                Ok(found) => found,
                Err(error) => {
                    analysis.notes.push(format!(
                        "{label}: contacts remotes whose URLs toolgate could not read ({error}): \
                     what they make git run is not shown and not bound"
                    ));
                    return;
                }
            };
        // What was read decides what was found: bound, so that what git runs is what this
        // shows. A git directory's own files are not: binding one would make the call one
        // that reads git's internals, which policy forbids; commands cannot change them
        // unnoticed (they run later, and are guarded as such).
        let internal = |file: &str| file.split('/').any(|c| c.eq_ignore_ascii_case(".git"));
        for file in read.into_iter().filter(|file| !internal(file)) {
            let full = workspace.root().join(&file);
            analysis.candidates.push((
                format!("{label} reads git configuration"),
                full.to_string_lossy().into_owned(),
            ));
        }
        for remote in remotes {
            let git_named::Remote {
                file,
                key,
                value,
                runs,
                paths,
            } = remote;
            let what = match runs {
                Some(Runs::Command(words)) => format!(
                    "git runs the command {:?} of this `ext::` URL when it contacts it, where \
                     `protocol.ext.allow` (or `protocol.allow`) lets it; the files it names in \
                     the workspace are bound below, what it runs in turn is not",
                    git_keys::shell_text(&words)
                ),
                Some(Runs::Helper(helper)) => format!(
                    "git runs the remote helper `git-remote-{helper}` (from git's exec path or \
                     `PATH`, not bound) when it contacts it"
                ),
                None => "which transports git may use: with `always`, an `ext::` URL of a \
                         remote, a submodule or an `insteadOf` runs its command"
                    .to_owned(),
            };
            analysis.notes.push(format!(
                "{label}: `{file}` sets `{key}` = {value:?}: {what}"
            ));
            for path in paths {
                let full = workspace.root().join(&path);
                analysis.candidates.push((
                    format!("{label}, `{key}` in `{file}`"),
                    full.to_string_lossy().into_owned(),
                ));
            }
        }
    }

    /// For make, or a make that a wrapper or a shell's `-c` text starts
    /// ([`makefile::make_command`], [`makefile::started_make`]): the makefiles it will read and the files its
    /// built-in rules could remake them from, to be bound like arguments, and in words what
    /// the approval does not cover — toolgate's scan of the makefile, a remake source that is
    /// there. `None` for any other program.
    fn make_reads(&self, workspace: &Workspace) -> Option<(Labelled, Vec<String>)> {
        let resolved_name = self
            .program
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or_default();
        let names = [self.program_name.as_str(), resolved_name];
        let command = if makefile::is_make(&names) {
            makefile::make_command(&self.args)
        } else {
            makefile::started_make(&names, &self.args)?
        };
        let mut notes = command.notes;
        let mut candidates: Vec<(String, String)> = Vec::new();
        let mut read_one = false;
        for path in &command.makefiles {
            candidates.push(("the makefile make reads".to_owned(), path.clone()));
            let Named::File(rel, _) = self.input(workspace, path) else {
                continue;
            };
            if command.defaults && std::mem::replace(&mut read_one, true) {
                // make reads only the first of the names it looks for.
                continue;
            }
            let Ok((bytes, total)) = workspace.read_file(&rel, MAX_BOUND_INPUT_BYTES + 1) else {
                continue;
            };
            if total > MAX_BOUND_INPUT_BYTES {
                continue;
            }
            let note = match std::str::from_utf8(&bytes) {
                Ok(text) => match makefile::Makefile::parse(text, path) {
                    Ok(scanned) => {
                        // What a recipe's `$<` and `$^` name, wherever `vpath` finds it.
                        for file in scanned.prerequisites() {
                            let file = if command.dir.is_empty() || file.starts_with('/') {
                                file
                            } else {
                                format!("{}/{file}", command.dir.trim_end_matches('/'))
                            };
                            candidates.push(("a prerequisite of a rule in it".to_owned(), file));
                        }
                        if let Some(search) = scanned.search_path() {
                            notes.push(format!(
                                "`{rel}` sends make looking for prerequisites elsewhere \
                                 ({search}); the files it could find there for its rules are \
                                 bound"
                            ));
                        }
                        format!(
                            "make reads `{rel}` (bound below) and runs the rules it holds for \
                             the goals named; they are not shown here (`run_script` shows a \
                             Makefile's rules)"
                        )
                    }
                    Err(unreliable) => format!(
                        "make reads `{rel}`, where {unreliable}: the approval binds the file, \
                         not what make makes of it"
                    ),
                },
                Err(_) => format!("make reads `{rel}`, which is not UTF-8 and was not scanned"),
            };
            notes.push(note);
        }
        for path in &command.sources {
            candidates.push((
                "a file make's built-in rules remake a makefile from".to_owned(),
                path.clone(),
            ));
            if let Named::File(rel, _) = self.input(workspace, path) {
                notes.push(format!(
                    "`{rel}` is there: make's built-in rules remake the makefile from it when it \
                     is newer, and then run what it wrote, which nobody saw"
                ));
            }
        }
        Some((candidates, notes))
    }

    /// The files inside the workspace that `named` (each with the label the preview gives
    /// it) name, relative to `cwd`, within the same limits as arguments.
    pub(crate) fn inputs_of(&self, workspace: &Workspace, named: &[(String, &str)]) -> Inputs {
        let mut inputs = Inputs::default();
        let mut seen: Vec<RelPath> = Vec::new();
        for (name, arg) in named {
            let mut candidates = vec![*arg];
            if arg.starts_with('-')
                && let Some((_, value)) = arg.split_once('=')
            {
                candidates.push(value);
            }
            for candidate in candidates {
                let label = format!("{name} {candidate:?}");
                match self.input(workspace, candidate) {
                    Named::Nothing => {}
                    Named::Unbound(why) => inputs.unbound.push(format!("{label}: {why}")),
                    Named::File(rel, len) => {
                        if seen.contains(&rel) {
                            continue;
                        }
                        if len > MAX_BOUND_INPUT_BYTES {
                            inputs.unbound.push(format!(
                                "{label}: `{rel}` is {len} bytes, more than the \
                                 {MAX_BOUND_INPUT_BYTES} bound"
                            ));
                        } else if seen.len() >= MAX_BOUND_INPUTS {
                            inputs.unbound.push(format!(
                                "{label}: `{rel}` is past the first {MAX_BOUND_INPUTS} files, \
                                 which are all that is bound"
                            ));
                        } else {
                            match workspace.read_file(&rel, MAX_BOUND_INPUT_BYTES + 1) {
                                Ok((bytes, total)) if total <= MAX_BOUND_INPUT_BYTES => {
                                    inputs
                                        .bound
                                        .push((format!("{INPUT}{rel}"), sha256_digest(&bytes)));
                                    seen.push(rel);
                                }
                                Ok((_, total)) => inputs.unbound.push(format!(
                                    "{label}: `{rel}` is {total} bytes, more than the \
                                     {MAX_BOUND_INPUT_BYTES} bound"
                                )),
                                Err(error) => {
                                    inputs.unbound.push(format!("{label}: {error}"));
                                }
                            }
                        }
                    }
                }
            }
        }
        inputs
    }

    /// What one argument names, relative to the working directory.
    fn input(&self, workspace: &Workspace, arg: &str) -> Named {
        if arg.is_empty() || arg.contains('\0') {
            return Named::Nothing;
        }
        let exists_outside = |path: &std::path::Path| {
            if std::fs::symlink_metadata(path).is_ok() {
                Named::Unbound("outside the workspace, so not bound".to_owned())
            } else {
                Named::Nothing
            }
        };
        let path = std::path::Path::new(arg);
        // Lexically, from the working directory (or the root, for an absolute path inside
        // it): `..` may climb to the root, not past it.
        let (relative, mut parts): (String, Vec<&str>) = if path.is_absolute() {
            match path.strip_prefix(workspace.root()) {
                Ok(inside) => (inside.to_string_lossy().into_owned(), Vec::new()),
                Err(_) => return exists_outside(path),
            }
        } else {
            (arg.to_owned(), self.cwd.components().collect())
        };
        for part in relative.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return exists_outside(&self.cwd_abs.join(arg));
                    }
                }
                name => parts.push(name),
            }
        }
        let Some(rel) = RelPath::from_components(parts) else {
            return if std::fs::symlink_metadata(self.cwd_abs.join(arg)).is_ok() {
                Named::Unbound("a name toolgate cannot check, so not bound".to_owned())
            } else {
                Named::Nothing
            };
        };
        match workspace.resolve(&rel) {
            Ok(resolved) if resolved.kind == PathKind::File => {
                Named::File(resolved.target, resolved.len)
            }
            Ok(resolved) => Named::Unbound(format!(
                "`{}` is a {}, not a regular file, so not bound",
                resolved.target, resolved.kind
            )),
            Err(PathError::NotFound { .. }) => Named::Nothing,
            Err(PathError::Outside { .. }) => {
                Named::Unbound("leads outside the workspace, so not bound".to_owned())
            }
            Err(error) => Named::Unbound(format!("{error}, so not bound")),
        }
    }
}

/// What an argument names.
enum Named {
    Nothing,
    File(RelPath, u64),
    Unbound(String),
}

impl Inputs {
    /// Stage 4: the files become preimages (bound into the approval digest) and paths
    /// (policies see them), and the preview says what is and is not bound.
    pub(crate) fn bind(self, classification: &mut Classification, what: &str) {
        let preview = classification.preview.get_or_insert_with(String::new);
        if !self.notes.is_empty() {
            let _ = write!(
                preview,
                "\nwhat {what} make the program read or run (the approval covers only the \
                 files bound below):"
            );
            for note in &self.notes {
                let _ = write!(preview, "\n    {note}");
            }
        }
        if !self.bound.is_empty() {
            let _ = write!(
                preview,
                "\nfiles named by {what}, bound to this approval (if one changes before the \
                 program starts, the call is refused):"
            );
            for (name, digest) in &self.bound {
                let path = name.strip_prefix(INPUT).unwrap_or(name);
                let _ = write!(preview, "\n    {path} ({digest})");
            }
        }
        if !self.unbound.is_empty() {
            let _ = write!(preview, "\n{what} naming something that is not bound:");
            for why in &self.unbound {
                let _ = write!(preview, "\n    {why}");
            }
        }
        for (name, _) in &self.bound {
            if let Some(path) = name.strip_prefix(INPUT)
                && !classification.paths.iter().any(|p| p == path)
            {
                classification.paths.push(path.to_owned());
            }
        }
        classification.preimages.extend(self.bound);
    }

    /// Stage 7: refuses unless the arguments name the same files, with the same contents, as
    /// stage 4 found (`planned`) and the user approved.
    pub(crate) fn verify(&self, planned: &Inputs) -> Result<(), ToolError> {
        let approved: Vec<&(String, Digest)> = planned.bound.iter().collect();
        let now: Vec<&(String, Digest)> = self.bound.iter().collect();
        if approved == now {
            return Ok(());
        }
        let changed = now
            .iter()
            .find(|entry| !approved.contains(entry))
            .or_else(|| approved.iter().find(|entry| !now.contains(entry)))
            .map_or("a file an argument names", |(name, _)| {
                name.strip_prefix(INPUT).unwrap_or(name)
            });
        Err(ToolError::new(
            ToolErrorCode::ScriptChanged,
            format!(
                "`{changed}`, which the command names, changed since the call was approved; \
                 the call did not run"
            ),
        ))
    }
}

/// Writes `stdin` into a preview whole: the program may run it (`["sh"]` reads its script
/// there), so a person must read every byte of it wherever they decide, not a byte count.
/// Each line follows `  | `, so no line of it can pass for a line of the preview; the
/// characters are left as they are for each channel to mark (the console highlights them,
/// the terminal prompt and the elicitation form print `<U+XXXX>`).
fn show_stdin(preview: &mut String, stdin: &str) {
    if stdin.is_empty() {
        preview.push_str("\nstdin: empty");
        return;
    }
    let lines = stdin.split_terminator('\n').count();
    let _ = write!(
        preview,
        "\nstdin, {} bytes in {lines} line{}, all of it given to the program (each line after \
         `| `):",
        stdin.len(),
        if lines == 1 { "" } else { "s" }
    );
    for line in stdin.split_terminator('\n') {
        let _ = write!(preview, "\n  | {line}");
    }
    if !stdin.ends_with('\n') {
        preview.push_str("\n  (stdin ends without a newline)");
    }
}

/// The classification of a call whose program or directory no longer resolves: it names no
/// program, so stage 7 refuses it.
pub(crate) fn unresolved(error: &ToolError) -> Classification {
    Classification {
        preview: Some(format!(
            "this command cannot be resolved and will not run: {}",
            error.message
        )),
        ..Classification::default()
    }
}

/// The time a call gets: what it asked for or the entry's default, never more than the entry's
/// maximum nor than the context has left.
fn effective_timeout(limits: &Limits, requested_ms: Option<u64>, cx: &ExecContext) -> Duration {
    let ms = requested_ms
        .or(limits.default_timeout_ms)
        .unwrap_or(limits.timeout_ms)
        .min(limits.timeout_ms);
    Duration::from_millis(ms).min(cx.deadline().saturating_duration_since(Instant::now()))
}

/// Why a working directory is refused.
#[derive(Debug)]
struct CwdError {
    code: ToolErrorCode,
    message: String,
}

impl From<CwdError> for ToolError {
    fn from(error: CwdError) -> ToolError {
        ToolError::new(error.code, error.message)
    }
}

/// The working directory `raw` names (default the root): workspace-relative with links
/// followed, and its absolute path.
fn working_dir(workspace: &Workspace, raw: Option<&str>) -> Result<(RelPath, PathBuf), CwdError> {
    let as_error = |error: PathError| {
        let tool = path_argument::tool_error(error);
        CwdError {
            code: match tool.code {
                ToolErrorCode::OutsideWorkspace => ToolErrorCode::OutsideWorkspace,
                ToolErrorCode::NotFound => ToolErrorCode::NotFound,
                _ => ToolErrorCode::InvalidCwd,
            },
            message: tool.message,
        }
    };
    let rel = match raw {
        Some(raw) => workspace.check_path(raw).map_err(as_error)?,
        None => RelPath::root(),
    };
    let resolved = workspace.resolve(&rel).map_err(as_error)?;
    if resolved.kind != PathKind::Dir {
        return Err(CwdError {
            code: ToolErrorCode::NotADirectory,
            message: format!("cwd `{rel}` is a {}, not a directory", resolved.kind),
        });
    }
    let abs = workspace.ambient_path(&resolved.target);
    Ok((resolved.target, abs))
}

/// The `PATH` of an environment.
pub(crate) fn path_of(env: &[(String, String)]) -> Option<&str> {
    env.iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
}

/// A runner's refusal as the tool's error.
fn exec_tool_error(error: &ExecError) -> ToolError {
    // The runner names its codes in its own words, spelled as these.
    let code = match error {
        ExecError::ProgramNotFound { .. } => ToolErrorCode::ProgramNotFound,
        ExecError::NotExecutable { .. } => ToolErrorCode::NotExecutable,
        ExecError::NotAbsolute { .. } => ToolErrorCode::InvalidCommand,
        ExecError::Spawn { .. } => ToolErrorCode::SpawnFailed,
        ExecError::Subreaper { .. } => ToolErrorCode::SubreaperUnavailable,
        ExecError::Io { .. } => ToolErrorCode::IoError,
    };
    ToolError::new(code, error.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;
    use std::path::Path;
    use toolgate_core::Cancel;
    use toolgate_sandbox::SandboxError;

    #[test]
    fn stdin_is_shown_whole_line_by_line() {
        let mut preview = String::from("program: /bin/sh");
        show_stdin(
            &mut preview,
            "echo one\n\nstatus: approved\r\necho \u{202E}two",
        );
        assert_eq!(
            preview,
            "program: /bin/sh\nstdin, 39 bytes in 4 lines, all of it given to the program (each \
             line after `| `):\n  | echo one\n  | \n  | status: approved\r\n  | echo \u{202E}two\n  \
             (stdin ends without a newline)"
        );
        let mut preview = String::new();
        show_stdin(&mut preview, "x\n");
        assert_eq!(
            preview,
            "\nstdin, 2 bytes in 1 line, all of it given to the program (each line after `| \
             `):\n  | x"
        );
        let mut preview = String::new();
        show_stdin(&mut preview, "");
        assert_eq!(preview, "\nstdin: empty");
    }

    /// The runner's own spelling of each code and the tool error's are the same word.
    #[test]
    fn runner_errors_keep_their_codes() {
        let io = || io::Error::other("x");
        let errors = [
            ExecError::ProgramNotFound {
                program: "p".into(),
                reason: "r".into(),
            },
            ExecError::NotExecutable { path: "p".into() },
            ExecError::NotAbsolute {
                what: "program",
                path: "p".into(),
            },
            ExecError::Spawn {
                program: "p".into(),
                source: io(),
            },
            ExecError::Subreaper { source: io() },
            ExecError::Io {
                program: "p".into(),
                what: "reading",
                source: io(),
            },
        ];
        for error in &errors {
            assert_eq!(exec_tool_error(error).code, error.code(), "{error}");
        }
        let sandbox = [
            SandboxError::Unavailable {
                missing: "m".into(),
            },
            SandboxError::Path {
                path: "p".into(),
                source: io(),
            },
        ];
        for error in &sandbox {
            assert_eq!(
                crate::confine::sandbox_error_code(error),
                error.code(),
                "{error}"
            );
        }
    }

    #[test]
    fn argv_checks_count_bytes_and_nul() {
        assert!(check_argv(&["echo", "hi"]).is_empty());
        let errors = check_argv(&["", "a\0b"]);
        let pointers: Vec<&str> = errors.iter().map(|e| e.pointer.as_str()).collect();
        assert_eq!(pointers, ["/argv/1", "/argv/0"]);
        let long = "é".repeat(MAX_ARG_BYTES / 2 + 1);
        let errors = check_argv(&["echo", &long]);
        assert_eq!(errors.len(), 1);
        assert!(errors[0].message.contains("bytes"), "{}", errors[0].message);
        let many = vec!["x"; MAX_ARGS + 1];
        assert_eq!(check_argv(&many)[0].pointer, "/argv");
        let big = "y".repeat(MAX_ARG_BYTES);
        let total: Vec<&str> = std::iter::repeat_n(big.as_str(), 5).collect();
        assert!(check_argv(&total)[0].message.contains("in all"));
    }

    #[test]
    fn the_timeout_can_only_shrink() {
        let limits = Limits {
            timeout_ms: 10_000,
            default_timeout_ms: Some(3_000),
            ..Limits::default()
        };
        let cx = ExecContext::new(Duration::from_secs(60), Cancel::new());
        let ms = |requested| effective_timeout(&limits, requested, &cx).as_millis();
        assert_eq!(ms(None), 3_000);
        assert_eq!(ms(Some(500)), 500);
        assert_eq!(ms(Some(50_000)), 10_000);
        let no_default = Limits {
            default_timeout_ms: None,
            ..limits
        };
        assert_eq!(
            effective_timeout(&no_default, None, &cx).as_millis(),
            10_000
        );
        let short = ExecContext::new(Duration::from_millis(100), Cancel::new());
        assert!(effective_timeout(&limits, None, &short) <= Duration::from_millis(100));
    }

    #[test]
    fn working_directories_stay_inside_and_are_directories() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("file"), "x").unwrap();
        std::os::unix::fs::symlink("src", dir.path().join("alias")).unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let (rel, abs) = working_dir(&workspace, Some("alias")).unwrap();
        assert_eq!(rel.as_str(), "src");
        assert_eq!(
            abs.strip_prefix(workspace.root()).unwrap(),
            Path::new("src")
        );
        assert_eq!(working_dir(&workspace, None).unwrap().0.as_str(), ".");
        for (raw, code) in [
            ("file", "not_a_directory"),
            ("missing", "not_found"),
            ("..", "outside_workspace"),
            ("/etc", "outside_workspace"),
        ] {
            assert_eq!(
                working_dir(&workspace, Some(raw)).unwrap_err().code,
                code,
                "{raw}"
            );
        }
    }
}
