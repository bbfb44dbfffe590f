//! The three builtin tools driven through a real pipeline over a temporary workspace: what
//! they return, and what never reaches them.

#![cfg(test)]

#[path = "../../../tests/support/builtins.rs"]
mod builtins;

use std::fs;
use std::os::unix::fs::symlink;
use std::sync::Arc;

use serde_json::{Value, json};
use toolgate_core::*;

use builtins::pipeline;

/// A temporary directory with `ws/` (the workspace) and `outside/` beside it.
struct Fixture {
    dir: tempfile::TempDir,
    pipeline: Pipeline,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        for sub in ["src/nested", "ignored", "docs", ".git", "sub"] {
            fs::create_dir_all(ws.join(sub)).unwrap();
        }
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("small.txt"), "Hello, world!\nsecond line\n").unwrap();
        let ten: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        fs::write(ws.join("ten.txt"), ten).unwrap();
        fs::write(ws.join("no_newline.txt"), "one\ntwo").unwrap();
        fs::write(ws.join(".gitignore"), "ignored/\n*.log\n").unwrap();
        fs::write(ws.join("ignored/hidden_match.txt"), "needle in ignored\n").unwrap();
        fs::write(ws.join("build.log"), "needle in log\n").unwrap();
        fs::write(ws.join(".git/config"), "needle in git\n").unwrap();
        fs::write(ws.join(".env"), "needle in a secret file\n").unwrap();
        fs::write(ws.join(".hidden_notes"), "needle in dotfile\n").unwrap();
        fs::write(
            ws.join("src/lib.rs"),
            "pub fn answer() -> u32 {\n    42 // Needle\n}\n",
        )
        .unwrap();
        fs::write(ws.join("src/nested/deep.rs"), "fn deep() {} // needle\n").unwrap();
        fs::write(ws.join("docs/guide.md"), "A NEEDLE in the docs\n").unwrap();
        fs::write(ws.join("binary.bin"), b"needle\0\x9f\x92\x96").unwrap();
        fs::write(ws.join("latin1.txt"), b"caf\xe9\n").unwrap();
        fs::write(outside.join("secret.txt"), "needle outside the workspace\n").unwrap();
        symlink("small.txt", ws.join("link_in")).unwrap();
        symlink(outside.join("secret.txt"), ws.join("link_out")).unwrap();
        symlink("link_out", ws.join("link_chain")).unwrap();
        symlink(&outside, ws.join("dir_out")).unwrap();
        symlink("../outside", ws.join("rel_out")).unwrap();
        symlink("..", ws.join("sub/up")).unwrap();
        symlink("../../outside/secret.txt", ws.join("sub/deep_out")).unwrap();
        let pipeline = pipeline(&ws, Arc::new(HeadlessBroker));
        Fixture { dir, pipeline }
    }

    fn ws(&self) -> std::path::PathBuf {
        self.dir.path().join("ws")
    }

    fn run(&self, tool: &str, arguments: Value) -> Outcome {
        self.pipeline
            .run(RawCall::text(tool, arguments.to_string(), Surface::Chat))
    }

    /// The output of a call that must complete.
    fn output(&self, tool: &str, arguments: Value) -> Value {
        let outcome = self.run(tool, arguments.clone());
        assert_eq!(
            outcome.status(),
            Status::Completed,
            "{tool} {arguments}: {}",
            outcome.summary()
        );
        outcome.into_output().unwrap()
    }

    /// The error code of a call that must fail in the tool.
    fn error(&self, tool: &str, arguments: Value) -> String {
        let outcome = self.run(tool, arguments.clone());
        assert_eq!(
            outcome.status(),
            Status::Failed,
            "{tool} {arguments}: {}",
            outcome.summary()
        );
        outcome.error().unwrap().code.to_string()
    }

    /// The rejection of a call that must be stopped before it runs.
    fn rejection(&self, tool: &str, arguments: Value) -> Rejection {
        let outcome = self.run(tool, arguments.clone());
        assert!(
            !outcome.evidence().durations_ns.contains_key("execute"),
            "{tool} {arguments} was executed"
        );
        outcome
            .rejection()
            .cloned()
            .unwrap_or_else(|| panic!("{tool} {arguments} was not rejected"))
    }
}

fn paths(matches_or_entries: &Value) -> Vec<&str> {
    matches_or_entries
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect()
}

// read_file

#[test]
fn read_file_returns_content_and_a_digest_of_the_whole_file() {
    let fx = Fixture::new();
    let output = fx.output("read_file", json!({"path": "small.txt"}));
    let bytes = fs::read(fx.ws().join("small.txt")).unwrap();
    assert_eq!(output["path"], "small.txt");
    assert_eq!(output["content"], "Hello, world!\nsecond line\n");
    assert_eq!(output["offset"], 1);
    assert_eq!(output["lines_returned"], 2);
    assert_eq!(output["total_lines"], 2);
    assert_eq!(output["digest"], sha256_digest(&bytes).as_str());
    assert_eq!(output["truncated"], false);
}

#[test]
fn read_file_offset_and_limit_select_lines_and_keep_the_whole_digest() {
    let fx = Fixture::new();
    let output = fx.output(
        "read_file",
        json!({"path": "ten.txt", "offset": 3, "limit": 2}),
    );
    assert_eq!(output["content"], "line 3\nline 4\n");
    assert_eq!(output["offset"], 3);
    assert_eq!(output["lines_returned"], 2);
    assert_eq!(output["total_lines"], 10);
    let bytes = fs::read(fx.ws().join("ten.txt")).unwrap();
    assert_eq!(output["digest"], sha256_digest(&bytes).as_str());

    let tail = fx.output("read_file", json!({"path": "ten.txt", "offset": 9}));
    assert_eq!(tail["content"], "line 9\nline 10\n");
    let last = fx.output("read_file", json!({"path": "no_newline.txt", "offset": 2}));
    assert_eq!(last["content"], "two");
    assert_eq!(last["total_lines"], 2);

    assert_eq!(
        fx.error("read_file", json!({"path": "ten.txt", "offset": 11})),
        "offset_out_of_range"
    );
}

#[test]
fn read_file_truncates_at_256_kib_on_a_line_boundary() {
    let fx = Fixture::new();
    // 300 KiB of 100-byte lines.
    let line = format!("{}\n", "x".repeat(99));
    let text = line.repeat(3 * 1024);
    fs::write(fx.ws().join("big.txt"), &text).unwrap();
    let outcome = fx.run("read_file", json!({"path": "big.txt"}));
    assert_eq!(outcome.status(), Status::Completed);
    assert!(outcome.evidence().truncated);
    let output = outcome.output().unwrap();
    let content = output["content"].as_str().unwrap();
    assert_eq!(output["truncated"], true);
    assert!(content.len() <= 256 * 1024);
    assert!(content.len() > 250 * 1024);
    assert!(content.ends_with('\n'));
    assert_eq!(output["lines_returned"], content.len() / 100);
    assert_eq!(output["total_lines"], 3 * 1024);
    assert_eq!(output["digest"], sha256_digest(text.as_bytes()).as_str());
}

/// A read ends soon (and may run where its request arrived) up to 64 KiB, as stage 3 saw the
/// file; a larger file, and only a file, is read elsewhere. The read itself is the same.
#[test]
fn read_file_is_brief_up_to_64_kib() {
    let fx = Fixture::new();
    let line = format!("{}\n", "y".repeat(1023));
    fs::write(fx.ws().join("at_most.txt"), line.repeat(64)).unwrap();
    fs::write(fx.ws().join("over.txt"), line.repeat(65)).unwrap();
    // Whether the call ends soon, and its outcome once finished.
    let finished = |path: &str| {
        let raw = RawCall::text(
            "read_file",
            json!({"path": path}).to_string(),
            Surface::Chat,
        );
        fx.pipeline.enter(|stages| {
            let call = match stages.decide(raw, None) {
                Decided::Permitted(permitted) => permitted,
                Decided::Ended(outcome) => panic!("{path}: {}", outcome.summary()),
            };
            let soon = call.ends_soon();
            let Finished::Ended(outcome) = stages.finish(call, Cancel::new(), &Watch::default())
            else {
                panic!("{path}: a builtin is never forwarded");
            };
            (soon, outcome)
        })
    };
    for (path, brief) in [
        ("small.txt", true),
        ("at_most.txt", true),
        ("over.txt", false),
        // Not a file: it fails at once, wherever it runs.
        ("src", true),
        ("missing.txt", true),
    ] {
        let (soon, outcome) = finished(path);
        assert_eq!(soon, brief, "{path}");
        let completed = outcome.status() == Status::Completed;
        assert_eq!(
            completed,
            path.ends_with(".txt") && path != "missing.txt",
            "{path}"
        );
    }
    assert_eq!(
        fx.output("read_file", json!({"path": "over.txt", "limit": 1}))["total_lines"],
        65
    );
}

#[test]
fn read_file_refuses_what_is_not_text() {
    let fx = Fixture::new();
    assert_eq!(
        fx.error("read_file", json!({"path": "src"})),
        "is_a_directory"
    );
    assert_eq!(
        fx.error("read_file", json!({"path": "."})),
        "is_a_directory"
    );
    assert_eq!(
        fx.error("read_file", json!({"path": "binary.bin"})),
        "not_utf8"
    );
    assert_eq!(
        fx.error("read_file", json!({"path": "latin1.txt"})),
        "not_utf8"
    );
    assert_eq!(
        fx.error("read_file", json!({"path": "missing.txt"})),
        "not_found"
    );
    assert_eq!(
        fx.error("read_file", json!({"path": "small.txt/below"})),
        "not_found"
    );
    let huge = fs::File::create(fx.ws().join("huge.txt")).unwrap();
    huge.set_len(17 * 1024 * 1024).unwrap();
    assert_eq!(
        fx.error("read_file", json!({"path": "huge.txt"})),
        "too_large"
    );
}

#[test]
fn read_file_follows_links_that_stay_inside_and_names_their_target() {
    let fx = Fixture::new();
    let outcome = fx.run("read_file", json!({"path": "link_in"}));
    assert_eq!(outcome.status(), Status::Completed, "{}", outcome.summary());
    assert_eq!(
        outcome.output().unwrap()["content"],
        "Hello, world!\nsecond line\n"
    );
    // A policy about `small.txt` sees it even when it is reached through a link.
    assert_eq!(
        outcome.evidence().resources,
        ["path:link_in", "path:small.txt"]
    );
}

#[test]
fn read_file_is_in_the_readonly_profile() {
    let fx = Fixture::new();
    let outcome = fx.pipeline.run(
        RawCall::text("read_file", r#"{"path": "small.txt"}"#, Surface::Chat)
            .in_profile("readonly"),
    );
    assert_eq!(outcome.status(), Status::Completed, "{}", outcome.summary());
}

#[test]
fn a_cancelled_call_stops_with_cancelled() {
    let fx = Fixture::new();
    for (tool, arguments) in [
        ("read_file", json!({"path": "small.txt"})),
        ("list_dir", json!({})),
        ("search_text", json!({"pattern": "needle"})),
    ] {
        let outcome = fx.pipeline.run_cancellable(
            RawCall::text(tool, arguments.to_string(), Surface::Chat),
            Cancel::given(),
        );
        assert_eq!(outcome.status(), Status::Failed, "{tool}");
        assert_eq!(outcome.error().unwrap().code, "cancelled", "{tool}");
    }
}

// list_dir

#[test]
fn list_dir_respects_gitignore_and_hides_git_but_shows_dotfiles() {
    let fx = Fixture::new();
    let output = fx.output("list_dir", json!({}));
    assert_eq!(output["path"], ".");
    assert_eq!(output["truncated"], false);
    assert_eq!(
        paths(&output["entries"]),
        [
            ".env",
            ".gitignore",
            ".hidden_notes",
            "binary.bin",
            "dir_out",
            "docs",
            "latin1.txt",
            "link_chain",
            "link_in",
            "link_out",
            "no_newline.txt",
            "rel_out",
            "small.txt",
            "src",
            "sub",
            "ten.txt",
        ]
    );
    let entries = output["entries"].as_array().unwrap();
    let entry = |path: &str| entries.iter().find(|e| e["path"] == path).unwrap().clone();
    assert_eq!(
        entry("small.txt"),
        json!({"path": "small.txt", "kind": "file", "size": 26})
    );
    assert_eq!(entry("src"), json!({"path": "src", "kind": "dir"}));
    assert_eq!(
        entry("dir_out"),
        json!({"path": "dir_out", "kind": "symlink"})
    );
}

#[test]
fn list_dir_descends_to_depth_and_reports_workspace_paths() {
    let fx = Fixture::new();
    let output = fx.output("list_dir", json!({"path": "src", "depth": 2}));
    assert_eq!(
        paths(&output["entries"]),
        ["src/lib.rs", "src/nested", "src/nested/deep.rs"]
    );
    let shallow = fx.output("list_dir", json!({"path": "./src/"}));
    assert_eq!(paths(&shallow["entries"]), ["src/lib.rs", "src/nested"]);
    // Links are listed, never followed: nothing from outside appears at any depth.
    let everything = fx.output("list_dir", json!({"depth": 8}));
    for path in paths(&everything["entries"]) {
        assert!(!path.contains("secret"), "{path}");
    }
}

#[test]
fn list_dir_bounds_entries_and_lists_an_ignored_directory_named_explicitly() {
    let fx = Fixture::new();
    let output = fx.output("list_dir", json!({"max_entries": 2}));
    assert_eq!(paths(&output["entries"]), [".env", ".gitignore"]);
    assert_eq!(output["truncated"], true);

    let ignored = fx.output("list_dir", json!({"path": "ignored"}));
    assert_eq!(paths(&ignored["entries"]), ["ignored/hidden_match.txt"]);

    assert_eq!(
        fx.error("list_dir", json!({"path": "small.txt"})),
        "not_a_directory"
    );
    assert_eq!(fx.error("list_dir", json!({"path": "nope"})), "not_found");
}

// search_text

#[test]
fn search_text_finds_literals_ignoring_case_and_skips_ignored_git_and_binary_files() {
    let fx = Fixture::new();
    let output = fx.output("search_text", json!({"pattern": "needle"}));
    assert_eq!(output["pattern"], "needle");
    assert_eq!(output["truncated"], false);
    assert_eq!(
        output["matches"],
        json!([
            {"path": ".hidden_notes", "line": 1, "text": "needle in dotfile"},
            {"path": "docs/guide.md", "line": 1, "text": "A NEEDLE in the docs"},
            {"path": "src/lib.rs", "line": 2, "text": "    42 // Needle"},
            {"path": "src/nested/deep.rs", "line": 1, "text": "fn deep() {} // needle"},
        ])
    );
    assert!(output["files_searched"].as_u64().unwrap() >= 5);
    // `.env` holds a needle too, but a search must not read what a read may not.
    assert_eq!(output["sensitive_files_skipped"], 1);
}

#[test]
fn search_text_options_narrow_the_search() {
    let fx = Fixture::new();
    let sensitive = fx.output(
        "search_text",
        json!({"pattern": "Needle", "case_sensitive": true}),
    );
    assert_eq!(paths(&sensitive["matches"]), ["src/lib.rs"]);

    let regex = fx.output(
        "search_text",
        json!({"pattern": r"fn \w+\(\)", "regex": true}),
    );
    assert_eq!(
        paths(&regex["matches"]),
        ["src/lib.rs", "src/nested/deep.rs"]
    );
    let literal = fx.output("search_text", json!({"pattern": r"fn \w+\(\)"}));
    assert_eq!(paths(&literal["matches"]), Vec::<&str>::new());

    let glob = fx.output("search_text", json!({"pattern": "needle", "glob": "*.md"}));
    assert_eq!(paths(&glob["matches"]), ["docs/guide.md"]);
    let excluded = fx.output("search_text", json!({"pattern": "needle", "glob": "!*.rs"}));
    assert_eq!(
        paths(&excluded["matches"]),
        [".hidden_notes", "docs/guide.md"]
    );

    let under = fx.output(
        "search_text",
        json!({"pattern": "needle", "path": "src/nested"}),
    );
    assert_eq!(paths(&under["matches"]), ["src/nested/deep.rs"]);
    let one_file = fx.output(
        "search_text",
        json!({"pattern": "needle", "path": "src/lib.rs"}),
    );
    assert_eq!(paths(&one_file["matches"]), ["src/lib.rs"]);
    assert_eq!(one_file["files_searched"], 1);

    let bounded = fx.output(
        "search_text",
        json!({"pattern": "needle", "max_results": 2}),
    );
    assert_eq!(
        paths(&bounded["matches"]),
        [".hidden_notes", "docs/guide.md"]
    );
    assert_eq!(bounded["truncated"], true);
}

/// Many files are searched by several threads at once; the results are still exactly what
/// one thread searching in path order finds, and a search that fills up stops where it would.
#[test]
fn search_text_over_many_files_keeps_path_order_and_stops_where_one_thread_would() {
    let fx = Fixture::new();
    let tree = fx.ws().join("tree");
    // Names of one width, so that the walk's order (by name, depth first) is the paths' order.
    let mut expected = Vec::new();
    let mut files = 0;
    for d in 0..12 {
        fs::create_dir_all(tree.join(format!("d{d:02}"))).unwrap();
        for f in 0..40 {
            let rel = format!("tree/d{d:02}/f{f:02}.txt");
            let n = (d * 40 + f) % 5;
            let mut text: String = (0..n)
                .map(|i| format!("pin {i} of {rel}\nfiller\n"))
                .collect();
            // A binary file is skipped whole, even after a match.
            let binary = (d * 40 + f) % 11 == 3;
            if binary {
                text.push('\0');
            }
            // Sizes vary, so that one thread gets ahead of the other.
            text.push_str(&"x".repeat(((d * 40 + f) % 7) * 20_000));
            fs::write(fx.ws().join(&rel), text).unwrap();
            files += 1;
            if !binary {
                expected.extend((0..n).map(|i| (rel.clone(), format!("pin {i} of {rel}"), files)));
            }
        }
    }
    assert!(expected.len() > 500, "{}", expected.len());
    let lines = |output: &Value| -> Vec<(String, String)> {
        output["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["path"].as_str().unwrap().to_owned(),
                    m["text"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    let all = fx.output(
        "search_text",
        json!({"pattern": "pin", "path": "tree", "max_results": 1000}),
    );
    let want: Vec<(String, String)> = expected
        .iter()
        .map(|(p, t, _)| (p.clone(), t.clone()))
        .collect();
    assert_eq!(lines(&all), want);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["files_searched"], files);

    for max in [1, 37, 150, 400] {
        let some = fx.output(
            "search_text",
            json!({"pattern": "PIN", "path": "tree", "max_results": max}),
        );
        assert_eq!(lines(&some), want[..max], "max_results {max}");
        assert_eq!(some["truncated"], true);
        // Searched up to the file whose match did not fit, and no further.
        assert_eq!(some["files_searched"], expected[max].2, "max_results {max}");
    }
}

#[test]
fn search_text_cuts_long_lines() {
    let fx = Fixture::new();
    fs::write(
        fx.ws().join("long.txt"),
        format!("needle{}\n", "é".repeat(1000)),
    )
    .unwrap();
    let output = fx.output(
        "search_text",
        json!({"pattern": "needle", "path": "long.txt"}),
    );
    let text = output["matches"][0]["text"].as_str().unwrap();
    assert_eq!(text.chars().count(), 500);
}

#[test]
fn search_text_rejects_bad_patterns_and_globs_before_running() {
    let fx = Fixture::new();
    let rejection = fx.rejection(
        "search_text",
        json!({"pattern": "(unclosed", "regex": true}),
    );
    assert_eq!(rejection.code(), RejectCode::ConstraintViolation);
    assert_eq!(rejection.stage(), Stage::Validate);
    assert_eq!(rejection.details()[0].pointer, "/pattern");

    let rejection = fx.rejection("search_text", json!({"pattern": "a", "glob": "[unclosed"}));
    assert_eq!(rejection.code(), RejectCode::ConstraintViolation);
    assert_eq!(rejection.details()[0].pointer, "/glob");
}

// Sensitive directories

/// A console token, as toolgate writes one.
const TOKEN: &str = "5f0c8d7e6b5a49382716a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

impl Fixture {
    /// Toolgate's state directory at `.local/state/toolgate`, as in a workspace at `$HOME`,
    /// with links into it; and the pipeline `toolgate serve` would build for that workspace.
    fn with_state(&self) -> Pipeline {
        let ws = self.ws();
        fs::create_dir_all(ws.join(".local/state/toolgate/nested")).unwrap();
        fs::write(
            ws.join(".local/state/toolgate/console-4242.token"),
            format!("{TOKEN}\n"),
        )
        .unwrap();
        fs::write(
            ws.join(".local/state/toolgate/grants-0123456789abcdef.json"),
            "[{\"tool\": \"write_file\", \"note\": \"needle in a grant\"}]\n",
        )
        .unwrap();
        fs::write(ws.join(".local/state/toolgate/nested/audit.db"), "needle\n").unwrap();
        fs::write(
            ws.join(".local/state/notes.txt"),
            "needle beside the state\n",
        )
        .unwrap();
        fs::create_dir_all(ws.join(".ssh")).unwrap();
        fs::write(ws.join(".ssh/id_ed25519"), "needle in a key\n").unwrap();
        fs::create_dir_all(ws.join(".gnupg/private-keys-v1.d")).unwrap();
        fs::write(
            ws.join(".gnupg/private-keys-v1.d/ab12.key"),
            "needle in a keyring\n",
        )
        .unwrap();
        fs::create_dir_all(ws.join("ops/.kube")).unwrap();
        fs::write(ws.join("ops/.kube/config"), "needle in a cluster\n").unwrap();
        let account = ws.join(".config/gcloud/legacy_credentials/me@example.com");
        fs::create_dir_all(&account).unwrap();
        fs::write(account.join("adc.json"), "needle in a cloud\n").unwrap();
        symlink(
            ".local/state/toolgate/console-4242.token",
            ws.join("token_link"),
        )
        .unwrap();
        symlink("../.local/state/toolgate", ws.join("docs/state_link")).unwrap();
        pipeline(&ws, Arc::new(HeadlessBroker))
            .with_sensitivity(Sensitivity::default().with_config_dir(".local/state/toolgate"))
    }
}

#[test]
fn a_state_directory_in_the_workspace_is_pruned_from_every_listing_and_search() {
    let fx = Fixture::new();
    let pipeline = fx.with_state();
    let calls = [
        (
            "search_text",
            json!({"pattern": "^[0-9a-f]{64}$", "regex": true}),
        ),
        ("search_text", json!({"pattern": "needle"})),
        (
            "search_text",
            json!({"pattern": "needle", "path": ".local"}),
        ),
        ("search_text", json!({"pattern": "needle", "path": "docs"})),
        ("list_dir", json!({"depth": 8})),
        ("list_dir", json!({"path": ".local", "depth": 8})),
        ("list_dir", json!({"path": ".local/state"})),
        ("list_dir", json!({"path": "docs"})),
    ];
    for (tool, arguments) in calls {
        let outcome = pipeline.run(RawCall::text(tool, arguments.to_string(), Surface::Chat));
        assert_eq!(
            outcome.status(),
            Status::Completed,
            "{tool} {arguments}: {outcome:?}"
        );
        let text = serde_json::to_string(&outcome).unwrap();
        for secret in [
            TOKEN,
            "toolgate",
            "console-",
            "grants-",
            "audit.db",
            "in a grant",
            "token_link",
            "state_link",
            ".ssh",
            "in a key",
            ".gnupg",
            "keyring",
            ".kube",
            "in a cluster",
            "gcloud",
            "me@example.com",
            "in a cloud",
        ] {
            assert!(
                !text.contains(secret),
                "{tool} {arguments}: `{secret}` in {text}"
            );
        }
        if tool == "search_text" {
            // Not counted either: only `.env`, which a listing names, is a skipped file.
            let skipped = if arguments.get("path").is_none() {
                1
            } else {
                0
            };
            assert_eq!(
                outcome.output().unwrap()["sensitive_files_skipped"],
                skipped,
                "{tool} {arguments}"
            );
        }
    }
    // What lies beside the state directory is still there.
    let beside = pipeline.run(RawCall::text(
        "list_dir",
        r#"{"path": ".local/state"}"#,
        Surface::Chat,
    ));
    assert_eq!(
        paths(&beside.output().unwrap()["entries"]),
        [".local/state/notes.txt"]
    );
    // The directory, what is in it, and the links into it, named: refused by the policy.
    for (tool, path) in [
        ("list_dir", ".local/state/toolgate"),
        ("search_text", ".local/state/toolgate"),
        ("read_file", ".local/state/toolgate/console-4242.token"),
        ("read_file", "token_link"),
        ("list_dir", "docs/state_link"),
    ] {
        let arguments = json!({"path": path, "pattern": "x"});
        let mut arguments = arguments.as_object().unwrap().clone();
        if tool != "search_text" {
            arguments.remove("pattern");
        }
        let outcome = pipeline.run(RawCall::text(
            tool,
            Value::Object(arguments).to_string(),
            Surface::Chat,
        ));
        assert_eq!(
            outcome.rejection().map(|r| r.policies().to_vec()),
            Some(vec!["sensitive-toolgate-config".to_owned()]),
            "{tool} {path}"
        );
    }
    // Without the state directory's sensitivity, the same search finds the token: the
    // fixture holds what the calls above must not show.
    let unaware = fx.output(
        "search_text",
        json!({"pattern": "^[0-9a-f]{64}$", "regex": true}),
    );
    assert_eq!(
        paths(&unaware["matches"]),
        [".local/state/toolgate/console-4242.token"]
    );
}

#[test]
fn a_link_to_a_sensitive_file_is_listed_as_one_and_never_searched() {
    let fx = Fixture::new();
    symlink(".env", fx.ws().join("env_link")).unwrap();
    symlink("docs", fx.ws().join("docs_link")).unwrap();
    let listed = fx.output("list_dir", json!({}));
    let names = paths(&listed["entries"]);
    assert!(names.contains(&"env_link"), "{names:?}");
    // Searching through a link to a directory searches where it leads, as read_file reads.
    let through = fx.output(
        "search_text",
        json!({"pattern": "needle", "path": "docs_link"}),
    );
    assert_eq!(paths(&through["matches"]), ["docs/guide.md"]);
    let rejection = fx.rejection("read_file", json!({"path": "env_link"}));
    assert_eq!(rejection.policies(), ["sensitive-dotenv"]);
}

// Hostile paths

#[test]
fn hostile_paths_are_rejected_at_validate_for_every_tool() {
    let fx = Fixture::new();
    let outside = [
        "../x",
        "../outside/secret.txt",
        "src/../../outside/secret.txt",
        "src/../small.txt",
        "/etc/passwd",
        "//etc/passwd",
        "%2e%2e/x",
        "%2E%2E%2Foutside",
        "..%2foutside",
        "%252e%252e%252foutside",
        "%c0%ae%c0%ae/outside",
        "..\\outside\\secret.txt",
        "．．/outside",
        "．．\\outside",
        "..／outside",
        "\u{2024}\u{2024}/outside",
        "\u{2025}/outside",
        "C:\\Windows\\win.ini",
        "c:/windows",
        "\\\\server\\share",
        "~/.ssh/id_rsa",
        "file:///etc/passwd",
        "link_out",
        "link_chain",
        "dir_out",
        "dir_out/secret.txt",
        "rel_out/secret.txt",
        "sub/deep_out",
        "sub/up/../outside",
    ];
    let invalid = ["a\u{0}b", "small.txt\u{0}.png", "a\u{1b}[2J", "a%00b"];
    for tool in ["read_file", "list_dir", "search_text"] {
        let arguments = |path: &str| match tool {
            "search_text" => json!({"pattern": "needle", "path": path}),
            _ => json!({"path": path}),
        };
        for path in outside {
            let rejection = fx.rejection(tool, arguments(path));
            assert_eq!(
                (rejection.stage(), rejection.code()),
                (Stage::Validate, RejectCode::PathOutsideWorkspace),
                "{tool} `{path}`: {rejection}"
            );
            assert_eq!(rejection.details()[0].pointer, "/path");
        }
        for path in invalid {
            let rejection = fx.rejection(tool, arguments(path));
            assert_eq!(
                (rejection.stage(), rejection.code()),
                (Stage::Validate, RejectCode::ConstraintViolation),
                "{tool} `{}`: {rejection}",
                path.escape_debug()
            );
        }
    }
}

#[test]
fn a_symlink_escape_is_explained() {
    let fx = Fixture::new();
    let rejection = fx.rejection("read_file", json!({"path": "dir_out/secret.txt"}));
    assert!(
        rejection.message().contains("`dir_out` is a symbolic link"),
        "{}",
        rejection.message()
    );
    assert!(
        rejection
            .hint()
            .unwrap()
            .contains("relative to the workspace root")
    );
}

#[test]
fn a_misspelt_argument_gets_a_suggestion() {
    let fx = Fixture::new();
    let rejection = fx.rejection("read_file", json!({"file_path": "small.txt"}));
    assert_eq!(rejection.code(), RejectCode::UnknownArgument);
    assert_eq!(rejection.stage(), Stage::Validate);
    assert_eq!(rejection.hint(), Some("did you mean `path`?"));
}

#[test]
fn out_of_range_arguments_are_rejected_by_the_schema() {
    let fx = Fixture::new();
    for (tool, arguments) in [
        ("read_file", json!({"path": "small.txt", "offset": 0})),
        ("read_file", json!({"path": "small.txt", "limit": -1})),
        ("list_dir", json!({"depth": 9})),
        ("list_dir", json!({"max_entries": 0})),
        ("search_text", json!({"pattern": ""})),
        ("search_text", json!({"pattern": "a", "max_results": 1001})),
    ] {
        let rejection = fx.rejection(tool, arguments.clone());
        assert_eq!(
            rejection.code(),
            RejectCode::ConstraintViolation,
            "{tool} {arguments}"
        );
    }
}
