//! The project files at the workspace root, read in precedence order into the scripts they
//! define: each definition's steps, its preview, and the files bound to the approval.

use std::fmt::Write as _;

use toolgate_core::{Classification, Digest, Resource, ToolError, ToolErrorCode, sha256_digest};
use toolgate_workspace::{PathError, RelPath, Workspace};

use crate::interpreter;
use crate::run_command::Plan;

use super::cargo::cargo_toml;
use super::make::makefile;
use super::npm::package_json;
use super::pyproject::pyproject_toml;
use super::{Approved, SCRIPTS};

/// Largest project file read.
const MAX_PROJECT_FILE_BYTES: u64 = 1024 * 1024;

/// Largest configuration file shown whole in a preview; a larger one refuses the call.
const MAX_CONFIG_SHOWN_BYTES: usize = 16 * 1024;

/// One program a script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Step {
    /// `test`, or `pretest` and `posttest` around it.
    pub(super) name: String,
    /// The command, its program unresolved (`make`, `/bin/sh`).
    pub(super) argv: Vec<String>,
    /// Variables set for this step, shown with their values.
    pub(super) env: Vec<(String, String)>,
    /// Variables left out of this step's environment.
    pub(super) unset: Vec<&'static str>,
    /// What the person should read about this step.
    pub(super) about: String,
}

/// One script as a project file defines it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Definition {
    script: &'static str,
    /// The project file, at the workspace root.
    pub(super) file: &'static str,
    pub(super) steps: Vec<Step>,
    /// How the file defines it, for the preview.
    how: String,
    /// What the preview says after the steps: rules, configuration, what else runs.
    shown: String,
    /// The project file's digest.
    digest: Digest,
    /// Other files that decide what runs, as `config:<path>` and their digests.
    bound: Vec<(String, Digest)>,
    /// Words of the script's text that may name files inside the workspace, relative to the
    /// root: bound like `run_command`'s arguments.
    named: Vec<String>,
}

impl Definition {
    fn plans(
        &self,
        workspace: &Workspace,
        environment: &[(String, String)],
    ) -> Result<Vec<Plan>, ToolError> {
        let count = self.steps.len().max(1);
        self.steps
            .iter()
            .map(|step| {
                let argv: Vec<&str> = step.argv.iter().map(String::as_str).collect();
                let mut plan = Plan::new(workspace, environment, &argv, None)?;
                for name in &step.unset {
                    plan.remove_env(name);
                }
                for (name, value) in &step.env {
                    plan.set_env(name, value.clone());
                }
                // Several steps share the one result's budget.
                plan.capture_bytes /= count;
                Ok(plan)
            })
            .collect()
    }

    /// Stage 4: every step's program and arguments, the project file and the configuration
    /// that decide them, and a preview that lists them in the order they run.
    pub(super) fn classification(&self, workspace: &Workspace, plans: &[Plan]) -> Classification {
        let mut preview = format!("run_script `{}`: {}", self.script, self.how);
        let mut classification = Classification::default();
        let count = plans.len();
        for (i, (step, plan)) in self.steps.iter().zip(plans).enumerate() {
            let mut heading = if count > 1 {
                format!("\nstep {} of {count}, `{}`:", i + 1, step.name)
            } else {
                String::new()
            };
            if !step.about.is_empty() {
                heading.push('\n');
                heading.push_str(&step.about);
            }
            let part = plan.classification(workspace, heading, None, None);
            if let Some(text) = &part.preview {
                preview.push_str(text);
            }
            for (name, value) in &step.env {
                let _ = write!(preview, "\n  set for this step: {name}={value:?}");
            }
            for name in &step.unset {
                let _ = write!(preview, "\n  left out of the environment: {name}");
            }
            for resource in part.resources {
                if !classification.resources.contains(&resource) {
                    classification.resources.push(resource);
                }
            }
            for path in part.paths {
                if !classification.paths.contains(&path) {
                    classification.paths.push(path);
                }
            }
            classification.preimages.extend(part.preimages);
            classification
                .resources
                .push(Resource::Argv(argv_text(workspace, plan)));
        }
        preview.push_str(&self.shown);
        preview.push_str(&interpreter::pins_preview());
        classification.preview = Some(preview);
        if let Some(plan) = plans.first()
            && !self.named.is_empty()
        {
            let named: Vec<(String, &str)> = self
                .named
                .iter()
                .map(|word| ("word".to_owned(), word.as_str()))
                .collect();
            plan.inputs_of(workspace, &named)
                .bind(&mut classification, "the script's text");
        }
        let preview = classification.preview.take().unwrap_or_default();
        classification.resources.extend([
            Resource::Script(self.script.to_owned()),
            Resource::Source(self.file.to_owned()),
        ]);
        classification
            .preimages
            .push((format!("source:{}", self.file), self.digest.clone()));
        classification.preimages.extend(self.bound.iter().cloned());
        for (name, _) in &self.bound {
            if let Some(path) = name.strip_prefix("config:") {
                classification.paths.push(path.to_owned());
            }
        }
        classification.preview = Some(preview);
        classification
    }

    /// Stage 7, before each step: refuses to run unless every program, argument and file
    /// that decides what runs is what stage 4 found (`approved`) and the user approved.
    pub(super) fn verify(
        &self,
        workspace: &Workspace,
        plans: &[Plan],
        approved: &Approved,
    ) -> Result<(), ToolError> {
        let now = Approved::of(&self.classification(workspace, plans));
        let changed = |what: String| {
            ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("{what} since the call was approved; the call did not run"),
            )
        };
        if let Some((name, _)) = now
            .preimages
            .iter()
            .find(|entry| !approved.preimages.contains(entry))
            .or_else(|| {
                approved
                    .preimages
                    .iter()
                    .find(|entry| !now.preimages.contains(entry))
            })
        {
            let file = name.split_once(':').map_or(name.as_str(), |(_, f)| f);
            return Err(changed(format!("`{file}` changed")));
        }
        if now.resources != approved.resources {
            return Err(changed(format!(
                "the commands of `{}` changed",
                self.script
            )));
        }
        Ok(())
    }
}

/// The resolved argv as a resource value: JSON, the program as in its own resource.
fn argv_text(workspace: &Workspace, plan: &Plan) -> String {
    let argv: Vec<String> = std::iter::once(plan.program_resource(workspace))
        .chain(plan.args.iter().cloned())
        .collect();
    serde_json::to_string(&argv).unwrap_or_default()
}

/// What the project files at the workspace root define, and what could not be read.
#[derive(Debug, Default)]
pub(super) struct Project {
    /// In precedence order; the first definition of a script wins.
    definitions: Vec<Definition>,
    problems: Vec<String>,
    /// Why no script may run at all: a Makefile whose preview could not be trusted might
    /// define any of them.
    pub(super) blocker: Option<String>,
}

/// What one project file's parser is given.
pub(super) struct Source<'a> {
    pub(super) workspace: &'a Workspace,
    /// The environment commands start from (the confinement's).
    pub(super) environment: &'a [(String, String)],
    pub(super) file: &'static str,
    pub(super) text: &'a str,
}

/// What a parser found, or why the whole project is refused.
pub(super) enum Parsed {
    Found(Vec<Found>),
    Problem(String),
    Blocked(String),
}

impl Project {
    pub(super) fn read(workspace: &Workspace, environment: &[(String, String)]) -> Project {
        let mut project = Project::default();
        if let Some(file) = ["GNUmakefile", "makefile", "Makefile"]
            .into_iter()
            .find(|name| matches!(read(workspace, name), Ok(Some(_)) | Err(_)))
        {
            project.add(workspace, environment, file, makefile);
        }
        project.add(workspace, environment, "package.json", package_json);
        project.add(workspace, environment, "Cargo.toml", cargo_toml);
        project.add(workspace, environment, "pyproject.toml", pyproject_toml);
        project
    }

    /// Reads `file` and adds what `parse` finds in it.
    fn add(
        &mut self,
        workspace: &Workspace,
        environment: &[(String, String)],
        file: &'static str,
        parse: fn(&Source) -> Parsed,
    ) {
        let (text, digest) = match read(workspace, file) {
            Ok(Some(read)) => read,
            Ok(None) => return,
            Err(problem) => {
                self.problems.push(problem.to_string());
                return;
            }
        };
        let source = Source {
            workspace,
            environment,
            file,
            text: &text,
        };
        match parse(&source) {
            Parsed::Found(found) => {
                self.definitions
                    .extend(found.into_iter().map(|found| Definition {
                        script: found.script,
                        file,
                        steps: found.steps,
                        how: found.how,
                        shown: found.shown,
                        digest: digest.clone(),
                        bound: found.bound,
                        named: found.named,
                    }));
            }
            Parsed::Problem(reason) => self.problems.push(format!(
                "`{file}` could not be read as a project file: {reason}"
            )),
            Parsed::Blocked(reason) => {
                if self.blocker.is_none() {
                    self.blocker = Some(reason);
                }
            }
        }
    }

    pub(super) fn find(&self, script: &str) -> Option<&Definition> {
        self.definitions.iter().find(|d| d.script == script)
    }

    /// The definition of `script` and its steps' plans, or why it cannot run.
    pub(super) fn resolve(
        self,
        workspace: &Workspace,
        environment: &[(String, String)],
        script: &str,
    ) -> Result<(Definition, Vec<Plan>), ToolError> {
        if let Some(blocker) = self.blocker {
            return Err(ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("{blocker}; the call did not run"),
            ));
        }
        let definition = self.find(script).cloned().ok_or_else(|| {
            ToolError::new(
                ToolErrorCode::ScriptChanged,
                format!("the project no longer defines `{script}`; the call did not run"),
            )
        })?;
        let plans = definition.plans(workspace, environment)?;
        Ok((definition, plans))
    }

    /// The scripts this project defines, and why some files were not used, for a hint.
    pub(super) fn defined(&self) -> String {
        let mut listed: Vec<String> = Vec::new();
        for script in SCRIPTS {
            if let Some(d) = self.find(script) {
                let commands: Vec<String> = d.steps.iter().map(|s| s.argv.join(" ")).collect();
                listed.push(format!(
                    "`{script}` ({}: `{}`)",
                    d.file,
                    commands.join("`, then `")
                ));
            }
        }
        let mut hint = if listed.is_empty() {
            "no Makefile, package.json, Cargo.toml or pyproject.toml at the workspace root \
             defines test, build, lint, typecheck or format; use `run_command` instead"
                .to_owned()
        } else {
            format!("this project defines: {}", listed.join(", "))
        };
        for problem in &self.problems {
            hint.push_str("; ");
            hint.push_str(problem);
        }
        hint
    }
}

/// A script a project file defines, before it is tied to the file.
#[derive(Debug)]
pub(super) struct Found {
    pub(super) script: &'static str,
    pub(super) steps: Vec<Step>,
    pub(super) how: String,
    pub(super) shown: String,
    pub(super) bound: Vec<(String, Digest)>,
    pub(super) named: Vec<String>,
}

impl Found {
    pub(super) fn new(script: &'static str, argv: &[&str], how: String) -> Found {
        Found {
            script,
            steps: vec![Step {
                name: script.to_owned(),
                argv: argv.iter().map(|a| (*a).to_owned()).collect(),
                env: Vec::new(),
                unset: Vec::new(),
                about: String::new(),
            }],
            how,
            shown: String::new(),
            bound: Vec::new(),
            named: Vec::new(),
        }
    }
}

/// The words of shell text that could name a file: split where the shell splits or
/// quotes, leaving out words with expansions or globs, which only the shell could resolve.
pub(super) fn words_of(text: &str, into: &mut Vec<String>) {
    let separators = |c: char| {
        c.is_whitespace()
            || matches!(
                c,
                ';' | '|' | '&' | '(' | ')' | '<' | '>' | '"' | '\'' | '`' | '\\'
            )
    };
    for word in text.split(separators) {
        if word.is_empty()
            || word.contains(['$', '*', '?', '[', '~'])
            || into.iter().any(|w| w == word)
        {
            continue;
        }
        into.push(word.to_owned());
    }
}

/// Why a project file at the root could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum ReadError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("`{name}` is {total} bytes, more than the {MAX_PROJECT_FILE_BYTES} read")]
    TooLarge { name: String, total: u64 },
    #[error("`{0}` is not UTF-8")]
    NotUtf8(String),
}

/// A project file at the root as text, with its digest; `None` when there is none.
pub(super) fn read(
    workspace: &Workspace,
    name: &str,
) -> Result<Option<(String, Digest)>, ReadError> {
    let rel = RelPath::parse(name)?;
    match workspace.read_file(&rel, MAX_PROJECT_FILE_BYTES + 1) {
        Ok((_, total)) if total > MAX_PROJECT_FILE_BYTES => Err(ReadError::TooLarge {
            name: name.to_owned(),
            total,
        }),
        Ok((bytes, _)) => {
            let digest = sha256_digest(&bytes);
            String::from_utf8(bytes)
                .map(|text| Some((text, digest)))
                .map_err(|_| ReadError::NotUtf8(name.to_owned()))
        }
        Err(PathError::NotFound { .. }) => Ok(None),
        Err(error) => Err(error.into()),
    }
}

/// Why a tool's configuration at the root cannot be shown whole in a preview, which refuses
/// the script: what runs would not be what was shown.
#[derive(Debug, thiserror::Error)]
pub(super) enum ConfigError {
    #[error("{whose} configuration cannot be shown: {problem}")]
    Unshown {
        whose: &'static str,
        problem: ReadError,
    },
    #[error("{whose} configuration cannot be read: {problem}")]
    Unread {
        whose: &'static str,
        problem: ReadError,
    },
    #[error(
        "`{name}` is {len} bytes, more than the {MAX_CONFIG_SHOWN_BYTES} a preview shows whole"
    )]
    TooLarge { name: &'static str, len: usize },
}

/// A configuration file of `whose` (`cargo's`) at the root, to be shown whole, with its digest;
/// `None` when there is none.
pub(super) fn read_shown(
    workspace: &Workspace,
    name: &'static str,
    whose: &'static str,
) -> Result<Option<(String, Digest)>, ConfigError> {
    let found = read(workspace, name).map_err(|problem| ConfigError::Unshown { whose, problem })?;
    match found {
        Some((text, _)) if text.len() > MAX_CONFIG_SHOWN_BYTES => Err(ConfigError::TooLarge {
            name,
            len: text.len(),
        }),
        found => Ok(found),
    }
}
