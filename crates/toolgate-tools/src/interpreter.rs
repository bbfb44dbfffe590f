//! What a command's arguments make its program read or run beyond the files they name.
//!
//! `run_command` binds every argument that names a file in the workspace (`sh check.sh`).
//! Some arguments decide what runs without naming a file (issue 36): `python3 -m job` runs
//! `job.py` or `job/__main__.py` from the working directory; `python3 -c "exec(open(…)…)"`,
//! `node -e`, `perl -e` and `sh -c ". ./x.sh"` carry program text that reads other files;
//! `git -c alias.t=!cmd` is a shell command git will run. [`PROGRAMS`] holds what toolgate
//! knows of each interpreter's spellings, as data: which options carry program text, which a
//! module, which take a value, what the first operand is, and what the program reads that no
//! argument names. [`analyse`] turns an argv into
//!
//! - **candidates**: paths, relative to the working directory, that decide what runs if they
//!   exist — a module's files, the words of program text that name files, the project files a
//!   package manager reads — bound like arguments (a candidate that names nothing at stage 4
//!   and a file at stage 7 refuses the call, as an argument does);
//! - **notes**: one plain sentence per argument for the preview, saying what the program will
//!   run or read that the approval does not cover.
//!
//! Wrappers (`env`, `timeout`, `nice`, …) are looked through to the command they start, and
//! shell text (`sh -c`, a git alias, a package.json script) is split into its commands, each
//! looked at the same way, a few levels deep.
//!
//! [`PACKAGE_MANAGER_PINS`] is the other half of the same problem: the configuration keys with
//! which npm, pnpm and yarn run a program are pinned through the environment for every process
//! of a call, so a nested `npm run` cannot be given another shell by a `.npmrc`.

use std::path::Path;

use crate::git_keys::{self, Runs, Value};

/// The environment every process of `run_command` and `run_script` gets, so that npm, npx,
/// pnpm and yarn started anywhere in the call run only the programs their defaults name.
/// npm and pnpm rank `npm_config_*` variables above every `.npmrc` (project, user and global),
/// so these values hold whatever a `.npmrc` says, including one written during the call; yarn
/// (1 and 2+) leaves its `yarnPath`/`yarn-path` unread when `YARN_IGNORE_PATH` is set.
///
/// npm trims configuration values, so `node-options` given as one space is empty: npm then
/// leaves `NODE_OPTIONS` as it finds it instead of setting it from a `.npmrc`
/// (`node-options=--require ./x.js`). `call` and `node-gyp` cannot be pinned without
/// breaking `npx` and native builds, nor `globalconfig` without knowing npm's prefix;
/// `run_script` shows and binds the `.npmrc` that could set them.
pub(crate) const PACKAGE_MANAGER_PINS: [(&str, &str, &str); 11] = [
    (
        "npm_config_script_shell",
        "/bin/sh",
        "the shell npm and pnpm run scripts with",
    ),
    (
        "npm_config_node_options",
        " ",
        "`NODE_OPTIONS` npm would give every script",
    ),
    ("npm_config_shell", "/bin/sh", "the shell of `npm exec`"),
    ("npm_config_git", "git", "the program npm runs as git"),
    (
        "npm_config_userconfig",
        "~/.npmrc",
        "the user's file, which a project `.npmrc` could name elsewhere",
    ),
    (
        "npm_config_editor",
        "/bin/true",
        "the program of `npm edit`",
    ),
    (
        "npm_config_browser",
        "/bin/true",
        "the program of `npm docs`",
    ),
    (
        "npm_config_viewer",
        "/bin/true",
        "the program of `npm help`",
    ),
    (
        "npm_config_init_module",
        "/dev/null",
        "the code `npm init` runs",
    ),
    (
        "npm_config_pnpmfile",
        ".pnpmfile.cjs",
        "the hooks file pnpm loads",
    ),
    (
        "YARN_IGNORE_PATH",
        "1",
        "yarn's `yarnPath`, another yarn it would run",
    ),
];

/// Adds [`PACKAGE_MANAGER_PINS`] to an environment, replacing what it held.
pub(crate) fn pin_package_managers(env: &mut Vec<(String, String)>) {
    for (name, value, _) in PACKAGE_MANAGER_PINS {
        env.retain(|(k, _)| k != name);
        env.push((name.to_owned(), value.to_owned()));
    }
    env.sort();
}

/// The preview's sentence about [`PACKAGE_MANAGER_PINS`].
pub(crate) fn pins_preview() -> String {
    let pinned: Vec<String> = PACKAGE_MANAGER_PINS
        .iter()
        .map(|(name, value, _)| format!("{name}={value:?}"))
        .collect();
    format!(
        "\nnpm, npx, pnpm and yarn started by this call take these settings from the \
         environment, above any `.npmrc` or `.yarnrc`: {}; the rest of their configuration is \
         read as usual, and some of it can still run code (`node-gyp`, `call`, yarn's \
         `plugins`)",
        pinned.join(", ")
    )
}

/// What an argv makes its program read or run, beyond its arguments.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Analysis {
    /// Paths relative to the working directory that decide what runs if they exist, each
    /// with the label the preview gives it.
    pub(crate) candidates: Vec<(String, String)>,
    /// Sentences for the preview, argument by argument.
    pub(crate) notes: Vec<String>,
    /// The package.json scripts that npm, pnpm or yarn commands run, by name, each with the
    /// label of the command: [`show_package_scripts`] shows their text.
    pub(crate) package_scripts: Vec<(String, String)>,
    /// The label of a git command that contacts a remote in the working directory's
    /// repository (`git fetch`, `git submodule update`): the caller shows what that
    /// repository's configuration makes git run there ([`crate::git_named::remotes`]).
    pub(crate) git_remote: Option<String>,
    /// Whether names were left out past [`MAX_CANDIDATES`] (the notes say so).
    candidates_left_out: bool,
}

/// Most candidates one argv yields: program text is split into words, and a megabyte of it
/// should not become a million look-ups.
const MAX_CANDIDATES: usize = 1024;

/// How deep shell text inside shell text is looked into.
const MAX_DEPTH: usize = 4;

/// How a program's inline text is read for what it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    /// Shell text: its words, and each command in it looked at in turn.
    Shell,
    /// Python: its words, and the modules its dotted names would import from the working
    /// directory.
    Python,
    /// Any other language: its words.
    Other,
}

/// What a program's first operand is, when no option gave it program text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operand {
    /// A file the program runs (`python3 job.py`): bound as an argument.
    Script,
    /// Program text (`awk '{print}'`).
    Code,
    /// A sub-command (`git status`, `npm test`): the rest are its arguments.
    Subcommand,
}

/// Which sub-commands of a package manager run a package.json script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scripts {
    /// None of them.
    None,
    /// npm's: `run NAME` (and its aliases), `test`, `start`, `stop`, `restart`, and the
    /// lifecycle scripts of `install`.
    Npm,
    /// yarn's and pnpm's: npm's, and any other word that names a script.
    ByName,
    /// bun's: `run NAME` only (`bun test` is its own test runner).
    RunOnly,
}

/// What toolgate knows of one interpreter's command line.
#[derive(Debug)]
struct Program {
    /// Its names, any version suffix left out (`python3.12` and `python3` are `python`).
    names: &'static [&'static str],
    language: Language,
    /// Options whose value is program text (`-c`, `-e`, `--eval`).
    code: &'static [&'static str],
    /// Flags after which the first operand is program text (`sh -c`).
    code_operand: &'static [&'static str],
    /// Options whose value names a module the program runs (`python3 -m`).
    module: &'static [&'static str],
    /// Options whose value names a module or library loaded before the program (`node -r`,
    /// `perl -M`).
    preload: &'static [&'static str],
    /// Options whose value is `key=value` configuration (`git -c`).
    config: &'static [&'static str],
    /// Options whose value is `key=VARIABLE`, configuration taken from the environment
    /// (`git --config-env`).
    config_env: &'static [&'static str],
    /// Options whose value is a file the program runs instead of an operand (`awk -f`).
    script: &'static [&'static str],
    /// Other options that take a value, skipped with it.
    valued: &'static [&'static str],
    /// Whether the options end at program text or a module (`python3 -c code args…`).
    ends_at_code: bool,
    first_operand: Operand,
    /// Files in the working directory that the program reads and that decide what it runs.
    project_files: &'static [&'static str],
    /// What the program appends to a name to find the file it runs or loads (`node job` runs
    /// `job.js`, `python3 pkg` runs `pkg/__main__.py`).
    resolves: &'static [&'static str],
    /// Which of its sub-commands run a package.json script.
    scripts: Scripts,
    /// Options that point it at another directory's package.json.
    elsewhere: &'static [&'static str],
    /// What else it reads that the approval does not cover, for the preview.
    reads: &'static str,
}

const NONE: &[&str] = &[];

/// The interpreters and tools whose arguments decide what runs without naming a file.
const PROGRAMS: &[Program] = &[
    Program {
        names: &["python", "pypy"],
        language: Language::Python,
        code: &["-c"],
        code_operand: NONE,
        module: &["-m"],
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-W", "-X", "-Q", "--check-hash-based-pycs"],
        ends_at_code: true,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &["/__main__.py"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "Python also imports the modules the program names, from the program's \
                directory (the working directory for `-c` and `-m`) and its installed \
                packages; the files it imports are not bound",
    },
    Program {
        names: &["node", "nodejs"],
        language: Language::Other,
        code: &["-e", "--eval", "-p", "--print"],
        code_operand: NONE,
        module: NONE,
        preload: &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
        ],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &[
            "--env-file",
            "-C",
            "--conditions",
            "--input-type",
            "--title",
        ],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".js", ".mjs", ".cjs", ".json", "/index.js", "/package.json"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "node also loads the modules the program requires or imports (from \
                `node_modules` and elsewhere); those files are not bound",
    },
    Program {
        names: &["perl"],
        language: Language::Other,
        code: &["-e", "-E"],
        code_operand: NONE,
        module: NONE,
        preload: &["-M", "-m"],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-I"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".pl", ".pm"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "perl also loads the modules the program uses or requires; those files are \
                not bound",
    },
    Program {
        names: &["ruby"],
        language: Language::Other,
        code: &["-e"],
        code_operand: NONE,
        module: NONE,
        preload: &["-r"],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-I", "-C", "-E", "--encoding"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".rb"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "ruby also loads the files the program requires; those are not bound",
    },
    Program {
        names: &["php"],
        language: Language::Other,
        code: &["-r"],
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: &["-f"],
        valued: &["-c", "-d", "-z"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".php"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "php also includes the files the program names; those are not bound",
    },
    Program {
        names: &["lua", "luajit", "Rscript"],
        language: Language::Other,
        code: &["-e"],
        code_operand: NONE,
        module: NONE,
        preload: &["-l"],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: NONE,
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".lua", ".R"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "the interpreter also loads the files the program requires; those are not \
                bound",
    },
    Program {
        names: &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash"],
        language: Language::Shell,
        code: NONE,
        code_operand: &["-c"],
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: NONE,
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "the shell also runs the files its text sources and the programs it starts, \
                which read their own files; those are not bound",
    },
    Program {
        names: &["fish"],
        language: Language::Shell,
        code: &["-c", "--command", "-C", "--init-command"],
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-d", "--debug", "-o", "--debug-output", "--features"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: NONE,
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "the shell also runs the files its text sources and the programs it starts, \
                which read their own files; those are not bound",
    },
    Program {
        names: &["julia"],
        language: Language::Other,
        code: &["-e", "--eval", "-E", "--print"],
        code_operand: NONE,
        module: NONE,
        preload: &["-L", "--load"],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["--project", "-J", "--sysimage", "-t", "--threads"],
        ends_at_code: false,
        first_operand: Operand::Script,
        project_files: NONE,
        resolves: &[".jl"],
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "julia also loads the packages and files the program uses or includes; those \
                are not bound",
    },
    Program {
        names: &["awk", "gawk", "mawk", "nawk"],
        language: Language::Other,
        code: &["-e", "--source"],
        code_operand: NONE,
        module: NONE,
        preload: &["-i", "--include", "-l", "--load"],
        config: NONE,
        config_env: NONE,
        script: &["-f", "--file"],
        valued: &["-v", "-F", "--assign", "--field-separator"],
        ends_at_code: false,
        first_operand: Operand::Code,
        project_files: NONE,
        resolves: NONE,
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "",
    },
    Program {
        names: &["git"],
        language: Language::Shell,
        code: NONE,
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: &["-c"],
        config_env: &["--config-env"],
        script: NONE,
        valued: &[
            "-C",
            "--git-dir",
            "--work-tree",
            "--namespace",
            "--exec-path",
        ],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: NONE,
        resolves: NONE,
        scripts: Scripts::None,
        elsewhere: &["-C", "--git-dir", "--work-tree"],
        reads: "git also reads the repository's own configuration, hooks and attributes, \
                which may name programs it runs; those are not bound here, but for a \
                sub-command that contacts a remote (fetch, pull, push, submodule, …) what \
                the remotes' URLs make git run is shown and bound below",
    },
    Program {
        names: &["npm"],
        language: Language::Shell,
        code: &["-c", "--call"],
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["--prefix", "-C", "-w", "--workspace", "-p", "--package"],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: &["package.json", ".npmrc"],
        resolves: NONE,
        scripts: Scripts::Npm,
        elsewhere: &["--prefix", "-C", "-w", "--workspace", "--workspaces", "-ws"],
        reads: "npm runs the scripts of the package.json it finds (bound below when it is the \
                one in the working directory) and the programs of `node_modules/.bin`, which \
                are not bound",
    },
    Program {
        names: &["bun"],
        language: Language::Other,
        code: &["-e", "--eval", "-p", "--print"],
        code_operand: NONE,
        module: NONE,
        preload: &["-r", "--preload"],
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["--cwd", "--config", "-c"],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: &["package.json", "bunfig.toml"],
        resolves: NONE,
        scripts: Scripts::RunOnly,
        elsewhere: &["--cwd", "--filter", "-F"],
        reads: "bun runs the file or package.json script it is given (a script's text is \
                shown below), loads what `bunfig.toml` preloads and the modules the program \
                imports; those modules are not bound",
    },
    Program {
        // `npx NAME` runs a program, never a package.json script.
        names: &["npx", "pnpx"],
        language: Language::Shell,
        code: &["-c", "--call"],
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-p", "--package", "--prefix", "-w", "--workspace"],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: &[".npmrc"],
        resolves: NONE,
        scripts: Scripts::None,
        elsewhere: NONE,
        reads: "npx runs the program of `node_modules/.bin` or of the package it names, which \
                is not bound",
    },
    Program {
        names: &["pnpm"],
        language: Language::Shell,
        code: &["-c"],
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["-C", "--dir", "--filter", "-F"],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: &[
            "package.json",
            ".npmrc",
            ".pnpmfile.cjs",
            "pnpm-workspace.yaml",
        ],
        resolves: NONE,
        scripts: Scripts::ByName,
        elsewhere: &["-C", "--dir", "--filter", "-F", "-r", "--recursive"],
        reads: "pnpm runs the scripts of the package.json it finds (bound below when it is \
                the one in the working directory) and the programs of `node_modules/.bin`, \
                which are not bound",
    },
    Program {
        names: &["yarn", "yarnpkg"],
        language: Language::Shell,
        code: NONE,
        code_operand: NONE,
        module: NONE,
        preload: NONE,
        config: NONE,
        config_env: NONE,
        script: NONE,
        valued: &["--cwd"],
        ends_at_code: false,
        first_operand: Operand::Subcommand,
        project_files: &["package.json", ".yarnrc.yml", ".yarnrc", ".npmrc"],
        resolves: NONE,
        scripts: Scripts::ByName,
        elsewhere: &["--cwd"],
        reads: "yarn runs the scripts of the package.json it finds (bound below when it is the \
                one in the working directory), the plugins its `.yarnrc.yml` names and the \
                programs of `node_modules/.bin`, which are not bound",
    },
];

/// Programs that start another command given in their arguments.
#[derive(Debug)]
struct Wrapper {
    names: &'static [&'static str],
    /// Options that take a value, skipped with it.
    valued: &'static [&'static str],
    /// Options after which the command is not where it seems (`env -C dir`).
    opaque: &'static [&'static str],
    /// Options whose value is the command as one string (`env -S "cmd args"`).
    split: &'static [&'static str],
    /// Operands before the command (`timeout 5 cmd`).
    skip: usize,
    /// Whether `NAME=value` operands come before the command (`env`).
    assignments: bool,
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        names: &["env"],
        valued: &["-u", "--unset"],
        opaque: &["-C", "--chdir"],
        split: &["-S", "--split-string"],
        skip: 0,
        assignments: true,
    },
    Wrapper {
        names: &["timeout"],
        valued: &["-s", "--signal", "-k", "--kill-after"],
        opaque: NONE,
        split: NONE,
        skip: 1,
        assignments: false,
    },
    Wrapper {
        names: &["nice"],
        valued: &["-n", "--adjustment"],
        opaque: NONE,
        split: NONE,
        skip: 0,
        assignments: false,
    },
    Wrapper {
        names: &["nohup", "setsid", "command", "exec", "time", "busybox"],
        valued: NONE,
        opaque: NONE,
        split: NONE,
        skip: 0,
        assignments: false,
    },
    Wrapper {
        // `uv run`, `poetry run`, `pipenv run`, `pdm run`, `hatch run`: the project's
        // environment, then the command.
        names: &["uv", "poetry", "pipenv", "pdm", "hatch", "rye"],
        valued: &[
            "--with",
            "--python",
            "-p",
            "--project",
            "--directory",
            "--group",
            "--extra",
            "--env",
            "-e",
        ],
        opaque: &["--directory", "--project"],
        split: NONE,
        skip: 1,
        assignments: false,
    },
    Wrapper {
        names: &["stdbuf"],
        valued: &["-i", "-o", "-e", "--input", "--output", "--error"],
        opaque: NONE,
        split: NONE,
        skip: 0,
        assignments: false,
    },
];

/// One argument: the label the preview gives it and its text.
#[derive(Debug, Clone)]
struct Arg<'a> {
    label: String,
    text: &'a str,
}

/// What `args` (the program's arguments, `argv[1]` on) make the program read or run. The
/// program is known by `names`: the name it was given and the resolved file's name.
pub(crate) fn analyse(names: &[&str], args: &[String]) -> Analysis {
    let mut analysis = Analysis::default();
    let args: Vec<Arg<'_>> = args
        .iter()
        .enumerate()
        .map(|(i, text)| Arg {
            label: format!("argv[{}] {text:?}", i + 1),
            text,
        })
        .collect();
    let program = names.iter().find_map(|name| lookup(name));
    match program {
        Some(Found::Program(program)) => command(program, "argv[0]", &args, 0, &mut analysis),
        Some(Found::Wrapper(wrapper)) => wrapped(wrapper, &args, 0, &mut analysis),
        None => {}
    }
    analysis
}

/// What shell text (a package.json script, `sh -c`'s text) makes its commands read or run;
/// `label` says where the text is.
pub(crate) fn shell_text(text: &str, label: &str) -> Analysis {
    let mut analysis = Analysis::default();
    shell(text, label, 0, &mut analysis);
    analysis
}

enum Found {
    Program(&'static Program),
    Wrapper(&'static Wrapper),
}

/// The table's entry for a program name or path.
fn lookup(name: &str) -> Option<Found> {
    let base = Path::new(name).file_name()?.to_str()?;
    // `python3.12`, `python3`, `perl5.36` are `python` and `perl`.
    let bare = base.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let bare = if bare.is_empty() { base } else { bare };
    if let Some(program) = PROGRAMS
        .iter()
        .find(|p| p.names.contains(&bare) || p.names.contains(&base))
    {
        return Some(Found::Program(program));
    }
    WRAPPERS
        .iter()
        .find(|w| w.names.contains(&base))
        .map(Found::Wrapper)
}

/// What an option of `program` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Code,
    Module,
    Preload,
    Config,
    ConfigEnv,
    Script,
    Valued,
}

impl Program {
    fn kind(&self, option: &str) -> Option<Kind> {
        [
            (self.code, Kind::Code),
            (self.module, Kind::Module),
            (self.preload, Kind::Preload),
            (self.config, Kind::Config),
            (self.config_env, Kind::ConfigEnv),
            (self.script, Kind::Script),
            (self.valued, Kind::Valued),
        ]
        .into_iter()
        .find(|(options, _)| options.contains(&option))
        .map(|(_, kind)| kind)
    }
}

/// The command `program` with `args`: options first, then its first operand.
fn command(
    program: &'static Program,
    program_label: &str,
    args: &[Arg<'_>],
    depth: usize,
    out: &mut Analysis,
) {
    if !program.reads.is_empty() {
        note(out, program_label, program.reads);
    }
    for file in program.project_files {
        candidate(out, format!("{program_label} reads"), file);
    }
    let mut code_operand = false;
    let mut code_given = false;
    // `npm --prefix DIR`, `yarn --cwd DIR`, `pnpm -C DIR`: the package.json is another's.
    let elsewhere = args.iter().any(|arg| {
        let name = arg.text.split_once('=').map_or(arg.text, |(name, _)| name);
        program.elsewhere.contains(&name)
    });
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let text = arg.text;
        if text == "--" {
            break;
        }
        if text.starts_with("--") || program.valued.contains(&text) {
            let (name, inline) = match text.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (text, None),
            };
            let Some(kind) = program.kind(name) else {
                continue;
            };
            let value = match inline {
                Some(value) => Some((arg, value)),
                None => rest.next().map(|next| (next, next.text)),
            };
            if let Some((at, value)) = value {
                code_given |= option(program, kind, at, value, depth, out);
                if program.ends_at_code && matches!(kind, Kind::Code | Kind::Module) {
                    return;
                }
            }
            continue;
        }
        if let Some(letters) = text.strip_prefix('-')
            && !letters.is_empty()
        {
            // Single-letter options, grouped (`-Bc`, `-lne`, `-ec`): the first that takes a
            // value takes the rest of the argument, or the next one.
            let mut ended = false;
            for (at, letter) in letters.char_indices() {
                let name = format!("-{letter}");
                if program.code_operand.contains(&name.as_str()) {
                    code_operand = true;
                }
                let Some(kind) = program.kind(&name) else {
                    continue;
                };
                let attached = letters.get(at + letter.len_utf8()..).unwrap_or_default();
                let value = if attached.is_empty() {
                    rest.next().map(|next| (next, next.text))
                } else {
                    Some((arg, attached))
                };
                if let Some((at, value)) = value {
                    code_given |= option(program, kind, at, value, depth, out);
                    ended = program.ends_at_code && matches!(kind, Kind::Code | Kind::Module);
                }
                break;
            }
            if ended {
                return;
            }
            continue;
        }
        operand(
            program,
            arg,
            rest.as_slice(),
            Seen {
                code_operand,
                code_given,
                elsewhere,
            },
            depth,
            out,
        );
        return;
    }
    if let Some(arg) = rest.next() {
        operand(
            program,
            arg,
            rest.as_slice(),
            Seen {
                code_operand,
                code_given,
                elsewhere,
            },
            depth,
            out,
        );
    }
}

/// An option's value; true when it gave the program its text (or the file it runs).
fn option(
    program: &Program,
    kind: Kind,
    arg: &Arg<'_>,
    value: &str,
    depth: usize,
    out: &mut Analysis,
) -> bool {
    match kind {
        Kind::Code => {
            code(program, arg, value, depth, out);
            true
        }
        Kind::Module => {
            module(arg, value, out);
            true
        }
        Kind::Preload => {
            note(
                out,
                &arg.label,
                &format!(
                    "loads `{value}` before the program; a file of that name in the workspace \
                     is bound below, a module found elsewhere is not"
                ),
            );
            candidate(out, arg.label.clone(), value);
            resolved(program, &arg.label, value, out);
            false
        }
        Kind::Config => {
            config(arg, value, depth, out);
            false
        }
        Kind::ConfigEnv => {
            config_env(arg, value, depth, out);
            false
        }
        Kind::Script => {
            note(
                out,
                &arg.label,
                &format!("runs the program in `{value}` (bound below when it is in the workspace)"),
            );
            candidate(out, arg.label.clone(), value);
            true
        }
        Kind::Valued => false,
    }
}

/// The first operand, and what it is.
/// What the options before a command's first operand said.
#[derive(Debug, Clone, Copy)]
struct Seen {
    /// A flag made the first operand program text (`sh -c`).
    code_operand: bool,
    /// An option gave the program its text or file (`-c CODE`, `-m MODULE`, `awk -f FILE`).
    code_given: bool,
    /// An option points the package manager at another directory's package.json.
    elsewhere: bool,
}

fn operand(
    program: &Program,
    arg: &Arg<'_>,
    rest: &[Arg<'_>],
    seen: Seen,
    depth: usize,
    out: &mut Analysis,
) {
    let Seen {
        code_operand,
        code_given,
        elsewhere,
    } = seen;
    if code_operand {
        code(program, arg, arg.text, depth, out);
        return;
    }
    if code_given {
        return;
    }
    match program.first_operand {
        Operand::Code => code(program, arg, arg.text, depth, out),
        Operand::Script => {
            if arg.text != "-" {
                note(
                    out,
                    &arg.label,
                    "the program file it runs (bound below when it is in the workspace)",
                );
                resolved(program, &arg.label, arg.text, out);
            }
        }
        Operand::Subcommand => {
            // `npm exec -c TEXT` and `npx -c TEXT` after the sub-command.
            if !program.code.is_empty() {
                let mut rest = rest.iter();
                while let Some(next) = rest.next() {
                    if program.code.contains(&next.text)
                        && let Some(value) = rest.next()
                    {
                        code(program, value, value.text, depth, out);
                    }
                }
            }
            // git's operands may be URLs that make it run a program (`git clone ext::…`),
            // and the remotes it may contact may be configured to. Any sub-command may
            // contact one: `fetch` and its kin, an alias of them (`[alias] f = fetch`),
            // `maintenance run --task=prefetch`, any object read in a partial clone.
            if program.names.contains(&"git") {
                git_urls(rest, depth, out);
                if elsewhere {
                    note(
                        out,
                        &arg.label,
                        "may contact the remotes of a repository in another directory (an \
                         option names it): what their URLs make git run is not shown and not \
                         bound",
                    );
                } else {
                    out.git_remote = Some(arg.label.clone());
                }
            }
            if elsewhere && program.scripts != Scripts::None {
                note(
                    out,
                    &arg.label,
                    "runs what another directory's package.json says (an option names it); \
                     its scripts are not shown and not bound",
                );
            } else {
                package_script(program, arg, rest, out);
            }
        }
    }
}

/// The package.json script a package manager's sub-command runs: `npm run NAME`,
/// `npm test`, `yarn NAME`, `pnpm NAME`. A name that is not a script of package.json is
/// left for [`show_package_scripts`] to pass over (`yarn install`).
fn package_script(program: &Program, subcommand: &Arg<'_>, rest: &[Arg<'_>], out: &mut Analysis) {
    if program.scripts == Scripts::None
        || (program.scripts == Scripts::RunOnly && subcommand.text != "run")
    {
        return;
    }
    let names: &[&str] = match subcommand.text {
        "run" | "run-script" | "rum" | "urn" => {
            match rest
                .iter()
                .map(|arg| arg.text)
                .find(|t| !t.starts_with('-'))
            {
                Some(name) => {
                    out.package_scripts
                        .push((subcommand.label.clone(), name.to_owned()));
                    return;
                }
                None => &[],
            }
        }
        "test" | "t" | "tst" => &["test"],
        "start" => &["start"],
        "stop" => &["stop"],
        "restart" => &["restart", "stop", "start"],
        // npm's install runs the root package's own lifecycle scripts.
        "install" | "i" | "ci" | "add" => &["install", "prepare"],
        other if program.scripts == Scripts::ByName => {
            // yarn and pnpm run a script by its name when it is not one of their commands;
            // one that is not a script is passed over when shown.
            out.package_scripts
                .push((subcommand.label.clone(), other.to_owned()));
            return;
        }
        _ => &[],
    };
    for name in names {
        out.package_scripts
            .push((subcommand.label.clone(), (*name).to_owned()));
    }
}

/// Most package.json scripts shown for one call, nested ones included.
const MAX_SCRIPTS_SHOWN: usize = 32;

/// Shows, in `analysis`'s notes, the text of every package.json script its package-manager
/// commands run (from `scripts`, package.json's `scripts` object), with the `pre` and `post`
/// scripts npm and yarn 1 run around it, and looks at each text as shell text in turn: what
/// a nested `npm run` runs is read from the same package.json, which is bound.
pub(crate) fn show_package_scripts(
    analysis: &mut Analysis,
    scripts: &serde_json::Map<String, serde_json::Value>,
    shown_already: &[&str],
) {
    let mut queue: Vec<(String, String)> = std::mem::take(&mut analysis.package_scripts);
    let mut seen: Vec<String> = shown_already.iter().map(|s| (*s).to_owned()).collect();
    let mut shown = 0;
    while let Some((label, name)) = queue.pop() {
        if !scripts.contains_key(&name) {
            continue;
        }
        for (script, how) in [
            (format!("pre{name}"), "before it (npm and yarn 1 run it)"),
            (name.clone(), ""),
            (format!("post{name}"), "after it (npm and yarn 1 run it)"),
        ] {
            let Some(text) = scripts.get(&script).and_then(serde_json::Value::as_str) else {
                continue;
            };
            if seen.contains(&script) {
                continue;
            }
            seen.push(script.clone());
            shown += 1;
            if shown > MAX_SCRIPTS_SHOWN {
                note(
                    analysis,
                    &label,
                    &format!(
                        "runs more package.json scripts than the {MAX_SCRIPTS_SHOWN} a preview \
                         shows; those past them are bound with package.json but not shown"
                    ),
                );
                return;
            }
            let runs = if how.is_empty() {
                format!("runs package.json script `{script}`, whose text the shell runs: {text:?}")
            } else {
                format!("runs package.json script `{script}` {how}: {text:?}")
            };
            note(analysis, &label, &runs);
            let mut inner = Analysis::default();
            shell(text, &format!("script `{script}`"), 0, &mut inner);
            for (label, path) in inner.candidates {
                // A plain word is looked up in `node_modules/.bin` first, as the package
                // manager puts it first in `PATH`: the program it runs.
                if !path.contains('/') && !path.starts_with(['-', '.']) {
                    candidate(
                        analysis,
                        label.clone(),
                        &format!("node_modules/.bin/{path}"),
                    );
                }
                candidate(analysis, label, &path);
            }
            for line in inner.notes {
                if !analysis.notes.contains(&line) {
                    analysis.notes.push(line);
                }
            }
            queue.extend(inner.package_scripts);
        }
    }
}

/// Program text given inline: its words that name files are bound, and the person is told
/// the rest is not.
fn code(program: &Program, arg: &Arg<'_>, text: &str, depth: usize, out: &mut Analysis) {
    let language = program.language;
    let what = match language {
        Language::Shell => "shell text, run as given",
        Language::Python => "Python code, run as given",
        Language::Other => "program text, run as given",
    };
    note(
        out,
        &arg.label,
        &format!(
            "{what}; the files it reads or runs are not covered by this approval, except \
             those its words name by path in the workspace, bound below"
        ),
    );
    match language {
        Language::Shell => shell(text, &arg.label, depth, out),
        Language::Python => {
            for word in words(text) {
                candidate(out, format!("{} word", arg.label), word);
                for file in module_files(word) {
                    candidate(out, format!("{} imports `{word}`", arg.label), &file);
                }
            }
        }
        Language::Other => {
            for word in words(text) {
                candidate(out, format!("{} word", arg.label), word);
                resolved(program, &format!("{} word", arg.label), word, out);
            }
        }
    }
}

/// The files a program would find for `name` by appending what it appends
/// ([`Program::resolves`]): `node job` runs `job.js`, `python3 pkg` runs `pkg/__main__.py`.
fn resolved(program: &Program, label: &str, name: &str, out: &mut Analysis) {
    let name = name.trim_end_matches('/');
    if name.is_empty() || name.contains(char::is_whitespace) {
        return;
    }
    for suffix in program.resolves {
        candidate(out, label.to_owned(), &format!("{name}{suffix}"));
    }
}

/// `python3 -m MODULE`: the files Python runs for it when they are in the working directory.
fn module(arg: &Arg<'_>, name: &str, out: &mut Analysis) {
    let files = module_files(name);
    if files.is_empty() {
        note(
            out,
            &arg.label,
            &format!(
                "runs module `{name}`, a name toolgate cannot look up; nothing is bound for it"
            ),
        );
        return;
    }
    note(
        out,
        &arg.label,
        &format!(
            "runs module `{name}`: Python looks in the working directory first ({}; bound \
             below when they exist), then among its installed packages, which are not bound",
            files
                .iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    );
    for file in files {
        candidate(out, format!("{} module", arg.label), &file);
    }
    if let Some((_, reads)) = PYTHON_MODULES
        .iter()
        .find(|(module, _)| *module == name || name.starts_with(&format!("{module}.")))
    {
        note(out, &arg.label, reads);
    }
}

/// Modules run with `python3 -m` that run more of the project's code than their name says.
const PYTHON_MODULES: &[(&str, &str)] = &[
    (
        "pytest",
        "pytest imports and runs the project's test code: every `test_*.py`, `conftest.py` and \
         plugin it finds; those are not bound",
    ),
    (
        "unittest",
        "unittest imports and runs the test modules it discovers (`test*.py`); those are not \
         bound",
    ),
    (
        "doctest",
        "doctest runs the examples in the files it is given",
    ),
    (
        "pip",
        "pip may build packages, which runs their build code (`setup.py`, a build backend); \
         that code is not bound",
    ),
    (
        "build",
        "build runs the project's build backend and its `setup.py`; those are not bound",
    ),
    (
        "coverage",
        "coverage runs the program its arguments name, and what it imports",
    ),
    ("runpy", "runpy runs the module or file its arguments name"),
    ("trace", "trace runs the program its arguments name"),
    ("cProfile", "cProfile runs the program its arguments name"),
    ("profile", "profile runs the program its arguments name"),
    ("pdb", "pdb runs the program its arguments name"),
    ("timeit", "timeit runs the code its arguments give"),
    (
        "tox",
        "tox runs the commands of the project's `tox.ini`; those are not bound",
    ),
    (
        "nox",
        "nox runs the project's `noxfile.py`; it is not bound",
    ),
];

/// The files Python would run or import for a dotted module name, relative to the directory
/// it searches: each package's `__init__.py`, then the module's `.py`, or its package's
/// `__init__.py` and `__main__.py`.
fn module_files(name: &str) -> Vec<String> {
    let parts: Vec<&str> = name.split('.').collect();
    let identifier = |part: &&str| {
        let mut chars = part.chars();
        chars.next().is_some_and(|c| c.is_alphabetic() || c == '_')
            && chars.all(|c| c.is_alphanumeric() || c == '_')
    };
    if parts.is_empty() || !parts.iter().all(identifier) {
        return Vec::new();
    }
    let mut files = Vec::new();
    let mut prefix = String::new();
    for (i, part) in parts.iter().enumerate() {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(part);
        if i + 1 < parts.len() {
            files.push(format!("{prefix}/__init__.py"));
        }
    }
    files.push(format!("{prefix}.py"));
    files.push(format!("{prefix}/__init__.py"));
    files.push(format!("{prefix}/__main__.py"));
    files
}

/// `git -c key=value`: what the key makes git run ([`git_keys::KEYS`]).
fn config(arg: &Arg<'_>, value: &str, depth: usize, out: &mut Analysis) {
    let Some((key, setting)) = value.split_once('=') else {
        note(out, &arg.label, "git configuration for this run");
        return;
    };
    let shown = key.to_ascii_lowercase();
    let found = git_keys::lookup_dotted(key);
    let plain = format!("git configuration `{shown}` for this run");
    let Some((row, subsection)) = found else {
        note(out, &arg.label, &plain);
        return;
    };
    match row.value {
        Value::Bang => match setting.strip_prefix('!') {
            Some(shell_command) if shown.starts_with("alias.") => {
                note(
                    out,
                    &arg.label,
                    &format!(
                        "a git alias that runs a shell command when the sub-command is `{}`: \
                         {shell_command:?}; the files it reads or runs are not covered by this \
                         approval, except those its words name by path in the workspace, bound \
                         below",
                        shown.strip_prefix("alias.").unwrap_or_default()
                    ),
                );
                shell(shell_command, &arg.label, depth, out);
            }
            Some(shell_command) => {
                note(
                    out,
                    &arg.label,
                    &format!(
                        "git configuration `{shown}` is a shell command: {shell_command:?} \
                         ({}); a file its words name in the workspace is bound below, what it \
                         runs in turn is not",
                        row.runs
                    ),
                );
                shell(shell_command, &arg.label, depth, out);
            }
            None => note(out, &arg.label, &plain),
        },
        Value::Program | Value::Include | Value::File | Value::Hooks => {
            note(
                out,
                &arg.label,
                &format!(
                    "git configuration `{shown}` names a program git runs or a file it reads: \
                     {setting:?}; a file of that name in the workspace is bound below, what it \
                     runs in turn is not"
                ),
            );
            // `!cmd` and `cmd args` run through the shell.
            shell(setting.trim_start_matches('!'), &arg.label, depth, out);
            if row.value == Value::Hooks {
                let dir = setting.trim_end_matches('/');
                for hook in git_keys::HOOKS {
                    candidate(out, arg.label.clone(), &format!("{dir}/{hook}"));
                }
            }
        }
        Value::Url | Value::BaseUrl => {
            let url = git_keys::url_of(row, subsection, setting).unwrap_or_default();
            match git_keys::url_runs(url) {
                Some(runs) => url_runs(
                    arg,
                    &format!("git configuration `{shown}` makes git contact"),
                    url,
                    &runs,
                    depth,
                    out,
                ),
                None => note(out, &arg.label, &plain),
            }
        }
        Value::Helper => note(
            out,
            &arg.label,
            &format!(
                "git configuration `{shown}` makes git run the remote helper \
                 `git-remote-{}` (from git's exec path or `PATH`, not bound) whenever it \
                 fetches from or pushes to that remote",
                setting.trim()
            ),
        ),
        Value::Allow => note(
            out,
            &arg.label,
            &format!(
                "git configuration `{shown}` = {setting:?} sets which transports git may use: \
                 {}; with `always`, the `ext::` URL of a remote, a submodule or an \
                 `insteadOf` makes git run its command",
                row.runs
            ),
        ),
    }
}

/// `git --config-env key=VARIABLE`: a key of [`git_keys::KEYS`] whose value git takes from
/// the environment, which this line does not show: named, so that a person sees that what
/// git runs is what the variable holds. The URL of `url.URL.insteadOf` is on the line, and
/// looked into as for `-c`. git splits at the last `=`, as a subsection may hold one.
fn config_env(arg: &Arg<'_>, value: &str, depth: usize, out: &mut Analysis) {
    let Some((key, variable)) = value.rsplit_once('=') else {
        note(
            out,
            &arg.label,
            "git configuration from the environment for this run",
        );
        return;
    };
    let shown = key.to_ascii_lowercase();
    let found = git_keys::lookup_dotted(key);
    let text = match found {
        Some((row, subsection)) => {
            if let Some(url) = git_keys::url_of(row, subsection, "")
                && let Some(runs) = git_keys::url_runs(url)
            {
                let what = format!("git configuration `{shown}` makes git contact");
                url_runs(arg, &what, url, &runs, depth, out);
            }
            format!(
                "git configuration `{shown}` takes its value from the environment variable \
                 `{variable}`, not shown here ({}): what git runs is what that variable \
                 holds, which is not bound",
                row.runs
            )
        }
        None => format!(
            "git configuration `{shown}` for this run, from the environment variable \
             `{variable}`"
        ),
    };
    note(out, &arg.label, &text);
}

/// What a URL git contacts makes it run (`what` says where the URL is): the command of an
/// `ext::` URL, shown and looked into as shell text, or a remote helper.
fn url_runs(arg: &Arg<'_>, what: &str, url: &str, runs: &Runs, depth: usize, out: &mut Analysis) {
    match runs {
        Runs::Command(words) => {
            let command = git_keys::shell_text(words);
            note(
                out,
                &arg.label,
                &format!(
                    "{what} the `ext::` URL {url:?}: on fetch, pull, push, clone, ls-remote, \
                     submodule update and remote update, git runs its command {command:?} \
                     where `protocol.ext.allow` (or `protocol.allow`) lets it; a file its words \
                     name in the workspace is bound below, what it runs in turn is not"
                ),
            );
            // git starts it without a shell: each word is one argument, maybe a path.
            for word in words.iter().filter(|w| !w.starts_with('-')) {
                candidate(out, format!("{} word", arg.label), word);
            }
            shell(&command, &arg.label, depth, out);
        }
        Runs::Helper(helper) => note(
            out,
            &arg.label,
            &format!(
                "{what} the URL {url:?}, for which git runs the remote helper \
                 `git-remote-{helper}` (from git's exec path or `PATH`, not bound)"
            ),
        ),
    }
}

/// A git sub-command's arguments that are URLs making git run a program: `git clone
/// ext::…`, `git fetch hg::…`, `git archive --remote=ext::…`.
fn git_urls(args: &[Arg<'_>], depth: usize, out: &mut Analysis) {
    for arg in args {
        let text = arg
            .text
            .strip_prefix("--")
            .and_then(|option| option.split_once('='))
            .map_or(arg.text, |(_, value)| value);
        if let Some(runs) = git_keys::url_runs(text) {
            url_runs(arg, "git contacts", text, &runs, depth, out);
        }
    }
}

/// A wrapper's arguments: its own options, then the command it starts.
fn wrapped(wrapper: &Wrapper, args: &[Arg<'_>], depth: usize, out: &mut Analysis) {
    let keys = git_config_keys(args.iter().map(|arg| arg.text));
    let mut rest = args.iter();
    let mut skip = wrapper.skip;
    while let Some(arg) = rest.next() {
        let text = arg.text;
        let name = text.split_once('=').map_or(text, |(name, _)| name);
        if wrapper.split.contains(&name) {
            // `env -S "python3 -m job"`: one argument split into the command's words, as the
            // shell would split them.
            let value = match text.split_once('=') {
                Some((_, value)) => Some(value),
                None => rest.next().map(|next| next.text),
            };
            if let Some(value) = value
                && depth < MAX_DEPTH
            {
                shell(value, &arg.label, depth + 1, out);
            }
            return;
        }
        if wrapper.opaque.contains(&name)
            || wrapper
                .opaque
                .iter()
                .any(|o| o.len() == 2 && text.starts_with(o) && text.len() > 2)
        {
            note(
                out,
                &arg.label,
                "starts its command somewhere toolgate does not follow; what that command \
                 reads is not looked into",
            );
            return;
        }
        if text == "--" {
            continue;
        }
        if text.starts_with('-') && text.len() > 1 {
            if wrapper.valued.contains(&text) {
                rest.next();
            }
            continue;
        }
        if wrapper.assignments && is_assignment(text) {
            assignment(&arg.label, text, out);
            git_config_pair(arg, &keys, depth, out);
            continue;
        }
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let remaining = rest.as_slice();
        match lookup(text) {
            Some(Found::Program(program)) if depth < MAX_DEPTH => {
                command(program, &arg.label, remaining, depth + 1, out);
            }
            Some(Found::Wrapper(inner)) if depth < MAX_DEPTH => {
                wrapped(inner, remaining, depth + 1, out);
            }
            _ => {}
        }
        return;
    }
}

/// Shell text: every word that could name a file, and each command looked at in turn.
fn shell(text: &str, label: &str, depth: usize, out: &mut Analysis) {
    // Commands first: what they run (`python3 -m job` → `job.py`) is more telling than a
    // word, and a text padded with words must not crowd it out of the candidates.
    if depth < MAX_DEPTH {
        shell_commands(text, label, depth, out);
    }
    for word in words(text) {
        candidate(out, format!("{label} word"), word);
    }
}

/// Each command of shell text, looked at as its program's arguments are.
fn shell_commands(text: &str, label: &str, depth: usize, out: &mut Analysis) {
    // After a `cd` the commands run in a directory toolgate does not follow: what they name
    // relative to it is not looked up, and no package.json script is shown for them.
    let mut moved = false;
    for command_text in text.split(['\n', ';', '&', '|', '(', ')', '`', '{', '}']) {
        let mut tokens = shell_words(command_text).into_iter().peekable();
        // Assignments and the words that only prefix a command.
        let mut prefix = Vec::new();
        while let Some(token) = tokens.next_if(|t| {
            is_assignment(t)
                || matches!(
                    t.as_str(),
                    "!" | "if" | "then" | "else" | "elif" | "do" | "while" | "until"
                )
        }) {
            prefix.push(token);
        }
        let keys = git_config_keys(prefix.iter().map(String::as_str));
        for token in prefix.iter().filter(|token| is_assignment(token)) {
            let arg = Arg {
                label: format!("{label}, in its text {token:?}"),
                text: token,
            };
            assignment(&arg.label, token, out);
            git_config_pair(&arg, &keys, depth, out);
        }
        let tokens: Vec<String> = tokens.collect();
        let Some((first, args)) = tokens.split_first() else {
            continue;
        };
        let inner_label = format!("{label}, in its text {first:?}");
        if matches!(first.as_str(), "cd" | "pushd" | "popd") {
            moved |= !matches!(
                args.first().map(String::as_str),
                Some("." | "./") if first == "cd"
            );
            continue;
        }
        if moved {
            if lookup(first).is_some() {
                note(
                    out,
                    &inner_label,
                    "runs after a `cd`, in a directory toolgate does not follow: the files it \
                     runs or reads there are not bound, and its package.json scripts are not \
                     shown",
                );
            }
            continue;
        }
        if first == "." || first == "source" {
            if let Some(file) = args.first() {
                note(
                    out,
                    &inner_label,
                    &format!(
                        "runs `{file}` in the shell (bound below when it is in the workspace); \
                         what that file sources or runs in turn is not bound"
                    ),
                );
            }
            continue;
        }
        let args: Vec<Arg<'_>> = args
            .iter()
            .map(|text| Arg {
                label: format!("{label}, in its text {text:?}"),
                text,
            })
            .collect();
        match lookup(first) {
            Some(Found::Program(program)) => command(program, &inner_label, &args, depth + 1, out),
            Some(Found::Wrapper(wrapper)) => wrapped(wrapper, &args, depth + 1, out),
            None => {}
        }
    }
}

/// Environment variables that make a program load code or configuration from a file they
/// name, whatever its arguments say.
const LOADING_VARIABLES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXEC_PATH",
    "GIT_ALLOW_PROTOCOL",
    "GIT_PROTOCOL_FROM_USER",
    "GIT_ASKPASS",
    "GIT_EXTERNAL_DIFF",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_PAGER",
    "GIT_EDITOR",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "SHELL",
];

/// `NAME=value` given to a command: its value is looked at as a path, and a variable that
/// makes programs load files is named.
fn assignment(label: &str, text: &str, out: &mut Analysis) {
    let Some((name, value)) = text.split_once('=') else {
        return;
    };
    if LOADING_VARIABLES.contains(&name)
        || name.starts_with("npm_config_")
        || name.starts_with("GIT_CONFIG_")
    {
        note(
            out,
            label,
            &format!(
                "sets `{name}`, with which programs load or run what it names ({value:?}); a \
                 file of that name in the workspace is bound below, what it loads in turn is \
                 not"
            ),
        );
    }
    for word in words(value) {
        candidate(out, label.to_owned(), word);
    }
    // `GIT_CONFIG_VALUE_0=ext::…` (with `GIT_CONFIG_KEY_0=remote.o.url`): the command git
    // runs for the URL, looked into one level.
    if name.starts_with("GIT_CONFIG_")
        && let Some(runs) = git_keys::url_runs(value)
    {
        let arg = Arg {
            label: label.to_owned(),
            text,
        };
        url_runs(
            &arg,
            &format!("`{name}` may make git contact"),
            value,
            &runs,
            MAX_DEPTH - 1,
            out,
        );
    }
}

/// Each `n` of a `GIT_CONFIG_KEY_n=KEY` among `texts`, with its key.
fn git_config_keys<'a>(texts: impl Iterator<Item = &'a str>) -> Vec<(&'a str, &'a str)> {
    texts
        .filter_map(|text| text.strip_prefix("GIT_CONFIG_KEY_")?.split_once('='))
        .collect()
}

/// `GIT_CONFIG_VALUE_n=VALUE` given beside its `GIT_CONFIG_KEY_n` (in `keys`): git takes
/// the pair as `git -c KEY=VALUE`, and so is it looked into ([`config`]).
fn git_config_pair(arg: &Arg<'_>, keys: &[(&str, &str)], depth: usize, out: &mut Analysis) {
    let Some((n, value)) = arg
        .text
        .strip_prefix("GIT_CONFIG_VALUE_")
        .and_then(|rest| rest.split_once('='))
    else {
        return;
    };
    if let Some((_, key)) = keys.iter().find(|(number, _)| *number == n) {
        config(arg, &format!("{key}={value}"), depth, out);
    }
}

/// `NAME=value` before a command.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}

/// A simple command's words, split at blanks outside quotes, quotes removed (an
/// approximation of the shell's, good enough to find a program and its options).
fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in text.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                started = true;
            }
            None if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            None => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The words of program text that could name a file: split at blanks, quotes, brackets and
/// the shell's operators, leaving out words with expansions or globs, which only the
/// program could resolve.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                ';' | '|'
                    | '&'
                    | '('
                    | ')'
                    | '<'
                    | '>'
                    | '"'
                    | '\''
                    | '`'
                    | '\\'
                    | ','
                    | '['
                    | ']'
                    | '{'
                    | '}'
                    | '='
                    | ':'
            )
    })
    .filter(|word| !word.is_empty() && !word.contains(['$', '*', '?', '~']))
}

fn candidate(out: &mut Analysis, label: String, path: &str) {
    if out.candidates.iter().any(|(_, p)| p == path) {
        return;
    }
    if out.candidates.len() < MAX_CANDIDATES {
        out.candidates.push((label, path.to_owned()));
        return;
    }
    if !out.candidates_left_out {
        out.candidates_left_out = true;
        // Past the notes' own bound too: the person must read that something is not bound.
        out.notes.push(format!(
            "{label}: past {MAX_CANDIDATES} names in these arguments, the rest are not looked \
             up: a file they name is not bound, and may change after this approval"
        ));
    }
}

fn note(out: &mut Analysis, label: &str, text: &str) {
    let line = format!("{label}: {text}");
    if out.notes.len() > MAX_NOTES || out.notes.contains(&line) {
        return;
    }
    if out.notes.len() == MAX_NOTES {
        out.notes.push(format!(
            "(past {MAX_NOTES} of these lines, what the rest of the text runs is not listed; \
             its text is shown above, and the files it reads are not covered by this approval \
             unless bound below)"
        ));
        return;
    }
    out.notes.push(line);
}

/// Most preview lines one argv yields: 64 KiB of `python3 -m x;` would otherwise make a
/// preview of megabytes.
const MAX_NOTES: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    fn of(argv: &[&str]) -> Analysis {
        let args: Vec<String> = argv.iter().skip(1).map(|a| (*a).to_owned()).collect();
        analyse(&argv[..1], &args)
    }

    fn paths(analysis: &Analysis) -> Vec<&str> {
        analysis
            .candidates
            .iter()
            .map(|(_, p)| p.as_str())
            .collect()
    }

    fn notes(analysis: &Analysis) -> String {
        analysis.notes.join("\n")
    }

    /// (argv, candidates that must be there, note fragments that must be there)
    #[test]
    fn spellings_yield_their_files_and_say_what_is_not_covered() {
        let table: &[(&[&str], &[&str], &[&str])] = &[
            (
                &["python3", "-m", "job"],
                &["job.py", "job/__init__.py", "job/__main__.py"],
                &["argv[2] \"job\": runs module `job`"],
            ),
            (
                &["python3.12", "-Im", "pkg.tool"],
                &["pkg/__init__.py", "pkg/tool.py", "pkg/tool/__main__.py"],
                &["runs module `pkg.tool`"],
            ),
            (
                &["python3", "-mjob"],
                &["job.py"],
                &["argv[1] \"-mjob\": runs module `job`"],
            ),
            (
                &["/usr/bin/python3", "-W", "ignore", "-m", "job", "-c", "x"],
                &["job.py"],
                &["runs module `job`"],
            ),
            (
                &["python3", "-c", "exec(open('job.py').read())"],
                &["job.py"],
                &["argv[2] \"exec(open('job.py').read())\": Python code, run as given"],
            ),
            (
                &["python3", "-c", "import helper"],
                &["helper.py", "helper/__init__.py"],
                &["not covered by this approval"],
            ),
            (
                &["sh", "-c", ". ./x.sh"],
                &["./x.sh"],
                &[
                    "argv[2] \". ./x.sh\": shell text, run as given",
                    "runs `./x.sh` in the shell",
                ],
            ),
            (
                &["bash", "-ec", "source lib.sh && go"],
                &["lib.sh"],
                &["shell text"],
            ),
            (
                &["sh", "-c", "python3 -m job"],
                &["job.py"],
                &["in its text \"job\": runs module `job`"],
            ),
            (
                &["node", "-e", "require('./x.js')"],
                &["./x.js"],
                &["program text, run as given"],
            ),
            (&["perl", "-lne", "do 'x.pl'"], &["x.pl"], &["program text"]),
            (&["ruby", "-e", "load 'x.rb'"], &["x.rb"], &["program text"]),
            (
                &["git", "-c", "alias.t=!sh ./x.sh", "t"],
                &["./x.sh"],
                &["a git alias that runs a shell command when the sub-command is `t`"],
            ),
            (
                &["git", "-c", "core.pager=./pager.sh", "log"],
                &["./pager.sh"],
                &["names a program git runs"],
            ),
            (
                &["env", "FOO=1", "timeout", "5", "python3", "-m", "job"],
                &["job.py"],
                &["runs module `job`"],
            ),
            (
                &["npm", "run", "build"],
                &["package.json", ".npmrc"],
                &["npm runs the scripts of the package.json"],
            ),
            (
                &["yarn", "test"],
                &[".yarnrc.yml", ".yarnrc"],
                &["yarn runs"],
            ),
            (&["awk", "{ print }", "data.txt"], &[], &["program text"]),
            (
                &["env", "BASH_ENV=./x.sh", "bash", "-c", "true"],
                &["./x.sh"],
                &["argv[1] \"BASH_ENV=./x.sh\": sets `BASH_ENV`"],
            ),
            (
                &["sh", "-c", "PYTHONPATH=lib python3 job.py --conf=job.toml"],
                &["lib", "job.py", "job.toml"],
                &["sets `PYTHONPATH`", "the program file it runs"],
            ),
            (
                &["python3", "tool"],
                &["tool/__main__.py"],
                &["the program file it runs"],
            ),
            (
                &["python3", "-m", "pytest", "-q"],
                &["pytest.py"],
                &["pytest imports and runs the project's test code"],
            ),
            (
                &["node", "-r", "./setup", "app"],
                &["./setup.js", "app.js", "app/index.js"],
                &["loads `./setup` before the program"],
            ),
            (
                &["node", "-e", "require('./job')"],
                &["./job.js", "./job/index.js"],
                &["program text"],
            ),
            (
                &["env", "-S", "python3 -m job"],
                &["job.py"],
                &["runs module `job`"],
            ),
            (
                &["git", "-c", "core.hooksPath=hooks", "commit"],
                &["hooks/pre-commit", "hooks/commit-msg"],
                &["`core.hookspath` names a program"],
            ),
            (
                &["git", "--config-env=Core.HooksPath=H", "commit"],
                &[],
                &["`core.hookspath` takes its value from the environment variable `H`"],
            ),
            (
                &["git", "--config-env", "alias.t=A", "t"],
                &[],
                &["`alias.t` takes its value from the environment variable `A`"],
            ),
            (
                &[
                    "git",
                    "--config-env=url.ext::sh ./i.sh a=b.insteadOf=V",
                    "fetch",
                ],
                &["./i.sh"],
                &[
                    "takes its value from the environment variable `V`",
                    "git runs its command \"sh ./i.sh a=b\"",
                ],
            ),
            (
                &[
                    "env",
                    "GIT_CONFIG_COUNT=1",
                    "GIT_CONFIG_KEY_0=alias.t",
                    "GIT_CONFIG_VALUE_0=!sh -c \"python3 -m job\"",
                    "git",
                    "t",
                ],
                &["job.py"],
                &["a git alias that runs a shell command when the sub-command is `t`"],
            ),
            (
                &[
                    "sh",
                    "-c",
                    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=Core.HooksPath GIT_CONFIG_VALUE_0=hk \
                     git commit",
                ],
                &["hk/pre-commit"],
                &["`core.hookspath` names a program"],
            ),
            (
                &["git", "-c", "branch.main.remote=ext::sh ./b.sh", "pull"],
                &["./b.sh"],
                &["git runs its command \"sh ./b.sh\""],
            ),
            (
                &["git", "-c", "hook.lint.command=./bin/lint", "commit"],
                &["./bin/lint"],
                &["`hook.lint.command` names a program"],
            ),
            (
                &["git", "-c", "init.templateDir=./tpl", "clone", "u", "d"],
                &["./tpl"],
                &["`init.templatedir` names a program"],
            ),
            (
                &["git", "-c", "gpg.ssh.defaultKeyCommand=./bin/key", "commit"],
                &["./bin/key"],
                &["`gpg.ssh.defaultkeycommand` names a program"],
            ),
            (
                &["git", "-c", "sendemail.toCmd=./bin/to", "send-email"],
                &["./bin/to"],
                &["`sendemail.tocmd` names a program"],
            ),
            (
                &["git", "-c", "imap.tunnel=./bin/tunnel", "imap-send"],
                &["./bin/tunnel"],
                &["`imap.tunnel` names a program"],
            ),
            (
                &["git", "-c", "remote.o.url=ext::sh ./x.sh %S", "fetch", "o"],
                &["./x.sh"],
                &[
                    "`remote.o.url` makes git contact the `ext::` URL \"ext::sh ./x.sh %S\"",
                    "git runs its command \"sh ./x.sh git-upload-pack\"",
                ],
            ),
            (
                &[
                    "git",
                    "-c",
                    "Remote.O.PushURL=ext::./bin/p% q.sh",
                    "push",
                    "o",
                ],
                &["./bin/p q.sh"],
                &["git runs its command \"'./bin/p q.sh'\""],
            ),
            (
                &[
                    "git",
                    "-c",
                    "url.ext::sh ./y.sh.insteadOf=https://h/",
                    "fetch",
                    "https://h/r",
                ],
                &["./y.sh"],
                &["`url.ext::sh ./y.sh.insteadof` makes git contact the `ext::` URL"],
            ),
            (
                &[
                    "git",
                    "-c",
                    "URL.ext::./y.sh.PushInsteadOf=https://h/",
                    "push",
                ],
                &["./y.sh"],
                &["git runs its command \"./y.sh\""],
            ),
            (
                &["git", "-c", "protocol.ext.allow=always", "fetch"],
                &[],
                &["`protocol.ext.allow` = \"always\" sets which transports git may use"],
            ),
            (
                &["git", "-c", "Protocol.Allow=always", "pull"],
                &[],
                &["`protocol.allow` = \"always\" sets which transports git may use"],
            ),
            (
                &["git", "-c", "remote.o.vcs=hg", "fetch", "o"],
                &[],
                &["`remote.o.vcs` makes git run the remote helper `git-remote-hg`"],
            ),
            (
                &[
                    "git",
                    "-c",
                    "remote.o.url=hg::https://example.com/r",
                    "fetch",
                    "o",
                ],
                &[],
                &["for which git runs the remote helper `git-remote-hg`"],
            ),
            (
                &[
                    "git",
                    "-c",
                    "remote.o.url=ext::sh -c \"./q.sh\"",
                    "fetch",
                    "o",
                ],
                &["./q.sh"],
                &["git runs its command \"sh -c '\\\"./q.sh\\\"'\""],
            ),
            (
                &[
                    "env",
                    "GIT_ALLOW_PROTOCOL=ext",
                    "GIT_CONFIG_COUNT=1",
                    "GIT_CONFIG_KEY_0=remote.o.url",
                    "GIT_CONFIG_VALUE_0=ext::sh ./e.sh",
                    "git",
                    "fetch",
                    "o",
                ],
                &["./e.sh"],
                &[
                    "sets `GIT_ALLOW_PROTOCOL`",
                    "`GIT_CONFIG_VALUE_0` may make git contact the `ext::` URL",
                ],
            ),
            (
                &["git", "clone", "ext::sh -c ./z.sh% >&2", "d"],
                &["./z.sh"],
                &["git contacts the `ext::` URL \"ext::sh -c ./z.sh% >&2\""],
            ),
            (
                &["git", "fetch", "hg::https://example.com/r"],
                &[],
                &["git runs the remote helper `git-remote-hg`"],
            ),
            (
                &["git", "-C", "d", "archive", "--remote=ext::./a.sh", "HEAD"],
                &["./a.sh"],
                &["git runs its command \"./a.sh\""],
            ),
            (
                &[
                    "git",
                    "-c",
                    "submodule.s.url=ext::./s.sh",
                    "submodule",
                    "update",
                ],
                &["./s.sh"],
                &["`submodule.s.url` makes git contact the `ext::` URL"],
            ),
            (
                &[
                    "git",
                    "-c",
                    "submodule.s.update=!./u.sh",
                    "submodule",
                    "update",
                ],
                &["./u.sh"],
                &["`submodule.s.update` is a shell command"],
            ),
            (
                &["busybox", "sh", "-c", ". ./x.sh"],
                &["./x.sh"],
                &["shell text"],
            ),
            (
                &["fish", "-c", "source x.fish"],
                &["x.fish"],
                &["shell text"],
            ),
            (
                &["uv", "run", "python", "-m", "job"],
                &["job.py"],
                &["runs module `job`"],
            ),
        ];
        for (argv, wanted, said) in table {
            let analysis = of(argv);
            let found = paths(&analysis);
            for path in *wanted {
                assert!(found.contains(path), "{argv:?}: `{path}` not in {found:?}");
            }
            let text = notes(&analysis);
            for fragment in *said {
                assert!(
                    text.contains(fragment),
                    "{argv:?}: `{fragment}` not in\n{text}"
                );
            }
        }
    }

    #[test]
    fn arguments_after_the_program_are_its_own() {
        // `-c` after the script, or after `-c`'s code, is the program's argument.
        let analysis = of(&["python3", "job.py", "-c", "x.py"]);
        assert!(!paths(&analysis).contains(&"x.py"), "{analysis:?}");
        assert!(notes(&analysis).contains("argv[1] \"job.py\": the program file it runs"));
        let analysis = of(&["python3", "-c", "pass", "-m", "job"]);
        assert!(!paths(&analysis).contains(&"job.py"), "{analysis:?}");
        let analysis = of(&["git", "commit", "-c", "alias.x=!sh y.sh"]);
        assert!(!paths(&analysis).contains(&"y.sh"), "{analysis:?}");
        // A program toolgate does not know yields nothing.
        assert_eq!(of(&["cargo", "test", "-c", "x"]), Analysis::default());
        // Module names that are not Python identifiers bind nothing.
        assert!(module_files("../x").is_empty());
        assert!(module_files("a..b").is_empty());
    }

    #[test]
    fn long_texts_yield_bounded_previews() {
        let text: String = (0..4000).map(|i| format!("python3 -m job{i}; ")).collect();
        let analysis = of(&["sh", "-c", &text]);
        // The listed lines, the line saying the rest are not listed, and the line saying
        // names past the candidates' bound are not looked up.
        assert_eq!(analysis.notes.len(), MAX_NOTES + 2);
        assert!(analysis.notes[MAX_NOTES].contains("is not listed"));
        assert!(analysis.notes[MAX_NOTES + 1].contains("the rest are not looked up"));
        assert!(analysis.candidates.len() <= MAX_CANDIDATES);
        assert!(paths(&analysis).contains(&"job0.py"));
        // Words that crowd out the rest are said to be left out.
        let words: String = (0..MAX_CANDIDATES + 10).map(|i| format!("w{i} ")).collect();
        let padded = format!("echo {words}; python3 -m job");
        let analysis = of(&["sh", "-c", &padded]);
        assert!(paths(&analysis).contains(&"job.py"), "commands come first");
        let text = notes(&analysis);
        assert!(text.contains("the rest are not looked up"), "{text}");
    }

    #[test]
    fn nested_package_scripts_are_shown_and_looked_into() {
        let scripts: serde_json::Value = serde_json::json!({
            "test": "npm run --silent inner && yarn lint",
            "preinner": "echo pre",
            "inner": "python3 -m job",
            "lint": "sh -c '. ./x.sh'",
            "loop": "npm run loop",
        });
        let scripts = scripts.as_object().unwrap();
        let mut analysis = shell_text(
            "npm test; pnpm loop; yarn install; npx lint; npm lint",
            "`test`",
        );
        show_package_scripts(&mut analysis, scripts, &[]);
        let text = notes(&analysis);
        for fragment in [
            "runs package.json script `test`, whose text the shell runs: \"npm run --silent \
             inner && yarn lint\"",
            "runs package.json script `preinner` before it",
            "runs package.json script `inner`, whose text the shell runs: \"python3 -m job\"",
            "script `inner`, in its text \"job\": runs module `job`",
            "runs package.json script `lint`",
            "runs package.json script `loop`",
        ] {
            assert!(text.contains(fragment), "`{fragment}` not in\n{text}");
        }
        assert!(!text.contains("`install`"), "{text}");
        // npx runs a program, and `npm lint` is no npm command: neither runs a script.
        let mut other = shell_text("npx lint; npm lint; npm exec loop; bun test", "`x`");
        assert!(other.package_scripts.is_empty(), "{other:?}");
        let moved = shell_text(
            "npm --prefix sub test; yarn --cwd=sub lint; cd sub && npm run inner",
            "`x`",
        );
        assert!(moved.package_scripts.is_empty(), "{moved:?}");
        assert!(notes(&moved).contains("another directory's package.json"));
        assert!(notes(&moved).contains("runs after a `cd`"), "{moved:?}");
        let stayed = shell_text("cd . && npm run inner", "`x`");
        assert_eq!(stayed.package_scripts.len(), 1, "{stayed:?}");
        show_package_scripts(&mut other, scripts, &[]);
        assert!(
            !notes(&other).contains("runs package.json script `"),
            "{other:?}"
        );
        let found = paths(&analysis);
        assert!(
            found.contains(&"job.py") && found.contains(&"./x.sh"),
            "{found:?}"
        );
        assert!(found.contains(&"node_modules/.bin/python3"), "{found:?}");
    }

    #[test]
    fn pins_replace_what_the_environment_held() {
        let mut env = vec![
            ("PATH".to_owned(), "/bin".to_owned()),
            ("npm_config_script_shell".to_owned(), "./evil.sh".to_owned()),
        ];
        pin_package_managers(&mut env);
        let get = |name: &str| {
            env.iter()
                .filter(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
        };
        assert_eq!(get("npm_config_script_shell"), ["/bin/sh"]);
        assert_eq!(get("YARN_IGNORE_PATH"), ["1"]);
        assert_eq!(get("PATH"), ["/bin"]);
        assert!(pins_preview().contains("npm_config_script_shell=\"/bin/sh\""));
    }
}
