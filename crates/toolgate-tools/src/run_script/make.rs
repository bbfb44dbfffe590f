//! A Makefile's targets named like a script, run by make with the file named, its built-in
//! rules off and its options from the environment removed.

use crate::makefile::Makefile;

use super::SCRIPTS;
use super::project::{Found, Parsed, Source, words_of};

/// Environment variables make would take options or makefiles from.
pub(super) const MAKE_ENV: [&str; 5] = [
    "MAKEFLAGS",
    "MAKEFILES",
    "MAKELEVEL",
    "MFLAGS",
    "GNUMAKEFLAGS",
];

/// Targets of a Makefile named like a script, with the rules make runs for them.
pub(super) fn makefile(source: &Source) -> Parsed {
    let file = source.file;
    let makefile = match Makefile::parse(source.text, file) {
        Ok(makefile) => makefile,
        Err(unreliable) => return Parsed::Blocked(format!("`{file}` {unreliable}")),
    };
    let mut found = Vec::new();
    for script in SCRIPTS {
        if !makefile.defines(script) {
            continue;
        }
        let shown = match makefile.show(script) {
            Ok(shown) => shown,
            Err(unreliable) => return Parsed::Blocked(format!("`{file}` {unreliable}")),
        };
        let mut definition = Found::new(
            script,
            &["make", "--no-builtin-rules", "-f", file, script],
            format!(
                "{file} target `{script}`; make runs each recipe line below with `/bin/sh -c` \
                 (the Makefile sets no `SHELL`), prerequisites first:"
            ),
        );
        if let Some(step) = definition.steps.first_mut() {
            step.unset = MAKE_ENV.to_vec();
            step.about = "  make, with the file named and its built-in rules off:".to_owned();
        }
        definition.shown = format!(
            "\nthe rules make runs, as {file} writes them:{}",
            shown.text
        );
        for recipe in &shown.recipes {
            // make's own prefixes, `@` (silent), `-` (ignore errors), `+` (always run).
            words_of(
                recipe.trim_start_matches(['@', '-', '+', ' ', '\t']),
                &mut definition.named,
            );
        }
        // What `$<` and `$^` name: each prerequisite, wherever `vpath` may find it.
        for prerequisite in shown.prerequisites {
            if !definition.named.contains(&prerequisite) {
                definition.named.push(prerequisite);
            }
        }
        if !shown.has_recipe {
            definition
                .shown
                .push_str("\n(no recipe line at all: make only checks the prerequisites)");
        }
        definition.shown.push_str(
            "\nthe programs those lines start read their own files and configuration, which \
             are not bound",
        );
        found.push(definition);
    }
    Parsed::Found(found)
}
