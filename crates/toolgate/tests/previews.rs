//! Previews that are what runs, through the real binary: `tests/corpus/previews.jsonl` run
//! against `toolgate serve --http`, the model's calls made by the Python MCP SDK and the
//! person's decisions posted to the console's HTTP API as its page posts them.
//!
//! Every row is one fresh workspace and one server. A row is refused before anyone is asked
//! (and says which construct, on which line), or it is shown — the pending request's preview
//! holds what the row names — and bound: a file changed while the person looks makes the
//! allowed call fail with `script_changed`. After every row no `marker` file exists, which
//! every hostile script, include and configuration in the table would have made.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use serde_json::{Value, json};

use clients::root;
use served::Served;
use support::{clients, served};

/// The rows of the table, comments left out.
fn rows() -> Vec<Value> {
    let text = fs::read_to_string(root().join("tests/corpus/previews.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn strings<'a>(row: &'a Value, key: &str) -> Vec<&'a str> {
    row.get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().map(|v| v.as_str().unwrap()).collect())
        .unwrap_or_default()
}

/// Writes a row's `files` (or `change`) into the workspace.
fn write_files(ws: &Path, files: Option<&Value>) {
    let Some(files) = files.and_then(Value::as_object) else {
        return;
    };
    for (name, body) in files {
        let path = ws.join(name);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        match body.as_str().unwrap() {
            "@big" => fs::write(&path, vec![b'#'; 1024 * 1024 + 1]).unwrap(),
            text => fs::write(&path, text).unwrap(),
        }
    }
}

/// Every `marker` below `dir`.
fn markers(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() == "marker" {
                found.push(entry.path().display().to_string());
            }
            if entry.file_type().unwrap().is_dir() {
                stack.push(entry.path());
            }
        }
    }
    found
}

fn check_row(row: &Value) {
    let name = row["name"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    fs::create_dir_all(&ws).unwrap();
    write_files(&ws, row.get("files"));
    if let Some(links) = row.get("links").and_then(Value::as_object) {
        for (link, target) in links {
            let link = ws.join(link);
            fs::create_dir_all(link.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target.as_str().unwrap(), link).unwrap();
        }
    }
    for file in strings(row, "exec") {
        fs::set_permissions(ws.join(file), fs::Permissions::from_mode(0o755)).unwrap();
    }
    let served = Served::start(&ws, "");
    let tool = row["tool"].as_str().unwrap();
    let client = served.client(json!([{"op": "call", "tool": tool, "arguments": row["args"]}]));
    let expect = row["expect"].as_str().unwrap();
    if expect == "refused" {
        let result = &client.steps()[0];
        let rejection = &result["structured"]["rejection"];
        assert_eq!(
            (rejection["stage"].as_str(), rejection["code"].as_str()),
            (row["stage"].as_str(), row["code"].as_str()),
            "{name}: {result}"
        );
        let text = rejection.to_string();
        for fragment in strings(row, "message") {
            assert!(
                text.contains(fragment),
                "{name}: `{fragment}` not in {text}"
            );
        }
        served.pending(0);
    } else {
        let pending = served.pending(1);
        let request = &pending[0];
        let preview = request["preview"].as_str().unwrap_or_default();
        for fragment in strings(row, "preview") {
            assert!(
                preview.contains(fragment),
                "{name}: `{fragment}` not in the preview:\n{preview}"
            );
        }
        for fragment in strings(row, "preview_lacks") {
            assert!(
                !preview.contains(fragment),
                "{name}: `{fragment}` in the preview:\n{preview}"
            );
        }
        write_files(&ws, row.get("change"));
        let id = request["id"].as_str().unwrap();
        let decision = if expect == "shown" {
            "reject"
        } else {
            "allow_once"
        };
        let reply = served.decide(id, &json!({"decision": decision}).to_string());
        assert_eq!(reply.status, 204, "{name}: {}", reply.body);
        let result = &client.steps()[0];
        match expect {
            "ran" => {
                assert_eq!(result["isError"], false, "{name}: {result}");
                let output = &result["structured"];
                let exit = row.get("exit_code").cloned().unwrap_or(json!(0));
                assert_eq!(output["exit_code"], exit, "{name}: {output}");
                let stdout = output["stdout"].as_str().unwrap();
                for fragment in strings(row, "stdout") {
                    assert!(
                        stdout.contains(fragment),
                        "{name}: `{fragment}` not in {stdout:?}"
                    );
                }
                for fragment in strings(row, "stdout_lacks") {
                    assert!(
                        !stdout.contains(fragment),
                        "{name}: `{fragment}` in {stdout:?}"
                    );
                }
                if let Some(steps) = row.get("steps") {
                    assert_eq!(
                        output["steps"].as_array().map(Vec::len),
                        steps.as_u64().map(|n| n as usize),
                        "{name}: {output}"
                    );
                }
            }
            "bound" => {
                assert_eq!(
                    result["structured"]["error"]["code"], "script_changed",
                    "{name}: {result}"
                );
            }
            "stopped" => {
                // A step wrote what a later step reads: the later one is refused as changed,
                // the write itself was refused and the script ended there, or the file was
                // put back after the call, which then failed.
                let refused = ["script_changed", "runs_later_changed"]
                    .iter()
                    .any(|code| result["structured"]["error"]["code"] == *code);
                let failed = result["isError"] == false
                    && result["structured"]["exit_code"] != 0
                    && result["structured"]["steps"].as_array().map(Vec::len) == Some(1);
                assert!(refused || failed, "{name}: {result}");
            }
            "shown" => {
                assert_eq!(
                    result["structured"]["rejection"]["code"], "approval_denied",
                    "{name}: {result}"
                );
            }
            other => panic!("{name}: unknown expectation {other}"),
        }
    }
    let made = markers(dir.path());
    assert!(made.is_empty(), "{name}: something unshown ran: {made:?}");
}

#[test]
fn every_preview_row_is_refused_or_shown_and_bound() {
    let rows = rows();
    assert!(rows.len() > 40, "the table is all there");
    let only = std::env::var("TOOLGATE_PREVIEW_ROW").ok();
    let mut ran = 0;
    for row in &rows {
        if only
            .as_deref()
            .is_some_and(|o| !row["name"].as_str().unwrap().contains(o))
        {
            continue;
        }
        check_row(row);
        ran += 1;
    }
    println!("{ran} preview rows passed");
}
