//! The files an `[[upstream]]` command runs or has its program read, found as the process
//! would find them, and the rule that none lies where a command or write approved in the
//! workspace could change it (see [`refuse_in_workspace`]): toolgate would run the new bytes
//! as the upstream when next started, with the secrets its `env` passes, the hosts and the
//! paths it is granted.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use toolgate_upstream::{Endpoint, UpstreamSpec};

use super::hooks::{
    dir_in_workspace, holds_trusted, is_code, names_nothing, refuse_in_workspace, shebang,
};

/// Where an `[[upstream]]` is configured, for an error found once the workspace is known.
#[derive(Debug, Clone, Default)]
pub struct UpstreamOrigin {
    /// The configuration file, as shown, and the line of its `[[upstream]]`.
    pub at: (String, usize),
    /// For a trusted project's upstream, the files inside the workspace (by real path) whose
    /// bytes the person's trust binds, with their digests as trusted. Empty for the user's.
    pub trusted: BTreeMap<PathBuf, String>,
}

/// The directories execvp searches when the environment has no `PATH` (glibc's).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Every file starting `program` with `args` in `cwd` (absolute) runs or has read, with
/// `path` (the process's `PATH`): the program (named with a `/`: relative to `cwd`; else
/// every place the `PATH` search looks, up to the first executable file), the interpreter
/// its `#!` line names, and each argument that names a file (absolute, or relative to
/// `cwd`), or names nothing yet and has a `/` (a command could create it). Options,
/// directories and the code after `-c` or `-e` are not files it runs. Where the program or
/// the interpreter is `env`, the files of the command it runs (see [`past_env`]) instead.
pub(super) fn command_files(
    program: &str,
    args: &[String],
    cwd: &Path,
    path: Option<&str>,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    started(
        program,
        args,
        cwd,
        path.unwrap_or(DEFAULT_PATH),
        MAX_ENV,
        &mut files,
    );
    files
}

/// How many `env` in a row are followed (`env env tool`, a `#!/usr/bin/env` script run by
/// one), so that a script whose `#!` line runs itself ends.
const MAX_ENV: usize = 8;

/// [`command_files`] into `files`, `depth` more `env` followed.
fn started(
    program: &str,
    args: &[String],
    cwd: &Path,
    path: &str,
    depth: usize,
    files: &mut Vec<PathBuf>,
) {
    let (places, found) = looked_up(program, path, cwd);
    files.extend(places);
    let line = found
        .and_then(|found| crate::hook::read_regular(&found).ok())
        .and_then(|(_, bytes)| shebang(&bytes));
    if let Some((interpreter, arg)) = line {
        files.push(cwd.join(&interpreter));
        through_env(
            &interpreter,
            &line_words(arg.as_deref()),
            cwd,
            path,
            depth,
            files,
        );
    }
    if through_env(program, args, cwd, path, depth, files) {
        return;
    }
    for (index, arg) in args.iter().enumerate() {
        let file = cwd.join(arg);
        let named = (arg.contains('/') || file.is_symlink()) && names_nothing(arg, &file);
        if !arg.starts_with('-') && (file.is_file() || (named && !is_code(args, index))) {
            files.push(file);
        }
    }
}

/// Whether `program` is `env` run with `args`, and then the files of the command it runs
/// into `files`.
fn through_env(
    program: &str,
    args: &[String],
    cwd: &Path,
    path: &str,
    depth: usize,
    files: &mut Vec<PathBuf>,
) -> bool {
    if !is_env(program) || depth == 0 {
        return false;
    }
    if let Some(env) = past_env(args) {
        let path = env.path.as_deref().unwrap_or(path);
        let cwd = env
            .dir
            .map_or_else(|| cwd.to_path_buf(), |dir| cwd.join(dir));
        started(&env.program, &env.args, &cwd, path, depth - 1, files);
    }
    true
}

/// The words of a `#!` line's argument: Linux gives env the line's rest as one word, which
/// it splits only after `-S`; split always, at worst a place too many.
fn line_words(arg: Option<&str>) -> Vec<String> {
    arg.iter()
        .flat_map(|arg| arg.split_whitespace())
        .map(str::to_owned)
        .collect()
}

/// Where the hook's `program` (with `args`) or the interpreter its `#!` `line` names (with
/// the line's argument) is `env`, the files of the command it runs, found from `cwd` with
/// `path`: looked up as the hook starts, not sealed with its files.
pub(super) fn env_runs(
    program: &str,
    args: &[String],
    line: Option<(&str, Option<&str>)>,
    cwd: &Path,
    path: &str,
) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Some((interpreter, arg)) = line {
        through_env(
            interpreter,
            &line_words(arg),
            cwd,
            path,
            MAX_ENV,
            &mut files,
        );
    }
    through_env(program, args, cwd, path, MAX_ENV, &mut files);
    files
}

fn is_env(program: &str) -> bool {
    Path::new(program)
        .file_name()
        .is_some_and(|name| name == "env")
}

/// The command `env` runs, as [`past_env`] finds it.
struct EnvCommand {
    program: String,
    args: Vec<String>,
    /// The `PATH` a `PATH=` word sets.
    path: Option<String>,
    /// The directory `-C` changes to (from the one `env` runs in).
    dir: Option<String>,
}

/// The command `env` given `args` runs: past its options (the value of `-u` and `-a`
/// skipped, that of `-C` kept, that of `-S`, alone, joined as in `-iStool`, or
/// `--split-string=`, split into words) and its `NAME=VALUE` words.
fn past_env(args: &[String]) -> Option<EnvCommand> {
    let mut words: std::collections::VecDeque<String> = args.iter().cloned().collect();
    let (mut path, mut dir) = (None, None);
    let split = |words: &mut std::collections::VecDeque<String>, value: &str| {
        for word in value.split_whitespace().rev() {
            words.push_front(word.to_owned());
        }
    };
    while let Some(word) = words.pop_front() {
        if word == "--" {
            continue;
        }
        if let Some(long) = word.strip_prefix("--") {
            match long.split_once('=') {
                Some(("split-string", value)) => split(&mut words, value),
                Some(("chdir", value)) => dir = Some(value.to_owned()),
                Some(_) => {}
                None if long == "chdir" => dir = words.pop_front(),
                None if matches!(long, "unset" | "argv0") => {
                    words.pop_front();
                }
                None => {}
            }
        } else if let Some(short) = word.strip_prefix('-') {
            // The first option of a cluster that takes a value takes the rest of the word,
            // or the next word when nothing is left.
            if let Some(at) = short.find(['S', 'u', 'C', 'a']) {
                let rest = &short[at + 1..];
                let value = match rest {
                    "" => words.pop_front().unwrap_or_default(),
                    rest => rest.to_owned(),
                };
                match short[at..].chars().next() {
                    Some('S') => split(&mut words, &value),
                    Some('C') => dir = Some(value),
                    _ => {}
                }
            }
        } else if let Some((name, value)) = word.split_once('=') {
            if name == "PATH" {
                path = Some(value.to_owned());
            }
        } else {
            return Some(EnvCommand {
                program: word,
                args: words.into(),
                path,
                dir,
            });
        }
    }
    None
}

/// `program` with `args` in `cwd`, or the command the `env` it is runs and where (as often as
/// [`MAX_ENV`]).
fn past_envs(program: &str, args: &[String], cwd: &Path) -> (String, Vec<String>, PathBuf) {
    let mut command = (program.to_owned(), args.to_vec(), cwd.to_path_buf());
    for _ in 0..MAX_ENV {
        match past_env(&command.1).filter(|_| is_env(&command.0)) {
            Some(env) => {
                let cwd = match env.dir {
                    Some(dir) => command.2.join(dir),
                    None => command.2,
                };
                command = (env.program, env.args, cwd);
            }
            None => break,
        }
    }
    command
}

/// Where the program `name` is looked for: `cwd` joined with it when it has a `/`; else each
/// directory of `path` in turn (an empty or relative one from `cwd`), up to the first that
/// holds an executable file, which is returned too; every one when none does, as a command
/// could create the program in any of them.
fn looked_up(name: &str, path: &str, cwd: &Path) -> (Vec<PathBuf>, Option<PathBuf>) {
    if name.contains('/') {
        let file = cwd.join(name);
        return (vec![file.clone()], Some(file));
    }
    let mut places = Vec::new();
    for dir in path.split(':') {
        let file = cwd.join(dir).join(name);
        places.push(file.clone());
        let executable = std::fs::metadata(&file)
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0);
        if executable {
            return (places, Some(file));
        }
    }
    (places, None)
}

/// The option a Python interpreter is given that imports from its working directory first
/// (`-m MODULE` and `-c CODE` put it at the head of `sys.path`), unless `-I` or `-P` keeps it
/// off (or `PYTHONSAFEPATH` is set). `None` for any other program.
fn imports_from_cwd(program: &str, args: &[String], safe_path: bool) -> Option<char> {
    let name = Path::new(program).file_name()?.to_str()?;
    if !name.starts_with("python") || safe_path {
        return None;
    }
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let flags = arg.strip_prefix('-')?;
        // `-` (the script on standard input) and `--` end the options.
        if flags.is_empty() || flags == "-" {
            return None;
        }
        if flags.starts_with('-') {
            continue;
        }
        for (at, flag) in flags.char_indices() {
            match flag {
                'I' | 'P' => return None,
                'm' | 'c' => return Some(flag),
                'W' | 'X' => {
                    // Its value is the rest of the word, or the next one.
                    if flags.len() == at + 1 {
                        args.next();
                    }
                    break;
                }
                _ => {}
            }
        }
    }
    None
}

/// The variables an upstream's `env` may pass whose value lists the places (`:` between
/// them) a runtime or the dynamic loader loads code from first: one in the workspace is where
/// a command could put a module, a library or a class the upstream would load.
const LOAD_PATHS: [&str; 8] = [
    "PYTHONPATH",
    "NODE_PATH",
    "PERL5LIB",
    "RUBYLIB",
    "GEM_PATH",
    "CLASSPATH",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
];

/// Whether `program` is a package runner: the package it runs (scoped or not) and the
/// scripts of `package.json` are taken from its working directory's `node_modules` first.
fn is_package_runner(program: &str) -> bool {
    const RUNNERS: [&str; 7] = ["npx", "pnpx", "bunx", "npm", "pnpm", "yarn", "bun"];
    Path::new(program)
        .file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| RUNNERS.contains(&name))
}

/// The value of the variable `name` in the environment `spec`'s process is given.
fn variable<'a>(spec: &'a UpstreamSpec, name: &str) -> Option<&'a str> {
    spec.env
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, value)| value.as_str())
}

/// The files `spec`'s command runs whose real paths `trusted` (a trusted project's closure)
/// binds, each by the path the process opens, with its digest as trusted: what
/// [`UpstreamSpec::bound_files`] holds, so that a restart after one changed (or after a link
/// on its way was pointed elsewhere) starts nothing.
pub fn bound_files(
    spec: &UpstreamSpec,
    trusted: &BTreeMap<PathBuf, String>,
) -> Vec<(PathBuf, String)> {
    let Endpoint::Command { program, args } = &spec.endpoint else {
        return Vec::new();
    };
    let Some(cwd) = spec.cwd.clone().or_else(|| std::env::current_dir().ok()) else {
        return Vec::new();
    };
    command_files(program, args, &cwd, variable(spec, "PATH"))
        .into_iter()
        .filter_map(|file| {
            let real = std::fs::canonicalize(&file).ok()?;
            Some((file, trusted.get(&real)?.clone()))
        })
        .collect()
}

/// Refuses the upstream of `spec`, configured as `origin` says, when its program, the
/// interpreter that runs it or a file its arguments name lies inside the workspace at `root`
/// (canonical) outside `.toolgate/` (see [`refuse_in_workspace`]), or when it is a Python
/// interpreter importing from its working directory there. A file a trusted project's record
/// binds, holding the bytes trusted, may be run. A `url` upstream runs nothing here.
pub fn outside_workspace(
    spec: &UpstreamSpec,
    origin: &UpstreamOrigin,
    root: &Path,
) -> Result<(), String> {
    let Endpoint::Command { program, args } = &spec.endpoint else {
        return Ok(());
    };
    let cwd = match &spec.cwd {
        Some(cwd) => cwd.clone(),
        // Where it is started (see `Connection::spawn`).
        None => std::env::current_dir()
            .map_err(|e| format!("no working directory to check its command in: {e}"))?,
    };
    let variable = |name: &str| variable(spec, name);
    let runs = "this upstream, with its environment, hosts and grants,";
    let cwd_exposed = dir_in_workspace(root, &cwd);
    // Through `env` (which may clear the environment), what runs and where.
    let (run, run_args, run_cwd) = past_envs(program, args, &cwd);
    let runs_in_workspace = cwd_exposed || dir_in_workspace(root, &run_cwd);
    if is_package_runner(&run) && runs_in_workspace {
        return Err(format!(
            "`{run}` takes the package it runs from the `node_modules` of its working directory \
             `{}` first, in the workspace `{}`, where a command or write approved there could \
             put another: set the upstream's `cwd` outside the workspace",
            run_cwd.display(),
            root.display()
        ));
    }
    for file in command_files(program, args, &cwd, variable("PATH")) {
        refuse_in_workspace(root, &file, runs, |real| {
            holds_trusted(&origin.trusted, real)
        })
        .map_err(|error| {
            // Found from where it runs: another `cwd` finds it elsewhere.
            if cwd_exposed && file.starts_with(&cwd) {
                format!(
                    "{error}, or set the upstream's `cwd` outside the workspace (it is found \
                     from `{}`)",
                    cwd.display()
                )
            } else {
                error
            }
        })?;
    }
    for name in LOAD_PATHS {
        // An empty or relative entry is taken from the working directory.
        let places = variable(name).into_iter().flat_map(|value| {
            // `LD_PRELOAD` takes spaces between its files too, and looks a name without a
            // `/` up where libraries are looked for, not in the working directory.
            value
                .split(move |c| c == ':' || (c == ' ' && name == "LD_PRELOAD"))
                .filter(move |place| name != "LD_PRELOAD" || place.contains('/'))
        });
        for dir in places {
            let dir = cwd.join(dir);
            if dir_in_workspace(root, &dir) {
                return Err(format!(
                    "`{name}` names `{}`, in the workspace `{}`: code is loaded from there, \
                     where a command or write approved there could put some, and toolgate would \
                     run it as {runs} when next started; pass `{name}` without it",
                    dir.display(),
                    root.display()
                ));
            }
        }
    }
    // Through `env` (which may clear the environment) only `-P` or `-I` keeps it off.
    let safe_path =
        variable("PYTHONSAFEPATH").is_some_and(|v| !v.is_empty()) && run == program.as_str();
    if let Some(flag) = imports_from_cwd(&run, &run_args, safe_path)
        && runs_in_workspace
    {
        let (program, cwd) = (run, run_cwd);
        return Err(format!(
            "`{program} -{flag}` runs in `{}`, in the workspace `{}`: Python imports modules \
             from its working directory first, where a command or write approved there could \
             put one, and toolgate would run it as {runs} when next started; set the \
             upstream's `cwd` outside the workspace, or give Python `-P` before `-{flag}`",
            cwd.display(),
            root.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolgate_core::sha256_digest;
    use toolgate_upstream::{UpstreamConfinement, UpstreamSection};

    /// The upstream `command`, run in `cwd` with `PATH` = `path` (and `PYTHONSAFEPATH` when
    /// `safe`).
    fn spec(command: &[String], cwd: &Path, path: &str, safe: bool) -> UpstreamSpec {
        let section = serde_json::json!({
            "name": "fs",
            "command": command,
            "cwd": cwd,
            "env": ["PYTHONSAFEPATH"],
        });
        let section: UpstreamSection = serde_json::from_value(section).unwrap();
        section
            .check(
                Path::new("/etc/toolgate"),
                |name| match name {
                    "PATH" => Some(path.to_owned()),
                    "PYTHONSAFEPATH" => safe.then(|| "1".to_owned()),
                    _ => None,
                },
                UpstreamConfinement::dangerous_unconfined(),
            )
            .unwrap()
    }

    fn write(path: &Path, text: &str, mode: u32) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// An upstream whose program, interpreter, `PATH` search or file argument a command in
    /// the workspace could change is refused, naming the file; one whose files lie outside
    /// the workspace or in `.toolgate/`, or that only names the workspace as a directory, is
    /// not. A Python interpreter importing from a working directory in the workspace is
    /// refused too.
    #[test]
    fn an_upstream_file_in_the_workspace_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        let (ws, out) = (top.join("ws"), top.join("out"));
        let (w, o) = (ws.display().to_string(), out.display().to_string());
        write(&ws.join("server.py"), "print()\n", 0o644);
        write(&ws.join(".toolgate/server.py"), "print()\n", 0o644);
        write(&ws.join("bin/tool"), "#!/bin/sh\n", 0o755);
        write(&out.join("server.py"), "print()\n", 0o644);
        write(&out.join("bin/tool"), "#!/bin/sh\n", 0o755);
        write(&out.join("script"), &format!("#!{w}/bin/tool -x\n"), 0o755);
        write(&out.join("by-env"), "#!/usr/bin/env tool\n", 0o755);
        write(&out.join("env-s"), "#!/usr/bin/env -S tool -x\n", 0o755);
        write(&out.join("env-is"), "#!/usr/bin/env -iStool\n", 0o755);
        write(
            &out.join("env-u"),
            "#!/usr/bin/env -S -u HOME tool\n",
            0o755,
        );
        write(
            &out.join("env-path"),
            &format!("#!/usr/bin/env -S PATH={w}/bin tool\n"),
            0o755,
        );
        std::os::unix::fs::symlink(ws.join("server.py"), out.join("in-link")).unwrap();
        let inside = |file: &str| format!("`{file}` is inside the workspace `{w}`");
        let leads = |file: &str, place: &str| format!("`{file}` leads to `{place}`, inside");
        let python = "`python3 -m` runs in";
        let (sys, ws_bin, out_bin) = ("/usr/bin:/bin", format!("{w}/bin"), format!("{o}/bin"));
        let cmd =
            |words: &[&str]| -> Vec<String> { words.iter().map(|w| (*w).to_owned()).collect() };
        let guarded = ws.join(".toolgate");
        let in_ws = |file: &str| Some(inside(&format!("{w}/{file}")));
        let rows: Vec<(Vec<String>, &Path, String, Option<String>)> = vec![
            // A script relative to where it runs, absolute, or not there yet.
            (
                cmd(&["python3", "server.py"]),
                &ws,
                sys.into(),
                in_ws("server.py"),
            ),
            (
                cmd(&["/bin/sh", "./later.sh"]),
                &ws,
                sys.into(),
                in_ws("later.sh"),
            ),
            (
                cmd(&["/bin/sh", &format!("{w}/server.py")]),
                &out,
                sys.into(),
                in_ws("server.py"),
            ),
            (
                cmd(&["/bin/sh", &format!("{o}/in-link")]),
                &out,
                sys.into(),
                Some(leads(&format!("{o}/in-link"), &format!("{w}/server.py"))),
            ),
            (
                cmd(&["/bin/sh", "../ws/server.py"]),
                &out,
                sys.into(),
                Some(leads(
                    &format!("{o}/../ws/server.py"),
                    &format!("{w}/server.py"),
                )),
            ),
            // The program: relative, absolute, found on PATH, or looked for there first.
            (cmd(&["bin/tool"]), &ws, sys.into(), in_ws("bin/tool")),
            (
                cmd(&[&format!("{w}/bin/tool")]),
                &out,
                sys.into(),
                in_ws("bin/tool"),
            ),
            (
                cmd(&["tool"]),
                &out,
                format!("{ws_bin}:{out_bin}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&["tool"]),
                &out,
                format!("{w}/none:{out_bin}"),
                in_ws("none/tool"),
            ),
            (cmd(&["tool"]), &ws, format!(":{out_bin}"), in_ws("tool")),
            (
                cmd(&["tool"]),
                &ws,
                format!("bin:{out_bin}"),
                in_ws("bin/tool"),
            ),
            // The interpreter a `#!` line names, or the program `env` looks up.
            (
                cmd(&[&format!("{o}/script")]),
                &out,
                sys.into(),
                in_ws("bin/tool"),
            ),
            (
                cmd(&[&format!("{o}/by-env")]),
                &out,
                format!("{ws_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            // What `env -S` looks up, past its options, or in the `PATH` it sets.
            (
                cmd(&[&format!("{o}/env-s")]),
                &out,
                format!("{ws_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&[&format!("{o}/env-is")]),
                &out,
                format!("{ws_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&[&format!("{o}/env-u")]),
                &out,
                format!("{ws_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&[&format!("{o}/env-path")]),
                &out,
                format!("{out_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            // The command an upstream run by `env` runs.
            (
                cmd(&["/usr/bin/env", "tool"]),
                &out,
                format!("{ws_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&[
                    "/usr/bin/env",
                    "-u",
                    "HOME",
                    &format!("PATH={w}/bin"),
                    "tool",
                ]),
                &out,
                format!("{out_bin}:{sys}"),
                in_ws("bin/tool"),
            ),
            (
                cmd(&["/usr/bin/env", "-S", "/bin/sh server.py"]),
                &ws,
                sys.into(),
                in_ws("server.py"),
            ),
            (
                cmd(&["/usr/bin/env", "-i", "python3", "-m", "server"]),
                &ws,
                sys.into(),
                Some(python.into()),
            ),
            (
                cmd(&["/usr/bin/env", "-C", &w, "python3", "-m", "server"]),
                &out,
                sys.into(),
                Some(python.into()),
            ),
            (
                cmd(&["/usr/bin/env", &format!("--chdir={w}"), "bin/tool"]),
                &out,
                sys.into(),
                in_ws("bin/tool"),
            ),
            // Python importing from a working directory in the workspace.
            (
                cmd(&["python3", "-m", "server"]),
                &ws,
                sys.into(),
                Some(python.into()),
            ),
            (
                cmd(&["python3", "-u", "-W", "ignore", "-m", "server"]),
                &ws,
                sys.into(),
                Some(python.into()),
            ),
            (
                cmd(&["/usr/bin/python3", "-c", "import server"]),
                &ws,
                sys.into(),
                Some("`/usr/bin/python3 -c` runs in".into()),
            ),
            (
                cmd(&["python3", "-uc", "import server"]),
                &ws,
                sys.into(),
                Some("`python3 -c` runs in".into()),
            ),
            // What may start.
            (cmd(&["python3", "server.py"]), &out, sys.into(), None),
            (
                cmd(&["/bin/sh", ".toolgate/server.py"]),
                &ws,
                sys.into(),
                None,
            ),
            (
                cmd(&["/bin/sh", &format!("{w}/.toolgate/server.py")]),
                &out,
                sys.into(),
                None,
            ),
            (cmd(&["/bin/sh", "later.sh"]), &ws, sys.into(), None),
            (
                cmd(&["/bin/sh", "-x", &w, "--root=./later"]),
                &ws,
                sys.into(),
                None,
            ),
            (
                cmd(&["/bin/sh", "-c", "touch ./later; exec sleep 30"]),
                &ws,
                sys.into(),
                None,
            ),
            (
                cmd(&["/bin/sh", "-c", "server.py"]),
                &ws,
                sys.into(),
                in_ws("server.py"),
            ),
            (cmd(&["tool"]), &ws, format!("{out_bin}:{ws_bin}"), None),
            (
                cmd(&[&format!("{o}/env-s")]),
                &out,
                format!("{out_bin}:{ws_bin}"),
                None,
            ),
            (
                cmd(&[&format!("{o}/by-env")]),
                &out,
                format!("{out_bin}:{ws_bin}"),
                None,
            ),
            (cmd(&["python3", "-m", "server"]), &out, sys.into(), None),
            (
                cmd(&["/usr/bin/env", "tool", "-x"]),
                &out,
                format!("{out_bin}:{ws_bin}"),
                None,
            ),
            (
                cmd(&["/usr/bin/env", "python3", "-P", "-m", "server"]),
                &ws,
                sys.into(),
                None,
            ),
            (
                cmd(&["python3", "-P", "-m", "server"]),
                &ws,
                sys.into(),
                None,
            ),
            (cmd(&["python3", "-Im", "server"]), &ws, sys.into(), None),
            (
                cmd(&["python3", "-m", "server"]),
                &guarded,
                sys.into(),
                None,
            ),
            (cmd(&["node", "-m"]), &ws, sys.into(), None),
        ];
        for (command, cwd, path, expected) in rows {
            let spec = spec(&command, cwd, &path, false);
            let checked = outside_workspace(&spec, &UpstreamOrigin::default(), &ws);
            match (checked, expected) {
                (Ok(()), None) => {}
                (Err(error), Some(says)) => {
                    assert!(error.contains(&says), "{command:?}: {error}");
                    assert!(
                        error.contains("as this upstream, with its environment"),
                        "{error}"
                    );
                }
                (checked, expected) => {
                    panic!("{command:?} in {cwd:?}: {checked:?}, expected {expected:?}")
                }
            }
        }
        // A package runner takes the package it runs, scoped or not, from the `node_modules`
        // of a working directory in the workspace first.
        for (words, cwd) in [
            (&["npx", "-y", "@scope/server"][..], &ws),
            (&["npx", "-y", "server"], &ws),
            (&["/usr/bin/env", "-C", &w, "npx", "-y", "server"], &out),
        ] {
            let npx = spec(&cmd(words), cwd, sys, false);
            let error = outside_workspace(&npx, &UpstreamOrigin::default(), &ws).unwrap_err();
            assert_eq!(
                error,
                format!(
                    "`npx` takes the package it runs from the `node_modules` of its working \
                     directory `{w}` first, in the workspace `{w}`, where a command or write \
                     approved there could put another: set the upstream's `cwd` outside the \
                     workspace"
                ),
                "{words:?}"
            );
        }
        for words in [
            &["npx", "-y", "@scope/server"][..],
            &["npx", "-y", "server"],
        ] {
            let npx = spec(&cmd(words), &out, sys, false);
            let checked = outside_workspace(&npx, &UpstreamOrigin::default(), &ws);
            assert_eq!(checked, Ok(()), "{words:?}");
        }
        let relative = spec(&cmd(&["/bin/sh", "server.py"]), &ws, sys, false);
        let error = outside_workspace(&relative, &UpstreamOrigin::default(), &ws).unwrap_err();
        assert!(
            error.ends_with(&format!(
                "or set the upstream's `cwd` outside the workspace (it is found from `{w}`)"
            )),
            "{error}"
        );
        // A place code is loaded from, in the workspace (relative or empty: from `cwd`).
        for (name, value, cwd) in [
            ("PYTHONPATH", format!("{o}:{w}/lib"), &out),
            ("NODE_PATH", "lib".to_owned(), &ws),
            ("LD_LIBRARY_PATH", format!("{o}:"), &ws),
            ("LD_PRELOAD", format!("{w}/hook.so"), &out),
            ("LD_PRELOAD", format!("libc.so.6 {w}/hook.so"), &out),
        ] {
            let command = cmd(&["python3", &format!("{o}/server.py")]);
            let mut loads = spec(&command, cwd, sys, false);
            assert_eq!(
                outside_workspace(&loads, &UpstreamOrigin::default(), &ws),
                Ok(())
            );
            loads.env.push((name.to_owned(), value.clone()));
            let error = outside_workspace(&loads, &UpstreamOrigin::default(), &ws).unwrap_err();
            assert!(
                error.starts_with(&format!("`{name}` names `"))
                    && error.contains(&format!("in the workspace `{w}`: code is loaded")),
                "{name}={value}: {error}"
            );
            loads.env.last_mut().unwrap().1 = format!("{o}:{w}/.toolgate/lib");
            let checked = outside_workspace(&loads, &UpstreamOrigin::default(), &ws);
            assert_eq!(checked, Ok(()), "{name}");
        }
        let python = ["python3".to_owned(), "-m".to_owned(), "server".to_owned()];
        let safe = spec(&python, &ws, sys, true);
        assert_eq!(
            outside_workspace(&safe, &UpstreamOrigin::default(), &ws),
            Ok(())
        );
        // A trusted project's file is run while it holds the bytes trusted.
        let command = ["/bin/sh".to_owned(), "server.py".to_owned()];
        let trusted = spec(&command, &ws, sys, false);
        let digest = sha256_digest(b"print()\n").to_string();
        let mut origin = UpstreamOrigin {
            trusted: BTreeMap::from([(ws.join("server.py"), digest)]),
            ..UpstreamOrigin::default()
        };
        assert_eq!(outside_workspace(&trusted, &origin, &ws), Ok(()));
        std::os::unix::fs::symlink("server.py", ws.join("link.py")).unwrap();
        let linked = spec(&cmd(&["/bin/sh", "link.py"]), &ws, sys, false);
        assert_eq!(
            bound_files(&linked, &origin.trusted),
            [(
                ws.join("link.py"),
                origin.trusted[&ws.join("server.py")].clone()
            )],
            "bound by the path the process opens"
        );
        origin.trusted = BTreeMap::from([(ws.join("server.py"), "sha256:0".to_owned())]);
        assert!(outside_workspace(&trusted, &origin, &ws).is_err());
    }
}
