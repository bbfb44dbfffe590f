//! What redaction costs on output that holds no secret, which is nearly all output: 4 KiB and
//! 1 MiB of toolgate's own Rust source, read from the repository at start.
//!
//! - `redact_source/<size>`: `redact_text` with gitleaks' rules and toolgate's own.
//! - `redact_source/before_gitleaks/<size>`: the ten hand-written patterns toolgate had
//!   before, kept in this file, measured in the same run on the same machine.
//! - `redact_hostile/<case>`: output built to be slow (see [`hostile`]).
//!
//! Run with `cargo bench -p toolgate-core --bench redact -- --warm-up-time 1
//! --measurement-time 5`.

#![expect(
    clippy::expect_used,
    reason = "a benchmark whose fixture cannot be built must stop loudly, not measure nothing"
)]

use std::hint::black_box;
use std::path::{Path, PathBuf};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use toolgate_core::redact::redact_text;

/// Every `.rs` file under `crates/`, in a stable order, concatenated and repeated until there
/// is at least `len` bytes, then cut at a character boundary. The redaction code and its tests
/// (`src/redact/`, the benchmark's and the tests' `redact.rs` and `redaction.rs`) are left out: they hold sample secrets on purpose, and the text should stay the same when
/// the rules change so that figures before and after compare.
fn source_text(len: usize) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    collect_rust_files(&root.join("crates"), &mut files);
    files.sort();
    let mut all = String::new();
    for file in &files {
        all.push_str(&std::fs::read_to_string(file).expect("read a source file"));
    }
    assert!(!all.is_empty(), "no Rust source found under crates/");
    let mut text = String::with_capacity(len + all.len());
    while text.len() < len {
        text.push_str(&all);
    }
    let mut cut = len;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    text.truncate(cut);
    text
}

fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) {
    let entries = std::fs::read_dir(dir).expect("list a source directory");
    for entry in entries {
        let path = entry.expect("read a directory entry").path();
        if path.is_dir() {
            if !path.ends_with("src/redact") {
                collect_rust_files(&path, files);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs")
            && !path
                .file_name()
                .is_some_and(|name| name == "redact.rs" || name == "redaction.rs")
        {
            files.push(path);
        }
    }
}

/// The hand-written rules toolgate had before it used gitleaks' rule set, kept here so that
/// the two are measured side by side on the same machine in the same run.
mod before_gitleaks {
    use std::sync::LazyLock;

    use regex::{Regex, RegexSet};

    const MARKER: &str = "[REDACTED]";

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
    pub fn redact_text_before_gitleaks(text: &str) -> (Option<String>, usize) {
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
}

fn redact(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact_source");
    for (name, len) in [("4KiB", 4 * 1024), ("1MiB", 1024 * 1024)] {
        let text = source_text(len);
        // The first call builds the rules; measure the steady state a server runs in.
        black_box(redact_text(&text));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, text| {
            b.iter(|| redact_text(black_box(text)));
        });
        black_box(before_gitleaks::redact_text_before_gitleaks(&text));
        group.bench_with_input(
            BenchmarkId::new("before_gitleaks", name),
            &text,
            |b, text| {
                b.iter(|| before_gitleaks::redact_text_before_gitleaks(black_box(text)));
            },
        );
    }
    group.finish();
}

/// Output built to be slow, a mebibyte of each (in one line, but for the rules that read
/// several).
///
/// - `one_long_line/<size>`: `password = password ` (a match of toolgate's own assignment
///   rule, let through as a plain word) again and again, 256 KiB and 1 MiB of it. Each match
///   once read its whole line, so the time grew with the square of the length (2.9 s for the
///   mebibyte); the two sizes show whether it grows in proportion.
/// - the others: near-matches of toolgate's own rules, each rule's keyword everywhere.
fn hostile(c: &mut Criterion) {
    let mut group = c.benchmark_group("redact_hostile");
    group.sample_size(10);
    let mebibyte = |unit: &str| unit.repeat((1 << 20) / unit.len());
    let unit = "password = password ";
    let mut cases = vec![
        (
            "one_long_line/256KiB".to_owned(),
            unit.repeat((256 << 10) / unit.len()),
        ),
        ("one_long_line/1MiB".to_owned(), mebibyte(unit)),
    ];
    for (name, unit) in [
        ("url_without_at", "x://aaaaaaaa:bbbbbbbb "),
        ("authorization", "authorization: bearer "),
        ("cookie_pairs", "Cookie: a=b;"),
        ("netrc", "machine machine password "),
        ("telegram", "123456789:AA"),
        ("openai_legacy", "sk-sk-sk-a "),
        ("pass", "DB_PASS=pass pass_pass "),
        ("pwd", "A_PWD=_pwd b_pwd_pwd "),
        ("xml_element", "<token>token></token>"),
        ("xml_setting", "key=\"key=\"password\" value=\""),
        ("command_line_flag", "--token --pass -secret "),
        ("mysql", "mysql -p mysql "),
        ("docker_login", "docker login -u docker login "),
        ("sshpass", "sshpass -p sshpass "),
        ("redis_cli", "redis-cli -a redis-cli "),
        ("kubernetes_env", "- name: TOKEN\n  name: token\n"),
        ("putty", "PuTTY-User-Key-File-3: x\n"),
        ("pgpass", "a:5432:b:c:d:*:*:\n:5432:"),
        ("jwk", "{\"kty\":\"d\":\"k\":\"p\":"),
        ("sas_signature", "?sig=&sig=sig=?"),
        ("base64_key", "key=base64:key key base64:"),
        ("prefixed_keys", "key-1//0dp.st.figd_sk-proj-"),
        ("slack_webhook", "hooks.slack.com/services/"),
    ] {
        cases.push((name.to_owned(), mebibyte(unit)));
    }
    for (name, text) in cases {
        black_box(redact_text(&text));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(name), &text, |b, text| {
            b.iter(|| redact_text(black_box(text)));
        });
    }
    group.finish();
}

criterion_group!(benches, redact, hostile);
criterion_main!(benches);
