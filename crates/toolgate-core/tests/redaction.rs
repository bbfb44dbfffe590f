//! Redaction against three corpora: secrets generated afresh on every run from each rule's own
//! regular expression, real text that holds no secret and must come back byte for byte, and
//! the provider keys that passed through before toolgate used gitleaks' rules.
//!
//! The generated corpus prints its seed when it fails; `REDACTION_SEED=<seed>` runs the same
//! samples again.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::path::Path;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use regex::Regex;
use regex_syntax::hir::{
    Capture, Class, ClassUnicode, ClassUnicodeRange, Hir, HirKind, Repetition,
};
use serde_json::Value;
use toolgate_core::redact::{MARKER, redact_text};

const RULE_DATA: &str = include_str!("../data/secret-rules.json");

/// Attempts per rule before a rule counts as one the test cannot generate for.
const ATTEMPTS: usize = 400;

fn seed() -> u64 {
    std::env::var("REDACTION_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(rand::random)
}

/// The rule's pattern as a generator can use it: look-arounds (`\b`, `^`, `$`), which produce
/// no text, become empty, and every class is narrowed to printable ASCII, as real keys are.
fn generator_hir(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => Hir::empty(),
        HirKind::Literal(literal) => Hir::literal(literal.0.clone()),
        HirKind::Class(Class::Unicode(class)) => {
            let mut narrowed = class.clone();
            narrowed.intersect(&ClassUnicode::new([
                ClassUnicodeRange::new(' ', '~'),
                ClassUnicodeRange::new('\n', '\n'),
            ]));
            if narrowed.ranges().is_empty() {
                Hir::class(Class::Unicode(class.clone()))
            } else {
                Hir::class(Class::Unicode(narrowed))
            }
        }
        HirKind::Class(Class::Bytes(class)) => Hir::class(Class::Bytes(class.clone())),
        HirKind::Repetition(repetition) => Hir::repetition(Repetition {
            min: repetition.min,
            max: repetition.max,
            greedy: repetition.greedy,
            sub: Box::new(generator_hir(&repetition.sub)),
        }),
        HirKind::Capture(capture) => Hir::capture(Capture {
            index: capture.index,
            name: capture.name.clone(),
            sub: Box::new(generator_hir(&capture.sub)),
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(generator_hir).collect()),
        HirKind::Alternation(parts) => Hir::alternation(parts.iter().map(generator_hir).collect()),
    }
}

/// Shannon entropy as gitleaks computes it.
fn entropy(data: &str) -> f64 {
    let mut counts = std::collections::HashMap::new();
    for ch in data.chars() {
        *counts.entry(ch).or_insert(0usize) += 1;
    }
    let length = data.len() as f64;
    counts
        .values()
        .map(|count| {
            let frequency = *count as f64 / length;
            -frequency * frequency.log2()
        })
        .sum()
}

fn joined(list: &Value) -> Option<Regex> {
    let regexes: Vec<String> = list
        .get("regexes")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .map(|regex| format!("(?:{regex})"))
        .collect();
    (!regexes.is_empty()).then(|| Regex::new(&regexes.join("|")).unwrap())
}

/// An allowlist from the data file, checked the way gitleaks checks one.
struct Allowlist {
    target: String,
    regex: Option<Regex>,
    stopwords: Vec<String>,
}

impl Allowlist {
    fn new(list: &Value) -> Self {
        Self {
            target: list["target"].as_str().unwrap_or("secret").to_owned(),
            regex: joined(list),
            stopwords: list["stopwords"]
                .as_array()
                .map(|words| {
                    words
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_lowercase)
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    fn allows(&self, secret: &str, matched: &str, line: &str) -> bool {
        let target = match self.target.as_str() {
            "match" => matched,
            "line" => line,
            _ => secret,
        };
        let lower = secret.to_lowercase();
        self.regex
            .as_ref()
            .is_some_and(|regex| regex.is_match(target))
            || self
                .stopwords
                .iter()
                .any(|word| lower.contains(word.as_str()))
    }
}

/// A value toolgate never redacts on its own: a `sha256:` digest, a git object id, a UUID.
fn protected_shape(secret: &str) -> bool {
    Regex::new(
        r#"(?i)^["']?(?:sha256:[0-9a-f]{64}|[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})["']?$"#,
    )
    .unwrap()
    .is_match(secret)
}

/// Where a generated key is put: the lines a tool's output holds keys in.
fn in_context(rng: &mut StdRng, sample: &str) -> String {
    match rng.random_range(0..4) {
        0 => format!("{sample}\n"),
        1 => format!("# written by the deploy script\nexport SERVICE_VALUE={sample}\nexit 0\n"),
        2 => format!("config loaded\n{sample}\nready\n"),
        _ => format!("value = '{sample}'\n"),
    }
}

/// A line holding a secret the rule finds, as gitleaks would report it, or why none could be
/// made.
fn generate(
    rng: &mut StdRng,
    rule: &Value,
    global: &Allowlist,
) -> Result<(String, String), String> {
    let id = rule["id"].as_str().unwrap();
    let pattern = rule["regex"].as_str().unwrap();
    let regex = Regex::new(pattern).map_err(|err| format!("{id}: {err}"))?;
    let hir = regex_syntax::Parser::new()
        .parse(pattern)
        .map_err(|err| format!("{id}: {err}"))?;
    let generator = rand_regex::Regex::with_hir(generator_hir(&hir), 24)
        .map_err(|err| format!("{id}: {err}"))?;
    let keywords: Vec<String> = rule["keywords"]
        .as_array()
        .unwrap()
        .iter()
        .map(|word| word.as_str().unwrap().to_owned())
        .collect();
    let dotted: Vec<(String, Regex)> = keywords
        .iter()
        .filter(|word| word.contains('.'))
        .map(|word| {
            let pattern = regex::escape(word).replace("\\.", ".");
            (word.clone(), Regex::new(&format!("(?i){pattern}")).unwrap())
        })
        .collect();
    let limit = rule["entropy"].as_f64().unwrap_or(0.0);
    let group = rule["secretGroup"].as_u64().unwrap_or(0) as usize;
    let allowlists: Vec<Allowlist> = rule["allowlists"]
        .as_array()
        .map(|lists| lists.iter().map(Allowlist::new).collect())
        .unwrap_or_default();
    let generic = id == "generic-api-key";
    for _ in 0..ATTEMPTS {
        let mut sample: String = rng.sample(&generator);
        // A keyword such as `hooks.slack.com` reads as a pattern with `.` for any character in
        // the rule; write it as the literal it stands for.
        for (word, pattern) in &dotted {
            sample = pattern
                .replace_all(&sample, |found: &regex::Captures<'_>| {
                    // Keep the sample's letters, whose case the rule may care about.
                    found[0]
                        .chars()
                        .zip(word.chars())
                        .map(|(got, want)| if want == '.' { '.' } else { got })
                        .collect::<String>()
                })
                .into_owned();
        }
        let mut line = in_context(rng, &sample);
        // Some rules want their keyword near the key rather than in it (`facebook`).
        if !keywords.is_empty()
            && !keywords
                .iter()
                .any(|word| line.to_lowercase().contains(word.as_str()))
        {
            let word = &keywords[rng.random_range(0..keywords.len())];
            line = format!("# {word} settings\n{line}");
        }
        for found in regex.find_iter(&line) {
            let matched = found.as_str().trim_matches('\n');
            let groups = regex.captures(matched).unwrap();
            let secret = if groups.len() >= 2 {
                if group > 0 {
                    match groups.get(group) {
                        Some(found) => found.as_str(),
                        None => continue,
                    }
                } else {
                    groups
                        .iter()
                        .skip(1)
                        .flatten()
                        .map(|found| found.as_str())
                        .find(|found| !found.is_empty())
                        .unwrap_or(matched)
                }
            } else {
                matched
            };
            let line_of_match = line
                .lines()
                .find(|text| text.contains(matched))
                .unwrap_or(&line);
            if secret.len() < 4
                || (limit > 0.0 && entropy(secret) <= limit)
                || global.allows(secret, matched, line_of_match)
                || allowlists
                    .iter()
                    .any(|list| list.allows(secret, matched, line_of_match))
                || ((generic || secret == matched) && protected_shape(secret))
                // A secret that also occurs in the context cannot be checked for.
                || line.matches(secret).count() > 1
            {
                continue;
            }
            return Ok((line.clone(), secret.to_owned()));
        }
    }
    Err(format!("{id}: no sample in {ATTEMPTS} attempts"))
}

#[test]
fn every_rule_family_is_redacted_in_a_fresh_generated_corpus() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let data: Value = serde_json::from_str(RULE_DATA).unwrap();
    let global = Allowlist::new(&data["allowlist"]);
    let rules = data["rules"].as_array().unwrap();
    assert!(
        rules.len() > 200,
        "the data file holds {} rules",
        rules.len()
    );
    let mut failures = Vec::new();
    for rule in rules {
        match generate(&mut rng, rule, &global) {
            Ok((line, secret)) => {
                let (redacted, count) = redact_text(&line);
                let redacted = redacted.unwrap_or_else(|| line.clone());
                if count == 0 || redacted.contains(&secret) || !redacted.contains(MARKER) {
                    failures.push(format!(
                        "{}: not redacted\n  input:  {line:?}\n  secret: {secret:?}\n  output: {redacted:?}",
                        rule["id"]
                    ));
                }
            }
            Err(why) => failures.push(why),
        }
    }
    assert!(
        failures.is_empty(),
        "seed {seed} (rerun with REDACTION_SEED={seed}): {} of {} rules failed:\n{}",
        failures.len(),
        rules.len(),
        failures.join("\n")
    );
}

#[test]
fn benign_corpus_is_left_byte_for_byte() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = root.join("tests/corpus/redaction/benign");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 4, "benign corpus: {} files", files.len());
    // Real files of this repository, read where they are rather than copied: lockfiles full
    // of digests, and source that talks of tokens, secrets and keys without holding any.
    files.extend(
        [
            "Cargo.lock",
            "tests/deps/package-lock.json",
            "crates/toolgate-core/src/approval.rs",
            "crates/toolgate-core/src/sensitive.rs",
            "crates/toolgate-audit/src/chain.rs",
            "crates/toolgate-tools/src/git/mod.rs",
            "crates/toolgate-tools/src/git/diff.rs",
        ]
        .map(|path| root.join(path)),
    );
    let mut changed = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let (redacted, count) = redact_text(&text);
        if let Some(redacted) = redacted {
            let lines: String = text
                .lines()
                .zip(redacted.lines())
                .filter(|(before, after)| before != after)
                .map(|(before, after)| format!("\n  before: {before}\n  after:  {after}"))
                .collect();
            changed.push(format!("{}: {count} redactions{lines}", file.display()));
        }
    }
    assert!(changed.is_empty(), "{}", changed.join("\n"));
}

/// `count` characters drawn from `alphabet`.
fn random(rng: &mut StdRng, alphabet: &str, count: usize) -> String {
    let chars: Vec<char> = alphabet.chars().collect();
    (0..count)
        .map(|_| chars[rng.random_range(0..chars.len())])
        .collect()
}

const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const URLSAFE: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const BASE64: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const LETTERS: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const PASSWORD: &str =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&*+-?@^_~";
/// What a password in a URL is written with, unescaped.
const URL_PASSWORD: &str =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!$%&*+-._~";

/// The keys the issue found passing through, each with a fresh random body in the provider's
/// format, in the line a tool would print them in; the secret is what must go.
fn provider_keys(rng: &mut StdRng) -> Vec<(String, String)> {
    let anthropic = format!("sk-ant-api03-{}AA", random(rng, URLSAFE, 93));
    let openai = format!(
        "sk-proj-{}T3BlbkFJ{}",
        random(rng, URLSAFE, 74),
        random(rng, URLSAFE, 74)
    );
    let google = format!("AIza{}", random(rng, URLSAFE, 35));
    let stripe = format!("sk_live_{}", random(rng, ALNUM, 24));
    let npm = format!("npm_{}", random(rng, ALNUM, 36));
    let pypi = format!("pypi-AgEIcHlwaS5vcmc{}", random(rng, URLSAFE, 70));
    let huggingface = format!("hf_{}", random(rng, LETTERS, 34));
    let sendgrid = format!(
        "SG.{}.{}",
        random(rng, URLSAFE, 22),
        random(rng, URLSAFE, 43)
    );
    let aws = random(rng, BASE64, 40);
    let password = random(rng, PASSWORD, 16);
    let quoted_password = random(rng, PASSWORD, 14);
    let short_password = format!(
        "{}{}",
        random(rng, LETTERS, 6),
        random(rng, "0123456789", 2)
    );
    // A letter first and a digit last: neither a placeholder (`$NAME`) nor a plain word.
    let url_password = format!(
        "{}{}{}",
        random(rng, LETTERS, 1),
        random(rng, URL_PASSWORD, 14),
        random(rng, "0123456789", 1)
    );
    let url_token = random(rng, ALNUM, 32);
    let discord = random(rng, URLSAFE, 68);
    let bearer = random(rng, URLSAFE, 40);
    let basic = random(rng, BASE64, 28);
    let session = random(rng, ALNUM, 32);
    let telegram = format!(
        "{}:AA{}",
        random(rng, "0123456789", 10),
        random(rng, URLSAFE, 33)
    );
    let netrc = format!("{}{}", random(rng, LETTERS, 1), random(rng, PASSWORD, 15));
    const HEX: &str = "0123456789abcdef";
    let prefixed = [
        format!("sk-{}", random(rng, ALNUM, 48)),
        format!("GOCSPX-{}", random(rng, URLSAFE, 28)),
        format!("ya29.{}", random(rng, URLSAFE, 120)),
        format!(
            "AAAA{}:APA91b{}",
            random(rng, URLSAFE, 7),
            random(rng, URLSAFE, 134)
        ),
        format!(
            "sk.eyJ1Ijoi{}.{}",
            random(rng, URLSAFE, 50),
            random(rng, URLSAFE, 22)
        ),
        format!(
            "access_token$production${}${}",
            random(rng, "abcdefghijklmnopqrstuvwxyz0123456789", 16),
            random(rng, HEX, 32)
        ),
        format!("ATBB{}", random(rng, ALNUM, 32)),
    ];
    vec![
        (
            format!("ANTHROPIC_API_KEY={anthropic}\n"),
            anthropic.clone(),
        ),
        (
            format!("export OPENAI_API_KEY=\"{openai}\"\n"),
            openai.clone(),
        ),
        (format!("const key = \"{google}\";\n"), google),
        (format!("stripe.api_key = '{stripe}'\n"), stripe),
        (
            format!("//registry.npmjs.org/:_authToken={npm}\n"),
            npm.clone(),
        ),
        (
            format!("[pypi]\nusername = __token__\npassword = {pypi}\n"),
            pypi,
        ),
        (format!("HF_TOKEN={huggingface}\n"), huggingface),
        (format!("SENDGRID_API_KEY={sendgrid}\n"), sendgrid),
        (
            format!(
                "[default]\naws_access_key_id = AKIA{}\naws_secret_access_key = {aws}\n",
                random(rng, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
            ),
            aws,
        ),
        (
            format!("database:\n  user: app\n  password: {password}\n"),
            password,
        ),
        (
            format!("password: \"{quoted_password}\"\n"),
            quoted_password,
        ),
        (format!("DB_PASSWORD={short_password}\n"), short_password),
        (format!("{{\"api_token\": \"{npm}x\"}}"), format!("{npm}x")),
        (
            format!("curl -H 'Authorization: Bearer {openai}' https://api.openai.com\n"),
            openai,
        ),
        (format!("sk = {anthropic}"), anthropic),
        (
            format!("DATABASE_URL=postgres://app:{url_password}@db.internal:5432/prod\n"),
            url_password.clone(),
        ),
        (
            format!("REDIS_URL=redis://:{url_password}@cache:6379/0\n"),
            url_password.clone(),
        ),
        (
            format!(
                "{{\"uri\": \"mongodb+srv://admin:{url_password}@cluster0.ab1cd.mongodb.net/?retryWrites=true\"}}"
            ),
            url_password,
        ),
        (
            format!(
                "origin\thttps://oauth2:{url_token}@gitlab.example.com/group/repo.git (fetch)\n"
            ),
            url_token,
        ),
        (
            format!(
                "DISCORD_HOOK=https://discord.com/api/webhooks/{}/{discord}\n",
                random(rng, "0123456789", 18)
            ),
            discord,
        ),
        (
            format!("> Authorization: Bearer {bearer}\r\n"),
            bearer.clone(),
        ),
        (
            format!("{{\"headers\": {{\"Authorization\": \"Bearer {bearer}\"}}}}"),
            bearer,
        ),
        (format!("Authorization: Basic {basic}=\n"), basic),
        (
            format!("Cookie: theme=dark; sessionid={session}\n"),
            session.clone(),
        ),
        (
            format!("< set-cookie: __Host-sid={session}; Path=/; Secure; HttpOnly\n"),
            session,
        ),
        (
            format!("POST https://api.telegram.org/bot{telegram}/sendMessage\n"),
            telegram.clone(),
        ),
        (format!("the bot's token is {telegram}\n"), telegram),
        (
            format!("machine api.example.com login me password {netrc}\n"),
            netrc.clone(),
        ),
        (
            format!("machine api.example.com\n  login me\n  password {netrc}\n"),
            netrc,
        ),
    ]
    .into_iter()
    .chain(
        prefixed
            .into_iter()
            .map(|key| (format!("found in the build log: {key}\n"), key)),
    )
    .collect()
}

#[test]
fn the_provider_keys_that_passed_through_are_redacted() {
    let seed = seed();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut missed = Vec::new();
    for (line, secret) in provider_keys(&mut rng) {
        let (redacted, count) = redact_text(&line);
        let redacted = redacted.unwrap_or_else(|| line.clone());
        if count == 0 || redacted.contains(&secret) {
            missed.push(format!("{line:?} -> {redacted:?}"));
        }
    }
    assert!(
        missed.is_empty(),
        "seed {seed} (rerun with REDACTION_SEED={seed}):\n{}",
        missed.join("\n")
    );
}

/// Every line comes back as it was, with nothing counted.
fn all_stay(lines: &[&str]) {
    for line in lines {
        assert_eq!(redact_text(line), (None, 0), "{line}");
    }
}

#[test]
fn settings_named_like_secrets_stay() {
    all_stay(&[
        "\"read_token\": \"allowed\"",
        "token_type: Bearer",
        "max_tokens=4096",
        "let password_hash = hash(&password);",
        "password: String,",
        "secret: Vec<u8>,",
        "token: Option<String>,",
        "password: &str",
        "\"expected_digest\": \"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "commit 4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        "auth_token: 3f2c8e1a-9b4d-4c7e-a1f0-6d5e4b3a2c1f",
    ]);
}

/// Names that end in `pass` or `_pwd`, as .env and compose files spell them.
#[test]
fn short_password_names_are_redacted_and_look_alikes_stay() {
    for (line, redacted) in [
        ("DB_PASS=Zk8qTr2mWx9v", "DB_PASS=[REDACTED]"),
        ("MYSQL_PWD=hunter2hunter2", "MYSQL_PWD=[REDACTED]"),
        (
            "export SMTP_PASS='q9Zx8Wv7'",
            "export SMTP_PASS='[REDACTED]'",
        ),
        (
            "  redis_pass: \"Rz8v-K2pL\"",
            "  redis_pass: \"[REDACTED]\"",
        ),
        (
            "{\"db_pass\": \"Jd8kL2mN9p\"}",
            "{\"db_pass\": \"[REDACTED]\"}",
        ),
        ("PASS=x7Fq9w", "PASS=[REDACTED]"),
        (
            "openssl enc -pass pass:S3cr3t!9",
            "openssl enc -pass pass:[REDACTED]",
        ),
        ("MQ_ADMIN_PWD = 4f7e-Qz", "MQ_ADMIN_PWD = [REDACTED]"),
    ] {
        assert_eq!(redact_text(line), (Some(redacted.to_owned()), 1), "{line}");
    }
    all_stay(&[
        "PWD=/home/alice/project",
        "OLDPWD=/tmp/build-7f3a",
        "bypass=Zk8qTr2mWx9v",
        "compass: n0rth-3ast",
        "PASS_THROUGH=1",
        "FIRST_PASS=true",
        "DB_PASS=${DB_PASS}",
        "DB_PASS=",
        "tests pass: 120/120",
        "\"pass\": true",
        "passes=12",
        "let pass = compute(&input);",
        "SMTP_PASS: required",
        "$pass = !$pass;",
        "$pass = $_POST['pass'];",
        "DB_PASS=$(cat /run/secrets/db)",
        "private_key = $dir/private/cakey.pem",
        "$password = $this->password;",
    ]);
    let hash = "password_hash: $argon2id$v=19$m=65536,t=3,p=4$c2FsdHNhbHQ$9q2Jd8kL2mN9pQx7Fq9w";
    assert_eq!(redact_text(hash).1, 1, "{hash}");
    // A default after a variable is written out: it is the password when the variable is unset.
    for line in [
        "POSTGRES_PASSWORD=${POSTGRES_PASSWORD:-Zk8qTr2mWx9v}",
        "  password: ${DB_PASSWORD:-Zk8qTr2mWx9v}",
        "redis://:${REDIS_PASSWORD:-Zk8qTr2mWx9v}@cache:6379",
    ] {
        let (redacted, count) = redact_text(line);
        assert_eq!(count, 1, "{line}");
        assert!(!redacted.unwrap().contains("Zk8qTr2mWx9v"), "{line}");
    }
}

/// Secrets in XML settings, on command lines, and keys gitleaks does not know.
#[test]
fn settings_files_command_lines_and_more_keys_are_redacted() {
    for (line, redacted) in [
        (
            "<server><id>repo</id><password>Jd8kL2mN9pQ</password></server>",
            "<server><id>repo</id><password>[REDACTED]</password></server>",
        ),
        (
            "<db.token>tK9-vR2mQx7</db.token>",
            "<db.token>[REDACTED]</db.token>",
        ),
        (
            "<add key=\"ApiKey\" value=\"MxW4EqZKC46vMIAkzBJC0boE\" />",
            "<add key=\"ApiKey\" value=\"[REDACTED]\" />",
        ),
        (
            "<add key=\"Smtp.Password\" value=\"q9Zx8Wv7\"/>",
            "<add key=\"Smtp.Password\" value=\"[REDACTED]\"/>",
        ),
        (
            "vault login --password Zk8qTr2mWx9v",
            "vault login --password [REDACTED]",
        ),
        ("cli --token=ghx7Qp2Lm9Vt", "cli --token=[REDACTED]"),
        (
            "openssl pkcs12 -pass x7Fq9w",
            "openssl pkcs12 -pass [REDACTED]",
        ),
        ("tool --api-key 'k3Y-9fQ2xZ'", "tool --api-key '[REDACTED]'"),
        (
            "mysql -uroot -pQGb5hXJtgvvN db",
            "mysql -uroot -p[REDACTED] db",
        ),
        (
            "mysqldump -h db -u app -pJd8kL2mN9p app > dump.sql",
            "mysqldump -h db -u app -p[REDACTED] app > dump.sql",
        ),
        (
            "docker login -u me -p wk27acmFcrEHnc6ovYuo registry.example.com",
            "docker login -u me -p [REDACTED] registry.example.com",
        ),
        (
            "WEBHOOK=whsec_3GxeYYXwSLQcWtxJTQr1FqXSTs98vPlL",
            "WEBHOOK=[REDACTED]",
        ),
        (
            "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",
            "[REDACTED]",
        ),
        ("r8_ZlT57J9LO393gxg0emnuxlD5RVWfpz8IDyahM", "[REDACTED]"),
        (
            "sshpass -p 'D42sZboHdIkK' ssh root@host",
            "sshpass -p '[REDACTED]' ssh root@host",
        ),
        (
            "redis-cli -h cache -a IfvfrVg5ufbOPjgV ping",
            "redis-cli -h cache -a [REDACTED] ping",
        ),
        (
            "app.config['SECRET_KEY'] = 'Kf0ElTELYCRPklZlIuR0HmLh'",
            "app.config['SECRET_KEY'] = '[REDACTED]'",
        ),
        (
            "os.environ[\"API_KEY\"] = \"x7Fq9wZk8qTr2m\"",
            "os.environ[\"API_KEY\"] = \"[REDACTED]\"",
        ),
        (
            "xai-ohDSeX5gacmmRKGcc8ibvVjZTy506lYX1KP2PYUYZ3tqncjkXVvHrFIEBbv7nK2LUF843EGIFZsjE0yN",
            "[REDACTED]",
        ),
        (
            "OPENAI_KEY: sk-proj-kqdlm7tOtHWnsCGRlrwZbqcabUGJmGEp7CgQ0PBQFI14zGtS",
            "OPENAI_KEY: [REDACTED]",
        ),
        (
            "mailgun key-f25ec84d8dbc74254770f58904dba41e",
            "mailgun [REDACTED]",
        ),
        (
            "refresh 1//0AKS6zCeaRyML8QjEXAJgfPEn5jOaBaaRQh92fn3hiEbrUKpCUVl7dxXVTS2j",
            "refresh [REDACTED]",
        ),
        (
            "doppler run --token dp.st.dev.5Jmtf7EbsDe0G9Cryn687neLfjVHq8xiM0OGr4hT",
            "doppler run --token [REDACTED]",
        ),
        (
            "figd_6WEi3QrplK1xckSxKM2awH7C9HehwTp0136uXT3y",
            "[REDACTED]",
        ),
        (
            "APP_KEY=base64:VjJWN1dFcllPVE82VGlBM2dhQVhKTGhGejlLakEyWXI=",
            "APP_KEY=[REDACTED]",
        ),
        (
            "  'key' => env('APP_KEY', 'base64:2fl+Ktvkfl+Fuz4Qp/A75G2RTiWVA/ZoKZvp6fiiM10='),",
            "  'key' => env('APP_KEY', '[REDACTED]'),",
        ),
        (
            "Authorization: SSWS 00dBi2ewQr8t4-lC4LvGNWAMsI-z0oaWdfZp_lvi60",
            "Authorization: SSWS [REDACTED]",
        ),
        ("passphrase: SgH6pItQz8p4e6U93Qx3", "passphrase: [REDACTED]"),
        (
            "export GPG_PASSPHRASE=Wq8zT1vKd0xP",
            "export GPG_PASSPHRASE=[REDACTED]",
        ),
        (
            "db.example.com:5432:app:admin:wgz7z54VfB4PbxntqB\n",
            "db.example.com:5432:app:admin:[REDACTED]\n",
        ),
        (
            "*:*:*:replicator:Rq8z\\:T1vKd0",
            "*:*:*:replicator:[REDACTED]",
        ),
        (
            r#"{"kty":"EC","crv":"P-256","x":"Yau5fZ1T436O8zKM","d":"hNgVpqCzGdWmPyagqqr5vJIGA9HK2gOCZPeJMQW9cy7"}"#,
            r#"{"kty":"EC","crv":"P-256","x":"Yau5fZ1T436O8zKM","d":"[REDACTED]"}"#,
        ),
        (
            r#"{"kty": "oct", "k": "GawgguFyGrWKav7AX4VKUg"}"#,
            r#"{"kty": "oct", "k": "[REDACTED]"}"#,
        ),
        (
            "https://acct.blob.core.windows.net/c?sv=2020-08-04&sp=r&se=2026-01-01&sig=dleJXP6xuQEYcHsG02ORHV8IlMXXkhMBpQCJXqYTYUp%3D",
            "https://acct.blob.core.windows.net/c?sv=2020-08-04&sp=r&se=2026-01-01&sig=[REDACTED]",
        ),
        (
            "SLACK_WEBHOOK=https://hooks.slack.com/workflows/T0A1B2C3D/A0B1C2D3E4/123456789012345678/Kq8zT1vKd0xPWq8zT1vKd0xP",
            "SLACK_WEBHOOK=[REDACTED]",
        ),
        (
            "        - name: DB_PASSWORD\n          value: M91ZifLaP9OvqP\n",
            "        - name: DB_PASSWORD\n          value: [REDACTED]\n",
        ),
        (
            &format!(
                "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: me\nPublic-Lines: 12\n{}Private-Lines: 2\nWxsK9xjW8LTFAl4edqi247gz0eNma7AicA2ehF9w5RpGS15RgDAXQcnkL0BHZRvM\nq2Jd8kL2mN9pQx7Fq9wZ==\nPrivate-MAC: 00\n",
                "AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n".repeat(12)
            ),
            &format!(
                "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: me\nPublic-Lines: 12\n{}Private-Lines: 2\n[REDACTED]\nPrivate-MAC: 00\n",
                "AAAAB3NzaC1yc2EAAAADAQABAAABAQ\n".repeat(12)
            ),
        ),
    ] {
        assert_eq!(redact_text(line), (Some(redacted.to_owned()), 1), "{line}");
    }
    all_stay(&[
        "<password>${env.REPO_PASSWORD}</password>",
        "<add key=\"Db.Password\" value=\"$(DbPassword)\" />",
        "<token></token>",
        "</password>\n<username>me</username>",
        "<add key=\"ApiKey\" value=\"\" />",
        "<add key=\"Timeout\" value=\"3f9Kx2\" />",
        "  --password string   the password to log in with",
        "  --token TOKEN       an API token",
        "use --api-key <KEY> or set API_KEY",
        "--password-stdin",
        "echo \"$PASS\" | docker login -u me --password-stdin registry.example.com",
        "docker login -u me registry.example.com",
        "mysql -u root -p db",
        "mysql -u root -p",
        "mysql --host db -P 3306",
        "cargo test --token-count 3",
        "--pass 3",
        "whsec_ is the prefix of a webhook secret",
        "sshpass -p \"$SSHPASS\" ssh root@host",
        "sshpass -e ssh root@host",
        "redis-cli -h cache ping",
        "        - name: DB_PASSWORD\n          valueFrom:\n            secretKeyRef:",
        "- name: API_TOKEN\n  value: ${API_TOKEN}",
        "config['token'] = token",
        "openssl enc -aes-256-cbc -pass env:ENC_PASS -in a -out b",
        "openssl pkcs12 -passin file:/run/secrets/p12 -in cert.p12",
        "php artisan key:generate writes APP_KEY=base64:… into .env",
        "primary-key-constraint",
        "sk-proj- keys are project keys",
        "the figd_ prefix marks a Figma token",
        "cache key: sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "passphrase: Option<String>,",
        "password: <string>",
        "password = <your-password>",
        "  {pem: <string|buffer>[, passphrase: <string>]}",
        "let passphrase = read_passphrase()?;",
        "12:30:45:ok:done",
        "localhost:5432:app:admin:${PGPASSWORD}",
        r#"{"kty":"RSA","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB","alg":"RS256","kid":"2011-04-29"}"#,
        r#"{"d": "M10 10 L20 20", "kty": "path"}"#,
        "https://example.com/img?size=2&sig=short",
    ]);
}

/// Every private member of an RSA JSON Web Key goes, and every public one stays.
#[test]
fn an_rsa_json_web_keys_private_members_are_all_redacted() {
    let private = [
        ("d", "X4cTteJY_gn4FYPsXB8rdXix5vwsg1FLN5E3EaG6RJoVH"),
        ("p", "83i-7IvMGXoMXCskv73TKr8637FiO7Z27zv8oj6pbWUQ"),
        ("q", "3dfOR9cuYq-0S-mkFLzgItgMEfFzB2q3hWehMuG0oCuq"),
        ("dp", "G4sPXkc6Ya9y8oJW9_ILj4xuppu0lzi_H7VTkS8xj5S"),
        ("dq", "s9lAH9fggBsoFR8Oac2R_E2gw282rT2kGOAhvIllETE1"),
        ("qi", "GyM_p6JrXySiz1toFgKbWV-JdI3jQ4ypu9rbMWx3rQJB"),
    ];
    let public = [
        ("kty", "RSA"),
        ("e", "AQAB"),
        (
            "n",
            "ofgWCuLjybRlzo0tZWJjNiuSfb4p4fAkd_wWJcyQoTbji9k0l8W26mPddx",
        ),
    ];
    let members: Vec<String> = public
        .iter()
        .chain(&private)
        .map(|(name, value)| format!("\"{name}\": \"{value}\""))
        .collect();
    let key = format!("{{{}}}", members.join(", "));
    let (redacted, count) = redact_text(&key);
    let redacted = redacted.unwrap();
    assert_eq!(count, private.len(), "{redacted}");
    for (name, value) in private {
        assert!(
            redacted.contains(&format!("\"{name}\": \"[REDACTED]\"")),
            "{redacted}"
        );
        assert!(!redacted.contains(value), "{redacted}");
    }
    for (name, value) in public {
        assert!(
            redacted.contains(&format!("\"{name}\": \"{value}\"")),
            "{redacted}"
        );
    }
    // Without a key's `"kty"` in the text, a `d` is any member of any object.
    all_stay(&[r#"{"d": "X4cTteJY_gn4FYPsXB8rdXix5vwsg1FLN5E3EaG6RJoVH"}"#]);
}

/// A value of letters only is a setting or a name when it reads as words, and a secret when
/// its letters look drawn at random (both cases mixed letter by letter, or hardly a vowel).
#[test]
fn letters_drawn_at_random_are_not_a_plain_word() {
    for (line, redacted) in [
        ("Password=UKSLmOrWpm;", "Password=[REDACTED];"),
        (
            "connection_string = \"Host=db;Username=app;Password=rqBbNcgoIreW\"",
            "connection_string = \"Host=db;Username=app;Password=[REDACTED]\"",
        ),
        ("  password: dDJrTDdSZVBDZFZu", "  password: [REDACTED]"),
        ("secret: qwxkzjvmtrpl", "secret: [REDACTED]"),
    ] {
        assert_eq!(redact_text(line), (Some(redacted.to_owned()), 1), "{line}");
    }
    all_stay(&[
        "password: required",
        "secret: getSecretValue",
        "token: ProductionDatabaseCredentials",
        "password = XMLHttpRequest",
        "password: Passwort",
        "secret = self.config.secretValue",
        "PASSWORD=changeme",
        "token: Bearer",
        "password: NTLM",
        "client_handshake_traffic_secret: OkmBlock,",
        "trait Secret: ZeroizeOnDrop + Zeroize {}",
        "let raw_tokens = CommitRefIterRaw {",
    ]);
}

#[test]
fn headers_and_lines_that_only_name_a_credential_stay() {
    all_stay(&[
        "Authorization: Bearer <token>",
        "Authorization: Bearer ${TOKEN}",
        "-H \"Authorization: Bearer $GITHUB_TOKEN\"",
        "authorization: Bearer token",
        "the Authorization header carries a bearer token",
        "let cookie: String = jar.get(\"sid\").unwrap();",
        "cookie: Option<Cookie>,",
        "Set-Cookie header",
        "a chocolate cookie: yum",
        "this machine has a password manager",
        "machine example.com login me password ${NETRC_PASSWORD}",
        "user_id: 1234567890:AAbc",
    ]);
}

#[test]
fn urls_without_a_password_in_them_stay() {
    all_stay(&[
        "https://example.com:8080/path?q=1&next=/a@b",
        "ssh://git@github.com/owner/repo.git",
        "git@github.com:owner/repo.git",
        "http://[::1]:8080/mcp",
        "mailto:someone@example.com",
        "postgres://user:password@localhost/db",
        "amqp://guest:guest@localhost:5672/",
        "redis://:${REDIS_PASSWORD}@cache:6379",
        "postgres://app:$DB_PASSWORD@db/prod",
        "mysql://root:****@db:3306/",
        "https://x-access-token:{{secrets.TOKEN}}@github.com/o/r",
        "registry+https://github.com/rust-lang/crates.io-index",
    ]);
    // A password that is a UUID is still a password: the URL says so.
    let line = "amqps://svc:3f2c8e1a-9b4d-4c7e-a1f0-6d5e4b3a2c1f@mq.internal/";
    let (redacted, count) = redact_text(line);
    assert_eq!(count, 1);
    assert_eq!(
        redacted.as_deref(),
        Some("amqps://svc:[REDACTED]@mq.internal/")
    );
}

/// gitleaks' allowlists that look at a match's line (a Dockerfile's `--mount=type=secret,`)
/// still hold on the line, and only near the match: a marker further than 4 KiB along a long
/// line, or on another line, does not let a key through.
#[test]
fn an_allowlist_of_lines_reads_the_matchs_own_line_near_it() {
    let key = "client_auth=Zx8kQ2vLm9Pq4Rt7Yw3aB6";
    let gone = |line: &str| {
        let (redacted, count) = redact_text(line);
        assert_eq!(count, 1, "{line:.120}");
        assert!(!redacted.unwrap().contains("Zx8kQ2vLm9Pq4Rt7Yw3aB6"));
    };
    gone(&format!("RUN {key} make"));
    all_stay(&[&format!("RUN --mount=type=secret,id=x {key} make")]);
    gone(&format!(
        "RUN --mount=type=secret,id=x{} {key} make",
        " #".repeat(2100)
    ));
    gone(&format!("RUN --mount=type=secret,id=x\nRUN {key} make"));
}
