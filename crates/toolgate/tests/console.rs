//! The approval console of `toolgate serve`, driven for real: the server binary over HTTP, the
//! Python MCP SDK as the model's client, Chromium (through playwright-core) as the person, and
//! raw HTTP requests as an attacker's page would send them.
//!
//! The clients are installed by `scripts/test-deps` into `target/test-deps/`; Chromium is
//! Debian's `/usr/bin/chromium`. A missing one fails the test with a message saying so.
//! Screenshots of the console are saved to `target/console-screenshots/`.

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
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use clients::*;
use fixture::Fixture;
use served::Served;
use support::{clients, fixture, home, served};

fn code(result: &Value) -> &str {
    result["structured"]["rejection"]["code"]
        .as_str()
        .unwrap_or_default()
}

/// The digest `read_file` reports for `original\n`, which an edit must present.
const ORIGINAL_DIGEST: &str =
    "sha256:25718360e05d3c2d0963d1381e9dd4dae5fca789244ee4b9f861adcc0cc96218";

const DIFF_MARKUP: &str = "<script>alert('diff')</script><img src=x onerror=alert('img')>";

#[test]
fn a_person_in_chromium_allows_once_rejects_with_a_reason_and_sees_commands() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    fs::write(ws.join("keep.txt"), "original\n").unwrap();
    let served = Served::start(&ws, "");
    let new_notes = format!("hello\n{DIFF_MARKUP}\n");
    let client = served.client(json!([
        {"op": "call", "tool": "write_file", "arguments":
            {"path": "notes.txt", "content": new_notes, "expected_content": "hello\n"}},
        {"op": "call", "tool": "edit_file", "arguments":
            {"path": "keep.txt", "expected_digest": ORIGINAL_DIGEST,
             "edits": [{"old_text": "original", "new_text": "changed"}]}},
        {"op": "call", "tool": "run_command", "arguments": {"argv": ["echo", "<b>hi</b>"]}},
    ]));

    let screenshots = screenshots();
    let reason = "use the staging branch instead";
    let plan = json!({
        "url": served.console_url,
        "steps": [
            {"tool": "write_file", "choice": "allow_once"},
            {"tool": "edit_file", "choice": "reject", "reason": reason},
            {"tool": "run_command", "choice": "reject"},
        ],
    });
    let seen = in_chromium("approve.mjs", plan);
    let results = client.steps();

    // The login link left the address bar and became an HttpOnly, SameSite=Strict cookie.
    assert_eq!(
        seen["address_after_open"],
        format!("http://127.0.0.1:{}/", served.port)
    );
    let cookie = &seen["cookies"][0];
    assert_eq!(cookie["name"], format!("toolgate_console_{}", served.port));
    assert_eq!(cookie["httpOnly"], true);
    assert_eq!(cookie["sameSite"], "Strict");
    assert!(seen["csp"].as_str().unwrap().contains("script-src 'self'"));

    // Without a cookie or with a login code the console never issued the browser gets
    // nothing; a page of another origin in the person's own browser can neither read the
    // console nor decide for them.
    assert_eq!(seen["no_token_status"], 401);
    assert_eq!(seen["wrong_token_status"], 401);
    assert!(!seen["stranger_text"].as_str().unwrap().contains("Waiting"));
    assert_eq!(seen["foreign_page"]["read"], "blocked", "{seen}");
    assert_eq!(seen["foreign_page"]["still_pending"], true, "{seen}");

    // The write: its diff shown, coloured, model markup as text; allowed once, applied.
    let write = &seen["steps"][0];
    assert_eq!(write["preview_kind"], "diff");
    assert_eq!(write["added_lines"], json!([format!("+{DIFF_MARKUP}")]));
    assert_eq!(write["added_colour"], "rgb(26, 127, 55)");
    assert_eq!(write["injected_elements"], 0);
    assert_eq!(
        write["choices"],
        json!(["allow_once", "allow_workspace", "reject"])
    );
    assert!(
        write["scope"]
            .as_str()
            .unwrap()
            .contains("every `write_file` call"),
        "{write}"
    );
    assert!(
        write["heading"]
            .as_str()
            .unwrap()
            .starts_with("write_file ")
    );
    assert_eq!(write["fields"]["effect"], "local_write");
    assert_eq!(write["fields"]["actor"], "local");
    assert!(
        write["fields"]["workspace"]
            .as_str()
            .unwrap()
            .contains(ws.to_str().unwrap())
    );
    assert!(
        write["fields"]["asked by"]
            .as_str()
            .unwrap()
            .starts_with("policy "),
        "{write}"
    );
    assert_eq!(seen["dialogs"], json!([]), "no model-written script ran");
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    assert_eq!(fs::read_to_string(ws.join("notes.txt")).unwrap(), new_notes);

    // The edit: rejected with a reason, which the model reads; the file is untouched.
    let edit = &seen["steps"][1];
    assert_eq!(edit["removed_lines"], json!(["-original"]));
    assert_eq!(code(&results[1]), "approval_denied", "{}", results[1]);
    assert!(
        results[1]["text"].as_str().unwrap().contains(reason),
        "{}",
        results[1]
    );
    assert_eq!(
        fs::read_to_string(ws.join("keep.txt")).unwrap(),
        "original\n"
    );

    // The command: the resolved program, every argument, the directory and environment
    // names; only allow once or reject.
    let command = &seen["steps"][2];
    assert_eq!(command["preview_kind"], "command");
    assert_eq!(command["choices"], json!(["allow_once", "reject"]));
    let preview = command["preview_text"].as_str().unwrap();
    assert!(
        preview.contains("program: /") && preview.contains("echo"),
        "{preview}"
    );
    assert!(preview.contains("argv[1]: \"<b>hi</b>\""), "{preview}");
    assert!(preview.contains("cwd: "), "{preview}");
    assert!(preview.contains("environment (names only): "), "{preview}");
    // The person sees the sandbox the command would run in, and that it has no network.
    assert!(preview.contains("\nnetwork: none"), "{preview}");
    assert!(
        preview.contains("\nsandbox: landlock+seccomp") && preview.contains("(landlock abi "),
        "{preview}"
    );
    assert_eq!(command["injected_elements"], 0);
    assert_eq!(code(&results[2]), "approval_denied", "{}", results[2]);
    assert!(
        results[2]["text"]
            .as_str()
            .unwrap()
            .contains("rejected in the approval console")
    );

    // The outcomes list, newest first, with no argument values.
    let outcomes = seen["outcomes"].as_array().unwrap();
    let tools: Vec<&str> = outcomes.iter().map(|r| r[1].as_str().unwrap()).collect();
    assert_eq!(tools, ["run_command", "edit_file", "write_file"]);
    assert_eq!(outcomes[2][2], "completed");
    assert_eq!(outcomes[1][3], "approve / approval_denied");
    let listed = served.get_json("/api/outcomes").to_string();
    assert!(
        !listed.contains("staging") && !listed.contains("hello"),
        "{listed}"
    );
    for shot in [
        "01-write_file-pending.png",
        "02-edit_file-pending.png",
        "03-run_command-pending.png",
        "outcomes.png",
    ] {
        assert!(
            fs::metadata(screenshots.join(shot)).unwrap().len() > 1000,
            "{shot}"
        );
    }
}

/// One request of the refusal table: name, method, path, headers, expected status.
type Row<'a> = (&'a str, &'a str, &'a str, Vec<(&'a str, String)>, u16);

#[test]
fn requests_without_the_token_from_another_host_or_origin_or_without_csrf_are_refused() {
    let fx = Fixture::new();
    let served = Served::start(&fx.workspace(), "");
    let cookie = ("cookie", served.cookie());
    let wrong = (
        "cookie",
        format!("toolgate_console_{}={}", served.port, "0".repeat(64)),
    );
    let api_with_token = format!("/api/pending?token={}", served.token);
    let page_with_token = format!("/?token={}", served.token);
    let token_as_code = format!("/login?code={}", served.token);
    let unused_link = served.login_link();
    let unused_link = unused_link
        .strip_prefix(&format!("http://127.0.0.1:{}", served.port))
        .unwrap();
    #[rustfmt::skip]
    let table: Vec<Row<'_>> = vec![
        ("no token", "GET", "/api/pending", vec![], 401),
        ("no token, page", "GET", "/", vec![], 401),
        ("wrong token", "GET", "/api/pending", vec![wrong.clone()], 401),
        ("wrong token in the address", "GET", "/?token=00", vec![], 401),
        ("the token in the address of an API", "GET", &api_with_token, vec![], 401),
        ("the token in the page's address", "GET", &page_with_token, vec![], 401),
        ("the token as a login code", "GET", &token_as_code, vec![], 401),
        ("a login code never issued", "GET", "/login?code=00", vec![], 401),
        ("a login link without a code", "GET", "/login", vec![], 401),
        ("a login link from a foreign host", "GET", unused_link, vec![("host", format!("evil.example:{}", served.port))], 421),
        ("a login link from a foreign origin", "GET", unused_link, vec![("origin", "http://evil.example".into())], 403),
        ("a login link posted", "POST", unused_link, vec![], 401),
        ("foreign host", "GET", "/api/pending", vec![cookie.clone(), ("host", format!("evil.example:{}", served.port))], 421),
        ("foreign host, correct token in the address", "GET", &page_with_token, vec![("host", "evil.example".into())], 421),
        ("foreign origin", "GET", "/api/pending", vec![cookie.clone(), ("origin", "http://evil.example".into())], 403),
        ("null origin", "GET", "/api/pending", vec![cookie.clone(), ("origin", "null".into())], 403),
        ("post without csrf", "POST", "/api/pending/x/decision", vec![cookie.clone(), ("content-type", "application/json".into())], 403),
        ("post with the token as csrf", "POST", "/api/grants/x/revoke", vec![cookie.clone(), ("x-toolgate-csrf", served.token.clone())], 403),
        ("an unknown endpoint", "GET", "/api/run", vec![cookie.clone()], 404),
        ("a file", "GET", "/etc/passwd", vec![cookie.clone()], 404),
        ("the allowed pages", "GET", "/api/pending", vec![cookie.clone()], 200),
        ("same origin", "GET", "/api/outcomes", vec![cookie.clone(), ("origin", format!("http://{}", served.host()))], 200),
        ("the localhost spelling", "GET", "/api/grants", vec![cookie.clone(), ("host", format!("localhost:{}", served.port))], 200),
    ];
    for (name, method, path, headers, status) in &table {
        let reply = served.http(method, path, headers, "");
        assert_eq!(reply.status, *status, "{name}: {}", reply.body);
        // Every answer, refusals included, carries the security headers.
        assert_eq!(reply.header("x-frame-options"), Some("DENY"), "{name}");
        assert_eq!(reply.header("cache-control"), Some("no-store"), "{name}");
        assert_eq!(
            reply.header("referrer-policy"),
            Some("no-referrer"),
            "{name}"
        );
        let csp = reply.header("content-security-policy").unwrap();
        assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    }

    // The refused tries above left the link unused: it sets the cookie once and sends the
    // browser to the bare address.
    let open = served.http("GET", unused_link, &[], "");
    assert_eq!(open.status, 303, "{}", open.body);
    assert_eq!(open.header("location"), Some("/"));
    assert_eq!(
        open.header("set-cookie"),
        Some(format!("{}; HttpOnly; SameSite=Strict; Path=/", served.cookie()).as_str())
    );

    // With the CSRF value from the page, a decision on nothing is a clear 404 and a malformed
    // one a 400; neither changes anything.
    let csrf = ("x-toolgate-csrf", served.csrf());
    let unknown = served.decide("nope", r#"{"decision":"allow_once"}"#);
    assert_eq!(unknown.status, 404, "{}", unknown.body);
    assert!(unknown.body.contains("no pending request `nope`"));
    assert_eq!(served.decide("nope", r#"{"decision":"run"}"#).status, 400);
    assert_eq!(
        served
            .decide("nope", r#"{"decision":"allow_once","reason":"x"}"#)
            .status,
        400
    );
    // A form post, which any page can send without a preflight, is refused even for a
    // request that is really waiting, and leaves it waiting.
    let client = served.client(json!([{"op": "call", "tool": "write_file",
        "arguments": {"path": "new.txt", "content": "x\n"}}]));
    let waiting = served.pending(1)[0]["id"].as_str().unwrap().to_owned();
    let form = served.http(
        "POST",
        &format!("/api/pending/{waiting}/decision"),
        &[
            cookie.clone(),
            csrf.clone(),
            ("content-type", "application/x-www-form-urlencoded".into()),
        ],
        "decision=allow_once",
    );
    assert!(
        [415, 403].contains(&form.status),
        "a form post is not a decision: {} {}",
        form.status,
        form.body
    );
    assert_eq!(served.pending(1)[0]["id"], waiting.as_str());
    assert_eq!(
        served.decide(&waiting, r#"{"decision":"reject"}"#).status,
        204
    );
    let results = client.steps();
    assert_eq!(code(&results[0]), "approval_denied", "{}", results[0]);
    let revoke = served.http(
        "POST",
        "/api/grants/nope/revoke",
        &[cookie.clone(), csrf],
        "",
    );
    assert_eq!(revoke.status, 404);

    // The token file: the token, readable by the user only; gone when the server stops.
    let mode = fs::metadata(&served.token_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(
        fs::read_to_string(&served.token_file).unwrap().trim(),
        served.token
    );
    let token_file = served.token_file.clone();
    served.terminate();
    assert!(!token_file.exists(), "the token file outlived the server");
}

#[test]
fn diff_lines_that_imitate_file_headers_are_coloured_as_what_they_are() {
    let output = Command::new(node())
        .arg(root().join("tests/console/diff.mjs"))
        .arg(root().join("crates/toolgate-console/src/page/console.js"))
        .output()
        .unwrap();
    succeeded("diff.mjs", output);
}

/// Every Cf, Cc (but tab and newline), Zl and Zp character of the JavaScript engine's Unicode
/// data is marked by the page, and the page's list is the one the text channels use.
#[test]
fn the_page_marks_every_format_control_and_separator_character() {
    let output = Command::new(node())
        .arg(root().join("tests/console/visible.mjs"))
        .arg(root().join("crates/toolgate-console/src/page/console.js"))
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&succeeded("visible.mjs", output)).unwrap();
    assert_eq!(report["failures"], json!([]), "{report}");
    assert!(report["classified"].as_u64().unwrap() > 200, "{report}");
    let ranges: Vec<(u32, u32)> = serde_json::from_value(report["ranges"].clone()).unwrap();
    assert_eq!(ranges, toolgate_core::visible::INVISIBLE);
}

/// Issue 12: a `write_file` whose content held U+202E or U+2066 reached the diff unmarked.
/// In Chromium, each invisible or direction-changing character of a diff, an argv preview and
/// the arguments is a highlighted mark element reading `<U+XXXX>`, never the character, and
/// the diff's lines are still counted and coloured by what they are.
#[test]
fn invisible_and_bidirectional_characters_are_marked_in_chromium() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let served = Served::start(&ws, "");
    let content = "hello\nadmin = \u{202E}false\u{2066};\u{200B}\u{FEFF}\u{E0041}\u{AD}\n\
                   ++ b/evil\u{2069}.txt\u{2028}x\n";
    let client = served.client(json!([
        {"op": "call", "tool": "write_file", "arguments":
            {"path": "notes.txt", "content": content, "expected_content": "hello\n"}},
        {"op": "call", "tool": "run_command", "arguments":
            {"argv": ["echo", "a\u{202E}b\u{200B}c\u{3164}"]}},
    ]));
    let screenshots = screenshots();
    let plan = json!({
        "url": served.console_url,
        "prefix": "marks-",
        "foreign": false,
        "steps": [
            {"tool": "write_file", "choice": "reject", "open_arguments": true},
            {"tool": "run_command", "choice": "reject", "open_arguments": true},
        ],
    });
    let seen = in_chromium("approve.mjs", plan);
    let results = client.steps();
    let marks_in = |step: &Value, place: &str| -> Vec<String> {
        step["marks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["in"] == place)
            .map(|m| m["text"].as_str().unwrap().to_owned())
            .collect()
    };

    // The write: each character a mark in the diff, on the line that holds it, and the lines
    // coloured as what they are — the added line that imitates a header is an addition.
    let write = &seen["steps"][0];
    let lines = write["diff_lines"].as_array().unwrap();
    let added: Vec<&str> = lines
        .iter()
        .filter(|l| l[0] == "add")
        .map(|l| l[1].as_str().unwrap())
        .collect();
    assert_eq!(
        added,
        [
            "+admin = <U+202E>false<U+2066>;<U+200B><U+FEFF><U+E0041><U+00AD>",
            "+++ b/evil<U+2069>.txt<U+2028>x",
        ],
        "{write}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l[0] != "meta" || l[1].as_str().unwrap().contains("notes.txt")),
        "only the real headers are headers: {write}"
    );
    assert_eq!(
        marks_in(write, "diff"),
        [
            "<U+202E>",
            "<U+2066>",
            "<U+200B>",
            "<U+FEFF>",
            "<U+E0041>",
            "<U+00AD>",
            "<U+2069>",
            "<U+2028>",
        ],
        "{write}"
    );
    assert_eq!(
        marks_in(write, "arguments"),
        marks_in(write, "diff"),
        "{write}"
    );
    for mark in write["marks"].as_array().unwrap() {
        assert_eq!(mark["tag"], "span", "{mark}");
        assert_eq!(mark["display"], "inline", "{mark}");
        assert_eq!(mark["background"], "rgb(207, 34, 46)", "{mark}");
        assert!(mark["width"].as_f64().unwrap() > 10.0, "visible: {mark}");
        let text = mark["text"].as_str().unwrap();
        assert_eq!(
            format!("<U+{}>", mark["code_point"].as_str().unwrap()),
            text
        );
    }

    // The command: the argv preview escapes what Rust's debug form escapes, and the page marks
    // the rest (a Hangul filler is a letter to Rust); the arguments mark every one.
    let command = &seen["steps"][1];
    let preview = command["preview_text"].as_str().unwrap();
    assert!(
        preview.contains(r#"argv[1]: "a\u{202e}b\u{200b}c<U+3164>""#),
        "{preview}"
    );
    assert_eq!(marks_in(command, "preview"), ["<U+3164>"], "{command}");
    assert_eq!(
        marks_in(command, "arguments"),
        ["<U+202E>", "<U+200B>", "<U+3164>"],
        "{command}"
    );

    // Not one of the characters itself is anywhere in either card.
    for step in [write, command] {
        let text = step["card_text"].as_str().unwrap();
        assert!(
            !text.chars().any(toolgate_core::visible::is_invisible),
            "{text:?}"
        );
        assert_eq!(step["injected_elements"], 0);
    }
    assert_eq!(seen["dialogs"], json!([]));
    assert_eq!(code(&results[0]), "approval_denied", "{}", results[0]);
    assert_eq!(code(&results[1]), "approval_denied", "{}", results[1]);
    assert_eq!(fs::read_to_string(ws.join("notes.txt")).unwrap(), "hello\n");
    for shot in [
        "marks-01-write_file-pending.png",
        "marks-02-run_command-pending.png",
    ] {
        assert!(
            fs::metadata(screenshots.join(shot)).unwrap().len() > 1000,
            "{shot}"
        );
    }
}

#[test]
fn a_state_directory_inside_the_workspace_is_out_of_the_models_reach() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    // A workspace at `$HOME` holds the default state directory, `~/.local/state/toolgate`.
    let state = ws.join(".local/state");
    fs::create_dir_all(&state).unwrap();
    let served = Served::start_at(&ws, "", &state);
    let token = served
        .token_file
        .canonicalize()
        .unwrap()
        .strip_prefix(ws.canonicalize().unwrap())
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let read = served
        .client(json!([{"op": "call", "tool": "read_file", "arguments": {"path": token}}]))
        .steps();
    // The grants file this workspace's standing grants would be restored from, before it
    // exists: named by the workspace's digest.
    let workspace = read[0]["meta"]["toolgate/evidence"]["workspace"]
        .as_str()
        .unwrap();
    let digest = workspace.strip_prefix("sha256:").unwrap();
    let grants = format!(".local/state/toolgate/grants-{}.json", &digest[..16]);
    let planted = "[{\"workspace\": \"ws\", \"tool\": \"write_file\", \"expires_at_ms\": 1}]";
    // Nor anything else there, now or later: the directory is toolgate's, whatever it holds.
    let written = served
        .client(json!([
            {"op": "call", "tool": "write_file", "arguments": {"path": grants, "content": planted}},
            {"op": "call", "tool": "write_file", "arguments":
                {"path": ".local/state/toolgate/notes.txt", "content": "x\n"}},
            {"op": "call", "tool": "list_dir", "arguments": {"path": ".local/state/toolgate"}},
        ]))
        .steps();
    assert_eq!(written.len(), 3);
    for result in read.iter().chain(&written) {
        assert_eq!(
            result["meta"]["toolgate/evidence"]["policies"],
            json!(["sensitive-toolgate-config"]),
            "{result}"
        );
    }
    assert!(!ws.join(&grants).exists());
    assert!(!ws.join(".local/state/toolgate/notes.txt").exists());
    assert_eq!(served.get_json("/api/pending"), json!([]));
}

#[test]
fn a_request_nobody_answers_expires_and_leaves_the_console() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "[approval]\ntimeout_secs = 1\n");
    let started = Instant::now();
    let results = served
        .client(json!([{"op": "call", "tool": "write_file",
            "arguments": {"path": "new.txt", "content": "x\n"}}]))
        .steps();
    assert!(started.elapsed() >= Duration::from_secs(1));
    assert_eq!(code(&results[0]), "approval_expired", "{}", results[0]);
    assert!(!ws.join("new.txt").exists());
    assert_eq!(served.get_json("/api/pending"), json!([]));
}

#[test]
fn a_cancelled_call_leaves_the_console_and_progress_flows_while_it_waits() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "");
    // The client gives up once the console has shown the request: a cancellation reaches the
    // waiting request at once, so one given on the first progress would leave nothing to see.
    let seen = tempfile::tempdir().unwrap();
    let seen = seen.path().join("seen");
    let client = served.client(json!([{"op": "cancel", "tool": "write_file",
        "arguments": {"path": "new.txt", "content": "x\n"}, "after": 10.0,
        "until": seen}]));
    assert_eq!(served.pending(1)[0]["tool"], "write_file");
    fs::write(&seen, "").unwrap();
    let results = client.steps();
    assert!(
        !results[0]["progress"].as_array().unwrap().is_empty(),
        "{}",
        results[0]
    );
    served.pending(0);
    // The cancelled call's outcome: refused at the approval stage, never run.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let outcomes = served.get_json("/api/outcomes");
        if let Some(outcome) = outcomes.as_array().unwrap().first() {
            assert_eq!(outcome["tool"], "write_file");
            assert_eq!(outcome["stage"], "approve", "{outcome}");
            break;
        }
        assert!(Instant::now() < deadline, "no outcome recorded");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!ws.join("new.txt").exists());
}

#[test]
fn a_grant_does_not_cover_a_file_changed_after_the_person_saw_it() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let served = Served::start(&ws, "");
    let client = served.client(json!([{"op": "call", "tool": "write_file", "arguments":
        {"path": "notes.txt", "content": "bye\n", "expected_content": "hello\n"}}]));
    let pending = served.pending(1);
    // Someone changes the file while the person reads the diff of the old one.
    fs::write(ws.join("notes.txt"), "changed meanwhile\n").unwrap();
    let id = pending[0]["id"].as_str().unwrap();
    let reply = served.decide(id, r#"{"decision":"allow_once"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let results = client.steps();
    assert_eq!(results[0]["isError"], true, "{}", results[0]);
    assert_eq!(
        results[0]["structured"]["error"]["code"], "stale_write",
        "{}",
        results[0]
    );
    assert_eq!(
        fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "changed meanwhile\n"
    );
    // The same decision again: the request is gone, so nothing is granted twice.
    let replay = served.decide(id, r#"{"decision":"allow_once"}"#);
    assert_eq!(replay.status, 404);
}

#[test]
fn bad_approval_settings_are_configuration_errors() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolgate.toml");
    for (toml, expected) in [
        (
            "[approval]\ntimeout_secs = 0\n",
            "approval timeout_secs `0` is out of range",
        ),
        (
            "[approval]\nelicitation = [\"nobody\"]\n",
            "[approval] elicitation names unknown profile `nobody`",
        ),
    ] {
        fs::write(&config, toml).unwrap();
        let output = home::toolgate()
            .args(["serve", "--workspace"])
            .arg(fx.workspace())
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(3), "{toml}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{toml}: {stderr}");
    }
}

#[test]
fn a_workspace_grant_outlives_a_restart_and_a_once_grant_does_not() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let state = tempfile::tempdir().unwrap();
    let decide = |served: &Served, choice: &str| {
        let id = served.pending(1)[0]["id"].as_str().unwrap().to_owned();
        let reply = served.decide(&id, &json!({"decision": choice}).to_string());
        assert_eq!(reply.status, 204, "{}", reply.body);
    };

    let first = Served::start_at(&ws, "", state.path());
    let client = first.client(json!([write("one.txt")]));
    decide(&first, "allow_workspace");
    assert_eq!(client.steps()[0]["isError"], false);
    let client = first.client(json!([write("two.txt")]));
    assert_eq!(client.steps()[0]["isError"], false, "the grant stands");
    let client = first.client(json!([{"op": "call", "tool": "run_command",
        "arguments": {"argv": ["true"]}}]));
    decide(&first, "allow_once");
    assert_eq!(client.steps()[0]["isError"], false);
    drop(first);

    let second = Served::start_at(&ws, "[approval]\ntimeout_secs = 2\n", state.path());
    let grants = second.get_json("/api/grants");
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants}");
    assert_eq!(grants[0]["tool"], "write_file");
    let results = second
        .client(
            json!([write("three.txt"), {"op": "call", "tool": "run_command",
            "arguments": {"argv": ["true"]}}]),
        )
        .steps();
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    assert_eq!(code(&results[1]), "approval_expired", "{}", results[1]);
    assert!(ws.join("three.txt").exists());

    // Revoked in the console: the next write asks again, in this run and the next.
    let id = grants[0]["id"].as_str().unwrap();
    let revoke = second.http(
        "POST",
        &format!("/api/grants/{id}/revoke"),
        &[
            ("cookie", second.cookie()),
            ("x-toolgate-csrf", second.csrf()),
        ],
        "",
    );
    assert_eq!(revoke.status, 204, "{}", revoke.body);
    drop(second);
    let third = Served::start_at(&ws, "[approval]\ntimeout_secs = 1\n", state.path());
    assert_eq!(third.get_json("/api/grants"), json!([]));
    let results = third.client(json!([write("four.txt")])).steps();
    assert_eq!(code(&results[0]), "approval_expired", "{}", results[0]);
}

/// A form answer as `tests/mcp/drive.py` takes it.
fn form(action: &str, content: Value) -> Value {
    json!({"action": action, "content": content})
}

fn write(path: &str) -> Value {
    json!({"op": "call", "tool": "write_file", "arguments": {"path": path, "content": "x\n"}})
}

#[test]
fn a_client_that_shows_forms_is_asked_in_an_opted_in_profile_and_its_answer_decides() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(
        &ws,
        "[approval]\ntimeout_secs = 3\nelicitation = [\"default\"]\n",
    );
    // A client of the 2025-11-25 revision: asked by elicitation/create while the call waits.
    let report = served
        .client_session(json!({
            "elicit": [
                form("accept", json!({"decision": "allow_once"})),
                form("accept", json!({"decision": "reject", "reason": "not that file"})),
                {"action": "decline"},
                form("accept", json!({"decision": "allow_workspace"})),
            ],
            "steps": [write("new-a.txt"), write("new-b.txt"), write("new-c.txt"), write("new-d.txt")],
        }))
        .session_report();
    let steps = &report["steps"];
    assert_eq!(steps[0]["isError"], false, "{}", steps[0]);
    assert_eq!(fs::read_to_string(ws.join("new-a.txt")).unwrap(), "x\n");
    assert_eq!(code(&steps[1]), "approval_denied", "{}", steps[1]);
    assert!(
        steps[1]["text"].as_str().unwrap().contains("not that file"),
        "the reason reaches the model: {}",
        steps[1]
    );
    assert_eq!(code(&steps[2]), "approval_denied", "{}", steps[2]);
    // A choice the form does not offer decides nothing: the request waited in the console.
    assert_eq!(code(&steps[3]), "approval_expired", "{}", steps[3]);
    for absent in ["new-b.txt", "new-c.txt", "new-d.txt"] {
        assert!(!ws.join(absent).exists(), "{absent}");
    }
    let forms = report["elicited"].as_array().unwrap();
    assert_eq!(forms.len(), 4, "{forms:?}");
    let message = forms[0]["message"].as_str().unwrap();
    assert!(message.contains("write_file"), "{message}");
    assert!(
        message.contains("+++ b/new-a.txt"),
        "the diff is shown: {message}"
    );
    assert!(
        !message.contains(&served.token) && !message.contains(&served.mcp_token),
        "no secret in the form: {message}"
    );
    let fields: Vec<&String> = forms[0]["schema"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(fields, ["decision", "reason"]);

    // A client of the 2026-07-28 revision: asked in an input_required result, answering in
    // its retry of the call.
    let report = served
        .client_session(json!({
            "client": "modern",
            "elicit": [
                form("accept", json!({"decision": "allow_once"})),
                form("accept", json!({"decision": "reject", "reason": "no"})),
            ],
            "steps": [write("new-e.txt"), write("new-f.txt")],
        }))
        .session_report();
    assert_eq!(report["init"]["protocolVersion"], "2026-07-28");
    let steps = &report["steps"];
    assert_eq!(steps[0]["isError"], false, "{}", steps[0]);
    assert_eq!(fs::read_to_string(ws.join("new-e.txt")).unwrap(), "x\n");
    assert_eq!(code(&steps[1]), "approval_denied", "{}", steps[1]);
    assert!(!ws.join("new-f.txt").exists());
    let forms = report["elicited"].as_array().unwrap();
    assert_eq!(forms.len(), 2, "{forms:?}");
    assert!(
        forms[0]["message"]
            .as_str()
            .unwrap()
            .contains("+++ b/new-e.txt")
    );
    served.pending(0);
}

#[test]
fn no_form_goes_to_a_profile_not_opted_in_or_a_client_without_the_capability() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let config = "[approval]\ntimeout_secs = 1\n";
    let served = Served::start(&ws, config);
    let report = served
        .client_session(json!({
            "elicit": [form("accept", json!({"decision": "allow_once"}))],
            "steps": [write("new-a.txt")],
        }))
        .session_report();
    assert_eq!(code(&report["steps"][0]), "approval_expired");
    assert_eq!(report["elicited"], json!([]), "off by default");
    drop(served);

    let served = Served::start(&ws, &format!("{config}elicitation = [\"default\"]\n"));
    // Without an elicitation callback the SDK declares no elicitation capability.
    let report = served
        .client_session(json!({"steps": [write("new-a.txt")]}))
        .session_report();
    assert_eq!(code(&report["steps"][0]), "approval_expired");
    assert!(!ws.join("new-a.txt").exists());
}

#[test]
fn a_form_is_withdrawn_when_the_console_answers_first() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "[approval]\nelicitation = [\"default\"]\n");
    let marks = tempfile::tempdir().unwrap();
    let received = marks.path().join("received");
    let client = served.client_session(json!({
        "elicit": [{"action": "accept", "content": {"decision": "reject"}, "hold": 30,
                    "touch": received}],
        "steps": [write("new-a.txt")],
    }));
    let id = served.pending(1)[0]["id"].as_str().unwrap().to_owned();
    // The console answers while the client holds the form it was sent.
    wait_until("the client has the form", Duration::from_secs(30), || {
        received.exists()
    });
    let reply = served.decide(&id, r#"{"decision":"allow_once"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let report = client.session_report();
    assert_eq!(
        report["steps"][0]["isError"], false,
        "{}",
        report["steps"][0]
    );
    assert_eq!(fs::read_to_string(ws.join("new-a.txt")).unwrap(), "x\n");
    assert_eq!(
        report["elicited"][0]["withdrawn"], true,
        "the form was cancelled once the console decided: {report}"
    );
}

#[test]
fn a_client_over_stdio_is_asked_too_at_either_revision() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("toolgate.toml");
    fs::write(&config, "[approval]\nelicitation = [\"default\"]\n").unwrap();
    let state = dir.path().join("state");
    let session = |client: &str, path: &str| {
        json!({
            "transport": "stdio",
            "client": client,
            "command": toolgate_bin(),
            "args": ["serve", "--workspace", ws, "--config", config],
            "env": {"XDG_STATE_HOME": state, "PATH": std::env::var("PATH").unwrap()},
            "elicit": [form("accept", json!({"decision": "allow_once"}))],
            "steps": [write(path)],
        })
    };
    let report = drive(&json!({"sessions": [
        session("session", "new-stdio.txt"),
        session("modern", "new-stdio-modern.txt"),
    ]}));
    for (i, path) in ["new-stdio.txt", "new-stdio-modern.txt"].iter().enumerate() {
        let session = &report["sessions"][i];
        assert_eq!(session["steps"][0]["isError"], false, "{session}");
        assert_eq!(
            session["elicited"].as_array().unwrap().len(),
            1,
            "{session}"
        );
        assert_eq!(fs::read_to_string(ws.join(path)).unwrap(), "x\n");
    }
    assert_eq!(
        report["sessions"][1]["init"]["protocolVersion"],
        "2026-07-28"
    );
}

/// A script of `lines` lines for `sh` to read on its standard input: each appends its number
/// to `out`; one line hides a right-to-left override and a zero-width space in a comment, and
/// one is a comment too long for the card's width.
fn stdin_script(out: &str, lines: usize) -> String {
    let mut script =
        String::from("# a comment that reads one way \u{202E}and runs another\u{200B}\n");
    script.push_str(&format!("# {}\n", "long-".repeat(80)));
    for n in 0..lines {
        script.push_str(&format!(
            "printf '%s\\n' 'line {n:04} of the script' >> {out}\n"
        ));
    }
    script
}

/// The lines of `script` as a preview shows them, each invisible character as its mark.
fn shown_lines(script: &str) -> Vec<String> {
    script
        .lines()
        .map(|line| {
            format!(
                "  | {}",
                toolgate_core::visible::mark_invisible(line).into_owned()
            )
        })
        .collect()
}

/// Issue 36: `run_command ["sh"]` with its script on standard input showed `stdin: 14657
/// bytes` in the card, the text only in the collapsed arguments. The card's body shows every
/// line of it, wrapped, with nothing to open or scroll sideways, invisible characters marked.
#[test]
fn the_script_a_command_reads_on_stdin_is_shown_whole_in_the_card_without_a_click() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "");
    let script = stdin_script("ran.txt", 320);
    assert!(script.len() > 14_000, "{}", script.len());
    let client = served.client(json!([
        {"op": "call", "tool": "run_command", "arguments": {"argv": ["sh"], "stdin": script}},
    ]));
    let plan = json!({
        "url": served.console_url,
        "prefix": "stdin-",
        "foreign": false,
        "steps": [{"tool": "run_command", "choice": "allow_once"}],
    });
    let seen = in_chromium("approve.mjs", plan);
    let results = client.steps();
    let command = &seen["steps"][0];
    let shown = &command["preview_shown"];
    assert_eq!(shown["visible"], true, "{shown}");
    assert_eq!(shown["clipped"], false, "wrapped, not cut off: {shown}");
    let rendered = shown["rendered"].as_str().unwrap();
    assert!(
        rendered.contains(&format!("stdin, {} bytes in 322 lines", script.len())),
        "{rendered}"
    );
    let mut at = 0;
    for line in shown_lines(&script) {
        let found = rendered[at..]
            .find(&line)
            .unwrap_or_else(|| panic!("{line:?} is not shown, in order: {rendered}"));
        at += found + line.len();
    }
    let marks: Vec<&str> = command["marks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["in"] == "preview")
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(marks, ["<U+202E>", "<U+200B>"], "{command}");
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    let ran = fs::read_to_string(ws.join("ran.txt")).unwrap();
    assert!(ran.ends_with("line 0319 of the script\n"), "{ran}");
}

/// Issue 36: the elicitation form said `stdin: 52 bytes`, and "allow once" there ran a script
/// nobody read. A short script is in the form whole; one too long for a form gets none, and
/// the call waits for the console, as it would without elicitation.
#[test]
fn a_form_shows_the_whole_stdin_and_none_is_offered_for_one_it_cannot_hold() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "[approval]\nelicitation = [\"default\"]\n");
    let short = stdin_script("short.txt", 3);
    let report = served
        .client_session(json!({
            "elicit": [form("accept", json!({"decision": "allow_once"}))],
            "steps": [{"op": "call", "tool": "run_command",
                       "arguments": {"argv": ["sh"], "stdin": short}}],
        }))
        .session_report();
    assert_eq!(
        report["steps"][0]["isError"], false,
        "{}",
        report["steps"][0]
    );
    assert_eq!(
        fs::read_to_string(ws.join("short.txt")).unwrap(),
        "line 0000 of the script\nline 0001 of the script\nline 0002 of the script\n"
    );
    let forms = report["elicited"].as_array().unwrap();
    assert_eq!(forms.len(), 1, "{forms:?}");
    let message = forms[0]["message"].as_str().unwrap();
    for line in shown_lines(&short) {
        assert!(
            message.contains(&line),
            "{line:?} is not in the form: {message}"
        );
    }
    assert!(
        !message.chars().any(toolgate_core::visible::is_invisible),
        "{message:?}"
    );

    // Longer than a form holds: no form, the console decides.
    let long = stdin_script("long.txt", 200);
    let client = served.client_session(json!({
        "elicit": [form("accept", json!({"decision": "allow_once"}))],
        "steps": [{"op": "call", "tool": "run_command",
                   "arguments": {"argv": ["sh"], "stdin": long}}],
    }));
    let pending = served.pending(1);
    assert!(
        pending[0]["preview"]
            .as_str()
            .unwrap()
            .contains("line 0199 of the script"),
        "the console shows it whole: {}",
        pending[0]
    );
    // Longer than the time a session looks for a request to put in a form.
    std::thread::sleep(Duration::from_secs(3));
    let id = pending[0]["id"].as_str().unwrap().to_owned();
    let reply = served.decide(&id, r#"{"decision":"allow_once"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);
    let report = client.session_report();
    assert_eq!(
        report["steps"][0]["isError"], false,
        "{}",
        report["steps"][0]
    );
    assert_eq!(report["elicited"], json!([]), "no form: {report}");
    let ran = fs::read_to_string(ws.join("long.txt")).unwrap();
    assert!(ran.ends_with("line 0199 of the script\n"), "{ran}");
}

/// What runs is in a card without a click: a command's preview (its stdin, its script) is a
/// block of the card itself, and a call with no preview at all — an upstream server's tool,
/// irreversible by default — has its arguments open, since they are what will run. A card a
/// hook asked about opens with the server's sentence naming the hook.
#[test]
fn what_will_run_is_open_in_every_kind_of_card() {
    let output = Command::new(node())
        .arg(root().join("tests/console/card.mjs"))
        .arg(root().join("crates/toolgate-console/src/page/console.js"))
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&succeeded("card.mjs", output)).unwrap();
    let cards = &report["cards"];
    assert_eq!(
        cards["command_with_preview"]["preview_in_body"], true,
        "{cards}"
    );
    assert!(
        cards["command_with_preview"]["preview_text"]
            .as_str()
            .unwrap()
            .contains("  | id"),
        "{cards}"
    );
    assert_eq!(
        cards["command_without_preview"]["arguments_open"], true,
        "{cards}"
    );
    assert_eq!(cards["text"]["arguments_open"], true, "{cards}");
    // Where the preview shows it all, the arguments stay folded.
    assert_eq!(cards["command_with_preview"]["arguments_open"], false);
    assert_eq!(cards["diff"]["arguments_open"], false);
    // An upstream tool's descriptor flags are listed on its card, invisible characters marked;
    // a card without flags has no such list.
    let flags = cards["flagged"]["flags_text"].as_str().unwrap_or_default();
    assert!(flags.starts_with("descriptor flags (1)"), "{cards}");
    assert!(
        flags.contains("instruction instruction-tag at /description: \"<IMPORTANT><U+200B>\""),
        "{cards}"
    );
    assert_eq!(cards["text"]["flags_text"], Value::Null, "{cards}");
    // A hook's ask opens the card with the sentence the server wrote, invisible characters
    // marked; a card nobody hooked opens with its summary.
    assert_eq!(
        cards["hook_ask"]["first"],
        json!({"class": "hook-ask", "text": "The hook `guard` asked for your approval of this call: a.txt is under review<U+202E>"}),
        "{cards}"
    );
    assert_eq!(cards["text"]["first"]["class"], "summary", "{cards}");
}

#[test]
fn each_card_starts_with_a_sentence_and_nothing_overflows_at_1280_or_800_pixels() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    fs::write(ws.join("keep.txt"), "original\n").unwrap();
    let served = Served::start(&ws, "");
    // A long unbroken argument, as a model may well send, and a command in a subdirectory.
    let long_arg = format!("--output={}", "x".repeat(300));
    // First a read, which no person is asked about: its outcome names the client too.
    let client = served.client(json!([
        {"op": "call", "tool": "read_file", "arguments": {"path": "keep.txt"}},
        {"op": "call", "tool": "write_file", "arguments":
            {"path": "notes.txt", "content": format!("hello\n{long_arg}\n"), "expected_content": "hello\n"}},
        {"op": "call", "tool": "edit_file", "arguments":
            {"path": "keep.txt", "expected_digest": ORIGINAL_DIGEST,
             "edits": [{"old_text": "original", "new_text": "changed"}]}},
        {"op": "call", "tool": "run_command", "arguments":
            {"argv": ["echo", "built", long_arg], "cwd": "src"}},
    ]));
    let screenshots = screenshots();
    let plan = json!({
        "url": served.console_url,
        "widths": [1280, 800],
        "steps": [
            {"tool": "write_file", "choice": "allow_once"},
            {"tool": "edit_file", "choice": "reject"},
            {"tool": "run_command", "choice": "reject"},
        ],
    });
    let seen = in_chromium("glance.mjs", plan);
    let results = client.steps();
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    assert_eq!(results[1]["isError"], false, "{}", results[1]);

    // Each card's first line is its sentence, made from the request's data.
    for step in seen["steps"].as_array().unwrap() {
        assert_eq!(step["first_child"], "summary", "{step}");
        assert_eq!(step["first_line"], step["summary"], "{step}");
    }
    assert_eq!(
        seen["steps"][0]["summary"],
        "write_file will change `notes.txt` (1 line added)."
    );
    assert_eq!(
        seen["steps"][1]["summary"],
        "edit_file will change `keep.txt` (1 line added, 1 line removed)."
    );
    let command = seen["steps"][2]["summary"].as_str().unwrap();
    assert!(command.starts_with("run_command will run `/"), "{command}");
    assert!(command.contains("echo built --output=xxx"), "{command}");
    assert!(
        command.contains("…` in `src/`"),
        "a long command is cut: {command}"
    );
    assert!(
        command.ends_with(" in `src/`, sandboxed, with no network."),
        "{command}"
    );

    // Each card, and each outcome, names the client that asked as it named itself in
    // `initialize` (the Python SDK says `mcp 0.1.0`), and its session: one session here.
    let claim = seen["steps"][0]["client"].as_str().unwrap();
    assert!(claim.starts_with("mcp 0.1.0, session "), "{claim}");
    assert!(claim.ends_with(" (as the client names itself)"), "{claim}");
    for step in seen["steps"].as_array().unwrap() {
        assert_eq!(step["client"], claim, "{step}");
    }
    let session = claim.trim_end_matches(" (as the client names itself)");
    let outcomes = seen["outcomes"].as_array().unwrap();
    assert!(
        outcomes.iter().any(|row| row[1] == "read_file"),
        "{outcomes:?}"
    );
    for row in outcomes {
        assert_eq!(row[5], format!("{session} (as it names itself)"), "{row}");
    }

    // Nothing is wider than the window, nothing is cut off at the right, at either width: the
    // long line of the diff, the arguments and the command's preview wrap.
    for step in seen["steps"].as_array().unwrap() {
        for width in ["1280", "800"] {
            let measured = &step["widths"][width];
            assert_eq!(measured["wider"], json!([]), "{width} px: {step}");
            assert!(
                measured["scroll_width"].as_u64() <= measured["viewport"].as_u64(),
                "{width} px: {step}"
            );
            assert_eq!(measured["clipped_previews"], 0, "{width} px: {step}");
        }
    }
    // No request of the page fails, none is answered with an error, nothing logs an error.
    assert_eq!(seen["console_errors"], json!([]), "{seen}");
    assert_eq!(seen["failed_requests"], json!([]), "{seen}");
    assert_eq!(seen["error_answers"], json!([]), "{seen}");
    for tool in ["01-write_file", "02-edit_file", "03-run_command"] {
        for width in [1280, 800] {
            let shot = screenshots.join(format!("glance-{tool}-{width}.png"));
            assert!(fs::metadata(&shot).unwrap().len() > 1000, "{shot:?}");
        }
    }
}

/// `toolgate console` with its state directory at `state` and a home of its own.
fn console_command(state: &Path, home: &Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    home::toolgate_at(home)
        .arg("console")
        .args(args)
        .env("XDG_STATE_HOME", state)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn toolgate_console_prints_a_fresh_single_use_link_for_the_workspaces_running_server() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let other = fx.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    // Two servers of the same user, for two workspaces: the link is the one for `ws`.
    let served_other = Served::start_at(&other, "", state.path());
    let served = Served::start_at(&ws, "", state.path());
    // Named through a symbolic link: the real path is compared.
    let alias = fx.dir.path().join("alias");
    std::os::unix::fs::symlink(&ws, &alias).unwrap();

    let out = console_command(
        state.path(),
        home.path(),
        &["--workspace".as_ref(), alias.as_os_str()],
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let link = stdout.trim();
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
    assert!(
        link.starts_with(&format!("http://127.0.0.1:{}/login?code=", served.port)),
        "{link}"
    );
    // The long-lived tokens are in nothing it printed.
    for token in [&served.token, &served_other.token, &served.mcp_token] {
        assert!(!stdout.contains(token.as_str()) && !stderr.contains(token.as_str()));
    }
    // The link works once, and is not one the server printed.
    assert_ne!(link, printed_link(&served));
    let first = served.open(link);
    assert_eq!(first.status, 303, "{}", first.body);
    assert!(first.header("set-cookie").unwrap().contains(&served.token));
    assert_eq!(served.open(link).status, 410);
    // Each run gives a new link.
    let again = console_command(
        state.path(),
        home.path(),
        &["--workspace".as_ref(), ws.as_os_str()],
    );
    let again = String::from_utf8(again.stdout).unwrap();
    assert_ne!(again.trim(), link);
    assert_eq!(served.open(again.trim()).status, 303);
}

/// The one login link a server printed when it started.
fn printed_link(served: &Served) -> String {
    served::printed_login_link(&served.banner)
}

#[test]
fn toolgate_console_without_a_running_server_for_the_workspace_says_so() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let other = fx.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let args = ["--workspace".as_ref(), ws.as_os_str()];

    // No server at all.
    let out = console_command(state.path(), home.path(), &args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("no running `toolgate serve` with an approval console for workspace"),
        "{stderr}"
    );

    // A server for another workspace only.
    let served = Served::start_at(&other, "", state.path());
    let out = console_command(state.path(), home.path(), &args);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());

    // A server that stopped: its files are gone, and so is its console.
    let served_ws = Served::start_at(&ws, "", state.path());
    let record = state
        .path()
        .join(format!("toolgate/console-{}.json", served_ws.port));
    assert!(record.exists());
    let mode = fs::metadata(&record).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(served_ws);
    let out = console_command(state.path(), home.path(), &args);
    assert_eq!(out.status.code(), Some(1));

    // A record left by a server that was killed outright names a port nothing answers on.
    fs::write(
        state.path().join("toolgate/console-9.json"),
        json!({"port": 9, "workspace": ws.canonicalize().unwrap(), "pid": 1}).to_string(),
    )
    .unwrap();
    fs::write(state.path().join("toolgate/console-9.token"), "stale\n").unwrap();
    let out = console_command(state.path(), home.path(), &args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot be reached: port 9: cannot connect"),
        "{stderr}"
    );

    // One whose process has ended is not even asked: the port may be another process's now.
    let mut ended = Command::new("true").spawn().unwrap();
    let pid = ended.id();
    ended.wait().unwrap();
    fs::remove_file(state.path().join("toolgate/console-9.json")).unwrap();
    fs::write(
        state.path().join("toolgate/console-10.json"),
        json!({"port": 10, "workspace": ws.canonicalize().unwrap(), "pid": pid}).to_string(),
    )
    .unwrap();
    let out = console_command(state.path(), home.path(), &args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("port 10: its server (process {pid}) has stopped")),
        "{stderr}"
    );

    // A workspace that does not exist is a usage error.
    let missing = fx.dir.path().join("missing");
    let out = console_command(
        state.path(),
        home.path(),
        &["--workspace".as_ref(), missing.as_os_str()],
    );
    assert_eq!(out.status.code(), Some(3));
    drop(served);
}

#[test]
fn toolgate_console_open_fails_clearly_without_an_opener() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let state = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let _served = Served::start_at(&ws, "", state.path());
    let empty = tempfile::tempdir().unwrap();
    let out = home::toolgate_at(home.path())
        .args(["console", "--open", "--workspace"])
        .arg(&ws)
        .env("XDG_STATE_HOME", state.path())
        .env("PATH", empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot open the link: no `xdg-open` on PATH"),
        "{stderr}"
    );
    // The link is still printed, for the person to open.
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("/login?code=")
    );

    // With an opener, it is given the link.
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("opened");
    let opener = bin.path().join("xdg-open");
    fs::write(
        &opener,
        format!("#!/bin/sh\necho \"$1\" > {}\n", seen.display()),
    )
    .unwrap();
    fs::set_permissions(&opener, fs::Permissions::from_mode(0o755)).unwrap();
    let out = home::toolgate_at(home.path())
        .args(["console", "--open", "--workspace"])
        .arg(&ws)
        .env("XDG_STATE_HOME", state.path())
        .env("PATH", bin.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    assert_eq!(fs::read_to_string(&seen).unwrap().trim(), printed.trim());
}

#[test]
fn the_card_names_the_client_and_its_session_at_either_revision() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    let served = Served::start(&ws, "");
    // A client of the 2025 revisions names itself in `initialize`; one of 2026-07-28 on each
    // request's `_meta`. The Python SDK says `mcp 0.1.0` in both.
    let legacy = served.client(json!([write("from-legacy.txt")]));
    let first = served.pending(1);
    let modern =
        served.client_session(json!({"client": "modern", "steps": [write("from-modern.txt")]}));
    let both = served.pending(2);
    let claims: Vec<&str> = both.iter().map(|p| p["client"].as_str().unwrap()).collect();
    let sessions: Vec<&str> = claims
        .iter()
        .map(|c| c.strip_prefix("mcp 0.1.0, session ").unwrap())
        .collect();
    assert_ne!(sessions[0], sessions[1], "two sessions: {claims:?}");
    assert_eq!(first[0]["client"], both[0]["client"]);
    for request in &both {
        let reply = served.decide(request["id"].as_str().unwrap(), r#"{"decision":"reject"}"#);
        assert_eq!(reply.status, 204);
    }
    legacy.steps();
    modern.steps();
    // The outcomes name them too.
    let outcomes = served.get_json("/api/outcomes");
    let named: Vec<&str> = outcomes
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["client"].as_str())
        .collect();
    assert_eq!(named.len(), 2, "{outcomes}");
    for claim in &claims {
        assert!(named.contains(claim), "{outcomes}");
    }
}
