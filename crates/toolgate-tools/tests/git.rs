//! `git_status` and `git_diff` on real repositories made with the `git` command line, driven
//! through a real pipeline, and checked against what `git` itself reports.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/builtins.rs"]
mod builtins;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::*;
use toolgate_workspace::Workspace;

/// A temporary directory holding the workspace `ws/` (a git repository unless told otherwise)
/// and, beside it, `outside/`.
struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    /// An empty repository on branch `main`.
    fn new() -> Repo {
        let repo = Repo::bare_workspace();
        repo.git(&["init", "-q", "-b", "main"]);
        repo
    }

    /// A workspace that is not a repository.
    fn bare_workspace() -> Repo {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("ws")).unwrap();
        fs::create_dir_all(dir.path().join("outside")).unwrap();
        Repo { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// Runs `git` in the workspace with no global or system configuration; its stdout.
    fn git(&self, args: &[&str]) -> String {
        let output = Command::new("git")
            .args(args)
            .current_dir(self.root())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    fn write(&self, path: &str, content: impl AsRef<[u8]>) {
        let path = self.root().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, content).unwrap();
    }

    fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    fn pipeline(&self) -> Pipeline {
        self.pipeline_with(|_| {})
    }

    /// The pipeline the CLI would build, with `adjust` applied to each builtin's entry.
    fn pipeline_with(&self, adjust: impl Fn(&mut ToolEntry)) -> Pipeline {
        builtins::pipeline_with(&self.root(), Arc::new(HeadlessBroker), "", adjust)
    }

    fn call(&self, tool: &str, arguments: Value) -> Outcome {
        self.pipeline()
            .run(RawCall::text(tool, arguments.to_string(), Surface::Chat))
    }

    fn status(&self) -> Value {
        completed(self.call("git_status", json!({})))
    }

    fn diff(&self, arguments: Value) -> Value {
        completed(self.call("git_diff", arguments))
    }
}

fn completed(outcome: Outcome) -> Value {
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    outcome.into_output().unwrap()
}

fn failed(outcome: Outcome) -> ToolError {
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    outcome.error().cloned().unwrap()
}

/// `git_status` entries as (path, old path, index status, worktree status).
fn entries(status: &Value) -> BTreeSet<(String, Option<String>, String, String)> {
    status["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_owned(),
                e["old_path"].as_str().map(str::to_owned),
                e["index_status"].as_str().unwrap().to_owned(),
                e["worktree_status"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// `git status --porcelain` in the same shape as [`entries`].
fn porcelain(repo: &Repo) -> BTreeSet<(String, Option<String>, String, String)> {
    porcelain_of(repo, &[])
}

/// `git status --porcelain -- pathspecs…` in the same shape as [`entries`].
fn porcelain_of(
    repo: &Repo,
    pathspecs: &[&str],
) -> BTreeSet<(String, Option<String>, String, String)> {
    let mut command = vec!["status", "--porcelain=v1", "-z", "--"];
    command.extend_from_slice(pathspecs);
    let text = repo.git(&command);
    let mut records = text.split('\0').filter(|r| !r.is_empty());
    let mut out = BTreeSet::new();
    while let Some(record) = records.next() {
        let (xy, path) = record.split_at(3);
        let mut codes = xy.chars();
        let (x, y) = (codes.next().unwrap(), codes.next().unwrap());
        let old_path = matches!(x, 'R' | 'C').then(|| records.next().unwrap().to_owned());
        let word = |c: char| match c {
            ' ' => "unmodified",
            'M' => "modified",
            'A' => "added",
            'D' => "deleted",
            'R' => "renamed",
            'C' => "copied",
            'T' => "type_changed",
            '?' => "untracked",
            'U' => "conflicted",
            other => panic!("unexpected status letter {other:?}"),
        };
        out.insert((
            path.to_owned(),
            old_path,
            word(x).to_owned(),
            word(y).to_owned(),
        ));
    }
    out
}

/// The hunks of a unified diff, per file: the lines from the first `@@`, with the function
/// context git adds after a hunk header removed (toolgate does not compute it).
fn hunks(diff: &str) -> Vec<Vec<String>> {
    let mut files: Vec<Vec<String>> = Vec::new();
    let mut in_hunks = false;
    for line in diff.lines() {
        if line.starts_with("diff --git ") {
            files.push(Vec::new());
            in_hunks = false;
            continue;
        }
        if let Some(ranges) = line.strip_prefix("@@ ") {
            in_hunks = true;
            let end = ranges.find(" @@").unwrap();
            files
                .last_mut()
                .unwrap()
                .push(format!("@@ {} @@", &ranges[..end]));
            continue;
        }
        if in_hunks {
            files.last_mut().unwrap().push(line.to_owned());
        }
    }
    files
}

/// `git diff --numstat` as (path, added, removed); binary files have `-` counts.
fn numstat(repo: &Repo, args: &[&str]) -> BTreeSet<(String, String, String)> {
    let mut command = vec!["diff", "--numstat", "--no-renames"];
    command.extend_from_slice(args);
    repo.git(&command)
        .lines()
        .map(|line| {
            let mut fields = line.split('\t');
            let added = fields.next().unwrap().to_owned();
            let removed = fields.next().unwrap().to_owned();
            (fields.next().unwrap().to_owned(), added, removed)
        })
        .collect()
}

fn file_stats(diff: &Value) -> BTreeSet<(String, String, String)> {
    diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let count = |key: &str| {
                if f["binary"] == true {
                    "-".to_owned()
                } else {
                    f[key].as_u64().unwrap().to_string()
                }
            };
            (
                f["path"].as_str().unwrap().to_owned(),
                count("added"),
                count("removed"),
            )
        })
        .collect()
}

fn numbered_lines(range: std::ops::Range<usize>) -> String {
    range.map(|n| format!("line {n}\n")).collect()
}

#[test]
fn a_clean_repository() {
    let repo = Repo::new();
    repo.write("README.md", "hello\n");
    repo.commit_all("first");
    let status = repo.status();
    assert_eq!(status["branch"], "main");
    assert_eq!(status["commit"], repo.git(&["rev-parse", "HEAD"]).trim());
    assert_eq!(status["detached"], false);
    assert_eq!(status["clean"], true);
    assert_eq!(status["entries"], json!([]));
    assert_eq!(status["truncated"], false);
    for staged in [false, true] {
        let diff = repo.diff(json!({"staged": staged}));
        assert_eq!(diff["files"], json!([]));
        assert_eq!(diff["diff"], "");
        assert_eq!(diff["truncated"], false);
    }
}

#[test]
fn status_matches_git_porcelain() {
    let repo = Repo::new();
    repo.write(".gitignore", "*.log\nbuild/\n");
    repo.write("modified.txt", "one\n");
    repo.write("staged.txt", "one\n");
    repo.write("both.txt", "one\n");
    repo.write("deleted.txt", "gone soon\n");
    repo.write("removed.txt", "gone from the index\n");
    repo.write("old_name.txt", numbered_lines(0..20));
    repo.write("src/lib.rs", "pub fn f() {}\n");
    repo.commit_all("first");
    let index_before = fs::read(repo.root().join(".git/index")).unwrap();

    repo.write("modified.txt", "two\n");
    repo.write("staged.txt", "two\n");
    repo.git(&["add", "staged.txt"]);
    repo.write("both.txt", "two\n");
    repo.git(&["add", "both.txt"]);
    repo.write("both.txt", "three\n");
    fs::remove_file(repo.root().join("deleted.txt")).unwrap();
    repo.git(&["rm", "-q", "removed.txt"]);
    repo.git(&["mv", "old_name.txt", "new_name.txt"]);
    repo.write("added.txt", "new\n");
    repo.git(&["add", "added.txt"]);
    repo.write("untracked.txt", "?\n");
    repo.write("newdir/a.txt", "?\n");
    repo.write("newdir/b.txt", "?\n");
    repo.write("debug.log", "ignored\n");
    repo.write("build/out.o", "ignored\n");
    let index_after_git = fs::read(repo.root().join(".git/index")).unwrap();

    let status = repo.status();
    // Read-only: the index is exactly as git left it.
    assert_eq!(
        fs::read(repo.root().join(".git/index")).unwrap(),
        index_after_git
    );
    assert_ne!(index_before, index_after_git);

    let ours = entries(&status);
    assert_eq!(ours, porcelain(&repo), "{status:#}");
    // Spot checks, so that a shared misunderstanding cannot pass unnoticed.
    let find = |path: &str| ours.iter().find(|e| e.0 == path).cloned().unwrap();
    assert_eq!(
        find("new_name.txt"),
        (
            "new_name.txt".into(),
            Some("old_name.txt".into()),
            "renamed".into(),
            "unmodified".into()
        )
    );
    assert_eq!(find("both.txt").2, "modified");
    assert_eq!(find("both.txt").3, "modified");
    assert_eq!(find("deleted.txt").3, "deleted");
    assert_eq!(find("removed.txt").2, "deleted");
    assert_eq!(find("newdir/").2, "untracked");
    assert!(
        !ours
            .iter()
            .any(|e| e.0.contains("log") || e.0.contains("build"))
    );
    assert_eq!(status["clean"], false);
    assert_eq!(status["entries_total"], ours.len());
}

#[test]
fn diff_matches_git_diff() {
    let repo = Repo::new();
    repo.write("long.txt", numbered_lines(0..40));
    repo.write("short.txt", "alpha\nbeta\n");
    repo.write("no_newline.txt", "last line");
    repo.write("deleted.txt", "bye\nbye\n");
    repo.write("script.sh", "echo hi\n");
    repo.commit_all("first");

    let mut long: Vec<String> = numbered_lines(0..40).lines().map(str::to_owned).collect();
    long[5] = "line five, changed".into();
    long.insert(20, "an inserted line".into());
    long.remove(35);
    repo.write("long.txt", long.join("\n") + "\n");
    repo.write("short.txt", "alpha\ngamma\nbeta\n");
    repo.write("no_newline.txt", "last line, changed");
    fs::remove_file(repo.root().join("deleted.txt")).unwrap();
    let script = repo.root().join("script.sh");
    let mut permissions = fs::metadata(&script).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut permissions, 0o755);
    fs::set_permissions(&script, permissions).unwrap();

    let diff = repo.diff(json!({}));
    let text = diff["diff"].as_str().unwrap();
    assert_eq!(hunks(text), hunks(&repo.git(&["diff"])), "{text}");
    assert_eq!(file_stats(&diff), numstat(&repo, &[]));
    assert!(text.contains("diff --git a/deleted.txt b/deleted.txt\ndeleted file mode 100644\n"));
    assert!(text.contains("--- a/deleted.txt\n+++ /dev/null\n"));
    assert!(text.contains("old mode 100644\nnew mode 100755\n"));
    assert!(text.contains("\\ No newline at end of file\n"));
    let statuses: Vec<(&str, &str)> = diff["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("deleted.txt", "deleted"),
            ("long.txt", "modified"),
            ("no_newline.txt", "modified"),
            ("script.sh", "modified"),
            ("short.txt", "modified"),
        ]
    );
    assert_eq!(diff["files_total"], 5);
    // Nothing is staged.
    assert_eq!(repo.diff(json!({"staged": true}))["files"], json!([]));
}

#[test]
fn staged_diff_matches_git_diff_cached() {
    let repo = Repo::new();
    repo.write("kept.txt", numbered_lines(0..10));
    repo.write("moved.txt", numbered_lines(100..130));
    repo.commit_all("first");
    repo.write("kept.txt", numbered_lines(0..12));
    repo.write("added.txt", "brand new\n");
    repo.git(&["mv", "moved.txt", "renamed.txt"]);
    repo.git(&["add", "-A"]);
    // An unstaged change on top, which the staged diff must not show.
    repo.write("kept.txt", "entirely different\n");

    let diff = repo.diff(json!({"staged": true}));
    let text = diff["diff"].as_str().unwrap();
    assert_eq!(
        hunks(text),
        hunks(&repo.git(&["diff", "--cached"])),
        "{text}"
    );
    assert!(!text.contains("entirely different"));
    let files = diff["files"].as_array().unwrap();
    assert_eq!(files.len(), 3, "{diff:#}");
    let renamed = files.iter().find(|f| f["path"] == "renamed.txt").unwrap();
    assert_eq!(renamed["status"], "renamed");
    assert_eq!(renamed["old_path"], "moved.txt");
    assert_eq!(
        (renamed["added"].as_u64(), renamed["removed"].as_u64()),
        (Some(0), Some(0))
    );
    assert!(text.contains("rename from moved.txt\nrename to renamed.txt\n"));
    let added = files.iter().find(|f| f["path"] == "added.txt").unwrap();
    assert_eq!(added["status"], "added");
    assert!(text.contains(
        "new file mode 100644\n--- /dev/null\n+++ b/added.txt\n@@ -0,0 +1 @@\n+brand new\n"
    ));

    // The unstaged diff shows only the change on top of the index.
    let unstaged = repo.diff(json!({}));
    assert_eq!(
        hunks(unstaged["diff"].as_str().unwrap()),
        hunks(&repo.git(&["diff"]))
    );
}

#[test]
fn a_path_narrows_the_diff_to_a_file_or_directory() {
    let repo = Repo::new();
    repo.write("src/a.rs", "a\n");
    repo.write("src/nested/b.rs", "b\n");
    repo.write("srcs/c.rs", "c\n");
    repo.write("docs/d.md", "d\n");
    repo.commit_all("first");
    for path in ["src/a.rs", "src/nested/b.rs", "srcs/c.rs", "docs/d.md"] {
        repo.write(path, "changed\n");
    }
    let paths = |arguments: Value| -> Vec<String> {
        repo.diff(arguments)["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        paths(json!({"path": "src"})),
        ["src/a.rs", "src/nested/b.rs"]
    );
    assert_eq!(paths(json!({"path": "./src/nested/"})), ["src/nested/b.rs"]);
    assert_eq!(paths(json!({"path": "docs/d.md"})), ["docs/d.md"]);
    assert_eq!(paths(json!({"path": "missing"})), Vec::<String>::new());
    assert_eq!(paths(json!({})).len(), 4);
}

#[test]
fn paths_that_leave_the_workspace_are_rejected_before_anything_runs() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    std::os::unix::fs::symlink("../outside", repo.root().join("out")).unwrap();
    for path in ["../x", "/etc", "%2e%2e/x", "out", "out/secret.txt"] {
        let outcome = repo.call("git_diff", json!({"path": path}));
        let rejection = outcome
            .rejection()
            .unwrap_or_else(|| panic!("{path}: not rejected"));
        assert_eq!(rejection.stage(), Stage::Validate, "{path}");
        assert_eq!(rejection.code(), RejectCode::PathOutsideWorkspace, "{path}");
        assert!(
            !outcome.evidence().durations_ns.contains_key("execute"),
            "{path}"
        );
    }
}

#[test]
fn a_workspace_that_is_not_a_repository() {
    let plain = Repo::bare_workspace();
    plain.write("a.txt", "a\n");
    for tool in ["git_status", "git_diff"] {
        let error = failed(plain.call(tool, json!({})));
        assert_eq!(error.code, "not_a_repository", "{tool}: {}", error.message);
    }

    // A subdirectory of a repository is not the repository's root: the parent is not read.
    let parent = Repo::new();
    parent.write("ws/inner.txt", "inner\n");
    parent.commit_all("first");
    let dir = parent.root().join("ws");
    let workspace = Workspace::open(&dir).unwrap();
    let tool = toolgate_tools::builtin(
        Arc::new(workspace),
        std::env::home_dir().as_deref(),
        std::env::vars_os(),
    )
    .into_iter()
    .find(|b| b.entry.name == "git_status")
    .unwrap();
    let mut builder = RegistryBuilder::new();
    builder
        .register(tool.descriptor, tool.entry, tool.executor)
        .unwrap();
    let registry = builder.build().unwrap();
    let mut policy = PolicyEngine::default_policy().unwrap();
    policy.prepare(&registry).unwrap();
    let pipeline = Pipeline::new(
        Arc::new(registry),
        Arc::new(policy),
        Arc::new(HeadlessBroker),
        WorkspaceId::new(&dir.to_string_lossy()),
    );
    let error = failed(pipeline.run(RawCall::text("git_status", "{}", Surface::Chat)));
    assert_eq!(error.code, "not_a_repository");
}

#[test]
fn a_git_dir_elsewhere_is_refused() {
    // A linked worktree: `.git` is a file naming a directory outside the workspace.
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    let linked = Repo {
        dir: tempfile::tempdir().unwrap(),
    };
    repo.git(&["worktree", "add", "-q", linked.root().to_str().unwrap()]);
    assert!(linked.root().join(".git").is_file());
    let error = failed(linked.call("git_status", json!({})));
    assert_eq!(
        error.code, "repository_outside_workspace",
        "{}",
        error.message
    );

    // `core.worktree` pointing out of the workspace: git would list `outside/` as the working
    // tree; toolgate either refuses or reads the workspace root, never the directory named.
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    let outside = repo.dir.path().join("outside");
    fs::write(outside.join("leak.txt"), "leak\n").unwrap();
    repo.git(&["config", "core.worktree", outside.to_str().unwrap()]);
    assert!(repo.git(&["status", "--porcelain"]).contains("leak.txt"));
    for tool in ["git_status", "git_diff"] {
        let outcome = repo.call(tool, json!({}));
        match outcome.status() {
            Status::Completed => {
                let output = outcome.output().unwrap().to_string();
                assert!(!output.contains("leak"), "{tool}: {output}");
                assert!(!output.contains("a.txt"), "{tool}: {output}");
            }
            _ => assert_eq!(
                failed(outcome).code,
                "repository_outside_workspace",
                "{tool}"
            ),
        }
    }
}

#[test]
fn a_large_diff_is_cut_on_a_line_boundary_within_the_limit() {
    let repo = Repo::new();
    repo.write("big.txt", numbered_lines(0..5_000));
    repo.write("small.txt", "small\n");
    repo.commit_all("first");
    repo.write("big.txt", numbered_lines(1..5_001).replace("line", "LINE"));
    repo.write("small.txt", "smaller\n");
    let limit = 64 * 1024;
    let pipeline = repo.pipeline_with(|entry| {
        if entry.name == "git_diff" {
            entry.limits.max_output_bytes = limit;
        }
    });
    let outcome = pipeline.run(RawCall::text("git_diff", "{}", Surface::Chat));
    let evidence = outcome.evidence().clone();
    let diff = completed(outcome);
    assert!(evidence.output_bytes <= limit, "{}", evidence.output_bytes);
    assert!(evidence.truncated);
    assert_eq!(diff["truncated"], true);
    let text = diff["diff"].as_str().unwrap();
    assert!(text.len() > 16 * 1024, "the budget is used: {}", text.len());
    assert!(text.ends_with('\n'));
    assert!(text.starts_with("diff --git a/big.txt b/big.txt\n"));
    // Every file is still listed, with its full counts.
    let files = diff["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["added"], 5_000);
    assert_eq!(files[0]["removed"], 5_000);
    assert_eq!(files[1]["path"], "small.txt");
}

#[test]
fn binary_files_are_reported_not_shown() {
    let repo = Repo::new();
    repo.write("image.bin", b"\x89PNG\0\x01\x02\x03");
    repo.commit_all("first");
    repo.write("image.bin", b"\x89PNG\0\x04\x05\x06");
    let diff = repo.diff(json!({}));
    let file = &diff["files"][0];
    assert_eq!(file["path"], "image.bin");
    assert_eq!(file["binary"], true);
    let text = diff["diff"].as_str().unwrap();
    assert!(
        text.contains("Binary files a/image.bin and b/image.bin differ\n"),
        "{text}"
    );
    assert_eq!(file_stats(&diff), numstat(&repo, &[]));
}

#[test]
fn sensitive_files_are_listed_but_never_shown() {
    let repo = Repo::new();
    repo.write(".env", "API_KEY=old-value-1234\n");
    repo.write("config/server.key", "KEY-OLD\n");
    repo.write("app.txt", "app\n");
    repo.commit_all("first");
    repo.write(".env", "API_KEY=new-value-5678\n");
    repo.write("config/server.key", "KEY-NEW\n");
    repo.write("app.txt", "app 2\n");

    let status = repo.status();
    assert!(entries(&status).contains(&(
        ".env".into(),
        None,
        "unmodified".into(),
        "modified".into()
    )));

    for staged in [false, true] {
        if staged {
            repo.git(&["add", "-A"]);
        }
        let diff = repo.diff(json!({"staged": staged}));
        let files = diff["files"].as_array().unwrap();
        let env = files.iter().find(|f| f["path"] == ".env").unwrap();
        assert_eq!(env["omitted"], "sensitive-dotenv");
        assert!(env.get("added").is_none());
        let key = files
            .iter()
            .find(|f| f["path"] == "config/server.key")
            .unwrap();
        assert_eq!(key["omitted"], "sensitive-key");
        let output = diff.to_string();
        for secret in ["value-1234", "value-5678", "KEY-OLD", "KEY-NEW"] {
            assert!(!output.contains(secret), "{secret} leaked: {output}");
        }
        assert!(diff["diff"].as_str().unwrap().contains("+app 2\n"));
    }
}

/// A console token, as toolgate writes one.
const TOKEN: &str = "5f0c8d7e6b5a49382716a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

impl Repo {
    /// The pipeline `toolgate serve` builds for a workspace holding its state directory at
    /// `.local/state/toolgate` (a workspace at `$HOME`).
    fn pipeline_with_state(&self) -> Pipeline {
        self.pipeline()
            .with_sensitivity(Sensitivity::default().with_config_dir(".local/state/toolgate"))
    }

    fn call_with_state(&self, tool: &str, arguments: Value) -> Value {
        let outcome = self.pipeline_with_state().run(RawCall::text(
            tool,
            arguments.to_string(),
            Surface::Chat,
        ));
        let text = serde_json::to_string(&outcome).unwrap();
        for secret in [TOKEN, "toolgate/", "console-", "grants-", "GRANT"] {
            assert!(
                !text.contains(secret),
                "{tool} {arguments}: `{secret}` in {text}"
            );
        }
        completed(outcome)
    }
}

#[test]
fn an_untracked_state_directory_is_pruned_from_the_status() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    repo.write(
        ".local/state/toolgate/console-4242.token",
        format!("{TOKEN}\n"),
    );
    repo.write(
        ".local/state/toolgate/grants-0123456789abcdef.json",
        "[\"GRANT\"]\n",
    );
    repo.write("a.txt", "b\n");
    // Without it, git lists `.local/`: all it holds is untracked.
    assert!(porcelain(&repo).iter().any(|(path, ..)| path == ".local/"));

    let status = repo.call_with_state("git_status", json!({}));
    let expected = BTreeSet::from([(
        "a.txt".to_owned(),
        None,
        "unmodified".to_owned(),
        "modified".to_owned(),
    )]);
    assert_eq!(entries(&status), expected);
    assert_eq!(status["entries_total"], 1);
    // Nothing is left of it, not even the directory that held nothing else.
    assert_eq!(
        entries(&status),
        porcelain_of(&repo, &[".", ":(exclude).local/state/toolgate"])
    );

    // Beside something else untracked, that other thing is listed on its own (where git
    // would still list `.local/`, whose every entry is untracked).
    repo.write(".local/state/notes.txt", "notes\n");
    let status = repo.call_with_state("git_status", json!({}));
    assert!(entries(&status).contains(&(
        ".local/state/notes.txt".to_owned(),
        None,
        "untracked".to_owned(),
        "untracked".to_owned()
    )));
    assert_eq!(status["entries_total"], 2);
    for staged in [false, true] {
        let diff = repo.call_with_state("git_diff", json!({"staged": staged}));
        assert_eq!(diff["files_total"], if staged { 0 } else { 1 }, "{diff}");
    }
}

#[test]
fn a_tracked_state_directory_is_withheld_from_status_and_diff() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.write(
        ".local/state/toolgate/grants-0123456789abcdef.json",
        "[\"OLD-GRANT\"]\n",
    );
    repo.write(".local/state/toolgate/out.txt", "moves out\nof the state\n");
    repo.write(".local/share/in.txt", "moves in\n");
    repo.write(".local/share/kept.txt", "kept\n");
    repo.commit_all("a dotfiles repository that tracks more than it should");
    repo.write(
        ".local/state/toolgate/grants-0123456789abcdef.json",
        "[\"NEW-GRANT\"]\n",
    );
    repo.write(
        ".local/state/toolgate/console-4242.token",
        format!("{TOKEN}\n"),
    );
    repo.write("a.txt", "b\n");
    repo.git(&["mv", ".local/share/in.txt", ".local/state/toolgate/in.txt"]);
    repo.git(&["mv", ".local/state/toolgate/out.txt", "out.txt"]);
    // A link that leads into it is withheld as what it leads to.
    std::os::unix::fs::symlink(
        ".local/state/toolgate/console-4242.token",
        repo.root().join("token_link"),
    )
    .unwrap();

    let status = repo.call_with_state("git_status", json!({}));
    let row = |path: &str, index: &str, worktree: &str| {
        (path.to_owned(), None, index.to_owned(), worktree.to_owned())
    };
    assert_eq!(
        entries(&status),
        BTreeSet::from([
            row(".local/share/in.txt", "deleted", "unmodified"),
            row("a.txt", "unmodified", "modified"),
            row("out.txt", "added", "unmodified"),
        ])
    );
    assert_eq!(status["entries_total"], 3);

    let unstaged = repo.call_with_state("git_diff", json!({}));
    let paths = |diff: &Value| -> Vec<String> {
        diff["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                format!(
                    "{} {}",
                    f["path"].as_str().unwrap(),
                    f["status"].as_str().unwrap()
                )
            })
            .collect()
    };
    assert_eq!(paths(&unstaged), ["a.txt modified"]);
    assert_eq!(unstaged["files_total"], 1);

    let staged = repo.call_with_state("git_diff", json!({"staged": true}));
    assert_eq!(
        paths(&staged),
        [".local/share/in.txt deleted", "out.txt added"]
    );
    let text = staged["diff"].as_str().unwrap();
    assert!(text.contains("+moves out\n"), "{text}");
    assert!(text.contains("-moves in\n"), "{text}");
    assert!(!text.contains("rename"), "{text}");
    // Asked for by path, the state directory is refused before anything runs.
    let outcome = repo.pipeline_with_state().run(RawCall::text(
        "git_diff",
        r#"{"path": ".local/state/toolgate"}"#,
        Surface::Chat,
    ));
    assert_eq!(
        outcome.rejection().unwrap().policies(),
        ["sensitive-toolgate-config"]
    );
}

#[test]
fn a_tracked_links_text_that_names_a_hidden_path_is_not_shown() {
    let repo = Repo::new();
    repo.write(
        ".local/state/toolgate/console-4242.token",
        format!("{TOKEN}\n"),
    );
    std::os::unix::fs::symlink("notes.txt", repo.root().join("tok")).unwrap();
    repo.write("notes.txt", "notes\n");
    repo.git(&["add", "tok", "notes.txt"]);
    repo.git(&["commit", "-q", "-m", "first"]);
    // The link now leads into the state directory: withheld as what it leads to.
    fs::remove_file(repo.root().join("tok")).unwrap();
    std::os::unix::fs::symlink(
        ".local/state/toolgate/console-4242.token",
        repo.root().join("tok"),
    )
    .unwrap();
    let diff = repo.call_with_state("git_diff", json!({}));
    assert_eq!(diff["files_total"], 0, "{diff}");
    // Staged, then gone from the worktree, its text in the index still names it.
    repo.git(&["add", "tok"]);
    fs::remove_file(repo.root().join("tok")).unwrap();
    let staged = repo.call_with_state("git_diff", json!({"staged": true}));
    let files = staged["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{staged}");
    assert_eq!(files[0]["path"], "tok");
    assert_eq!(files[0]["omitted"], "sensitive-toolgate-config");
    let unstaged = repo.call_with_state("git_diff", json!({}));
    assert_eq!(
        unstaged["files"][0]["omitted"], "sensitive-toolgate-config",
        "{unstaged}"
    );
}

#[test]
fn a_tracked_link_is_diffed_as_its_text_and_never_followed() {
    let repo = Repo::new();
    fs::write(repo.dir.path().join("outside/secret.txt"), "TOP SECRET\n").unwrap();
    std::os::unix::fs::symlink("../outside/secret.txt", repo.root().join("link")).unwrap();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    fs::remove_file(repo.root().join("link")).unwrap();
    std::os::unix::fs::symlink("../outside/other.txt", repo.root().join("link")).unwrap();
    fs::write(repo.dir.path().join("outside/other.txt"), "ALSO SECRET\n").unwrap();

    let diff = repo.diff(json!({}));
    let output = diff.to_string();
    assert!(!output.contains("SECRET"), "{output}");
    let text = diff["diff"].as_str().unwrap();
    assert_eq!(hunks(text), hunks(&repo.git(&["diff"])), "{text}");
    assert!(text.contains("-../outside/secret.txt\n"), "{text}");
    assert!(text.contains("+../outside/other.txt\n"), "{text}");
}

#[test]
fn no_configured_program_ever_runs() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.write(".gitattributes", "* filter=evil diff=evil\n");
    repo.commit_all("first");
    // Configured only now, so that committing above did not run it.
    let marker = repo.dir.path().join("outside/ran");
    let command = format!("touch {}; cat", marker.display());
    repo.git(&["config", "filter.evil.clean", &command]);
    repo.git(&["config", "filter.evil.smudge", &command]);
    repo.git(&[
        "config",
        "diff.evil.textconv",
        &format!("touch {};cat", marker.display()),
    ]);
    repo.write("a.txt", "changed\n");

    repo.status();
    repo.diff(json!({}));
    repo.diff(json!({"staged": true}));
    assert!(!marker.exists(), "a configured program ran");

    // git itself does run it: the setup above is one that would be exploited.
    // `git diff` must read the changed file through its clean filter and
    // textconv, whatever the index's timestamps (`git status` may not: a size
    // change is enough for it, and a racy entry only sometimes is).
    repo.git(&["diff"]);
    assert!(
        marker.exists(),
        "git diff did not run the configured program"
    );
}

#[test]
fn unborn_and_detached_heads() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.git(&["add", "a.txt"]);
    let status = repo.status();
    assert_eq!(status["branch"], "main");
    assert_eq!(status["commit"], Value::Null);
    assert_eq!(entries(&status), porcelain(&repo));
    let diff = repo.diff(json!({"staged": true}));
    assert_eq!(diff["files"][0]["status"], "added");

    repo.git(&["commit", "-q", "-m", "first"]);
    repo.git(&["checkout", "-q", "--detach"]);
    let status = repo.status();
    assert_eq!(status["branch"], Value::Null);
    assert_eq!(status["detached"], true);
    assert_eq!(status["commit"], repo.git(&["rev-parse", "HEAD"]).trim());
}

#[test]
fn many_changes_are_bounded_by_max_results() {
    let repo = Repo::new();
    for n in 0..30 {
        repo.write(&format!("f{n:02}.txt"), "x\n");
    }
    let pipeline = repo.pipeline_with(|entry| entry.limits.max_results = 10);
    let status = completed(pipeline.run(RawCall::text("git_status", "{}", Surface::Chat)));
    assert_eq!(status["entries"].as_array().unwrap().len(), 10);
    assert_eq!(status["entries_total"], 30);
    assert_eq!(status["truncated"], true);
    assert_eq!(status["entries"][0]["path"], "f00.txt");

    repo.commit_all("first");
    for n in 0..30 {
        repo.write(&format!("f{n:02}.txt"), "y\n");
    }
    let diff = completed(pipeline.run(RawCall::text("git_diff", "{}", Surface::Chat)));
    assert_eq!(diff["files"].as_array().unwrap().len(), 10);
    assert_eq!(diff["files_total"], 30);
    assert_eq!(diff["truncated"], true);
    assert_eq!(
        diff["diff"].as_str().unwrap().matches("diff --git").count(),
        10
    );
}

#[test]
fn the_readonly_profile_can_call_both_tools() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    repo.write("a.txt", "b\n");
    let pipeline = repo.pipeline();
    for (tool, arguments) in [("git_status", "{}"), ("git_diff", r#"{"staged": false}"#)] {
        let outcome =
            pipeline.run(RawCall::text(tool, arguments, Surface::Chat).in_profile("readonly"));
        assert_eq!(outcome.status(), Status::Completed, "{tool}: {outcome:?}");
        assert_eq!(outcome.evidence().profile, "readonly");
        assert_eq!(outcome.evidence().effect, Some(EffectClass::ReadOnly));
    }
}

#[test]
fn a_cancelled_call_stops() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    let pipeline = repo.pipeline();
    for tool in ["git_status", "git_diff"] {
        let outcome =
            pipeline.run_cancellable(RawCall::text(tool, "{}", Surface::Chat), Cancel::given());
        assert_eq!(failed(outcome).code, "cancelled", "{tool}");
    }
}

/// A FIFO put where gix reads a file (a `.gitignore`, `.git/info/exclude`) blocks gix in `open`,
/// where it cannot look at its interrupt flag: the call still ends at its deadline, with the
/// `timeout` error, or when its caller gives up, and later calls are answered, until four
/// threads are left blocked; then calls are refused until they end.
#[test]
fn a_fifo_where_git_reads_a_file_ends_the_call_at_its_deadline() {
    let repo = Repo::new();
    repo.write("a.txt", "a\n");
    repo.commit_all("first");
    let made = std::process::Command::new("mkfifo")
        .arg(repo.root().join(".gitignore"))
        .status()
        .unwrap();
    assert!(made.success());
    let pipeline = repo.pipeline_with(|entry| {
        if entry.name.starts_with("git_") {
            entry.limits.timeout_ms = 1_000;
        }
    });
    // `git_status` walks the worktree and reads its `.gitignore`; `git_diff` of the worktree
    // has no need of it and answers.
    for (tool, stalls) in [
        ("git_status", true),
        ("git_diff", false),
        ("git_status", true),
    ] {
        let started = std::time::Instant::now();
        let outcome = pipeline.run(RawCall::text(tool, "{}", Surface::Chat));
        let took = started.elapsed();
        if stalls {
            assert_eq!(failed(outcome).code, "timeout", "{tool}");
        } else {
            completed(outcome);
        }
        assert!(
            took < std::time::Duration::from_secs(5),
            "{tool} took {took:?}"
        );
    }
    // A caller who gives up is answered then, not at the deadline.
    let cancel = Cancel::new();
    let giver = {
        let cancel = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            cancel.cancel();
        })
    };
    let started = std::time::Instant::now();
    let outcome = repo
        .pipeline()
        .run_cancellable(RawCall::text("git_status", "{}", Surface::Chat), cancel);
    let took = started.elapsed();
    giver.join().unwrap();
    assert_eq!(failed(outcome).code, "cancelled");
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
    // Three threads are left blocked; a fourth makes the bound, and the next call is refused
    // at once, saying why, rather than leaving yet another.
    let status = || pipeline.run(RawCall::text("git_status", "{}", Surface::Chat));
    assert_eq!(failed(status()).code, "timeout");
    let started = std::time::Instant::now();
    let refused = failed(status());
    assert_eq!(refused.code, "git_error");
    assert!(
        refused.message.contains("4 earlier git calls"),
        "{}",
        refused.message
    );
    assert!(started.elapsed() < std::time::Duration::from_millis(500));
    // Once something writes to the FIFO the blocked threads end, and calls start again.
    let fifo = repo.root().join(".gitignore");
    let writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    drop(writer);
    std::fs::remove_file(&fifo).unwrap();
    repo.write("a.txt", "b\n");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let answered = loop {
        let outcome = status();
        if outcome.status() == Status::Completed || std::time::Instant::now() > deadline {
            break outcome;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(completed(answered)["entries_total"], 1);
}

#[test]
fn git_output_paths_are_relative_to_the_root() {
    // Guards `hunks` and `porcelain` against a repository whose paths would need quoting.
    let repo = Repo::new();
    repo.write("dir with space/file.txt", "a\n");
    repo.commit_all("first");
    repo.write("dir with space/file.txt", "b\n");
    let status = repo.status();
    assert_eq!(entries(&status), porcelain(&repo));
    let diff = repo.diff(json!({"path": "dir with space"}));
    assert_eq!(diff["files"][0]["path"], "dir with space/file.txt");
    assert!(
        Path::new(&repo.root())
            .join("dir with space/file.txt")
            .exists()
    );
}
