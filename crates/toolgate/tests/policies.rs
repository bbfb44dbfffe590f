//! Policy files through the real binary: a policy that does not fit toolgate's Cedar schema is
//! refused by `check` and `serve` alike, named by file, line and column; the policies the
//! docs show load; an error only evaluation finds names the policy's file and line.

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
use std::process::{Output, Stdio};

use serde_json::Value;

use support::fixture::Fixture;
use support::home;

/// Policies that parse but do not fit the schema, each with where and what the error says.
/// Each loaded with "ok" before policies were validated, then denied every call at run time.
const MISFITS: &[(&str, &str)] = &[
    (
        "// Commands only from the command line.\npermit (principal, action, resource)\nwhen { context.nope == \"x\" };\n",
        "rules.cedar:3:8: attribute `nope` in context for Action::\"call\" not found",
    ),
    (
        "@id(\"mine\")\npermit (principal, action, resource)\n  when { resource.owner == \"me\" };\n",
        "rules.cedar:3:10: policy `mine`: attribute `owner` on entity type `Tool` not found",
    ),
    (
        "forbid (principal, action, resource) when { resource.major == \"1\" };\n",
        "rules.cedar:1:45: the types Long and String are not compatible",
    ),
    (
        "forbid (principal, action, resource)\nwhen { context.paths == \"x\" };\n",
        "rules.cedar:2:8: the types String and Set<String> are not compatible",
    ),
    (
        "permit (principal, action, resource) when { resource is Actor };\n",
        "rules.cedar:1:1: policy is impossible",
    ),
    (
        "\npermit (principal, action == Action::\"delete\", resource);\n",
        "rules.cedar:2:30: unrecognized action `Action::\"delete\"` (did you mean `Action::\"call\"`?)",
    ),
];

/// A directory with `toolgate.toml` naming `rules.cedar`, which holds `policy`.
fn configured(policy: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("rules.cedar"), policy).unwrap();
    let config = dir.path().join("toolgate.toml");
    fs::write(&config, "policy = \"rules.cedar\"\n").unwrap();
    (dir, config)
}

fn check(config: &Path) -> Output {
    home::toolgate()
        .args(["check", "--config"])
        .arg(config)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn check_and_serve_refuse_a_policy_that_does_not_fit_with_its_file_line_and_column() {
    let fx = Fixture::new();
    for (policy, expected) in MISFITS {
        let (dir, config) = configured(policy);
        let expected = format!("{}/{expected}", dir.path().display());
        let output = check(&config);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{policy}: {stderr}");
        assert!(stderr.contains(&expected), "{policy}: {stderr}");
        assert!(!stderr.contains("toolgate.toml:0"), "{policy}: {stderr}");
        assert!(output.stdout.is_empty(), "{policy}: no `ok`");
        let output = home::toolgate()
            .args(["serve", "--no-console", "--workspace"])
            .arg(fx.workspace())
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(3), "{policy}: {stderr}");
        assert!(stderr.contains(&expected), "{policy}: {stderr}");
    }
}

#[test]
fn a_syntax_error_is_reported_at_its_place_in_the_policy_file() {
    let (dir, config) = configured(
        "permit (principal, action, resource);\n\nforbid (principal action, resource);\n",
    );
    let output = check(&config);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "toolgate: {}/rules.cedar:3:19: unexpected token `action`",
            dir.path().display()
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("toolgate.toml"), "{stderr}");
}

/// The Cedar blocks of docs/policies.md.
fn documented_policies() -> Vec<String> {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/policies.md");
    let text = fs::read_to_string(doc).unwrap();
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match (&mut current, line.trim()) {
            (None, "```cedar") => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_policies_the_docs_show_pass_check() {
    let blocks = documented_policies();
    assert!(blocks.len() >= 4, "{blocks:?}");
    for block in blocks {
        // The default policy's own rules are in the doc too; without the default policy their
        // `@id`s appear once.
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("rules.cedar"), &block).unwrap();
        let config = dir.path().join("toolgate.toml");
        fs::write(
            &config,
            "policy = \"rules.cedar\"\ndefault_policy = false\n",
        )
        .unwrap();
        let output = check(&config);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{block}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // And beside the default policy, replacing its rules where they share an `@id`.
        let (_dir, config) = configured(&block);
        let output = check(&config);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{block}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(String::from_utf8_lossy(&output.stdout).ends_with("ok\n"));
    }
}

#[test]
fn an_evaluation_error_denies_the_call_and_names_the_policy_file_and_line() {
    let fx = Fixture::new();
    // Fits the schema; only evaluation finds that the sum overflows.
    let (dir, config) = configured(
        "\n@id(\"overflows\")\nforbid (principal, action, resource)\nwhen { resource.major + 9223372036854775807 > 0 };\n",
    );
    let output = home::toolgate()
        .args(["call", "--json", "--workspace"])
        .arg(fx.workspace())
        .args(["--tool", "read_file", "--args", r#"{"path": "a.txt"}"#])
        .arg("--config")
        .arg(&config)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let outcome: Value = serde_json::from_slice(&output.stdout).unwrap();
    let message = outcome["rejection"]["message"].as_str().unwrap_or_default();
    // The file by its own name: the message reaches the model, which is told no absolute
    // path of the operator's.
    assert!(
        message.contains(
            "policy evaluation failed, so the call is denied: policy `overflows` (rules.cedar:2): "
        ) && !message.contains(&dir.path().display().to_string()),
        "{outcome}"
    );
    assert!(!message.contains("s1p0"), "{outcome}");
}
