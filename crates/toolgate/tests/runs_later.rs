//! Files that another program runs later (git's own files, agent clients' configuration,
//! environment loaders, package managers' configuration, startup files), through the real
//! binary: what an approved command changes there is put back and fails the call, in every
//! spelling of `tests/corpus/runs_later.jsonl`, on the mount-namespace tier and without it;
//! the git the user runs next, outside toolgate, runs nothing the command left. The write
//! tools are refused them by named rules, and no standing grant covers them. What must keep
//! working: an approved `git commit`, and a change the person approved by name.
//!
//! Every command runs through `toolgate serve --http`, called by the Python MCP SDK, allowed
//! once through the console's HTTP API as a person's browser would.

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
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use clients::{python, quoted, repo_read, root, system_program, toolgate_bin};
use served::Served;
use support::{clients, fixture, home, served};

/// The paths of the fixture an attack aims at, each listed with everything beneath it.
const WATCHED: &[&str] = &[
    ".git/config",
    ".git/hooks",
    ".git/commondir",
    ".git/objects/info/alternates",
    ".git/info/attributes",
    ".git/modules/lib/config",
    ".git/modules/lib/hooks",
    "lib/.git",
    "nohooks/.git/config",
    "nohooks/.git/hooks",
    "sub/.git",
    ".claude",
    ".mcp.json",
    "app/.mcp.json",
    "app/mise.toml",
    ".vscode",
    ".codex",
    ".cursor",
    ".envrc",
    ".cargo/config.toml",
    ".npmrc",
    ".bashrc",
    ".gitconfig",
    ".config/git",
    ".profile",
    "inc.cfg",
    "tools/hooks",
    "scripts/f.sh",
    "scripts/fetch.sh",
    "tools/iof.sh",
    "tools/mod.sh",
    "wt/.git",
    "store/wt.git/config",
    "store/wt.git/hooks",
];

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args([
            "-c",
            "protocol.file.allow=always",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

/// A directory for one test under `CARGO_TARGET_TMPDIR`, which the sandbox does not deny as
/// it denies `/tmp`.
fn base() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("runs-later-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap()
}

/// A workspace that is also a home directory: a repository with a submodule, a nested
/// repository without hooks, agent configuration and startup files; `tools/evil.sh` leaves
/// `canary` beside the workspace when anything runs it.
struct Layout {
    _base: tempfile::TempDir,
    ws: PathBuf,
    home: PathBuf,
    state: PathBuf,
    canary: PathBuf,
    evil: PathBuf,
}

fn layout() -> Layout {
    let base = base();
    let dir = base.path().canonicalize().unwrap();
    let (ws, home, state) = (dir.join("ws"), dir.join("home"), dir.join("state"));
    for d in [&ws, &home, &state, &dir.join("upstream-lib")] {
        fs::create_dir_all(d).unwrap();
    }
    let canary = dir.join("canary");
    let lib = dir.join("upstream-lib");
    git(&lib, &["init", "-q"]);
    fs::write(lib.join("lib.txt"), "lib\n").unwrap();
    git(&lib, &["add", "."]);
    git(&lib, &["commit", "-q", "-m", "lib"]);

    git(&ws, &["init", "-q"]);
    // Files the repository's own configuration names, which git reads or runs later: an
    // include beside the repository (absent: git skips it until someone makes it), a hooks
    // directory of the project's (absent too), a filter's program, and the programs of two
    // `ext::` URLs, a remote's and one an `insteadOf` puts in place of another (absent).
    for (key, value) in [
        ("include.path", "../inc.cfg"),
        ("core.hooksPath", "tools/hooks"),
        ("filter.x.clean", "./scripts/f.sh"),
        ("remote.up.url", "ext::sh ./scripts/fetch.sh %S"),
        ("url.ext::tools/iof.sh.insteadOf", "https://iof.example/"),
    ] {
        git(&ws, &["config", key, value]);
    }
    fs::create_dir_all(ws.join("scripts")).unwrap();
    fs::write(ws.join("scripts/f.sh"), "#!/bin/sh\ncat\n").unwrap();
    fs::set_permissions(ws.join("scripts/f.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir_all(ws.join("tools")).unwrap();
    let evil = ws.join("tools/evil.sh");
    fs::write(
        &evil,
        format!("#!/bin/sh\necho ran >> '{}'\n", canary.display()),
    )
    .unwrap();
    fs::set_permissions(&evil, fs::Permissions::from_mode(0o755)).unwrap();
    fs::write(ws.join("README.md"), "# project\n").unwrap();
    fs::create_dir_all(ws.join(".claude")).unwrap();
    fs::write(ws.join(".claude/settings.json"), "{}\n").unwrap();
    fs::create_dir_all(ws.join("app")).unwrap();
    fs::write(ws.join("app/main.py"), "print('app')\n").unwrap();
    fs::write(ws.join(".bashrc"), "# bashrc\n").unwrap();
    fs::write(ws.join(".profile"), "# profile\n").unwrap();
    fs::write(ws.join(".gitconfig"), "[user]\n\tname = me\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-q", "-m", "first"]);
    git(
        &ws,
        &["submodule", "add", "-q", lib.to_str().unwrap(), "lib"],
    );
    // A submodule whose `.gitmodules` URL is an `ext::` one, its program absent.
    git(
        &ws,
        &[
            "config",
            "-f",
            ".gitmodules",
            "submodule.extmod.url",
            "ext::sh tools/mod.sh",
        ],
    );
    git(&ws, &["add", ".gitmodules"]);
    git(&ws, &["commit", "-q", "-m", "lib"]);
    // A repository whose git directory lies elsewhere in the workspace, named by its `.git`
    // file.
    fs::create_dir_all(ws.join("store")).unwrap();
    git(
        &ws,
        &["init", "-q", "--separate-git-dir", "store/wt.git", "wt"],
    );
    git(&ws, &["init", "-q", "nohooks"]);
    fs::remove_dir_all(ws.join("nohooks/.git/hooks")).unwrap();
    git(
        &ws.join("nohooks"),
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    Layout {
        _base: base,
        ws,
        home,
        state,
        canary,
        evil,
    }
}

/// Every watched path with its kind, mode and contents, links not followed.
fn watched(ws: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for path in WATCHED {
        let full = ws.join(path);
        let Ok(meta) = fs::symlink_metadata(&full) else {
            out.push(((*path).to_owned(), "absent".to_owned()));
            continue;
        };
        out.push(((*path).to_owned(), describe(&full, &meta)));
        if meta.is_dir() {
            for (name, what) in fixture::tree(&full, &describe) {
                out.push((format!("{path}/{name}"), what));
            }
        }
    }
    out
}

fn describe(path: &Path, meta: &fs::Metadata) -> String {
    let mode = meta.permissions().mode() & 0o7777;
    if meta.is_symlink() {
        format!("link {}", fs::read_link(path).unwrap().display())
    } else if meta.is_dir() {
        format!("dir {mode:o}")
    } else {
        format!(
            "file {mode:o} {:?}",
            String::from_utf8_lossy(&fs::read(path).unwrap())
        )
    }
}

/// What the user does next, outside toolgate, with the workspace as home and the XDG
/// directories beneath it (not the user's own, whose git configuration git would read too):
/// git in each repository, a commit, an interactive shell. Nothing here may run `evil.sh`.
fn the_user_goes_on(layout: &Layout) {
    let ws = &layout.ws;
    let mut dirs = vec![
        ws.clone(),
        ws.join("lib"),
        ws.join("nohooks"),
        ws.join("app"),
    ];
    for extra in ["sub", "wt"] {
        if ws.join(extra).is_dir() {
            dirs.push(ws.join(extra));
        }
    }
    for dir in &dirs {
        for args in [
            vec!["status"],
            vec![
                "-c",
                "user.name=u",
                "-c",
                "user.email=u@example.com",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "next",
            ],
            // The remotes whose `ext::` URLs run a program, where the user allows `ext`.
            vec!["-c", "protocol.ext.allow=always", "ls-remote", "up"],
            vec![
                "-c",
                "protocol.ext.allow=always",
                "ls-remote",
                "https://iof.example/",
            ],
        ] {
            // Whether git succeeds is not the point; whether it runs the command's programs is.
            let _ = home::isolated_at(Command::new("git"), ws)
                .args(&args)
                .current_dir(dir)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .stdin(Stdio::null())
                .output()
                .unwrap();
        }
    }
    let _ = home::isolated_at(Command::new("bash"), ws)
        .args(["-i", "-c", "true"])
        .current_dir(ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
}

struct Row {
    name: String,
    python: String,
    changes: Option<String>,
    new: bool,
}

fn rows() -> Vec<Row> {
    let text = fs::read_to_string(root().join("tests/corpus/runs_later.jsonl")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("//"))
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            Row {
                name: row["name"].as_str().unwrap().to_owned(),
                python: row["python"].as_str().unwrap().to_owned(),
                changes: row.get("changes").map(|c| c.as_str().unwrap().to_owned()),
                new: row.get("new").is_some_and(|n| n.as_bool().unwrap()),
            }
        })
        .collect()
}

/// Allows each of `count` calls once as they come up, checking what the person sees.
fn allow_each(served: &Served, count: usize) {
    served.decide_each(count, Duration::from_secs(300), |request, _| {
        let preview = request["preview"].as_str().unwrap();
        assert!(
            preview.contains("files that run later"),
            "the preview says what happens to files that run later: {preview}"
        );
        json!({"decision": "allow_once"}).to_string()
    });
}

/// Runs every row as an approved command on `served`, then checks that nothing watched
/// changed and that the user's next git and shell run nothing.
fn every_row_is_put_back(layout: &Layout, served: &Served, mounts: bool) {
    let before = watched(&layout.ws);
    let python = system_program("python3");
    let rows = rows();
    assert!(rows.len() >= 20, "only {} rows", rows.len());
    let steps: Vec<Value> = rows
        .iter()
        .map(|row| {
            let source = row
                .python
                .replace("{evil}", &layout.evil.display().to_string());
            json!({"op": "call", "tool": "run_command",
                "arguments": {"argv": [python, "-c", source], "timeout_ms": 60_000}})
        })
        .collect();
    let client = served.client(json!(steps));
    allow_each(served, rows.len());
    let results = client.steps();
    let mut failures = Vec::new();
    for (row, result) in rows.iter().zip(&results) {
        let code = result["structured"]["error"]["code"].as_str().unwrap_or("");
        let message = result["structured"]["error"]["message"]
            .as_str()
            .unwrap_or("");
        let refused = result["isError"] == true && code == "runs_later_changed";
        let ran_clean = result["isError"] == false;
        if !refused && !ran_clean {
            failures.push(format!("{}: neither refused nor clean: {result}", row.name));
        }
        if row.new && !refused {
            failures.push(format!(
                "{}: a new file that runs later was not refused: {result}",
                row.name
            ));
        }
        if !mounts && row.changes.is_some() && !refused {
            failures.push(format!(
                "{}: without the mount tier the change must be refused: {result}",
                row.name
            ));
        }
        if let (true, Some(path)) = (refused, &row.changes)
            && !message.contains(&format!("`{path}"))
        {
            failures.push(format!(
                "{}: the refusal does not name `{path}`: {message}",
                row.name
            ));
        }
    }
    let after = watched(&layout.ws);
    let changed: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
    if before.len() != after.len() || !changed.is_empty() {
        failures.push(format!("watched paths changed: {changed:?}"));
    }
    // The repository is still the one it was: its history, in its own directory.
    let log = Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(&layout.ws)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    if !log.contains("first") || layout.ws.join("old-git").exists() {
        failures.push(format!("the git directory was not put back: {log}"));
    }
    the_user_goes_on(layout);
    if layout.canary.exists() {
        failures.push(format!(
            "the user's next git or shell ran the command's program: {}",
            fs::read_to_string(&layout.canary).unwrap()
        ));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn config() -> String {
    format!("[sandbox]\n{}", repo_read())
}

#[test]
fn what_a_command_changes_in_files_that_run_later_is_put_back_and_refused() {
    let layout = layout();
    let served = Served::start_with_env(
        &layout.ws,
        &config(),
        &layout.state,
        &[("HOME", layout.home.clone().into_os_string())],
    );
    every_row_is_put_back(&layout, &served, clients::mount_tier());
}

#[test]
fn without_a_mount_namespace_the_check_alone_puts_everything_back() {
    let strace = Path::new("/usr/bin/strace");
    assert!(
        strace.exists(),
        "strace is missing: run scripts/test-deps first"
    );
    let layout = layout();
    let config_path = layout.state.join("toolgate.toml");
    fs::write(&config_path, config()).unwrap();
    // Every `unshare` fails, as where a container forbids namespaces: the tier is not there.
    let child = home::isolated_at(Command::new(strace), &layout.home)
        .args([
            "-f",
            "-qq",
            "-o",
            "/dev/null",
            "-e",
            "inject=unshare:error=EPERM",
        ])
        .arg(toolgate_bin())
        .args(["serve", "--http", "127.0.0.1:0", "--workspace"])
        .arg(&layout.ws)
        .arg("--config")
        .arg(&config_path)
        .env("XDG_STATE_HOME", &layout.state)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served::from_child(child, &layout.state);
    every_row_is_put_back(&layout, &served, false);
}

#[test]
fn a_commit_still_commits_and_a_change_approved_by_name_stays() {
    let layout = layout();
    let ws = &layout.ws;
    let served = Served::start_with_env(
        ws,
        &config(),
        &layout.state,
        &[("HOME", layout.home.clone().into_os_string())],
    );
    let git_program = system_program("git");
    fs::write(ws.join("README.md"), "# project, changed\n").unwrap();
    let identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"];
    let commit: Vec<&str> = [git_program.as_str()]
        .into_iter()
        .chain(identity)
        .chain(["commit", "-q", "-am", "changed"])
        .collect();
    let steps = json!([
        {"op": "call", "tool": "run_command", "arguments": {"argv": commit}},
        {"op": "call", "tool": "run_command", "arguments": {
            "argv": [git_program, "config", "user.name", "Bob"], "may_change": [".git/config"]}},
        {"op": "call", "tool": "run_command", "arguments": {
            "argv": [git_program, "init", "-q", "fresh"], "may_change": ["fresh/.git"]}},
        {"op": "call", "tool": "run_command", "arguments": {
            "argv": [git_program, "init", "-q", "unnamed"]}},
        {"op": "call", "tool": "run_command", "arguments": {
            "argv": [git_program, "status"], "may_change": ["src/main.rs"]}},
        // A path the repository's config names (`core.hooksPath`) may be named too.
        {"op": "call", "tool": "run_command", "arguments": {
            "argv": [system_program("mkdir"), "-p", "tools/hooks"], "may_change": ["tools/hooks"]}},
    ]);
    let client = served.client(steps);
    let mut previews = Vec::new();
    served.decide_each(5, Duration::from_secs(120), |request, _| {
        previews.push(request["preview"].as_str().unwrap().to_owned());
        json!({"decision": "allow_once"}).to_string()
    });
    let results = client.steps();
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    let log = Command::new("git")
        .args(["log", "--oneline"])
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&log.stdout).contains("changed"),
        "{log:?}"
    );

    assert_eq!(results[1]["isError"], false, "{}", results[1]);
    assert!(
        previews[1].contains("may change `.git/config`, CODE THAT RUNS LATER"),
        "the person sees the file named as code that runs later: {}",
        previews[1]
    );
    let config = fs::read_to_string(ws.join(".git/config")).unwrap();
    assert!(config.contains("name = Bob"), "{config}");

    assert_eq!(results[2]["isError"], false, "{}", results[2]);
    assert!(ws.join("fresh/.git/HEAD").exists());

    assert_eq!(
        results[3]["structured"]["error"]["code"], "runs_later_changed",
        "{}",
        results[3]
    );
    assert!(
        !ws.join("unnamed/.git").exists(),
        "the unnamed repository was removed"
    );

    // Only files that run later may be named, and a refusal at stage 3 asks nobody.
    assert_eq!(
        results[4]["structured"]["rejection"]["code"], "constraint_violation",
        "{}",
        results[4]
    );

    assert_eq!(results[5]["isError"], false, "{}", results[5]);
    assert!(
        previews[4].contains("may change `tools/hooks`, CODE THAT RUNS LATER"),
        "{}",
        previews[4]
    );
    assert!(ws.join("tools/hooks").is_dir(), "the approved change stays");
}

#[test]
fn write_tools_are_refused_files_that_run_later_and_no_standing_grant_covers_them() {
    let layout = layout();
    let ws = &layout.ws;
    // The operator lifts the rule for one file; the write still needs a fresh approval each
    // time, a standing grant for the workspace notwithstanding.
    let policy = layout.state.join("lift.cedar");
    fs::write(
        &policy,
        r#"@id("runs-later-agent-config")
forbid (principal, action, resource)
when { context.runs_later.contains("agent_config") && !(context.paths == [".vscode/settings.json"]) };
"#,
    )
    .unwrap();
    let config = format!(
        "policy = {}\n\n{}",
        serde_json::to_string(&policy.display().to_string()).unwrap(),
        config()
    );
    let served = Served::start_with_env(
        ws,
        &config,
        &layout.state,
        &[("HOME", layout.home.clone().into_os_string())],
    );
    let write = |path: &str| {
        json!({"op": "call", "tool": "write_file",
            "arguments": {"path": path, "content": "{\"x\": 1}\n"}})
    };
    // A standing grant for the workspace's file edits.
    let client = served.client(json!([write("notes.md")]));
    served.decide_each(1, Duration::from_secs(60), |_, _| {
        json!({"decision": "allow_workspace"}).to_string()
    });
    assert_eq!(client.steps()[0]["isError"], false);

    let client = served.client(json!([
        write("more-notes.md"),
        write(".mcp.json"),
        write(".claude/settings.local.json"),
        write(".npmrc"),
        write(".git/hooks/post-commit"),
        write(".zshrc"),
        write("tools/hooks/pre-commit"),
        write("inc.cfg"),
        write("scripts/fetch.sh"),
        write("tools/iof.sh"),
        write("tools/mod.sh"),
        write(".vscode/settings.json"),
    ]));
    let mut asked = Vec::new();
    served.decide_each(1, Duration::from_secs(60), |request, _| {
        asked.push(request["arguments"]["path"].as_str().unwrap().to_owned());
        json!({"decision": "allow_once"}).to_string()
    });
    let results = client.steps();
    assert_eq!(
        results[0]["isError"], false,
        "the standing grant covers an ordinary file"
    );
    let rules = [
        "runs-later-agent-config",
        "runs-later-agent-config",
        "runs-later-build-config",
        "runs-later-git",
        "runs-later-shell-startup",
        // Named by the repository's `.git/config`: `core.hooksPath`, `include.path`, the
        // `ext::` URLs of a remote and an `insteadOf`; and by its `.gitmodules`.
        "runs-later-git",
        "runs-later-git",
        "runs-later-git",
        "runs-later-git",
        "runs-later-git",
    ];
    let lifted = rules.len() + 1;
    for (result, rule) in results[1..lifted].iter().zip(rules) {
        assert_eq!(
            result["structured"]["rejection"]["code"], "policy_denied",
            "{result}"
        );
        let message = result["structured"]["rejection"]["message"]
            .as_str()
            .unwrap();
        assert!(message.contains(rule), "{rule}: {message}");
    }
    assert_eq!(results[lifted]["isError"], false, "{}", results[lifted]);
    assert_eq!(
        asked,
        [".vscode/settings.json"],
        "the lifted write was asked for anew"
    );
    assert_eq!(
        fs::read_to_string(ws.join(".claude/settings.json")).unwrap(),
        "{}\n"
    );
}

#[test]
fn an_upstream_granted_the_workspace_cannot_leave_files_that_run_later() {
    let layout = layout();
    let ws = &layout.ws;
    let config_path = layout.state.join("toolgate.toml");
    fs::write(
        &config_path,
        format!(
            "{}\n[[upstream]]\nname = \"probe\"\ncommand = [{}, {}]\ncwd = {}\ncall_timeout_ms = 30000\n[upstream.sandbox]\n{}write = [{}]\n",
            config(),
            quoted(&python()),
            quoted(&root().join("tests/upstream/probe_server.py")),
            quoted(ws),
            repo_read(),
            quoted(ws),
        ),
    )
    .unwrap();
    let toolgate = || {
        let mut command = home::toolgate_at(&layout.home);
        command.env("XDG_STATE_HOME", &layout.state);
        command
    };
    let admitted = toolgate()
        .args([
            "tools",
            "admit",
            "probe",
            "probe",
            "--effect",
            "read_only",
            "--config",
        ])
        .arg(&config_path)
        .output()
        .unwrap();
    assert!(admitted.status.success(), "{admitted:?}");
    let child = toolgate()
        .args(["serve", "--http", "127.0.0.1:0", "--workspace"])
        .arg(ws)
        .arg("--config")
        .arg(&config_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let served = Served::from_child(child, &layout.state);
    let before = watched(ws);
    let rows = rows();
    let steps: Vec<Value> = rows
        .iter()
        .map(|row| {
            let source = row
                .python
                .replace("{evil}", &layout.evil.display().to_string());
            json!({"op": "call", "tool": "probe__probe", "arguments": {"python": source}})
        })
        .collect();
    let results = served.client(json!(steps)).steps();
    let mut failures = Vec::new();
    for (row, result) in rows.iter().zip(&results) {
        let code = result["structured"]["error"]["code"].as_str().unwrap_or("");
        if row.new && code != "runs_later_changed" {
            failures.push(format!("{}: not refused: {result}", row.name));
        }
    }
    let after = watched(ws);
    let changed: Vec<_> = before.iter().zip(&after).filter(|(b, a)| b != a).collect();
    if before.len() != after.len() || !changed.is_empty() {
        failures.push(format!("watched paths changed: {changed:?}"));
    }
    drop(served);
    the_user_goes_on(&layout);
    if layout.canary.exists() {
        failures.push("the user's next git or shell ran the upstream's program".to_owned());
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
