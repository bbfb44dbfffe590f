//! Hooks through the real binary: the failure matrix of `tests/corpus/hooks.jsonl`, where every
//! way of not answering cleanly refuses the call with `hook_failed`, is recorded with its kind
//! in the audit log, and leaves no process behind; and the rows that must keep working. Each
//! hook is `tests/hooks/answer.sh`, run confined by `toolgate call`; a program changed after
//! the configuration was loaded is tried through `toolgate serve` over stdio, which loads it
//! once.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[path = "../../../tests/support/mod.rs"]
mod support;

use support::clients::root;
use support::home;

/// A home of its own with a workspace (`a.txt`: alpha, `b.txt`: beta) and a configuration of
/// one hook.
struct Setup {
    home: PathBuf,
    ws: PathBuf,
    config: PathBuf,
}

impl Setup {
    fn new(hook: &str) -> Setup {
        let home = home::fresh();
        let ws = home.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        std::fs::write(ws.join("b.txt"), "beta\n").unwrap();
        let config = home.join("hooks.toml");
        std::fs::write(&config, hook).unwrap();
        Setup { home, ws, config }
    }

    fn toolgate(&self) -> Command {
        home::toolgate_at(&self.home)
    }

    /// `read_file` of `a.txt` by `toolgate call --json`: the outcome.
    fn call(&self) -> Value {
        let output = self.called();
        serde_json::from_slice(&output.stdout).unwrap_or_else(|_| panic!("{output:?}"))
    }

    /// `read_file` of `a.txt` by `toolgate call --json`, as the process ended.
    fn called(&self) -> std::process::Output {
        self.toolgate()
            .args(["call", "--json", "--workspace"])
            .arg(&self.ws)
            .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The audit log's records.
    fn audit(&self) -> Vec<Value> {
        let output = self
            .toolgate()
            .args(["audit", "export", "--jsonl", "--config"])
            .arg(&self.config)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stdout)
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}

/// The `[[hook]]` of `row`, marked with `mark`.
fn hook_toml(row: &Value, mark: &str) -> String {
    let script = root().join("tests/hooks/answer.sh");
    let command = match row["program"].as_str() {
        Some(program) => json!([program]),
        None => json!([
            "/bin/sh",
            script.display().to_string(),
            row["behaviour"].as_str().unwrap(),
            mark
        ]),
    };
    let mut toml = format!(
        "[[hook]]\nname = \"guard\"\nevent = \"{}\"\ncommand = {command}\nmode = \"{}\"\n",
        row["event"].as_str().unwrap_or("pre_call"),
        row["mode"].as_str().unwrap_or("enforce"),
    );
    if let Some(ms) = row["timeout_ms"].as_u64() {
        toml.push_str(&format!("timeout_ms = {ms}\n"));
    }
    toml
}

fn rows() -> Vec<Value> {
    std::fs::read_to_string(root().join("tests/corpus/hooks.jsonl"))
        .unwrap()
        .lines()
        .filter(|line| line.starts_with('{'))
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The processes whose command line carries `mark`.
fn marked(mark: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(mark) {
            found.push(format!(
                "{}: {cmdline}",
                entry.file_name().to_string_lossy()
            ));
        }
    }
    found
}

/// The text of an outcome's result, refusal or failure, as the model reads it.
fn said(outcome: &Value) -> String {
    outcome.to_string()
}

#[test]
fn every_row_of_the_hook_table() {
    let rows = rows();
    // The issue's matrix: thirteen ways to fail and the rows that must keep working.
    assert!(rows.len() >= 20, "{} rows", rows.len());
    let mut problems = Vec::new();
    for (index, row) in rows.iter().enumerate() {
        let name = row["name"].as_str().unwrap();
        let mark = format!("toolgate-hook-mark-{}-{index}", std::process::id());
        let setup = Setup::new(&hook_toml(row, &mark));
        let outcome = setup.call();
        let rejection = &outcome["rejection"];
        let code = rejection["code"].as_str();
        if code != row["code"].as_str() {
            problems.push(format!(
                "{name}: {code:?}, expected {}: {outcome}",
                row["code"]
            ));
            continue;
        }
        if let Some(stage) = row["stage"].as_str()
            && rejection["stage"].as_str() != Some(stage)
        {
            problems.push(format!("{name}: at {}, not {stage}", rejection["stage"]));
        }
        if let Some(expect) = row["expect"].as_str()
            && !said(&outcome).contains(expect)
        {
            problems.push(format!("{name}: `{expect}` not in {outcome}"));
        }
        if let Some(unexpected) = row["unexpected"].as_str()
            && said(&outcome).contains(unexpected)
        {
            problems.push(format!("{name}: `{unexpected}` in {outcome}"));
        }
        if let Some(absent) = row["absent"].as_str()
            && setup.ws.join(absent).exists()
        {
            problems.push(format!(
                "{name}: the hook wrote `{absent}` in the workspace"
            ));
        }
        let records = setup.audit();
        let Some(record) = records.last() else {
            problems.push(format!("{name}: nothing in the audit log"));
            continue;
        };
        let hooks = &record["call"]["hooks"];
        if let Some(kind) = row["kind"].as_str() {
            let message = rejection["message"].as_str().unwrap_or("");
            if !message.contains(&format!("({kind})")) {
                problems.push(format!("{name}: `{kind}` not in `{message}`"));
            }
            if hooks[0]["failure"].as_str() != Some(kind) {
                problems.push(format!("{name}: the record says {hooks}, not {kind}"));
            }
            if said(&outcome).contains("alpha") {
                problems.push(format!("{name}: the output came back: {outcome}"));
            }
        } else if hooks[0]["name"] != "guard" {
            problems.push(format!("{name}: the record has no hook: {record}"));
        }
        let left = marked(&mark);
        if !left.is_empty() {
            problems.push(format!("{name}: processes left behind: {left:?}"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Reads JSON-RPC lines from a server until the answer to `id`.
fn answer(lines: &mut impl BufRead, id: u64) -> Value {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(lines.read_line(&mut line).unwrap() > 0, "the server ended");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["id"] == id {
            return message;
        }
    }
}

/// A hook's script whose bytes change after `toolgate serve` loaded its configuration fails
/// the next call it would judge (`changed`); nothing runs. Named by its absolute path, or
/// relative to the hook's working directory, the workspace (in its `.toolgate/`, the one place
/// there a hook's file may be: see `a_hook_file_a_command_could_change_is_refused_at_start`).
/// So does a word among its arguments that names no file at load and then comes to name one
/// in the workspace (as a command could make it), which the hook would open by that name.
#[test]
fn a_program_changed_after_loading_fails_its_hook() {
    for (relative, appears) in [(false, false), (true, false), (false, true)] {
        program_changed_after_loading(relative, appears);
    }
}

fn program_changed_after_loading(relative: bool, appears: bool) {
    let setup = Setup::new("");
    let script = if relative {
        setup.ws.join(".toolgate/guard.sh")
    } else {
        home::fresh().join("guard.sh")
    };
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, "#!/bin/sh\necho '{\"decision\": \"allow\"}'\n").unwrap();
    let named = if relative {
        ".toolgate/guard.sh".to_owned()
    } else {
        script.display().to_string()
    };
    let hook = format!(
        "[[hook]]\nname = \"guard\"\nevent = \"pre_call\"\ncommand = [\"/bin/sh\", \"{named}\", \"verdict\"]\n"
    );
    std::fs::write(&setup.config, hook).unwrap();
    let mut server = setup
        .toolgate()
        .args(["serve", "--no-console", "--workspace"])
        .arg(&setup.ws)
        .arg("--config")
        .arg(&setup.config)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap());
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "hooks-test", "version": "1"}}}),
    );
    answer(&mut lines, 1);
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"path": "a.txt"}}})
    };
    send(call(2));
    let first = answer(&mut lines, 2);
    assert!(first.to_string().contains("alpha"), "{first}");
    if appears {
        std::fs::write(setup.ws.join("verdict"), "allow\n").unwrap();
    } else {
        std::fs::write(
            &script,
            "#!/bin/sh\necho '{\"decision\": \"allow\"}' # swapped\n",
        )
        .unwrap();
    }
    send(call(3));
    let second = answer(&mut lines, 3);
    let text = second.to_string();
    assert!(
        text.contains("hook_failed") && text.contains("(changed)"),
        "relative: {relative}, appears: {appears}: {text}"
    );
    assert!(!text.contains("alpha"), "{text}");
    drop(stdin);
    server.wait().unwrap();
}

/// A hook whose program or script lies in the workspace, outside its `.toolgate/`, stops
/// toolgate at start, naming the hook, the file and where to put it: a command or write the
/// person approved could change it, and the next start would run its new bytes as the
/// operator's hook. Where the file really is decides, and every place its path passes through:
/// a link in the workspace pointing out could be pointed elsewhere, a link outside pointing in
/// leads to a file of the workspace. In `.toolgate/` (kept from commands as a file that runs
/// later) and outside the workspace, the hook loads and judges.
#[test]
fn a_hook_file_a_command_could_change_is_refused_at_start() {
    const GUARD: &str = "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"allow\"}'\n";
    // (the script as the hook names it, the file it leads to, refused: what the error says)
    let rows: [(&str, Option<&str>); 7] = [
        (
            "{ws}/hooks/guard.sh",
            Some("`{ws}/hooks/guard.sh` is inside the workspace `{ws}`"),
        ),
        (
            "hooks/guard.sh",
            Some("`{ws}/hooks/guard.sh` is inside the workspace `{ws}`"),
        ),
        (
            "{ws}/out-link",
            Some("`{ws}/out-link` is inside the workspace `{ws}`"),
        ),
        (
            "{out}/in-link",
            Some("`{out}/in-link` leads to `{ws}/hooks/guard.sh`, inside the workspace `{ws}`"),
        ),
        (".toolgate/guard.sh", None),
        ("{ws}/.toolgate/guard.sh", None),
        ("{out}/guard.sh", None),
    ];
    let mut problems = Vec::new();
    for (named, refused) in rows {
        let setup = Setup::new("");
        let ws = setup.ws.canonicalize().unwrap();
        let out = setup.home.join("outside").canonicalize().ok();
        let out = out.unwrap_or_else(|| {
            std::fs::create_dir_all(setup.home.join("outside")).unwrap();
            setup.home.join("outside").canonicalize().unwrap()
        });
        for dir in [ws.join("hooks"), ws.join(".toolgate")] {
            std::fs::create_dir_all(dir).unwrap();
        }
        for file in [
            ws.join("hooks/guard.sh"),
            ws.join(".toolgate/guard.sh"),
            out.join("guard.sh"),
        ] {
            std::fs::write(file, GUARD).unwrap();
        }
        std::os::unix::fs::symlink(out.join("guard.sh"), ws.join("out-link")).unwrap();
        std::os::unix::fs::symlink(ws.join("hooks/guard.sh"), out.join("in-link")).unwrap();
        let fill = |text: &str| {
            text.replace("{ws}", &ws.display().to_string())
                .replace("{out}", &out.display().to_string())
        };
        let hook = format!(
            "[[hook]]\nname = \"guard\"\nevent = \"pre_call\"\ncommand = [\"/bin/sh\", \"{}\"]\n",
            fill(named)
        );
        std::fs::write(&setup.config, hook).unwrap();
        let output = setup.called();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        match refused {
            Some(says) => {
                let says = format!("hook `guard`: {}", fill(says));
                let fix = fill("move it outside the workspace or into `{ws}/.toolgate/`");
                if output.status.success() || !stderr.contains(&says) || !stderr.contains(&fix) {
                    problems.push(format!(
                        "{named}: not refused with `{says}`: {stderr}{stdout}"
                    ));
                }
                if stdout.contains("alpha") {
                    problems.push(format!("{named}: the call ran: {stdout}"));
                }
            }
            None if !output.status.success() || !stdout.contains("alpha") => {
                problems.push(format!("{named}: did not load and allow: {stderr}{stdout}"));
            }
            None => {
                let records = setup.audit();
                let hooks = &records.last().unwrap()["call"]["hooks"];
                if hooks[0]["name"] != "guard" || hooks[0]["decision"] != "allow" {
                    problems.push(format!("{named}: the hook did not judge: {hooks}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    // `toolgate serve` stops at start too, before it answers anything.
    let setup = Setup::new("");
    let script = setup.ws.canonicalize().unwrap().join("hooks/guard.sh");
    std::fs::create_dir_all(script.parent().unwrap()).unwrap();
    std::fs::write(&script, GUARD).unwrap();
    let hook = format!(
        "[[hook]]\nname = \"guard\"\nevent = \"pre_call\"\ncommand = [\"/bin/sh\", \"{}\"]\n",
        script.display()
    );
    std::fs::write(&setup.config, hook).unwrap();
    let output = setup
        .toolgate()
        .args(["serve", "--no-console", "--workspace"])
        .arg(&setup.ws)
        .arg("--config")
        .arg(&setup.config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "hook `guard`: `{}` is inside the workspace",
            script.display()
        )),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "{output:?}");

    // `toolgate tools list` runs nothing: run from the directory holding the hook, or the one
    // above it, it lists the tools and takes neither for a workspace the hook runs in.
    for dir in [script.parent().unwrap(), setup.ws.as_path()] {
        let output = setup
            .toolgate()
            .args(["tools", "list", "--config"])
            .arg(&setup.config)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{dir:?}: {output:?}");
        assert!(stdout.contains("read_file"), "{stdout}");
    }
}

/// `toolgate serve` over a workspace holding `a.txt` (`alpha`), in a home of its own, with one
/// pre_call hook, `tests/hooks/answer.sh`, answering `decision`.
fn served_with_a_pre_call_hook(decision: &str) -> support::served::Served {
    let ws = home::fresh().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    let script = root().join("tests/hooks/answer.sh");
    let config = format!(
        "[[hook]]\nname = \"guard\"\nevent = \"pre_call\"\ncommand = [\"/bin/sh\", \"{}\", \"{decision}\"]\n",
        script.display()
    );
    support::served::Served::start(&ws, &config)
}

/// A hook's `ask` makes a read that needs nobody wait for a person: it runs once approved in
/// the console, and the request the person saw is the call the hook judged, naming the hook
/// that asked and its reason.
#[test]
fn an_ask_waits_for_a_person_and_runs_once_approved() {
    let served = served_with_a_pre_call_hook("ask");
    let client = served.client(json!([
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}}
    ]));
    let pending = served.pending(1);
    assert_eq!(pending[0]["tool"], "read_file", "{pending:?}");
    assert_eq!(
        pending[0]["hook_asks"],
        json!([{"name": "guard", "reason": "a.txt is under review"}]),
        "{pending:?}"
    );
    let id = pending[0]["id"].as_str().unwrap();
    let reply = served.decide(id, r#"{"decision":"allow_once"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let steps = client.steps();
    assert!(steps[0].to_string().contains("alpha"), "{steps:?}");
}

/// A hook on a misspelt tool would never run: toolgate refuses to start, and guesses.
#[test]
fn a_hook_on_an_unknown_tool_stops_toolgate_with_a_guess() {
    let setup = Setup::new(
        "[[hook]]\nname = \"guard\"\nevent = \"pre_call\"\ncommand = [\"/bin/true\"]\n\
         tools = [\"read_file\", \"wirte_file\"]\n",
    );
    let output = setup
        .toolgate()
        .args(["tools", "list", "--config"])
        .arg(&setup.config)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("hook `guard` names unknown tool `wirte_file`: did you mean `write_file`?"),
        "{stderr}"
    );
    assert!(stderr.contains(":5"), "the line of `tools`: {stderr}");
}

/// A hook's deny reaches the model over MCP with its reason, as a refusal at the hook stage.
#[test]
fn a_deny_reaches_the_model_with_its_reason() {
    let served = served_with_a_pre_call_hook("deny");
    let client = served.client(json!([
        {"op": "call", "tool": "read_file", "arguments": {"path": "a.txt"}}
    ]));
    let step = &client.steps()[0];
    let rejection = &step["structured"]["rejection"];
    assert_eq!(rejection["code"], "hook_denied", "{step}");
    assert_eq!(rejection["stage"], "hook", "{step}");
    let text = step.to_string();
    assert!(text.contains("writes wait for the release"), "{text}");
    assert!(!text.contains("alpha"), "{text}");
}
