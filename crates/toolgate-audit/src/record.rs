//! What a record keeps of an outcome, and what it leaves out.
//!
//! By default a record holds the outcome's evidence — tool, version, descriptor digest,
//! surface, actor, profile, the workspace's digest, effect class, argument *names* and
//! *digest*, resources (any absolute path in them cut to its file name and a digest of the
//! whole path), approval id, policies, per-stage timings, byte
//! counts, truncation, redactions — with the status, the stage and code of a rejection, the
//! code of a tool error and the number of unknowns. It never holds argument values, output,
//! file bodies, environment, or the messages of rejections and errors, which can quote
//! arguments. The local debug setting adds those messages, the unknowns and the output,
//! redacted once more and bounded.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use toolgate_core::record::Intent;
use toolgate_core::{
    Canonical, Digest, EffectClass, Outcome, RejectCode, Stage, Status, Surface, ToolErrorCode,
    canonical_json, redact,
};

/// The most output a debug record keeps, in bytes of its JSON text.
const DEBUG_OUTPUT_BYTES: usize = 64 << 10;

/// The canonical JSON a record keeps of `outcome`; with `store_values`, also the redacted
/// messages and output (the local debug setting).
pub fn record_body(outcome: &Outcome, store_values: bool) -> String {
    record_body_after(outcome, store_values, None)
}

/// [`record_body`] of a call whose start is record `started`, which the outcome names.
pub fn record_body_after(outcome: &Outcome, store_values: bool, started: Option<u64>) -> String {
    let evidence = outcome.evidence();
    let debug = store_values.then(|| debug_values(outcome));
    let record = Fields {
        actor: &evidence.actor,
        approval_id: evidence.approval_id.as_deref(),
        argument_digest: evidence.argument_digest.as_ref(),
        argument_names: &evidence.argument_names,
        call_id: &evidence.call_id,
        client: evidence.client.as_deref(),
        debug: debug.as_ref().map(Canonical),
        descriptor_digest: evidence.descriptor_digest.as_ref(),
        durations_ns: &evidence.durations_ns,
        effect: evidence.effect,
        error: outcome.error().map(|e| ErrorFields { code: &e.code }),
        hooks: &evidence.hooks,
        output_bytes: evidence.output_bytes,
        policies: &evidence.policies,
        profile: &evidence.profile,
        redactions: evidence.redactions,
        rejection: outcome.rejection().map(|r| RejectionFields {
            code: r.code(),
            stage: r.stage(),
        }),
        request_id: evidence.request_id.as_deref(),
        resources: evidence
            .resources
            .iter()
            .map(|r| hide_resource_paths(r))
            .collect(),
        started,
        status: outcome.status(),
        surface: evidence.surface,
        tool: &evidence.tool,
        total_ns: evidence.total_ns,
        truncated: evidence.truncated,
        unknowns: outcome.unknowns().len(),
        version: evidence.version.as_deref(),
        workspace: &evidence.workspace,
    };
    // Serializing plain fields into memory cannot fail; should it ever, the record still says
    // so rather than vanish.
    serde_json::to_string(&record).unwrap_or_else(|_| r#"{"evidence":"unserializable"}"#.to_owned())
}

/// What a record keeps of an outcome: its evidence (every field of
/// [`Evidence`](toolgate_core::Evidence)), with the status, the stage and code of a
/// rejection, the code of an error, the number of unknowns and the start it closes.
///
/// The fields are declared in the byte order of their names, every map in them is ordered the
/// same way and every number is an integer, so serde_json writes the canonical text at once:
/// a record is made for every call, and building a JSON value to sort it cost as much as the
/// rest of the record.
#[derive(Serialize)]
struct Fields<'a> {
    actor: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    approval_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    argument_digest: Option<&'a Digest>,
    argument_names: &'a [String],
    call_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    client: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    debug: Option<Canonical<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    descriptor_digest: Option<&'a Digest>,
    durations_ns: &'a BTreeMap<String, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    effect: Option<EffectClass>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorFields<'a>>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    hooks: &'a [toolgate_core::HookRecord],
    output_bytes: usize,
    policies: &'a [String],
    profile: &'a str,
    redactions: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejection: Option<RejectionFields>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<&'a str>,
    resources: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
    status: Status,
    surface: Surface,
    tool: &'a str,
    total_ns: u64,
    truncated: bool,
    unknowns: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<&'a str>,
    workspace: &'a str,
}

#[derive(Serialize)]
struct RejectionFields {
    code: RejectCode,
    stage: Stage,
}

#[derive(Serialize)]
struct ErrorFields<'a> {
    code: &'a ToolErrorCode,
}

/// The canonical JSON of a call's start, recorded before its executor runs: what the call is
/// about to do, with the same care for paths as an outcome's record.
pub fn start_body(intent: &Intent<'_>) -> String {
    let resources: Vec<String> = intent
        .resources
        .iter()
        .map(|r| hide_resource_paths(r))
        .collect();
    let mut call = Map::new();
    call.insert("actor".to_owned(), json!(intent.actor));
    call.insert("approval_id".to_owned(), json!(intent.approval_id));
    call.insert("argument_digest".to_owned(), json!(intent.argument_digest));
    call.insert("call_id".to_owned(), json!(intent.call_id));
    call.insert("effect".to_owned(), json!(intent.effect.as_str()));
    call.insert("profile".to_owned(), json!(intent.profile));
    if let Some(request_id) = intent.request_id {
        call.insert("request_id".to_owned(), json!(request_id));
    }
    call.insert("resources".to_owned(), json!(resources));
    call.insert("sandbox".to_owned(), json!(intent.sandbox));
    call.insert("status".to_owned(), json!("started"));
    call.insert("surface".to_owned(), json!(intent.surface));
    call.insert("tool".to_owned(), json!(intent.tool));
    call.insert("version".to_owned(), json!(intent.version));
    canonical_json(&Value::Object(call))
}

/// `resource` with every absolute path in it replaced by the path's file name and a short
/// digest of the whole path (`program:cargo#sha256:1a2b3c4d`).
///
/// Resources name what a call touches, and for a program outside the workspace that is its
/// absolute path (`program:/home/alice/.cargo/bin/cargo`, or the first element of `argv:[…]`),
/// which says who the user is and how their machine is laid out. The file name and digest keep
/// records comparable — the same program gives the same text — without keeping the path.
fn hide_resource_paths(resource: &str) -> String {
    let Some((kind, value)) = resource.split_once(':') else {
        return hide_paths(resource);
    };
    // A value in JSON (the argv of `run_script`) is rewritten string by string, so that a path
    // holding spaces or quotes is hidden whole.
    let hidden = match serde_json::from_str::<Value>(value) {
        Ok(mut json @ (Value::Array(_) | Value::Object(_))) => {
            hide_json_paths(&mut json);
            serde_json::to_string(&json).unwrap_or_else(|_| hide_paths(value))
        }
        _ => hide_paths(value),
    };
    format!("{kind}:{hidden}")
}

fn hide_json_paths(value: &mut Value) {
    match value {
        Value::String(text) => *text = hide_paths(text),
        Value::Array(items) => items.iter_mut().for_each(hide_json_paths),
        Value::Object(map) => map.values_mut().for_each(hide_json_paths),
        _ => {}
    }
}

/// `text` with its absolute paths hidden: all of it when it starts with `/` (a path may hold
/// spaces), else each `/…` word that starts the text or follows a space, `=`, `:` or `,`
/// (`--config=/etc/x`). A `//` after `:` starts a URL, not a path, and is kept.
fn hide_paths(text: &str) -> String {
    if is_absolute(text) {
        return hidden_path(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut previous: Option<char> = None;
    while let Some(c) = rest.chars().next() {
        let starts_path = c == '/'
            && previous.is_some_and(|p| p.is_whitespace() || matches!(p, '=' | ':' | ','))
            && !(previous == Some(':') && rest.starts_with("//"));
        if starts_path {
            let end = rest
                .find(|ch: char| ch.is_whitespace() || matches!(ch, ',' | ';' | '"' | '\''))
                .unwrap_or(rest.len());
            let (path, after) = rest.split_at(end);
            out.push_str(&hidden_path(path));
            previous = path.chars().last();
            rest = after;
        } else {
            out.push(c);
            previous = Some(c);
            rest = rest.get(c.len_utf8()..).unwrap_or_default();
        }
    }
    out
}

fn is_absolute(text: &str) -> bool {
    text.starts_with('/') && !text.starts_with("//")
}

/// `<file name>#sha256:<first 8 hex digits of the path's SHA-256>`.
fn hidden_path(path: &str) -> String {
    let name = Path::new(path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let digest = Sha256::digest(path.as_bytes());
    // `sha256:` and the first 8 hex digits.
    let short = crate::chain::hex(digest.get(..4).unwrap_or_default());
    format!("{name}#{short}")
}

/// The values a debug record adds, each redacted again: the pipeline redacts output already,
/// but messages quote arguments, which it does not.
fn debug_values(outcome: &Outcome) -> Value {
    let mut values = Map::new();
    if let Some(rejection) = outcome.rejection() {
        values.insert("rejection_message".to_owned(), json!(rejection.message()));
        if let Some(hint) = rejection.hint() {
            values.insert("hint".to_owned(), json!(hint));
        }
    }
    if let Some(error) = outcome.error() {
        values.insert("error_message".to_owned(), json!(error.message));
    }
    values.insert("unknowns".to_owned(), json!(outcome.unknowns()));
    if let Some(output) = outcome.output() {
        // Redacted whole before it is cut: a secret split by the cut no longer matches its
        // pattern, and its first half would be kept as it is.
        let mut output = output.clone();
        redact::redact_value(&mut output);
        let text = output.to_string();
        let kept = if text.len() > DEBUG_OUTPUT_BYTES {
            let mut end = DEBUG_OUTPUT_BYTES;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            json!({"truncated_json": text.get(..end).unwrap_or_default()})
        } else {
            output
        };
        values.insert("output".to_owned(), kept);
    }
    let mut values = Value::Object(values);
    redact::redact_value(&mut values);
    values
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use toolgate_core::{Evidence, Rejection, ToolError};

    use super::*;

    fn rejected() -> Outcome {
        Outcome::refused(
            Rejection::new(
                RejectCode::UnknownArgument,
                "unknown argument `API_KEY=hunter2`",
            )
            .with_hint(Some("did you mean `path`?".to_owned())),
            Evidence {
                call_id: "c-1".to_owned(),
                request_id: None,
                client: None,
                tool: "read_file".to_owned(),
                version: None,
                descriptor_digest: None,
                surface: Surface::Chat,
                actor: "local".to_owned(),
                profile: "default".to_owned(),
                workspace: "sha256:00".to_owned(),
                effect: None,
                argument_names: Vec::new(),
                argument_digest: None,
                resources: Vec::new(),
                approval_id: None,
                policies: Vec::new(),
                durations_ns: BTreeMap::new(),
                total_ns: 5,
                output_bytes: 0,
                truncated: false,
                redactions: 0,
                hooks: Vec::new(),
            },
            Vec::new(),
        )
    }

    /// The record as it was made before its fields were declared in order: the evidence as
    /// a JSON value, the other fields added, the whole made canonical.
    fn record_by_value(outcome: &Outcome, store_values: bool, started: Option<u64>) -> String {
        let Value::Object(mut call) = serde_json::to_value(outcome.evidence()).unwrap() else {
            panic!("evidence is an object");
        };
        if let Some(Value::Array(resources)) = call.get_mut("resources") {
            for resource in resources.iter_mut() {
                if let Value::String(text) = resource {
                    *text = hide_resource_paths(text);
                }
            }
        }
        call.insert("status".to_owned(), json!(outcome.status()));
        if let Some(rejection) = outcome.rejection() {
            call.insert(
                "rejection".to_owned(),
                json!({"stage": rejection.stage(), "code": rejection.code()}),
            );
        }
        if let Some(error) = outcome.error() {
            call.insert("error".to_owned(), json!({"code": error.code}));
        }
        call.insert("unknowns".to_owned(), json!(outcome.unknowns().len()));
        if store_values {
            call.insert("debug".to_owned(), debug_values(outcome));
        }
        if let Some(started) = started {
            call.insert("started".to_owned(), json!(started));
        }
        canonical_json(&Value::Object(call))
    }

    /// Evidence with every optional field present and every list and map filled.
    fn full_evidence() -> Evidence {
        Evidence {
            call_id: "9f-12".to_owned(),
            request_id: Some("req \"7\"".to_owned()),
            client: Some("claude-code 2.1 \u{e9} (session 3)".to_owned()),
            tool: "upstream.fs.read_text_file".to_owned(),
            version: Some("2.1".to_owned()),
            descriptor_digest: Some(toolgate_core::sha256_digest(b"descriptor")),
            surface: Surface::Chat,
            actor: "alice\u{e9}".to_owned(),
            profile: "review".to_owned(),
            workspace: "sha256:ab".to_owned(),
            effect: Some(EffectClass::LocalWrite),
            argument_names: vec!["path".to_owned(), "Offset".to_owned()],
            argument_digest: Some(toolgate_core::sha256_digest(b"arguments")),
            resources: vec![
                "path:src/lib.rs".to_owned(),
                "program:/usr/bin/git".to_owned(),
            ],
            approval_id: Some("ap-1".to_owned()),
            policies: vec!["default-read-only".to_owned(), "b".to_owned()],
            durations_ns: BTreeMap::from([
                ("validate".to_owned(), 12),
                ("Approve".to_owned(), u64::MAX),
                ("authorize".to_owned(), 0),
            ]),
            total_ns: 123_456_789,
            output_bytes: 4096,
            truncated: true,
            redactions: 2,
            hooks: vec![toolgate_core::HookRecord {
                changed: true,
                decision: None,
                event: toolgate_core::HookEvent::PreCall,
                failure: Some(toolgate_core::HookFailureKind::Timeout),
                mode: toolgate_core::HookMode::Enforce,
                name: "guard \"g\"".to_owned(),
                ask_reason: None,
            }],
        }
    }

    /// Every kind of outcome, with and without its optional parts.
    fn outcomes() -> Vec<Outcome> {
        let unknowns = vec!["the exit status".to_owned()];
        vec![
            rejected(),
            Outcome::refused(
                Rejection::new(RejectCode::UnknownArgument, "no"),
                full_evidence(),
                unknowns.clone(),
            ),
            Outcome::done(
                json!({"b": 1.0, "a": "key AKIAIOSFODNN7EXAMPLE"}),
                full_evidence(),
                Vec::new(),
            ),
            Outcome::failed(
                ToolError::new(ToolErrorCode::NotFound, "no such file"),
                full_evidence(),
                unknowns,
            ),
        ]
    }

    /// A record is the canonical text of what it keeps, whichever way it is built, and it
    /// keeps every field of the evidence: a field added to `Evidence` and not to `Fields`
    /// fails here.
    #[test]
    fn the_record_is_the_canonical_text_of_every_field() {
        for outcome in outcomes() {
            for store_values in [false, true] {
                for started in [None, Some(7)] {
                    let body = record_body_after(&outcome, store_values, started);
                    assert_eq!(body, record_by_value(&outcome, store_values, started));
                    assert_eq!(
                        body,
                        canonical_json(&serde_json::from_str(&body).unwrap()),
                        "not canonical"
                    );
                }
            }
        }
    }

    #[test]
    fn records_keep_stage_and_code_but_not_messages() {
        let body = record_body(&rejected(), false);
        let value: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            value["rejection"],
            json!({"stage": "validate", "code": "unknown_argument"})
        );
        assert_eq!(value["call_id"], "c-1");
        assert!(
            !body.contains("hunter2") && !body.contains("API_KEY"),
            "{body}"
        );
    }

    #[test]
    fn records_hold_no_absolute_paths_in_resources() {
        let mut outcome = rejected();
        outcome.evidence_mut().resources = vec![
            "program:/home/alice/.cargo/bin/cargo".to_owned(),
            "cwd:.".to_owned(),
            r#"argv:["/home/alice/bin/my tool","--config=/home/alice/x.toml","test"]"#.to_owned(),
            "path:src/main.rs".to_owned(),
            "url:https://example.com/a".to_owned(),
        ];
        let body = record_body(&outcome, false);
        assert!(!body.contains("/home/alice"), "{body}");
        let value: Value = serde_json::from_str(&body).unwrap();
        let resources = value["resources"].as_array().unwrap();
        let cargo = resources[0].as_str().unwrap();
        assert!(cargo.starts_with("program:cargo#sha256:"), "{cargo}");
        assert_eq!(cargo.len(), "program:cargo#sha256:".len() + 8, "{cargo}");
        assert_eq!(resources[1], "cwd:.");
        let argv = resources[2].as_str().unwrap();
        assert!(argv.starts_with(r#"argv:["my tool#sha256:"#), "{argv}");
        assert!(argv.contains(r#""--config=x.toml#sha256:"#), "{argv}");
        assert!(argv.ends_with(r#","test"]"#), "{argv}");
        assert_eq!(resources[3], "path:src/main.rs");
        assert_eq!(resources[4], "url:https://example.com/a");
        // The same path always gives the same text, so records stay comparable.
        assert_eq!(body, record_body(&outcome, false));
    }

    #[test]
    fn debug_output_is_redacted_before_it_is_cut() {
        // The cut falls in the middle of the key: `"` and the spaces, then ten of its twenty
        // characters.
        let filler = " ".repeat(DEBUG_OUTPUT_BYTES - 11);
        let outcome = Outcome::done(
            json!(format!("{filler}AKIAIOSFODNN7EXAMPLE")),
            rejected().evidence().clone(),
            Vec::new(),
        );
        let body = record_body(&outcome, true);
        let value: Value = serde_json::from_str(&body).unwrap();
        let kept = value["debug"]["output"]["truncated_json"].as_str().unwrap();
        assert!(!kept.contains("AKIAIOSFOD"), "{}", &kept[kept.len() - 20..]);
    }

    #[test]
    fn debug_records_keep_messages_redacted() {
        let body = record_body(&rejected(), true);
        assert!(body.contains("API_KEY=[REDACTED]"), "{body}");
        assert!(!body.contains("hunter2"), "{body}");
    }
}
