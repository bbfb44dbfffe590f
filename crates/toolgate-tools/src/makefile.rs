//! A Makefile read as far as `run_script` needs: which rules make would run for one goal, and
//! whether anything in the file could make that preview a lie.
//!
//! `make test` runs whatever the Makefile says, and make's language can change what runs
//! without it showing in the target's recipe: `SHELL := ./x.sh` replaces the program every
//! recipe line runs with, `include extra.mk` reads a file nobody looked at (and may redefine
//! the target), `.RECIPEPREFIX` turns lines that look like variables into recipe lines,
//! `$(shell …)` and `!=` run programs while make reads the file, `$(eval …)` writes new rules at
//! run time. This scanner is deliberately not make: it accepts a plain subset of the language
//! and refuses, naming the construct and its line, everything whose effect it cannot show.
//! What it accepts is shown as written: the goal's recipe, its prerequisites' recipes (in the
//! order make runs them), the pattern and special rules make may also use, and the assignment
//! lines of every variable those recipes refer to.
//!
//! The scan is lexical and errs on the side of refusing: a `$(shell` anywhere, even inside a
//! recipe or a `$$`-quoted string, refuses the file.
//!
//! make first tries to remake every makefile it read, and if one changes it starts over with
//! the new text, which nobody saw. So a rule that could remake the makefile is refused, in any
//! spelling: an explicit, double-colon or grouped target naming it (or `GNUmakefile`,
//! `makefile`, `Makefile`, the names make looks for), a pattern (`%:`, `%.mk:`, `Make%:`) or
//! wildcard that matches it, `.DEFAULT`, and one-suffix rules once `.SUFFIXES` is given any.
//! `vpath` and `VPATH` make a prerequisite (the `$<` a recipe runs) a file in another
//! directory: they are shown, their directories must stay inside the workspace, and every
//! file they could select for a shown rule's prerequisite is handed back to be bound.
//!
//! [`make_command`] reads the arguments of a `make` that `run_command` runs: which makefiles
//! it reads (`-f` in every spelling, `-C`, the default names) and what else in them decides
//! what runs, in plain words, argument by argument.

use thiserror::Error;
use toolgate_exec::{is_allowed, is_denied};

/// Variables whose assignment changes how make runs recipes or reads makefiles.
const CONTROL_VARIABLES: &[(&str, &str)] = &[
    (
        "SHELL",
        "replaces the program make runs every recipe line with",
    ),
    (".SHELLFLAGS", "changes the arguments make gives the shell"),
    (
        ".RECIPEPREFIX",
        "changes which lines are recipes, so what looks like a variable may run",
    ),
    (
        "MAKEFLAGS",
        "passes options to make and to every make it starts",
    ),
    ("GNUMAKEFLAGS", "passes options to make"),
    ("MFLAGS", "passes options to the makes it starts"),
    ("MAKEFILES", "makes make read other makefiles first"),
    ("MAKE", "replaces the program `$(MAKE)` runs"),
    ("MAKELEVEL", "changes how make sees its own recursion"),
    ("MAKESHELL", "replaces the shell on some systems"),
];

/// Functions that run a program, write a file or add rules while make runs.
const FUNCTIONS: &[(&str, &str)] = &[
    (
        "shell",
        "runs a shell command while make reads the Makefile",
    ),
    (
        "eval",
        "adds rules and variables while make runs, which no preview can show",
    ),
    ("file", "writes files while make reads the Makefile"),
    ("guile", "runs Guile code inside make"),
];

/// Special targets that change how rules are read or what reaches recipes.
const SPECIAL_TARGETS: &[(&str, &str)] = &[
    (
        ".SECONDEXPANSION",
        "expands prerequisites a second time while make runs, which no preview can show",
    ),
    (
        ".EXPORT_ALL_VARIABLES",
        "exports every variable into the recipes' environment",
    ),
];

/// The names make looks for when no `-f` is given, in its order.
pub(crate) const DEFAULT_NAMES: [&str; 3] = ["GNUmakefile", "makefile", "Makefile"];

/// Most rules shown for one goal, prerequisites included.
const MAX_RULES_SHOWN: usize = 64;
/// Most lines of a preview of one goal.
const MAX_LINES_SHOWN: usize = 400;
/// Deepest variable expansion followed in a rule's targets and prerequisites.
const MAX_EXPANSION_DEPTH: usize = 16;

/// Why a Makefile cannot be shown for what it runs.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}: {construct} `{text}` {why}; toolgate cannot show what make would run")]
pub(crate) struct Unreliable {
    /// 1-based, the line where the construct starts.
    pub(crate) line: usize,
    /// What it is, in words: "an assignment to `SHELL`", "the directive `include`".
    pub(crate) construct: String,
    /// The line as written, bounded and escaped.
    pub(crate) text: String,
    pub(crate) why: String,
}

/// A Makefile that passed the scan.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Makefile {
    rules: Vec<Rule>,
    assignments: Vec<Assignment>,
    /// Variables exported to the recipes' environment, shown whether or not a recipe uses
    /// them, since the programs the recipes start read them.
    exported: Vec<String>,
    /// Special targets worth saying (`.ONESHELL`, `.POSIX`), with their lines.
    notes: Vec<String>,
    /// `vpath` lines, in order.
    vpaths: Vec<Vpath>,
    /// The directories of `VPATH`, as the file assigns it.
    vpath_dirs: Vec<String>,
}

/// One `vpath PATTERN DIRECTORIES` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Vpath {
    line: usize,
    text: String,
    /// `None` for `vpath` alone or `vpath PATTERN`, which clear.
    pattern: Option<String>,
    dirs: Vec<String>,
}

/// One rule line and the recipe lines after it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Rule {
    line: usize,
    targets: Vec<String>,
    prerequisites: Vec<String>,
    /// (line, text) of each recipe line, continuation lines joined as make joins them.
    recipe: Vec<(usize, String)>,
}

impl Rule {
    /// A rule make may use for targets it does not name: a pattern, suffix or `.DEFAULT` rule.
    fn is_implicit(&self) -> bool {
        self.targets
            .iter()
            .any(|t| t.contains('%') || (t.starts_with('.') && !t.starts_with("./")))
    }
}

/// One variable assignment, as written.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Assignment {
    line: usize,
    name: String,
    /// The value, unexpanded; `+=` values are appended in order.
    value: String,
    append: bool,
    /// The logical line as written, for the preview.
    text: String,
}

/// The goal's rules as make would run them, for the preview.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shown {
    pub(crate) text: String,
    /// Whether the goal, or a prerequisite, has a recipe line at all.
    pub(crate) has_recipe: bool,
    /// Every recipe line shown, as written, for the files they name to be bound.
    pub(crate) recipes: Vec<String>,
    /// The files the shown rules' prerequisites may be (relative to where make runs): each
    /// prerequisite as named and, with `vpath`/`VPATH`, in each directory make searches for
    /// it. A recipe reaches them as `$<` and `$^`, so they are bound like the recipes' words.
    pub(crate) prerequisites: Vec<String>,
}

impl Makefile {
    /// Scans `text`, the makefile make reads as `file`; refuses the first construct whose
    /// effect a preview could not show.
    pub(crate) fn parse(text: &str, file: &str) -> Result<Makefile, Unreliable> {
        Scanner {
            file: file.to_owned(),
            ..Scanner::default()
        }
        .scan(text)
    }

    /// The files every explicit rule's prerequisites may be, as [`Shown::prerequisites`]
    /// holds them for one goal: for a make whose goals toolgate does not show.
    pub(crate) fn prerequisites(&self) -> Vec<String> {
        let mut files = Vec::new();
        for rule in self.rules.iter().filter(|r| !r.is_implicit()) {
            for prerequisite in &rule.prerequisites {
                self.searched(prerequisite, &mut files);
            }
        }
        files
    }

    /// The `vpath` lines and the `VPATH` directories, as written, if there are any.
    pub(crate) fn search_path(&self) -> Option<String> {
        let mut parts: Vec<String> = self.vpaths.iter().map(|v| v.text.clone()).collect();
        if !self.vpath_dirs.is_empty() {
            parts.push(format!("VPATH {}", self.vpath_dirs.join(":")));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// Whether some rule names `goal` as a target.
    pub(crate) fn defines(&self, goal: &str) -> bool {
        self.rules
            .iter()
            .any(|r| !r.is_implicit() && r.targets.iter().any(|t| t == goal))
    }

    /// What make runs for `goal`: its prerequisites' rules first, depth first, then its own;
    /// then the implicit rules make may use; then the variables all of them refer to.
    pub(crate) fn show(&self, goal: &str) -> Result<Shown, Unreliable> {
        let mut order: Vec<usize> = Vec::new();
        let mut visiting: Vec<String> = Vec::new();
        self.visit(goal, &mut order, &mut visiting)?;
        let mut text = String::new();
        let mut has_recipe = false;
        let mut referenced: Vec<String> = Vec::new();
        let mut referenced_make = false;
        let mut recipes: Vec<String> = Vec::new();
        let mut prerequisites: Vec<String> = Vec::new();
        for &index in &order {
            let Some(rule) = self.rules.get(index) else {
                continue;
            };
            self.describe(rule, &mut text, &mut referenced);
            has_recipe |= !rule.recipe.is_empty();
            recipes.extend(rule.recipe.iter().map(|(_, line)| line.clone()));
            for prerequisite in &rule.prerequisites {
                self.searched(prerequisite, &mut prerequisites);
            }
        }
        let implicit: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.is_implicit() && !r.recipe.is_empty())
            .collect();
        if !implicit.is_empty() {
            text.push_str(
                "\nrules make may also use, for a prerequisite without a rule of its own \
                 (make's built-in rules are turned off):",
            );
            for rule in implicit {
                self.describe(rule, &mut text, &mut referenced);
                has_recipe = true;
                recipes.extend(rule.recipe.iter().map(|(_, line)| line.clone()));
            }
        }
        referenced_make |= referenced.iter().any(|name| name == "MAKE");
        if !self.vpaths.is_empty() || !self.vpath_dirs.is_empty() {
            text.push_str(
                "\nwhere make also looks for a prerequisite it does not find where it runs \
                 (`vpath`, `VPATH`); a recipe's `$<` and `$^` name what it finds there:",
            );
            for vpath in &self.vpaths {
                text.push_str(&format!("\n  {:>4}| {}", vpath.line, vpath.text));
            }
            referenced.push("VPATH".to_owned());
        }
        // Variables the shown lines refer to, those the recipes' environment gets, and those
        // their values refer to.
        referenced.extend(self.exported.iter().cloned());
        let mut shown_names: Vec<String> = Vec::new();
        while let Some(name) = referenced.pop() {
            if shown_names.contains(&name) {
                continue;
            }
            for assignment in self.assignments.iter().filter(|a| a.name == name) {
                referenced.extend(references(&assignment.value));
            }
            shown_names.push(name);
        }
        let mut variables: Vec<&Assignment> = self
            .assignments
            .iter()
            .filter(|a| shown_names.contains(&a.name))
            .collect();
        variables.sort_by_key(|a| a.line);
        if !variables.is_empty() {
            text.push_str(
                "\nvariables those lines use or the Makefile exports, as it assigns them:",
            );
            for assignment in variables {
                text.push_str(&format!("\n  {:>4}| {}", assignment.line, assignment.text));
            }
        }
        for note in &self.notes {
            text.push('\n');
            text.push_str(note);
        }
        // A recursive make reads makefiles this scan never saw.
        if referenced_make {
            text.push_str(
                "\na recipe above runs make again (`$(MAKE)`): the makefiles that make reads are \
                 neither scanned nor bound",
            );
        } else if recipes.iter().any(|recipe| runs_make(recipe)) {
            text.push_str(
                "\na recipe above runs make again (`make`): the makefiles that make reads are \
                 neither scanned nor bound",
            );
        }
        if text.lines().count() > MAX_LINES_SHOWN {
            return Err(Unreliable {
                line: 1,
                construct: format!("the rules for `{goal}`"),
                text: goal.to_owned(),
                why: format!("take more than {MAX_LINES_SHOWN} lines to show"),
            });
        }
        Ok(Shown {
            text,
            has_recipe,
            recipes,
            prerequisites,
        })
    }

    /// Adds the files `prerequisite` may be to `into`: itself, then in each directory a
    /// `vpath` that matches it names, then in each of `VPATH`'s.
    fn searched(&self, prerequisite: &str, into: &mut Vec<String>) {
        if prerequisite.contains('%') || prerequisite.starts_with('/') {
            return;
        }
        let mut add = |name: String| {
            if !into.contains(&name) {
                into.push(name);
            }
        };
        add(prerequisite.to_owned());
        for vpath in &self.vpaths {
            if vpath
                .pattern
                .as_deref()
                .is_some_and(|pattern| pattern_matches(pattern, prerequisite))
            {
                for dir in &vpath.dirs {
                    add(format!("{dir}/{prerequisite}"));
                }
            }
        }
        for dir in &self.vpath_dirs {
            add(format!("{dir}/{prerequisite}"));
        }
    }

    /// Adds `target`'s rules to `order` after those of its prerequisites.
    fn visit(
        &self,
        target: &str,
        order: &mut Vec<usize>,
        visiting: &mut Vec<String>,
    ) -> Result<(), Unreliable> {
        if visiting.iter().any(|t| t == target) {
            return Ok(());
        }
        visiting.push(target.to_owned());
        let rules: Vec<usize> = self
            .rules
            .iter()
            .enumerate()
            .filter(|(_, r)| !r.is_implicit() && r.targets.iter().any(|t| t == target))
            .map(|(i, _)| i)
            .collect();
        let with_recipe: Vec<&Rule> = rules
            .iter()
            .filter_map(|&i| self.rules.get(i))
            .filter(|r| !r.recipe.is_empty())
            .collect();
        if let [first, second, ..] = with_recipe.as_slice() {
            return Err(Unreliable {
                line: second.line,
                construct: format!("a second recipe for `{target}`"),
                text: target.to_owned(),
                why: format!(
                    "replaces the one at line {}, and make warns rather than says which runs",
                    first.line
                ),
            });
        }
        for &index in &rules {
            let Some(rule) = self.rules.get(index) else {
                continue;
            };
            for prerequisite in &rule.prerequisites {
                self.visit(prerequisite, order, visiting)?;
            }
        }
        for index in rules {
            if !order.contains(&index) {
                order.push(index);
            }
        }
        if order.len() > MAX_RULES_SHOWN {
            return Err(Unreliable {
                line: 1,
                construct: "the rules for this goal".to_owned(),
                text: target.to_owned(),
                why: format!("are more than the {MAX_RULES_SHOWN} a preview shows"),
            });
        }
        Ok(())
    }

    fn describe(&self, rule: &Rule, text: &mut String, referenced: &mut Vec<String>) {
        let prerequisites = if rule.prerequisites.is_empty() {
            String::new()
        } else {
            format!(" (after {})", rule.prerequisites.join(", "))
        };
        text.push_str(&format!(
            "\n  {:>4}| {}:{prerequisites}",
            rule.line,
            rule.targets.join(" ")
        ));
        if rule.recipe.is_empty() {
            text.push_str("\n        (no recipe)");
        }
        for (line, recipe) in &rule.recipe {
            referenced.extend(references(recipe));
            for (i, part) in recipe.split('\n').enumerate() {
                if i == 0 {
                    text.push_str(&format!("\n  {line:>4}|     {part}"));
                } else {
                    text.push_str(&format!("\n      |     {part}"));
                }
            }
        }
    }
}

/// Whether a program is make, by the names it is known by (the name it was given, the
/// resolved file's name).
pub(crate) fn is_make(names: &[&str]) -> bool {
    names.iter().any(|name| {
        let base = name.rsplit('/').next().unwrap_or(name);
        matches!(base, "make" | "gmake")
    })
}

/// What a `make` that `run_command` runs reads, as far as its arguments say.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct MakeCommand {
    /// The makefiles it reads, relative to the working directory, in order: those `-f` names
    /// in any spelling, or else the names make looks for (the first that exists is read).
    pub(crate) makefiles: Vec<String>,
    /// Whether no `-f` was given, so that make reads the first of [`DEFAULT_NAMES`] there is.
    pub(crate) defaults: bool,
    /// The directory make works in, relative to the working directory (`-C`); empty for the
    /// working directory itself.
    pub(crate) dir: String,
    /// Files from which make's built-in rules would remake a makefile (with no `-r`).
    pub(crate) sources: Vec<String>,
    /// Sentences for the preview, argument by argument: what the approval does not cover.
    pub(crate) notes: Vec<String>,
}

/// How a make option takes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Takes {
    Nothing,
    /// The next argument, or the rest of this one.
    Value,
    /// Only attached (`-j4`, `--jobs=4`).
    Optional,
}

/// GNU make's short options: the letter, how it takes a value.
const SHORT_OPTIONS: &[(char, Takes)] = &[
    ('b', Takes::Nothing),
    ('m', Takes::Nothing),
    ('B', Takes::Nothing),
    ('C', Takes::Value),
    ('d', Takes::Nothing),
    ('e', Takes::Nothing),
    ('E', Takes::Value),
    ('f', Takes::Value),
    ('h', Takes::Nothing),
    ('i', Takes::Nothing),
    ('I', Takes::Value),
    ('j', Takes::Optional),
    ('k', Takes::Nothing),
    ('l', Takes::Optional),
    ('L', Takes::Nothing),
    ('n', Takes::Nothing),
    ('o', Takes::Value),
    ('O', Takes::Optional),
    ('p', Takes::Nothing),
    ('q', Takes::Nothing),
    ('r', Takes::Nothing),
    ('R', Takes::Nothing),
    ('s', Takes::Nothing),
    ('S', Takes::Nothing),
    ('t', Takes::Nothing),
    ('v', Takes::Nothing),
    ('w', Takes::Nothing),
    ('W', Takes::Value),
];

/// GNU make's long options (any unambiguous prefix is accepted, as getopt does), each with
/// how it takes a value and the short option it means (`-` for one without).
const LONG_OPTIONS: &[(&str, Takes, char)] = &[
    ("always-make", Takes::Nothing, 'B'),
    ("assume-new", Takes::Value, 'W'),
    ("assume-old", Takes::Value, 'o'),
    ("check-symlink-times", Takes::Nothing, 'L'),
    ("debug", Takes::Optional, 'd'),
    ("directory", Takes::Value, 'C'),
    ("dry-run", Takes::Nothing, 'n'),
    ("environment-overrides", Takes::Nothing, 'e'),
    ("eval", Takes::Value, 'E'),
    ("file", Takes::Value, 'f'),
    ("help", Takes::Nothing, 'h'),
    ("ignore-errors", Takes::Nothing, 'i'),
    ("include-dir", Takes::Value, 'I'),
    ("jobs", Takes::Optional, 'j'),
    ("jobserver-auth", Takes::Value, '-'),
    ("jobserver-fds", Takes::Value, '-'),
    ("jobserver-style", Takes::Value, '-'),
    ("just-print", Takes::Nothing, 'n'),
    ("keep-going", Takes::Nothing, 'k'),
    ("load-average", Takes::Optional, 'l'),
    ("makefile", Takes::Value, 'f'),
    ("max-load", Takes::Optional, 'l'),
    ("new-file", Takes::Value, 'W'),
    ("no-builtin-rules", Takes::Nothing, 'r'),
    ("no-builtin-variables", Takes::Nothing, 'R'),
    ("no-keep-going", Takes::Nothing, 'S'),
    ("no-print-directory", Takes::Nothing, '-'),
    ("no-silent", Takes::Nothing, '-'),
    ("old-file", Takes::Value, 'o'),
    ("output-sync", Takes::Optional, 'O'),
    ("print-data-base", Takes::Nothing, 'p'),
    ("print-directory", Takes::Nothing, 'w'),
    ("question", Takes::Nothing, 'q'),
    ("quiet", Takes::Nothing, 's'),
    ("recon", Takes::Nothing, 'n'),
    ("shuffle", Takes::Optional, '-'),
    ("silent", Takes::Nothing, 's'),
    ("stop", Takes::Nothing, 'S'),
    ("sync-mutex", Takes::Value, '-'),
    ("touch", Takes::Nothing, 't'),
    ("trace", Takes::Nothing, '-'),
    ("version", Takes::Nothing, 'v'),
    ("warn-undefined-variables", Takes::Nothing, '-'),
    ("what-if", Takes::Value, 'W'),
];

/// The suffixes from which make's built-in rules make a file of no suffix (`Makefile` from
/// `Makefile.sh`, `Makefile.c`, …), directly or through another built-in rule.
const BUILTIN_SOURCE_SUFFIXES: &[&str] = &[
    "o", "c", "cc", "C", "cpp", "p", "f", "F", "r", "s", "S", "mod", "sh", "y", "l", "w", "web",
    "ym", "yl", "def", "ch",
];

/// Programs that start the command in their arguments (`timeout 60 make test`).
const WRAPPERS: &[&str] = &[
    "env", "nice", "timeout", "nohup", "stdbuf", "time", "command", "exec", "ionice", "chrt",
    "taskset", "setsid", "flock", "xargs", "unbuffer",
];

/// Shells, whose `-c` text may start make.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// What `make ARGS` reads and what its arguments change, for `run_command`.
pub(crate) fn make_command(args: &[String]) -> MakeCommand {
    make_command_in(args, &|i| format!("argv[{}]", i + 1), "argv[0]")
}

/// The make a wrapper or a shell's text starts, if the program known by `names` is one of
/// those and its arguments start make: `timeout 60 make -fx.mk`, `sh -c "make -C sub"`. A
/// shell's text is split at blanks and the shell's separators, quotes dropped: the make of
/// its first command that is one, looked at from the working directory (a `cd` before it is
/// said, not followed).
pub(crate) fn started_make(names: &[&str], args: &[String]) -> Option<MakeCommand> {
    let base = |name: &str| name.rsplit('/').next().unwrap_or(name).to_owned();
    let names: Vec<String> = names.iter().map(|n| base(n)).collect();
    if names.iter().any(|n| WRAPPERS.contains(&n.as_str())) {
        let at = args.iter().position(|arg| is_make(&[arg.as_str()]))?;
        let rest = args.get(at + 1..).unwrap_or_default();
        let program = format!("argv[{}] {:?}", at + 1, args.get(at)?);
        return Some(make_command_in(
            rest,
            &|i| format!("argv[{}]", at + 2 + i),
            &program,
        ));
    }
    if !names.iter().any(|n| SHELLS.contains(&n.as_str())) {
        return None;
    }
    for (k, arg) in args.iter().enumerate() {
        let tokens = shell_tokens(arg);
        let Some(at) = tokens
            .iter()
            .position(|t| matches!(t, Token::Word(w) if is_make(&[w.as_str()])))
        else {
            continue;
        };
        // The make's own words: up to the end of its command.
        let rest: Vec<String> = tokens
            .iter()
            .skip(at + 1)
            .map_while(|t| match t {
                Token::Word(w) => Some(w.clone()),
                Token::Separator => None,
            })
            .collect();
        let label = format!("argv[{}]", k + 1);
        let mut command = make_command_in(
            &rest,
            &|i| format!("{label}'s make, word {}", i + 1),
            &format!("{label}'s make"),
        );
        if tokens
            .iter()
            .take(at)
            .any(|t| matches!(t, Token::Word(w) if w == "cd" || w == "pushd"))
        {
            command.notes.push(format!(
                "{label}: its text changes directory before make starts; toolgate looked for \
                 the makefiles in the working directory, not there"
            ));
        }
        return Some(command);
    }
    None
}

/// A piece of shell text: a word (quotes dropped) or a separator between commands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Separator,
}

/// Shell text split at blanks, into words and the separators `;`, `|`, `&`, `(`, `)`, a
/// backquote and a newline; quotes are dropped, not obeyed, which is enough to find a command
/// and its plain arguments.
fn shell_tokens(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        let separator = matches!(c, ';' | '|' | '&' | '(' | ')' | '`' | '\n');
        if separator || c.is_whitespace() {
            if !word.is_empty() {
                tokens.push(Token::Word(std::mem::take(&mut word)));
            }
            if separator {
                tokens.push(Token::Separator);
            }
        } else if c != '"' && c != '\'' {
            word.push(c);
        }
    }
    if !word.is_empty() {
        tokens.push(Token::Word(word));
    }
    tokens
}

/// [`make_command`] for make's arguments `args`, each labelled for the preview by
/// `label_of(index)`, and make itself by `program`.
fn make_command_in(
    args: &[String],
    label_of: &dyn Fn(usize) -> String,
    program: &str,
) -> MakeCommand {
    let mut command = MakeCommand::default();
    let mut dirs: Vec<String> = Vec::new();
    let mut named: Vec<String> = Vec::new();
    let mut builtin_rules = true;
    let mut options_end = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        let label = format!("{} {arg:?}", label_of(i));
        i += 1;
        if options_end || !arg.starts_with('-') || arg == "-" {
            if let Some((name, _)) = arg.split_once('=')
                && !name.is_empty()
                && !name.contains(char::is_whitespace)
            {
                let name = name.trim_end_matches([':', '+', '?', '!']);
                command.notes.push(format!(
                    "{label}: sets make's variable `{name}` over what every makefile assigns \
                     it{}",
                    if CONTROL_VARIABLES.iter().any(|(n, _)| *n == name) {
                        " — a variable that changes how make runs recipes or reads makefiles"
                    } else {
                        ""
                    }
                ));
            }
            continue;
        }
        if arg == "--" {
            options_end = true;
            continue;
        }
        // Each option of the argument: its meaning and its value, if it has one.
        let mut found: Vec<(char, Option<String>)> = Vec::new();
        if let Some(long) = arg.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let matching: Vec<&(&str, Takes, char)> = LONG_OPTIONS
                .iter()
                .filter(|(full, _, _)| full.starts_with(name))
                .collect();
            let option = LONG_OPTIONS
                .iter()
                .find(|(full, _, _)| *full == name)
                .or(match matching.as_slice() {
                    [one] => Some(*one),
                    _ => None,
                });
            let Some(&(_, takes, short)) = option else {
                command.notes.push(format!(
                    "{label}: an option toolgate does not know for make, so what it changes is \
                     not said here"
                ));
                continue;
            };
            let value = match (takes, attached) {
                (Takes::Value, None) => {
                    let next = args.get(i).cloned();
                    i += 1;
                    next
                }
                (_, value) => value,
            };
            found.push((short, value));
        } else {
            let letters: Vec<char> = arg.chars().skip(1).collect();
            let mut at = 0;
            while let Some(&letter) = letters.get(at) {
                at += 1;
                let rest: String = letters.get(at..).unwrap_or_default().iter().collect();
                match SHORT_OPTIONS.iter().find(|(c, _)| *c == letter) {
                    None => {
                        command.notes.push(format!(
                            "{label}: `-{letter}` is an option toolgate does not know for make, \
                             so what it changes is not said here"
                        ));
                        break;
                    }
                    Some((_, Takes::Nothing)) => found.push((letter, None)),
                    Some((_, Takes::Optional)) => {
                        found.push((letter, Some(rest).filter(|r| !r.is_empty())));
                        break;
                    }
                    Some((_, Takes::Value)) => {
                        let value = if rest.is_empty() {
                            let next = args.get(i).cloned();
                            i += 1;
                            next
                        } else {
                            Some(rest)
                        };
                        found.push((letter, value));
                        break;
                    }
                }
            }
        }
        for (option, value) in found {
            let value = value.unwrap_or_default();
            match option {
                'f' if value == "-" => command.notes.push(format!(
                    "{label}: make reads a makefile from standard input (shown above as stdin)"
                )),
                'f' => named.push(value),
                'C' => {
                    command.notes.push(format!(
                        "{label}: make works in `{value}`, and reads its makefiles from there"
                    ));
                    dirs.push(value);
                }
                'r' => builtin_rules = false,
                'E' => command.notes.push(format!(
                    "{label}: make reads this text as makefile text before the makefiles: it can \
                     add rules and run any command, and toolgate does not scan it"
                )),
                'I' => command.notes.push(format!(
                    "{label}: an `include` finds makefiles in `{value}`; nothing included is bound"
                )),
                'e' => command.notes.push(format!(
                    "{label}: the environment's variables override the makefiles' assignments"
                )),
                _ => {}
            }
        }
    }
    let base = dirs.iter().fold(String::new(), |base, dir| {
        if dir.starts_with('/') || base.is_empty() {
            dir.clone()
        } else {
            format!("{}/{dir}", base.trim_end_matches('/'))
        }
    });
    let within = |name: &str| {
        if base.is_empty() || name.starts_with('/') {
            name.to_owned()
        } else {
            format!("{}/{name}", base.trim_end_matches('/'))
        }
    };
    let defaults = named.is_empty();
    let names: Vec<String> = if defaults {
        DEFAULT_NAMES.iter().map(|n| (*n).to_owned()).collect()
    } else {
        named
    };
    command.defaults = defaults;
    command.dir = base.clone();
    command.makefiles = names.iter().map(|name| within(name)).collect();
    if builtin_rules {
        for name in &command.makefiles {
            let (dir, file) = match name.rsplit_once('/') {
                Some((dir, file)) => (format!("{dir}/"), file),
                None => (String::new(), name.as_str()),
            };
            command.sources.extend([
                format!("{dir}{file},v"),
                format!("{dir}RCS/{file},v"),
                format!("{dir}RCS/{file}"),
                format!("{dir}s.{file}"),
                format!("{dir}SCCS/s.{file}"),
            ]);
            command.sources.extend(
                BUILTIN_SOURCE_SUFFIXES
                    .iter()
                    .map(|suffix| format!("{dir}{file}.{suffix}")),
            );
        }
        command.notes.push(format!(
            "{program}: make's built-in rules are on (no `-r`): before anything else they can \
             remake a makefile from a file beside it (`Makefile.sh`, `Makefile.c`, \
             `RCS/Makefile,v`, …) and run the new one; those files are bound where they exist, \
             and one that appears later refuses the call"
        ));
    }
    command
}

/// Whether shell text starts make by name (`make -C sub`, `cd x && gmake`).
fn runs_make(text: &str) -> bool {
    text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')' | '`'))
        .any(|word| {
            let word = word.trim_start_matches(['@', '-', '+']);
            let base = word.rsplit('/').next().unwrap_or(word);
            matches!(base, "make" | "gmake")
        })
}

/// The names of the variables `text` refers to: `$(NAME)`, `${NAME}`, `$(NAME:a=b)`, `$N`.
fn references(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let after = rest.get(at + 1..).unwrap_or_default();
        let mut chars = after.chars();
        match chars.next() {
            Some(open @ ('(' | '{')) => {
                let close = if open == '(' { ')' } else { '}' };
                let inner = chars.as_str();
                let end = inner
                    .find(|c: char| c == close || c == ':' || c.is_whitespace() || c == ',')
                    .unwrap_or(inner.len());
                let name = inner.get(..end).unwrap_or_default();
                if !name.is_empty() && !name.contains('$') {
                    names.push(name.to_owned());
                }
                rest = inner;
            }
            Some('$') => rest = chars.as_str(),
            Some(c) if c.is_ascii_alphanumeric() || c == '_' => {
                names.push(c.to_string());
                rest = chars.as_str();
            }
            _ => rest = after,
        }
    }
    names
}

/// A line as shown in a refusal: trimmed, escaped, at most 80 characters.
fn excerpt(text: &str) -> String {
    let trimmed = text.trim();
    let mut shown: String = trimmed.chars().take(80).collect();
    if trimmed.chars().count() > 80 {
        shown.push('…');
    }
    shown.escape_debug().to_string()
}

#[derive(Debug, Default)]
struct Scanner {
    /// The makefile's name as make reads it (`Makefile`, `sub/x.mk`).
    file: String,
    makefile: Makefile,
    /// Whether `.SUFFIXES` was given suffixes, which make one-suffix rules apply.
    suffixes: Option<usize>,
    /// The first one-suffix rule (`.in:`), with its line and text.
    single_suffix: Option<(usize, String, String)>,
    /// Indexes of the rules the latest rule line started, which recipe lines belong to.
    current: Vec<usize>,
    /// Inside `define … endef`: the assignment being collected and how deep `define`s nest.
    define: Option<(Assignment, usize)>,
}

impl Scanner {
    fn scan(mut self, text: &str) -> Result<Makefile, Unreliable> {
        let lines: Vec<&str> = text.split('\n').collect();
        let mut i = 0;
        while let Some(&first) = lines.get(i) {
            let number = i + 1;
            // A logical line: physical lines joined where one ends in a backslash.
            let mut logical = first.trim_end_matches('\r').to_owned();
            while logical.ends_with('\\') && !logical.ends_with("\\\\") {
                i += 1;
                let Some(next) = lines.get(i) else { break };
                logical.push('\n');
                logical.push_str(next.trim_end_matches('\r'));
            }
            i += 1;
            self.function_check(number, &logical)?;
            if self.define.is_some() {
                self.define_line(number, &logical)?;
                continue;
            }
            if let Some(recipe) = logical.strip_prefix('\t')
                && !self.current.is_empty()
            {
                for &index in &self.current {
                    if let Some(rule) = self.makefile.rules.get_mut(index) {
                        rule.recipe.push((number, recipe.to_owned()));
                    }
                }
                continue;
            }
            self.line(number, &logical)?;
        }
        if let Some((assignment, _)) = self.define {
            return Err(Unreliable {
                line: assignment.line,
                construct: "a `define` without `endef`".to_owned(),
                text: excerpt(&assignment.text),
                why: "runs to the end of the file".to_owned(),
            });
        }
        if let (Some(_), Some((line, target, text))) = (self.suffixes, &self.single_suffix) {
            return Err(Unreliable {
                line: *line,
                construct: format!("the one-suffix rule `{target}`"),
                text: text.clone(),
                why: "applies to every file, the makefile among them, once `.SUFFIXES` names \
                      suffixes: make could remake the makefile and run the new one"
                    .to_owned(),
            });
        }
        self.vpath_variable()?;
        Ok(self.makefile)
    }

    /// `VPATH`'s directories, which must be worked out and stay inside the workspace.
    fn vpath_variable(&mut self) -> Result<(), Unreliable> {
        let Some(first) = self
            .makefile
            .assignments
            .iter()
            .find(|a| a.name == "VPATH")
            .cloned()
        else {
            return Ok(());
        };
        let refuse = |why: String| Unreliable {
            line: first.line,
            construct: "an assignment to `VPATH`".to_owned(),
            text: excerpt(&first.text),
            why,
        };
        let value = self.value_of("VPATH", 0).ok_or_else(|| {
            refuse(
                "uses a function or is assigned more than once, so toolgate cannot work out \
                 where make looks for prerequisites"
                    .to_owned(),
            )
        })?;
        self.makefile.vpath_dirs = search_dirs(&value).map_err(|e| refuse(e.to_string()))?;
        Ok(())
    }

    /// A `vpath` line: shown, and its directories worked out.
    fn vpath_line(&mut self, number: usize, logical: &str, code: &str) -> Result<(), Unreliable> {
        let refuse = |why: String| Unreliable {
            line: number,
            construct: "the directive `vpath`".to_owned(),
            text: excerpt(logical),
            why,
        };
        let rest = code.trim().get("vpath".len()..).unwrap_or_default();
        let expanded = self.expand(rest, 0).ok_or_else(|| {
            refuse(
                "uses a function or a variable assigned more than once, so toolgate cannot work \
                 out where make looks for prerequisites"
                    .to_owned(),
            )
        })?;
        let mut words = expanded.split_whitespace();
        let pattern = words.next().map(str::to_owned);
        let dirs_text: Vec<&str> = words.collect();
        let dirs = search_dirs(&dirs_text.join(" ")).map_err(|e| refuse(e.to_string()))?;
        self.makefile.vpaths.push(Vpath {
            line: number,
            text: logical.trim().to_owned(),
            pattern: pattern.filter(|_| !dirs.is_empty()),
            dirs,
        });
        Ok(())
    }

    /// Refuses `$(shell …)`, `${eval …}` and the other functions anywhere in the file.
    fn function_check(&self, number: usize, logical: &str) -> Result<(), Unreliable> {
        let mut rest = logical;
        while let Some(at) = rest.find('$') {
            let after = rest.get(at + 1..).unwrap_or_default();
            if let Some(inner) = after.strip_prefix('(').or_else(|| after.strip_prefix('{')) {
                let inner = inner.trim_start();
                for (name, why) in FUNCTIONS {
                    if let Some(tail) = inner.strip_prefix(name)
                        && tail.starts_with(|c: char| c.is_whitespace() || c == ')' || c == '}')
                    {
                        return Err(Unreliable {
                            line: number,
                            construct: format!("the function `{name}`"),
                            text: excerpt(logical),
                            why: (*why).to_owned(),
                        });
                    }
                }
            }
            rest = after;
        }
        Ok(())
    }

    fn define_line(&mut self, number: usize, logical: &str) -> Result<(), Unreliable> {
        let trimmed = logical.trim();
        let word = trimmed.split_whitespace().next().unwrap_or_default();
        let Some((assignment, depth)) = self.define.as_mut() else {
            return Ok(());
        };
        if word == "define" {
            *depth += 1;
        } else if word == "endef" {
            if *depth == 0 {
                if let Some((done, _)) = self.define.take() {
                    self.makefile.assignments.push(done);
                }
                return Ok(());
            }
            *depth -= 1;
        }
        let _ = number;
        if !assignment.value.is_empty() {
            assignment.value.push('\n');
        }
        assignment.value.push_str(logical);
        assignment.text.push('\n');
        assignment.text.push_str(logical);
        Ok(())
    }

    /// One logical line that is not a recipe line.
    fn line(&mut self, number: usize, logical: &str) -> Result<(), Unreliable> {
        // Outside recipes make reads a backslash-newline as one space.
        let joined = logical.replace("\\\n", " ");
        let code = strip_comment(&joined);
        let trimmed = code.trim();
        if trimmed.is_empty() {
            // Blank lines and comments do not end a rule's recipe.
            return Ok(());
        }
        let refuse = |construct: String, why: &str| Unreliable {
            line: number,
            construct,
            text: excerpt(logical),
            why: why.to_owned(),
        };
        let mut words = trimmed.split_whitespace();
        let first = words.next().unwrap_or_default();
        match first {
            "include" | "-include" | "sinclude" => {
                return Err(refuse(
                    format!("the directive `{first}`"),
                    "reads another file, which is neither shown nor bound and may redefine any \
                     target",
                ));
            }
            "load" | "-load" => {
                return Err(refuse(
                    format!("the directive `{first}`"),
                    "loads a shared object into make",
                ));
            }
            "ifeq" | "ifneq" | "ifdef" | "ifndef" | "else" | "endif" => {
                // Conditionals are transparent here: every branch is scanned and refused alike;
                // they do not end a rule's recipe, as in make.
                return Ok(());
            }
            "vpath" => return self.vpath_line(number, logical, code),
            _ => {}
        }
        self.current.clear();
        let (modifiers, rest) = modifiers(trimmed);
        let rest_word = rest.split_whitespace().next().unwrap_or_default();
        if rest_word == "define" {
            let spec = rest.get("define".len()..).unwrap_or_default().trim();
            let name = spec
                .trim_end_matches(['=', ':', '?', '+', '!'])
                .trim()
                .to_owned();
            if spec.ends_with("!=") {
                return Err(refuse(
                    "a `define … !=`".to_owned(),
                    "runs a shell command while make reads the Makefile",
                ));
            }
            let exported = modifiers.contains(&"export");
            check_name(&name, exported, &refuse)?;
            if exported {
                self.makefile.exported.push(name.clone());
            }
            self.define = Some((
                Assignment {
                    line: number,
                    name,
                    value: String::new(),
                    append: spec.ends_with("+="),
                    text: logical.trim().to_owned(),
                },
                0,
            ));
            return Ok(());
        }
        if rest_word == "undefine" {
            let name = rest.get("undefine".len()..).unwrap_or_default().trim();
            return check_name(name, false, &refuse);
        }
        if let Some((name, op, value)) = split_assignment(rest) {
            if op == "!=" {
                return Err(refuse(
                    format!("the shell assignment `{name} !=`"),
                    "runs a shell command while make reads the Makefile",
                ));
            }
            let exported = modifiers.contains(&"export");
            check_name(name, exported, &refuse)?;
            if exported {
                self.makefile.exported.push(name.to_owned());
            }
            self.makefile.assignments.push(Assignment {
                line: number,
                name: name.to_owned(),
                value: value.trim().to_owned(),
                append: op == "+=",
                text: logical.trim().to_owned(),
            });
            return Ok(());
        }
        if !modifiers.is_empty() {
            // `export NAME…`, `unexport NAME…`, or `export` alone.
            let names: Vec<&str> = rest.split_whitespace().collect();
            if names.is_empty() && modifiers.contains(&"export") {
                return Err(refuse(
                    "`export` on its own".to_owned(),
                    "exports every variable into the recipes' environment",
                ));
            }
            let exported = modifiers.contains(&"export");
            for name in names {
                check_name(name, exported, &refuse)?;
                if exported {
                    self.makefile.exported.push(name.to_owned());
                }
            }
            return Ok(());
        }
        self.rule(number, logical, trimmed)
    }

    fn rule(&mut self, number: usize, logical: &str, trimmed: &str) -> Result<(), Unreliable> {
        let refuse = |construct: String, why: &str| Unreliable {
            line: number,
            construct,
            text: excerpt(logical),
            why: why.to_owned(),
        };
        let Some(colon) = find_top_level(trimmed, ':') else {
            return Err(refuse(
                "a line that is neither a rule nor an assignment".to_owned(),
                "is not make syntax this scanner knows",
            ));
        };
        let targets_text = trimmed.get(..colon).unwrap_or_default();
        let mut rhs = trimmed.get(colon + 1..).unwrap_or_default();
        rhs = rhs.strip_prefix(':').unwrap_or(rhs);
        rhs = rhs.strip_prefix('&').unwrap_or(rhs);
        let (prerequisites_text, inline) = match find_top_level(rhs, ';') {
            Some(at) => (
                rhs.get(..at).unwrap_or_default(),
                Some(rhs.get(at + 1..).unwrap_or_default().trim().to_owned()),
            ),
            None => (rhs, None),
        };
        // A target- or pattern-specific variable: `test: SHELL = ./x.sh`.
        let (modifiers, rest) = modifiers(prerequisites_text.trim());
        if let Some((name, op, value)) = split_assignment(rest) {
            if op == "!=" {
                return Err(refuse(
                    format!("the shell assignment `{name} !=`"),
                    "runs a shell command while make reads the Makefile",
                ));
            }
            let exported = modifiers.contains(&"export");
            check_name(name, exported, &refuse)?;
            if exported {
                self.makefile.exported.push(name.to_owned());
            }
            // Kept like any assignment, so a recipe that uses it shows it.
            self.makefile.assignments.push(Assignment {
                line: number,
                name: name.to_owned(),
                value: value.trim().to_owned(),
                append: op == "+=",
                text: logical.trim().to_owned(),
            });
            return Ok(());
        }
        let targets = self.expand_words(targets_text, &refuse)?;
        let mut prerequisites = self.expand_words(prerequisites_text, &refuse)?;
        prerequisites.retain(|p| p != "|");
        let mut unique: Vec<String> = Vec::new();
        for prerequisite in prerequisites {
            if !unique.contains(&prerequisite) {
                unique.push(prerequisite);
            }
        }
        let prerequisites = unique;
        for target in &targets {
            if let Some((_, why)) = SPECIAL_TARGETS.iter().find(|(name, _)| name == target) {
                return Err(refuse(format!("the special target `{target}`"), why));
            }
            if let Some(why) = remakes(target, &self.file) {
                return Err(refuse(format!("a rule for `{}`", excerpt(target)), &why));
            }
            if target == ".SUFFIXES" && !prerequisites.is_empty() && self.suffixes.is_none() {
                self.suffixes = Some(number);
            }
            if is_single_suffix(target) && self.single_suffix.is_none() {
                self.single_suffix = Some((number, target.clone(), excerpt(logical)));
            }
            match target.as_str() {
                ".ONESHELL" => self.makefile.notes.push(format!(
                    "`.ONESHELL` (line {number}): all the lines of a recipe run as one shell \
                     script"
                )),
                ".POSIX" => self.makefile.notes.push(format!(
                    "`.POSIX` (line {number}): the shell runs each recipe line with `-e`"
                )),
                ".IGNORE" => self.makefile.notes.push(format!(
                    "`.IGNORE` (line {number}): make goes on after a failing recipe line"
                )),
                _ => {}
            }
        }
        let index = self.makefile.rules.len();
        let mut rule = Rule {
            line: number,
            targets,
            prerequisites,
            recipe: Vec::new(),
        };
        if let Some(recipe) = inline.filter(|r| !r.is_empty()) {
            rule.recipe.push((number, recipe));
        }
        self.makefile.rules.push(rule);
        self.current = vec![index];
        Ok(())
    }

    /// The words of a rule's targets or prerequisites, with variables expanded from the
    /// file's own simple assignments; a reference that cannot be worked out is refused,
    /// since it could name the goal, or expand to an assignment.
    fn expand_words(
        &self,
        text: &str,
        refuse: &dyn Fn(String, &str) -> Unreliable,
    ) -> Result<Vec<String>, Unreliable> {
        let expanded = self.expand(text, 0).ok_or_else(|| {
            refuse(
                format!("the rule names `{}`", excerpt(text)),
                "use a function or a variable assigned more than once, which toolgate cannot \
                 work out",
            )
        })?;
        if expanded.contains('=') {
            return Err(refuse(
                format!("the rule names `{}`", excerpt(text)),
                "expand to an assignment",
            ));
        }
        Ok(expanded.split_whitespace().map(str::to_owned).collect())
    }

    fn expand(&self, text: &str, depth: usize) -> Option<String> {
        if depth > MAX_EXPANSION_DEPTH {
            return None;
        }
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find('$') {
            out.push_str(rest.get(..at)?);
            let after = rest.get(at + 1..)?;
            let mut chars = after.chars();
            let (name, tail) = match chars.next()? {
                '$' => {
                    out.push('$');
                    rest = chars.as_str();
                    continue;
                }
                open @ ('(' | '{') => {
                    let close = if open == '(' { ')' } else { '}' };
                    let inner = chars.as_str();
                    let end = inner.find(close)?;
                    (inner.get(..end)?, inner.get(end + 1..)?)
                }
                c => (after.get(..c.len_utf8())?, chars.as_str()),
            };
            // A function call, a substitution reference or a computed name.
            if name.contains(|c: char| c.is_whitespace() || matches!(c, '$' | ':' | ',' | '(')) {
                return None;
            }
            out.push_str(&self.value_of(name, depth)?);
            rest = tail;
        }
        out.push_str(rest);
        Some(out)
    }

    /// A variable's value, if the file assigns it once (plus `+=`) before this line,
    /// expanded. A name it does not assign is refused: make's own variables
    /// (`$(MAKECMDGOALS)` is the goal) could make a rule name the goal unseen.
    fn value_of(&self, name: &str, depth: usize) -> Option<String> {
        let assignments: Vec<&Assignment> = self
            .makefile
            .assignments
            .iter()
            .filter(|a| a.name == name)
            .collect();
        if assignments.is_empty() || assignments.iter().filter(|a| !a.append).count() > 1 {
            return None;
        }
        let mut value = String::new();
        for assignment in assignments {
            if !value.is_empty() {
                value.push(' ');
            }
            value.push_str(&self.expand(&assignment.value, depth + 1)?);
        }
        Some(value)
    }
}

/// Why a rule for `target` could remake the makefile make reads as `file` (or one of the
/// names make looks for), which make would then read again; `None` if it cannot.
fn remakes(target: &str, file: &str) -> Option<String> {
    // make reads `./Makefile` as `Makefile`.
    let mut target = target;
    while let Some(rest) = target.strip_prefix("./") {
        target = rest.trim_start_matches('/');
    }
    if target == ".DEFAULT" {
        return Some(
            "is used for any file without a rule, the makefile among them: make could remake \
             the makefile and run the new one, which nobody saw"
                .to_owned(),
        );
    }
    let mut file = file;
    while let Some(rest) = file.strip_prefix("./") {
        file = rest.trim_start_matches('/');
    }
    let base = |name: &str| name.rsplit('/').next().unwrap_or(name).to_owned();
    let mut names: Vec<String> = vec![file.to_owned(), base(file)];
    names.extend(DEFAULT_NAMES.iter().map(|n| (*n).to_owned()));
    let named = names.iter().find(|name| {
        if target.contains('%') {
            // A pattern without a slash is matched against the file's name alone.
            pattern_matches(target, name) || pattern_matches(target, &base(name))
        } else if target.contains(['*', '?', '[']) {
            // make expands a wildcard against the files there; `[` sets are not worked out.
            target.contains('[') || glob_matches(target, name) || glob_matches(target, &base(name))
        } else {
            target == name.as_str() || base(target) == base(name)
        }
    })?;
    Some(format!(
        "could remake the makefile `{named}`: make remakes its makefiles before anything else \
         and then reads the new one, which nobody saw"
    ))
}

/// Whether make's pattern `pattern` (one `%`, or none for the name itself) matches `name`.
fn pattern_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('%') {
        Some((prefix, suffix)) => {
            name.len() >= prefix.len() + suffix.len()
                && name.starts_with(prefix)
                && name.ends_with(suffix)
        }
        None => pattern == name,
    }
}

/// Whether the shell wildcard `glob` (`*` and `?` only) matches `name`.
fn glob_matches(glob: &str, name: &str) -> bool {
    let glob: Vec<char> = glob.chars().collect();
    let name: Vec<char> = name.chars().collect();
    // matched[j]: whether the glob so far matches the first j characters of the name.
    let mut matched = vec![false; name.len() + 1];
    if let Some(first) = matched.first_mut() {
        *first = true;
    }
    for g in glob {
        let mut next = vec![false; name.len() + 1];
        for j in 0..=name.len() {
            let here = matched.get(j).copied().unwrap_or(false);
            match g {
                '*' => {
                    let before = j.checked_sub(1).and_then(|k| next.get(k)).copied();
                    if let Some(slot) = next.get_mut(j) {
                        *slot = here || before.unwrap_or(false);
                    }
                }
                _ => {
                    if here
                        && let Some(c) = name.get(j)
                        && (g == '?' || g == *c)
                        && let Some(slot) = next.get_mut(j + 1)
                    {
                        *slot = true;
                    }
                }
            }
        }
        matched = next;
    }
    matched.last().copied().unwrap_or(false)
}

/// Whether `target` is a one-suffix rule's (`.in`): a dot, then a name without another dot,
/// that is not one of make's special targets.
fn is_single_suffix(target: &str) -> bool {
    let Some(suffix) = target.strip_prefix('.') else {
        return false;
    };
    !suffix.is_empty()
        && !suffix.contains(['.', '/', '%'])
        && !suffix.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// The directories of a search path (`VPATH`'s value, a `vpath` line's), separated by `:` or
/// blanks; each must be relative and stay inside the directory make runs in, where its files
/// can be bound.
fn search_dirs(text: &str) -> Result<Vec<String>, SearchDirError> {
    let mut dirs = Vec::new();
    for dir in text.split(|c: char| c == ':' || c.is_whitespace()) {
        if dir.is_empty() {
            continue;
        }
        if dir.starts_with('/') || dir.starts_with('~') {
            return Err(SearchDirError::Outside(excerpt(dir)));
        }
        let mut depth = 0usize;
        for part in dir.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    depth = depth
                        .checked_sub(1)
                        .ok_or_else(|| SearchDirError::Leaves(excerpt(dir)))?;
                }
                _ => depth += 1,
            }
        }
        let dir = dir.trim_end_matches('/').to_owned();
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    Ok(dirs)
}

/// A directory of a search path whose files toolgate cannot bind.
#[derive(Debug, thiserror::Error)]
enum SearchDirError {
    #[error("names the directory `{0}` outside the workspace, whose files toolgate cannot bind")]
    Outside(String),
    #[error(
        "names the directory `{0}`, which leaves the directory make runs in, so its files are not bound"
    )]
    Leaves(String),
}

/// Refuses a variable name that is computed, a control variable of make, or one that reaches
/// the recipes' environment in a way toolgate never allows.
fn check_name(
    name: &str,
    exported: bool,
    refuse: &dyn Fn(String, &str) -> Unreliable,
) -> Result<(), Unreliable> {
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '$') {
        return Err(refuse(
            format!("an assignment to the computed name `{}`", excerpt(name)),
            "may set any variable, `SHELL` among them",
        ));
    }
    if let Some((_, why)) = CONTROL_VARIABLES.iter().find(|(n, _)| *n == name) {
        return Err(refuse(format!("an assignment to `{name}`"), why));
    }
    // Variables make took from its environment are passed on to recipes with the Makefile's
    // value, exported or not: `PATH := ./bin:$(PATH)` changes which `cargo` a recipe runs.
    if is_allowed(name) {
        return Err(refuse(
            format!("an assignment to `{name}`"),
            "changes the environment every recipe runs in",
        ));
    }
    // Exported, a name toolgate keeps from every program (loader and shell start-up
    // variables, secrets) would reach them all.
    if exported && is_denied(name) {
        return Err(refuse(
            format!("an export of `{name}`"),
            "puts a variable toolgate never passes to a program into every recipe's \
             environment",
        ));
    }
    Ok(())
}

/// `override`, `export`, `private` and `unexport` in front of a line, and the rest.
fn modifiers(text: &str) -> (Vec<&str>, &str) {
    let mut found = Vec::new();
    let mut rest = text;
    loop {
        let word = rest.split_whitespace().next().unwrap_or_default();
        if !matches!(word, "override" | "export" | "private" | "unexport") {
            return (found, rest);
        }
        found.push(word);
        rest = rest.get(word.len()..).unwrap_or_default().trim_start();
    }
}

/// `NAME op value` if `text` is an assignment: an `=` before any rule colon, outside
/// parentheses, with `:`, `::`, `:::`, `?`, `+` or `!` before it making the operator.
fn split_assignment(text: &str) -> Option<(&str, &'static str, &str)> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => depth = depth.saturating_sub(1),
            '=' if depth == 0 => {
                let lhs = text.get(..at)?;
                let value = text.get(at + 1..)?;
                let (name, op) = if let Some(name) = lhs.strip_suffix(":::") {
                    (name, ":::=")
                } else if let Some(name) = lhs.strip_suffix("::") {
                    (name, "::=")
                } else if let Some(name) = lhs.strip_suffix(':') {
                    (name, ":=")
                } else if let Some(name) = lhs.strip_suffix('?') {
                    (name, "?=")
                } else if let Some(name) = lhs.strip_suffix('+') {
                    (name, "+=")
                } else if let Some(name) = lhs.strip_suffix('!') {
                    (name, "!=")
                } else {
                    (lhs, "=")
                };
                // A colon left in the name makes this a rule (`a: b=c` is target-specific).
                if name.contains(':') {
                    return None;
                }
                return Some((name.trim(), op, value));
            }
            ':' | ';' if depth == 0 => {
                // `:` followed by `=`, `:=` or `::=` is an operator, handled above.
                let next = text.get(at + 1..)?;
                if c == ':'
                    && (next.starts_with('=') || next.starts_with(":=") || next.starts_with("::="))
                {
                    continue;
                }
                return None;
            }
            _ => {}
        }
    }
    None
}

/// The first `c` outside parentheses.
fn find_top_level(text: &str, wanted: char) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '(' | '{' => depth += 1,
            ')' | '}' => depth = depth.saturating_sub(1),
            _ if c == wanted && depth == 0 => return Some(at),
            _ => {}
        }
    }
    None
}

/// The line up to a `#` that is not escaped.
fn strip_comment(line: &str) -> &str {
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match c {
            '\\' => escaped = !escaped,
            '#' if !escaped => return line.get(..at).unwrap_or(line),
            _ => escaped = false,
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makefiles refused, with the line and a word the message must name.
    const REFUSED: &[(&str, &str, usize, &str)] = &[
        (
            "SHELL :=",
            "SHELL := ./x.sh\ntest:\n\techo hi\n",
            1,
            "`SHELL`",
        ),
        ("SHELL =", "SHELL = ./x.sh\n", 1, "`SHELL`"),
        ("SHELL ?=", "SHELL?=./x.sh\n", 1, "`SHELL`"),
        ("SHELL ::=", "SHELL::=./x.sh\n", 1, "`SHELL`"),
        ("SHELL :::=", "SHELL:::=./x.sh\n", 1, "`SHELL`"),
        ("SHELL +=", "SHELL+= -x\n", 1, "`SHELL`"),
        ("override SHELL", "override SHELL=./x.sh\n", 1, "`SHELL`"),
        ("export SHELL", "export SHELL := ./x.sh\n", 1, "`SHELL`"),
        (
            "override export",
            "override export SHELL = x\n",
            1,
            "`SHELL`",
        ),
        (
            "leading spaces",
            "test:\n\techo\n   SHELL = ./x.sh\n",
            3,
            "`SHELL`",
        ),
        (
            "a tab before any rule",
            "\tSHELL = ./x.sh\ntest:\n\techo\n",
            1,
            "`SHELL`",
        ),
        (
            "define SHELL",
            "define SHELL\n./x.sh\nendef\n",
            1,
            "`SHELL`",
        ),
        (
            "define SHELL :=",
            "define SHELL :=\n./x.sh\nendef\n",
            1,
            "`SHELL`",
        ),
        ("continued name", "SH\\\nELL = x\n", 1, "computed"),
        (
            "target-specific SHELL",
            "test: SHELL = ./x.sh\ntest:\n\techo\n",
            1,
            "`SHELL`",
        ),
        (
            "pattern-specific SHELL",
            "%: SHELL := ./x.sh\n",
            1,
            "`SHELL`",
        ),
        (
            ".SHELLFLAGS",
            ".SHELLFLAGS = -c ./x.sh\n",
            1,
            "`.SHELLFLAGS`",
        ),
        (
            ".RECIPEPREFIX",
            ".RECIPEPREFIX = >\ntest:\n> echo\n",
            1,
            "`.RECIPEPREFIX`",
        ),
        ("MAKEFLAGS", "MAKEFLAGS += -j\n", 1, "`MAKEFLAGS`"),
        ("MAKEFILES", "MAKEFILES = extra.mk\n", 1, "`MAKEFILES`"),
        ("MAKE", "MAKE = ./x.sh\n", 1, "`MAKE`"),
        (
            "include",
            "test:\n\techo\ninclude extra.mk\n",
            3,
            "`include`",
        ),
        ("-include", "-include extra.mk\n", 1, "`-include`"),
        ("sinclude", "  sinclude extra.mk\n", 1, "`sinclude`"),
        ("load", "load ./x.so\n", 1, "`load`"),
        ("$(shell)", "X := $(shell ./x.sh)\n", 1, "`shell`"),
        ("${shell}", "X = ${shell ./x.sh}\n", 1, "`shell`"),
        (
            "shell in a recipe",
            "test:\n\techo $(shell ./x.sh)\n",
            2,
            "`shell`",
        ),
        (
            "shell in a prerequisite",
            "test: $(shell ./x.sh)\n",
            1,
            "`shell`",
        ),
        ("$(eval)", "$(eval test: ; ./x.sh)\n", 1, "`eval`"),
        ("${eval} in a recipe", "test:\n\t${eval X=1}\n", 2, "`eval`"),
        ("$(file)", "X := $(file >out,hi)\n", 1, "`file`"),
        ("shell assignment", "X != ./x.sh\n", 1, "`X !=`"),
        ("computed name", "$(V) = ./x.sh\n", 1, "computed"),
        ("export alone", "export\n", 1, "`export`"),
        (
            "export a loader variable",
            "export LD_PRELOAD = ./x.so\n",
            1,
            "`LD_PRELOAD`",
        ),
        (
            "export a shell's startup file",
            "export BASH_ENV := ./x.sh\n",
            1,
            "`BASH_ENV`",
        ),
        ("PATH", "PATH := ./bin:$(PATH)\n", 1, "`PATH`"),
        ("export PATH later", "X = 1\nexport PATH\n", 2, "`PATH`"),
        (
            ".SECONDEXPANSION",
            ".SECONDEXPANSION:\n",
            1,
            "`.SECONDEXPANSION`",
        ),
        (
            ".EXPORT_ALL_VARIABLES",
            ".EXPORT_ALL_VARIABLES:\n",
            1,
            "`.EXPORT_ALL_VARIABLES`",
        ),
        (
            "target from a function",
            "$(patsubst %,%,test):\n\t./x.sh\n",
            1,
            "function",
        ),
        (
            "prerequisite expanding to an assignment",
            "V = SHELL=./x.sh\ntest: $(V)\n",
            2,
            "assignment",
        ),
        ("not make", "what is this\n", 1, "neither"),
        // make remakes its makefiles first, then reads the new text (issue 36).
        (
            "the makefile as a target",
            "test:\n\techo hi\nMakefile: FORCE\n\tcp evil.mk Makefile\nFORCE:\n",
            3,
            "could remake the makefile `Makefile`",
        ),
        ("./ spelling", "./Makefile: x\n", 1, "`Makefile`"),
        ("././ spelling", ".//./Makefile: x\n", 1, "`Makefile`"),
        (
            "double colon",
            "Makefile:: FORCE\n\ttrue\n",
            1,
            "could remake",
        ),
        ("grouped", "all Makefile &: x\n", 1, "could remake"),
        ("a directory", "sub/../Makefile: x\n", 1, "could remake"),
        (
            "another name make reads",
            "GNUmakefile: x\n",
            1,
            "`GNUmakefile`",
        ),
        ("lower case", "makefile: x\n", 1, "`makefile`"),
        (
            "named by a variable",
            "M = Makefile\n$(M): x\n",
            2,
            "could remake",
        ),
        ("match anything", "%: FORCE\n\ttrue\n", 1, "could remake"),
        ("a prefix pattern", "Make%: x\n", 1, "could remake"),
        ("a suffix pattern", "%file: x\n", 1, "could remake"),
        ("a wildcard", "Makefil?: x\n", 1, "could remake"),
        ("a star", "*file: x\n", 1, "could remake"),
        ("a set", "[M]akefile: x\n", 1, "could remake"),
        (
            ".DEFAULT",
            "test:\n\ttrue\n.DEFAULT:\n\tcp x $@\n",
            3,
            "`.DEFAULT`",
        ),
        (
            "a one-suffix rule once suffixes are given",
            ".SUFFIXES: .in\n.in:\n\tcp $< $@\n",
            2,
            "one-suffix rule `.in`",
        ),
        (
            "a one-suffix rule before the suffixes",
            ".sh:\n\tcp $< $@\n.SUFFIXES: .sh\n",
            1,
            "one-suffix rule `.sh`",
        ),
        (
            "vpath outside",
            "vpath %.sh /tmp/x\n",
            1,
            "outside the workspace",
        ),
        ("vpath climbing out", "vpath %.sh a/../..\n", 1, "leaves"),
        ("vpath home", "vpath % ~/bin\n", 1, "outside the workspace"),
        (
            "VPATH outside",
            "VPATH = src:/tmp\ntest:\n\ttrue\n",
            1,
            "`VPATH`",
        ),
        (
            "VPATH twice",
            "VPATH = a\nVPATH = b\n",
            1,
            "cannot work out",
        ),
        ("vpath unknown", "vpath %.sh $(DIR)\n", 1, "cannot work"),
        ("unended define", "define X\nabc\n", 1, "`endef`"),
    ];

    #[test]
    fn unreliable_constructs_are_refused_with_their_line() {
        for (name, text, line, word) in REFUSED {
            let error = Makefile::parse(text, "Makefile")
                .err()
                .unwrap_or_else(|| panic!("{name}: accepted"));
            assert_eq!(error.line, *line, "{name}: {error}");
            let message = error.to_string();
            assert!(message.contains(word), "{name}: {message}");
            assert!(
                message.starts_with(&format!("line {line}: ")),
                "{name}: {message}"
            );
        }
    }

    #[test]
    fn twice_recipes_are_refused_when_shown() {
        let makefile =
            Makefile::parse("test:\n\techo one\ntest:\n\techo two\n", "Makefile").unwrap();
        let error = makefile.show("test").unwrap_err();
        assert_eq!(error.line, 3);
        assert!(error.to_string().contains("line 1"), "{error}");
    }

    #[test]
    fn accepted_makefiles_show_the_rules_make_runs() {
        let text = "\
# a comment: SHELL = x
.PHONY: test lint
.ONESHELL:
CARGO ?= cargo
FLAGS := --all \\
  --quiet
OUT = out
SRC = $(OUT)/x
ifeq ($(CI),1)
FLAGS += --locked
endif
test: build $(OUT)
\t$(CARGO) test $(FLAGS)
\t@echo done \\
\t  twice

build:
\tcargo build
$(OUT): ; mkdir -p $@
%.o: %.c
\tcc -c $<
lint:
\techo lint   # SHELL = not a directive
typecheck: ; cargo check
";
        let makefile = Makefile::parse(text, "Makefile").unwrap();
        for goal in ["test", "build", "lint", "typecheck"] {
            assert!(makefile.defines(goal), "{goal}");
        }
        assert!(!makefile.defines("format"));
        assert!(!makefile.defines("%.o"));
        let shown = makefile.show("test").unwrap();
        assert!(shown.has_recipe);
        let text = &shown.text;
        let build = text.find("cargo build").unwrap();
        let mkdir = text.find("mkdir -p $@").unwrap();
        let test = text.find("$(CARGO) test $(FLAGS)").unwrap();
        assert!(build < mkdir && mkdir < test, "prerequisites first: {text}");
        assert!(text.contains("  12| test: (after build, out)"), "{text}");
        assert!(text.contains("      |     \t  twice"), "{text}");
        assert!(text.contains("cc -c $<"), "pattern rules are shown: {text}");
        assert!(text.contains("   4| CARGO ?= cargo"), "{text}");
        assert!(text.contains("FLAGS := --all \\\n  --quiet"), "{text}");
        assert!(text.contains("  10| FLAGS += --locked"), "{text}");
        assert!(
            !text.contains("SRC ="),
            "unused variables are left out: {text}"
        );
        assert!(text.contains("`.ONESHELL` (line 3)"), "{text}");
        assert!(!text.contains("runs make again"), "{text}");
        let recursive = Makefile::parse("test:\n\t$(MAKE) -C sub\n", "Makefile").unwrap();
        let shown = recursive.show("test").unwrap().text;
        assert!(shown.contains("runs make again (`$(MAKE)`)"), "{shown}");
        let literal = Makefile::parse("test:\n\tcd sub && make all\n", "Makefile").unwrap();
        let shown = literal.show("test").unwrap().text;
        assert!(shown.contains("runs make again (`make`)"), "{shown}");
        assert!(!runs_make("echo making; cmake .; makeinfo x"));
        let lint = makefile.show("lint").unwrap();
        assert!(lint.text.contains("echo lint   # SHELL = not a directive"));
    }

    #[test]
    fn only_the_makefile_read_and_the_names_make_looks_for_count_as_makefiles() {
        let text = "%.mk: FORCE\n\tcp x $@\ntest:\n\ttrue\nFORCE:\n";
        assert!(Makefile::parse(text, "Makefile").is_ok());
        let error = Makefile::parse(text, "sub/build.mk").unwrap_err();
        assert!(error.to_string().contains("`sub/build.mk`"), "{error}");
        let error = Makefile::parse("build.mk: x\n", "./sub/build.mk").unwrap_err();
        assert!(error.to_string().contains("could remake"), "{error}");
        // Rules that cannot name a makefile stay: suffix rules without suffixes, other
        // patterns, files beside it.
        for text in [
            ".c.o:\n\tcc -c $<\n",
            ".sh:\n\tcp $< $@\n",
            "%.o: %.c\n\tcc -c $<\n",
            "Makefile.inc: x\n",
            "docs/Makefile.md: x\n",
            ".PHONY: test\n",
        ] {
            assert!(Makefile::parse(text, "Makefile").is_ok(), "{text}");
        }
        assert!(glob_matches("M*e", "Makefile") && glob_matches("*", ""));
        assert!(!glob_matches("M?e", "Makefile") && !glob_matches("*.mk", "Makefile"));
    }

    #[test]
    fn vpath_is_shown_and_what_it_may_select_is_handed_back() {
        let text = "\
vpath %.sh scripts tools/
VPATH = src:lib
D = more
vpath %.txt $(D)
test: run.sh data.txt
\tsh $<
";
        let makefile = Makefile::parse(text, "Makefile").unwrap();
        let shown = makefile.show("test").unwrap();
        assert!(
            shown.text.contains("   1| vpath %.sh scripts tools/"),
            "{}",
            shown.text
        );
        assert!(
            shown.text.contains("   4| vpath %.txt $(D)"),
            "{}",
            shown.text
        );
        assert!(
            shown.text.contains("   2| VPATH = src:lib"),
            "{}",
            shown.text
        );
        assert_eq!(
            shown.prerequisites,
            [
                "run.sh",
                "scripts/run.sh",
                "tools/run.sh",
                "src/run.sh",
                "lib/run.sh",
                "data.txt",
                "more/data.txt",
                "src/data.txt",
                "lib/data.txt",
            ]
        );
        assert_eq!(
            makefile.search_path().as_deref(),
            Some("vpath %.sh scripts tools/; vpath %.txt $(D); VPATH src:lib")
        );
        assert_eq!(
            makefile.prerequisites(),
            makefile.show("test").unwrap().prerequisites,
            "one goal: the same files"
        );
        let plain = Makefile::parse("test: a.sh\n\tsh $<\n", "Makefile").unwrap();
        assert_eq!(plain.search_path(), None);
        assert_eq!(plain.prerequisites(), ["a.sh"]);
        let shown = plain.show("test").unwrap();
        assert_eq!(shown.prerequisites, ["a.sh"]);
        assert!(!shown.text.contains("vpath"), "{}", shown.text);
    }

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn make_reads_the_makefile_its_arguments_name_in_every_spelling() {
        let cases: &[(&[&str], &[&str])] = &[
            (&[], &["GNUmakefile", "makefile", "Makefile"]),
            (&["test"], &["GNUmakefile", "makefile", "Makefile"]),
            (&["-f", "x.mk"], &["x.mk"]),
            (&["-fx.mk"], &["x.mk"]),
            (&["-sfx.mk"], &["x.mk"]),
            (&["-kf", "x.mk", "test"], &["x.mk"]),
            (&["--file=x.mk"], &["x.mk"]),
            (&["--file", "x.mk"], &["x.mk"]),
            (&["--makefile=x.mk"], &["x.mk"]),
            (&["--makefile", "x.mk"], &["x.mk"]),
            (&["--fi=x.mk"], &["x.mk"]),
            (&["--mak", "x.mk"], &["x.mk"]),
            (&["-f", "a.mk", "-f", "b.mk"], &["a.mk", "b.mk"]),
            (
                &["-C", "sub"],
                &["sub/GNUmakefile", "sub/makefile", "sub/Makefile"],
            ),
            (&["-Csub", "-f", "x.mk"], &["sub/x.mk"]),
            (
                &["--directory=sub", "-C", "deeper", "-fx.mk"],
                &["sub/deeper/x.mk"],
            ),
            (&["-C", "/elsewhere", "-f", "x.mk"], &["/elsewhere/x.mk"]),
            (&["-j4", "-f", "x.mk"], &["x.mk"]),
            (&["-j", "-f", "x.mk"], &["x.mk"]),
            (
                &["--", "-f", "x.mk"],
                &["GNUmakefile", "makefile", "Makefile"],
            ),
        ];
        for (argv, makefiles) in cases {
            let command = make_command(&args(argv));
            assert_eq!(command.makefiles, *makefiles, "{argv:?}");
            assert_eq!(command.defaults, makefiles.len() == 3, "{argv:?}");
        }
        let with_rules = make_command(&args(&["test"]));
        assert!(with_rules.sources.contains(&"Makefile.sh".to_owned()));
        assert!(with_rules.sources.contains(&"RCS/Makefile,v".to_owned()));
        assert!(
            with_rules
                .notes
                .iter()
                .any(|n| n.contains("built-in rules are on"))
        );
        for off in [
            &["-r"][..],
            &["--no-builtin-rules"],
            &["--no-builtin-r"],
            &["-rk"],
        ] {
            let command = make_command(&args(off));
            assert!(command.sources.is_empty(), "{off:?}");
            assert!(command.notes.is_empty(), "{off:?}: {:?}", command.notes);
        }
        let sub = make_command(&args(&["-r", "-C", "sub", "-f", "x.mk"]));
        assert_eq!(sub.notes.len(), 1, "{:?}", sub.notes);
        assert!(sub.notes[0].starts_with("argv[2] \"-C\": make works in `sub`"));
        // What else the arguments change is said, argument by argument.
        for (argv, said) in [
            (
                &["-r", "--eval=test: ; ./x.sh"][..],
                "argv[2] \"--eval=test: ; ./x.sh\": make reads",
            ),
            (&["-r", "-E", "x"], "argv[2] \"-E\": make reads this text"),
            (&["-r", "SHELL=./x.sh"], "`SHELL` over what every makefile"),
            (&["-r", "-I", "inc"], "`include` finds makefiles in `inc`"),
            (&["-r", "-e"], "environment's variables override"),
            (&["-r", "-f", "-"], "from standard input"),
            (&["-r", "-X"], "`-X` is an option toolgate does not know"),
            (&["-r", "--m=x"], "does not know"),
        ] {
            let notes = make_command(&args(argv)).notes.join("\n");
            assert!(notes.contains(said), "{argv:?}: {notes}");
        }
        assert!(is_make(&["make"]) && is_make(&["/usr/bin/gmake"]) && is_make(&["x", "make"]));
        // A make that a wrapper or a shell's text starts.
        let wrapped = started_make(
            &["timeout", "/usr/bin/timeout"],
            &args(&["60", "make", "-fx.mk"]),
        )
        .unwrap();
        assert_eq!(wrapped.makefiles, ["x.mk"]);
        assert!(
            wrapped
                .notes
                .iter()
                .any(|n| n.starts_with("argv[2] \"make\": make's built-in"))
        );
        let env = started_make(&["env"], &args(&["-i", "make", "-r", "--eval=x"])).unwrap();
        assert!(
            env.notes
                .iter()
                .any(|n| n.starts_with("argv[4] \"--eval=x\"")),
            "{:?}",
            env.notes
        );
        let shell = started_make(
            &["sh"],
            &args(&["-c", "true && make -C 'sub' -fx.mk; make other"]),
        )
        .unwrap();
        assert_eq!(shell.makefiles, ["sub/x.mk"]);
        assert!(
            shell
                .notes
                .iter()
                .any(|n| n.starts_with("argv[2]'s make, word 1 \"-C\""))
        );
        let moved = started_make(&["bash"], &args(&["-c", "cd sub && make"])).unwrap();
        assert_eq!(moved.makefiles.len(), 3);
        assert!(moved.notes.iter().any(|n| n.contains("changes directory")));
        assert_eq!(
            started_make(&["git"], &args(&["commit", "-m", "make it pass"])),
            None
        );
        assert_eq!(started_make(&["sh"], &args(&["-c", "cmake ."])), None);
        assert_eq!(started_make(&["nice"], &args(&["cargo", "test"])), None);
        assert!(!is_make(&["cmake", "makeinfo"]));
    }

    #[test]
    fn references_are_found_in_every_spelling() {
        assert_eq!(
            references("$(A) ${B} $C $$D $(E:.c=.o) $(patsubst x,y,$(F)) $@"),
            ["A", "B", "C", "E", "patsubst", "F"]
        );
    }

    #[test]
    fn assignments_and_rules_are_told_apart() {
        let cases: &[(&str, Option<(&str, &str)>)] = &[
            ("A = b", Some(("A", "="))),
            ("A := b", Some(("A", ":="))),
            ("A ::= b", Some(("A", "::="))),
            ("A :::= b", Some(("A", ":::="))),
            ("A ?= b", Some(("A", "?="))),
            ("A += b", Some(("A", "+="))),
            ("A != b", Some(("A", "!="))),
            ("A = b:c", Some(("A", "="))),
            ("a: b", None),
            ("a: b=c", None),
            ("a:: b", None),
            ("$(X:a=b): c", None),
            ("a; b=c", None),
        ];
        for (text, expected) in cases {
            let got = split_assignment(text).map(|(n, op, _)| (n, op));
            assert_eq!(got, *expected, "{text}");
        }
    }
}
