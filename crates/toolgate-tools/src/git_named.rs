//! The workspace paths a repository's git configuration names as code that git runs or reads
//! later, beyond the table of [`toolgate_core::runs_later`]: the files `include.path` and
//! `includeIf.*.path` name (followed, as git follows them), the directory `core.hooksPath`
//! names, and the programs inside the workspace that `core.fsmonitor`, `core.sshCommand`,
//! a diff driver's `textconv`, a filter's `clean`, `smudge` or `process` (and the like) run.
//! Read without running git: each configuration file is parsed with gix's reader, and every
//! file is read beneath the workspace root. A configuration that does not parse is an error:
//! git refuses such a repository too, and what it would name cannot be known.
//!
//! Where the workspace holds the user's own configuration (`.gitconfig`, `.config/git/config`:
//! the workspace is a home), what that names is gathered too, its `~/` taken as the root.
//!
//! Paths are resolved as git resolves them: an include relative to the file that names it, a
//! hooks directory and a program relative to the work tree (`core.worktree`, or the
//! directory holding `.git`). An absolute path is named where it lies inside the workspace; a
//! path under `~` or outside the workspace is not (nothing a confined process may write).

use std::borrow::Cow;
use std::path::Path;

use toolgate_core::runs_later;
use toolgate_workspace::snapshot::{Kept, Snapshot};
use toolgate_workspace::{PathError, PathKind, RelPath, Workspace};

use crate::git_keys::{self, Runs, Value};

/// Deepest chain of includes followed: git's own limit.
const MAX_INCLUDE_DEPTH: usize = 10;

/// Most configuration files (includes among them) read for one workspace.
const MAX_CONFIGS: usize = 4096;

/// Largest configuration file read.
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The workspace paths the git configuration of the repositories found by `snapshot` (their
/// `config` and `config.worktree`, which it keeps) names, includes followed.
pub(crate) fn in_snapshot(
    workspace: &Workspace,
    snapshot: &Snapshot,
) -> Result<Vec<String>, String> {
    let mut reader = Reader::new(workspace);
    reader.global()?;
    for (name, _, kept) in snapshot.paths() {
        if let Kept::File {
            bytes: Some(bytes), ..
        } = kept
        {
            reader.git_file(name, bytes)?;
        }
        let Some(git_dir) = config_of_git_dir(name) else {
            continue;
        };
        let bytes = match kept {
            Kept::File {
                bytes: Some(bytes), ..
            } => Cow::Borrowed(bytes.as_slice()),
            // Larger than a snapshot keeps, or a link git follows: the file it leads to
            // beneath the root is the configuration, and runs later too.
            Kept::File { bytes: None, .. } | Kept::Link { .. } => {
                reader.name(name.split('/').map(str::to_owned).collect());
                match reader.read(name)? {
                    Some(bytes) => Cow::Owned(bytes),
                    None => continue,
                }
            }
            Kept::Dir { .. } | Kept::Other { .. } => continue,
        };
        reader.config(name, &bytes, &git_dir, 0)?;
    }
    Ok(reader.named)
}

/// The workspace paths the git configuration of the repositories that hold `path` names: the
/// repository at each directory from the root down to it (a `.git` directory, or the one a
/// `.git` file names inside the workspace), includes followed.
pub(crate) fn around(workspace: &Workspace, path: &str) -> Result<Vec<String>, String> {
    Ok(read_around(workspace, path)?.named)
}

/// What the git configuration of the repository a git command started in `dir`
/// (workspace-relative) uses makes git run when it contacts a remote: every remote,
/// submodule and `insteadOf` URL that runs a program, every `remote.*.vcs`, and every
/// `protocol.*.allow`, read as [`around`] reads them (the user's own configuration where the
/// workspace holds it, then each repository from the root down, includes followed, each
/// work tree's `.gitmodules`).
pub(crate) fn remotes(workspace: &Workspace, dir: &str) -> Result<Remotes, String> {
    // `around` reads the repositories of the directories above a path: those of `dir` are
    // above anything in it.
    let inside = if dir.is_empty() {
        "-".to_owned()
    } else {
        format!("{dir}/-")
    };
    let reader = read_around(workspace, &inside)?;
    Ok(Remotes {
        remotes: reader.remotes,
        read: reader.sources,
    })
}

/// What [`remotes`] found, and the files it read to find it (workspace-relative), which the
/// preview binds: a change to one could change what git runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remotes {
    pub(crate) remotes: Vec<Remote>,
    pub(crate) read: Vec<String>,
}

/// One setting that makes git run a program when it contacts a remote ([`remotes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Remote {
    /// The workspace-relative file that sets it.
    pub(crate) file: String,
    /// The key, as `section.subsection.key` (section and key lowercase).
    pub(crate) key: String,
    /// Its value.
    pub(crate) value: String,
    /// What it makes git run: `None` for a `protocol.*.allow`.
    pub(crate) runs: Option<Runs>,
    /// The workspace paths of what it runs (an `ext::` command's files), for the preview to
    /// bind.
    pub(crate) paths: Vec<String>,
}

fn read_around<'a>(workspace: &'a Workspace, path: &str) -> Result<Reader<'a>, String> {
    let mut reader = Reader::new(workspace);
    reader.global()?;
    let components: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    for depth in 0..components.len() {
        let dir: Vec<String> = components
            .iter()
            .take(depth)
            .map(|c| (*c).to_owned())
            .collect();
        let dot_git = joined(&dir, ".git");
        let git_dir = match reader.read(&dot_git)? {
            // A `.git` file: `gitdir: PATH`, relative to the directory that holds it.
            Some(bytes) => match git_dir_named(&dir, &bytes, workspace.root()) {
                Some(git_dir) => git_dir,
                None => continue,
            },
            // A `.git` directory, or none (then its files are not found either).
            None => {
                let mut git_dir = dir.clone();
                git_dir.push(".git".to_owned());
                git_dir
            }
        };
        reader.configs_of(&git_dir)?;
    }
    Ok(reader)
}

/// The git directory the `.git` file in `dir` holding `bytes` names (`gitdir: PATH`, relative
/// to `dir`), where it lies beneath the root.
fn git_dir_named(dir: &[String], bytes: &[u8], root: &Path) -> Option<Vec<String>> {
    let text = String::from_utf8_lossy(bytes);
    let target = text.trim().strip_prefix("gitdir:")?;
    resolve(dir, target.trim(), root).filter(|git_dir| !git_dir.is_empty())
}

/// Whether `name` (workspace-relative) is a git directory's `config` or `config.worktree`;
/// its git directory's components if so.
fn config_of_git_dir(name: &str) -> Option<Vec<String>> {
    let components: Vec<&str> = name.split('/').collect();
    let (file, dir) = components.split_last()?;
    let lower = file.to_ascii_lowercase();
    if lower != "config" && lower != "config.worktree" {
        return None;
    }
    let start = dir.iter().rposition(|c| c.eq_ignore_ascii_case(".git"))?;
    let inside = dir.get(start + 1..)?;
    let plain = inside.is_empty()
        || (inside.len() >= 2
            && matches!(
                inside.first().map(|c| c.to_ascii_lowercase()).as_deref(),
                Some("modules" | "worktrees")
            )
            && !inside.iter().any(|c| c.eq_ignore_ascii_case("hooks")));
    plain.then(|| dir.iter().map(|c| (*c).to_owned()).collect())
}

/// Reads configuration files beneath the root and gathers what they name.
struct Reader<'a> {
    workspace: &'a Workspace,
    named: Vec<String>,
    /// What makes git run a program when it contacts a remote ([`remotes`]).
    remotes: Vec<Remote>,
    /// The files read, in order: what was found depends on each.
    sources: Vec<String>,
    read: usize,
    /// Whether the file read is the user's own configuration, whose `~/` is the root.
    home: bool,
}

impl<'a> Reader<'a> {
    fn new(workspace: &'a Workspace) -> Self {
        Reader {
            workspace,
            named: Vec::new(),
            remotes: Vec::new(),
            sources: Vec::new(),
            read: 0,
            home: false,
        }
    }

    /// The user's own git configuration, where the workspace holds it (it is the home git
    /// reads it from): what it names is run or read in every repository, its `~/` is the
    /// root, and its relative paths are taken from the root.
    fn global(&mut self) -> Result<(), String> {
        for name in [".gitconfig", ".config/git/config"] {
            if let Some(bytes) = self.read(name)? {
                self.home = true;
                let found = self.config(name, &bytes, &[], 0);
                self.home = false;
                found?;
            }
        }
        Ok(())
    }

    /// [`resolve`], where the user's own configuration's `~/` is the root.
    fn resolve(&self, base: &[String], value: &str, root: &Path) -> Option<Vec<String>> {
        match value.trim().strip_prefix("~/") {
            Some(rest) if self.home => resolve(&[], rest, root),
            _ => resolve(base, value, root),
        }
    }

    /// The bytes of the file `name`, beneath the root; `None` where there is none (or a
    /// directory). Any other failure is an error: what it would name cannot be known.
    fn read(&mut self, name: &str) -> Result<Option<Vec<u8>>, String> {
        self.read += 1;
        if self.read > MAX_CONFIGS {
            return Err(format!(
                "more than {MAX_CONFIGS} git configuration files to read"
            ));
        }
        let Ok(rel) = RelPath::parse(name) else {
            return Ok(None);
        };
        match self.workspace.read_file(&rel, MAX_CONFIG_BYTES + 1) {
            // git reads all of it: a key past what is read would go unseen.
            Ok((bytes, total))
                if total > MAX_CONFIG_BYTES || bytes.len() as u64 > MAX_CONFIG_BYTES =>
            {
                Err(format!(
                    "`{name}` is larger than {MAX_CONFIG_BYTES} bytes, so what it names cannot be known"
                ))
            }
            Ok((bytes, _)) => {
                self.sources.push(name.to_owned());
                Ok(Some(bytes))
            }
            Err(PathError::NotFound { .. } | PathError::NotAFile { .. }) => Ok(None),
            Err(PathError::Outside { .. }) => Ok(None),
            Err(e) => Err(format!("cannot read `{name}`: {e}")),
        }
    }

    /// Where `name` is a `.git` file naming a git directory in the workspace that is not
    /// inside a `.git` directory (where the table guards it already): that directory's parts
    /// that run ([`runs_later::FILES`] inside a git directory), and what its config names.
    fn git_file(&mut self, name: &str, bytes: &[u8]) -> Result<(), String> {
        let components: Vec<String> = name.split('/').map(str::to_owned).collect();
        let Some((last, dir)) = components.split_last() else {
            return Ok(());
        };
        if !last.eq_ignore_ascii_case(".git") {
            return Ok(());
        }
        let Some(git_dir) = git_dir_named(dir, bytes, self.workspace.root()) else {
            return Ok(());
        };
        if git_dir.iter().any(|c| c.eq_ignore_ascii_case(".git")) {
            return Ok(());
        }
        for file in runs_later::FILES
            .iter()
            .filter(|file| file.at == runs_later::Anchor::GitDir)
        {
            let mut path = git_dir.clone();
            path.extend(file.path.split('/').map(str::to_owned));
            self.name(path);
        }
        self.configs_of(&git_dir)
    }

    /// What the `config` and `config.worktree` of the git directory `git_dir` name.
    fn configs_of(&mut self, git_dir: &[String]) -> Result<(), String> {
        for file in ["config", "config.worktree"] {
            let config = joined(git_dir, file);
            if let Some(bytes) = self.read(&config)? {
                self.config(&config, &bytes, git_dir, 0)?;
            }
        }
        Ok(())
    }

    /// Whether `path` is a file beneath the root (through links inside it).
    fn is_file(&self, path: &[String]) -> bool {
        RelPath::parse(&path.join("/"))
            .ok()
            .and_then(|rel| self.workspace.resolve(&rel).ok())
            .is_some_and(|resolved| resolved.kind == PathKind::File)
    }

    /// Names `path`, and where it leads if a link inside the workspace redirects it: git
    /// follows the link, so the file there is what it reads or runs.
    fn name(&mut self, path: Vec<String>) -> Option<String> {
        let path = path.join("/");
        if path.is_empty() {
            return None;
        }
        let target = RelPath::parse(&path)
            .ok()
            .and_then(|rel| self.workspace.resolve(&rel).ok())
            .map(|resolved| resolved.target.to_string())
            .filter(|target| *target != path && !target.is_empty());
        for path in [Some(path.clone()), target].into_iter().flatten() {
            if !self.named.contains(&path) {
                self.named.push(path);
            }
        }
        Some(path)
    }

    /// Gathers what the configuration file `name`, holding `bytes`, of the git directory
    /// `git_dir`, names; `depth` includes deep. A repository's own `config` (not an include,
    /// nor the user's) brings its work tree's `.gitmodules` with it, whose submodule URLs
    /// git contacts on `submodule update`.
    fn config(
        &mut self,
        name: &str,
        bytes: &[u8],
        git_dir: &[String],
        depth: usize,
    ) -> Result<(), String> {
        let file = parse(name, bytes)?;
        let here: Vec<String> = name
            .split('/')
            .map(str::to_owned)
            .collect::<Vec<_>>()
            .split_last()
            .map(|(_, dir)| dir.to_vec())
            .unwrap_or_default();
        let root = self.workspace.root().to_path_buf();
        // The work tree: `core.worktree` (relative to the git directory), or the directory
        // holding `.git`, or for a bare repository the git directory itself.
        let mut work_tree = match git_dir.split_last() {
            Some((last, parent)) if last.eq_ignore_ascii_case(".git") => parent.to_vec(),
            _ => git_dir.to_vec(),
        };
        for section in file.sections() {
            let header = section.header();
            if header.name().eq_ignore_ascii_case(b"core") && header.subsection_name().is_none() {
                for value in section.values("worktree") {
                    if let Some(tree) = self.resolve(git_dir, &value.to_string(), &root) {
                        work_tree = tree;
                    }
                }
            }
        }
        let at = At {
            name,
            here: &here,
            git_dir,
            work_tree: &work_tree,
            depth,
        };
        self.values(&file, &at, false)?;
        if depth == 0 && !self.home && !git_dir.is_empty() {
            let modules = joined(&work_tree, ".gitmodules");
            if let Some(bytes) = self.read(&modules)? {
                let file = parse(&modules, &bytes)?;
                let at = At {
                    name: &modules,
                    ..at
                };
                self.values(&file, &at, true)?;
            }
        }
        Ok(())
    }

    /// What the keys of `file` ([`git_keys::KEYS`]) name; of a `.gitmodules` (`modules`),
    /// only the URLs, the rest of it being what git ignores there.
    fn values(
        &mut self,
        file: &gix::config::File,
        at: &At<'_>,
        modules: bool,
    ) -> Result<(), String> {
        let root = self.workspace.root().to_path_buf();
        for section in file.sections() {
            let header = section.header();
            let section_name = header.name().to_string();
            let subsection = header.subsection_name().map(ToString::to_string);
            let mut keys: Vec<String> = section
                .value_names()
                .map(|k| k.to_string().to_ascii_lowercase())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            for key in keys {
                let Some(row) = git_keys::lookup(&section_name, subsection.as_deref(), &key) else {
                    continue;
                };
                if modules && row.value != Value::Url {
                    continue;
                }
                for value in section.values(&key) {
                    let value = value.to_string();
                    match row.value {
                        Value::Include => {
                            let Some(included) = self.resolve(at.here, &value, &root) else {
                                continue;
                            };
                            if included.is_empty() {
                                continue;
                            }
                            let included_name = included.join("/");
                            self.name(included);
                            if at.depth + 1 >= MAX_INCLUDE_DEPTH {
                                return Err(format!(
                                    "includes nested more than {MAX_INCLUDE_DEPTH} deep from `{}`",
                                    at.name
                                ));
                            }
                            if let Some(bytes) = self.read(&included_name)? {
                                self.config(&included_name, &bytes, at.git_dir, at.depth + 1)?;
                            }
                        }
                        Value::Hooks => match self.resolve(at.work_tree, &value, &root) {
                            // The work tree itself, or above it: its hooks one by one.
                            Some(dir) if at.work_tree.starts_with(&dir) => {
                                for hook in git_keys::HOOKS {
                                    let mut path = dir.clone();
                                    path.push((*hook).to_owned());
                                    self.name(path);
                                }
                            }
                            Some(dir) => {
                                self.name(dir);
                            }
                            None => {}
                        },
                        Value::File => {
                            if let Some(file) = self.resolve(at.work_tree, &value, &root) {
                                self.name(file);
                            }
                        }
                        Value::Program => self.program(&value, at.work_tree, &root),
                        Value::Bang if value.trim_start().starts_with('!') => {
                            self.program(&value, at.work_tree, &root);
                        }
                        Value::Url | Value::BaseUrl | Value::Helper | Value::Allow => {
                            let shown = match subsection.as_deref() {
                                Some(sub) => {
                                    format!("{}.{sub}.{key}", section_name.to_ascii_lowercase())
                                }
                                None => format!("{}.{key}", section_name.to_ascii_lowercase()),
                            };
                            let runs = match row.value {
                                // Whether git may use `ext` is not asked: the user's own
                                // configuration, or a `-c`, can allow it later.
                                Value::Url | Value::BaseUrl => {
                                    match git_keys::url_of(row, subsection.as_deref(), &value)
                                        .and_then(git_keys::url_runs)
                                    {
                                        Some(runs) => Some(runs),
                                        None => continue,
                                    }
                                }
                                Value::Helper => Some(Runs::Helper(value.trim().to_owned())),
                                _ => None,
                            };
                            let mut paths = Vec::new();
                            if let Some(Runs::Command(words)) = &runs {
                                // git starts it without a shell: a word is one argument, a
                                // path in it named whole (`% ` is a space in it).
                                for word in words.iter().filter(|w| w.contains('/')) {
                                    if let Some(path) = self.resolve(at.work_tree, word, &root) {
                                        paths.push(path);
                                    }
                                }
                                let text = git_keys::shell_text(words);
                                paths.extend(self.program_paths(&text, at.work_tree, &root));
                            }
                            let mut named: Vec<String> = Vec::new();
                            for path in paths {
                                if let Some(path) = self.name(path)
                                    && !named.contains(&path)
                                {
                                    named.push(path);
                                }
                            }
                            self.remotes.push(Remote {
                                file: at.name.to_owned(),
                                key: shown,
                                value: value.clone(),
                                runs,
                                paths: named,
                            });
                        }
                        Value::Bang => {}
                    }
                }
            }
        }
        Ok(())
    }

    /// Names what the command `value` runs ([`Reader::program_paths`]).
    fn program(&mut self, value: &str, work_tree: &[String], root: &Path) {
        for path in self.program_paths(value, work_tree, root) {
            self.name(path);
        }
    }

    /// What the command `value` runs: each word of it that is a path, and a script its
    /// commands run by a name without `/` (`python3 conv.py`), found as a command's preview
    /// finds one, where it is a file of the work tree.
    fn program_paths(&self, value: &str, work_tree: &[String], root: &Path) -> Vec<Vec<String>> {
        let mut paths = Vec::new();
        for word in value
            .split(|c: char| c.is_whitespace() || "!;&|()<>`'\"=".contains(c))
            .filter(|w| w.contains('/') && !w.contains("://"))
        {
            if let Some(program) = self.resolve(work_tree, word, root) {
                paths.push(program);
            }
        }
        let text = value.trim_start().trim_start_matches('!');
        for (_, word) in crate::interpreter::shell_text(text, "").candidates {
            if let Some(script) = self.resolve(work_tree, &word, root)
                && self.is_file(&script)
            {
                paths.push(script);
            }
        }
        paths
    }
}

/// Where a configuration file's values are resolved from.
struct At<'a> {
    /// The file's workspace-relative name.
    name: &'a str,
    /// The directory holding it, which its includes are relative to.
    here: &'a [String],
    git_dir: &'a [String],
    /// What programs and hooks are relative to.
    work_tree: &'a [String],
    /// How many includes deep the file is.
    depth: usize,
}

/// `bytes`, the file `name`, as git configuration; an error that quotes none of it where it
/// does not parse.
fn parse(name: &str, bytes: &[u8]) -> Result<gix::config::File, String> {
    gix::config::File::from_bytes_no_includes(
        bytes,
        gix::config::file::Metadata::from(gix::config::Source::Local),
        gix::config::file::init::Options::default(),
    )
    .map_err(|_| {
        format!("`{name}` does not parse as git configuration, so what it names cannot be known")
    })
}

/// `value`, a path in a configuration file, as workspace components: relative to `base`, or
/// absolute beneath `root`. `None` for a path under `~`, one with a `$` or `%(` git or the
/// shell would expand, or one outside the workspace.
fn resolve(base: &[String], value: &str, root: &Path) -> Option<Vec<String>> {
    let value = value.trim();
    if value.is_empty() || value.starts_with('~') || value.contains('$') || value.contains("%(") {
        return None;
    }
    let (mut out, rest) = if value.starts_with('/') {
        let rest = Path::new(value).strip_prefix(root).ok()?;
        (Vec::new(), rest.to_str()?.to_owned())
    } else {
        (base.to_vec(), value.to_owned())
    };
    for component in rest.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            name => out.push(name.to_owned()),
        }
    }
    Some(out)
}

fn joined(dir: &[String], name: &str) -> String {
    let mut parts = dir.to_vec();
    parts.push(name.to_owned());
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn named(files: &[(&str, &str)], path: &str) -> (Vec<String>, Vec<String>) {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in files {
            let full = dir.path().join(name);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, text).unwrap();
        }
        let workspace = Workspace::open(dir.path()).unwrap();
        let root = workspace.root().to_path_buf();
        let snapshot =
            toolgate_workspace::snapshot::Guarded::take(&root, crate::later::watch, Vec::new())
                .unwrap();
        let mut all = in_snapshot(&workspace, snapshot.before()).unwrap();
        let mut near = around(&workspace, path).unwrap();
        all.sort();
        near.sort();
        (all, near)
    }

    #[test]
    fn what_a_config_names_in_every_spelling() {
        let (all, near) = named(
            &[
                (
                    ".git/config",
                    "[include]\n\tpath = ../inc.cfg\n[core]\n\thooksPath = tools/hooks\n\
                     [filter \"x\"]\n\tclean = ./scripts/f.sh %f\n\
                     [diff \"pdf\"]\n\ttextconv = \"sh ./scripts/conv.sh\"\n\
                     [alias]\n\tst = status\n\tx = !./scripts/alias.sh\n\
                     [includeIf \"gitdir:/\"]\n\tpath = /nowhere/outside.cfg\n\
                     [remote \"origin\"]\n\turl = https://example.com/a/b\n\
                     \tuploadpack = ./bin/up\n[pager]\n\tlog = ./bin/pager\n\
                     [submodule \"s\"]\n\tupdate = !./bin/update\n\
                     [core]\n\tattributesFile = meta/attrs\n\
                     [browser \"b\"]\n\tcmd = ./bin/browse\n[man \"m\"]\n\tpath = bin/man\n\
                     [guitool \"g\"]\n\tcmd = sh bin/gui.sh\n\
                     [gpg \"ssh\"]\n\tdefaultKeyCommand = ./bin/key\n\
                     [sendemail]\n\ttoCmd = ./bin/to\n\tsmtpServer = bin/sendmail\n\
                     [diff \"py\"]\n\ttextconv = python3 conv.py\n\
                     [filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\
                     [imap]\n\ttunnel = ./bin/tunnel\n[instaweb]\n\thttpd = bin/httpd -f\n\
                     [remote \"o\"]\n\turl = ext::sh ./bin/ext.sh %S\n\
                     [Remote \"P\"]\n\tPushURL = \"ext::./bin/push% x.sh %G/r\"\n\
                     [url \"ext::sh -c bin/iof.sh% %s\"]\n\tinsteadOf = https://h/\n\
                     [URL \"EXT::bin/piof.sh\"]\n\tpushInsteadOf = https://h/\n\
                     [remote \"v\"]\n\tvcs = ./bin/vcs\n\turl = hg::./bin/hg\n\
                     [protocol]\n\tallow = always\n[web]\n\tbrowser = ./bin/web\n\
                     [remote.Legacy]\n\tURL = ext::./bin/legacy.sh\n\
                     [remote \"q\"]\n\turl = \"ext::sh -c \\\"./bin/q.sh\\\"\"\n\
                     [Branch \"main\"]\n\tPushRemote = ext::./bin/branch.sh\n\
                     [hook \"lint\"]\n\tcommand = ./bin/lint\n[init]\n\ttemplateDir = tpl\n",
                ),
                (
                    ".gitmodules",
                    "[submodule \"s\"]\n\tpath = s\n\turl = ext::bin/sub.sh\n\
                     \tupdate = !./bin/not-from-gitmodules\n[core]\n\tfsmonitor = ./bin/nor\n",
                ),
                (
                    "inc.cfg",
                    "[core]\n\tfsmonitor = ./tools/mon.sh\n[include]\n\tpath = more.cfg\n",
                ),
                (
                    "more.cfg",
                    "[core]\n\tsshCommand = ssh -i ~/.ssh/k -F ./ssh/config\n",
                ),
                ("conv.py", "print()\n"),
                ("sub/.git/config", "[core]\n\thooksPath = .\n"),
                ("sub/.git/HEAD", "ref: refs/heads/main\n"),
            ],
            "src/a.rs",
        );
        let want: Vec<String> = [
            // An `ext::` command's word is named whole, quotes and all, and what the shell
            // would make of it too: more than git runs, never less.
            "\"./bin/q.sh\"",
            "bin/branch.sh",
            "bin/browse",
            "bin/ext.sh",
            "bin/gui.sh",
            "bin/httpd",
            "bin/iof.sh",
            "bin/iof.sh upload-pack",
            "bin/key",
            "bin/legacy.sh",
            "bin/lint",
            "bin/man",
            "bin/pager",
            "bin/piof.sh",
            "bin/push",
            "bin/push x.sh",
            "bin/q.sh",
            "bin/sendmail",
            "bin/sub.sh",
            "bin/to",
            "bin/tunnel",
            "bin/up",
            "bin/update",
            "bin/web",
            "conv.py",
            "inc.cfg",
            "meta/attrs",
            "more.cfg",
            "scripts/alias.sh",
            "scripts/conv.sh",
            "scripts/f.sh",
            "ssh/config",
            "tools/hooks",
            "tools/mon.sh",
            "tpl",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let mut with_sub = want.clone();
        with_sub.extend(git_keys::HOOKS.iter().map(|h| format!("sub/{h}")));
        with_sub.sort();
        assert_eq!(all, with_sub);
        // A write at the root's level reads the root's repository only.
        assert_eq!(near, want);
    }

    #[test]
    fn the_remotes_a_git_command_contacts_say_what_they_run() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [
            (
                ".git/config",
                "[remote \"o\"]\n\turl = https://example.com/r\n\tpushurl = ext::sh ./bin/p.sh\n\
                 [REMOTE \"V\"]\n\tVCS = evil\n[url \"ext::bin/i.sh\"]\n\tinsteadOf = https://h/\n\
                 [protocol \"ext\"]\n\tallow = always\n",
            ),
            (
                ".gitmodules",
                "[submodule \"s\"]\n\turl = ext::./bin/s.sh\n",
            ),
            (
                ".gitconfig",
                "[url \"hg::https://h/\"]\n\tpushInsteadOf = https://p/\n",
            ),
            ("bin/p.sh", "true\n"),
        ] {
            let full = dir.path().join(name);
            fs::create_dir_all(full.parent().unwrap()).unwrap();
            fs::write(full, text).unwrap();
        }
        let workspace = Workspace::open(dir.path()).unwrap();
        let all = remotes(&workspace, "src").unwrap();
        assert_eq!(all.read, [".gitconfig", ".git/config", ".gitmodules"]);
        let found: Vec<(String, String, Option<Runs>, Vec<String>)> = all
            .remotes
            .into_iter()
            .map(|r| (r.file, r.key, r.runs, r.paths))
            .collect();
        let words = |s: &str| Some(Runs::Command(s.split(' ').map(str::to_owned).collect()));
        let want = [
            (
                ".gitconfig",
                "url.hg::https://h/.pushinsteadof",
                Some(Runs::Helper("hg".to_owned())),
                vec![],
            ),
            (
                ".git/config",
                "remote.o.pushurl",
                words("sh ./bin/p.sh"),
                vec!["bin/p.sh"],
            ),
            (
                ".git/config",
                "remote.V.vcs",
                Some(Runs::Helper("evil".to_owned())),
                vec![],
            ),
            (
                ".git/config",
                "url.ext::bin/i.sh.insteadof",
                words("bin/i.sh"),
                vec!["bin/i.sh"],
            ),
            (".git/config", "protocol.ext.allow", None, vec![]),
            (
                ".gitmodules",
                "submodule.s.url",
                words("./bin/s.sh"),
                vec!["bin/s.sh"],
            ),
        ];
        let want: Vec<(String, String, Option<Runs>, Vec<String>)> = want
            .into_iter()
            .map(|(file, key, runs, paths)| {
                (
                    file.to_owned(),
                    key.to_owned(),
                    runs,
                    paths.into_iter().map(str::to_owned).collect(),
                )
            })
            .collect();
        assert_eq!(found, want);
    }

    #[test]
    fn the_users_own_configuration_in_a_workspace_that_is_a_home_names_what_it_runs() {
        let files = [
            (
                ".gitconfig",
                "[core]\n\thooksPath = ~/my-hooks\n\tfsmonitor = ~/bin/mon\n\
                 [include]\n\tpath = ~/.gitconfig.local\n",
            ),
            (
                ".gitconfig.local",
                "[diff \"x\"]\n\ttextconv = ~/bin/conv\n",
            ),
            (".config/git/config", "[core]\n\tpager = ./pager.sh\n"),
        ];
        let (all, near) = named(&files, "src/a.rs");
        let want = [
            ".gitconfig.local",
            "bin/conv",
            "bin/mon",
            "my-hooks",
            "pager.sh",
        ];
        assert_eq!(all, want);
        assert_eq!(near, want);
    }

    #[test]
    fn a_config_or_a_named_path_that_is_a_link_names_where_it_leads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path();
        fs::create_dir_all(p.join(".git")).unwrap();
        fs::create_dir_all(p.join("real-hooks")).unwrap();
        fs::create_dir_all(p.join("tools")).unwrap();
        fs::write(
            p.join("cfg"),
            "[core]\n\thooksPath = tools/hooks\n[include]\n\tpath = ../inc\n",
        )
        .unwrap();
        fs::write(p.join("real-inc.cfg"), "[core]\n\tfsmonitor = ./mon.sh\n").unwrap();
        std::os::unix::fs::symlink("../cfg", p.join(".git/config")).unwrap();
        std::os::unix::fs::symlink("../real-hooks", p.join("tools/hooks")).unwrap();
        std::os::unix::fs::symlink("real-inc.cfg", p.join("inc")).unwrap();
        let workspace = Workspace::open(p).unwrap();
        let guarded = toolgate_workspace::snapshot::Guarded::take(
            workspace.root(),
            crate::later::watch,
            Vec::new(),
        )
        .unwrap();
        let mut all = in_snapshot(&workspace, guarded.before()).unwrap();
        all.sort();
        assert_eq!(
            all,
            [
                ".git/config",
                "cfg",
                "inc",
                "mon.sh",
                "real-hooks",
                "real-inc.cfg",
                "tools/hooks"
            ]
        );
    }

    #[test]
    fn a_git_directory_a_git_file_names_elsewhere_in_the_workspace_is_guarded() {
        let (all, _) = named(
            &[
                ("wt/.git", "gitdir: ../store/wt.git\n"),
                ("store/wt.git/HEAD", "ref: refs/heads/main\n"),
                (
                    "store/wt.git/config",
                    "[core]\n\tworktree = ../../wt\n\thooksPath = githooks\n",
                ),
            ],
            "a.txt",
        );
        for want in [
            "store/wt.git/config",
            "store/wt.git/hooks",
            "store/wt.git/commondir",
            "store/wt.git/info/attributes",
            "wt/githooks",
        ] {
            assert!(all.iter().any(|p| p == want), "{want}: {all:?}");
        }
    }

    #[test]
    fn a_submodule_is_found_through_its_git_file_and_a_bad_config_is_an_error() {
        let (all, near) = named(
            &[
                (".git/config", "[core]\n\tbare = false\n"),
                (
                    ".git/modules/lib/config",
                    "[core]\n\tworktree = ../../../lib\n\thooksPath = hooks-here\n",
                ),
                ("lib/.git", "gitdir: ../.git/modules/lib\n"),
            ],
            "lib/hooks-here/pre-commit",
        );
        assert_eq!(all, ["lib/hooks-here"]);
        assert_eq!(near, ["lib/hooks-here"]);

        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join(".git")).unwrap();
        fs::write(dir.path().join(".git/config"), "[core\n\tsecret = 1\n").unwrap();
        let workspace = Workspace::open(dir.path()).unwrap();
        let error = around(&workspace, "a.txt").unwrap_err();
        assert!(error.contains("does not parse"), "{error}");
        assert!(!error.contains("secret"), "{error}");
        // A key past what would be read is not passed over: git reads the whole file.
        let mut big = "#".repeat(usize::try_from(MAX_CONFIG_BYTES).unwrap());
        big.push_str("\n[core]\n\tfsmonitor = ./mon.sh\n");
        fs::write(dir.path().join(".git/config"), big).unwrap();
        let error = around(&workspace, "a.txt").unwrap_err();
        assert!(error.contains("larger than"), "{error}");
    }
}
