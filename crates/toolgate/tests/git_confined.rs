//! `git_status` and `git_diff` read only the workspace's own repository, through the real
//! binary: a git directory that leads elsewhere (a link anywhere in it, alternates, a
//! `commondir`, a `.git` link or file) is refused with `repository_outside_workspace`, no
//! error quotes a file's bytes, and the canary secrets planted outside the workspace never
//! appear in anything toolgate prints. Each hostile row is run twice where it can be: as the
//! kernel allows (Landlock confines the thread that reads the repository) and with Landlock
//! made to fail (`without_landlock`), where only the look at `.git` before gix opens it stands.
//! Beside them, the repositories that must keep working: submodules, packed references, after
//! `git gc`, with a linked worktree.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use support::clients::{toolgate_bin, without_landlock};
use support::home;
use support::served::Served;

/// What the secret file outside the workspace holds (one line, as a token file does).
const SECRET: &str = "CANARY-token-5f1d8c2e";
/// What a file committed in the repository outside the workspace holds.
const OUTSIDE_CONTENT: &str = "CANARY-outside-content-a41b";
/// That file's name.
const OUTSIDE_NAME: &str = "CANARY-outside-name.txt";
/// Every canary: none may appear in anything toolgate prints.
const CANARIES: [&str; 3] = [SECRET, OUTSIDE_CONTENT, "CANARY-"];

/// A directory holding the workspace `ws/` (a repository with one commit), a repository
/// `outside/` beside it with a file of its own (its objects kept loose), a secret file, and
/// the HOME and XDG directories the binary runs with.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let fixture = Fixture {
            dir: tempfile::tempdir().unwrap(),
        };
        let base = fixture.base();
        for sub in ["home", "config", "state", "ws", "outside"] {
            fs::create_dir_all(base.join(sub)).unwrap();
        }
        fs::write(base.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        // A directory outside that holds a `config`, as `~/.ssh` does.
        fs::create_dir_all(base.join("dotssh")).unwrap();
        fs::write(base.join("dotssh/config"), format!("{SECRET}\n")).unwrap();

        let outside = fixture.outside();
        git(&outside, &["init", "-q", "-b", "main"]);
        fs::write(outside.join(OUTSIDE_NAME), format!("{OUTSIDE_CONTENT}\n")).unwrap();
        git(&outside, &["add", "."]);
        git(&outside, &["commit", "-q", "-m", "outside"]);

        let ws = fixture.ws();
        git(&ws, &["init", "-q", "-b", "main"]);
        fs::write(ws.join("a.txt"), "a\n").unwrap();
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::write(ws.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-q", "-m", "first"]);
        fixture
    }

    fn base(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn ws(&self) -> PathBuf {
        self.base().join("ws")
    }

    fn git_dir(&self) -> PathBuf {
        self.ws().join(".git")
    }

    fn outside(&self) -> PathBuf {
        self.base().join("outside")
    }

    fn secret(&self) -> PathBuf {
        self.base().join("secret.txt")
    }

    /// The id of the outside repository's file, and the path of its loose object.
    fn outside_blob(&self) -> (String, PathBuf) {
        let id = git(
            &self.outside(),
            &["rev-parse", &format!("HEAD:{OUTSIDE_NAME}")],
        )
        .trim()
        .to_owned();
        let object = self
            .outside()
            .join(".git/objects")
            .join(&id[..2])
            .join(&id[2..]);
        assert!(object.is_file(), "the outside object is loose");
        (id, object)
    }

    /// Stages the outside repository's file as `leak.txt` in the workspace's index, which git
    /// only accepts once the workspace can reach the object.
    fn stage_outside_blob(&self) {
        let (id, _) = self.outside_blob();
        git(
            &self.ws(),
            &[
                "update-index",
                "--add",
                "--cacheinfo",
                &format!("100644,{id},leak.txt"),
            ],
        );
    }

    /// A repository `lib` made beside the workspace, added to it as the submodule `sub`.
    fn add_submodule(&self) {
        let lib = self.base().join("lib");
        fs::create_dir_all(&lib).unwrap();
        git(&lib, &["init", "-q", "-b", "main"]);
        fs::write(lib.join("lib.txt"), "lib\n").unwrap();
        git(&lib, &["add", "."]);
        git(&lib, &["commit", "-q", "-m", "lib"]);
        git(&self.ws(), &["submodule", "add", "-q", "../lib", "sub"]);
    }

    /// `toolgate call --json` of `tool` in the workspace, Landlock as the kernel allows or
    /// made to fail; the outcome and all that was printed.
    fn call(&self, tool: &str, args: &Value, landlock: bool) -> (Value, String) {
        self.call_with(tool, args, landlock, &[])
    }

    fn call_with(
        &self,
        tool: &str,
        args: &Value,
        landlock: bool,
        env: &[(&str, &str)],
    ) -> (Value, String) {
        let mut command = if landlock {
            home::toolgate()
        } else {
            without_landlock()
        };
        let base = self.base();
        command
            .envs(home::vars(&base.join("home")))
            .env("XDG_CONFIG_HOME", base.join("config"))
            .env("XDG_STATE_HOME", base.join("state"))
            .envs(env.iter().copied())
            .args(["call", "--json", "--workspace"])
            .arg(self.ws())
            .args(["--tool", tool, "--args", &args.to_string()]);
        let output: Output = command.output().unwrap();
        let printed = format!(
            "{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let outcome = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
        (outcome, printed)
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(["-c", "user.name=Test", "-c", "user.email=test@example.com"])
        .args(["-c", "protocol.file.allow=always", "-c", "gc.auto=0"])
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn replace_with_link(target: &Path, link: &Path) {
    if link.is_dir() && !link.is_symlink() {
        fs::remove_dir_all(link).unwrap();
    } else {
        let _ = fs::remove_file(link);
    }
    symlink(target, link).unwrap();
}

/// One hostile row: how the repository is spoiled, and the calls that must be refused.
struct Row {
    name: &'static str,
    spoil: fn(&Fixture),
}

/// The calls each hostile row is tried with.
fn calls() -> [(&'static str, Value); 3] {
    [
        ("git_status", json!({})),
        ("git_diff", json!({})),
        ("git_diff", json!({"staged": true})),
    ]
}

fn hostile_rows() -> Vec<Row> {
    vec![
        Row {
            name: "alternates naming the outside repository's objects (absolute)",
            spoil: |f| {
                let objects = f.outside().join(".git/objects");
                fs::write(
                    f.git_dir().join("objects/info/alternates"),
                    format!("{}\n", objects.display()),
                )
                .unwrap();
                f.stage_outside_blob();
            },
        },
        Row {
            name: "alternates naming the outside repository's objects (relative)",
            spoil: |f| {
                fs::write(
                    f.git_dir().join("objects/info/alternates"),
                    "../../../outside/.git/objects\n",
                )
                .unwrap();
                f.stage_outside_blob();
            },
        },
        // gix does not read this file today (git does, for dumb HTTP): refused all the same,
        // so that a gix that learns to cannot be led elsewhere by it.
        Row {
            name: "http-alternates naming the outside repository's objects",
            spoil: |f| {
                let objects = f.outside().join(".git/objects");
                fs::write(
                    f.git_dir().join("objects/info/http-alternates"),
                    format!("file://{}\n", objects.display()),
                )
                .unwrap();
            },
        },
        Row {
            name: "a loose object linked to the outside repository's",
            spoil: |f| {
                let (id, object) = f.outside_blob();
                let dir = f.git_dir().join("objects").join(&id[..2]);
                fs::create_dir_all(&dir).unwrap();
                symlink(&object, dir.join(&id[2..])).unwrap();
                f.stage_outside_blob();
            },
        },
        Row {
            name: "`.git/objects` linked to the outside repository's",
            spoil: |f| {
                // Staged while reachable through alternates, then the store replaced by a link.
                fs::write(
                    f.git_dir().join("objects/info/alternates"),
                    format!("{}\n", f.outside().join(".git/objects").display()),
                )
                .unwrap();
                f.stage_outside_blob();
                replace_with_link(
                    &f.outside().join(".git/objects"),
                    &f.git_dir().join("objects"),
                );
            },
        },
        Row {
            name: "`.git/packed-refs` linked to a secret file",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("packed-refs")),
        },
        Row {
            name: "`.git/HEAD` linked to a secret file",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("HEAD")),
        },
        Row {
            name: "`.git/HEAD` linked to the outside repository's",
            spoil: |f| {
                replace_with_link(&f.outside().join(".git/HEAD"), &f.git_dir().join("HEAD"));
            },
        },
        Row {
            name: "`.git/refs/heads/main` linked to a secret file",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("refs/heads/main")),
        },
        Row {
            name: "`.git/refs` linked to the outside repository's",
            spoil: |f| replace_with_link(&f.outside().join(".git/refs"), &f.git_dir().join("refs")),
        },
        Row {
            name: "`.git/index` linked to the outside repository's",
            spoil: |f| {
                replace_with_link(&f.outside().join(".git/index"), &f.git_dir().join("index"));
            },
        },
        Row {
            name: "`.git/config` linked to a secret file",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("config")),
        },
        Row {
            name: "`.git/info/exclude` linked to a secret file",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("info/exclude")),
        },
        Row {
            name: "a link deep in `.git/logs`",
            spoil: |f| replace_with_link(&f.secret(), &f.git_dir().join("logs/refs/heads/main")),
        },
        // Held before as well (refused after gix had opened it, common directory checked).
        Row {
            name: "`.git/commondir` naming the outside repository (absolute)",
            spoil: |f| {
                fs::write(
                    f.git_dir().join("commondir"),
                    format!("{}\n", f.outside().join(".git").display()),
                )
                .unwrap();
            },
        },
        Row {
            name: "`.git/commondir` naming a directory with a secret `config` (relative)",
            spoil: |f| fs::write(f.git_dir().join("commondir"), "../../dotssh\n").unwrap(),
        },
        Row {
            name: "a submodule's git directory with alternates",
            spoil: |f| {
                let modules = f.git_dir().join("modules/sub/objects/info");
                fs::create_dir_all(&modules).unwrap();
                fs::write(
                    modules.join("alternates"),
                    format!("{}\n", f.outside().join(".git/objects").display()),
                )
                .unwrap();
            },
        },
        // The rows from here on held before too (the `.git` link and file were refused, the
        // common directory checked after opening): kept so that they go on holding.
        Row {
            name: "`.git` linked to the outside repository's",
            spoil: |f| replace_with_link(&f.outside().join(".git"), &f.git_dir()),
        },
        Row {
            name: "`.git` a file naming the outside repository (absolute)",
            spoil: |f| {
                fs::remove_dir_all(f.git_dir()).unwrap();
                let target = f.outside().join(".git");
                fs::write(f.git_dir(), format!("gitdir: {}\n", target.display())).unwrap();
            },
        },
        Row {
            name: "`.git` a file naming the outside repository (relative, `../`)",
            spoil: |f| {
                fs::remove_dir_all(f.git_dir()).unwrap();
                fs::write(f.git_dir(), "gitdir: ../outside/.git\n").unwrap();
            },
        },
    ]
}

fn assert_no_canary(row: &str, printed: &str) {
    for canary in CANARIES {
        assert!(
            !printed.contains(canary),
            "{row}: `{canary}` was printed:\n{printed}"
        );
    }
}

/// Whether `strace` can make Landlock fail here (scripts/test-deps installs it).
fn can_fail_landlock() -> bool {
    Path::new("/usr/bin/strace").exists()
}

#[test]
fn a_repository_that_leads_outside_the_workspace_is_refused() {
    for row in hostile_rows() {
        let fixture = Fixture::new();
        (row.spoil)(&fixture);
        for landlock in [true, false] {
            if !landlock && !can_fail_landlock() {
                continue;
            }
            for (tool, args) in calls() {
                let (outcome, printed) = fixture.call(tool, &args, landlock);
                let what = format!("{} ({tool} {args}, landlock {landlock})", row.name);
                assert_no_canary(&what, &printed);
                assert_eq!(outcome["status"], "failed", "{what}: {printed}");
                assert_eq!(
                    outcome["error"]["code"], "repository_outside_workspace",
                    "{what}: {printed}"
                );
                let message = outcome["error"]["message"].as_str().unwrap();
                assert!(
                    !message.contains(&*fixture.base().to_string_lossy()),
                    "{what}: an absolute path in {message}"
                );
            }
        }
    }
}

/// What the refusal says names the file and why, in toolgate's words.
#[test]
fn the_refusal_names_the_file() {
    let fixture = Fixture::new();
    replace_with_link(&fixture.secret(), &fixture.git_dir().join("packed-refs"));
    let (outcome, _) = fixture.call("git_status", &json!({}), true);
    let message = outcome["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`.git/packed-refs` is a symbolic link"),
        "{message}"
    );

    let fixture = Fixture::new();
    fs::write(fixture.git_dir().join("objects/info/alternates"), "/x\n").unwrap();
    let (outcome, _) = fixture.call("git_diff", &json!({"staged": true}), true);
    let message = outcome["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("`.git/objects/info/alternates`") && message.contains("alternates"),
        "{message}"
    );
}

/// A file in `.git` that is not what it should be is reported by name and kind of problem,
/// never by what it holds.
#[test]
fn a_malformed_file_in_the_git_directory_is_not_quoted() {
    type Spoil = fn(&Fixture);
    let rows: [(&str, Spoil, &str); 4] = [
        (
            "packed-refs holding a secret",
            |f| fs::write(f.git_dir().join("packed-refs"), format!("{SECRET}\n")).unwrap(),
            "`.git/packed-refs`",
        ),
        (
            "HEAD holding a secret",
            |f| fs::write(f.git_dir().join("HEAD"), format!("{SECRET}\n")).unwrap(),
            "`.git/HEAD`",
        ),
        (
            "a branch holding a secret",
            |f| fs::write(f.git_dir().join("refs/heads/main"), format!("{SECRET}\n")).unwrap(),
            "`.git/refs/heads/main`",
        ),
        (
            "an index holding a secret",
            |f| fs::write(f.git_dir().join("index"), format!("DIRC{SECRET}\n")).unwrap(),
            "`.git/index`",
        ),
    ];
    for (name, spoil, names) in rows {
        let fixture = Fixture::new();
        spoil(&fixture);
        for (tool, args) in calls() {
            let (outcome, printed) = fixture.call(tool, &args, true);
            let what = format!("{name} ({tool} {args})");
            assert_no_canary(&what, &printed);
            assert_eq!(outcome["status"], "failed", "{what}: {printed}");
            let code = outcome["error"]["code"].as_str().unwrap();
            assert!(
                code == "git_error" || code == "not_a_repository",
                "{what}: {printed}"
            );
            let message = outcome["error"]["message"].as_str().unwrap();
            assert!(message.contains(names), "{what}: {message}");
        }
    }
    // A configuration that does not parse: gix reads none of its sections, and the tools
    // answer without it.
    let fixture = Fixture::new();
    fs::write(fixture.git_dir().join("config"), format!("{SECRET}\n")).unwrap();
    for (tool, args) in calls() {
        let (_, printed) = fixture.call(tool, &args, true);
        assert_no_canary(tool, &printed);
    }
}

/// The attack as it was made: `.git/packed-refs` linked to the console's token file of the
/// running server (here by the test, as an approved command did), then `git_status` and
/// `git_diff` called over MCP. Before, `git_status` answered with the token in gix's parser
/// error.
#[test]
fn the_console_token_never_comes_back_over_mcp() {
    let fixture = Fixture::new();
    let state = fixture.base().join("state");
    let served = Served::start_at(&fixture.ws(), "", &state);
    let token = fs::read_to_string(&served.token_file).unwrap();
    let token = token.trim();
    assert!(!token.is_empty());
    replace_with_link(&served.token_file, &fixture.git_dir().join("packed-refs"));
    let steps: Vec<Value> = calls()
        .into_iter()
        .map(|(tool, arguments)| json!({"op": "call", "tool": tool, "arguments": arguments}))
        .collect();
    let results = served.client(json!(steps)).steps();
    assert_eq!(results.len(), 3, "{results:?}");
    for result in &results {
        let printed = result.to_string();
        assert!(
            !printed.contains(token),
            "the console token came back: {printed}"
        );
        assert!(!printed.contains(&served.mcp_token), "{printed}");
        assert_eq!(result["isError"], true, "{printed}");
        assert!(
            printed.contains("repository_outside_workspace")
                && printed.contains("`.git/packed-refs` is a symbolic link"),
            "{printed}"
        );
    }
}

/// A FIFO where gix would read a file of `.git` is refused at once, before gix waits on it.
#[test]
fn a_fifo_in_the_git_directory_is_refused_at_once() {
    let fixture = Fixture::new();
    let packed = fixture.git_dir().join("packed-refs");
    let made = Command::new("mkfifo").arg(&packed).status().unwrap();
    assert!(made.success());
    for (tool, args) in calls() {
        let started = std::time::Instant::now();
        let (outcome, printed) = fixture.call(tool, &args, true);
        assert_eq!(outcome["error"]["code"], "git_error", "{tool}: {printed}");
        let message = outcome["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("`.git/packed-refs` is neither a file nor a directory"),
            "{message}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{tool} took {:?}",
            started.elapsed()
        );
    }
}

/// gix is opened isolated: no environment variable makes it read another repository.
#[test]
fn environment_variables_do_not_steer_the_git_tools() {
    let fixture = Fixture::new();
    let objects = fixture.outside().join(".git/objects");
    let outside_git = fixture.outside().join(".git");
    let outside_index = fixture.outside().join(".git/index");
    let outside = fixture.outside();
    let env = [
        ("GIT_DIR", outside_git.to_str().unwrap()),
        ("GIT_COMMON_DIR", outside_git.to_str().unwrap()),
        ("GIT_INDEX_FILE", outside_index.to_str().unwrap()),
        ("GIT_OBJECT_DIRECTORY", objects.to_str().unwrap()),
        (
            "GIT_ALTERNATE_OBJECT_DIRECTORIES",
            objects.to_str().unwrap(),
        ),
        ("GIT_WORK_TREE", outside.to_str().unwrap()),
    ];
    fs::write(fixture.ws().join("a.txt"), "changed\n").unwrap();
    for (tool, args) in calls() {
        let (outcome, printed) = fixture.call_with(tool, &args, true, &env);
        assert_no_canary(tool, &printed);
        assert_eq!(outcome["status"], "completed", "{tool}: {printed}");
    }
    let (status, _) = fixture.call_with("git_status", &json!({}), true, &env);
    assert_eq!(status["output"]["branch"], "main");
    assert_eq!(status["output"]["entries"][0]["path"], "a.txt");
}

/// Git's files in the working tree that name a directory elsewhere (an untracked nested
/// repository's `.git` file, a submodule's) are not followed into what is shown.
#[test]
fn a_nested_git_file_naming_a_directory_elsewhere_shows_nothing_of_it() {
    let fixture = Fixture::new();
    let outside_git = fixture.outside().join(".git");
    fs::create_dir_all(fixture.ws().join("nested")).unwrap();
    fs::write(
        fixture.ws().join("nested/.git"),
        format!("gitdir: {}\n", outside_git.display()),
    )
    .unwrap();
    for landlock in [true, false] {
        if !landlock && !can_fail_landlock() {
            continue;
        }
        for (tool, args) in calls() {
            let (outcome, printed) = fixture.call(tool, &args, landlock);
            assert_no_canary(tool, &printed);
            assert_eq!(outcome["status"], "completed", "{tool}: {printed}");
        }
    }
}

/// What gix opens, watched with strace: with the submodule checkout's `.git` file and an
/// untracked nested directory's both naming the repository outside, and the outside secret
/// reachable through a link in the working tree, nothing outside the workspace is opened.
#[test]
fn nothing_outside_the_workspace_is_opened() {
    if !can_fail_landlock() {
        return;
    }
    let fixture = Fixture::new();
    let base = fixture.base();
    let ws = fixture.ws();
    fixture.add_submodule();
    git(&ws, &["commit", "-q", "-m", "sub"]);
    let outside_git = fixture.outside().join(".git");
    let gitlink = format!("gitdir: {}\n", outside_git.display());
    fs::write(ws.join("sub/.git"), &gitlink).unwrap();
    fs::create_dir_all(ws.join("nested")).unwrap();
    fs::write(ws.join("nested/.git"), &gitlink).unwrap();
    symlink(fixture.secret(), ws.join("link")).unwrap();
    fs::write(ws.join("a.txt"), "a\nb\n").unwrap();

    for (tool, args) in calls() {
        let trace = base.join("trace.txt");
        let output = home::isolated(Command::new("/usr/bin/strace"))
            .args(["-f", "-qq", "-e", "trace=open,openat,openat2", "-o"])
            .arg(&trace)
            .arg(toolgate_bin())
            .envs(home::vars(&base.join("home")))
            .env("XDG_CONFIG_HOME", base.join("config"))
            .env("XDG_STATE_HOME", base.join("state"))
            .args(["call", "--json", "--workspace"])
            .arg(&ws)
            .args(["--tool", tool, "--args", &args.to_string()])
            .output()
            .unwrap();
        let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(outcome["status"], "completed", "{tool}: {outcome}");
        let trace = fs::read_to_string(&trace).unwrap();
        let outside = [
            fixture.outside().display().to_string(),
            fixture.secret().display().to_string(),
        ];
        let opened: Vec<&str> = trace
            .lines()
            .filter(|line| outside.iter().any(|path| line.contains(path.as_str())))
            .filter(|line| !line.contains("= -1 "))
            .collect();
        assert!(opened.is_empty(), "{tool} opened outside: {opened:#?}");
        // The probes were made, and refused.
        if tool == "git_status" {
            assert!(
                trace.contains(&format!("{}/HEAD", outside_git.display())),
                "gix no longer probes the nested repository: this test watches nothing"
            );
        }
    }
}

// --- Must keep working ---

fn completed(fixture: &Fixture, tool: &str, args: &Value) -> Value {
    let (outcome, printed) = fixture.call(tool, args, true);
    assert_eq!(outcome["status"], "completed", "{tool} {args}: {printed}");
    outcome["output"].clone()
}

fn paths(status: &Value) -> Vec<String> {
    status["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["path"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_ordinary_repository_still_answers() {
    let fixture = Fixture::new();
    fs::write(fixture.ws().join("a.txt"), "a\nb\n").unwrap();
    fs::write(fixture.ws().join("new.txt"), "new\n").unwrap();
    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(status["branch"], "main");
    assert_eq!(paths(&status), ["a.txt", "new.txt"]);
    let diff = completed(&fixture, "git_diff", &json!({}));
    assert!(diff["diff"].as_str().unwrap().contains("+b\n"), "{diff}");
}

#[test]
fn packed_references_and_a_collected_repository_still_answer() {
    let fixture = Fixture::new();
    let ws = fixture.ws();
    git(&ws, &["tag", "v1"]);
    git(&ws, &["pack-refs", "--all"]);
    assert!(!ws.join(".git/refs/heads/main").exists());
    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(status["branch"], "main");
    assert_eq!(status["clean"], true);

    fs::write(ws.join("a.txt"), "a\nstaged\n").unwrap();
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["commit", "-q", "-m", "second"]);
    fs::write(ws.join("a.txt"), "a\nstaged\nagain\n").unwrap();
    git(&ws, &["add", "a.txt"]);
    git(&ws, &["gc", "-q", "--prune=now"]);
    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(paths(&status), ["a.txt"]);
    let staged = completed(&fixture, "git_diff", &json!({"staged": true}));
    let text = staged["diff"].as_str().unwrap();
    assert!(
        text.contains("+again\n") && text.contains(" staged\n"),
        "{text}"
    );
}

#[test]
fn a_repository_with_a_submodule_still_answers() {
    let fixture = Fixture::new();
    let ws = fixture.ws();
    fixture.add_submodule();
    assert!(ws.join(".git/modules/sub").is_dir());
    assert!(ws.join("sub/.git").is_file());

    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(paths(&status), [".gitmodules", "sub"]);
    let staged = completed(&fixture, "git_diff", &json!({"staged": true}));
    let text = staged["diff"].as_str().unwrap();
    assert!(text.contains("+Subproject commit "), "{text}");

    git(&ws, &["commit", "-q", "-m", "sub"]);
    git(&ws, &["gc", "-q"]);
    fs::write(ws.join("a.txt"), "a\nb\n").unwrap();
    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(paths(&status), ["a.txt"]);
    completed(&fixture, "git_diff", &json!({}));
}

#[test]
fn a_repository_with_a_linked_worktree_still_answers() {
    let fixture = Fixture::new();
    let ws = fixture.ws();
    let linked = fixture.base().join("linked");
    git(&ws, &["worktree", "add", "-q", linked.to_str().unwrap()]);
    assert!(ws.join(".git/worktrees/linked/commondir").is_file());
    fs::write(ws.join("a.txt"), "a\nb\n").unwrap();
    let status = completed(&fixture, "git_status", &json!({}));
    assert_eq!(paths(&status), ["a.txt"]);
}
