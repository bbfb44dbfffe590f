//! package.json's scripts, run as npm runs them (`/bin/sh -c` with npm's variables, `pre`
//! and `post` as steps of their own), and the package managers' configuration at the root.

use std::fmt::Write as _;

use serde_json::Value;
use toolgate_core::Digest;
use toolgate_workspace::{RelPath, Workspace};

use crate::interpreter;
use crate::run_command::path_of;

use super::SCRIPTS;
use super::project::{ConfigError, Found, Parsed, Source, Step, read, read_shown, words_of};

/// The shell a package.json script runs with, as npm runs it on POSIX systems.
const SCRIPT_SHELL: &str = "/bin/sh";

/// Scripts of a package.json named like a script, with their `pre` and `post` scripts.
pub(super) fn package_json(source: &Source) -> Parsed {
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
    let path =
        path_of(source.environment).map_or_else(|| bin.clone(), |path| format!("{bin}:{path}"));
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
            return Parsed::Blocked(problem.to_string());
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
) -> Result<(), ConfigError> {
    const WHOSE: &str = "package managers'";
    for (name, runs) in PACKAGE_MANAGER_CONFIG {
        let Some((text, digest)) = read_shown(workspace, name, WHOSE)? else {
            continue;
        };
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
            return Err(ConfigError::Unread {
                whose: WHOSE,
                problem,
            });
        }
    }
    Ok(())
}

/// The environment file yarn 4 loads into scripts by default (`injectEnvironmentFiles`).
const YARN_ENV_FILE: &str = ".env.yarn";
