//! The documentation, checked against what it describes: every relative link and anchor in
//! README.md, ARCHITECTURE.md and docs/*.md leads somewhere, every `toolgate` command the
//! pages show is one the binary has, and every configuration key they show is one the binary
//! accepts. What counts as real comes from the files and the binary, never from a list kept
//! by hand beside the pages.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;

use support::clients::root;
use support::home;

/// The pages a newcomer reads: the README, the architecture and everything under docs/.
fn pages() -> Vec<PathBuf> {
    let root = root();
    let mut pages = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    assert!(docs.len() > 5, "docs/ holds the reference pages");
    pages.extend(docs);
    pages
}

fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// A fenced block: its language and its lines, without the fence's indentation.
struct Block {
    lang: String,
    text: String,
}

/// A page taken apart the way a reader of its source sees it.
struct Page {
    /// The text outside fenced blocks, with every code span blanked out, so that a link
    /// written inside code is not taken for one.
    prose: String,
    code_spans: Vec<String>,
    blocks: Vec<Block>,
    headings: Vec<String>,
}

fn parse(text: &str) -> Page {
    let mut outside = String::new();
    let mut blocks = Vec::new();
    let mut headings = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(fence) = trimmed.strip_prefix("```") {
            match open.take() {
                Some((_, lang, text)) => blocks.push(Block { lang, text }),
                None => open = Some((indent, fence.trim().to_owned(), String::new())),
            }
            outside.push('\n');
            continue;
        }
        if let Some((fence_indent, _, text)) = &mut open {
            let cut = line
                .char_indices()
                .take_while(|(i, c)| *i < *fence_indent && *c == ' ')
                .count();
            text.push_str(&line[cut..]);
            text.push('\n');
            outside.push('\n');
            continue;
        }
        if indent == 0 && line.starts_with('#') {
            let hashes = line.chars().take_while(|c| *c == '#').count();
            if hashes <= 6 && line[hashes..].starts_with(' ') {
                headings.push(line[hashes..].trim().to_owned());
            }
        }
        outside.push_str(line);
        outside.push('\n');
    }
    assert!(open.is_none(), "a fenced block is never closed");
    let (prose, code_spans) = split_code_spans(&outside);
    Page {
        prose,
        code_spans,
        blocks,
        headings,
    }
}

/// Code spans as CommonMark reads them: a run of backticks up to the next run of the same
/// length, across line breaks within a paragraph.
fn split_code_spans(text: &str) -> (String, Vec<String>) {
    let chars: Vec<char> = text.chars().collect();
    let mut prose = String::new();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            prose.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let other = chars[j..].iter().take_while(|c| **c == '`').count();
                if other == run {
                    close = Some(j);
                    break;
                }
                j += other;
            } else if chars[j] == '\n' && chars.get(j + 1) == Some(&'\n') {
                break;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                let span: String = chars[i + run..end].iter().collect();
                spans.push(span.replace('\n', " "));
                prose.push(' ');
                i = end + run;
            }
            None => {
                prose.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    (prose, spans)
}

/// GitHub's anchor for a heading: lowercase, punctuation dropped but for `-` and `_`,
/// spaces turned into `-`; a repeated heading gets `-1`, `-2`, ….
fn anchors(headings: &[String]) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    for heading in headings {
        let mut slug = String::new();
        for c in heading.to_lowercase().chars() {
            if c.is_alphanumeric() || c == '-' || c == '_' {
                slug.push(c);
            } else if c == ' ' {
                slug.push('-');
            }
        }
        let n = seen.entry(slug.clone()).or_insert(0);
        out.insert(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// The targets of inline links, `[text](target)` and `![alt](target)`.
fn link_targets(prose: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = prose;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        match after.find(')') {
            Some(end) => {
                let target = after[..end].trim();
                let target = target.split_whitespace().next().unwrap_or("");
                out.push(target.trim_matches(['<', '>']).to_owned());
                rest = &after[end..];
            }
            None => break,
        }
    }
    out
}

#[test]
fn every_relative_link_and_anchor_leads_somewhere() {
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in pages() {
        let parsed = parse(&fs::read_to_string(&page).unwrap());
        for target in link_targets(&parsed.prose) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !dest.exists() {
                broken.push(format!(
                    "{}: `{target}`: no file {}",
                    shown(&page),
                    dest.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if dest.extension().is_none_or(|e| e != "md") {
                broken.push(format!(
                    "{}: `{target}`: an anchor into a file that is not Markdown",
                    shown(&page)
                ));
                continue;
            }
            let headings = parse(&fs::read_to_string(&dest).unwrap()).headings;
            if !anchors(&headings).contains(anchor) {
                broken.push(format!(
                    "{}: `{target}`: {} has no heading with the anchor `#{anchor}`",
                    shown(&page),
                    shown(&dest)
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(
        checked > 40,
        "only {checked} links found: is the parser blind?"
    );
}

#[test]
fn the_anchor_rules_are_githubs() {
    let headings = [
        "`toolgate serve`",
        "Approving in the MCP client (elicitation)",
        "What a person sees is what is there",
        "A call's own notifications",
        "Cost",
        "Cost",
    ]
    .map(String::from);
    let got = anchors(&headings);
    for want in [
        "toolgate-serve",
        "approving-in-the-mcp-client-elicitation",
        "what-a-person-sees-is-what-is-there",
        "a-calls-own-notifications",
        "cost",
        "cost-1",
    ] {
        assert!(got.contains(want), "{want} not in {got:?}");
    }
}

/// `toolgate` and the words after it that look like subcommands, from one piece of code.
fn commands_in(code: &str, out: &mut BTreeSet<Vec<String>>) {
    let word = |w: &str| {
        w.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    let tokens: Vec<&str> = code.split_whitespace().collect();
    for (i, token) in tokens.iter().enumerate() {
        let bare = token.trim_start_matches(['"', '\'', '(']);
        if bare != "toolgate" && !bare.ends_with("/toolgate") {
            continue;
        }
        // `cargo run -p toolgate -- call`, `inspector --cli toolgate -- serve`; but in
        // `claude mcp add toolgate -- toolgate serve` the second `toolgate` speaks for itself.
        let mut after = &tokens[i + 1..];
        if after.first() == Some(&"--") {
            after = &after[1..];
            if after.first() == Some(&"toolgate") {
                continue;
            }
        }
        let words: Vec<String> = after
            .iter()
            .take(2)
            .take_while(|w| word(w))
            .map(|w| (*w).to_owned())
            .collect();
        if !words.is_empty() {
            out.insert(words);
        }
    }
}

#[test]
fn the_command_scan_reads_commands_as_a_reader_does() {
    let mut found = BTreeSet::new();
    for code in [
        "cargo run -q -p toolgate -- call --workspace .",
        "claude mcp add toolgate -- toolgate serve --workspace \"$PWD\"",
        "script -qec \"toolgate sandbox check --json\"",
        "toolgate: rejected at validate",
        "cargo install --path crates/toolgate",
        "mcp__toolgate__read_file",
        without_comment("toolgate tools list   # what a model sees"),
    ] {
        commands_in(code, &mut found);
    }
    let found: Vec<String> = found.into_iter().map(|w| w.join(" ")).collect();
    assert_eq!(found, ["call", "sandbox check", "serve", "tools list"]);
}

/// A shell line without its comment.
fn without_comment(line: &str) -> &str {
    if line.trim_start().starts_with('#') {
        return "";
    }
    line.split(" # ").next().unwrap_or(line)
}

fn toolgate() -> Command {
    let mut cmd = Command::from_std(home::toolgate());
    cmd.timeout(Duration::from_secs(60));
    cmd
}

fn help(words: &[&str]) -> Option<String> {
    let out = toolgate().args(words).arg("--help").output().unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn every_documented_command_is_a_real_subcommand() {
    let mut commands = BTreeSet::new();
    for page in pages() {
        let parsed = parse(&fs::read_to_string(&page).unwrap());
        for span in &parsed.code_spans {
            commands_in(span, &mut commands);
        }
        for block in &parsed.blocks {
            if ["sh", "console", ""].contains(&block.lang.as_str()) {
                for line in block.text.lines() {
                    commands_in(without_comment(line), &mut commands);
                }
            }
        }
    }
    assert!(
        commands.len() > 8,
        "only {commands:?} found: is the scan blind?"
    );
    let mut wrong = Vec::new();
    for words in &commands {
        let first = words[0].as_str();
        let Some(text) = help(&[first]) else {
            wrong.push(format!("`toolgate {first}` is not a subcommand"));
            continue;
        };
        // A second word is a subcommand only where the first has some; elsewhere it is an
        // argument (`toolgate tools admit fs …` against `toolgate serve --workspace`).
        let nested = text.lines().any(|l| l.trim() == "Commands:");
        if let (true, Some(second)) = (nested, words.get(1))
            && help(&[first, second]).is_none()
        {
            wrong.push(format!("`toolgate {first} {second}` is not a subcommand"));
        }
    }
    assert!(
        wrong.is_empty(),
        "commands the pages show that toolgate does not have:\n{}",
        wrong.join("\n")
    );
}

/// TOML blocks in the pages that are not toolgate's configuration, each with why.
const NOT_TOOLGATE_CONFIG: &[(&str, &str, &str)] = &[(
    "docs/clients.md",
    "[mcp_servers.",
    "Codex CLI's own config.toml, which starts toolgate",
)];

/// One TOML example: the page it is on and its text.
fn config_examples() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for page in pages() {
        let name = shown(&page);
        for block in parse(&fs::read_to_string(&page).unwrap()).blocks {
            if block.lang != "toml" {
                continue;
            }
            let first = block
                .text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .unwrap_or("");
            let excluded = NOT_TOOLGATE_CONFIG
                .iter()
                .any(|(p, start, _)| *p == name && first.starts_with(start));
            if !excluded {
                out.push((name.clone(), block.text));
            }
        }
    }
    out
}

/// Keys by section (`""` for the top level, `upstream.tool` for `[[upstream.tool]]`), and
/// which sections are arrays of tables.
#[derive(Default)]
struct Keys {
    by_section: BTreeMap<String, BTreeSet<(String, String)>>,
    arrays: BTreeSet<String>,
}

impl Keys {
    fn add(&mut self, section: &str, key: &str, origin: &str) {
        self.by_section
            .entry(section.to_owned())
            .or_default()
            .insert((key.to_owned(), origin.to_owned()));
    }

    fn walk(&mut self, table: &toml_edit::Table, section: &str, origin: &str) {
        self.by_section.entry(section.to_owned()).or_default();
        for (key, item) in table.iter() {
            let inner = if section.is_empty() {
                key.to_owned()
            } else {
                format!("{section}.{key}")
            };
            match item {
                toml_edit::Item::Table(t) => {
                    self.add(section, key, origin);
                    self.walk(t, &inner, origin);
                }
                toml_edit::Item::ArrayOfTables(a) => {
                    self.add(section, key, origin);
                    self.arrays.insert(inner.clone());
                    for t in a.iter() {
                        self.walk(t, &inner, origin);
                    }
                }
                _ => self.add(section, key, origin),
            }
        }
    }
}

/// The key tables of docs/configuration.md: a `section` column (`top level`, `[sandbox]`,
/// `[[upstream]]`, `[profiles.NAME]`) and a `keys` column of code spans.
fn configuration_tables(keys: &mut Keys) -> BTreeMap<String, BTreeSet<String>> {
    let page = root().join("docs/configuration.md");
    let text = fs::read_to_string(&page).unwrap();
    let mut listed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut in_table = false;
    for line in text.lines() {
        let cells: Vec<&str> = line
            .trim()
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect();
        if !line.trim_start().starts_with('|') {
            in_table = false;
            continue;
        }
        if cells.first() == Some(&"section") && cells.get(1) == Some(&"keys") {
            in_table = true;
            continue;
        }
        if !in_table || cells[0].starts_with("---") {
            continue;
        }
        let section = if cells[0] == "top level" {
            String::new()
        } else {
            let name = cells[0].trim_matches('`');
            let inner = name.trim_start_matches('[').trim_end_matches(']');
            if name.starts_with("[[") {
                keys.arrays.insert(inner.to_owned());
            }
            inner.to_owned()
        };
        let (_, spans) = split_code_spans(cells[1]);
        for key in &spans {
            keys.add(&section, key, "docs/configuration.md's key table");
        }
        listed.entry(section).or_default().extend(spans);
    }
    assert!(listed.len() > 8, "docs/configuration.md has its key tables");
    listed
}

/// A name no section takes, so that toolgate's refusal names the ones it does take.
const PROBE: &str = "toolgate_docs_probe";

/// The keys toolgate accepts in a section, from its own refusal of an unknown one (the
/// configuration is parsed with unknown fields denied); `None` where the section is a map
/// whose keys are names of the user's choosing (`[profiles]`).
fn accepted(section: &str, arrays: &BTreeSet<String>, dir: &Path) -> Option<BTreeSet<String>> {
    let mut config = String::new();
    let parts: Vec<&str> = if section.is_empty() {
        Vec::new()
    } else {
        section.split('.').collect()
    };
    for n in 1..=parts.len() {
        let prefix = parts[..n].join(".");
        if arrays.contains(&prefix) {
            config.push_str(&format!("[[{prefix}]]\n"));
        } else if n == parts.len() {
            config.push_str(&format!("[{prefix}]\n"));
        }
    }
    config.push_str(&format!("{PROBE} = 1\n"));
    let file = dir.join("probe.toml");
    fs::write(&file, &config).unwrap();
    let out = toolgate()
        .arg("check")
        .arg("--config")
        .arg(&file)
        .env("XDG_STATE_HOME", dir.join("state"))
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .current_dir(dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{config}\n{stderr}");
    let refusal = stderr.split_once(&format!("unknown field `{PROBE}`"))?.1;
    let expected = refusal.lines().next().unwrap_or("");
    let (_, names) = split_code_spans(expected);
    Some(names.into_iter().collect())
}

#[test]
fn every_documented_configuration_key_is_one_toolgate_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let mut keys = Keys::default();
    let examples = config_examples();
    assert!(examples.len() > 4, "only {} TOML examples", examples.len());
    for (page, text) in &examples {
        let doc: toml_edit::DocumentMut = text
            .parse()
            .unwrap_or_else(|e| panic!("{page}: a TOML example does not parse: {e}\n{text}"));
        keys.walk(doc.as_table(), "", page);
    }
    let listed = configuration_tables(&mut keys);

    let top = accepted("", &keys.arrays, dir.path()).unwrap();
    assert!(
        top.contains("sandbox") && top.contains("upstream"),
        "the probe reads toolgate's refusal: {top:?}"
    );
    let mut wrong = Vec::new();
    let mut known: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
    for (section, documented) in &keys.by_section {
        let accepted = accepted(section, &keys.arrays, dir.path());
        if let Some(accepted) = &accepted {
            for (key, origin) in documented {
                if !accepted.contains(key) {
                    wrong.push(format!(
                        "{origin}: `{key}` in [{section}]: toolgate accepts only {accepted:?}"
                    ));
                }
            }
        }
        known.insert(section.clone(), accepted);
    }
    // The other way round: the key tables name every key toolgate takes, so that
    // docs/configuration.md can say it lists every key.
    for (section, names) in &listed {
        let Some(Some(accepted)) = known.get(section) else {
            continue;
        };
        for key in accepted {
            let inner = if section.is_empty() {
                key.clone()
            } else {
                format!("{section}.{key}")
            };
            let is_section = listed
                .keys()
                .any(|s| s == &inner || s.starts_with(&format!("{inner}.")));
            if !names.contains(key) && !is_section {
                wrong.push(format!(
                    "docs/configuration.md: toolgate accepts `{key}` in [{section}], and the key tables do not list it"
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "configuration keys:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_configuration_example_is_read_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut main_seen = false;
    for (n, (page, text)) in config_examples().iter().enumerate() {
        let file = dir.path().join(format!("example-{n}.toml"));
        fs::write(&file, text).unwrap();
        // The main example names its policy file; an empty one is a valid Cedar file.
        fs::write(dir.path().join("toolgate.cedar"), "").unwrap();
        let out = toolgate()
            .arg("check")
            .arg("--config")
            .arg(&file)
            .env("XDG_STATE_HOME", dir.path().join("state"))
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .current_dir(dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        // A fragment (an `[upstream.sandbox]` without its `[[upstream]]`) or a placeholder
        // (`sha256:…`) may be refused for what it leaves out, but never for a key.
        assert!(
            !stderr.contains("unknown field"),
            "{page}: toolgate refuses a key of this example:\n{text}\n{stderr}"
        );
        if page == "docs/configuration.md" && !main_seen {
            main_seen = true;
            assert!(
                out.status.success(),
                "{page}: the main example is a working configuration:\n{stderr}"
            );
        }
    }
    assert!(main_seen, "docs/configuration.md shows a TOML example");
}
