//! Files that another program runs later, with the user's full authority and outside any
//! sandbox: git's own files, agent clients' configuration, environment loaders, package
//! managers' code-running configuration, and shell and tool startup files. They are one kind,
//! named once here, as data ([`FILES`]), each with the program that runs it.
//!
//! Three parts of toolgate read this table:
//!
//! - stage 4 tags a call with the kinds of these files it *writes* (`context.runs_later`), and
//!   the default policy forbids each kind with a rule of its own (`runs-later-agent-config`,
//!   …) that only the operator's own policy can replace; no standing workspace grant covers
//!   such a write (stage 6);
//! - the tools that run processes (commands, project scripts, upstream servers) take a
//!   snapshot of every such file in the workspace before a process runs and compare it after
//!   ([`guard`] says which paths the snapshot holds), undoing and refusing any change the
//!   person did not approve by name;
//! - where the kernel can make a mount namespace, the existing ones are bound read-only for
//!   the process, so that it cannot even rename them.
//!
//! Matching is on workspace-relative paths, component by component, ignoring ASCII case (a
//! workspace may live on a case-insensitive file system).
//!
//! ```
//! use toolgate_core::runs_later::{self, Guard};
//!
//! assert_eq!(runs_later::kind_of(".claude/settings.json").map(|f| f.kind), Some("agent_config"));
//! assert_eq!(runs_later::kind_of("app/.git/hooks/pre-commit").map(|f| f.kind), Some("git"));
//! assert_eq!(runs_later::kind_of("src/main.rs"), None);
//! // A snapshot descends into a git dir only for the parts that run.
//! assert_eq!(runs_later::guard(".git/refs", true), Guard::Skip);
//! ```

/// One file, or directory with everything in it, that a program runs or obeys later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaterFile {
    /// Its path, `/`-separated, lowercase; relative to [`LaterFile::at`].
    pub path: &'static str,
    /// Whether it is a directory covered with everything in it.
    pub dir: bool,
    /// Where the path is looked for.
    pub at: Anchor,
    /// The kind, as policies see it in `context.runs_later`.
    pub kind: &'static str,
    /// Which program runs it, and when: shown to the person and in the documentation.
    pub runs: &'static str,
}

/// Where a [`LaterFile`]'s path is looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// In any directory of the workspace: the program reads it wherever it is started.
    Anywhere,
    /// At the workspace root only: startup files, which matter where the workspace is the
    /// home directory.
    Root,
    /// Inside a git directory (`.git`, or one of its submodules' and worktrees' directories).
    GitDir,
}

/// The kinds, each forbidden to the write tools by a default rule `runs-later-<kind>` (with
/// `_` as `-`).
pub const KINDS: [&str; 5] = [
    "git",
    "agent_config",
    "env_loader",
    "build_config",
    "shell_startup",
];

const fn anywhere(
    path: &'static str,
    dir: bool,
    kind: &'static str,
    runs: &'static str,
) -> LaterFile {
    LaterFile {
        path,
        dir,
        at: Anchor::Anywhere,
        kind,
        runs,
    }
}

const fn root(path: &'static str, dir: bool, runs: &'static str) -> LaterFile {
    LaterFile {
        path,
        dir,
        at: Anchor::Root,
        kind: "shell_startup",
        runs,
    }
}

const fn git(path: &'static str, dir: bool, runs: &'static str) -> LaterFile {
    LaterFile {
        path,
        dir,
        at: Anchor::GitDir,
        kind: "git",
        runs,
    }
}

const AGENT: &str = "agent_config";
const ENV: &str = "env_loader";
const BUILD: &str = "build_config";

/// Every file that runs later, in the order they are checked.
pub const FILES: &[LaterFile] = &[
    // Git's own files. The git directory itself is guarded too: it may not be created,
    // replaced or renamed (see `guard`).
    git(
        "config",
        false,
        "git obeys it on every command: `core.fsmonitor`, `core.pager`, `core.sshCommand`, aliases, filters and `core.hooksPath` run programs",
    ),
    git(
        "config.worktree",
        false,
        "git obeys it like `config` in a worktree",
    ),
    git(
        "hooks",
        true,
        "git runs its hooks on commit, checkout, merge, push and more",
    ),
    git(
        "commondir",
        false,
        "git reads the repository named there, with its config and hooks",
    ),
    git(
        "gitdir",
        false,
        "git finds a worktree's repository through it",
    ),
    git(
        "objects/info/alternates",
        false,
        "git reads objects of the repositories named there",
    ),
    git(
        "objects/info/http-alternates",
        false,
        "git fetches objects from the addresses named there",
    ),
    git(
        "info/attributes",
        false,
        "git applies the filter and diff drivers it selects on checkout, add and diff",
    ),
    // Agent clients' configuration: servers they start, hooks they run, tasks on open.
    anywhere(
        ".mcp.json",
        false,
        AGENT,
        "Claude Code starts the MCP servers it names",
    ),
    anywhere(
        ".claude",
        true,
        AGENT,
        "Claude Code runs the hooks, MCP servers and commands of its settings",
    ),
    anywhere(
        ".codex",
        true,
        AGENT,
        "Codex CLI reads its configuration: MCP servers, hooks, the model's address",
    ),
    anywhere(
        ".cursor",
        true,
        AGENT,
        "Cursor starts the MCP servers of `mcp.json` and runs its hooks",
    ),
    anywhere(
        ".vscode",
        true,
        AGENT,
        "VS Code runs tasks on folder open and obeys its settings (terminal profiles, tool paths)",
    ),
    anywhere(
        ".devcontainer",
        true,
        AGENT,
        "dev container tools run `postCreateCommand` and the like",
    ),
    anywhere(
        ".devcontainer.json",
        false,
        AGENT,
        "dev container tools run `postCreateCommand` and the like",
    ),
    anywhere(
        ".idea",
        true,
        AGENT,
        "JetBrains IDEs run startup tasks and external tools it configures",
    ),
    anywhere(
        ".zed",
        true,
        AGENT,
        "Zed runs its tasks and language servers",
    ),
    anywhere(
        ".gemini",
        true,
        AGENT,
        "Gemini CLI starts the MCP servers and runs the hooks of its settings",
    ),
    anywhere(
        ".windsurf",
        true,
        AGENT,
        "Windsurf starts the MCP servers and runs the hooks it configures",
    ),
    anywhere(
        ".continue",
        true,
        AGENT,
        "Continue starts the MCP servers it configures",
    ),
    anywhere(
        ".amazonq",
        true,
        AGENT,
        "Amazon Q starts the MCP servers of `mcp.json`",
    ),
    anywhere(".kiro", true, AGENT, "Kiro runs its hooks and MCP servers"),
    anywhere(
        ".roo",
        true,
        AGENT,
        "Roo Code starts the MCP servers of `mcp.json`",
    ),
    anywhere(
        ".opencode",
        true,
        AGENT,
        "opencode runs its plugins and MCP servers",
    ),
    anywhere(
        "opencode.json",
        false,
        AGENT,
        "opencode starts the MCP servers it names",
    ),
    anywhere(
        "opencode.jsonc",
        false,
        AGENT,
        "opencode starts the MCP servers it names",
    ),
    anywhere(
        ".toolgate",
        true,
        AGENT,
        "toolgate reads a project's configuration there",
    ),
    // Environment loaders, run by the shell on entering a directory.
    anywhere(
        ".envrc",
        false,
        ENV,
        "direnv runs it as shell code on entering the directory",
    ),
    anywhere(
        ".env.leave",
        false,
        ENV,
        "autoenv runs it as shell code on leaving the directory",
    ),
    anywhere(
        "mise.toml",
        false,
        ENV,
        "mise runs the tasks, hooks and `_.source` scripts it names on entering the directory",
    ),
    anywhere(
        ".mise.toml",
        false,
        ENV,
        "mise runs the tasks, hooks and `_.source` scripts it names on entering the directory",
    ),
    anywhere(
        ".mise",
        true,
        ENV,
        "mise reads its configuration and tasks there",
    ),
    anywhere(
        ".config/mise",
        true,
        ENV,
        "mise reads its configuration and tasks there",
    ),
    anywhere(
        ".rtx.toml",
        false,
        ENV,
        "mise (formerly rtx) runs what it names on entering the directory",
    ),
    // Package managers' and build tools' code-running configuration.
    anywhere(
        ".npmrc",
        false,
        BUILD,
        "npm, pnpm and npx obey `script-shell`, `node-options` and `git` there",
    ),
    anywhere(
        ".yarnrc",
        false,
        BUILD,
        "yarn 1 obeys `yarn-path` there, a program it runs in its own place",
    ),
    anywhere(
        ".yarnrc.yml",
        false,
        BUILD,
        "yarn 2+ runs the file `yarnPath` names, and loads its plugins",
    ),
    anywhere(
        "pnpm-workspace.yaml",
        false,
        BUILD,
        "pnpm obeys the settings it holds (the programs and options scripts run with)",
    ),
    anywhere(
        ".env.yarn",
        false,
        BUILD,
        "yarn 4 loads it into every script's environment (`NODE_OPTIONS` among them)",
    ),
    anywhere(
        ".pnpmfile.cjs",
        false,
        BUILD,
        "pnpm runs it on every install",
    ),
    anywhere(
        "bunfig.toml",
        false,
        BUILD,
        "bun preloads the scripts it names",
    ),
    anywhere(
        ".cargo/config",
        false,
        BUILD,
        "cargo runs its `runner`, `rustc-wrapper` and `linker` programs",
    ),
    anywhere(
        ".cargo/config.toml",
        false,
        BUILD,
        "cargo runs its `runner`, `rustc-wrapper` and `linker` programs",
    ),
    anywhere(
        "rust-toolchain",
        false,
        BUILD,
        "rustup runs the toolchain it names, which may be a path",
    ),
    anywhere(
        "rust-toolchain.toml",
        false,
        BUILD,
        "rustup runs the toolchain it names, which may be a path",
    ),
    anywhere(
        ".pip",
        true,
        BUILD,
        "pip obeys its configuration (indexes, build options)",
    ),
    anywhere(
        "pip.conf",
        false,
        BUILD,
        "pip obeys its configuration (indexes, build options)",
    ),
    anywhere(
        ".mvn",
        true,
        BUILD,
        "Maven loads the extensions and JVM options configured there",
    ),
    anywhere(
        "gradle/wrapper/gradle-wrapper.properties",
        false,
        BUILD,
        "the Gradle wrapper downloads and runs the distribution it names",
    ),
    anywhere(
        ".bundle/config",
        false,
        BUILD,
        "Bundler obeys it (the Gemfile to load, build options)",
    ),
    anywhere(
        ".bazelrc",
        false,
        BUILD,
        "Bazel obeys its options on every command",
    ),
    anywhere(
        ".husky",
        true,
        BUILD,
        "git runs these hooks where `core.hooksPath` names the directory",
    ),
    anywhere(
        ".githooks",
        true,
        BUILD,
        "git runs these hooks where `core.hooksPath` names the directory",
    ),
    anywhere(
        ".pre-commit-config.yaml",
        false,
        BUILD,
        "pre-commit, run by git's hook, runs the programs it names",
    ),
    anywhere(
        "lefthook.yml",
        false,
        BUILD,
        "lefthook, run by git's hooks, runs the commands it names",
    ),
    // Shell and tool startup files, where the workspace is the home directory.
    root(".bashrc", false, "bash runs it in every interactive shell"),
    root(".bash_profile", false, "bash runs it in every login shell"),
    root(".bash_login", false, "bash runs it in every login shell"),
    root(
        ".bash_logout",
        false,
        "bash runs it when a login shell exits",
    ),
    root(".profile", false, "sh and bash run it in every login shell"),
    root(".zshrc", false, "zsh runs it in every interactive shell"),
    root(".zshenv", false, "zsh runs it in every shell"),
    root(".zprofile", false, "zsh runs it in every login shell"),
    root(".zlogin", false, "zsh runs it in every login shell"),
    root(".zlogout", false, "zsh runs it when a login shell exits"),
    root(
        ".config/fish",
        true,
        "fish runs its configuration in every shell",
    ),
    root(".inputrc", false, "readline obeys it in every shell"),
    root(
        ".gitconfig",
        false,
        "git obeys it in every repository, as `.git/config`",
    ),
    root(
        ".config/git",
        true,
        "git obeys its configuration, attributes and hooks there in every repository",
    ),
    root(
        ".ssh/config",
        false,
        "ssh runs its `ProxyCommand` and `LocalCommand`",
    ),
    root(".vimrc", false, "vim runs it on start"),
    root(
        ".config/nvim",
        true,
        "Neovim runs its configuration on start",
    ),
    root(".emacs", false, "Emacs runs it on start"),
    root(".emacs.d", true, "Emacs runs its configuration on start"),
    root(".tmux.conf", false, "tmux runs its commands on start"),
    root(
        ".config/autostart",
        true,
        "the desktop session starts these programs at login",
    ),
    root(
        ".config/systemd",
        true,
        "systemd's user manager starts these units",
    ),
    root(
        ".config/environment.d",
        true,
        "systemd's user manager sets these variables for every program",
    ),
    root(
        ".local/bin",
        true,
        "the shell finds programs here first, before the system's",
    ),
    root(
        ".pam_environment",
        false,
        "PAM sets these variables at login",
    ),
    root(".xprofile", false, "the display manager runs it at login"),
];

/// The git directory itself, or a `.git` file pointing to one: git reads the repository it
/// names, config and hooks included.
pub const GIT_DIR: LaterFile = LaterFile {
    path: ".git",
    dir: true,
    at: Anchor::Anywhere,
    kind: "git",
    runs: "git uses the repository found there, with its config and hooks, in this directory and every one below",
};

/// A path a repository's git configuration names as code git runs or reads later, beyond
/// the table: what `include.path`, `includeIf.*.path` or `core.hooksPath` names, and a
/// program inside the workspace that `core.fsmonitor`, `core.sshCommand`, a diff driver's
/// `textconv`, a filter's `clean`, `smudge` or `process`, or the `ext::` URL of a remote, a
/// submodule or an `insteadOf` runs. Which keys those are, and which paths they name, the
/// caller reads from the workspace (toolgate-tools' one table of git's program keys); this
/// module matches the paths ([`kind_of_with`], [`guard_with`]).
pub const NAMED_BY_GIT: LaterFile = LaterFile {
    path: "",
    dir: true,
    at: Anchor::Anywhere,
    kind: "git",
    runs: "git runs or reads it where a repository's config names it (`include.path`, `core.hooksPath`, `core.fsmonitor`, `core.sshCommand`, a diff driver's `textconv`, a filter's `clean`, `smudge` or `process`, the command of an `ext::` remote or submodule URL)",
};

/// How a snapshot of the files that run later treats one entry of the workspace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// Not guarded, and nothing beneath it (if it is a directory) needs looking at.
    Skip,
    /// Not guarded itself; a directory to look into.
    Descend,
    /// A git directory: guarded itself (it may not appear, go or change its kind), and looked
    /// into for the parts that run.
    GitDir,
    /// Guarded, with everything beneath it.
    Whole,
}

/// How a snapshot treats the workspace-relative `path` (`/`-separated, as found by a walk
/// from the root), which is a directory when `is_dir`. A path inside a [`Guard::Whole`]
/// directory is never asked about.
pub fn guard(path: &str, is_dir: bool) -> Guard {
    // Most of a tree is neither in a git directory nor named like an entry: answered without
    // allocating.
    let name = path.rsplit('/').next().unwrap_or(path);
    let in_git = path.split('/').any(|c| c.eq_ignore_ascii_case(".git"));
    let named = FILES.iter().any(|file| {
        file.at != Anchor::GitDir
            && file
                .path
                .rsplit('/')
                .next()
                .is_some_and(|last| last.eq_ignore_ascii_case(name))
    });
    if !in_git && !named {
        // Installed packages are not walked: a package's own `.vscode/` or `.npmrc` is not
        // what a client or package manager reads for the project, and the tree can hold
        // hundreds of thousands of files.
        if is_dir && name.eq_ignore_ascii_case("node_modules") {
            return Guard::Skip;
        }
        return if is_dir { Guard::Descend } else { Guard::Skip };
    }
    let lower = path.to_ascii_lowercase();
    let components: Vec<&str> = lower.split('/').filter(|c| !c.is_empty()).collect();
    let Some((name, _)) = components.split_last() else {
        return Guard::Descend;
    };
    // A `.git` file points to a repository elsewhere: it is guarded whole (its text), and a
    // `.git` directory is a git directory.
    if *name == ".git" {
        return if is_dir { Guard::GitDir } else { Guard::Whole };
    }
    if let Some(inside) = git_dir_part(&components) {
        return inside_git_dir(&inside, is_dir);
    }
    // A walk asks about a directory before what it holds, so only an entry whose last name is
    // this one's can be this one: a cheap test first, for the many files of a tree. An entry
    // at the root may have several names (`.config/git`): its depth is compared, not whether
    // this path has parents.
    let guarded = FILES.iter().any(|file| {
        file.at != Anchor::GitDir
            && file.path.rsplit('/').next() == Some(*name)
            && ends_with(&components, file.path)
            && (file.at == Anchor::Anywhere || components.len() == file.path.split('/').count())
    });
    if guarded {
        Guard::Whole
    } else if is_dir {
        Guard::Descend
    } else {
        Guard::Skip
    }
}

/// [`guard`], where `named` (workspace-relative, `/`-separated) are the paths a repository's
/// configuration names ([`NAMED_BY_GIT`]): each is guarded whole, and the directories
/// leading to one are looked into, wherever they are (inside a git directory or
/// `node_modules` too).
pub fn guard_with(path: &str, is_dir: bool, named: &[String]) -> Guard {
    let plain = guard(path, is_dir);
    if named.is_empty() {
        return plain;
    }
    let components = lowered(path);
    let covered = named_covers(named, &components);
    let leads_to_named = is_dir
        && named.iter().any(|n| {
            let n = lowered(n);
            n.len() > components.len() && n.starts_with(&components)
        });
    // Installed packages are walked only along the way to a named path (see `guard`).
    let in_packages = components
        .split_last()
        .is_some_and(|(_, parents)| parents.iter().any(|c| c == "node_modules"));
    match plain {
        // A git directory stays one, looked into for its parts, even where it is named itself.
        Guard::GitDir => Guard::GitDir,
        _ if covered => Guard::Whole,
        Guard::Whole if !in_packages => Guard::Whole,
        _ if leads_to_named => Guard::Descend,
        _ if in_packages => Guard::Skip,
        other => other,
    }
}

/// [`kind_of`], and [`NAMED_BY_GIT`] for a path that is, or is in, one of `named`.
pub fn kind_of_with(path: &str, named: &[String]) -> Option<&'static LaterFile> {
    // Stage 4 asks this of every path a call writes, most often with nothing named: then
    // the path is not split and lowered for nothing.
    kind_of(path).or_else(|| {
        (!named.is_empty() && named_covers(named, &lowered(path))).then_some(&NAMED_BY_GIT)
    })
}

/// [`kinds`], where `named` are the paths a repository's configuration names.
pub fn kinds_with(paths: &[String], named: &[String]) -> Vec<&'static str> {
    let found: Vec<&str> = paths
        .iter()
        .filter_map(|p| kind_of_with(p, named))
        .map(|f| f.kind)
        .collect();
    KINDS
        .iter()
        .copied()
        .filter(|k| found.contains(k))
        .collect()
}

/// The lowercase components of a workspace-relative path, without empty ones and `.`.
fn lowered(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether `components` are one of `named`, or beneath one.
fn named_covers(named: &[String], components: &[String]) -> bool {
    named.iter().any(|n| {
        let n = lowered(n);
        !n.is_empty() && components.starts_with(&n)
    })
}

/// Whether the last components of `components` are those of `path`.
fn ends_with(components: &[&str], path: &str) -> bool {
    let count = path.split('/').count();
    components
        .len()
        .checked_sub(count)
        .and_then(|start| components.get(start..))
        .is_some_and(|tail| tail.iter().copied().eq(path.split('/')))
}

/// Inside a git directory, the parts below the innermost `.git` (`["hooks", "pre-commit"]`);
/// `None` outside one.
fn git_dir_part<'a>(components: &[&'a str]) -> Option<Vec<&'a str>> {
    let start = components.iter().rposition(|c| *c == ".git")?;
    Some(components.get(start + 1..)?.to_vec())
}

/// Whether `parts`, inside a git directory, are (in) one of the files git runs: directly, or
/// in a submodule's (`modules/NAME/…`, where a name may hold `/`) or a worktree's
/// (`worktrees/NAME/…`) git directory. Every way of reading a name under `modules/` is tried,
/// which guards more, never less.
fn git_entry(parts: &[&str]) -> Option<&'static LaterFile> {
    let direct = |parts: &[&str]| {
        FILES
            .iter()
            .filter(|f| f.at == Anchor::GitDir)
            .find(|f| covers(f, parts))
    };
    direct(parts).or_else(|| {
        if !matches!(parts.first(), Some(&"modules" | &"worktrees")) {
            return None;
        }
        (2..parts.len()).find_map(|i| parts.get(i..).and_then(&direct))
    })
}

fn inside_git_dir(parts: &[&str], is_dir: bool) -> Guard {
    if parts.is_empty() {
        return Guard::GitDir;
    }
    if git_entry(parts).is_some() {
        return Guard::Whole;
    }
    if !is_dir {
        return Guard::Skip;
    }
    match parts {
        // Where guarded parts can be: `objects/info`, `info`, and the git directories of
        // submodules and worktrees below `modules/` and `worktrees/`, but for their loose
        // objects and packs, which can be many.
        ["objects"] | ["objects", "info"] | ["info"] => Guard::Descend,
        ["modules" | "worktrees", .., "objects", name]
            if *name == "pack"
                || (name.len() == 2 && name.bytes().all(|b| b.is_ascii_hexdigit())) =>
        {
            Guard::Skip
        }
        ["modules" | "worktrees", ..] => Guard::Descend,
        _ => Guard::Skip,
    }
}

/// The file that runs later which `path` (workspace-relative) is or is in, if any.
pub fn kind_of(path: &str) -> Option<&'static LaterFile> {
    let lower = path.to_ascii_lowercase();
    let components: Vec<&str> = lower
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if let Some(inside) = git_dir_part(&components) {
        if inside.is_empty() {
            return Some(&GIT_DIR);
        }
        return git_entry(&inside);
    }
    kind_of_parts(&components, true)
}

/// The kinds of the files that run later among `paths`, each once, in [`KINDS`] order.
pub fn kinds(paths: &[String]) -> Vec<&'static str> {
    kinds_with(paths, &[])
}

/// The entry `components` match outside any git directory; root-anchored entries only where
/// `at_root` allows them to start at the first component.
fn kind_of_parts(components: &[&str], at_root: bool) -> Option<&'static LaterFile> {
    FILES.iter().find(|file| match file.at {
        Anchor::GitDir => false,
        Anchor::Root => at_root && covers(file, components),
        Anchor::Anywhere => (0..components.len()).any(|start| {
            components
                .get(start..)
                .is_some_and(|rest| covers(file, rest))
        }),
    })
}

/// Whether `file` covers `parts` from their start: the file itself, or anything in it when it
/// is a directory.
fn covers(file: &LaterFile, parts: &[&str]) -> bool {
    let count = file.path.split('/').count();
    if parts.len() < count
        || !parts
            .iter()
            .copied()
            .zip(file.path.split('/'))
            .all(|(p, w)| p == w)
    {
        return false;
    }
    parts.len() == count || file.dir
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_by_its_spellings() {
        let table: &[(&str, Option<&str>)] = &[
            (".git/config", Some("git")),
            (".GIT/Config", Some("git")),
            (".git/hooks/pre-commit", Some("git")),
            (".git/commondir", Some("git")),
            (".git/objects/info/alternates", Some("git")),
            (".git/info/attributes", Some("git")),
            (".git/modules/sub/config", Some("git")),
            (".git/modules/sub/hooks/post-checkout", Some("git")),
            (".git/modules/a/b/config", Some("git")),
            (".git/worktrees/w/gitdir", Some("git")),
            ("vendor/lib/.git/config", Some("git")),
            ("sub/.git", Some("git")),
            (".git/objects/ab/cdef", None),
            (".git/refs/heads/main", None),
            (".git/index", None),
            (".mcp.json", Some("agent_config")),
            ("app/.mcp.json", Some("agent_config")),
            (".claude/settings.json", Some("agent_config")),
            (".Claude/settings.local.json", Some("agent_config")),
            (".vscode/tasks.json", Some("agent_config")),
            (".codex/config.toml", Some("agent_config")),
            (".cursor/mcp.json", Some("agent_config")),
            (".envrc", Some("env_loader")),
            ("web/.envrc", Some("env_loader")),
            (".npmrc", Some("build_config")),
            (".yarnrc.yml", Some("build_config")),
            (".cargo/config.toml", Some("build_config")),
            ("crates/x/.cargo/config", Some("build_config")),
            (".bashrc", Some("shell_startup")),
            (".gitconfig", Some("shell_startup")),
            (".config/git/config", Some("shell_startup")),
            ("project/.bashrc", None),
            ("src/main.rs", None),
            ("README.md", None),
            ("package.json", None),
            ("docs/claude.md", None),
            ("cargo/config.toml", None),
        ];
        for (path, want) in table {
            assert_eq!(kind_of(path).map(|f| f.kind), *want, "{path}");
        }
    }

    #[test]
    fn a_snapshot_looks_only_where_files_that_run_later_can_be() {
        let table: &[(&str, bool, Guard)] = &[
            ("src", true, Guard::Descend),
            ("src/main.rs", false, Guard::Skip),
            (".git", true, Guard::GitDir),
            ("sub/.git", false, Guard::Whole),
            (".git/objects", true, Guard::Descend),
            (".git/objects/info", true, Guard::Descend),
            (".git/objects/ab", true, Guard::Skip),
            (".git/objects/info/alternates", false, Guard::Whole),
            (".git/objects/info/packs", false, Guard::Skip),
            (".git/refs", true, Guard::Skip),
            (".git/hooks", true, Guard::Whole),
            (".git/config", false, Guard::Whole),
            (".git/index", false, Guard::Skip),
            (".git/modules", true, Guard::Descend),
            (".git/modules/sub", true, Guard::Descend),
            (".git/modules/sub/config", false, Guard::Whole),
            (".git/modules/sub/hooks", true, Guard::Whole),
            (".git/modules/sub/objects", true, Guard::Descend),
            (".claude", true, Guard::Whole),
            (".mcp.json", false, Guard::Whole),
            (".bashrc", false, Guard::Whole),
            ("deep/.bashrc", false, Guard::Skip),
            // A root entry of several names is guarded at the root only.
            (".config", true, Guard::Descend),
            (".config/git", true, Guard::Whole),
            ("deep/.config/git", true, Guard::Descend),
            ("node_modules", true, Guard::Skip),
            ("web/node_modules", true, Guard::Skip),
        ];
        for (path, is_dir, want) in table {
            assert_eq!(guard(path, *is_dir), *want, "{path}");
        }
    }

    #[test]
    fn every_kind_has_files_and_every_file_a_known_kind() {
        for kind in KINDS {
            assert!(FILES.iter().any(|f| f.kind == kind), "{kind}");
        }
        for file in FILES {
            assert!(KINDS.contains(&file.kind), "{}", file.path);
            assert_eq!(file.path, file.path.to_ascii_lowercase());
            assert!(!file.runs.is_empty());
        }
    }

    #[test]
    fn paths_a_git_config_names_are_guarded_where_they_are() {
        let named = vec![
            "tools/hooks".to_owned(),
            "inc.cfg".to_owned(),
            "scripts/f.sh".to_owned(),
            ".git/custom-hooks".to_owned(),
            "web/node_modules/x/run.sh".to_owned(),
            ".claude/hook.sh".to_owned(),
        ];
        let table: &[(&str, bool, Guard)] = &[
            ("tools", true, Guard::Descend),
            ("tools/hooks", true, Guard::Whole),
            ("Tools/Hooks", true, Guard::Whole),
            ("tools/other", true, Guard::Descend),
            ("tools/other/x", false, Guard::Skip),
            ("inc.cfg", false, Guard::Whole),
            ("src/inc.cfg", false, Guard::Skip),
            ("scripts/f.sh", false, Guard::Whole),
            ("scripts/g.sh", false, Guard::Skip),
            (".git", true, Guard::GitDir),
            (".git/custom-hooks", true, Guard::Whole),
            (".git/refs", true, Guard::Skip),
            ("web/node_modules", true, Guard::Descend),
            ("web/node_modules/x", true, Guard::Descend),
            ("web/node_modules/y", true, Guard::Skip),
            ("web/node_modules/x/.vscode", true, Guard::Skip),
            ("web/node_modules/x/run.sh", false, Guard::Whole),
            (".claude", true, Guard::Whole),
        ];
        for (path, is_dir, want) in table {
            assert_eq!(guard_with(path, *is_dir, &named), *want, "{path}");
        }
        assert_eq!(
            kind_of_with("tools/hooks/pre-commit", &named).map(|f| f.kind),
            Some("git")
        );
        assert_eq!(kind_of_with("tools/hooksx", &named), None);
        assert_eq!(kind_of_with("tools/hooks/pre-commit", &[]), None);
        assert_eq!(
            kinds_with(&["./inc.cfg".to_owned(), ".npmrc".to_owned()], &named),
            vec!["git", "build_config"]
        );
        // The root is never named whole.
        assert_eq!(guard_with("src", true, &[String::new()]), Guard::Descend);
    }

    #[test]
    fn kinds_are_listed_once_in_order() {
        let paths = vec![
            ".npmrc".to_owned(),
            ".git/config".to_owned(),
            "src/a.rs".to_owned(),
            ".npmrc".to_owned(),
        ];
        assert_eq!(kinds(&paths), vec!["git", "build_config"]);
    }
}
