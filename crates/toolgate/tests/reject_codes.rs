//! Rejection codes and stages against a table written from the documentation
//! (tests/corpus/reject_codes.jsonl): the variants the enums declare in their source text, the
//! names and stages they carry on the wire, and every rejected row of the other corpus files.
//! Stages, effect classes and surfaces likewise against the lists README.md and
//! docs/configuration.md give. Variants are read from the source text, not from the library's
//! own lists, so a variant added without its documentation fails here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Value, json};
use toolgate_core::{RejectCode, Rejection, Stage};

use support::clients::root;

/// The rows of a JSONL file, its `//` comment lines and blank lines skipped.
fn rows(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty() && !line.trim_start().starts_with("//"))
        .map(|(n, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1))
        })
        .collect()
}

/// The table: each code's wire name and its stage.
fn table() -> BTreeMap<String, String> {
    let path = root().join("tests/corpus/reject_codes.jsonl");
    let mut table = BTreeMap::new();
    for row in rows(&path) {
        let code = row["code"].as_str().unwrap().to_owned();
        let stage = row["stage"].as_str().unwrap().to_owned();
        assert!(
            row["doc"].as_str().is_some_and(|d| !d.is_empty()),
            "{code}: the table says where the docs give its stage"
        );
        assert!(
            table.insert(code.clone(), stage).is_none(),
            "{code} is in the table twice"
        );
    }
    table
}

/// The variants of `pub enum NAME` as its source text declares them, in serde's `snake_case`.
fn declared_variants(source: &str, name: &str) -> Vec<String> {
    let start = source
        .find(&format!("pub enum {name} {{"))
        .unwrap_or_else(|| panic!("no `pub enum {name}` in the source"));
    let body = &source[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    let mut variants = Vec::new();
    for line in body.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with("//") || line.starts_with("#[") {
            continue;
        }
        for item in line.split(',') {
            let ident: String = item
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                item.trim().is_empty() || ident == item.trim(),
                "{name}: a variant this test cannot read: {line}"
            );
            if !ident.is_empty() {
                variants.push(snake_case(&ident));
            }
        }
    }
    variants
}

fn snake_case(ident: &str) -> String {
    let mut out = String::new();
    for (i, c) in ident.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn rejection_source() -> String {
    std::fs::read_to_string(root().join("crates/toolgate-core/src/rejection.rs")).unwrap()
}

#[test]
fn the_table_lists_every_declared_code_and_no_other() {
    let declared: BTreeSet<String> = declared_variants(&rejection_source(), "RejectCode")
        .into_iter()
        .collect();
    let table: BTreeSet<String> = table().into_keys().collect();
    let missing: Vec<&String> = declared.difference(&table).collect();
    let extra: Vec<&String> = table.difference(&declared).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "declared but not in tests/corpus/reject_codes.jsonl: {missing:?}; in the table but not declared: {extra:?}"
    );
}

/// The reference page's table and the test table say the same: every code, at the same stage.
#[test]
fn the_reference_page_lists_the_table() {
    let page = std::fs::read_to_string(root().join("docs/rejections.md")).unwrap();
    let documented: BTreeMap<String, String> = page
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let code = cells.get(1)?.strip_prefix('`')?.strip_suffix('`')?;
            Some((code.to_owned(), (*cells.get(2)?).to_owned()))
        })
        .collect();
    assert_eq!(documented, table());
}

#[test]
fn the_stages_are_the_ones_the_readme_names_in_order() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let start = flat
        .find("normalize →")
        .expect("the README names the stages");
    let named: Vec<String> = flat[start..]
        .split(" → ")
        .take(Stage::ALL.len())
        .map(|s| s.split_whitespace().next().unwrap().to_owned())
        .collect();
    assert_eq!(
        named,
        declared_variants(&rejection_source(), "Stage"),
        "the README's stages and the declared ones, in order"
    );
    let table_stages: BTreeSet<String> = table().into_values().collect();
    for stage in &table_stages {
        assert!(
            named.contains(stage),
            "the table names an unknown stage {stage}"
        );
    }
    // The wire spelling and the order a rejection's stage compares by.
    let wire: Vec<Stage> = named
        .iter()
        .map(|s| serde_json::from_value(json!(s)).unwrap())
        .collect();
    assert!(wire.windows(2).all(|w| w[0] < w[1]), "{wire:?}");
    for (stage, name) in wire.iter().zip(&named) {
        assert_eq!(stage.as_str(), name);
    }
}

#[test]
fn each_code_goes_out_under_its_name_at_the_tables_stage() {
    for (code, stage) in table() {
        let parsed: RejectCode = serde_json::from_value(json!(code))
            .unwrap_or_else(|e| panic!("{code} is not a code on the wire: {e}"));
        assert_eq!(parsed.as_str(), code);
        assert_eq!(parsed.to_string(), code);
        let wire = serde_json::to_value(Rejection::new(parsed, "m")).unwrap();
        assert_eq!(
            (wire["stage"].as_str(), wire["code"].as_str()),
            (Some(stage.as_str()), Some(code.as_str())),
            "{code}"
        );
    }
}

/// The corpus files whose rows expect a rejection name its stage and code; each pair must be
/// the table's, so a row cannot expect a code at a stage the documentation does not give it.
#[test]
fn every_rejected_corpus_row_agrees_with_the_table() {
    let table = table();
    let dir = root().join("tests/corpus");
    let mut checked = 0;
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") || path.ends_with("reject_codes.jsonl") {
            continue;
        }
        for row in rows(&path) {
            let (Some(stage), Some(code)) = (row["stage"].as_str(), row["code"].as_str()) else {
                continue;
            };
            checked += 1;
            let file = path.file_name().unwrap().to_string_lossy();
            match table.get(code) {
                Some(expected) if expected == stage => {}
                Some(expected) => problems.push(format!(
                    "{file}: {}: {code} at {stage}, the table says {expected}",
                    row["name"]
                )),
                None => problems.push(format!(
                    "{file}: {}: {code} is not in the table",
                    row["name"]
                )),
            }
        }
    }
    assert!(checked > 20, "only {checked} rejected rows found");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Codes no corpus row expects, each with the test that provokes it instead: a setting the
/// corpus fixtures cannot make (an upstream that changed, a grant revoked mid-call).
const PROVOKED_OUTSIDE_THE_CORPUS: [(&str, &str); 5] = [
    (
        "ambiguous_version",
        "crates/toolgate-core/tests/rejections.rs",
    ),
    ("stale_descriptor", "crates/toolgate/tests/upstream.rs"),
    ("unavailable", "crates/toolgate-mcp/tests/session.rs"),
    ("sandbox_unavailable", "crates/toolgate/tests/sandbox.rs"),
    (
        "approval_invalid",
        "crates/toolgate-core/tests/rejections.rs",
    ),
];

/// Every code in the table is expected by some corpus row (which the corpus tests provoke
/// through the binary and the library), or is provoked by a named test, which must still name
/// it; so a code added to the table without a test that provokes it fails here.
#[test]
fn every_code_in_the_table_is_provoked_somewhere() {
    let table = table();
    let mut expected = BTreeSet::new();
    for entry in std::fs::read_dir(root().join("tests/corpus")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "jsonl") || path.ends_with("reject_codes.jsonl") {
            continue;
        }
        for row in rows(&path) {
            if let (Some(_), Some(code)) = (row["stage"].as_str(), row["code"].as_str()) {
                expected.insert(code.to_owned());
            }
        }
    }
    let mut problems = Vec::new();
    for (code, file) in PROVOKED_OUTSIDE_THE_CORPUS {
        if !table.contains_key(code) {
            problems.push(format!("{code} is listed here but not in the table"));
        }
        if expected.contains(code) {
            problems.push(format!("{code} has a corpus row now: take it off the list"));
        }
        let text = std::fs::read_to_string(root().join(file)).unwrap();
        let variant: String = code
            .split('_')
            .map(|w| {
                let mut w = w.to_owned();
                w[..1].make_ascii_uppercase();
                w
            })
            .collect();
        if !text.contains(&format!("\"{code}\""))
            && !text.contains(&format!("RejectCode::{variant}"))
        {
            problems.push(format!("{file} no longer names {code}"));
        }
    }
    let outside: BTreeSet<&str> = PROVOKED_OUTSIDE_THE_CORPUS
        .iter()
        .map(|(c, _)| *c)
        .collect();
    for code in table.keys() {
        if !expected.contains(code) && !outside.contains(code.as_str()) {
            problems.push(format!("no test provokes {code}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The words in backquotes of a page's text (line breaks read as spaces) from `start` up to
/// `end`.
fn quoted_after(page: &str, start: &str, end: &str) -> Vec<String> {
    let text = std::fs::read_to_string(root().join(page)).unwrap();
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat
        .find(start)
        .unwrap_or_else(|| panic!("{page} has {start:?}"));
    flat[at..]
        .split(end)
        .next()
        .unwrap()
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The effect classes the README lists, in its order from least to most consequential, against
/// the declared variants and their spellings in configuration and on the wire.
#[test]
fn the_effect_classes_are_the_ones_the_readme_lists() {
    let listed = quoted_after("README.md", "**Effect classes**", " — ");
    assert_eq!(
        listed,
        ["read_only", "local_write", "network", "irreversible"],
        "the README's list as this test reads it"
    );
    let source =
        std::fs::read_to_string(root().join("crates/toolgate-core/src/registry.rs")).unwrap();
    assert_eq!(declared_variants(&source, "EffectClass"), listed);
    let classes: Vec<toolgate_core::EffectClass> = listed
        .iter()
        .map(|name| {
            let parsed: toolgate_core::EffectClass = name.parse().unwrap();
            assert_eq!(parsed.as_str(), name);
            assert_eq!(serde_json::to_value(parsed).unwrap(), json!(name));
            parsed
        })
        .collect();
    assert!(classes.windows(2).all(|w| w[0] < w[1]), "{classes:?}");
}

/// The surfaces docs/configuration.md names, against the declared variants and their wire
/// spelling.
#[test]
fn the_surfaces_are_the_ones_the_configuration_page_names() {
    let named = quoted_after(
        "docs/configuration.md",
        "**Surfaces** say where a call comes from:",
        "Each entry",
    );
    assert_eq!(
        named,
        ["chat", "cli", "console"],
        "the page as this test reads it"
    );
    let source =
        std::fs::read_to_string(root().join("crates/toolgate-core/src/invocation.rs")).unwrap();
    assert_eq!(declared_variants(&source, "Surface"), named);
    for name in &named {
        let surface: toolgate_core::Surface = serde_json::from_value(json!(name)).unwrap();
        assert_eq!(surface.as_str(), name);
    }
}

/// The lists the library keeps by hand for its own tables hold what the documentation names,
/// each once.
#[test]
fn the_librarys_lists_hold_what_the_documentation_names() {
    let codes: Vec<&str> = RejectCode::ALL.iter().map(|c| c.as_str()).collect();
    let unique: BTreeSet<&str> = codes.iter().copied().collect();
    assert_eq!(
        unique.len(),
        codes.len(),
        "RejectCode::ALL repeats: {codes:?}"
    );
    let table: BTreeSet<String> = table().into_keys().collect();
    assert_eq!(
        unique,
        table.iter().map(String::as_str).collect(),
        "RejectCode::ALL against tests/corpus/reject_codes.jsonl"
    );
    let stages: Vec<&str> = Stage::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(stages, declared_variants(&rejection_source(), "Stage"));
    let surfaces: Vec<&str> = toolgate_core::Surface::ALL
        .iter()
        .map(|s| s.as_str())
        .collect();
    assert_eq!(surfaces, ["chat", "cli", "console"]);
}
