//! What the `toolgate` command prints reaches the person's terminal with its control
//! characters made visible (issue 36): a file's OSC 52 sequence set the terminal's clipboard
//! through `toolgate call`, and hidden-text escapes hid what followed them. Each row of
//! `tests/corpus/terminal.jsonl` is a text a file, a model or an upstream could hold, and the
//! spelling a person must see instead; every place toolgate prints such text is driven
//! through the real binary.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/clients.rs"]
mod clients;
#[path = "../../../tests/support/home.rs"]
mod home;

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;

struct Row {
    name: String,
    text: String,
    shown: String,
}

fn rows() -> Vec<Row> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/corpus/terminal.jsonl"
    );
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let row: Value = serde_json::from_str(l).unwrap();
            let field = |k: &str| row[k].as_str().unwrap().to_owned();
            Row {
                name: field("name"),
                text: field("text"),
                shown: field("shown"),
            }
        })
        .collect()
}

/// A character a terminal acts on or shows as nothing, by this test's own reckoning: every
/// control but tab and newline, and the format characters that reorder or hide text.
fn is_raw(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
            | '\u{FEFF}' | '\u{E0000}'..='\u{E007F}')
}

#[track_caller]
fn assert_no_raw(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|&c| is_raw(c)) {
        panic!(
            "{what}: U+{:04X} reached the terminal raw: {text:?}",
            u32::from(c)
        );
    }
}

fn toolgate(state: &Path) -> Command {
    let mut cmd = Command::from_std(home::toolgate());
    cmd.env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
        .env("XDG_STATE_HOME", state);
    cmd
}

struct Printed {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: &mut Command) -> Printed {
    let output = cmd.output().unwrap();
    Printed {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8(output.stdout).unwrap(),
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A workspace holding one file per row, `row-N.txt`.
fn workspace(dir: &Path, rows: &[Row]) -> std::path::PathBuf {
    let ws = dir.join("ws");
    fs::create_dir_all(&ws).unwrap();
    for (n, row) in rows.iter().enumerate() {
        fs::write(ws.join(format!("row-{n}.txt")), format!("{}\n", row.text)).unwrap();
    }
    ws
}

fn call(state: &Path, ws: &Path, tool: &str, args: &str, json: bool) -> Printed {
    let mut cmd = toolgate(state);
    cmd.arg("call");
    if json {
        cmd.arg("--json");
    }
    run(cmd
        .arg("--workspace")
        .arg(ws)
        .args(["--tool", tool, "--args", args]))
}

#[test]
fn a_files_escapes_are_shown_not_obeyed_by_read_file_and_search_text() {
    let rows = rows();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ws = workspace(dir.path(), &rows);
    for (n, row) in rows.iter().enumerate() {
        let args = format!(r#"{{"path": "row-{n}.txt"}}"#);
        let text = call(&state, &ws, "read_file", &args, false);
        assert_eq!(text.code, 0, "{}: {}", row.name, text.stderr);
        assert_no_raw(&row.name, &text.stdout);
        assert_no_raw(&row.name, &text.stderr);
        assert_eq!(text.stdout, format!("{}\n", row.shown), "{}", row.name);

        // JSON: the same value for a program, only JSON escapes for a terminal.
        let json = call(&state, &ws, "read_file", &args, true);
        assert_eq!(json.code, 0, "{}: {}", row.name, json.stderr);
        assert_no_raw(&row.name, &json.stdout);
        let outcome: Value = serde_json::from_str(&json.stdout).unwrap();
        assert_eq!(
            outcome["output"]["content"],
            format!("{}\n", row.text),
            "{}",
            row.name
        );
    }
    // Matches as grep prints them: every row's line, each made visible.
    let found = call(
        &state,
        &ws,
        "search_text",
        r#"{"pattern": "^", "regex": true}"#,
        false,
    );
    assert_eq!(found.code, 0, "{}", found.stderr);
    assert_no_raw("search_text", &found.stdout);
    for (n, row) in rows.iter().enumerate() {
        let line = format!("row-{n}.txt:1:{}", row.shown);
        // The searcher reads a byte order mark as the encoding's, not as text.
        let without_bom = line.replacen("\\u{feff}", "", 1);
        assert!(
            found.stdout.lines().any(|l| l == line || l == without_bom),
            "{}: {line:?} not in {}",
            row.name,
            found.stdout
        );
    }
}

/// A rejection quotes what it refused: an argument's name a model wrote reached the
/// terminal raw in the message's pointer. `explain` quotes it again; the audit log's tail and
/// export, which keep names and digests only, stay free of it too.
#[test]
fn input_quoted_by_a_rejection_and_by_explain_is_shown_not_obeyed() {
    let rows = rows();
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let ws = workspace(dir.path(), &[]);
    for row in &rows {
        let key = format!("k{}", row.text);
        let args = serde_json::json!({"path": "a.txt", key: 1}).to_string();
        let refused = call(&state, &ws, "read_file", &args, false);
        assert_eq!(refused.code, 2, "{}: {}", row.name, refused.stderr);
        assert_no_raw(&row.name, &refused.stderr);
        assert!(
            refused.stderr.contains(&format!("k{}", row.shown)),
            "{}: {}",
            row.name,
            refused.stderr
        );
        let explained = run(toolgate(&state)
            .arg("explain")
            .arg("--workspace")
            .arg(&ws)
            .args(["--tool", "read_file", "--args", &args]));
        assert_no_raw(&row.name, &explained.stdout);
        assert!(
            explained.stdout.contains(&format!("k{}", row.shown)),
            "{}: {}",
            row.name,
            explained.stdout
        );
    }
    let tail = run(toolgate(&state).args(["audit", "tail", "-n", "100"]));
    assert_eq!(tail.code, 0, "{}", tail.stderr);
    assert_no_raw("audit tail", &tail.stdout);
    assert_eq!(tail.stdout.lines().count(), rows.len());
    let export = run(toolgate(&state).args(["audit", "export", "--jsonl"]));
    assert_eq!(export.code, 0, "{}", export.stderr);
    assert_no_raw("audit export", &export.stdout);
    for line in export.stdout.lines() {
        serde_json::from_str::<Value>(line).unwrap();
    }
}

/// TOML's own escapes for `text`, so that the configuration file holds none of it raw.
fn toml_string(text: &str) -> String {
    let mut quoted = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            ' '..='~' => quoted.push(c),
            c if u32::from(c) <= 0xFFFF => quoted.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => quoted.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    quoted.push('"');
    quoted
}

#[test]
fn tool_descriptions_are_listed_with_their_escapes_shown() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for row in rows() {
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[tool]]\nname = \"read_file\"\ndescription = {}\n",
                toml_string(&format!("Reads {} a file", row.text))
            ),
        )
        .unwrap();
        let listed = run(toolgate(&state)
            .current_dir(dir.path())
            .args(["tools", "list", "--config"])
            .arg(&config));
        assert_eq!(listed.code, 0, "{}: {}", row.name, listed.stderr);
        assert_no_raw(&row.name, &listed.stdout);
        let line = listed
            .stdout
            .lines()
            .find(|l| l.starts_with("read_file"))
            .unwrap();
        assert!(
            line.ends_with(&format!("Reads {} a file", row.shown)),
            "{}: {line}",
            row.name
        );
        let json = run(toolgate(&state)
            .current_dir(dir.path())
            .args(["tools", "list", "--json", "--config"])
            .arg(&config));
        assert_no_raw(&row.name, &json.stdout);
        let listing: Value = serde_json::from_str(&json.stdout).unwrap();
        let read_file = listing["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "read_file")
            .unwrap();
        assert_eq!(
            read_file["description"],
            format!("Reads {} a file", row.text),
            "{}",
            row.name
        );
    }
}

/// An upstream server's standard error reached the person's terminal untouched (it was
/// inherited): `tools discover` starts each upstream, and a hostile one wrote escapes there.
#[test]
fn an_upstreams_standard_error_is_shown_not_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for row in rows() {
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"noisy\"\ncommand = [\"/bin/sh\", \"-c\", \"printf 'said %s\\\\n' \\\"$0\\\" >&2; exit 1\", {}]\n",
                toml_string(&row.text)
            ),
        )
        .unwrap();
        let discovered = run(toolgate(&state)
            .current_dir(dir.path())
            .args(["tools", "discover", "--config"])
            .arg(&config));
        assert_no_raw(&row.name, &discovered.stderr);
        assert_no_raw(&row.name, &discovered.stdout);
        assert!(
            discovered.stderr.contains(&format!("said {}\n", row.shown)),
            "{}: {}",
            row.name,
            discovered.stderr
        );
    }
}

/// A usage error quotes the argument it refused; clap wrote it as it was.
#[test]
fn a_usage_error_quoting_an_argument_shows_it_not_obeys_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    for row in rows() {
        let refused = run(toolgate(&state).args([
            "call",
            "--workspace",
            ".",
            "--tool",
            "read_file",
            "--surface",
            &row.text,
        ]));
        assert_eq!(refused.code, 3, "{}: {}", row.name, refused.stderr);
        assert_no_raw(&row.name, &refused.stderr);
        assert!(
            refused.stderr.contains(&row.shown),
            "{}: {}",
            row.name,
            refused.stderr
        );
    }
}
