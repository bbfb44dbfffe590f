//! The workspace's `.toolgate/` configuration in the approval console of `toolgate serve`:
//! shown as it stands on disk (what applies, what waits for trust, the diff since it was
//! trusted), and trusted by a person there only as it was shown: a trust naming files that
//! changed since is refused with the files as they stand now. Driven through the real binary,
//! logged in through the printed link as a browser would, and in Chromium.

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

use serde_json::{Value, json};

use clients::*;
use fixture::Fixture;
use served::{Reply, Served};
use support::{clients, fixture, home, served};

/// A permit a repository ships: it would let edits run unattended, so it waits for trust.
const PERMIT: &str = "@id(\"project-unattended-writes\")\npermit (principal, action == Action::\"call_unattended\", resource)\nwhen { resource.effect == \"local_write\" };\n";

/// The workspace of `fx` with a `.toolgate/` holding [`PERMIT`] and a `[[tool]]` section that
/// narrows (applies untrusted).
fn project_workspace(fx: &Fixture) -> std::path::PathBuf {
    let ws = fx.workspace();
    fs::create_dir_all(ws.join(".toolgate")).unwrap();
    fs::write(ws.join(".toolgate/unattended.cedar"), PERMIT).unwrap();
    fs::write(
        ws.join(".toolgate/toolgate.toml"),
        "[[tool]]\nname = \"run_command\"\napproval = \"each_call\"\n",
    )
    .unwrap();
    fs::canonicalize(ws).unwrap()
}

fn trust(served: &Served, headers: &[(&str, String)], digest: &str) -> Reply {
    served.http(
        "POST",
        "/api/project/trust",
        headers,
        &json!({ "digest": digest }).to_string(),
    )
}

/// A view's items as `toolgate check` prints them: `PLACE: WHAT`.
fn items(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|item| {
            format!(
                "{}: {}",
                item["place"].as_str().unwrap(),
                item["what"].as_str().unwrap()
            )
        })
        .collect()
}

fn json_of(reply: &Reply) -> Value {
    let start = reply.body.find('{').unwrap();
    let end = reply.body.rfind('}').unwrap();
    serde_json::from_str(&reply.body[start..=end]).unwrap()
}

/// `toolgate ARGS` over `ws` with the server's configuration and state directory.
fn toolgate(state: &Path, args: &[&str], ws: &Path) -> String {
    let output = home::toolgate()
        .args(args)
        .arg("--workspace")
        .arg(ws)
        .env("XDG_STATE_HOME", state)
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr)
}

fn check(state: &Path, ws: &Path) -> String {
    let config = state.join("toolgate.toml");
    toolgate(state, &["check", "--config", config.to_str().unwrap()], ws)
}

fn trust_records(state: &Path) -> usize {
    fs::read_dir(state.join("toolgate/trust")).map_or(0, Iterator::count)
}

#[test]
fn a_person_trusts_the_project_in_the_console_only_as_it_was_shown() {
    let fx = Fixture::new();
    let ws = project_workspace(&fx);
    let state = tempfile::tempdir().unwrap();
    let served = Served::start_at(&ws, "", state.path());

    let shown = served.get_json("/api/project");
    assert_eq!(shown["status"], "untrusted", "{shown}");
    assert_eq!(shown["workspace"], ws.display().to_string());
    let files: Vec<&str> = shown["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        files,
        [".toolgate/toolgate.toml", ".toolgate/unattended.cedar"],
        "{shown}"
    );
    assert_eq!(
        items(&shown["pending"]),
        [
            ".toolgate/unattended.cedar:1: a policy is not loaded: a `permit` can widen what is allowed"
        ],
        "{shown}"
    );
    assert_eq!(
        items(&shown["applied"]),
        [".toolgate/toolgate.toml:2: [[tool]] `run_command`: asks each call"],
        "{shown}"
    );
    let digest = shown["digest"].as_str().unwrap().to_owned();

    // Never without the session cookie and the page's CSRF value, nor as a form would post.
    let csrf = served.csrf();
    let refusals = [
        (vec![("cookie", served.cookie())], 403),
        (vec![("x-toolgate-csrf", csrf.clone())], 401),
        (
            vec![
                ("cookie", served.cookie()),
                ("x-toolgate-csrf", csrf.clone()),
                ("content-type", "text/plain".to_owned()),
            ],
            415,
        ),
        (
            vec![
                ("cookie", served.cookie()),
                ("x-toolgate-csrf", csrf.clone()),
                ("origin", "http://evil.example".to_owned()),
            ],
            403,
        ),
        (
            vec![
                ("cookie", served.cookie()),
                ("x-toolgate-csrf", served.token.clone()),
            ],
            403,
        ),
    ];
    for (headers, status) in refusals {
        let mut headers = headers;
        if !headers.iter().any(|(n, _)| *n == "content-type") {
            headers.push(("content-type", "application/json".to_owned()));
        }
        let reply = trust(&served, &headers, &digest);
        assert_eq!(reply.status, status, "{headers:?}: {}", reply.body);
        assert_eq!(trust_records(state.path()), 0, "{headers:?}");
    }

    // A file changed after the person was shown the files: what they saw is not trusted.
    fs::write(
        ws.join(".toolgate/unattended.cedar"),
        PERMIT.replace("local_write", "irreversible"),
    )
    .unwrap();
    let person = [
        ("cookie", served.cookie()),
        ("x-toolgate-csrf", csrf),
        ("content-type", "application/json".to_owned()),
    ];
    let stale = trust(&served, &person, &digest);
    assert_eq!(stale.status, 409, "{}", stale.body);
    let now = json_of(&stale);
    assert_eq!(now["status"], "untrusted", "{now}");
    assert_ne!(
        now["digest"],
        digest.as_str(),
        "the files as they stand now"
    );
    assert_eq!(trust_records(state.path()), 0);
    assert!(check(state.path(), &ws).contains("(untrusted; "));

    let trusted = trust(&served, &person, now["digest"].as_str().unwrap());
    assert_eq!(trusted.status, 200, "{}", trusted.body);
    // The one record, where the counts of none above looked.
    assert_eq!(trust_records(state.path()), 1);
    let trusted = json_of(&trusted);
    assert_eq!(trusted["status"], "trusted", "{trusted}");
    assert_eq!(trusted["pending"], json!([]), "{trusted}");
    assert!(
        trusted["applied"].to_string().contains("run_command"),
        "{trusted}"
    );
    let checked = check(state.path(), &ws);
    assert!(
        checked.contains(&format!(
            "project configuration: {}/.toolgate (trusted; {})",
            ws.display(),
            now["digest"].as_str().unwrap()
        )),
        "{checked}"
    );
    assert!(!checked.contains("pending until trusted"), "{checked}");
    let listed = toolgate(state.path(), &["trust", "--list"], &ws);
    assert!(listed.contains("as trusted; trusted at "), "{listed}");
    assert!(listed.contains(" by console)"), "{listed}");

    // Any byte changed since makes it pending again, and the console shows what changed.
    fs::write(ws.join(".toolgate/unattended.cedar"), PERMIT).unwrap();
    let changed = served.get_json("/api/project");
    assert_eq!(changed["status"], "changed", "{changed}");
    assert_eq!(changed["digest"], digest.as_str(), "{changed}");
    let diff = changed["diff"].as_str().unwrap();
    assert!(
        diff.contains("--- a/.toolgate/unattended.cedar")
            && diff.contains("-when { resource.effect == \"irreversible\" };")
            && diff.contains("+when { resource.effect == \"local_write\" };"),
        "{diff}"
    );
    assert!(
        changed["pending"].to_string().contains("a `permit`"),
        "{changed}"
    );
}

#[test]
fn a_project_that_does_not_check_is_shown_with_its_error_and_cannot_be_trusted() {
    let fx = Fixture::new();
    let ws = project_workspace(&fx);
    let state = tempfile::tempdir().unwrap();
    let served = Served::start_at(&ws, "", state.path());
    // Broken after the server started: the console shows it as it stands.
    fs::write(ws.join(".toolgate/toolgate.toml"), "[[tool]]\nname = 1\n").unwrap();
    let shown = served.get_json("/api/project");
    assert_eq!(shown["status"], "error", "{shown}");
    assert!(
        shown["error"]
            .as_str()
            .unwrap()
            .contains(".toolgate/toolgate.toml"),
        "{shown}"
    );
    assert_eq!(shown["digest"], Value::Null, "{shown}");
    let person = [
        ("cookie", served.cookie()),
        ("x-toolgate-csrf", served.csrf()),
        ("content-type", "application/json".to_owned()),
    ];
    let refused = trust(&served, &person, "sha256:0");
    assert_eq!(refused.status, 409, "{}", refused.body);
    assert_eq!(json_of(&refused)["status"], "error");
    assert_eq!(trust_records(state.path()), 0);
}

#[test]
fn the_project_panel_shows_what_waits_and_trusts_what_it_showed_in_chromium() {
    let fx = Fixture::new();
    let ws = project_workspace(&fx);
    let state = tempfile::tempdir().unwrap();
    // No slash: it is a file name too.
    let markup = "<img src=x onerror=alert(1)><b>bold";
    fs::write(ws.join(".toolgate").join(markup), "notes\n").unwrap();
    let served = Served::start_at(&ws, "", state.path());
    let seen = in_chromium(
        "project.mjs",
        json!({
            "url": served.console_url,
            "change": {
                "path": ws.join(".toolgate").join(markup),
                "text": format!("notes\n{markup}\n"),
            },
            "swaps": [
                {"path": ws.join(".toolgate/toolgate.toml"), "text": "[[tool]]\nname = 1\n",
                 "status": "error"},
                {"path": ws.join(".toolgate/toolgate.toml"),
                 "text": "[[tool]]\nname = \"run_command\"\napproval = \"each_call\"\n# swapped\n",
                 "status": "changed"},
            ],
        }),
    );

    let before = &seen["before"];
    assert_eq!(before["status"], "untrusted", "{seen}");
    assert!(
        before["status_text"]
            .as_str()
            .unwrap()
            .contains("applies only where it narrows"),
        "{seen}"
    );
    assert_eq!(before["files"].as_array().unwrap().len(), 3, "{seen}");
    assert!(
        before["files"][0]
            .as_str()
            .unwrap()
            .starts_with(&format!(".toolgate/{markup}  sha256:")),
        "{seen}"
    );
    assert!(
        before["pending"].to_string().contains("a `permit`"),
        "{seen}"
    );
    assert_eq!(before["trust_button"], true, "{seen}");
    assert!(
        before["note"]
            .as_str()
            .unwrap()
            .contains("applies when toolgate serve starts again"),
        "{seen}"
    );
    let after = &seen["after"];
    assert_eq!(after["status"], "trusted", "{seen}");
    assert_eq!(after["trust_button"], false, "{seen}");
    // Changed since: pending again, the change shown as a diff, the button offered again.
    let changed = &seen["changed"];
    assert_eq!(changed["status"], "changed", "{seen}");
    assert_eq!(changed["trust_button"], true, "{seen}");
    assert!(
        changed["diff"]
            .as_array()
            .unwrap()
            .contains(&json!(["add", format!("+{markup}")])),
        "{seen}"
    );
    // Files swapped while shown, found by a poll: the button is taken back until the person
    // presses Read, even once the files read again (as other files than were looked at).
    let swapped = seen["swapped"].as_array().unwrap();
    assert_eq!(swapped.len(), 2, "{seen}");
    for view in swapped {
        assert_eq!(view["trust_button"], false, "{seen}");
        assert!(
            view["message"]
                .as_str()
                .unwrap()
                .contains("changed while they were shown"),
            "{seen}"
        );
    }
    for view in [before, after, changed] {
        assert_eq!(view["foreign_elements"], 0, "{seen}");
    }
    assert_eq!(seen["console_errors"], json!([]), "{seen}");
    // Trusted by the button, then changed by the write above.
    let checked = check(state.path(), &ws);
    assert!(checked.contains(" (changed since trusted; "), "{checked}");
    let listed = toolgate(state.path(), &["trust", "--list"], &ws);
    assert!(listed.contains(" by console)"), "{listed}");
    assert!(
        fs::metadata(screenshots().join("project-untrusted.png"))
            .unwrap()
            .len()
            > 1000
    );
}
