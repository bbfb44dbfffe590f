//! Secrets in tool output are replaced before the output leaves the pipeline.
//!
//! This is a net, not a proof. The rules are gitleaks' maintained rule set (MIT; about 220
//! provider formats with keywords and entropy limits), converted by `scripts/update-secret-rules`
//! into `data/secret-rules.json` and compiled in, plus a few rules of toolgate's own for what
//! gitleaks leaves to file scanning: private-key blocks cut off by truncation, short values
//! assigned to names such as `password` or `token`, passwords in URLs, Discord's webhook URLs,
//! `Authorization` headers and cookies, Telegram bot tokens, `.netrc` and PostgreSQL password
//! files, JSON Web Keys' private members, and keys whose prefix alone names them (`GOCSPX-`,
//! `ya29.`, `ATBB`, …).
//!
//! The text is lowercased, as gitleaks does, and searched for every rule's keywords by packed
//! SIMD searchers of a few dozen patterns each: the common keywords (`key`, `token`, `secret`)
//! whole, where each begins kept; the rarer ones by four-byte pieces that several may share and
//! that ordinary text seldom holds (`hook` for `hooks.slack.com` and `webhook.office.com`), a
//! keyword counting as found where it reads in full around a piece; and the one- and two-byte
//! ones (`ey`, `sk`) by a substring search each. Only rules whose keyword
//! occurs run, each compiled the first time it is needed, so start-up stays fast and most text
//! meets few rules. Most rules begin with a name after a bounded run of name characters
//! (`[\w.-]{0,50}?(?:heroku)…`); such a rule is tried, anchored, only where a spelling of its
//! name begins, and its whole expression runs only from just before a place where the rest
//! matched, so that it finds what a search of the whole text finds at a fraction of the cost.
//! A match counts when its secret clears the rule's entropy threshold and no allowlist holds,
//! as in gitleaks. toolgate's own `sha256:` digests, git object ids and UUIDs are never
//! redacted on their own or as the value of a generic assignment; only a provider rule that
//! names the provider (`HEROKU_API_KEY=<uuid>`) redacts one.
//!
//! The count of replacements goes into the evidence so a reviewer knows something was hidden.
//! Should the compiled-in rules ever fail to load, every text is replaced whole: output that
//! cannot be checked does not leave.
//!
//! The parts: `rule_set` loads the rules and finds one text's secrets; `prefilter` decides
//! which rules a text can match; `rule` and `anchor` run one rule; `allowlist` lets findings
//! through; `own_rules` are toolgate's rules beside gitleaks'.

mod allowlist;
mod anchor;
mod own_rules;
mod prefilter;
mod rule;
mod rule_set;

use std::sync::LazyLock;

use serde_json::Value;

use allowlist::{PROTECTED, PROTECTED_SHAPE};
use rule_set::RuleSet;

/// What replaces a secret.
pub const MARKER: &str = "[REDACTED]";

static RULES: LazyLock<Result<RuleSet, String>> = LazyLock::new(RuleSet::load);

/// The loaded rules, or why they could not be loaded.
pub(crate) fn rule_set() -> Result<&'static RuleSet, &'static str> {
    RULES.as_ref().map_err(String::as_str)
}

/// Loads the rules now; otherwise the first text redacted waits while they load (about 10
/// ms). A process that will redact soon calls this on a thread of its own at start.
pub fn prepare() {
    let _ = rule_set();
    LazyLock::force(&PROTECTED);
    LazyLock::force(&PROTECTED_SHAPE);
}

/// Redacts `text`, returning the new text (if anything changed) and the number of secrets.
pub fn redact_text(text: &str) -> (Option<String>, usize) {
    if text.is_empty() {
        return (None, 0);
    }
    // Rules that cannot run cannot vouch for the text: it is replaced whole.
    let Some(spans) = rule_set().ok().and_then(|rules| rules.secrets(text)) else {
        return (Some(MARKER.to_owned()), 1);
    };
    if spans.is_empty() {
        return (None, 0);
    }
    // Overlapping findings (a rule of gitleaks' and one of toolgate's on the same value)
    // become one replacement covering both.
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in &merged {
        out.push_str(text.get(at..*start).unwrap_or_default());
        out.push_str(MARKER);
        at = *end;
    }
    out.push_str(text.get(at..).unwrap_or_default());
    (Some(out), merged.len())
}

/// Redacts `text` in place; returns the number of secrets.
pub fn redact_string(text: &mut String) -> usize {
    let (replaced, count) = redact_text(text);
    if let Some(replaced) = replaced {
        *text = replaced;
    }
    count
}

/// Redacts a string under a name that can make it a secret (`"aws_secret_access_key": "…"`)
/// as the text `"name": "value"` it stands for: most rules need the name to tell a key from
/// any other long string. Returns the number of secrets.
fn redact_named(key: &str, value: &mut String) -> usize {
    let Ok(rules) = rule_set() else {
        return 0;
    };
    if !rules.mentions_keyword(key) {
        return 0;
    }
    let (Ok(key_json), Ok(value_json)) = (serde_json::to_string(key), serde_json::to_string(value))
    else {
        return 0;
    };
    let prefix = format!("{key_json}: ");
    let (Some(redacted), found) = redact_text(&format!("{prefix}{value_json}")) else {
        return 0;
    };
    // The replacement lies inside the quotes, or took them with it: then the whole value goes.
    let replaced = redacted
        .strip_prefix(&prefix)
        .and_then(|rest| serde_json::from_str::<String>(rest).ok())
        .unwrap_or_else(|| MARKER.to_owned());
    if replaced == *value {
        return 0;
    }
    *value = replaced;
    found
}

/// Redacts every string in `value`, keys included; returns the number of secrets.
pub fn redact_value(value: &mut Value) -> usize {
    match value {
        Value::String(text) => redact_string(text),
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => {
            let mut count: usize = map
                .iter_mut()
                .map(|(key, item)| match item {
                    Value::String(text) => redact_string(text) + redact_named(key, text),
                    other => redact_value(other),
                })
                .sum();
            // Keys rarely hold secrets; rename only those that do.
            let renames: Vec<(String, String, usize)> = map
                .keys()
                .filter_map(|key| match redact_text(key) {
                    (Some(new_key), found) => Some((key.clone(), new_key, found)),
                    (None, _) => None,
                })
                .collect();
            for (key, new_key, found) in renames {
                count += found;
                if let Some(item) = map.remove(&key) {
                    map.insert(new_key, item);
                }
            }
            count
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// (input, expected output, secrets found)
    const CASES: &[(&str, &str, usize)] = &[
        ("key AKIA2OGYBAH6TPLQZR7M here", "key [REDACTED] here", 1),
        // AWS's documentation key: gitleaks allows it, toolgate redacts it like any key.
        ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED] here", 1),
        ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "[REDACTED]", 1),
        // A random key that holds one of gitleaks' stop words (`idea`), assigned with spaces:
        // gitleaks' generic rule lets it through; toolgate's own assignment rule does not.
        (
            "aws_secret_access_key = j8bxN/P01AzIR2svIDea7Op+RinM57ElsBvL4QzJ",
            "aws_secret_access_key = [REDACTED]",
            1,
        ),
        ("password = hunter2", "password = [REDACTED]", 1),
        (
            "let token = format!(\"{a}{b}\");",
            "let token = format!(\"{a}{b}\");",
            0,
        ),
        (
            "api_key = os.environ[\"API_KEY\"]",
            "api_key = os.environ[\"API_KEY\"]",
            0,
        ),
        (
            "github_pat_11ABCDEFG0Qx7rT2mZ9kLw_4nVb8sYp1cHd6jFg3uRe5oTi0aXz7qWm2kLn9bVc4xZs8dFh1jGk6lPo3iU",
            "[REDACTED]",
            1,
        ),
        ("glpat-abcdefghij0123456789", "[REDACTED]", 1),
        (
            "xoxb-263594206564-2343594206574-FGqddMF8t08v8N7Oq4i57vs1",
            "[REDACTED]",
            1,
        ),
        (
            "t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "t=[REDACTED]",
            1,
        ),
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AWS_SECRET_ACCESS_KEY=[REDACTED]",
            1,
        ),
        (
            "export GITHUB_TOKEN=abc123",
            "export GITHUB_TOKEN=[REDACTED]",
            1,
        ),
        ("db_password: \"hunter2\"", "db_password: \"[REDACTED]\"", 1),
        (
            "{\"api_key\": \"sk-live-1234\"}",
            "{\"api_key\": \"[REDACTED]\"}",
            1,
        ),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nrest",
            "[REDACTED]\nrest",
            1,
        ),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk",
            "[REDACTED]",
            1,
        ),
        (
            "fn token(&self) -> &str { self.token }",
            "fn token(&self) -> &str { self.token }",
            0,
        ),
        (
            "let password = read_password();",
            "let password = read_password();",
            0,
        ),
        ("the quick brown fox", "the quick brown fox", 0),
        // A plain word given to a sensitive name is a setting, not a secret.
        (
            "{\"read_token\": \"allowed\"}",
            "{\"read_token\": \"allowed\"}",
            0,
        ),
        ("max_tokens=4096", "max_tokens=4096", 0),
        (
            "const HEADER: &str = \"-----BEGIN PRIVATE KEY-----\";",
            "const HEADER: &str = \"-----BEGIN PRIVATE KEY-----\";",
            0,
        ),
        // toolgate's own identifiers stay, even after a sensitive name.
        (
            "\"token\": \"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
            "\"token\": \"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
            0,
        ),
        (
            "session_token=3f2c8e1a-9b4d-4c7e-a1f0-6d5e4b3a2c1f",
            "session_token=3f2c8e1a-9b4d-4c7e-a1f0-6d5e4b3a2c1f",
            0,
        ),
        (
            "access: 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
            "access: 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
            0,
        ),
    ];

    #[test]
    fn redaction_table() {
        let mut wrong = Vec::new();
        for (input, expected, count) in CASES {
            let (replaced, found) = redact_text(input);
            let got = replaced.unwrap_or_else(|| (*input).to_owned());
            if (got.as_str(), found) != (*expected, *count) {
                wrong.push(format!(
                    "{input}\n  got {got} ({found})\n want {expected} ({count})"
                ));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_value_is_read_with_its_name() {
        let mut value = json!({
            "aws_secret_access_key": "m6aY4WSVvdG4BAVYrsh7sQc8RxjZNLxBQkkDau4k",
            "read_token": "allowed",
            "note": "m6aY4WSVvdG4BAVYrsh7sQc8RxjZNLxBQkkDau4k",
        });
        assert_eq!(redact_value(&mut value), 1);
        assert_eq!(value["aws_secret_access_key"], "[REDACTED]");
        assert_eq!(value["read_token"], "allowed");
        // Without a name, a long string is only a long string.
        assert_eq!(value["note"], "m6aY4WSVvdG4BAVYrsh7sQc8RxjZNLxBQkkDau4k");
    }

    #[test]
    fn values_are_walked() {
        let mut value = json!({"out": ["ok", "AKIA2OGYBAH6TPLQZR7M"], "n": 1});
        assert_eq!(redact_value(&mut value), 1);
        assert_eq!(value, json!({"out": ["ok", "[REDACTED]"], "n": 1}));
    }
}
