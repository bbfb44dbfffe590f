//! Policy decisions through the public API: defaults, operator policies, errors that deny,
//! and slices that decide exactly as the whole set does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::sync::Arc;

use serde_json::{Map, Value, json};
use toolgate_core::*;

#[derive(Debug)]
struct Noop;
impl TypedExecutor for Noop {
    type Args = Map<String, Value>;
    type Plan = ();
    fn plan(&self, arguments: Map<String, Value>) -> ((), Classification) {
        let paths: Vec<String> = arguments
            .get("path")
            .and_then(Value::as_str)
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default();
        let classification = Classification {
            paths,
            ..Classification::default()
        };
        ((), classification)
    }
    fn execute(
        &self,
        (): &(),
        _: &Call<'_, Self>,
        _: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(json!("ok")))
    }
}

const EFFECTS: [(&str, EffectClass); 4] = [
    ("reader", EffectClass::ReadOnly),
    ("writer", EffectClass::LocalWrite),
    ("fetcher", EffectClass::Network),
    ("runner", EffectClass::Irreversible),
];

fn registry() -> Registry {
    let mut builder = RegistryBuilder::new();
    for (name, effect) in EFFECTS {
        let mut entry = ToolEntry::new(name, "test");
        entry.effect = Some(effect);
        let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
        builder
            .register(Descriptor::new(name, "t", schema), entry, Arc::new(Noop))
            .unwrap();
    }
    let mut bare = ToolEntry::new("bare", "no effect class given");
    bare.effect = None;
    builder
        .register(
            Descriptor::new("bare", "t", json!({"type": "object"})),
            bare,
            Arc::new(Noop),
        )
        .unwrap();
    builder.build().unwrap()
}

fn pipeline(user_policy: Option<&str>, prepare: bool) -> Pipeline {
    let registry = registry();
    let mut sources = vec![("<default policy>", policy::DEFAULT_POLICY)];
    if let Some(text) = user_policy {
        sources.push(("operator.cedar", text));
    }
    let mut engine = PolicyEngine::from_sources(&sources).unwrap();
    if prepare {
        engine.prepare(&registry).unwrap();
    }
    Pipeline::new(
        Arc::new(registry),
        Arc::new(engine),
        Arc::new(HeadlessBroker),
        WorkspaceId::new("/w"),
    )
}

/// Stages 1–6 of `raw`: what stopped it, if anything.
fn authorized(pipeline: &Pipeline, raw: RawCall) -> Result<(), Stopped> {
    pipeline.enter(|stages| stages.authorize_call(raw).map(drop))
}

/// (code or "ok") for each call.
fn decide(pipeline: &Pipeline, tool: &str, args: &str, surface: Surface) -> String {
    match authorized(pipeline, RawCall::text(tool, args, surface)) {
        Ok(_) => "ok".into(),
        Err(stopped) => stopped.rejection.code().to_string(),
    }
}

#[test]
fn default_policy_table() {
    let p = pipeline(None, true);
    for surface in Surface::ALL {
        assert_eq!(decide(&p, "reader", "{}", surface), "ok");
        assert_eq!(decide(&p, "writer", "{}", surface), "approval_required");
        assert_eq!(decide(&p, "fetcher", "{}", surface), "policy_denied");
        assert_eq!(decide(&p, "runner", "{}", surface), "approval_required");
        // No effect class means irreversible.
        assert_eq!(decide(&p, "bare", "{}", surface), "approval_required");
    }
}

#[test]
fn operator_policies_permit_and_forbid() {
    let text = r#"
        @id("allow-fetch-from-cli")
        permit (principal, action in [Action::"call", Action::"call_unattended"], resource == Tool::"fetcher")
        when { context.surface == "cli" };

        @id("no-secrets")
        forbid (principal, action, resource)
        when { context.paths.contains("notes/private.txt") };
    "#;
    let p = pipeline(Some(text), true);
    assert_eq!(decide(&p, "fetcher", "{}", Surface::Cli), "ok");
    assert_eq!(decide(&p, "fetcher", "{}", Surface::Chat), "policy_denied");
    assert_eq!(
        decide(
            &p,
            "reader",
            r#"{"path": "notes/private.txt"}"#,
            Surface::Chat
        ),
        "policy_denied"
    );
    assert_eq!(
        decide(&p, "reader", r#"{"path": "src/a.rs"}"#, Surface::Chat),
        "ok"
    );
    let stopped = authorized(
        &p,
        RawCall::text("reader", r#"{"path": "notes/private.txt"}"#, Surface::Chat),
    )
    .unwrap_err();
    assert_eq!(stopped.rejection.policies(), ["no-secrets"]);
    assert!(
        stopped.rejection.message().contains("`no-secrets`"),
        "{}",
        stopped.rejection.message()
    );
}

#[test]
fn sensitive_files_are_denied_by_a_named_rule_that_an_operator_can_replace() {
    let p = pipeline(None, true);
    for (path, rule) in [
        (".env", "sensitive-dotenv"),
        ("config/.ENV.local", "sensitive-dotenv"),
        ("certs/site.pem", "sensitive-pem"),
        ("tls/site.key", "sensitive-key"),
        ("backup/id_rsa", "sensitive-ssh-key"),
        (".git/config", "sensitive-git-internals"),
        (".ssh/known_hosts", "sensitive-ssh-dir"),
        (".aws/credentials", "sensitive-aws-dir"),
        (".netrc", "sensitive-credentials"),
        ("home/.PGPASS", "sensitive-credentials"),
        (".docker/config.json", "sensitive-credentials"),
        (".gnupg/private-keys-v1.d/ab12", "sensitive-credentials-dir"),
        (".kube/config", "sensitive-credentials-dir"),
        (".azure/msal_token_cache.json", "sensitive-credentials-dir"),
        ("certs/client.p12", "sensitive-key"),
        ("infra/terraform.tfstate", "sensitive-credentials"),
        (".config/gcloud/credentials.db", "sensitive-credentials-dir"),
        (
            "backup/application_default_credentials.json",
            "sensitive-credentials",
        ),
        ("kubeconfig", "sensitive-credentials"),
        ("toolgate.toml", "sensitive-toolgate-config"),
    ] {
        for tool in ["reader", "writer"] {
            let stopped = authorized(
                &p,
                RawCall::text(tool, json!({ "path": path }).to_string(), Surface::Cli),
            )
            .unwrap_err();
            assert_eq!(stopped.rejection.code(), RejectCode::PolicyDenied, "{path}");
            // A write to git's config is also a write of a file that git runs later.
            let rules = if tool == "writer" && path == ".git/config" {
                vec!["runs-later-git", rule]
            } else {
                vec![rule]
            };
            let mut named = stopped.rejection.policies().to_vec();
            named.sort_unstable();
            assert_eq!(named, rules, "{tool} {path}");
            assert!(
                stopped.rejection.message().contains(&format!("`{rule}` (")),
                "the message names the rule and why: {}",
                stopped.rejection.message()
            );
        }
    }
    assert_eq!(
        decide(&p, "reader", r#"{"path": ".envoy/x"}"#, Surface::Chat),
        "ok"
    );

    // The operator lifts the rule for the example file only.
    let operator = r#"
        @id("sensitive-dotenv")
        forbid (principal, action, resource)
        when { context.sensitive.contains("dotenv") && !(context.paths == [".env.example"]) };
    "#;
    let p = pipeline(Some(operator), true);
    assert_eq!(
        decide(&p, "reader", r#"{"path": ".env.example"}"#, Surface::Chat),
        "ok"
    );
    assert_eq!(
        decide(&p, "reader", r#"{"path": ".env"}"#, Surface::Chat),
        "policy_denied"
    );
    assert_eq!(
        decide(&p, "reader", r#"{"path": "site.pem"}"#, Surface::Chat),
        "policy_denied"
    );
}

#[test]
fn files_that_run_later_are_denied_to_writes_by_a_named_rule_an_operator_can_replace() {
    let p = pipeline(None, true);
    for (path, rule) in [
        (".mcp.json", "runs-later-agent-config"),
        (".claude/settings.json", "runs-later-agent-config"),
        ("web/.vscode/tasks.json", "runs-later-agent-config"),
        (".CODEX/config.toml", "runs-later-agent-config"),
        ("mise.toml", "runs-later-env-loader"),
        (".npmrc", "runs-later-build-config"),
        (".cargo/config.toml", "runs-later-build-config"),
        (".bashrc", "runs-later-shell-startup"),
        (".gitconfig", "runs-later-shell-startup"),
    ] {
        let args = json!({ "path": path }).to_string();
        let stopped =
            authorized(&p, RawCall::text("writer", args.clone(), Surface::Cli)).unwrap_err();
        assert_eq!(stopped.rejection.policies(), [rule], "{path}");
        assert!(
            stopped.rejection.message().contains(&format!("`{rule}` (")),
            "the message names the rule and why: {}",
            stopped.rejection.message()
        );
        // Reading one is no write; a command is guarded where it runs, not here.
        assert_eq!(decide(&p, "reader", &args, Surface::Cli), "ok", "{path}");
        assert_eq!(
            decide(&p, "runner", &args, Surface::Cli),
            "approval_required",
            "{path}"
        );
    }
    assert_eq!(
        decide(&p, "writer", r#"{"path": "docs/claude.md"}"#, Surface::Cli),
        "approval_required"
    );

    // Only the operator's own policy lifts one, by replacing it.
    let operator = r#"
        @id("runs-later-agent-config")
        forbid (principal, action, resource)
        when { context.runs_later.contains("agent_config") && !(context.paths == [".vscode/settings.json"]) };
    "#;
    let p = pipeline(Some(operator), true);
    assert_eq!(
        decide(
            &p,
            "writer",
            r#"{"path": ".vscode/settings.json"}"#,
            Surface::Cli
        ),
        "approval_required"
    );
    assert_eq!(
        decide(
            &p,
            "writer",
            r#"{"path": ".vscode/tasks.json"}"#,
            Surface::Cli
        ),
        "policy_denied"
    );
    // A permit beside the default rule lifts nothing: forbids win.
    let permit = r#"
        @id("let-me") permit (principal, action, resource) when { context.runs_later.contains("build_config") };
    "#;
    let p = pipeline(Some(permit), true);
    assert_eq!(
        decide(&p, "writer", r#"{"path": ".npmrc"}"#, Surface::Cli),
        "policy_denied"
    );
}

#[test]
fn evaluation_errors_deny_even_when_a_permit_matches() {
    // Adding to the tool's major version overflows: evaluating this forbid errors (every
    // policy fits the schema, so an error is one only evaluation finds). Cedar alone would
    // skip the erroring policy and let the default permit stand; toolgate denies.
    let text = r#"
        @id("broken")
        forbid (principal, action, resource)
        when { context.surface == "chat" && resource.major + 9223372036854775807 > 0 };
    "#;
    let p = pipeline(Some(text), true);
    let stopped = authorized(&p, RawCall::text("reader", "{}", Surface::Chat)).unwrap_err();
    assert_eq!(stopped.rejection.code(), RejectCode::PolicyDenied);
    assert!(
        stopped.rejection.message().contains(
            "policy evaluation failed, so the call is denied: policy `broken` (operator.cedar:2): "
        ),
        "{}",
        stopped.rejection.message()
    );
    assert!(
        stopped.rejection.message().contains("overflow"),
        "{}",
        stopped.rejection.message()
    );
    // Where the condition does not reach the overflow, the default permit stands.
    assert_eq!(decide(&p, "reader", "{}", Surface::Cli), "ok");
    // An error in the approval question only denies too.
    let text = r#"
        permit (principal, action == Action::"call_unattended", resource)
        when { resource.major + 9223372036854775807 > 0 };
    "#;
    let p = pipeline(Some(text), true);
    assert_eq!(decide(&p, "writer", "{}", Surface::Chat), "policy_denied");
}

#[test]
fn policies_that_do_not_fit_the_schema_are_refused_at_load() {
    // What used to load and then deny every call at run time.
    for (text, at) in [
        (
            "@id(\"broken\")\nforbid (principal, action, resource) when { context.missing == \"x\" };",
            "operator.cedar:2:45: policy `broken`: attribute `missing` in context",
        ),
        (
            "permit (principal, action == Action::\"call_unattended\", resource)\n    when { resource.owner == \"me\" };",
            "operator.cedar:2:12: attribute `owner` on entity type `Tool` not found",
        ),
    ] {
        let error = PolicyEngine::from_sources(&[
            ("<default policy>", policy::DEFAULT_POLICY),
            ("operator.cedar", text),
        ])
        .unwrap_err();
        assert!(error.to_string().starts_with(at), "{error}");
        assert!(matches!(error, PolicyError::Schema { .. }), "{error}");
    }
}

#[test]
fn no_policies_deny_everything() {
    let registry = registry();
    let engine = PolicyEngine::from_sources(&[]).unwrap();
    assert!(engine.is_empty());
    let p = Pipeline::new(
        Arc::new(registry),
        Arc::new(engine),
        Arc::new(HeadlessBroker),
        WorkspaceId::new("/w"),
    );
    assert_eq!(decide(&p, "reader", "{}", Surface::Cli), "policy_denied");
}

#[test]
fn parse_errors_name_file_line_and_reason() {
    let text = "permit (principal, action, resource);\n\npermit (principal, action resource);\n";
    let error = PolicyEngine::from_sources(&[("ops.cedar", text)]).unwrap_err();
    let message = error.to_string();
    // Line 3, column 27: the `resource` that should have followed a comma.
    assert!(message.starts_with("ops.cedar:3:27: "), "{message}");
    let first_line = "permit (principal, action resource);";
    let error = PolicyEngine::from_sources(&[("one.cedar", first_line)]).unwrap_err();
    assert!(error.to_string().starts_with("one.cedar:1:27: "), "{error}");
    let template = "permit (principal == ?principal, action, resource);";
    let error = PolicyEngine::from_sources(&[("t.cedar", template)]).unwrap_err();
    assert!(matches!(error, PolicyError::Template { .. }), "{error}");
}

#[test]
fn slices_decide_exactly_as_the_whole_set() {
    let text = r#"
        @id("a") permit (principal, action == Action::"call", resource == Tool::"fetcher") when { context.surface == "cli" };
        @id("b") forbid (principal == Actor::"intruder", action, resource);
        @id("c") permit (principal, action in [Action::"call_unattended"], resource is Tool) when { resource.capability == "test" && context.profile == "trusted" };
        @id("d") forbid (principal, action, resource in Tool::"runner") when { context.surface == "chat" };
        @id("e") permit (principal, action, resource == Tool::"nonexistent");
    "#;
    let sliced = pipeline(Some(text), true);
    let whole = pipeline(Some(text), false);
    for (tool, _) in EFFECTS
        .iter()
        .chain([("bare", EffectClass::Irreversible)].iter())
    {
        for surface in Surface::ALL {
            for actor in ["local", "intruder"] {
                for profile in ["default", "trusted"] {
                    let call = || {
                        RawCall::text(*tool, "{}", surface)
                            .by(actor)
                            .in_profile(profile)
                    };
                    let a = authorized(&sliced, call()).map_err(|s| s.rejection.code());
                    let b = authorized(&whole, call()).map_err(|s| s.rejection.code());
                    assert_eq!(a, b, "{tool} {surface} {actor} {profile}");
                }
            }
        }
    }
}
