//! A `[[hook]]` as a program: spoken to in `toolgate.hook/1` (one JSON object on its standard
//! input, exactly one on its standard output), started confined as commands are (no network,
//! the workspace read-only, nothing of toolgate's state), its whole process tree ended when it
//! answers or its time is up. Whatever is not a clean answer is the hook's failure, of a kind.

use std::path::PathBuf;
use std::sync::Arc;

use toolgate_confine::{Child, Confinement};
use toolgate_core::{
    Hook, HookAnswer, HookEvent, HookFailure, HookFailureKind, HookInput, HookMode,
    MAX_HOOK_ANSWER_BYTES, canonical_json,
};
use toolgate_exec::{CancelToken, CommandSpec, ExecError, Exit};

use crate::settings::hooks::{HookSpec, file_digest};

/// What a hook's environment holds besides `TMPDIR`: a fixed search path and locale, nothing
/// of the user's variables (tokens, toolgate's own settings).
fn hook_env() -> Vec<(String, String)> {
    vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ]
}

/// One configured hook, run as its program over one workspace.
#[derive(Debug)]
pub struct ProcessHook {
    spec: HookSpec,
    confinement: Arc<Confinement>,
    /// Where it runs: the workspace's root, which it may read and not write.
    cwd: PathBuf,
}

impl ProcessHook {
    pub fn new(spec: HookSpec, confinement: Arc<Confinement>, cwd: PathBuf) -> Self {
        ProcessHook {
            spec,
            confinement,
            cwd,
        }
    }

    /// The hook as configured: a file it names that is gone or changed since the
    /// configuration was loaded fails it.
    fn unchanged(&self) -> Result<(), HookFailure> {
        for (index, (path, loaded)) in self.spec.files.iter().enumerate() {
            let now = file_digest(path);
            if index == 0 && now.is_none() {
                return Err(HookFailure::new(
                    HookFailureKind::MissingProgram,
                    format!("`{}` is not there", path.display()),
                ));
            }
            if now != *loaded {
                return Err(HookFailure::new(
                    HookFailureKind::Changed,
                    format!(
                        "`{}` changed since the configuration was loaded",
                        path.display()
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Hook for ProcessHook {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn event(&self) -> HookEvent {
        self.spec.event
    }

    fn mode(&self) -> HookMode {
        self.spec.mode
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.spec.tools.as_ref().is_none_or(|t| t.contains(tool))
    }

    /// Its name, command and the digests of its files as loaded.
    fn identity(&self) -> String {
        let files: Vec<_> = self
            .spec
            .files
            .iter()
            .map(|(path, digest)| serde_json::json!([path, digest]))
            .collect();
        canonical_json(&serde_json::json!({
            "name": self.spec.name,
            "program": self.spec.program,
            "args": self.spec.args,
            "files": files,
        }))
    }

    fn call(&self, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
        self.unchanged()?;
        let unstarted = |detail: String| HookFailure::new(HookFailureKind::Unstarted, detail);
        let confined = self
            .confinement
            .start(Child::new("toolgate-hook-"))
            .map_err(|e| unstarted(format!("cannot confine it: {e}")))?;
        let spec = CommandSpec::new(&self.spec.program, &self.cwd)
            .args(self.spec.args.iter().cloned())
            .env(hook_env())
            .stdin(input.to_json())
            .timeout(self.spec.timeout)
            // Enough to tell an answer over the bound from one within it.
            .capture_bytes(2 * (MAX_HOOK_ANSWER_BYTES + 1));
        let spec = confined.apply_spec(spec);
        let cancel = CancelToken::new().map_err(|e| unstarted(e.to_string()))?;
        let ran = toolgate_exec::run(&spec, &cancel);
        confined.stop();
        let outcome = ran.map_err(|e| match e {
            ExecError::ProgramNotFound { .. } | ExecError::NotExecutable { .. } => {
                HookFailure::new(HookFailureKind::MissingProgram, e.to_string())
            }
            other => unstarted(other.to_string()),
        })?;
        let limit = self.spec.timeout.as_millis();
        if outcome.timed_out() || outcome.cancelled() {
            return Err(HookFailure::new(
                HookFailureKind::Timeout,
                format!("no answer within {limit} ms; its processes were killed"),
            ));
        }
        match outcome.exit {
            Exit::Code(0) => {}
            Exit::Code(code) => {
                return Err(HookFailure::new(
                    HookFailureKind::Exit,
                    format!("it exited with status {code}"),
                ));
            }
            Exit::Signal(signal) => {
                return Err(HookFailure::new(
                    HookFailureKind::Signal,
                    format!("signal {signal} ended it"),
                ));
            }
            Exit::Unknown => {
                return Err(HookFailure::new(
                    HookFailureKind::Signal,
                    "it did not die when killed",
                ));
            }
        }
        let total = outcome.stdout.total_bytes();
        if total > MAX_HOOK_ANSWER_BYTES as u64 {
            return Err(HookFailure::new(
                HookFailureKind::OutputTooLarge,
                format!("{total} bytes of answer; at most {MAX_HOOK_ANSWER_BYTES}"),
            ));
        }
        HookAnswer::parse(outcome.stdout.head(), self.spec.event)
    }
}
