//! `run_command` and `run_script` in a real pipeline: the hostile table
//! `tests/corpus/commands.jsonl`, what the person approving sees and what the approval binds,
//! changes between approval and execution (programs, the files arguments name, project files),
//! and real Cargo, npm and make projects.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]
#[path = "../../../tests/support/builtins.rs"]
mod builtins;
#[path = "../../../tests/support/procs.rs"]
mod procs;

use builtins::pipeline;
use procs::running;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolgate_core::*;

/// Allows every request once, as a person who always says yes would.
#[derive(Debug)]
struct Yes;

impl ApprovalBroker for Yes {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// Refuses everything, as a person who always says no would.
#[derive(Debug)]
struct No;

impl ApprovalBroker for No {
    fn ask(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Reject {
            reason: "not this".into(),
        }
    }
    fn can_allow(&self) -> bool {
        false
    }
}

type Meddle = Box<dyn Fn() + Send + Sync>;

/// Records each request, offers the widest scope the request allows, and may change the world
/// while "the person" looks at the request.
struct Recording {
    requests: Mutex<Vec<ApprovalRequest>>,
    meddle: Option<Meddle>,
}

impl std::fmt::Debug for Recording {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recording")
    }
}

impl Recording {
    fn new(meddle: Option<Meddle>) -> Arc<Recording> {
        Arc::new(Recording {
            requests: Mutex::new(Vec::new()),
            meddle,
        })
    }

    fn requests(&self) -> Vec<ApprovalRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ApprovalBroker for Recording {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.requests.lock().unwrap().push(request.clone());
        if let Some(meddle) = &self.meddle {
            meddle();
        }
        ApprovalDecision::AllowWorkspace
    }
}

fn yes() -> Arc<Yes> {
    Arc::new(Yes)
}

fn call(pipeline: &Pipeline, tool: &str, args: &Value) -> Outcome {
    pipeline.run(RawCall::text(tool, args.to_string(), Surface::Chat))
}

fn executable(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A temporary directory holding `ws/` (the workspace) and `outside/`.
struct World {
    dir: tempfile::TempDir,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::create_dir_all(ws.join("bin")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("a.txt"), "alpha\n").unwrap();
        fs::write(ws.join(".env"), "API_KEY=tok-123\n").unwrap();
        fs::write(ws.join("check.sh"), "echo checked\n").unwrap();
        fs::write(ws.join("Makefile"), "build:\n\t@echo made\n").unwrap();
        fs::write(outside.join("evil.mk"), "X := $(shell touch marker)\n").unwrap();
        executable(&ws.join("bin/hello.sh"), "#!/bin/sh\necho hello\n");
        // Named like one program, leading to another: the approval must show the other.
        std::os::unix::fs::symlink("/usr/bin/env", ws.join("bin/echo")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("dir_out")).unwrap();
        std::os::unix::fs::symlink("src", ws.join("src_link")).unwrap();
        executable(&outside.join("tool.sh"), "#!/bin/sh\ntouch marker\n");
        World { dir }
    }

    /// The workspace root, canonical.
    fn ws(&self) -> PathBuf {
        fs::canonicalize(self.dir.path().join("ws")).unwrap()
    }

    /// No `marker` anywhere; no process recorded in `pids` still running (the file is then
    /// removed for the next row).
    fn assert_unchanged(&self, name: &str, expect_pids: bool) {
        let mut stack = vec![self.dir.path().to_path_buf()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let entry = entry.unwrap();
                let kind = entry.file_type().unwrap();
                assert_ne!(entry.file_name(), "marker", "{name}: a marker was made");
                if kind.is_dir() {
                    stack.push(entry.path());
                }
            }
        }
        let pidfile = self.ws().join("pids");
        let pids: Vec<u32> = fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert_eq!(
            !pids.is_empty(),
            expect_pids,
            "{name}: pids recorded {pids:?}"
        );
        let alive: Vec<u32> = pids.into_iter().filter(|&p| running(p)).collect();
        assert!(alive.is_empty(), "{name}: still running: {alive:?}");
        let _ = fs::remove_file(pidfile);
    }
}

/// The arguments of a corpus row, with the `@` shorthands expanded.
fn corpus_args(args: &Value) -> Value {
    match args.as_str() {
        Some("@many") => json!({"argv": vec!["echo"; 300]}),
        Some("@long_item") => json!({"argv": ["echo", "a".repeat(20_000)]}),
        Some("@wide_item") => json!({"argv": ["echo", "é".repeat(9_000)]}),
        Some("@total") => json!({"argv": ["echo", "b".repeat(16_000), "b".repeat(16_000),
            "b".repeat(16_000), "b".repeat(16_000), "b".repeat(16_000)]}),
        Some(other) => panic!("unknown shorthand {other}"),
        None => args.clone(),
    }
}

fn strs(row: &Value, key: &str, ws: &str) -> Vec<String> {
    row.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|v| v.as_str().unwrap().replace("@ws", ws))
                .collect()
        })
        .unwrap_or_default()
}

fn check_row(row: &Value, pipelines: &[(&str, Pipeline)], ws: &str) {
    let name = row["name"].as_str().unwrap();
    let tool = row
        .get("tool")
        .and_then(Value::as_str)
        .unwrap_or("run_command");
    let profile = row
        .get("profile")
        .and_then(Value::as_str)
        .unwrap_or("default");
    let broker = row.get("broker").and_then(Value::as_str).unwrap_or("grant");
    let pipeline = &pipelines.iter().find(|(b, _)| *b == broker).unwrap().1;
    // `@ws` in an argument is the workspace root, as in `resources`.
    let args: Value =
        serde_json::from_str(&corpus_args(&row["args"]).to_string().replace("@ws", ws)).unwrap();
    let outcome =
        pipeline.run(RawCall::text(tool, args.to_string(), Surface::Chat).in_profile(profile));
    let code = row.get("code").and_then(Value::as_str);
    match row["expect"].as_str().unwrap() {
        "rejected" => {
            let rejection = outcome
                .rejection()
                .unwrap_or_else(|| panic!("{name}: not rejected: {outcome:?}"));
            assert_eq!(
                (rejection.stage().as_str(), rejection.code().as_str()),
                (row["stage"].as_str().unwrap(), code.unwrap()),
                "{name}: {rejection}"
            );
            assert!(
                !outcome.evidence().durations_ns.contains_key("execute"),
                "{name}: executed"
            );
        }
        "failed" => {
            assert_eq!(outcome.status(), Status::Failed, "{name}: {outcome:?}");
            let error = outcome.error().unwrap();
            assert_eq!(Some(error.code.as_str()), code, "{name}: {error:?}");
        }
        "completed" => {
            assert_eq!(outcome.status(), Status::Completed, "{name}: {outcome:?}");
            let output = outcome.output().unwrap();
            let stdout = output["stdout"].as_str().unwrap();
            if let Some(exit) = row.get("exit_code") {
                assert_eq!(&output["exit_code"], exit, "{name}: {output}");
            }
            if let Some(expected) = row.get("stdout").and_then(Value::as_str) {
                assert_eq!(stdout, expected.replace("@ws", ws), "{name}");
            }
            for fragment in strs(row, "stdout_contains", ws) {
                assert!(
                    stdout.contains(&fragment),
                    "{name}: {fragment} not in {stdout}"
                );
            }
            for fragment in strs(row, "stdout_lacks", ws) {
                assert!(
                    !stdout.contains(&fragment),
                    "{name}: {fragment} in {stdout}"
                );
            }
            for key in ["stdout_bytes", "stdout_elided"] {
                if let Some(expected) = row.get(key) {
                    assert_eq!(&output[key], expected, "{name}: {key}");
                }
            }
        }
        other => panic!("{name}: unknown expectation {other}"),
    }
    for unknown in strs(row, "unknowns", ws) {
        assert!(
            outcome.unknowns().contains(&unknown),
            "{name}: no unknown {unknown:?} in {:?}",
            outcome.unknowns()
        );
    }
    for resource in strs(row, "resources", ws) {
        assert!(
            outcome.evidence().resources.contains(&resource),
            "{name}: no resource {resource} in {:?}",
            outcome.evidence().resources
        );
    }
}

const CORPUS_CHILD: &str = "TOOLGATE_COMMANDS_CORPUS_CHILD";

/// The corpus runs in a child test process whose environment holds secrets and loader
/// variables, since this process cannot set its own environment without `unsafe`.
#[test]
fn hostile_command_corpus() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "corpus_in_a_secret_laden_environment",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CORPUS_CHILD, "1")
        .env("FAKE_API_TOKEN", "tok-123")
        .env("AWS_SECRET_ACCESS_KEY", "aws-456")
        .env("LD_PRELOAD", "/nonexistent/evil.so")
        .env("BASH_ENV", "/nonexistent/evil.sh")
        .env("GIT_CONFIG_COUNT", "1")
        // Were make to read these, it would make a marker.
        .env("MAKEFLAGS", "--eval=$(shell touch marker)")
        .env("MAKEFILES", "../outside/evil.mk")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("corpus rows passed"), "{stdout}\n{stderr}");
}

/// Runs only as `hostile_command_corpus`'s child; on its own it has nothing to do.
#[test]
fn corpus_in_a_secret_laden_environment() {
    if std::env::var_os(CORPUS_CHILD).is_none() {
        return;
    }
    assert_eq!(std::env::var("FAKE_API_TOKEN").unwrap(), "tok-123");
    let world = World::new();
    let ws = world.ws();
    let pipelines = [
        ("grant", pipeline(&ws, yes())),
        ("headless", pipeline(&ws, Arc::new(HeadlessBroker))),
        ("deny", pipeline(&ws, Arc::new(No))),
    ];
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/commands.jsonl");
    let text = fs::read_to_string(path).unwrap();
    let rows: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    assert!(rows.len() > 50, "the corpus is all there");
    let ws_text = ws.to_str().unwrap();
    for row in &rows {
        check_row(row, &pipelines, ws_text);
        let expect_pids = row.get("pids").and_then(Value::as_bool).unwrap_or(false);
        world.assert_unchanged(row["name"].as_str().unwrap(), expect_pids);
    }
    println!("{} corpus rows passed", rows.len());
}

fn canonical_program(name: &str) -> String {
    let env = toolgate_exec::scrub_env(toolgate_exec::utf8_env(std::env::vars_os()));
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    toolgate_exec::resolve_program(name, path, Path::new("/"))
        .unwrap()
        .display()
        .to_string()
}

#[test]
fn the_approval_shows_the_resolved_program_and_binds_the_arguments() {
    let world = World::new();
    let broker = Recording::new(None);
    let pipeline = pipeline(&world.ws(), broker.clone());
    for args in [
        json!({"argv": ["echo", "hi"]}),
        json!({"argv": ["echo", "hi there"]}),
        json!({"argv": ["echo", "hi"]}),
        json!({"argv": ["echo", "hi"], "cwd": "src"}),
    ] {
        let outcome = call(&pipeline, "run_command", &args);
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    }
    let requests = broker.requests();
    // Every call asked, even the repeated one: nothing is remembered for commands.
    assert_eq!(requests.len(), 4);
    let first = &requests[0];
    let first_resources = spelled(&first.resources);
    assert_eq!(
        first_resources[..3],
        ["program:/usr/bin/echo", "cwd:.", "network:none"]
    );
    // The sandbox the command gets is bound too: landlock+seccomp (and a mount namespace
    // where the machine allows one) with this kernel's abi.
    assert!(
        first_resources[3].starts_with("sandbox:landlock+seccomp")
            && first_resources[3].contains(":abi"),
        "{first_resources:?}"
    );
    assert_eq!(first.effect, EffectClass::Irreversible);
    assert_eq!(first.scope_allowed, GrantScope::Once);
    let preview = first.preview.as_deref().unwrap();
    assert!(preview.contains("program: /usr/bin/echo"), "{preview}");
    assert!(preview.contains("argv[0]: \"echo\""), "{preview}");
    assert!(preview.contains("argv[1]: \"hi\""), "{preview}");
    assert!(preview.contains("no shell"), "{preview}");
    assert!(preview.contains("cwd: . (in the workspace)"), "{preview}");
    assert!(preview.contains("\nnetwork: none"), "{preview}");
    assert!(preview.contains("\nsandbox: landlock+seccomp"), "{preview}");
    assert!(
        preview.contains("environment (names only): ") && preview.contains("PATH"),
        "{preview}"
    );
    let path_value = std::env::var("PATH").unwrap();
    assert!(
        !preview.contains(&path_value),
        "environment values are not shown"
    );
    // A changed argument or directory is another operation; the same one is the same digest.
    assert_ne!(requests[1].digest, first.digest);
    assert_eq!(requests[2].digest, first.digest);
    assert_ne!(requests[3].digest, first.digest);
    assert_eq!(
        spelled(&requests[3].resources)[..2],
        ["program:/usr/bin/echo", "cwd:src"]
    );
}

#[test]
fn the_result_has_every_field_and_the_canonical_argv() {
    let world = World::new();
    let pipeline = pipeline(&world.ws(), yes());
    let outcome = call(
        &pipeline,
        "run_command",
        &json!({"argv": ["sh", "-c", "echo out; echo err >&2; exit 2"]}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    let mut keys: Vec<&str> = output
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "argv_resolved",
            "cancelled",
            "cwd",
            "duration_ms",
            "exit_code",
            "network",
            "sandbox",
            "signal",
            "stderr",
            "stderr_bytes",
            "stderr_elided",
            "stdout",
            "stdout_bytes",
            "stdout_elided",
            "timed_out",
        ]
    );
    assert_eq!(
        output["argv_resolved"],
        json!([
            canonical_program("sh"),
            "-c",
            "echo out; echo err >&2; exit 2"
        ])
    );
    assert_eq!(
        (&output["exit_code"], &output["signal"]),
        (&json!(2), &Value::Null)
    );
    assert_eq!(
        (&output["stdout"], &output["stderr"]),
        (&json!("out\n"), &json!("err\n"))
    );
    assert_eq!(
        (&output["stdout_bytes"], &output["stdout_elided"]),
        (&json!(4), &json!(0))
    );
    assert_eq!(output["cwd"], ".");
    assert!(outcome.unknowns().is_empty());
}

#[test]
fn a_program_changed_after_approval_does_not_run() {
    let world = World::new();
    let ws = world.ws();
    // A link re-pointed while the person looks at the request.
    std::os::unix::fs::symlink("/usr/bin/true", ws.join("bin/tool")).unwrap();
    let link = ws.join("bin/tool");
    let repoint: Meddle = Box::new(move || {
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink("/usr/bin/false", &link).unwrap();
    });
    let broker = Recording::new(Some(repoint));
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_command",
        &json!({"argv": ["./bin/tool"]}),
    );
    assert_eq!(
        broker.requests()[0].resources[0].to_string(),
        "program:/usr/bin/true"
    );
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    let error = outcome.error().unwrap();
    assert_eq!(error.code, "program_changed", "{error:?}");
    assert!(
        error.message.contains("/usr/bin/false"),
        "{}",
        error.message
    );

    // A script inside the workspace rewritten while the person looks at it.
    let script = ws.join("bin/hello.sh");
    let rewrite: Meddle = Box::new(move || {
        fs::write(&script, "#!/bin/sh\ntouch marker\n").unwrap();
    });
    let broker = Recording::new(Some(rewrite));
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_command",
        &json!({"argv": ["bin/hello.sh"]}),
    );
    let request = &broker.requests()[0];
    assert_eq!(request.resources[0].to_string(), "program:bin/hello.sh");
    assert!(
        request
            .preview
            .as_deref()
            .unwrap()
            .contains(&format!("program: {}/bin/hello.sh", ws.display()))
    );
    assert_eq!(outcome.error().unwrap().code, "program_changed");
    world.assert_unchanged("rewritten script", false);
}

#[test]
fn a_working_directory_swapped_for_a_link_out_is_not_entered() {
    let world = World::new();
    let ws = world.ws();
    let outside = world.dir.path().join("outside");
    let src = ws.join("src");
    let swap: Meddle = Box::new(move || {
        fs::remove_dir_all(&src).unwrap();
        std::os::unix::fs::symlink(&outside, &src).unwrap();
    });
    let broker = Recording::new(Some(swap));
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_command",
        &json!({"argv": ["touch", "marker"], "cwd": "src"}),
    );
    assert_eq!(broker.requests().len(), 1);
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    world.assert_unchanged("swapped cwd", false);
}

#[test]
fn cancelling_kills_the_command() {
    let world = World::new();
    let pipeline = pipeline(&world.ws(), yes());
    let cancelled = Cancel::new();
    let flag = cancelled.clone();
    // Cancelled once the command has started its child and noted it, so that what is
    // cancelled is a running tree; cancelled at the deadline regardless, so the call ends.
    let pids = world.ws().join("pids");
    let setter = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(20);
        let noted = || fs::read_to_string(&pids).is_ok_and(|t| t.ends_with('\n'));
        while !noted() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        flag.cancel();
        noted()
    });
    let raw = RawCall::text(
        "run_command",
        json!({"argv": ["sh", "-c", "sleep 100 & echo $! >> pids; wait"]}).to_string(),
        Surface::Chat,
    );
    let outcome = pipeline.run_cancellable(raw, cancelled);
    assert!(setter.join().unwrap(), "the command never noted its child");
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    assert_eq!(outcome.error().unwrap().code, "cancelled");
    assert!(
        outcome
            .unknowns()
            .contains(&"killed on cancellation: side effects unknown".to_owned())
    );
    world.assert_unchanged("cancelled", true);
}

#[test]
fn an_npm_project_runs_its_own_test_script() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(
        ws.join("package.json"),
        r#"{"name": "tiny", "version": "1.0.0", "scripts": {"test": "node -e \"console.log('npm test ran')\""}}"#,
    )
    .unwrap();
    fs::write(ws.join(".npmrc"), "update-notifier=false\nfund=false\n").unwrap();
    let broker = Recording::new(None);
    let pipeline = pipeline(ws, broker.clone());
    let outcome = call(&pipeline, "run_script", &json!({"script": "test"}));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    assert_eq!(output["exit_code"], 0, "{output}");
    assert!(
        output["stdout"].as_str().unwrap().contains("npm test ran"),
        "{output}"
    );
    let request = &broker.requests()[0];
    let preview = request.preview.as_deref().unwrap();
    assert!(
        preview.contains("package.json script `test`") && preview.contains("console.log"),
        "{preview}"
    );
    let resources = spelled(&request.resources);
    assert!(
        resources.contains(&"script:test".to_owned())
            && resources.contains(&"source:package.json".to_owned()),
        "{resources:?}"
    );
    // npm itself is not run: the script's text is, by the shell npm would start.
    assert_eq!(
        resources[0],
        format!("program:{}", canonical_program("/bin/sh"))
    );
    assert!(
        preview.contains("npm_lifecycle_event=\"test\""),
        "{preview}"
    );

    // A script the project does not define is refused before anyone is asked.
    let outcome = call(&pipeline, "run_script", &json!({"script": "lint"}));
    let rejection = outcome.rejection().unwrap();
    assert_eq!(
        (rejection.stage(), rejection.code()),
        (Stage::Validate, RejectCode::ConstraintViolation)
    );
    let hint = rejection.hint().unwrap_or_default();
    assert!(
        rejection.message().contains("`lint`")
            && hint.contains("`test` (package.json: `/bin/sh -c node -e"),
        "{rejection:?} {hint}"
    );
    assert_eq!(broker.requests().len(), 1);
}

#[test]
fn a_project_file_changed_after_approval_does_not_run() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let manifest = ws.join("package.json");
    fs::write(&manifest, r#"{"scripts": {"test": "node -e 0"}}"#).unwrap();
    let swap: Meddle = Box::new(move || {
        fs::write(&manifest, r#"{"scripts": {"test": "touch marker"}}"#).unwrap();
    });
    let outcome = call(
        &pipeline(&ws, Recording::new(Some(swap))),
        "run_script",
        &json!({"script": "test"}),
    );
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    assert_eq!(outcome.error().unwrap().code, "script_changed");
    assert!(!ws.join("marker").exists());
}

#[test]
fn a_cargo_project_builds_and_tests_through_run_script() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    fs::write(
        ws.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    fs::create_dir(ws.join("src")).unwrap();
    fs::write(
        ws.join("src/main.rs"),
        "fn main() { println!(\"tiny\"); }\n#[test]\nfn works() { assert_eq!(1 + 1, 2); }\n",
    )
    .unwrap();
    let broker = Recording::new(None);
    let pipeline = pipeline(ws, broker.clone());
    // The scrubbed environment drops CARGO_TARGET_DIR, so the build lands in the project.
    let outcome = call(&pipeline, "run_script", &json!({"script": "build"}));
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    assert_eq!(output["exit_code"], 0, "{output}");
    assert!(ws.join("target/debug/tiny").exists(), "{output}");
    let outcome = call(&pipeline, "run_script", &json!({"script": "test"}));
    let output = outcome.output().unwrap();
    assert_eq!(output["exit_code"], 0, "{output}");
    assert!(
        output["stdout"]
            .as_str()
            .unwrap()
            .contains("test works ... ok"),
        "{output}"
    );
    let request = &broker.requests()[0];
    let preview = request.preview.as_deref().unwrap();
    assert!(
        preview.contains("run_script `build`: Cargo.toml, so `cargo build`")
            && preview.contains("argv[0]: \"cargo\"")
            && preview.contains("argv[1]: \"build\""),
        "{preview}"
    );
    assert!(spelled(&request.resources).contains(&"source:Cargo.toml".to_owned()));
}

#[test]
fn files_named_by_arguments_are_bound_and_rechecked_before_the_spawn() {
    let world = World::new();
    let ws = world.ws();
    fs::write(ws.join("check.sh"), "echo checked\n").unwrap();
    fs::write(ws.join("src/job.py"), "print('job')\n").unwrap();

    // Unchanged, the call runs; the preview names the bound file and its digest, and the
    // digest of the same contents is the same approval.
    let broker = Recording::new(None);
    let pipeline = pipeline(&ws, broker.clone());
    let args = json!({"argv": ["sh", "check.sh", "src", "/etc/hostname", "--job=src/job.py"]});
    let outcome = call(&pipeline, "run_command", &args);
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let request = &broker.requests()[0];
    let preview = request.preview.as_deref().unwrap();
    let digest = toolgate_core::sha256_digest(b"echo checked\n");
    for fragment in [
        format!("    check.sh ({digest})"),
        "    src/job.py (sha256:".to_owned(),
        "argv[2] \"src\": `src` is a directory, not a regular file, so not bound".to_owned(),
        "argv[3] \"/etc/hostname\": outside the workspace, so not bound".to_owned(),
    ] {
        assert!(preview.contains(&fragment), "{fragment} not in {preview}");
    }
    let same = call(&pipeline, "run_command", &args);
    assert_eq!(same.status(), Status::Completed);
    assert_eq!(broker.requests()[1].digest, request.digest);
    fs::write(ws.join("check.sh"), "echo checked again\n").unwrap();
    call(&pipeline, "run_command", &args);
    assert_ne!(
        broker.requests()[2].digest,
        request.digest,
        "the contents are bound"
    );

    // Changed while the person looks: refused, nothing ran.
    for (argv, file, cwd) in [
        (json!(["sh", "check.sh"]), "check.sh", None),
        (
            json!(["python3", "../src/job.py"]),
            "src/job.py",
            Some("bin"),
        ),
        (json!(["sh", "later.sh"]), "later.sh", None),
    ] {
        let path = ws.join(file);
        let rewrite: Meddle = Box::new(move || {
            fs::write(&path, "touch marker\n").unwrap();
        });
        let mut args = json!({"argv": argv});
        if let Some(cwd) = cwd {
            args["cwd"] = json!(cwd);
        }
        let outcome = call(&pipeline_with(&ws, rewrite), "run_command", &args);
        assert_eq!(outcome.status(), Status::Failed, "{file}: {outcome:?}");
        let error = outcome.error().unwrap();
        assert_eq!(error.code, "script_changed", "{file}: {error:?}");
        assert!(error.message.contains(file), "{}", error.message);
        world.assert_unchanged(file, false);
        let _ = fs::remove_file(ws.join("later.sh"));
    }
}

#[test]
fn past_the_limits_arguments_are_named_as_not_bound() {
    let world = World::new();
    let ws = world.ws();
    let mut argv = vec!["cat".to_owned()];
    // 16 files are bound; the 17th is named as not bound.
    for i in 0..=16 {
        let name = format!("f{i:02}.txt");
        fs::write(ws.join(&name), format!("{i}\n")).unwrap();
        argv.push(name);
    }
    fs::write(ws.join("big.txt"), vec![b'x'; 1024 * 1024 + 1]).unwrap();
    argv.push("big.txt".to_owned());
    let broker = Recording::new(None);
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_command",
        &json!({"argv": argv}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let preview = broker.requests()[0].preview.clone().unwrap();
    assert!(preview.contains("    f15.txt (sha256:"), "{preview}");
    assert!(
        preview.contains("argv[17] \"f16.txt\": `f16.txt` is past the first 16 files"),
        "{preview}"
    );
    assert!(
        preview.contains("`big.txt` is 1048577 bytes, more than the 1048576 bound"),
        "{preview}"
    );
}

fn pipeline_with(ws: &Path, meddle: Meddle) -> Pipeline {
    pipeline(ws, Recording::new(Some(meddle)))
}

#[test]
fn a_make_target_shows_its_rules_and_an_unreliable_makefile_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    fs::write(
        ws.join("Makefile"),
        "test: build\n\techo testing\nbuild:\n\techo building\n",
    )
    .unwrap();
    let broker = Recording::new(None);
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_script",
        &json!({"script": "test"}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    assert_eq!(
        output["stdout"],
        "echo building\nbuilding\necho testing\ntesting\n"
    );
    let preview = broker.requests()[0].preview.clone().unwrap();
    assert!(
        preview.find("echo building").unwrap() < preview.find("echo testing").unwrap(),
        "{preview}"
    );

    // A Makefile that uses SHELL is refused before anyone is asked, with its line.
    fs::write(ws.join("Makefile"), "test:\n\techo hi\nSHELL = ./x.sh\n").unwrap();
    let outcome = call(
        &pipeline(&ws, broker.clone()),
        "run_script",
        &json!({"script": "build"}),
    );
    let rejection = outcome.rejection().unwrap();
    assert_eq!(rejection.code(), RejectCode::ConstraintViolation);
    assert!(
        rejection
            .message()
            .contains("`Makefile` line 3: an assignment to `SHELL`"),
        "{}",
        rejection.message()
    );
    assert_eq!(broker.requests().len(), 1);
}

#[test]
fn npm_pre_and_post_scripts_are_steps_and_each_is_rechecked() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().to_path_buf();
    let manifest = ws.join("package.json");
    fs::write(
        &manifest,
        r#"{"name": "tiny", "scripts": {"pretest": "echo pre", "test": "echo main", "posttest": "echo post"}}"#,
    )
    .unwrap();
    let outcome = call(
        &pipeline(&ws, yes()),
        "run_script",
        &json!({"script": "test"}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    assert_eq!(output["stdout"], "pre\nmain\npost\n");
    let steps: Vec<&str> = output["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(steps, ["pretest", "test", "posttest"]);

    // The pretest step rewrites package.json: the main step is not run unseen.
    fs::write(
        &manifest,
        r#"{"name": "tiny", "scripts": {"pretest": "echo '{\"scripts\": {\"pretest\": \"true\", \"test\": \"touch marker\"}}' > package.json", "test": "echo main"}}"#,
    )
    .unwrap();
    let outcome = call(
        &pipeline(&ws, yes()),
        "run_script",
        &json!({"script": "test"}),
    );
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    assert_eq!(outcome.error().unwrap().code, "script_changed");
    assert!(!ws.join("marker").exists());
}

/// Resources as an approval shows them, `kind:value`.
fn spelled(resources: &[Resource]) -> Vec<String> {
    resources.iter().map(ToString::to_string).collect()
}
