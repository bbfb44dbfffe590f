//! Rules of the codebase that a test can check.

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

use support::clients::root;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn ci_runs_the_test_command_the_readme_gives() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let ci = fs::read_to_string(root().join(".ci/run")).unwrap();
    let command = "scripts/test";
    assert!(readme.contains(command), "README must show `{command}`");
    assert!(
        ci.lines().any(|l| l.trim() == command),
        ".ci/run must run `{command}`"
    );
}

#[test]
fn every_source_file_opens_with_a_module_doc_and_has_no_grab_bag_name() {
    let mut files = Vec::new();
    rust_files(&root().join("crates"), &mut files);
    assert!(files.len() > 10);
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            !["utils.rs", "helpers.rs", "manager.rs", "misc.rs"].contains(&name.as_str()),
            "{}: say what it is instead",
            file.display()
        );
        if file.components().any(|c| c.as_os_str() == "src") {
            let text = fs::read_to_string(&file).unwrap();
            assert!(
                text.starts_with("//!"),
                "{} must open with a `//!` doc",
                file.display()
            );
        }
    }
}

/// The one crate allowed unsafe code: the confinement of a child between fork and exec.
const UNSAFE_CRATE: &str = "toolgate-sandbox";

#[test]
fn unsafe_is_forbidden_workspace_wide() {
    let manifest = fs::read_to_string(root().join("Cargo.toml")).unwrap();
    assert!(manifest.contains("unsafe_code = \"forbid\""));
    let workspace_lints = manifest
        .split_once("[workspace.lints.clippy]")
        .unwrap()
        .1
        .split("\n\n")
        .next()
        .unwrap()
        .trim()
        .to_owned();
    for krate in fs::read_dir(root().join("crates")).unwrap() {
        let krate = krate.unwrap().path();
        let name = krate.file_name().unwrap().to_string_lossy().to_string();
        let manifest = fs::read_to_string(krate.join("Cargo.toml")).unwrap();
        if name == UNSAFE_CRATE {
            // Denied rather than forbidden, so that each block can carry its own `#[expect]`;
            // every other lint is the workspace's.
            assert!(manifest.contains("unsafe_code = \"deny\""), "{name}");
            assert!(
                manifest.contains(&workspace_lints),
                "{name} keeps the clippy lints"
            );
            continue;
        }
        assert!(
            manifest.contains("[lints]\nworkspace = true"),
            "{name}: every crate but {UNSAFE_CRATE} uses the workspace lints"
        );
    }
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut files = Vec::new();
    rust_files(&root().join("crates").join(UNSAFE_CRATE), &mut files);
    for file in files {
        let text = fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.contains("unsafe {") {
                let before = &lines[i.saturating_sub(8)..i];
                assert!(
                    before.iter().any(|l| l.contains("// SAFETY:")),
                    "{}:{}: an unsafe block without a `// SAFETY:` note",
                    file.display(),
                    i + 1
                );
            }
        }
    }
}

/// Places where toolgate-core's sources use I/O, each with why: (file under
/// crates/toolgate-core/src, what it uses, the top-level module it is confined to, reason).
const CORE_IO_EXCEPTIONS: &[(&str, &str, &str, &str)] = &[];

/// The lines of a top-level module: from its `mod NAME {` to the first `}` that closes at
/// the start of a line, as rustfmt writes it.
fn module_lines(text: &str, module: &str) -> Option<std::ops::RangeInclusive<usize>> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with(&format!("{module} {{")))?;
    let end = lines[start..].iter().position(|l| *l == "}")? + start;
    Some(start + 1..=end + 1)
}

/// What toolgate-core may not use: it does no I/O of its own (ARCHITECTURE.md: tools,
/// approvals and time enter through its traits).
const CORE_FORBIDDEN: &[&str] = &["std::fs", "std::net", "std::process", "tokio"];

/// The forbidden paths one source text uses, outside comments: written out
/// (`std::fs::read`), or named in a group (`use std::{fs, io}`).
fn io_uses(text: &str) -> Vec<(usize, &'static str)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for forbidden in CORE_FORBIDDEN {
            let hit = code.match_indices(forbidden).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                let after = code[at + forbidden.len()..].chars().next();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if hit {
                found.push((n + 1, *forbidden));
            }
        }
    }
    // Groups may span lines: read them from the whole text.
    let mut rest = text;
    let mut offset = 0;
    while let Some(at) = rest.find("std::{") {
        let start = at + "std::{".len();
        let group = &rest[start..];
        let end = group.find('}').unwrap_or(group.len());
        let line = text[..offset + at].matches('\n').count() + 1;
        for item in group[..end].split(',') {
            let head = item.trim().split("::").next().unwrap_or("").trim();
            for forbidden in CORE_FORBIDDEN {
                if forbidden.strip_prefix("std::") == Some(head) {
                    found.push((line, *forbidden));
                }
            }
        }
        offset += start + end;
        rest = &text[offset..];
    }
    found
}

#[test]
fn the_io_check_sees_every_spelling() {
    assert_eq!(io_uses("use std::fs::File;"), [(1, "std::fs")]);
    assert_eq!(io_uses("let _ = tokio::spawn(f);"), [(1, "tokio")]);
    assert_eq!(
        io_uses("use std::{\n    fmt,\n    net::TcpStream,\n};"),
        [(1, "std::net")]
    );
    assert!(io_uses("// std::process is not used here\nuse std::fmt;").is_empty());
    assert!(io_uses("use std::fsx; let tokio_like = 1;").is_empty());
}

#[test]
fn toolgate_core_does_no_io() {
    let core = root().join("crates/toolgate-core");
    let mut files = Vec::new();
    rust_files(&core.join("src"), &mut files);
    assert!(files.len() > 5);
    let mut found = Vec::new();
    for file in &files {
        let name = file
            .strip_prefix(core.join("src"))
            .unwrap()
            .display()
            .to_string();
        let text = fs::read_to_string(file).unwrap();
        for (line, what) in io_uses(&text) {
            let excepted = CORE_IO_EXCEPTIONS.iter().any(|(f, w, module, _)| {
                *f == name
                    && *w == what
                    && module_lines(&text, module).is_some_and(|m| m.contains(&line))
            });
            if !excepted {
                found.push(format!("crates/toolgate-core/src/{name}:{line}: {what}"));
            }
        }
    }
    let manifest: toml::Table = fs::read_to_string(core.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    if let Some(deps) = manifest.get("dependencies").and_then(|d| d.as_table())
        && deps.contains_key("tokio")
    {
        found.push("crates/toolgate-core/Cargo.toml: depends on tokio".to_owned());
    }
    assert!(
        found.is_empty(),
        "toolgate-core does no I/O (ARCHITECTURE.md); give each use its reason in \
         CORE_IO_EXCEPTIONS or move it out:\n{}",
        found.join("\n")
    );
}

/// The crates in layers, lowest first: a crate may depend only on crates of lower layers, never
/// on one of its own layer. The same layers as ARCHITECTURE.md's table (checked below).
const LAYERS: &[(&str, &[&str])] = &[
    (
        // core "does no I/O" and knows nothing of MCP, terminals or files; the workspace, the
        // sandbox ("knows nothing of tools, policies or processes' lifetimes"), the proxy, the
        // process runner ("knows nothing of tools, policies or workspaces", nor of the sandbox
        // whose step it runs) and the edge's mechanisms stand on nothing of toolgate's.
        "foundations",
        &[
            "toolgate-core",
            "toolgate-workspace",
            "toolgate-sandbox",
            "toolgate-proxy",
            "toolgate-exec",
            "toolgate-edge",
        ],
    ),
    (
        // one builder of a confined child (temporary directory, proxy, sandbox, environment),
        // for commands, upstream servers and hooks.
        "confinement",
        &["toolgate-confine"],
    ),
    (
        // what the binary assembles, none of which knows another: the tools, upstream
        // servers, the audit log, the approval console, the MCP server.
        "parts",
        &[
            "toolgate-tools",
            "toolgate-upstream",
            "toolgate-audit",
            "toolgate-console",
            "toolgate-mcp",
        ],
    ),
    ("binary", &["toolgate"]),
];

/// Dependencies ARCHITECTURE.md rules out beyond the layers: (crate, must not depend on, why).
const NEVER_DEPENDS: &[(&str, &str, &str)] = &[
    (
        "toolgate-exec",
        "toolgate-core",
        "it knows nothing of tools, policies or workspaces",
    ),
    (
        "toolgate-exec",
        "toolgate-workspace",
        "it knows nothing of tools, policies or workspaces",
    ),
    (
        "toolgate-sandbox",
        "toolgate-core",
        "it knows nothing of tools or policies",
    ),
    (
        "toolgate-exec",
        "toolgate-sandbox",
        "it runs the pre-exec step it is given, whoever made it",
    ),
    (
        "toolgate-mcp",
        "toolgate-upstream",
        "it serves MCP and knows nothing of the tools behind the pipeline",
    ),
    (
        "toolgate-mcp",
        "toolgate-console",
        "a form's answer reaches the console through its own `ApprovalDesk` trait, which the \
         binary implements",
    ),
];

/// Each crate and the toolgate crates its `[dependencies]` name.
fn crate_graph() -> BTreeMap<String, Vec<String>> {
    let mut graph = BTreeMap::new();
    for krate in fs::read_dir(root().join("crates")).unwrap() {
        let dir = krate.unwrap().path();
        let manifest: toml::Table = fs::read_to_string(dir.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_owned();
        let deps = manifest
            .get("dependencies")
            .and_then(|d| d.as_table())
            .map(|d| {
                d.keys()
                    .filter(|k| k.starts_with("toolgate"))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        graph.insert(name, deps);
    }
    graph
}

#[test]
fn the_crate_graph_has_no_back_edges() {
    let graph = crate_graph();
    let layer_of = |name: &str| LAYERS.iter().position(|(_, crates)| crates.contains(&name));
    let architecture = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let mut wrong = Vec::new();
    for name in graph.keys() {
        if layer_of(name).is_none() {
            wrong.push(format!("{name} is in no layer of LAYERS"));
        }
        if !architecture.contains(&format!("### `crates/{name}`")) {
            wrong.push(format!("{name} has no part in ARCHITECTURE.md's code map"));
        }
    }
    for (_, crates) in LAYERS {
        for name in *crates {
            if !graph.contains_key(*name) {
                wrong.push(format!("LAYERS names {name}, which is not a crate"));
            }
        }
    }
    for (name, deps) in &graph {
        for dep in deps {
            if !graph.contains_key(dep) {
                wrong.push(format!(
                    "{name} depends on {dep}, which is not a crate here"
                ));
                continue;
            }
            if let (Some(from), Some(to)) = (layer_of(name), layer_of(dep))
                && to >= from
            {
                wrong.push(format!(
                    "{name} ({}) depends on {dep} ({}): a crate depends only on lower layers",
                    LAYERS[from].0, LAYERS[to].0
                ));
            }
        }
    }
    for (name, dep, why) in NEVER_DEPENDS {
        if graph.get(*name).is_some_and(|d| d.iter().any(|d| d == dep)) {
            wrong.push(format!("{name} depends on {dep}, yet {why}"));
        }
    }
    // No cycle, checked on the graph itself as well as through the layers.
    fn visit(
        name: &str,
        graph: &BTreeMap<String, Vec<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        wrong: &mut Vec<String>,
    ) {
        if let Some(at) = path.iter().position(|p| p == name) {
            wrong.push(format!("a cycle: {} -> {name}", path[at..].join(" -> ")));
            return;
        }
        if !done.insert(name.to_owned()) {
            return;
        }
        path.push(name.to_owned());
        for dep in graph.get(name).into_iter().flatten() {
            visit(dep, graph, path, done, wrong);
        }
        path.pop();
    }
    let mut done = BTreeSet::new();
    for name in graph.keys() {
        visit(name, &graph, &mut Vec::new(), &mut done, &mut wrong);
    }
    assert!(wrong.is_empty(), "the crate graph:\n{}", wrong.join("\n"));
}

/// The rows of ARCHITECTURE.md's layers table: (layer, crates, the toolgate crates they depend
/// on); a row whose layer cell is empty is in the layer of the row above.
fn architecture_layers(text: &str) -> Vec<(String, Vec<String>, Vec<String>)> {
    let section = text
        .split_once("\n## Layers\n")
        .expect("ARCHITECTURE.md has a `## Layers` section")
        .1;
    let section = section.split("\n## ").next().unwrap_or(section);
    let spans = |cell: &str| -> Vec<String> {
        cell.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect()
    };
    let mut rows = Vec::new();
    let mut layer = String::new();
    for line in section.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.len() != 3 || cells[0] == "layer" || cells[0].starts_with("---") {
            continue;
        }
        if !cells[0].is_empty() {
            layer = cells[0].to_owned();
        }
        let deps = spans(cells[2])
            .into_iter()
            .map(|d| format!("toolgate-{d}"))
            .collect();
        rows.push((layer.clone(), spans(cells[1]), deps));
    }
    rows
}

/// ARCHITECTURE.md's layers are the ones checked above, and each row's dependencies are what
/// the crate's manifest names, so that the page cannot drift from the code.
#[test]
fn architecture_md_shows_the_layers_and_dependencies_the_manifests_have() {
    let architecture = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let rows = architecture_layers(&architecture);
    let graph = crate_graph();
    let mut wrong = Vec::new();
    let mut shown: Vec<(String, BTreeSet<String>)> = Vec::new();
    for (layer, crates, deps) in &rows {
        match shown.last_mut() {
            Some((name, members)) if name == layer => members.extend(crates.iter().cloned()),
            _ => shown.push((layer.clone(), crates.iter().cloned().collect())),
        }
        let deps: BTreeSet<&String> = deps.iter().collect();
        for name in crates {
            let actual: BTreeSet<&String> = graph.get(name).into_iter().flatten().collect();
            if actual != deps {
                wrong.push(format!(
                    "{name}: ARCHITECTURE.md says it depends on {deps:?}, its manifest on {actual:?}"
                ));
            }
        }
    }
    let tested: Vec<(String, BTreeSet<String>)> = LAYERS
        .iter()
        .map(|(name, crates)| {
            let members = crates.iter().map(|c| (*c).to_owned()).collect();
            ((*name).to_owned(), members)
        })
        .collect();
    if shown != tested {
        wrong.push(format!(
            "ARCHITECTURE.md's layers {shown:?} are not the ones LAYERS checks: {tested:?}"
        ));
    }
    assert!(rows.len() > 4, "the layers table is read: {rows:?}");
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md's layers:\n{}",
        wrong.join("\n")
    );
}

/// The test sources: the binary's end-to-end tests and their shared support.
fn test_sources() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    rust_files(&root().join("crates/toolgate/tests"), &mut files);
    rust_files(&root().join("tests/support"), &mut files);
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path).unwrap();
            (path, text)
        })
        .collect()
}

/// Where `text` starts toolgate, or hands it to a program that does, without a home of the
/// test's own (`tests/support/home.rs`): `(line, what)` for each.
fn homeless_spawns(text: &str) -> Vec<(usize, &'static str)> {
    let lines: Vec<&str> = text.lines().collect();
    // Each function's lines, by its name, and the functions that give a home of their own.
    let mut functions: Vec<(String, std::ops::Range<usize>)> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let code = code.strip_prefix("pub ").unwrap_or(code);
        if let Some(rest) = code.strip_prefix("fn ") {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if let Some(last) = functions.last_mut() {
                last.1.end = i;
            }
            functions.push((name, i..lines.len()));
        }
    }
    // A function gives a home when its code (not a comment) makes a command with one
    // (`home::isolated`, or `home::vars` set on it): a mere `home::fresh()` for a directory
    // gives none.
    let uncommented = |l: &&str| l.split("//").next().unwrap_or("").to_owned();
    let homed = |range: &std::ops::Range<usize>| {
        lines[range.clone()]
            .iter()
            .map(uncommented)
            .any(|c| c.contains("home::isolated") || c.contains("home::vars("))
    };
    let homed_helpers: Vec<&str> = functions
        .iter()
        .filter(|(_, range)| homed(range))
        .map(|(name, _)| name.as_str())
        .collect();
    // Within the statement (a window around the line), the function, or a call of a function of
    // the file that gives the home.
    let near = |i: usize, what: &str| {
        lines[i.saturating_sub(12)..(i + 4).min(lines.len())]
            .iter()
            .map(uncommented)
            .any(|c| c.contains(what))
            || functions
                .iter()
                .any(|(_, range)| range.contains(&i) && homed(range))
            || homed_helpers
                .iter()
                .any(|name| lines[i].contains(&format!(".{name}(")))
    };
    // The statement from line `i` on, up to its `;`.
    let rest_of_statement = |i: usize| {
        let mut end = i;
        while end + 1 < lines.len() && !lines[end].trim_end().ends_with(';') {
            end += 1;
        }
        &lines[i..=end]
    };
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        // The binary's path, where `clients::toolgate_bin` gives it.
        let definition =
            code.starts_with("pub fn toolgate_bin()") || code == "env!(\"CARGO_BIN_EXE_toolgate\")";
        if code.starts_with("//") || code.starts_with("use ") || definition {
            continue;
        }
        // The binary itself, run directly, by whatever path: only `home::toolgate` may.
        let direct = line.split("Command::new(").skip(1).any(|argument| {
            let called =
                argument.trim_start_matches(|c: char| c.is_alphanumeric() || "_:".contains(c));
            let name = &argument[..argument.len() - called.len()];
            (name.ends_with("toolgate_bin") && called.starts_with("())"))
                || argument.starts_with("env!(\"CARGO_BIN_EXE_toolgate\"))")
        }) || line.contains("cargo_bin(\"toolgate\")");
        if direct {
            found.push((i + 1, "runs the binary without `home::toolgate`"));
            continue;
        }
        // A home given and then cleared away: `env_clear` after `home::isolated` or
        // `home::toolgate` drops the home unless `home::vars` sets it again.
        if line.contains(".env_clear()")
            && lines[i.saturating_sub(12)..i]
                .iter()
                .any(|l| l.contains("home::isolated") || l.contains("home::toolgate"))
            && !rest_of_statement(i)
                .iter()
                .any(|l| l.contains("home::vars("))
        {
            found.push((i + 1, "clears the home it was given"));
        }
        let names_binary =
            line.contains("toolgate_bin()") || line.contains("env!(\"CARGO_BIN_EXE_toolgate\")");
        // A plan's or a client's server entry: drive.py, listen.py and Claude Code start it,
        // and each is itself given a home that it passes on (checked below); a row's
        // `{toolgate}` is run by toolgate itself, with the home it was given.
        let entry = line.contains("\"command\": toolgate_bin()")
            || line.contains("toolgate_bin().to_owned()")
            || line.contains(".replace(\"{toolgate}\", ");
        if names_binary && !entry && !near(i, "home::isolated") {
            found.push((
                i + 1,
                "hands the binary to a program not made by `home::isolated`",
            ));
        }
        let client = ["Command::new(python())", "Command::new(claude_bin())"]
            .iter()
            .any(|c| line.contains(c));
        let starts_servers = lines[i..(i + 24).min(lines.len())]
            .iter()
            .take_while(|l| !l.trim_end().ends_with(';'))
            .any(|l| {
                ["drive.py", "listen.py", "--mcp-config"]
                    .iter()
                    .any(|s| l.contains(s))
            });
        if client
            && starts_servers
            && !line.contains("home::isolated")
            && !lines[i..(i + 24).min(lines.len())]
                .iter()
                .any(|l| l.contains("home::vars("))
        {
            found.push((
                i + 1,
                "starts a client of toolgate without a home of its own",
            ));
        }
    }
    found
}

#[test]
fn the_home_check_sees_every_spelling() {
    let homeless = "let a = Command::new(toolgate_bin()).output();\n\
        let b = Command::new(env!(\"CARGO_BIN_EXE_toolgate\"));\n\
        let c = Command::cargo_bin(\"toolgate\").unwrap();\n\
        let d = Command::new(\"strace\")\n    .arg(toolgate_bin())\n    .output();\n\
        let e = Command::new(python())\n    .arg(root().join(\"tests/mcp/drive.py\"))\n    .spawn();\n\
        let f = Command::new(clients::toolgate_bin()).output();\n\
        let g = Command::new(support::clients::toolgate_bin());\n\
        let h = home::toolgate()\n    .env_clear()\n    .output();\n\
        fn i() {\n    let dir = home::fresh();\n    Command::new(\"strace\").arg(toolgate_bin()).output();\n}\n\
        fn j() {\n    // not home::isolated\n    Command::new(\"strace\").arg(toolgate_bin()).output();\n}\n";
    assert_eq!(
        homeless_spawns(homeless)
            .iter()
            .map(|(l, _)| *l)
            .collect::<Vec<_>>(),
        [1, 2, 3, 5, 7, 10, 11, 13, 17, 21]
    );
    let housed = "let a = home::toolgate().output();\n\
        let d = home::isolated(Command::new(\"strace\"))\n    .arg(toolgate_bin())\n    .output();\n\
        let e = home::isolated(Command::new(python()))\n    .arg(root().join(\"tests/mcp/drive.py\"))\n    .spawn();\n\
        json!({\"command\": toolgate_bin(), \"args\": args});\n\
        let f = home::isolated(Command::new(claude_bin()))\n    .env_clear()\n    .envs(home::vars(&home))\n    .spawn();\n";
    assert_eq!(homeless_spawns(housed), []);
}

/// Every process a test starts that runs toolgate gets a `HOME` and XDG directories of the
/// test's own, so the suite never writes into the user's audit log, tokens or grants.
#[test]
fn every_spawn_of_toolgate_has_a_home_of_its_own() {
    let mut found = Vec::new();
    for (path, text) in test_sources() {
        let relative = path.strip_prefix(root()).unwrap().display().to_string();
        if ["tests/support/home.rs", "crates/toolgate/tests/tidy.rs"].contains(&&*relative) {
            continue;
        }
        for (line, what) in homeless_spawns(&text) {
            found.push(format!("{relative}:{line}: {what}"));
        }
    }
    assert!(
        found.is_empty(),
        "spawns of toolgate without a home of the test's own (use tests/support/home.rs):\n{}",
        found.join("\n")
    );
    // The clients the plans go to pass their home on, and refuse to run without one: drive.py
    // gives the servers it starts its own, and listen.py opens its client with drive.py's.
    let drive = fs::read_to_string(root().join("tests/mcp/drive.py")).unwrap();
    assert!(
        drive.contains("missing = [name for name in HOME_VARIABLES if name not in os.environ]")
            && drive.contains("**home, **(spec.get(\"env\") or {})")
            && drive.contains("env=server_env(spec)"),
        "drive.py must pass its home on to the servers it starts, and refuse to run without one"
    );
    let listen = fs::read_to_string(root().join("tests/mcp/listen.py")).unwrap();
    assert!(
        listen.contains("from drive import modern_client")
            && !listen.contains("StdioServerParameters("),
        "listen.py must start its server with drive.py's client, which passes its home on"
    );
}

/// A source text up to its unit tests, without its comments.
fn non_test_code(text: &str) -> String {
    let end = text.find("#[cfg(test)]").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `RejectCode` is issued by exactly one module of toolgate-core, the one of its stage
/// (`pipeline/<stage>.rs`), so that where any refusal is decided is one hop from its code: a
/// code other than a field error's is named, outside its tests, only there (and where the enum
/// is defined); a field error's code is found by any check stage 3 runs (the schema, a tool's
/// own), and only stage 3 makes a rejection of field errors. No other module of any crate, no
/// transport, makes a rejection at all.
#[test]
fn every_reject_code_is_issued_by_the_one_module_of_its_stage() {
    use toolgate_core::{RejectCode, Stage};
    let crates = root().join("crates");
    let mut sources = Vec::new();
    for entry in fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            rust_files(&src, &mut sources);
        }
    }
    let core_src = crates.join("toolgate-core/src");
    let module_of = |code: RejectCode| format!("pipeline/{}.rs", code.stage());
    let stage_modules: BTreeSet<String> = RejectCode::ALL.iter().map(|&c| module_of(c)).collect();
    let mut found = Vec::new();
    let mut named_in_own_module = BTreeSet::new();
    for file in &sources {
        let in_core = file
            .strip_prefix(&core_src)
            .ok()
            .map(|p| p.display().to_string());
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        if in_core.as_deref() == Some("rejection.rs") {
            continue;
        }
        let code = non_test_code(&fs::read_to_string(file).unwrap());
        let is_stage_module = in_core.as_ref().is_some_and(|m| stage_modules.contains(m));
        if code.contains("Rejection::new(") && !is_stage_module {
            found.push(format!(
                "{shown}: makes a rejection outside the stage modules"
            ));
        }
        let from_fields = code.contains("from_field_errors(");
        if from_fields && in_core.as_deref() != Some("pipeline/validate.rs") {
            found.push(format!(
                "{shown}: makes a rejection of field errors outside stage 3"
            ));
        }
        for reject in RejectCode::ALL {
            let name = format!("RejectCode::{reject:?}");
            let named = code.match_indices(&name).any(|(at, _)| {
                !code[at + name.len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            });
            if !named {
                continue;
            }
            if in_core.as_deref() == Some(module_of(reject).as_str()) {
                named_in_own_module.insert(reject);
            } else if reject.stage() != Stage::Validate {
                found.push(format!(
                    "{shown}: names `{reject}`, which only {} issues",
                    module_of(reject)
                ));
            }
        }
    }
    for reject in RejectCode::ALL {
        let module = module_of(reject);
        assert!(
            core_src.join(&module).is_file(),
            "`{reject}` is issued at stage {}, which has no module {module}",
            reject.stage()
        );
        if reject.stage() != Stage::Validate && !named_in_own_module.contains(&reject) {
            found.push(format!("{module}: never issues `{reject}`"));
        }
    }
    assert!(
        found.is_empty(),
        "each reject code is issued by its stage's module in toolgate-core/src/pipeline:\n{}",
        found.join("\n")
    );
}

/// What reads the process's environment. A library crate is given what it needs of it (the
/// user's home, the variables commands start from) by the binary, which reads the environment
/// once while it resolves its `Settings` (issue 38: one resolved configuration).
const ENV_READS: &[&str] = &["env::var", "env::home_dir", "env::temp_dir", "env::args"];

/// The environment reads of one source text, outside its comments and unit tests.
fn env_reads(text: &str) -> Vec<(usize, &'static str)> {
    let code = non_test_code(text);
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        for read in ENV_READS {
            if line.contains(read) {
                found.push((n + 1, *read));
            }
        }
    }
    found
}

#[test]
fn the_environment_check_sees_every_spelling() {
    assert_eq!(
        env_reads("let path = std::env::var_os(\"PATH\");"),
        [(1, "env::var")]
    );
    assert_eq!(
        env_reads("use std::env;\nlet home = env::home_dir();"),
        [(2, "env::home_dir")]
    );
    assert_eq!(
        env_reads("use std::env::vars_os;\nlet all = vars_os();"),
        [(1, "env::var")]
    );
    assert_eq!(
        env_reads("for (k, v) in std::env::vars() {}"),
        [(1, "env::var")]
    );
    assert!(env_reads("// std::env::var is read by the binary\nlet v = env!(\"X\");").is_empty());
    assert!(
        env_reads("fn f() {}\n#[cfg(test)]\nmod tests {\n    fn t() { std::env::vars_os(); }\n}")
            .is_empty()
    );
}

#[test]
fn no_library_crate_reads_the_environment() {
    let mut found = Vec::new();
    for entry in fs::read_dir(root().join("crates")).unwrap() {
        let krate = entry.unwrap().path();
        // The binary reads it, once, into its settings; every library crate is given it.
        if krate.file_name().is_some_and(|name| name == "toolgate") || !krate.join("src").is_dir() {
            continue;
        }
        let mut files = Vec::new();
        rust_files(&krate.join("src"), &mut files);
        for file in files {
            // A `tests.rs` is its parent module's `#[cfg(test)] mod tests;`.
            if file.file_name().is_some_and(|name| name == "tests.rs") {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap();
            for (line, read) in env_reads(&text) {
                let file = file.strip_prefix(root()).unwrap().display().to_string();
                found.push(format!("{file}:{line}: {read}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a library crate reads no environment: the binary gives it what it needs \
         (crates/toolgate/src/settings.rs):\n{}",
        found.join("\n")
    );
}
