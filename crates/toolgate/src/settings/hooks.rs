//! `[[hook]]`: the operator's hooks, each checked once, with the digest of every file its
//! command names taken as the configuration is loaded, so that a program swapped afterwards is
//! a failed hook, not a different one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use toolgate_core::{Digest, HookEvent, HookMode, sha256_digest};

use super::ConfigError;
use super::file::Located;

/// A hook's time to answer when the configuration says nothing.
pub const DEFAULT_HOOK_TIMEOUT_MS: u64 = 5000;

/// The longest time a hook may be given: it holds up the call it judges.
pub const MAX_HOOK_TIMEOUT_MS: u64 = 600_000;

/// One `[[hook]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookSection {
    pub name: Spanned<String>,
    pub event: HookEvent,
    /// The program and its arguments.
    pub command: Spanned<Vec<String>>,
    /// The tools it runs on (default: every tool).
    pub tools: Option<Spanned<Vec<String>>>,
    pub timeout_ms: Option<Spanned<u64>>,
    #[serde(default)]
    pub mode: HookMode,
}

/// One `[[hook]]`, checked.
#[derive(Debug, Clone)]
pub struct HookSpec {
    pub name: String,
    pub event: HookEvent,
    /// The program, absolute.
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The tools it runs on; `None`: every tool.
    pub tools: Option<BTreeSet<String>>,
    /// The line of its `tools`, for an error about a name there.
    pub tools_line: usize,
    pub timeout: Duration,
    pub mode: HookMode,
    /// The program and every other file the command names by an absolute path, each with the
    /// digest of its bytes when the configuration was loaded (`None`: not there).
    pub files: Vec<(PathBuf, Option<Digest>)>,
}

/// The digest of the file at `path` now; `None` when it cannot be read.
pub fn file_digest(path: &Path) -> Option<Digest> {
    std::fs::read(path).ok().map(|bytes| sha256_digest(&bytes))
}

/// Every `[[hook]]`, checked: a unique name, a command whose program is a path (absolute, or
/// relative to the configuration's directory `base`), a time within bounds, a tool list that
/// names some tool.
pub(super) fn hook_specs(
    origin: &Located,
    sections: &[Spanned<HookSection>],
    base: &Path,
) -> Result<Vec<HookSpec>, ConfigError> {
    let mut names = BTreeSet::new();
    let mut specs = Vec::new();
    for section in sections {
        let section = section.get_ref();
        let name = section.name.get_ref();
        if name.trim().is_empty() {
            return Err(origin.error_at(section.name.span(), "a hook needs a `name`"));
        }
        if !names.insert(name.clone()) {
            return Err(origin.error_at(
                section.name.span(),
                format!("hook `{name}` is configured twice"),
            ));
        }
        let Some((program, args)) = section.command.get_ref().split_first() else {
            return Err(origin.error_at(
                section.command.span(),
                format!("hook `{name}`: `command` names no program"),
            ));
        };
        let program = Path::new(program);
        let program = if program.is_absolute() {
            program.to_path_buf()
        } else if program.components().count() > 1 {
            base.join(program)
        } else {
            return Err(origin.error_at(
                section.command.span(),
                format!(
                    "hook `{name}`: give the program `{}` as a path (`/usr/bin/{}`), not a name \
                     looked up on PATH",
                    program.display(),
                    program.display()
                ),
            ));
        };
        let timeout_ms = match &section.timeout_ms {
            None => DEFAULT_HOOK_TIMEOUT_MS,
            Some(ms) if (1..=MAX_HOOK_TIMEOUT_MS).contains(ms.get_ref()) => *ms.get_ref(),
            Some(ms) => {
                return Err(origin.error_at(
                    ms.span(),
                    format!(
                        "hook `{name}`: `timeout_ms` must be between 1 and {MAX_HOOK_TIMEOUT_MS}"
                    ),
                ));
            }
        };
        let tools = match &section.tools {
            None => None,
            Some(tools) if tools.get_ref().is_empty() => {
                return Err(origin.error_at(
                    tools.span(),
                    format!(
                        "hook `{name}`: an empty `tools` runs it on no tool; leave it out to run \
                         it on every tool"
                    ),
                ));
            }
            Some(tools) => Some(tools.get_ref().iter().cloned().collect()),
        };
        let named = args
            .iter()
            .map(Path::new)
            .filter(|arg| arg.is_absolute() && arg.is_file())
            .map(Path::to_path_buf);
        let files = std::iter::once(program.clone())
            .chain(named)
            .map(|path| {
                let digest = file_digest(&path);
                (path, digest)
            })
            .collect();
        specs.push(HookSpec {
            name: name.clone(),
            event: section.event,
            program,
            args: args.to_vec(),
            tools,
            tools_line: section
                .tools
                .as_ref()
                .map_or(0, |tools| origin.line(tools.span())),
            timeout: Duration::from_millis(timeout_ms),
            mode: section.mode,
            files,
        });
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs(text: &str) -> Result<Vec<HookSpec>, String> {
        let path = Path::new("/etc/toolgate/toolgate.toml");
        let (origin, file) = Located::parse(path, text.to_owned()).map_err(|e| e.message)?;
        hook_specs(&origin, &file.hooks, Path::new("/etc/toolgate")).map_err(|e| e.message)
    }

    #[test]
    fn a_hook_is_checked_once_with_its_defaults() {
        let hooks = specs(
            r#"
            [[hook]]
            name = "guard"
            event = "pre_call"
            command = ["/bin/sh", "/etc/hostname", "hooks/guard.sh", "--strict"]
            "#,
        )
        .unwrap();
        let [hook] = hooks.as_slice() else {
            panic!("{hooks:?}")
        };
        assert_eq!(hook.timeout, Duration::from_millis(DEFAULT_HOOK_TIMEOUT_MS));
        assert_eq!(hook.mode, HookMode::Enforce);
        assert_eq!(hook.tools, None);
        assert_eq!(hook.program, Path::new("/bin/sh"));
        assert!(hook.files[0].1.is_some());
        let digested: Vec<&Path> = hook.files.iter().map(|(p, _)| p.as_path()).collect();
        assert_eq!(digested, [Path::new("/bin/sh"), Path::new("/etc/hostname")]);
        let relative = specs(
            "[[hook]]\nname = \"g\"\nevent = \"post_call\"\ncommand = [\"bin/guard\"]\nmode = \"observe\"",
        )
        .unwrap();
        assert_eq!(relative[0].program, Path::new("/etc/toolgate/bin/guard"));
        assert_eq!(
            relative[0].files[0].1, None,
            "not there: missing when called"
        );
    }

    #[test]
    fn a_mistaken_hook_is_refused_with_a_guess() {
        let hook = |extra: &str| {
            format!(
                "[[hook]]\nname = \"g\"\nevent = \"pre_call\"\ncommand = [\"/bin/true\"]\n{extra}"
            )
        };
        for (text, says) in [
            (hook("timeout = 5"), "did you mean `timeout_ms`?"),
            (hook("tool = [\"x\"]"), "did you mean `tools`?"),
            (hook("mode = \"observed\""), "did you mean `observe`?"),
            (hook("timeout_ms = 0"), "between 1 and"),
            (hook("tools = []"), "runs it on no tool"),
            (
                "[[hook]]\nname = \"g\"\nevent = \"pre\"\ncommand = [\"/bin/true\"]".to_owned(),
                "unknown value `pre`",
            ),
            (
                "[[hook]]\nname = \"g\"\nevent = \"pre_call\"\ncommand = []".to_owned(),
                "names no program",
            ),
            (
                "[[hook]]\nname = \"g\"\nevent = \"pre_call\"\ncommand = [\"guard\"]".to_owned(),
                "not a name looked up on PATH",
            ),
            (format!("{}\n{}", hook(""), hook("")), "configured twice"),
        ] {
            let error = specs(&text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }
}
