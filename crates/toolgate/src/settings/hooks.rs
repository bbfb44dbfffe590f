//! `[[hook]]`: the operator's hooks, each checked once, with the digest of every file its
//! command names taken as the configuration is loaded, so that a program swapped afterwards is
//! a failed hook, not a different one.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
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
    /// The program first, then the interpreter its `#!` line names, then every argument that
    /// names a file, each with the digest of its bytes when the configuration was loaded
    /// (`None`: not there). What runs is a sealed copy of exactly these bytes.
    pub files: Vec<HookFile>,
    /// The configuration file that configures it, as shown, and the line of its `command`:
    /// where an error found once the workspace is known points.
    pub at: (String, usize),
    /// For a hook of a trusted project's configuration, the files inside the workspace (by
    /// real path) whose bytes the person's trust binds, with their digests as trusted: a byte
    /// changed there makes the trust pending, and the hook is not loaded. Empty for the user's
    /// hooks.
    pub trusted: BTreeMap<PathBuf, String>,
}

/// A file a hook's command runs or reads, and its digest at load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFile {
    pub path: PathBuf,
    pub digest: Option<Digest>,
    pub role: FileRole,
}

/// What a file is to the hook's command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileRole {
    /// The program the command names.
    Program,
    /// The interpreter the program's `#!` line names, with the one argument the line gives it.
    Interpreter { arg: Option<String> },
    /// The argument of this index (after the program) names the file.
    Argument(usize),
}

impl HookFile {
    /// The file at `path` and its digest; `None` where it is not a regular file that can be
    /// read (not there, a FIFO): a call then fails. One too large to read is refused now.
    fn read(path: PathBuf, role: FileRole) -> Result<(HookFile, Option<Vec<u8>>), String> {
        let bytes = match crate::hook::read_regular(&path) {
            Ok((_, bytes)) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                return Err(format!("`{}`: {e}", path.display()));
            }
            Err(_) => None,
        };
        let digest = bytes.as_deref().map(sha256_digest);
        Ok((HookFile { path, digest, role }, bytes))
    }
}

impl HookSpec {
    /// The spec for a hook run in `cwd`: an argument naming a file relative to it (`hooks/guard.py`
    /// in the workspace) is digested as an absolute one is, now, as the hook is set up for the
    /// workspace.
    pub fn in_directory(mut self, cwd: &Path) -> Result<HookSpec, String> {
        for (index, arg) in self.args.iter().enumerate() {
            let path = Path::new(arg);
            if path.is_absolute() {
                continue;
            }
            let path = cwd.join(path);
            if path.is_file() || names_nothing(arg, &path) {
                let (file, _) = HookFile::read(path, FileRole::Argument(index))?;
                self.files.push(file);
            }
        }
        Ok(self)
    }

    /// Refuses a hook that runs or reads a file inside the workspace at `root` (canonical),
    /// outside its `.toolgate/` (see [`refuse_in_workspace`]); the files a trusted project's
    /// configuration runs are bound by the trust.
    pub fn outside_workspace(&self, root: &Path) -> Result<(), String> {
        for file in &self.files {
            // A word that names no file yet (`allow`), or the code after `-c` (`sh -c 'jq …
            // >/dev/null'`), is not refused for being a name in the workspace: a call fails if
            // it ever comes to name one.
            let word = match file.role {
                FileRole::Argument(index) => self
                    .args
                    .get(index)
                    .is_some_and(|a| !a.contains('/') || is_code(&self.args, index)),
                FileRole::Program | FileRole::Interpreter { .. } => false,
            };
            if file.digest.is_none() && word {
                continue;
            }
            let digest = file.digest.as_ref().map(ToString::to_string);
            refuse_in_workspace(root, &file.path, "this hook", |real| {
                self.trusted
                    .get(real)
                    .is_some_and(|trusted| digest.as_ref() == Some(trusted))
            })?;
        }
        let line = self.files.iter().find_map(|file| match &file.role {
            FileRole::Interpreter { arg } => Some((file.path.to_string_lossy(), arg.as_deref())),
            FileRole::Program | FileRole::Argument(_) => None,
        });
        let line = line.as_ref().map(|(path, arg)| (path.as_ref(), *arg));
        let program = self.program.to_string_lossy();
        let path = crate::hook::HOOK_PATH;
        for file in super::upstream_files::env_runs(&program, &self.args, line, root, path) {
            refuse_in_workspace(root, &file, "this hook", |real| {
                holds_trusted(&self.trusted, real)
            })?;
        }
        Ok(())
    }
}

/// Refuses the file at `path` (absolute, as named) that toolgate runs, or has a program it
/// starts read, as `runs` (`this hook`) when next started, where that file really is or a
/// place its path passes through lies inside the workspace at `root` (canonical) outside its
/// `.toolgate/`: an approved command or write could change it there. A link in the workspace
/// pointing out can be pointed elsewhere; a link outside pointing in leads to a file of the
/// workspace. `.toolgate/` is kept from commands and writes as a file that runs later.
/// `bound` is asked, with the real path, whether a trusted project's record binds the file
/// with the bytes it holds: then it runs as trusted.
pub(crate) fn refuse_in_workspace(
    root: &Path,
    path: &Path,
    runs: &str,
    bound: impl FnOnce(&Path) -> bool,
) -> Result<(), String> {
    let (real, passed) = resolve(path);
    let Some(place) = [&real]
        .into_iter()
        .chain(&passed)
        .find(|place| *place != root && exposed(root, place))
    else {
        return Ok(());
    };
    if bound(&real) {
        return Ok(());
    }
    let what = if *place == path {
        format!("`{}` is inside", place.display())
    } else {
        format!(
            "`{}` leads to `{}`, inside",
            path.display(),
            place.display()
        )
    };
    Err(format!(
        "{what} the workspace `{}`: a command or write approved there could change it, and \
         toolgate would run the new bytes as {runs} when next started; move it outside the \
         workspace or into `{}/`",
        root.display(),
        root.join(super::project::PROJECT_DIR).display()
    ))
}

/// Whether `place` is the workspace at `root` or inside it, outside its `.toolgate/`.
fn exposed(root: &Path, place: &Path) -> bool {
    place.starts_with(root) && !place.starts_with(root.join(super::project::PROJECT_DIR))
}

/// Whether the directory `dir` (absolute) really is the workspace at `root` or inside it
/// outside its `.toolgate/`, or its path passes through such a place inside.
pub(crate) fn dir_in_workspace(root: &Path, dir: &Path) -> bool {
    let (real, passed) = resolve(dir);
    exposed(root, &real)
        || passed
            .iter()
            .any(|place| place != root && exposed(root, place))
}

/// Where `path` (absolute) really is, following every link as the kernel would (as far as it
/// exists, then as written), and every place it passes through on the way: each directory and
/// link stepped into, with the link's own location.
fn resolve(path: &Path) -> (PathBuf, Vec<PathBuf>) {
    // More links than the kernel follows: it would not open the file either.
    const MAX_LINKS: usize = 40;
    let mut pending: Vec<OsString> = Vec::new();
    let push = |pending: &mut Vec<OsString>, path: &Path| {
        for part in path.components().rev() {
            match part {
                Component::Normal(name) => pending.push(name.to_owned()),
                Component::ParentDir => pending.push("..".into()),
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
    };
    push(&mut pending, path);
    let mut real = PathBuf::from("/");
    let mut passed = Vec::new();
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            real.pop();
            continue;
        }
        let next = real.join(&name);
        passed.push(next.clone());
        let target = std::fs::symlink_metadata(&next)
            .ok()
            .filter(|meta| meta.file_type().is_symlink() && links < MAX_LINKS)
            .and_then(|_| std::fs::read_link(&next).ok());
        match target {
            Some(target) => {
                links += 1;
                if target.is_absolute() {
                    real = PathBuf::from("/");
                }
                push(&mut pending, &target);
            }
            None => real = next,
        }
    }
    (real, passed)
}

/// The interpreter and its one argument that the `#!` line at the start of `bytes` names, as
/// the kernel reads it: the line's first word, and the rest, trimmed, as one argument.
pub fn shebang(bytes: &[u8]) -> Option<(String, Option<String>)> {
    let line = bytes.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let line = line.trim_matches(|c| c == ' ' || c == '\t');
    let (interpreter, arg) = match line.split_once([' ', '\t']) {
        Some((interpreter, arg)) => (interpreter, Some(arg.trim_matches([' ', '\t']))),
        None => (line, None),
    };
    let arg = arg.filter(|arg| !arg.is_empty()).map(str::to_owned);
    Some((interpreter.to_owned(), arg))
}

/// The files a command runs or reads, each digested now: `program`, the interpreter its `#!`
/// line names (which must be an absolute path), and each argument that is the absolute path of
/// a file.
pub(crate) fn command_files(program: &Path, args: &[String]) -> Result<Vec<HookFile>, String> {
    let (program_file, bytes) = HookFile::read(program.to_path_buf(), FileRole::Program)?;
    let mut files = vec![program_file];
    if let Some((interpreter, arg)) = bytes.as_deref().and_then(shebang) {
        if !Path::new(&interpreter).is_absolute() {
            return Err(format!(
                "the interpreter `{interpreter}` that the first line of `{}` names is not an \
                 absolute path",
                program.display()
            ));
        }
        let role = FileRole::Interpreter { arg };
        files.push(HookFile::read(PathBuf::from(interpreter), role)?.0);
    }
    for (index, arg) in args.iter().enumerate() {
        let path = Path::new(arg);
        if path.is_absolute() && (path.is_file() || names_nothing(arg, path)) {
            files.push(HookFile::read(path.to_path_buf(), FileRole::Argument(index))?.0);
        }
    }
    Ok(files)
}

/// Whether the argument `arg`, at `path`, names nothing now but could come to name a file
/// the hook would then open by that name: not an option, and nothing there (a link leading
/// nowhere included). It is kept with no digest, so that a call fails once it appears.
pub(super) fn names_nothing(arg: &str, path: &Path) -> bool {
    !arg.starts_with('-')
        && std::fs::metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

/// Whether the file at `real` is one of `trusted` (a trusted project's files by real path)
/// and holds the bytes trusted now.
pub(super) fn holds_trusted(trusted: &BTreeMap<PathBuf, String>, real: &Path) -> bool {
    let now = crate::hook::read_regular(real)
        .ok()
        .map(|(_, bytes)| sha256_digest(&bytes).to_string());
    trusted
        .get(real)
        .is_some_and(|trusted| now.as_ref() == Some(trusted))
}

/// Whether the argument at `index` of `args` follows `-c` or `-e`: most often code
/// (`sh -c 'touch /x'`), not a name, so it counts as a file only when it names one.
pub(super) fn is_code(args: &[String], index: usize) -> bool {
    index
        .checked_sub(1)
        .and_then(|before| args.get(before))
        .is_some_and(|before| before == "-c" || before == "-e")
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
        let files = command_files(&program, args).map_err(|detail| {
            origin.error_at(section.command.span(), format!("hook `{name}`: {detail}"))
        })?;
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
            at: (origin.display_path(), origin.line(section.command.span())),
            trusted: BTreeMap::new(),
        });
    }
    Ok(specs)
}

#[cfg(test)]
impl HookSpec {
    /// The enforcing `pre_call` hook `guard` on every tool, running `command` (the program
    /// first), its files digested now as at load.
    pub(crate) fn of_command(command: &[String]) -> HookSpec {
        let program = PathBuf::from(&command[0]);
        let args = command[1..].to_vec();
        HookSpec {
            name: "guard".to_owned(),
            event: HookEvent::PreCall,
            files: command_files(&program, &args).unwrap(),
            program,
            args,
            tools: None,
            tools_line: 0,
            timeout: Duration::from_secs(1),
            mode: HookMode::Enforce,
            at: (String::new(), 0),
            trusted: BTreeMap::new(),
        }
    }
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
        assert!(hook.files[0].digest.is_some());
        let digested: Vec<&Path> = hook.files.iter().map(|f| f.path.as_path()).collect();
        assert_eq!(digested, [Path::new("/bin/sh"), Path::new("/etc/hostname")]);
        assert_eq!(hook.files[1].role, FileRole::Argument(0));
        let relative = specs(
            "[[hook]]\nname = \"g\"\nevent = \"post_call\"\ncommand = [\"bin/guard\"]\nmode = \"observe\"",
        )
        .unwrap();
        assert_eq!(relative[0].program, Path::new("/etc/toolgate/bin/guard"));
        assert_eq!(
            relative[0].files[0].digest, None,
            "not there: missing when called"
        );
    }

    #[test]
    fn a_scripts_interpreter_and_relative_file_arguments_are_digested() {
        assert_eq!(
            shebang(b"#! /usr/bin/env  python3 -u \nprint()"),
            Some(("/usr/bin/env".to_owned(), Some("python3 -u".to_owned())))
        );
        assert_eq!(shebang(b"#!/bin/sh"), Some(("/bin/sh".to_owned(), None)));
        assert_eq!(shebang(b"\x7fELF"), None);
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("guard");
        std::fs::write(&script, "#!/bin/sh -e\necho\n").unwrap();
        std::fs::write(dir.path().join("rules.txt"), "rules\n").unwrap();
        let args = ["rules.txt".to_owned(), "--strict".to_owned()];
        let files = command_files(&script, &args).unwrap();
        let roles: Vec<_> = files
            .iter()
            .map(|f| (f.path.clone(), f.role.clone()))
            .collect();
        assert_eq!(
            roles,
            [
                (script.clone(), FileRole::Program),
                (
                    PathBuf::from("/bin/sh"),
                    FileRole::Interpreter {
                        arg: Some("-e".to_owned())
                    }
                ),
            ]
        );
        let command: Vec<String> = std::iter::once(script.display().to_string())
            .chain(args.iter().cloned())
            .collect();
        let spec = HookSpec::of_command(&command)
            .in_directory(dir.path())
            .unwrap();
        let last = spec.files.last().unwrap();
        assert_eq!(last.path, dir.path().join("rules.txt"));
        assert_eq!(last.role, FileRole::Argument(0));
        assert_eq!(last.digest, Some(sha256_digest(b"rules\n")));
        assert_eq!(spec.files.len(), 3, "`--strict` names no file");
        std::fs::write(&script, "#!sh\n").unwrap();
        let error = command_files(&script, &[]).unwrap_err();
        assert!(
            error.contains("`sh`") && error.contains("not an absolute path"),
            "{error}"
        );
    }

    /// A hook whose files a command in the workspace could change is refused, by where each
    /// really is and every place its path passes through; `.toolgate/`, outside the workspace,
    /// and a trusted project's file with the bytes trusted are not.
    #[test]
    fn a_hook_file_in_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let (ws, out) = (top.join("ws"), top.join("out"));
        for sub in ["hooks", ".toolgate", "bin"] {
            std::fs::create_dir_all(ws.join(sub)).unwrap();
        }
        std::fs::create_dir_all(&out).unwrap();
        for file in [
            ws.join("hooks/guard.sh"),
            ws.join(".toolgate/guard.sh"),
            ws.join("bin/interp"),
            out.join("guard.sh"),
        ] {
            std::fs::write(file, "echo\n").unwrap();
        }
        std::fs::write(
            out.join("guard"),
            format!("#!{}\n", ws.join("bin/interp").display()),
        )
        .unwrap();
        std::fs::write(
            out.join("env-guard"),
            format!("#!/usr/bin/env -S PATH={}/bin interp\n", ws.display()),
        )
        .unwrap();
        std::os::unix::fs::symlink(out.join("guard.sh"), ws.join("out-link")).unwrap();
        std::os::unix::fs::symlink(ws.join("hooks/guard.sh"), out.join("in-link")).unwrap();
        std::os::unix::fs::symlink("../hooks/guard.sh", ws.join(".toolgate/in-link")).unwrap();
        let (w, o) = (ws.display().to_string(), out.display().to_string());
        let refused = |file: &str| Some(format!("`{w}/{file}` is inside the workspace `{w}`"));
        let leads = |file: &str, place: &str| format!("`{file}` leads to `{place}`, inside");
        let rows: Vec<(Vec<String>, Option<String>)> = vec![
            (
                vec![format!("{w}/hooks/guard.sh")],
                refused("hooks/guard.sh"),
            ),
            (vec![format!("{w}/hooks/missing")], refused("hooks/missing")),
            (
                vec!["/bin/sh".into(), format!("{w}/hooks/guard.sh")],
                refused("hooks/guard.sh"),
            ),
            (
                vec!["/bin/sh".into(), "hooks/guard.sh".into()],
                refused("hooks/guard.sh"),
            ),
            (
                vec!["/bin/sh".into(), format!("{w}/out-link")],
                refused("out-link"),
            ),
            (
                vec!["/bin/sh".into(), format!("{o}/in-link")],
                Some(leads(
                    &format!("{o}/in-link"),
                    &format!("{w}/hooks/guard.sh"),
                )),
            ),
            (
                vec!["/bin/sh".into(), format!("{w}/.toolgate/in-link")],
                Some(leads(
                    &format!("{w}/.toolgate/in-link"),
                    &format!("{w}/hooks/guard.sh"),
                )),
            ),
            (
                vec!["/bin/sh".into(), format!("{w}/.toolgate/../hooks/guard.sh")],
                Some(leads(
                    &format!("{w}/.toolgate/../hooks/guard.sh"),
                    &format!("{w}/hooks/guard.sh"),
                )),
            ),
            (
                vec!["/bin/sh".into(), format!("{w}/hooks/../../out/guard.sh")],
                Some(leads(
                    &format!("{w}/hooks/../../out/guard.sh"),
                    &format!("{w}/hooks"),
                )),
            ),
            (vec![format!("{o}/guard")], refused("bin/interp")),
            (vec!["/bin/sh".into(), ".toolgate/guard.sh".into()], None),
            (
                vec!["/bin/sh".into(), format!("{w}/.toolgate/guard.sh")],
                None,
            ),
            (vec!["/bin/sh".into(), format!("{o}/guard.sh")], None),
            (
                vec![format!("{w}/.toolgate/guard.sh"), "--strict".into()],
                None,
            ),
            // Not there yet: a command could make it, and the hook would open it by name.
            (
                vec!["/bin/sh".into(), "hooks/later.sh".into()],
                refused("hooks/later.sh"),
            ),
            (
                vec!["/bin/sh".into(), format!("{w}/later.sh")],
                refused("later.sh"),
            ),
            (vec!["/bin/sh".into(), ".toolgate/later.sh".into()], None),
            // A word names nothing now; a call fails if it comes to (see `hook.rs`).
            (vec!["/bin/sh".into(), "allow".into()], None),
            // What `env` runs is looked up as the hook starts: from the workspace, in the
            // `PATH` a word sets.
            (
                vec!["/usr/bin/env".into(), "PATH=bin".into(), "interp".into()],
                refused("bin/interp"),
            ),
            (vec![format!("{o}/env-guard")], refused("bin/interp")),
            (vec!["/usr/bin/env".into(), "true".into()], None),
            // Code after `-c` or `-e` is a file only when it names one.
            (
                vec!["/bin/sh".into(), "-c".into(), "jq -e . >/dev/null".into()],
                None,
            ),
            (
                vec!["/usr/bin/node".into(), "-e".into(), "require('./x')".into()],
                None,
            ),
            (
                vec!["/bin/sh".into(), "-c".into(), "hooks/guard.sh".into()],
                refused("hooks/guard.sh"),
            ),
        ];
        let spec = |command: &[String]| HookSpec::of_command(command).in_directory(&ws).unwrap();
        for (command, expected) in rows {
            let checked = spec(&command).outside_workspace(&ws);
            match (checked, expected) {
                (Ok(()), None) => {}
                (Err(error), Some(says)) => {
                    assert!(error.contains(&says), "{command:?}: {error}");
                    assert!(
                        error.contains(&format!(
                            "move it outside the workspace or into `{w}/.toolgate/`"
                        )),
                        "{error}"
                    );
                }
                (checked, expected) => panic!("{command:?}: {checked:?}, expected {expected:?}"),
            }
        }
        // A trusted project's file is bound by the trust while it holds the bytes trusted.
        let command = ["/bin/sh".to_owned(), "hooks/guard.sh".to_owned()];
        let mut trusted = spec(&command);
        let digest = sha256_digest(b"echo\n").to_string();
        trusted.trusted = BTreeMap::from([(ws.join("hooks/guard.sh"), digest)]);
        assert_eq!(trusted.outside_workspace(&ws), Ok(()));
        trusted.trusted = BTreeMap::from([(ws.join("hooks/guard.sh"), "sha256:0".to_owned())]);
        assert!(trusted.outside_workspace(&ws).is_err());
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
