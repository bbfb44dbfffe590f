//! `write_file` and `edit_file` through a real pipeline: read before write, stale files left
//! alone, the diff a person approves bound to what is written, atomic writes that keep the
//! mode and never go through a link.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/builtins.rs"]
mod builtins;

use std::fs;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _, symlink};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::*;

use builtins::pipeline;

type Hook = Box<dyn Fn(&ApprovalRequest) + Send + Sync>;

/// A person who approves everything, after `hook` has run (to change the world while the
/// request waits), offering the widest scope the request allows when `standing` is set.
struct Person {
    requests: Mutex<Vec<ApprovalRequest>>,
    hook: Mutex<Option<Hook>>,
    standing: bool,
}

impl std::fmt::Debug for Person {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Person")
    }
}

impl ApprovalBroker for Person {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.requests.lock().unwrap().push(request.clone());
        if let Some(hook) = self.hook.lock().unwrap().as_ref() {
            hook(request);
        }
        if self.standing && request.scope_allowed == GrantScope::WorkspaceAction {
            ApprovalDecision::AllowWorkspace
        } else {
            ApprovalDecision::AllowOnce
        }
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
    pipeline: Pipeline,
    person: Arc<Person>,
}

fn setup_with(standing: bool) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    fs::create_dir_all(ws.join("src")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(ws.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    fs::write(
        ws.join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n",
    )
    .unwrap();
    fs::write(outside.join("victim.txt"), "outside\n").unwrap();
    let person = Arc::new(Person {
        requests: Mutex::new(Vec::new()),
        hook: Mutex::new(None),
        standing,
    });
    let pipeline = pipeline(&ws, Arc::clone(&person) as Arc<dyn ApprovalBroker>);
    Setup {
        _dir: dir,
        ws,
        outside,
        pipeline,
        person,
    }
}

fn setup() -> Setup {
    setup_with(false)
}

impl Setup {
    fn call(&self, tool: &str, args: Value) -> Outcome {
        self.pipeline
            .run(RawCall::text(tool, args.to_string(), Surface::Chat))
    }

    fn digest(&self, path: &str) -> String {
        let outcome = self.call("read_file", json!({ "path": path }));
        outcome.output().unwrap()["digest"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn read(&self, path: &str) -> String {
        fs::read_to_string(self.ws.join(path)).unwrap()
    }

    fn requests(&self) -> Vec<ApprovalRequest> {
        self.person.requests.lock().unwrap().clone()
    }

    fn on_request(&self, hook: impl Fn(&ApprovalRequest) + Send + Sync + 'static) {
        *self.person.hook.lock().unwrap() = Some(Box::new(hook));
    }
}

fn rejected(outcome: &Outcome) -> (Stage, RejectCode) {
    let rejection = outcome
        .rejection()
        .unwrap_or_else(|| panic!("not rejected: {outcome:?}"));
    assert!(!outcome.evidence().durations_ns.contains_key("execute"));
    (rejection.stage(), rejection.code())
}

fn failed(outcome: &Outcome) -> &str {
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    outcome.error().unwrap().code.as_str()
}

/// Every name in `dir`, to show that no temporary file was left behind.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn creating_a_file_needs_no_digest_and_shows_the_whole_file_as_added() {
    let s = setup();
    let outcome = s.call(
        "write_file",
        json!({"path": "docs/new/guide.md", "content": "# Guide\n"}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let output = outcome.output().unwrap();
    assert_eq!(output["created"], true);
    assert_eq!(
        output["digest"],
        sha256_digest(b"# Guide\n").to_string(),
        "the digest is the one read_file will report"
    );
    assert_eq!(s.read("docs/new/guide.md"), "# Guide\n");
    let requests = s.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_eq!(request.effect, EffectClass::LocalWrite);
    let preview = request.preview.as_deref().unwrap();
    assert!(
        preview.starts_with("--- /dev/null\n+++ b/docs/new/guide.md\n"),
        "{preview}"
    );
    assert!(preview.contains("+# Guide\n"));
    assert!(
        request
            .resources
            .contains(&Resource::Create("docs/new/guide.md".to_owned()))
    );
    assert_eq!(names(&s.ws.join("docs/new")), ["guide.md"]);
}

#[test]
fn replacing_needs_the_digest_of_what_was_read_and_a_stale_one_changes_nothing() {
    let s = setup();
    let missing = s.call("write_file", json!({"path": "notes.txt", "content": "x\n"}));
    assert_eq!(
        rejected(&missing),
        (Stage::Validate, RejectCode::ReadRequired)
    );
    let rejection = missing.rejection().unwrap();
    assert!(
        rejection.hint().unwrap().contains("read_file"),
        "the hint says how to get a digest"
    );

    let digest = s.digest("notes.txt");
    fs::write(s.ws.join("notes.txt"), "someone else's work\n").unwrap();
    let stale = s.call(
        "write_file",
        json!({"path": "notes.txt", "content": "x\n", "expected_digest": digest}),
    );
    assert_eq!(rejected(&stale), (Stage::Validate, RejectCode::StaleWrite));
    assert_eq!(s.read("notes.txt"), "someone else's work\n");

    let wrong_text = s.call(
        "write_file",
        json!({"path": "notes.txt", "content": "x\n", "expected_content": "one\ntwo\nthree\n"}),
    );
    assert_eq!(
        rejected(&wrong_text),
        (Stage::Validate, RejectCode::StaleWrite)
    );
    let right_text = s.call(
        "write_file",
        json!({"path": "notes.txt", "content": "x\n", "expected_content": "someone else's work\n"}),
    );
    assert_eq!(right_text.status(), Status::Completed, "{right_text:?}");
    assert_eq!(s.read("notes.txt"), "x\n");
    assert!(
        s.requests().len() == 1,
        "only the good call reached a person"
    );
}

#[test]
fn edits_apply_once_each_and_chain_through_the_returned_digest() {
    let s = setup();
    let digest = s.digest("src/lib.rs");
    let outcome = s.call(
        "edit_file",
        json!({
            "path": "src/lib.rs",
            "expected_digest": digest,
            "edits": [
                {"old_text": "answer", "new_text": "reply"},
                {"old_text": "42", "new_text": "43"}
            ]
        }),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    assert_eq!(s.read("src/lib.rs"), "pub fn reply() -> u32 {\n    43\n}\n");
    let output = outcome.output().unwrap();
    assert_eq!(
        (
            output["lines_added"].as_u64(),
            output["lines_removed"].as_u64()
        ),
        (Some(2), Some(2))
    );
    let preview = s.requests()[0].preview.clone().unwrap();
    assert!(
        preview.contains("-pub fn answer() -> u32 {\n")
            && preview.contains("+pub fn reply() -> u32 {\n"),
        "{preview}"
    );

    let next = s.call(
        "edit_file",
        json!({
            "path": "src/lib.rs",
            "expected_digest": output["digest"],
            "edits": [{"old_text": "43", "new_text": "44"}]
        }),
    );
    assert_eq!(next.status(), Status::Completed, "{next:?}");
    assert_eq!(s.read("src/lib.rs"), "pub fn reply() -> u32 {\n    44\n}\n");
}

#[test]
fn an_edit_that_matches_zero_or_several_times_names_the_edit_and_the_count() {
    let s = setup();
    let digest = s.digest("notes.txt");
    let outcome = s.call(
        "edit_file",
        json!({
            "path": "notes.txt",
            "expected_digest": digest,
            "edits": [
                {"old_text": "t", "new_text": "T"},
                {"old_text": "four", "new_text": "4"}
            ]
        }),
    );
    assert_eq!(
        rejected(&outcome),
        (Stage::Validate, RejectCode::ConstraintViolation)
    );
    let rejection = outcome.rejection().unwrap();
    let details: Vec<(&str, &str)> = rejection
        .details()
        .iter()
        .map(|d| (d.pointer.as_str(), d.message.as_str()))
        .collect();
    assert_eq!(
        details,
        [
            (
                "/edits/0/old_text",
                "edit 1: `old_text` matches 2 times in `notes.txt`; it must match exactly once"
            ),
            (
                "/edits/1/old_text",
                "edit 2: `old_text` matches nothing in `notes.txt`"
            ),
        ]
    );
    let missing_digest = s.call(
        "edit_file",
        json!({"path": "notes.txt", "edits": [{"old_text": "one", "new_text": "1"}]}),
    );
    assert_eq!(
        rejected(&missing_digest),
        (Stage::Validate, RejectCode::ReadRequired)
    );
    assert_eq!(s.read("notes.txt"), "one\ntwo\nthree\n");
    assert!(s.requests().is_empty());
}

#[test]
fn a_file_changed_while_the_person_decides_is_not_overwritten() {
    let s = setup();
    let digest = s.digest("notes.txt");
    let path = s.ws.join("notes.txt");
    s.on_request(move |_| fs::write(&path, "edited meanwhile\n").unwrap());
    let outcome = s.call(
        "edit_file",
        json!({
            "path": "notes.txt",
            "expected_digest": digest,
            "edits": [{"old_text": "two", "new_text": "2"}]
        }),
    );
    assert_eq!(failed(&outcome), "stale_write");
    assert!(!outcome.unknowns().is_empty(), "{outcome:?}");
    assert_eq!(s.read("notes.txt"), "edited meanwhile\n");
    assert_eq!(names(&s.ws), ["notes.txt", "src"]);
}

#[test]
fn a_file_swapped_for_a_link_while_the_person_decides_is_not_written_through() {
    let s = setup();
    let digest = s.digest("notes.txt");
    let (path, victim) = (s.ws.join("notes.txt"), s.outside.join("victim.txt"));
    s.on_request(move |_| {
        fs::remove_file(&path).unwrap();
        symlink(&victim, &path).unwrap();
    });
    let outcome = s.call(
        "write_file",
        json!({"path": "notes.txt", "content": "pwned\n", "expected_digest": digest}),
    );
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    assert_eq!(
        fs::read_to_string(s.outside.join("victim.txt")).unwrap(),
        "outside\n"
    );
    assert!(
        fs::symlink_metadata(s.ws.join("notes.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_parent_swapped_for_a_link_out_is_refused_by_the_kernel() {
    let s = setup();
    let (src, outside) = (s.ws.join("src"), s.outside.clone());
    s.on_request(move |_| {
        fs::remove_dir_all(&src).unwrap();
        symlink(&outside, &src).unwrap();
    });
    let outcome = s.call(
        "write_file",
        json!({"path": "src/planted.rs", "content": "x\n"}),
    );
    assert_eq!(outcome.status(), Status::Failed, "{outcome:?}");
    assert!(!s.outside.join("planted.rs").exists());
}

#[test]
fn links_directories_and_escapes_are_refused_before_anyone_is_asked() {
    let s = setup();
    symlink("notes.txt", s.ws.join("inner_link")).unwrap();
    symlink(s.outside.join("victim.txt"), s.ws.join("outer_link")).unwrap();
    symlink(&s.outside, s.ws.join("outer_dir")).unwrap();
    let table = [
        (
            json!({"path": "inner_link", "content": "x"}),
            RejectCode::ConstraintViolation,
        ),
        (
            json!({"path": "outer_link", "content": "x"}),
            RejectCode::PathOutsideWorkspace,
        ),
        (
            json!({"path": "outer_dir/new.txt", "content": "x"}),
            RejectCode::PathOutsideWorkspace,
        ),
        (
            json!({"path": "src", "content": "x"}),
            RejectCode::ConstraintViolation,
        ),
        (
            json!({"path": "../outside/new.txt", "content": "x"}),
            RejectCode::PathOutsideWorkspace,
        ),
        (
            json!({"path": "/etc/passwd", "content": "x"}),
            RejectCode::PathOutsideWorkspace,
        ),
        (
            json!({"path": "%2e%2e/outside/new.txt", "content": "x"}),
            RejectCode::PathOutsideWorkspace,
        ),
        (
            json!({"path": "notes.txt", "content": "x", "expected_digest": "sha256:00", }),
            RejectCode::ConstraintViolation,
        ),
    ];
    for (args, code) in table {
        let outcome = s.call("write_file", args.clone());
        assert_eq!(rejected(&outcome), (Stage::Validate, code), "{args}");
    }
    assert!(s.requests().is_empty());
    assert_eq!(names(&s.outside), ["victim.txt"]);
    assert_eq!(
        fs::read_to_string(s.outside.join("victim.txt")).unwrap(),
        "outside\n"
    );
}

#[test]
fn sensitive_files_are_denied_by_their_rule() {
    let s = setup();
    for (path, rules) in [
        (".env", &["sensitive-dotenv"][..]),
        ("config/.env.production", &["sensitive-dotenv"]),
        // A hook is git's internals, and a file that git runs later.
        (
            ".git/hooks/pre-commit",
            &["runs-later-git", "sensitive-git-internals"],
        ),
        (".ssh/authorized_keys", &["sensitive-ssh-dir"]),
        ("deploy/server.key", &["sensitive-key"]),
        ("toolgate.toml", &["sensitive-toolgate-config"]),
    ] {
        let outcome = s.call("write_file", json!({"path": path, "content": "x\n"}));
        assert_eq!(
            rejected(&outcome),
            (Stage::Authorize, RejectCode::PolicyDenied),
            "{path}"
        );
        let mut named = outcome.rejection().unwrap().policies().to_vec();
        named.sort_unstable();
        assert_eq!(named, rules, "{path}");
        assert!(!s.ws.join(path).exists(), "{path}");
    }
    assert!(s.requests().is_empty());
}

#[test]
fn the_mode_is_kept_and_a_hard_link_from_outside_keeps_its_content() {
    let s = setup();
    let script = s.ws.join("run.sh");
    fs::write(&script, "echo one\n").unwrap();
    fs::set_permissions(&script, fs::Permissions::from_mode(0o750)).unwrap();
    fs::hard_link(&script, s.outside.join("hard.sh")).unwrap();
    let digest = s.digest("run.sh");
    let outcome = s.call(
        "edit_file",
        json!({"path": "run.sh", "expected_digest": digest, "edits": [{"old_text": "one", "new_text": "two"}]}),
    );
    assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
    let metadata = fs::metadata(&script).unwrap();
    assert_eq!(metadata.permissions().mode() & 0o7777, 0o750);
    assert_eq!(metadata.nlink(), 1, "the name now holds a new file");
    assert_eq!(s.read("run.sh"), "echo two\n");
    assert_eq!(
        fs::read_to_string(s.outside.join("hard.sh")).unwrap(),
        "echo one\n"
    );
}

#[test]
fn the_approval_is_bound_to_the_diff_and_the_pre_image() {
    let s = setup();
    let digest = s.digest("notes.txt");
    let edit = |new: &str| json!({"path": "notes.txt", "expected_digest": digest, "edits": [{"old_text": "two", "new_text": new}]});
    let first = s.call("edit_file", edit("2"));
    assert_eq!(first.status(), Status::Completed);
    // Same arguments, but the file has changed: a different pre-image, so it is stale.
    let again = s.call("edit_file", edit("2"));
    assert_eq!(rejected(&again), (Stage::Validate, RejectCode::StaleWrite));

    let s = setup();
    let digest = s.digest("notes.txt");
    s.pipeline.enter(|stages| {
        let call = |new: &str| {
            stages
                .authorize_call(RawCall::text(
                    "edit_file",
                    json!({"path": "notes.txt", "expected_digest": digest, "edits": [{"old_text": "two", "new_text": new}]})
                        .to_string(),
                    Surface::Chat,
                ))
                .unwrap()
        };
        let (a, b) = (call("2"), call("II"));
        let requests = s.requests();
        assert_ne!(requests[0].digest, requests[1].digest);
        assert!(requests[0].preview.as_deref().unwrap().contains("+2\n"));
        assert!(requests[1].preview.as_deref().unwrap().contains("+II\n"));
        let diff_of = |r: &ApprovalRequest| {
            r.resources
                .iter()
                .find(|x| matches!(x, Resource::Diff(_)))
                .cloned()
                .unwrap()
        };
        assert_ne!(diff_of(&requests[0]), diff_of(&requests[1]));
        // Revoking the grant of one leaves it unusable; the other still runs.
        s.pipeline
            .grants()
            .revoke(a.approval_id().unwrap())
            .unwrap();
        let cx = ExecContext::new(Duration::from_secs(5), Cancel::new());
        let refused = stages.execute(a, &cx);
        assert_eq!(
            refused.rejection().unwrap().code(),
            RejectCode::ApprovalInvalid
        );
        let ran = stages.execute(b, &cx);
        assert_eq!(ran.status(), Status::Completed, "{ran:?}");
    });
    assert_eq!(s.read("notes.txt"), "one\nII\nthree\n");
}

#[test]
fn a_workspace_grant_covers_later_edits_of_the_same_tool_only() {
    let s = setup_with(true);
    let first = s.call(
        "edit_file",
        json!({"path": "notes.txt", "expected_digest": s.digest("notes.txt"), "edits": [{"old_text": "one", "new_text": "1"}]}),
    );
    assert_eq!(first.status(), Status::Completed, "{first:?}");
    let second = s.call(
        "edit_file",
        json!({"path": "notes.txt", "expected_digest": s.digest("notes.txt"), "edits": [{"old_text": "two", "new_text": "2"}]}),
    );
    assert_eq!(second.status(), Status::Completed, "{second:?}");
    assert_eq!(
        s.requests().len(),
        1,
        "the standing grant answered the second"
    );
    let write = s.call("write_file", json!({"path": "other.txt", "content": "x"}));
    assert_eq!(write.status(), Status::Completed);
    assert_eq!(s.requests().len(), 2, "another tool asks again");
}

#[test]
fn the_readonly_profile_cannot_see_or_call_writing_tools() {
    let s = setup();
    let visible: Vec<String> = s
        .pipeline
        .registry()
        .visible(toolgate_core::registry::READONLY_PROFILE)
        .map(|tool| tool.entry().name.clone())
        .collect();
    assert!(visible.contains(&"read_file".to_owned()));
    for name in ["write_file", "edit_file"] {
        assert!(!visible.contains(&name.to_owned()), "{name}");
        let outcome = s.pipeline.run(
            RawCall::text(
                name,
                json!({"path": "n.txt", "content": "x"}).to_string(),
                Surface::Chat,
            )
            .in_profile("readonly"),
        );
        assert_eq!(
            rejected(&outcome),
            (Stage::Resolve, RejectCode::NotInProfile)
        );
    }
}
