//! Secrets in tool output are replaced before the output leaves the pipeline.
//!
//! This is a net, not a proof: it catches the common credential shapes (cloud keys, forge and
//! chat tokens, private-key blocks, JWTs, `KEY=value` assignments). The count of replacements
//! goes into the evidence so a reviewer knows something was hidden.

use std::sync::LazyLock;

use regex::{Regex, RegexSet};
use serde_json::Value;

/// What replaces a secret.
pub const MARKER: &str = "[REDACTED]";

struct Rule {
    regex: Regex,
    /// Keep capture group 1 (a name, an `=`) and replace the rest.
    keep_prefix: bool,
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let rules: [(&str, bool); 10] = [
        // PEM private keys, whole blocks and blocks cut off by truncation.
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*?)-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----",
            false,
        ),
        (
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?s:.*)",
            false,
        ),
        // AWS access key ids.
        (
            r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|APKA)[0-9A-Z]{16}(?-u:\b)",
            false,
        ),
        // GitHub tokens: classic and fine-grained.
        (
            r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?-u:\b)",
            false,
        ),
        // GitLab tokens.
        (
            r"(?-u:\b)gl(?:pat|dt|ptt|rt|cbt|oas|ft|imt|agent|soat)-[A-Za-z0-9_\-]{20,}",
            false,
        ),
        // Slack tokens and webhooks.
        (r"(?-u:\b)xox[abposre]-[A-Za-z0-9-]{10,}", false),
        (r"https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+", false),
        // JSON Web Tokens.
        (
            r"(?-u:\b)eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
            false,
        ),
        // `NAME=value` without spaces, as in .env files and shell exports.
        (
            r"(?i)((?-u:\b)[A-Z0-9_.-]*(?:api_?key|access_?key|secret|token|password|passwd|private_?key|credentials?)[A-Z0-9_]*=)[^\s'`]+",
            true,
        ),
        // `name: "value"`, `name = 'value'`, `"name": "value"`.
        (
            r#"(?i)((?-u:\b)[A-Z0-9_.-]*(?:api_?key|access_?key|secret|token|password|passwd|private_?key|credentials?)[A-Z0-9_]*["']?\s*[:=]\s*)(?:"[^"\n]+"|'[^'\n]+')"#,
            true,
        ),
    ];
    rules
        .into_iter()
        .filter_map(|(pattern, keep_prefix)| {
            Regex::new(pattern)
                .ok()
                .map(|regex| Rule { regex, keep_prefix })
        })
        .collect()
});

/// Every rule in one automaton: a single pass tells which rules can match at all, so text
/// without secrets — nearly all of it — is scanned once, not once per rule.
static ANY_RULE: LazyLock<Option<RegexSet>> =
    LazyLock::new(|| RegexSet::new(RULES.iter().map(|rule| rule.regex.as_str())).ok());

/// Redacts `text`, returning the new text (if anything changed) and the number of secrets.
pub fn redact_text(text: &str) -> (Option<String>, usize) {
    let candidates: Vec<usize> = match ANY_RULE.as_ref() {
        // `is_match` stops at the first match and needs no overlapping search.
        Some(set) if !set.is_match(text) => return (None, 0),
        Some(set) => set.matches(text).into_iter().collect(),
        // The set failed to build: fall back to trying every rule.
        None => (0..RULES.len()).collect(),
    };
    if candidates.is_empty() {
        return (None, 0);
    }
    let mut current: Option<String> = None;
    let mut count = 0;
    for rule in candidates.into_iter().filter_map(|i| RULES.get(i)) {
        let source = current.as_deref().unwrap_or(text);
        let found = rule.regex.find_iter(source).count();
        if found == 0 {
            continue;
        }
        count += found;
        let replaced = if rule.keep_prefix {
            rule.regex
                .replace_all(source, format!("${{1}}{MARKER}"))
                .into_owned()
        } else {
            rule.regex.replace_all(source, MARKER).into_owned()
        };
        current = Some(replaced);
    }
    (current, count)
}

/// Redacts `text` in place; returns the number of secrets.
pub fn redact_string(text: &mut String) -> usize {
    let (replaced, count) = redact_text(text);
    if let Some(replaced) = replaced {
        *text = replaced;
    }
    count
}

/// Redacts every string in `value`, keys included; returns the number of secrets.
pub fn redact_value(value: &mut Value) -> usize {
    match value {
        Value::String(text) => redact_string(text),
        Value::Array(items) => items.iter_mut().map(redact_value).sum(),
        Value::Object(map) => {
            let mut count: usize = map.values_mut().map(redact_value).sum();
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
        ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED] here", 1),
        ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "[REDACTED]", 1),
        (
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
            "[REDACTED]",
            1,
        ),
        ("glpat-abcdefghij0123456789", "[REDACTED]", 1),
        ("xoxb-123456789012-abcdefghij", "[REDACTED]", 1),
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
        ("db_password: \"hunter2\"", "db_password: \"[REDACTED]", 1),
        (
            "{\"api_key\": \"sk-live-1234\"}",
            "{\"api_key\": [REDACTED]}",
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
    ];

    #[test]
    fn redaction_table() {
        for (input, expected, count) in CASES {
            let (replaced, found) = redact_text(input);
            let got = replaced.unwrap_or_else(|| (*input).to_owned());
            // Quoted assignments replace the whole quoted value, quotes included.
            let expected = expected.replace("\"[REDACTED]", "[REDACTED]");
            assert_eq!(
                (got.as_str(), found),
                (expected.as_str(), *count),
                "{input}"
            );
        }
    }

    #[test]
    fn values_are_walked() {
        let mut value = json!({"out": ["ok", "AKIAIOSFODNN7EXAMPLE"], "n": 1});
        assert_eq!(redact_value(&mut value), 1);
        assert_eq!(value, json!({"out": ["ok", "[REDACTED]"], "n": 1}));
    }

    #[test]
    fn every_rule_compiles() {
        assert_eq!(RULES.len(), 10);
        assert_eq!(ANY_RULE.as_ref().map(RegexSet::len), Some(10));
    }
}
