//! The real `toolgate` binary, driven as a user would: exit codes, outcomes, configuration
//! errors, and the shared hostile-input corpus.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};

use fixture::{Fixture, corpus};
use support::{fixture, home, terminal};
use terminal::{on_a_terminal, typed_at_a_terminal};

fn toolgate() -> Command {
    let mut cmd = Command::from_std(home::toolgate());
    // Keep the user's own configuration out of the tests.
    cmd.env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config");
    cmd
}

/// Runs `toolgate call --json`; arguments too long for argv go through standard input.
fn call(ws: &Path, tool: &str, args: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut cmd = toolgate();
    cmd.args(["call", "--json", "--workspace"])
        .arg(ws)
        .args(["--tool", tool]);
    if args.len() > 64 * 1024 {
        cmd.args(["--args", "-"]).write_stdin(args.to_owned());
    } else {
        cmd.args(["--args", args]);
    }
    let output = cmd.args(extra).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let outcome = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    (
        output.status.code().unwrap_or(-1),
        outcome,
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn hostile_corpus_through_the_binary() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    for row in corpus() {
        let mut extra = vec![
            "--surface".to_owned(),
            row.surface.clone(),
            "--profile".to_owned(),
            row.profile.clone(),
        ];
        if let Some(config) = fx.config(&row.config) {
            extra.push("--config".to_owned());
            extra.push(config.display().to_string());
        }
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        // argv cannot carry a NUL byte; the corpus's NUL rows use JSON escapes or are library-only.
        if row.tool.contains('\0') {
            continue;
        }
        let before = fx.snapshot();
        let (code, outcome, stderr) = call(&ws, &row.tool, &row.args, &extra);
        assert_eq!(fx.snapshot(), before, "{}: the world changed", row.name);
        let name = &row.name;
        match row.status.as_str() {
            "rejected" => {
                assert_eq!(code, 2, "{name}: exit code; stderr {stderr}; {outcome}");
                assert_eq!(outcome["status"], "rejected", "{name}: {outcome}");
                assert_eq!(
                    outcome["rejection"]["stage"],
                    row.stage.clone().unwrap(),
                    "{name}: {outcome}"
                );
                assert_eq!(outcome["rejection"]["code"], row.code, "{name}: {outcome}");
                assert!(
                    outcome["evidence"]["durations_ns"].get("execute").is_none(),
                    "{name}: the executor ran: {outcome}"
                );
            }
            "failed" => {
                assert_eq!(code, 1, "{name}: exit code; {outcome}");
                assert_eq!(outcome["error"]["code"], row.code, "{name}: {outcome}");
            }
            other => panic!("{name}: unknown status {other}"),
        }
        // Nothing outside the workspace ever appears in an outcome.
        assert!(
            !outcome.to_string().contains("outside the workspace\\n"),
            "{name}: leaked"
        );
    }
}

#[test]
fn read_file_completes_with_digest_and_exit_zero() {
    let fx = Fixture::new();
    let (code, outcome, _) = call(
        &fx.workspace(),
        "read_file",
        r#"{"path": "a.txt", "offset": 2}"#,
        &[],
    );
    assert_eq!(code, 0, "{outcome}");
    assert_eq!(outcome["status"], "completed");
    let output = &outcome["output"];
    assert_eq!(output["content"], "beta\ngamma\n");
    assert_eq!(output["total_lines"], 3);
    let expected = format!("sha256:{}", sha256_hex(b"alpha\nbeta\ngamma\n"));
    assert_eq!(output["digest"], expected);
    let evidence = &outcome["evidence"];
    assert_eq!(evidence["surface"], "cli");
    assert_eq!(evidence["effect"], "read_only");
    assert_eq!(
        evidence["argument_names"],
        serde_json::json!(["offset", "path"])
    );
    assert!(
        !outcome
            .to_string()
            .contains(&fx.workspace().display().to_string()),
        "no absolute path"
    );
}

/// `toolgate call` without `--json`, as a person would type it.
fn as_typed(ws: &Path, tool: &str, args: &str) -> Command {
    let mut cmd = toolgate();
    cmd.args(["call", "--workspace"])
        .arg(ws)
        .args(["--tool", tool, "--args", args]);
    cmd
}

#[test]
fn human_output_and_hints() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    as_typed(&ws, "read_file", r#"{"path": "a.txt"}"#)
        .assert()
        .code(0)
        .stdout(predicates::str::contains("alpha"));
    as_typed(&ws, "read_file", r#"{"file_path": "a.txt"}"#)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean `path`?"));
    as_typed(&ws, "raed_file", "{}")
        .assert()
        .code(2)
        .stderr(predicates::str::contains("did you mean `read_file`?"));
}

/// Runs `toolgate call` without `--json`, as a person would: exit code, standard output,
/// standard error.
fn call_for_a_person(ws: &Path, tool: &str, args: &str) -> (i32, String, String) {
    let output = as_typed(ws, tool, args).output().unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).to_string(),
        String::from_utf8_lossy(&output.stderr).to_string(),
    )
}

#[test]
fn a_refusal_is_one_paragraph_for_a_person() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let (code, stdout, stderr) = call_for_a_person(&ws, "read_file", r#"{"file_path": "a.txt"}"#);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert_eq!(
        stderr,
        "toolgate: rejected at validate (unknown_argument): unknown argument `file_path`. \
         Hint: did you mean `path`?\n"
    );
    let (code, _, stderr) = call_for_a_person(&ws, "raed_file", "{}");
    assert_eq!(code, 2);
    assert_eq!(
        stderr,
        "toolgate: rejected at resolve (unknown_tool): no tool `raed_file` is registered. \
         Hint: did you mean `read_file`?\n"
    );
    // Without `--ask` nobody is asked, and the paragraph says so once, with what would allow
    // the call, and sends nobody to a console this command does not have.
    let (code, stdout, stderr) =
        call_for_a_person(&ws, "write_file", r#"{"path": "new.txt", "content": "x"}"#);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("asks nobody unless `--ask`"), "{stderr}");
    assert!(stderr.contains("cannot be approved here"), "{stderr}");
    assert!(
        !stderr.contains("approve it in toolgate's approval console"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("Hint:").count(), 1, "{stderr}");
    assert!(!ws.join("new.txt").exists());
}

#[test]
fn the_outcome_is_json_only_with_json() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let (code, stdout, _) = call_for_a_person(&ws, "read_file", r#"{"path": "a.txt"}"#);
    assert_eq!(code, 0);
    let printed: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
    assert!(printed.get("status").is_none(), "{stdout}");
    assert!(printed.get("evidence").is_none(), "{stdout}");
    let (code, outcome, _) = call(&ws, "read_file", r#"{"path": "a.txt"}"#, &[]);
    assert_eq!(code, 0);
    assert_eq!(outcome["status"], "completed");
    assert_eq!(outcome["output"]["content"], "alpha\nbeta\ngamma\n");
    assert!(outcome["evidence"]["call_id"].is_string(), "{outcome}");
    let (code, outcome, _) = call(&ws, "read_file", r#"{"pth": "a.txt"}"#, &[]);
    assert_eq!(code, 2);
    assert_eq!(outcome["rejection"]["code"], "unknown_argument");
    assert_eq!(outcome["rejection"]["hint"], "did you mean `path`?");
}

#[test]
fn completed_calls_print_for_a_person() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let (code, stdout, stderr) = call_for_a_person(&ws, "read_file", r#"{"path": "a.txt"}"#);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (0, "alpha\nbeta\ngamma\n", "")
    );
    let (code, stdout, stderr) = call_for_a_person(
        &ws,
        "read_file",
        r#"{"path": "a.txt", "offset": 2, "limit": 1}"#,
    );
    assert_eq!((code, stdout.as_str()), (0, "beta\n"));
    assert_eq!(stderr, "toolgate: a.txt lines 2-2 of 3\n");
    let (code, stdout, _) = call_for_a_person(&ws, "list_dir", "{}");
    assert_eq!(code, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(&"a.txt") && lines.contains(&"src/"),
        "{stdout}"
    );
    let (code, stdout, _) = call_for_a_person(&ws, "search_text", r#"{"pattern": "fn answer"}"#);
    assert_eq!(
        (code, stdout.as_str()),
        (0, "src/lib.rs:1:pub fn answer() -> u32 {\n")
    );
}

#[test]
fn the_readme_first_call_prints_the_first_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let first: String = readme.split_inclusive('\n').take(5).collect();
    let (code, stdout, _) =
        call_for_a_person(&root, "read_file", r#"{"path": "README.md", "limit": 5}"#);
    assert_eq!((code, stdout), (0, first));
}

#[test]
fn secrets_in_output_are_redacted_and_counted() {
    let fx = Fixture::new();
    // A value of a key's shape; a plain word (`API_KEY=changeme`) names a placeholder and
    // stays, as it does for gitleaks.
    fs::write(
        fx.workspace().join("settings.ini"),
        "API_KEY=q7Rz2Kp9wXv4Lm8T\n",
    )
    .unwrap();
    let (code, outcome, _) = call(
        &fx.workspace(),
        "read_file",
        r#"{"path": "settings.ini"}"#,
        &[],
    );
    assert_eq!(code, 0, "{outcome}");
    assert_eq!(outcome["output"]["content"], "API_KEY=[REDACTED]\n");
    assert_eq!(outcome["evidence"]["redactions"], 1);
}

#[test]
fn sensitive_files_and_the_configuration_in_use_are_denied_by_rule() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let (code, outcome, _) = call(&ws, "read_file", r#"{"path": ".env"}"#, &[]);
    assert_eq!(code, 2, "{outcome}");
    assert_eq!(
        outcome["rejection"]["policies"],
        json!(["sensitive-dotenv"])
    );
    // A configuration and policy file kept inside the workspace, under any name, are
    // toolgate's own configuration while they are in use.
    fs::create_dir_all(ws.join("ops")).unwrap();
    fs::write(ws.join("ops/gate.toml"), "policy = \"rules.cedar\"\n").unwrap();
    fs::write(ws.join("ops/rules.cedar"), "").unwrap();
    let config = ws.join("ops/gate.toml").display().to_string();
    for path in ["ops/gate.toml", "ops/rules.cedar"] {
        let args = json!({ "path": path }).to_string();
        let (code, outcome, _) = call(&ws, "read_file", &args, &["--config", &config]);
        assert_eq!(code, 2, "{path}: {outcome}");
        assert_eq!(
            outcome["rejection"]["policies"],
            json!(["sensitive-toolgate-config"]),
            "{path}"
        );
    }
    // Without that configuration in use they are ordinary files.
    let (code, outcome, _) = call(&ws, "read_file", r#"{"path": "ops/rules.cedar"}"#, &[]);
    assert_eq!(code, 0, "{outcome}");
}

/// A configuration beside the fixture's workspace in which every `read_file` call is asked
/// about.
fn approve_each_read(fx: &Fixture) -> std::path::PathBuf {
    let config = fx.dir.path().join("approve.toml");
    fs::write(
        &config,
        "[[tool]]\nname = \"read_file\"\napproval = \"each_call\"\n",
    )
    .unwrap();
    config
}

#[test]
fn approval_is_refused_without_a_terminal() {
    let fx = Fixture::new();
    let config = approve_each_read(&fx);
    let (code, outcome, _) = call(
        &fx.workspace(),
        "read_file",
        r#"{"path": "a.txt"}"#,
        &["--config", config.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{outcome}");
    assert_eq!(outcome["rejection"]["stage"], "approve");
    assert_eq!(outcome["rejection"]["code"], "approval_required");
    assert!(outcome["output"].is_null());
    // Without `--ask` nobody is asked: the message says why, the hint where approval could
    // be given instead, each once.
    let message = outcome["rejection"]["message"].as_str().unwrap();
    assert!(message.contains("`--ask`"), "{message}");
    assert!(!message.contains("approval console"), "{message}");
    let hint = outcome["rejection"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("`toolgate serve` with its approval console"),
        "{hint}"
    );
    // With `--ask` but no terminal, nobody is asked either.
    let (code, outcome, stderr) = call(
        &fx.workspace(),
        "read_file",
        r#"{"path": "a.txt"}"#,
        &["--config", config.to_str().unwrap(), "--ask"],
    );
    assert_eq!(code, 2, "{outcome}");
    assert_eq!(outcome["rejection"]["code"], "approval_required");
    assert!(
        outcome["rejection"]["message"]
            .as_str()
            .unwrap()
            .contains("not a terminal"),
        "{outcome}"
    );
    assert!(!stderr.contains("Allow this call once?"), "{stderr}");
}

#[test]
fn explain_prints_every_stage_and_runs_nothing() {
    let fx = Fixture::new();
    let output = toolgate()
        .args(["explain", "--json", "--workspace"])
        .arg(fx.workspace())
        .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let reports: Value = serde_json::from_slice(&output.stdout).unwrap();
    let stages: Vec<&str> = reports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        stages,
        [
            "normalize",
            "resolve",
            "validate",
            "classify",
            "authorize",
            "approve",
            "execute"
        ]
    );
    assert_eq!(reports[6]["decision"], "skip");
    toolgate()
        .args(["explain", "--workspace"])
        .arg(fx.workspace())
        .args([
            "--tool",
            "read_file",
            "--args",
            r#"{"path": "/etc/passwd"}"#,
        ])
        .assert()
        .code(2)
        .stdout(predicates::str::contains("path_outside_workspace"));
}

#[test]
fn tools_list_by_profile_and_candidates() {
    let fx = Fixture::new();
    let list = |args: &[&str]| {
        let output = toolgate()
            .current_dir(fx.workspace())
            .args(["tools", "list", "--json"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let value: Value = serde_json::from_slice(&output.stdout).unwrap();
        value["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                format!(
                    "{}:{}",
                    t["name"].as_str().unwrap(),
                    t["state"].as_str().unwrap()
                )
            })
            .collect::<Vec<_>>()
    };
    let inspect = [
        "read_file:visible",
        "list_dir:visible",
        "search_text:visible",
        "git_status:visible",
        "git_diff:visible",
    ];
    let change = [
        "write_file:visible",
        "edit_file:visible",
        "run_command:visible",
        "run_script:visible",
    ];
    assert_eq!(list(&[]), [&inspect[..], &change[..]].concat());
    // Sub-agents get inspection only.
    assert_eq!(list(&["--profile", "readonly"]), inspect);
    let restricted = fx.config("restricted").unwrap();
    let restricted = restricted.to_str().unwrap();
    let listed = list(&["--config", restricted, "--candidates"]);
    for state in [
        "read_file:visible",
        "list_dir:visible",
        "search_text:disabled",
    ] {
        assert!(listed.contains(&state.to_owned()), "{state} in {listed:?}");
    }
    toolgate()
        .args(["tools", "list", "--profile", "nope"])
        .assert()
        .code(3);
}

#[test]
fn configuration_errors_name_file_and_line_and_exit_three() {
    let fx = Fixture::new();
    let dir = fx.dir.path();
    let cases = [
        (
            "unknown-key.toml",
            "[[tool]]\nname = \"read_file\"\nenabeld = false\n",
            ":3: unknown field `enabeld`",
        ),
        (
            "unknown-tool.toml",
            "\n[[tool]]\nname = \"rm_rf\"\n",
            ":3: unknown tool `rm_rf`",
        ),
        (
            "duplicate.toml",
            "[[tool]]\nname = \"read_file\"\n[[tool]]\nname = \"read_file\"\n",
            ":4: tool `read_file` is configured twice",
        ),
        (
            "profile.toml",
            "[profiles.ops]\ntools = [\"read_file\",\n  \"nuke\"]\n",
            ":3: profile `ops` names unknown tool `nuke`",
        ),
        (
            "readonly.toml",
            "[[tool]]\nname = \"read_file\"\neffect = \"local_write\"\n",
            "cannot be in the `readonly` profile",
        ),
        (
            "missing-policy.toml",
            "policy = \"nope.cedar\"\n",
            ":1: cannot read policy file",
        ),
        // Checked by every command that loads the configuration, not only by `serve`.
        (
            "token-profile.toml",
            "[profiles.reviewer]\ntools = [\"read_file\"]\n\n[[serve.token]]\nenv = \"HOME\"\n\
             actor = \"ada\"\nprofile = \"reviewr\"\n",
            ":7: [[serve.token]] profile: unknown profile `reviewr`: did you mean `reviewer`? \
             profiles: default, readonly, reviewer",
        ),
        (
            "elicitation.toml",
            "[approval]\nelicitation = [\"nobody\"]\n",
            ":2: [approval] elicitation names unknown profile `nobody`; profiles: default, readonly",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.join(name);
        fs::write(&path, text).unwrap();
        toolgate()
            .args(["check", "--config"])
            .arg(&path)
            .assert()
            .code(3)
            .stderr(predicates::str::contains(if needle.starts_with(':') {
                format!("{name}{needle}")
            } else {
                needle.to_owned()
            }));
    }
    // A policy file that does not parse: file, line and reason.
    fs::write(
        dir.join("bad.cedar"),
        "permit (principal, action, resource);\n\nforbid (principal action, resource);\n",
    )
    .unwrap();
    fs::write(dir.join("bad-policy.toml"), "policy = \"bad.cedar\"\n").unwrap();
    toolgate()
        .args(["check", "--config"])
        .arg(dir.join("bad-policy.toml"))
        .assert()
        .code(3)
        .stderr(predicates::str::contains("bad.cedar:3:"));
    // The same error stops `call` before anything runs.
    let (code, outcome, stderr) = call(
        &fx.workspace(),
        "read_file",
        r#"{"path": "a.txt"}"#,
        &["--config", dir.join("bad-policy.toml").to_str().unwrap()],
    );
    assert_eq!((code, outcome), (3, Value::Null), "{stderr}");
}

#[test]
fn check_on_defaults_and_usage_errors() {
    toolgate()
        .arg("check")
        .assert()
        .code(0)
        .stdout(predicates::str::contains("configuration: <defaults>"))
        .stdout(predicates::str::contains(
            "profile readonly: read_file, list_dir, search_text",
        ));
    toolgate()
        .args(["call", "--tool", "read_file"])
        .assert()
        .code(3);
    toolgate().arg("frobnicate").assert().code(3);
    toolgate()
        .args([
            "call",
            "--workspace",
            "/nonexistent/dir",
            "--tool",
            "read_file",
        ])
        .assert()
        .code(3);
    toolgate()
        .args([
            "call",
            "--workspace",
            ".",
            "--tool",
            "read_file",
            "--surface",
            "telepathy",
        ])
        .assert()
        .code(3);
}

fn sha256_hex(bytes: &[u8]) -> String {
    toolgate_core::sha256_digest(bytes)
        .as_str()
        .trim_start_matches("sha256:")
        .to_owned()
}

#[test]
fn a_person_at_a_terminal_approves_or_refuses() {
    let fx = Fixture::new();
    let config = approve_each_read(&fx);
    let args = format!(
        "call --workspace {} --tool read_file --args '{{\"path\": \"a.txt\"}}' --config {}",
        fx.workspace().display(),
        config.display()
    );
    let (code, screen) = on_a_terminal(&args, "y\n");
    assert_eq!(code, 0, "{screen}");
    assert!(screen.contains("Allow this call once? [y/N]"), "{screen}");
    assert!(screen.contains("resources: path:a.txt"), "{screen}");
    assert!(screen.contains("alpha"), "{screen}");
    let (code, screen) = on_a_terminal(&args, "n\n");
    assert_eq!(code, 2, "{screen}");
    assert!(screen.contains("approval_denied"), "{screen}");
    assert!(!screen.contains("alpha"), "{screen}");
}

/// Issue 12: `script -qec "toolgate call …"` gave an agent with a shell a terminal to type `y`
/// into. Without `--ask`, an answer typed at a real terminal approves nothing.
#[test]
fn a_terminal_answer_approves_nothing_unless_the_prompt_was_asked_for() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = fx.dir.path().join("approve.toml");
    fs::write(
        &config,
        "[[tool]]\nname = \"read_file\"\napproval = \"each_call\"\n",
    )
    .unwrap();
    let rows = [
        ("read_file", r#"{"path": "a.txt"}"#),
        (
            "write_file",
            r#"{"path": "written.txt", "content": "by the agent\n"}"#,
        ),
        ("run_command", r#"{"argv": ["touch", "ran.txt"]}"#),
    ];
    for (tool, arguments) in rows {
        let args = format!(
            "call --json --workspace {} --tool {tool} --args '{arguments}' --config {}",
            ws.display(),
            config.display()
        );
        let before = fx.snapshot();
        for answer in ["y\n", "yes\n"] {
            let (code, screen) = typed_at_a_terminal(&args, answer);
            assert_eq!(code, 2, "{tool}: {screen}");
            assert!(screen.contains("\"approval_required\""), "{tool}: {screen}");
            assert!(
                !screen.contains("Allow this call once?"),
                "{tool}: {screen}"
            );
            assert!(
                screen.contains("`toolgate serve`") && screen.contains("approval console"),
                "{tool}: {screen}"
            );
            assert!(
                !screen.contains("alpha"),
                "{tool}: nothing was read: {screen}"
            );
            assert_eq!(fx.snapshot(), before, "{tool}: nothing ran or was written");
            for left in ["written.txt", "ran.txt"] {
                assert!(!ws.join(left).exists(), "{tool}: {left}");
            }
        }
    }
}

/// With `--ask`, the prompt shows each invisible or direction-changing character of the
/// arguments and the diff as its `<U+XXXX>` mark, and never prints the character itself.
#[test]
fn the_prompt_shows_invisible_characters_as_marks() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let content = r"admin = \u202efalse\u2066;\u200b\ufeff\u001b[2J\udb40\udc41\n";
    let args = format!(
        "call --json --workspace {} --tool write_file --args '{{\"path\": \"marked.txt\", \"content\": \"{content}\"}}'",
        ws.display(),
    );
    let (code, screen) = on_a_terminal(&args, "n\n");
    assert_eq!(code, 2, "{screen}");
    assert!(screen.contains("\"approval_denied\""), "{screen}");
    // The terminal ends its lines with `\r\n`.
    let screen = screen.replace("\r\n", "\n");
    let prompt = &screen[..screen.find("Allow this call once?").expect("asked")];
    // Each in the arguments and in the diff; the arguments' JSON writes escape as `\u001b`.
    for (mark, times) in [
        ("<U+202E>", 2),
        ("<U+2066>", 2),
        ("<U+200B>", 2),
        ("<U+FEFF>", 2),
        ("<U+E0041>", 2),
        ("<U+001B>", 1),
    ] {
        assert_eq!(prompt.matches(mark).count(), times, "{mark}: {prompt}");
    }
    assert!(
        !prompt.chars().any(toolgate_core::visible::is_invisible),
        "{prompt:?}"
    );
    assert!(prompt.contains("+admin = <U+202E>false"), "{prompt}");
    assert!(!ws.join("marked.txt").exists());
    // Allowed, the file holds the characters themselves: the marks are only how they are shown.
    let (code, screen) = on_a_terminal(&args, "y\n");
    assert_eq!(code, 0, "{screen}");
    assert_eq!(
        fs::read_to_string(ws.join("marked.txt")).unwrap(),
        "admin = \u{202E}false\u{2066};\u{200B}\u{FEFF}\u{1B}[2J\u{E0041}\n"
    );
}

/// Issue 36: with `--ask`, a script given to `sh` on standard input is in the prompt whole,
/// line by line as it will run, its invisible characters marked — not a byte count, and not
/// only as one escaped JSON string.
#[test]
fn the_prompt_shows_the_whole_stdin_a_command_reads() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let stdin = r"echo line-one > ran.txt\n# a comment that hides \u202e and \u200b\necho line-two >> ran.txt\n";
    let args = format!(
        "call --json --workspace {} --tool run_command --args '{{\"argv\": [\"sh\"], \"stdin\": \"{stdin}\"}}'",
        ws.display(),
    );
    for (answer, runs) in [("n\n", false), ("y\n", true)] {
        let (code, screen) = on_a_terminal(&args, answer);
        let screen = screen.replace("\r\n", "\n");
        let prompt = &screen[..screen.find("Allow this call once?").expect("asked")];
        assert!(
            prompt.contains(
                "\n  | echo line-one > ran.txt\n  | # a comment that hides <U+202E> and \
                 <U+200B>\n  | echo line-two >> ran.txt\n"
            ),
            "{prompt}"
        );
        assert!(
            prompt.contains("stdin, 84 bytes in 3 lines, all of it given to the program"),
            "{prompt}"
        );
        assert!(
            !prompt.chars().any(toolgate_core::visible::is_invisible),
            "{prompt:?}"
        );
        if runs {
            assert_eq!(code, 0, "{screen}");
            assert_eq!(
                fs::read_to_string(ws.join("ran.txt")).unwrap(),
                "line-one\nline-two\n"
            );
        } else {
            assert_eq!(code, 2, "{screen}");
            assert!(!ws.join("ran.txt").exists());
        }
    }
}

#[test]
fn the_user_configuration_applies_without_config_flag() {
    let fx = Fixture::new();
    let home = fx.dir.path().join("xdg");
    fs::create_dir_all(home.join("toolgate")).unwrap();
    fs::write(
        home.join("toolgate/toolgate.toml"),
        "[[tool]]\nname = \"read_file\"\nenabled = false\n",
    )
    .unwrap();
    let output = Command::from_std(home::toolgate())
        .env("XDG_CONFIG_HOME", &home)
        .args(["call", "--json", "--workspace"])
        .arg(fx.workspace())
        .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(outcome["rejection"]["code"], "disabled");
}

/// `tools list` and `check` start no process: an upstream whose command leaves a mark when it
/// starts has left none after them, and its admitted tool is listed from its pin, said to be
/// not started. `tools discover` does start it, and the mark appears, so the mark would show a
/// listing that started it.
#[test]
fn listing_and_checking_start_no_upstream() {
    let dir = tempfile::tempdir().unwrap();
    let marks = dir.path().join("marks");
    fs::create_dir(&marks).unwrap();
    let mark = marks.join("started");
    let descriptor = toolgate_core::Descriptor::new(
        "echo",
        "Echoes its text back.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}}),
    );
    let (digest, pinned) = toolgate_upstream::pin_of(&descriptor);
    let quoted = |text: &str| serde_json::to_string(text).unwrap();
    let script = format!("echo started >> '{}'; exec sleep 30", mark.display());
    let config = dir.path().join("toolgate.toml");
    fs::write(
        &config,
        format!(
            "[sandbox]\nmode = \"dangerous-unconfined\"\n\n\
             [[upstream]]\nname = \"marker\"\ncommand = [\"/bin/sh\", \"-c\", {script}]\n\
             startup_timeout_ms = 1000\n\n\
             [[upstream.tool]]\ntool = \"echo\"\neffect = \"read_only\"\ndigest = {digest}\npinned = {pinned}\n",
            script = quoted(&script),
            digest = quoted(&digest.to_string()),
            pinned = quoted(&pinned),
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let output = toolgate()
            .current_dir(dir.path())
            .args(args)
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(0), "{args:?}: {output:?}");
        String::from_utf8(output.stdout).unwrap()
    };

    let listed: Value = serde_json::from_str(&run(&["tools", "list", "--json"])).unwrap();
    let names: Vec<&str> = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"marker__echo"), "{names:?}");
    let candidates: Value =
        serde_json::from_str(&run(&["tools", "list", "--candidates", "--json"])).unwrap();
    let upstreams = &candidates["upstreams"];
    assert_eq!(upstreams["servers"][0]["name"], "marker", "{upstreams}");
    assert_eq!(upstreams["servers"][0]["started"], false, "{upstreams}");
    assert_eq!(
        upstreams["tools"],
        json!([{
            "name": "marker__echo", "upstream": "marker", "tool": "echo",
            "state": "admitted (upstream not started)", "hints": [],
            "digest": digest.to_string(),
        }])
    );
    let text = run(&["tools", "list", "--candidates"]);
    assert!(
        text.contains("upstream marker: not started: `toolgate tools list` starts nothing"),
        "{text}"
    );
    let checked = run(&["check"]);
    assert!(checked.contains("marker__echo"), "{checked}");
    assert!(
        checked
            .contains("upstream marker: not started; its admitted tools count as their pins say"),
        "{checked}"
    );
    assert!(checked.ends_with("ok\n"), "{checked}");
    // A process started by any of them would have written the mark by now: each waited for
    // nothing, and the shell writes before anything else.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(!mark.exists(), "a listing or check started the upstream");

    let discovered: Value = serde_json::from_str(&run(&["tools", "discover", "--json"])).unwrap();
    assert_eq!(discovered["servers"][0]["name"], "marker", "{discovered}");
    assert_eq!(discovered["servers"][0]["connected"], false, "{discovered}");
    assert!(mark.exists(), "`tools discover` did not start the upstream");
}

/// The top-level help says how an MCP client uses toolgate; each command offers only the flags
/// it obeys.
#[test]
fn help_names_serve_and_explain_offers_no_ask() {
    let help = toolgate().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("toolgate serve --workspace DIR"),
        "the top-level help says how a client starts toolgate:\n{help}"
    );
    let explain = toolgate().args(["explain", "--help"]).output().unwrap();
    let explain = String::from_utf8_lossy(&explain.stdout);
    assert!(explain.contains("--workspace"), "{explain}");
    assert!(!explain.contains("--ask"), "explain never asks:\n{explain}");
    toolgate()
        .args([
            "explain",
            "--ask",
            "--workspace",
            ".",
            "--tool",
            "read_file",
        ])
        .assert()
        .code(3)
        .stderr(predicates::str::contains("unexpected argument '--ask'"));
    let call = toolgate().args(["call", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&call.stdout).contains("--ask"));
}

/// JSONL is `audit export`'s only format, so it needs no flag; `--jsonl` still works.
#[test]
fn audit_export_is_jsonl_by_default() {
    let fx = Fixture::new();
    let state = fx.dir.path().join("state");
    toolgate()
        .env("XDG_STATE_HOME", &state)
        .args(["call", "--json", "--workspace"])
        .arg(fx.workspace())
        .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
        .assert()
        .code(0);
    let export = |flags: &[&str]| {
        let output = toolgate()
            .env("XDG_STATE_HOME", &state)
            .args(["audit", "export"])
            .args(flags)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    };
    let plain = export(&[]);
    let lines: Vec<Value> = plain
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{plain}");
    assert_eq!(lines[0]["call"]["tool"], "read_file", "{plain}");
    assert_eq!(export(&["--jsonl"]), plain);
}

/// `tools list` prints each tool's first sentence, wrapped to the terminal's width; the whole
/// description is in `--json`.
#[test]
fn tools_list_prints_first_sentences_within_the_width() {
    let output = toolgate()
        .env("COLUMNS", "80")
        .args(["tools", "list"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let text = String::from_utf8(output.stdout).unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 80, "wider than 80: {line:?}");
    }
    assert!(
        text.contains(
            "read_file      1.0   read_only     Read a UTF-8 text file in the workspace.\n"
        ),
        "{text}"
    );
    assert!(!text.contains("Use it to look at a file"), "{text}");
    // On a terminal without COLUMNS: the terminal's own width.
    let on_a_terminal = home::isolated(std::process::Command::new("script"))
        .args([
            "-qec",
            &format!(
                "stty cols 70 rows 40; {} tools list",
                support::clients::toolgate_bin()
            ),
            "/dev/null",
        ])
        .env_remove("COLUMNS")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("util-linux `script` runs");
    let text = String::from_utf8(on_a_terminal.stdout).unwrap();
    assert!(text.lines().count() > 9, "{text}");
    for line in text.lines() {
        assert!(
            line.trim_end_matches('\r').chars().count() <= 70,
            "wider than the terminal's 70 columns: {line:?}"
        );
    }
    // Without a terminal or COLUMNS: one line a tool, for a pipe.
    let piped = toolgate()
        .env_remove("COLUMNS")
        .args(["tools", "list"])
        .output()
        .unwrap();
    let piped = String::from_utf8(piped.stdout).unwrap();
    assert_eq!(piped.lines().count(), 9, "{piped}");
    assert!(piped.contains(
        "run_command    1.0   irreversible  Run one program with arguments in the workspace, \
         without a shell.\n"
    ));
}

/// A configuration error says what the key takes in words and guesses a misspelt key or value,
/// as a misspelt tool argument gets a guess.
#[test]
fn configuration_errors_say_what_a_key_takes_and_guess_misspellings() {
    let fx = Fixture::new();
    let dir = fx.dir.path();
    for (text, said) in [
        (
            "[limits]\nmax_argument_bytes = \"1MB\"\n",
            ":2: invalid type: `max_argument_bytes` takes a whole number of bytes, 0 or more, not \
             the string \"1MB\"",
        ),
        (
            "[approval]\ntimeout_secs = 1.5\n",
            ":2: invalid type: `timeout_secs` takes a whole number of seconds",
        ),
        (
            "[[tool]]\nname = \"read_file\"\nenabeld = false\n",
            ":3: unknown field `enabeld`: did you mean `enabled`?",
        ),
        (
            "[serve]\nmax_session = 4\n",
            ":2: unknown field `max_session`: did you mean `max_sessions`?",
        ),
        (
            "[sandbox]\nmode = \"enforced\"\n",
            ":2: unknown value `enforced`: did you mean `enforce`?",
        ),
        (
            "[[tool]]\nname = \"run_command\"\neffect = \"read-only\"\n",
            ":3: unknown value `read-only`: did you mean `read_only`?",
        ),
        (
            "[audit]\nsync = \"allways\"\n",
            ":2: unknown audit sync setting `allways`: did you mean `always`?",
        ),
        (
            "[[tool]]\nname = \"read_fil\"\n",
            ":2: unknown tool `read_fil`: did you mean `read_file`? known tools: `edit_file`,",
        ),
        (
            "[profiles.ops]\ntools = [\"read_file\",\n  \"serch_text\"]\n",
            ":3: profile `ops` names unknown tool `serch_text`: did you mean `search_text`?",
        ),
    ] {
        let path = dir.join("words.toml");
        fs::write(&path, text).unwrap();
        let output = toolgate()
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{text}");
        assert!(
            stderr.contains(&format!("words.toml{said}")),
            "{text}\n{stderr}"
        );
        for rust in ["usize", "u64", "variant"] {
            assert!(!stderr.contains(rust), "{text}\n{stderr}");
        }
    }
}

/// The README's quick start shows the build's progress (no `-q`), and puts `toolgate` on
/// `PATH` before the first `toolgate serve` a reader is asked to run.
#[test]
fn the_readme_builds_visibly_and_installs_before_serving() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    let step = readme
        .lines()
        .find(|l| l.starts_with("cargo run") && l.contains(" call "))
        .expect("the quick start's first command");
    assert!(
        !step.split_whitespace().any(|w| w == "-q" || w == "--quiet"),
        "{step}"
    );
    let install = readme
        .find("cargo install --path crates/toolgate")
        .expect("the README installs toolgate");
    let serve = readme.find("toolgate serve --workspace").unwrap();
    assert!(install < serve, "`toolgate serve` comes before the install");
}

/// docs/tools.md's table of builtin tools names every argument each tool's schema takes, and
/// its effect class, as `tools list --json` reports them.
#[test]
fn the_builtin_tools_table_matches_the_schemas() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let page = fs::read_to_string(root.join("docs/tools.md")).unwrap();
    let output = toolgate()
        .args(["tools", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&output.stdout).unwrap();
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 9, "{listed}");
    for tool in tools {
        let name = tool["name"].as_str().unwrap();
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}` |")))
            .unwrap_or_else(|| panic!("docs/tools.md has no row for `{name}`"));
        let cells: Vec<&str> = row.split(" | ").collect();
        let (arguments, effect) = (cells[1], cells[2]);
        assert_eq!(effect, format!("`{}`", tool["effect"].as_str().unwrap()));
        let properties = tool["inputSchema"]["properties"].as_object().unwrap();
        for argument in properties.keys() {
            assert!(
                arguments.contains(&format!("`{argument}")),
                "docs/tools.md's `{name}` row does not name `{argument}`: {arguments}"
            );
        }
    }
}
