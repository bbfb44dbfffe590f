//! The admission lint through the real binary: an upstream serving published poisoned
//! descriptors (`tests/upstream/poisoned_upstream.py`, which takes them from
//! `tests/corpus/poisoned_descriptors.jsonl`) is discovered, admitted and diffed, and each
//! command shows the flags — while the lint decides nothing: the poisoned tool is admitted,
//! pinned and called exactly as before.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Value, json};

use support::clients::{drive, python, quoted, repo_read, root, stdio_serve_args, toolgate_bin};
use support::home;
use support::served::Served;

struct Setup {
    dir: tempfile::TempDir,
    state: tempfile::TempDir,
    config: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("ws")).unwrap();
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            format!(
                "[[upstream]]\nname = \"poisoned\"\ncommand = [{}, {}, {}, {}]\n\n\
                 [upstream.sandbox]\nwrite = [{}]\n{}",
                quoted(&python()),
                quoted(&root().join("tests/upstream/poisoned_upstream.py")),
                quoted(&root().join("tests/corpus/poisoned_descriptors.jsonl")),
                quoted(state.path()),
                quoted(state.path()),
                repo_read(),
            ),
        )
        .unwrap();
        Setup { dir, state, config }
    }

    fn toolgate(&self, args: &[&str]) -> Output {
        let output = home::toolgate()
            .args(args)
            .arg("--config")
            .arg(&self.config)
            .output()
            .unwrap();
        assert!(output.status.success(), "{args:?}: {output:?}");
        output
    }

    fn stdout(&self, args: &[&str]) -> String {
        String::from_utf8(self.toolgate(args).stdout).unwrap()
    }

    fn calls(&self) -> Vec<Value> {
        fs::read_to_string(self.state.path().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    fn config(&self) -> &Path {
        &self.config
    }
}

/// The kinds and rules of a row's flags in `tools discover --json`.
fn flagged(row: &Value) -> (Vec<String>, Vec<String>) {
    flagged_as(&row["flags"])
}

/// The kinds (each once, sorted) and rules of a list of flags.
fn flagged_as(flags: &Value) -> (Vec<String>, Vec<String>) {
    let flags = flags
        .as_array()
        .unwrap_or_else(|| panic!("no flags: {flags}"));
    let mut kinds: Vec<String> = flags
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    kinds.dedup();
    let rules = flags
        .iter()
        .map(|f| f["rule"].as_str().unwrap().to_owned())
        .collect();
    (kinds, rules)
}

#[test]
fn poisoned_descriptors_are_flagged_by_discover_admit_and_diff_and_still_admitted() {
    let setup = Setup::new();

    // Discovered: every flag with its rule, place, excerpt and explanation; the benign
    // descriptor has none.
    let listing: Value =
        serde_json::from_str(&setup.stdout(&["tools", "discover", "--json"])).unwrap();
    let rows = listing["tools"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|r| r["name"] == name)
            .unwrap_or_else(|| panic!("no `{name}` in {listing}"))
    };
    let add = row("poisoned__add");
    assert_eq!(add["state"], "candidate");
    let (kinds, rules) = flagged(add);
    assert_eq!(kinds, ["instruction", "secrets"], "{add}");
    for rule in [
        "instruction-tag",
        "conceal-from-user",
        "secret-file",
        "pass-contents",
    ] {
        assert!(rules.contains(&rule.to_owned()), "{rule}: {add}");
    }
    let tag = add["flags"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["rule"] == "instruction-tag")
        .unwrap();
    assert_eq!(tag["at"], "/description");
    assert_eq!(tag["excerpt"], "<IMPORTANT>");
    assert!(
        tag["explanation"].as_str().unwrap().contains("model"),
        "{tag}"
    );
    let (kinds, _) = flagged(row("poisoned__get_fact_of_the_day"));
    assert_eq!(
        kinds,
        ["instruction", "invisible", "length", "secrets", "shadowing"]
    );
    assert_eq!(row("poisoned__git_status")["flags"], json!([]));

    let text = setup.stdout(&["tools", "discover"]);
    let after_add: String = text
        .split_once("poisoned__add ")
        .unwrap_or_else(|| panic!("{text}"))
        .1
        .lines()
        .take(4)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        after_add.contains("descriptor flags (")
            && after_add.contains("instruction instruction-tag at /description: \"<IMPORTANT>\""),
        "{text}"
    );
    let git_status = text
        .lines()
        .skip_while(|l| !l.starts_with("poisoned__git_status "))
        .nth(1);
    assert!(
        git_status.is_none_or(|next| !next.contains("descriptor flags")),
        "{text}"
    );

    // Admitted as before: the pin is written and the flags are shown beside it.
    let admitted = setup.stdout(&["tools", "admit", "poisoned", "add", "--effect", "read_only"]);
    assert!(
        admitted.contains("admitted `poisoned__add` (upstream `poisoned`, tool `add`)"),
        "{admitted}"
    );
    assert!(
        admitted.contains("secrets secret-file at /description: \"~/.cursor\""),
        "{admitted}"
    );
    let written = fs::read_to_string(setup.config()).unwrap();
    assert!(written.contains("tool = \"add\""), "{written}");
    assert!(written.contains("digest = \"sha256:"), "{written}");
    let clean = setup.stdout(&["tools", "admit", "poisoned", "git_status"]);
    assert!(!clean.contains("descriptor flags"), "{clean}");

    // Diffed: the pin matches, and its flags are shown again.
    let diffed = setup.stdout(&["tools", "diff", "poisoned__add"]);
    assert!(
        diffed.contains("`poisoned__add` matches its pin"),
        "{diffed}"
    );
    assert!(
        diffed.contains("instruction-tag at /description"),
        "{diffed}"
    );
    assert!(!diffed.contains("new: "), "{diffed}");

    // Changed upstream (a rug pull): the diff marks the flags the pin did not have.
    fs::write(setup.state.path().join("changed"), "").unwrap();
    let diffed = setup.stdout(&["tools", "diff", "poisoned__git_status"]);
    assert!(
        diffed.contains("+  \"description\": \"Shows the working tree status <IMPORTANT>"),
        "{diffed}"
    );
    // `read_file` is toolgate's own tool: naming it is a reference to another tool.
    for rule in [
        "instruction-tag",
        "before-using-do",
        "secret-file",
        "pass-contents",
        "names-other-tool",
    ] {
        assert!(
            diffed
                .lines()
                .any(|l| l.trim_start().starts_with("new: ") && l.contains(rule)),
            "{rule}: {diffed}"
        );
    }
    fs::remove_file(setup.state.path().join("changed")).unwrap();

    // Called as before: no flag refuses anything.
    let args = stdio_serve_args(&setup.ws(), setup.config());
    let plan = json!({"sessions": [{
        "transport": "stdio", "command": toolgate_bin(), "args": args,
        "steps": [{"op": "call", "tool": "poisoned__add",
                   "arguments": {"a": 2, "b": 3, "sidenote": "none"}}],
    }]});
    let report = drive(&plan);
    let result = &report["sessions"][0]["steps"][0];
    assert_eq!(result["isError"], false, "{result}");
    assert_eq!(result["text"], "5", "{result}");
    assert_eq!(setup.calls().len(), 1);
}

/// The card of a call waiting in the console shows the flags of the tool's pinned descriptor,
/// and the person's decision is all that counts: allowed, the poisoned tool runs.
#[test]
fn the_console_card_of_a_call_shows_its_tools_flags() {
    let setup = Setup::new();
    // No effect class: irreversible, so every call waits for a person.
    setup.toolgate(&["tools", "admit", "poisoned", "add"]);
    setup.toolgate(&["tools", "admit", "poisoned", "git_status"]);
    let config = fs::read_to_string(setup.config()).unwrap();
    let served = Served::start(&setup.ws(), &config);

    let client = served.client(json!([
        {"op": "call", "tool": "poisoned__add", "arguments": {"a": 1, "b": 2, "sidenote": "-"}},
        {"op": "call", "tool": "poisoned__git_status", "arguments": {"repo_path": "."}},
    ]));
    let card = &served.pending(1)[0];
    assert_eq!(card["tool"], "poisoned__add", "{card}");
    let (kinds, rules) = flagged_as(&card["descriptor_flags"]);
    assert_eq!(kinds, ["instruction", "secrets"], "{card}");
    assert!(rules.contains(&"instruction-tag".to_owned()), "{card}");
    let id = card["id"].as_str().unwrap().to_owned();
    assert_eq!(
        served.decide(&id, r#"{"decision":"allow_once"}"#).status,
        204
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let clean = loop {
        let pending = served.get_json("/api/pending");
        if let Some(card) = pending
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] != id.as_str())
        {
            break card.clone();
        }
        assert!(std::time::Instant::now() < deadline, "{pending}");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(clean["tool"], "poisoned__git_status", "{clean}");
    assert_eq!(clean["descriptor_flags"], json!([]), "{clean}");
    let reply = served.decide(clean["id"].as_str().unwrap(), r#"{"decision":"reject"}"#);
    assert_eq!(reply.status, 204, "{}", reply.body);

    let report = client.session_report();
    let steps = &report["steps"];
    assert_eq!(steps[0]["text"], "3", "{report}");
    assert_eq!(steps[1]["isError"], true, "{report}");
    assert_eq!(setup.calls().len(), 1);
}
