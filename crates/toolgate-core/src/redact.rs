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
//! The text is lowercased, as gitleaks does, and searched for every rule's keywords: the
//! common ones (`key`, `token`, `secret`) by one packed SIMD searcher that keeps where each
//! begins; the two hundred rarer ones by four-byte pieces that several may share and that
//! ordinary text seldom holds (`hook` for `hooks.slack.com` and `webhook.office.com`), in four
//! more searchers, a keyword counting as found where it reads in full around a piece; and the
//! one- and two-byte ones (`ey`, `sk`) by a substring search each. Only rules whose keyword
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

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, Input, MatchKind};
use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::Value;

/// What replaces a secret.
pub const MARKER: &str = "[REDACTED]";

/// gitleaks' rules as `scripts/update-secret-rules` wrote them.
const RULE_DATA: &str = include_str!("../data/secret-rules.json");

/// The words that make a name sensitive in toolgate's own assignment rules. The name may carry
/// more around them (`DB_PASSWORD`, `github_token`, `aws_secret_access_key`).
const SENSITIVE_NAME: &str =
    r"(?:api_?key|access_?key|secret|token|password|passwd|private_?key|credentials?)";

/// The keywords of [`SENSITIVE_NAME`]: one of them is in every name it matches.
const SENSITIVE_KEYWORDS: [&str; 11] = [
    "api_key",
    "apikey",
    "access_key",
    "accesskey",
    "secret",
    "token",
    "password",
    "passwd",
    "private_key",
    "privatekey",
    "credential",
];

/// toolgate's own rules, run beside gitleaks' with the same machinery.
fn own_rules() -> Vec<RuleData> {
    let assignment_keywords: Vec<String> = SENSITIVE_KEYWORDS.map(str::to_owned).to_vec();
    // A private key's body: base64, the headers of an encrypted key (`Proc-Type: 4,ENCRYPTED`,
    // `DEK-Info: AES-128-CBC,…`), line breaks and their JSON escapes, and single dashes, so
    // that the five dashes of the closing line end it.
    let body = r"(?:[A-Za-z0-9+/=:,\t\n\r \\]|-[A-Za-z0-9])";
    let header = r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----";
    let footer = r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----";
    vec![
        // A whole block of any length, or one that output truncation cut off: then at least
        // a line's worth of body must follow, so that code naming the header is left alone.
        RuleData {
            id: "toolgate-private-key".to_owned(),
            regex: format!("{header}(?:{body}*{footer}|{body}{{16,}})"),
            secret_group: 0,
            entropy: None,
            keywords: vec!["-----begin".to_owned()],
            allowlists: Vec::new(),
            generic: false,
        },
        // `NAME=value`, as in .env files, shell exports and query strings, and `name = value`
        // as in INI and TOML files and logs: there gitleaks' generic rule alone would decide,
        // and its stop words let through a random key that happens to hold a word. A
        // backslash ends the value: in JSON text it begins the escape of a line break.
        RuleData {
            id: "toolgate-secret-assignment".to_owned(),
            regex: format!(
                r#"(?i){SENSITIVE_NAME}[A-Z0-9_]*[\t ]*=[\t ]*([^\t\n\f\r '"`;=\\][^\t\n\f\r '"`;\\]*)"#
            ),
            secret_group: 1,
            entropy: Some(OWN_ENTROPY),
            keywords: assignment_keywords.clone(),
            allowlists: vec![plain_word_allowlist()],
            generic: true,
        },
        // `name: "value"`, `name = 'value'`, `"name": "value"`, `config['name'] = 'value'`.
        // The quotes stay, so that JSON and YAML stay well-formed after redaction, as they do
        // with gitleaks' generic rule.
        RuleData {
            id: "toolgate-secret-quoted".to_owned(),
            regex: format!(
                r#"(?i){SENSITIVE_NAME}[A-Z0-9_]*["']?\]?[\t ]*[:=][\t ]*(?:"([^"\n]+)"|'([^'\n]+)')"#
            ),
            secret_group: 0,
            entropy: Some(OWN_ENTROPY),
            keywords: assignment_keywords,
            allowlists: vec![plain_word_allowlist()],
            generic: true,
        },
        // `password: value` unquoted, as in YAML, INI files and logs. Only names that say
        // password or secret: `token: Option<String>` is a Rust field, not a token.
        RuleData {
            id: "toolgate-password-colon".to_owned(),
            regex:
                r"(?i)(?:password|passwd|secret)[A-Z0-9_]*[\t ]*:[\t ]+([^\t\n\f\r '\x22\x60;,]+)"
                    .to_owned(),
            secret_group: 1,
            entropy: Some(OWN_ENTROPY),
            keywords: ["password", "passwd", "secret"].map(str::to_owned).to_vec(),
            allowlists: vec![plain_word_allowlist()],
            generic: true,
        },
        // Names that end in the short forms, as .env and compose files spell them:
        // `DB_PASS=…`, `smtp_pass: …`, `MYSQL_PWD=…`. `pass` stands alone or after `_`
        // (`bypass` and `compass` are not names); `pwd` only after `_`, since `PWD` and
        // `OLDPWD` hold directories. The name ends the word, so `PASS_THROUGH=1` is not one.
        pass_rule(
            "toolgate-pass-assignment",
            r"(?-u:\b)(?:[A-Z0-9_]{0,60}?_)?pass",
            "pass",
        ),
        // A passphrase (`GPG_PASSPHRASE=…`, `passphrase: …`), by a rule of its own: in the
        // sensitive names above it made every search of ordinary text a tenth slower.
        pass_rule(
            "toolgate-passphrase-assignment",
            r"(?-u:\b)[A-Z0-9_]{0,60}?passphrase",
            "passphrase",
        ),
        pass_rule(
            "toolgate-pwd-assignment",
            r"(?-u:\b)[A-Z0-9_]{0,60}?_pwd",
            "_pwd",
        ),
        // The password in a URL's user information: `postgres://app:<password>@db/prod`,
        // `redis://:<password>@cache`, `https://oauth2:<token>@gitlab.example/repo.git`, as in
        // `DATABASE_URL`, connection strings and remotes. gitleaks leaves these to the names
        // around them, and a URL is often all there is. The user name stays, and so do a
        // plain word (`password`) and the placeholders gitleaks' global allowlist knows
        // (`${DB_PASSWORD}`, `$TOKEN`, `{{ secrets.X }}`, `****`).
        placed(
            "toolgate-url-password",
            // Printable ASCII only, as a URL is written (anything else is percent-encoded):
            // classes of all of Unicode, repeated up to 256 times, made the search of a text
            // with other letters in it some 200 times slower. The user name ends at `:`, `?`
            // and `#`, the password at `/`; neither holds a space, a quote, `<`, `>`, `\` or `@`.
            r#"(?-u:\b)[A-Za-z][A-Za-z0-9+.-]{1,30}://[!$-&(-.0-9;=A-\[\]-_a-~]{0,128}:([!#-&(-.0-;=?A-\[\]-_a-~]{1,256})@[A-Za-z0-9\[_-]"#,
            &["://"],
        ),
        // A Discord webhook's URL carries its token: whoever reads it can post as the hook.
        // gitleaks has a rule for Slack's and Teams' webhook URLs, not for Discord's.
        shaped(
            "toolgate-discord-webhook",
            r"(?-u:\b)https?://(?:(?:ptb|canary)\.)?discord(?:app)?\.com/api/webhooks/[0-9]{17,20}/([A-Za-z0-9_-]{60,80})",
            &["/api/webhooks/"],
        ),
        // HTTP credentials where a request or a log shows them: `Authorization: Bearer …`,
        // `Basic …`, `Token …`, Okta's `SSWS …` or `ApiKey …` in a header line or a JSON
        // object (gitleaks catches them only in a curl command line), and the cookies of
        // `Cookie:` and `Set-Cookie:`, whose session cookies sign their holder in. A cookie's
        // pairs are `name=value` without spaces, so that code such as `cookie: String = …`
        // stays.
        placed(
            "toolgate-authorization-header",
            r#"(?i)authorization["']?[\t ]*[:=][\t ]*["']?(?:bearer|basic|token|ssws|api-?key)[\t ]+([A-Za-z0-9+/._~-]+=*)"#,
            &["authorization"],
        ),
        // A cookie's value, pairs that may have been picked by a person but are never a plain
        // word: the lower entropy, and no plain-word allowlist.
        RuleData {
            entropy: Some(OWN_ENTROPY),
            ..shaped(
                "toolgate-cookie-header",
                r#"(?i)cookie["']?[\t ]*:[\t ]*["']?([!#-&*+.0-9A-Z^-z|~-]+=[^\s;"'\\]+(?:;[\t ]*[!#-&*+.0-9A-Z^-z|~-]+(?:=[^\s;"'\\]*)?)*)"#,
                &["cookie"],
            )
        },
        // A Telegram bot's token (`123456789:AA…`), bare or in the Bot API's URLs
        // (`api.telegram.org/bot<token>/…`): gitleaks' rule needs a name with `telegr` and an
        // assignment before it.
        shaped(
            "toolgate-telegram-bot-token",
            r"(?:(?-u:\b)|bot)([0-9]{8,10}:AA[A-Za-z0-9_-]{33})(?-u:\b)",
            &[":aa"],
        ),
        // A `.netrc` entry, `machine <host> login <user> password <password>`, on one line or
        // several.
        placed(
            "toolgate-netrc-password",
            r"(?-u:\b)machine\s+\S+(?:\s+login\s+\S+)?\s+password\s+(\S+)",
            &["machine"],
        ),
        // A PostgreSQL password file's line, `host:port:database:user:password`, its port a
        // number or `*`.
        placed(
            "toolgate-pgpass-password",
            r"(?m)^[^:\s#]+:(?:[0-9]{1,5}|\*):[^:\n]+:[^:\n]+:([^\r\n]+)$",
            &[":5432:", ":*:"],
        ),
        // The private members of a JSON Web Key (`d`, an RSA key's primes and exponents,
        // a symmetric key's `k`), in a text that holds a key's `"kty"`.
        shaped(
            "toolgate-jwk-private",
            r#""(?:d|p|q|dp|dq|qi|k)"[\t ]*:[\t ]*"([A-Za-z0-9_-]{16,})""#,
            &["\"kty\""],
        ),
        // The signature of an Azure shared access signature (`…&sig=…`), which grants what
        // the URL names to whoever holds it.
        shaped(
            "toolgate-sas-signature",
            r"(?i)[?&]sig=([A-Za-z0-9%+/]{30,})",
            &["sig="],
        ),
        // A Slack webhook's whole path: gitleaks' rule stops at 56 characters, which leaves
        // the end of a workflow's URL.
        shaped(
            "toolgate-slack-webhook",
            r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{20,})",
            &["hooks.slack.com"],
        ),
        // Keys whose prefix alone says what they are, which gitleaks finds only beside a name
        // (or not at all): OpenAI's keys before project keys (`sk-` and 48 letters and
        // digits), Google's OAuth client secrets (`GOCSPX-…`) and access tokens (`ya29.…`),
        // Firebase Cloud Messaging server keys (`AAAA…:APA91b…`), Mapbox secret tokens
        // (`sk.eyJ…`), Braintree access tokens (`access_token$production$…`) and Bitbucket app
        // passwords (`ATBB…`).
        shaped(
            "toolgate-openai-legacy-key",
            r"(?-u:\b)(sk-[A-Za-z0-9]{48})(?-u:\b)",
            &["sk-"],
        ),
        shaped(
            "toolgate-google-oauth-secret",
            r"(GOCSPX-[A-Za-z0-9_-]{24,40})",
            &["gocspx-"],
        ),
        shaped(
            "toolgate-google-oauth-token",
            r"(ya29\.[A-Za-z0-9_-]{30,})",
            &["ya29."],
        ),
        shaped(
            "toolgate-fcm-server-key",
            r"(AAAA[A-Za-z0-9_-]{7}:APA91b[A-Za-z0-9_-]{100,})",
            &[":apa91b"],
        ),
        shaped(
            "toolgate-mapbox-secret-token",
            r"(sk\.eyJ[A-Za-z0-9_-]{40,}\.[A-Za-z0-9_-]{20,})",
            &["sk.eyj"],
        ),
        shaped(
            "toolgate-braintree-access-token",
            r"(access_token\$production\$[0-9a-z]{16}\$[0-9a-f]{32})",
            &["access_token$production$"],
        ),
        shaped(
            "toolgate-bitbucket-app-password",
            r"(?-u:\b)(ATBB[A-Za-z0-9]{28,36})(?-u:\b)",
            &["atbb"],
        ),
        // Stripe's webhook signing secrets (`whsec_…`), Groq's API keys (`gsk_…`) and
        // Replicate's API tokens (`r8_…`), which gitleaks does not know.
        shaped(
            "toolgate-stripe-webhook-secret",
            r"(?-u:\b)(whsec_[A-Za-z0-9+/]{32,})",
            &["whsec_"],
        ),
        shaped(
            "toolgate-groq-api-key",
            r"(?-u:\b)(gsk_[A-Za-z0-9]{52})(?-u:\b)",
            &["gsk_"],
        ),
        shaped(
            "toolgate-replicate-api-token",
            r"(?-u:\b)(r8_[A-Za-z0-9]{37})(?-u:\b)",
            &["r8_"],
        ),
        // A sensitive name as an XML element, as in Maven's `settings.xml`
        // (`<password>…</password>`, `<db.token>…</db.token>`): the name ends the opening tag.
        RuleData {
            allowlists: vec![plain_word_allowlist(), property_allowlist()],
            generic: true,
            ..placed(
                "toolgate-xml-element",
                &format!(r"(?i){SENSITIVE_NAME}>([^<\n]{{1,200}})</"),
                &SENSITIVE_KEYWORDS,
            )
        },
        // .NET's settings, `<add key="ApiKey" value="…" />`: the name is the key's.
        RuleData {
            allowlists: vec![plain_word_allowlist(), property_allowlist()],
            generic: true,
            ..placed(
                "toolgate-xml-setting",
                &format!(r#"(?i)key="[\w.:-]{{0,40}}?{SENSITIVE_NAME}"[\t ]+value="([^"\n]+)""#),
                &["key=\""],
            )
        },
        // Passwords and tokens given on a command line: `--password x`, `--token=x`,
        // `-pass x`, `--api-key x`. The dashes are optional to the expression, so that it is
        // tried only where a name is; the allowlist lets through a match without them.
        RuleData {
            allowlists: vec![
                plain_word_allowlist(),
                AllowlistData {
                    target: Target::Match,
                    regexes: vec![r"^[^-]".to_owned()],
                    stopwords: Vec::new(),
                    words: false,
                },
                // OpenSSL's sources (`-pass env:VAR`, `file:…`); after `pass:` the password
                // itself is the short-name rule's.
                AllowlistData {
                    target: Target::Secret,
                    regexes: vec![r"^(?:pass|env|file|fd|stdin)(?::|$)".to_owned()],
                    stopwords: Vec::new(),
                    words: false,
                },
            ],
            generic: true,
            ..placed(
                "toolgate-command-line-flag",
                r#"(?i)(?:-{1,2}[A-Za-z0-9_-]{0,20}?)?(?:password|passwd|pass|token|secret|api-?key)(?:[\t ]+|=)["']?([^\s'"<>=-][^\s'"<>]*)"#,
                &["pass", "token", "secret", "api-key", "apikey"],
            )
        },
        placed(
            "toolgate-mysql-password",
            r#"(?i)(?-u:\b)(?:mysql|mysqldump|mysqladmin|mariadb)[\t ][^\n|;&]{0,200}?[\t ]-p([^\s'"-][^\s'"]*)"#,
            &["mysql", "mariadb"],
        ),
        placed(
            "toolgate-docker-login-password",
            r#"(?-u:\b)docker[\t ]+login[\t ][^\n|;&]{0,200}?(?:-p|--password)(?:[\t ]+|=)["']?([^\s'"-][^\s'"]*)"#,
            &["docker"],
        ),
        // xAI's API keys (`xai-…`), which gitleaks does not know.
        shaped(
            "toolgate-xai-api-key",
            r"(?-u:\b)(xai-[A-Za-z0-9]{80})(?-u:\b)",
            &["xai-"],
        ),
        // Provider tokens whose prefix says what they are and that gitleaks' rules miss or
        // take only in one spelling: OpenAI's project, service-account and admin keys without
        // the marker gitleaks asks for, Mailgun's `key-` API keys, Google's OAuth refresh
        // tokens (`1//0…`), Doppler's service, service-account, CLI, SCIM and audit tokens,
        // and Figma's personal access tokens.
        shaped(
            "toolgate-openai-api-key",
            r"(?-u:\b)(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,})",
            &["sk-"],
        ),
        shaped(
            "toolgate-mailgun-api-key",
            r"(?-u:\b)(key-[0-9a-f]{32})(?-u:\b)",
            &["key-"],
        ),
        shaped(
            "toolgate-google-refresh-token",
            r"(?-u:\b)(1//0[A-Za-z0-9_-]{40,})",
            &["1//0"],
        ),
        shaped(
            "toolgate-doppler-token",
            r"(?-u:\b)(dp\.(?:st|sa|ct|scim|audit)\.[A-Za-z0-9_.-]{40,})",
            &["dp.st.", "dp.sa.", "dp.ct.", "dp.scim.", "dp.audit."],
        ),
        shaped(
            "toolgate-figma-token",
            r"(?-u:\b)(figd_[A-Za-z0-9_-]{40,})",
            &["figd_"],
        ),
        // A key given in base64 with its scheme, as Laravel's `APP_KEY=base64:…` and
        // `env('APP_KEY', 'base64:…')`: gitleaks' generic rule stops at the colon and sees
        // only the word `base64`.
        shaped(
            "toolgate-base64-key",
            r#"(?i)key[^\n]{0,40}?[\t "'=:,(](base64:[A-Za-z0-9+/]{20,}={0,2})"#,
            &["base64:"],
        ),
        // A Kubernetes container's environment: `- name: DB_PASSWORD` and, on the next line,
        // `value: …`.
        RuleData {
            generic: true,
            ..placed(
                "toolgate-kubernetes-env",
                &format!(
                    r#"(?i)name:[\t ]*["']?[A-Z0-9_]*{SENSITIVE_NAME}[A-Z0-9_]*["']?[\t ]*\r?\n[\t ]*value:[\t ]*["']?([^\s'"]+)"#
                ),
                &SENSITIVE_KEYWORDS,
            )
        },
        // A PuTTY private key file: the lines after `Private-Lines:` are the key.
        shaped(
            "toolgate-putty-private-key",
            r"PuTTY-User-Key-File-[0-9]:[^\n]*\r?\n(?:[^\n]*\n){0,40}?Private-Lines:[\t ]*[0-9]+\r?\n((?:[A-Za-z0-9+/=]+\r?\n)*[A-Za-z0-9+/=]+)(?:\r?\n|$)",
            &["putty-user-key-file-"],
        ),
        // `sshpass -p <password>` and `redis-cli -a <password>`.
        placed(
            "toolgate-sshpass-password",
            r#"(?-u:\b)sshpass[\t ]+-p[\t ]*["']?([^\s'"-][^\s'"]*)"#,
            &["sshpass"],
        ),
        placed(
            "toolgate-redis-cli-password",
            r#"(?-u:\b)redis-cli[\t ][^\n|;&]{0,200}?(?:-a|--pass)[\t ]+["']?([^\s'"-][^\s'"]*)"#,
            &["redis-cli"],
        ),
    ]
}

/// A rule for a secret whose shape says what it is (a provider's prefix, a webhook's URL):
/// `regex`'s first group is the secret, tried where one of `keywords` (lowercase) occurs, and
/// it must look random (entropy above 3).
fn shaped(id: &str, regex: &str, keywords: &[&str]) -> RuleData {
    RuleData {
        id: id.to_owned(),
        regex: regex.to_owned(),
        secret_group: 1,
        entropy: Some(3.0),
        keywords: keywords
            .iter()
            .map(|keyword| (*keyword).to_owned())
            .collect(),
        allowlists: Vec::new(),
        generic: false,
    }
}

/// A rule for a value whose place says it is a secret (a URL's password, an `Authorization`
/// header's token, a `.netrc` password), which a person may have picked: as [`shaped`], but it
/// goes if it clears [`OWN_ENTROPY`] and is not a plain word. Placeholders (`${VAR}`,
/// `{{ x }}`, `****`) are let through by gitleaks' global allowlist, as for every rule.
fn placed(id: &str, regex: &str, keywords: &[&str]) -> RuleData {
    RuleData {
        entropy: Some(OWN_ENTROPY),
        allowlists: vec![plain_word_allowlist()],
        ..shaped(id, regex, keywords)
    }
}

/// A rule for a value given to a name that `name` (a regular expression) matches the whole of:
/// `NAME=value`, `name: value`, `"name": "value"`, the quotes kept. The value must clear
/// [`OWN_ENTROPY`] and not be a plain word, as for the other names toolgate's rules know.
fn pass_rule(id: &str, name: &str, keyword: &str) -> RuleData {
    RuleData {
        id: id.to_owned(),
        regex: format!(
            r#"(?i){name}["']?[\t ]*[:=][\t ]*["']?([^\t\n\f\r '"`;,=\\][^\t\n\f\r '"`;,\\]*)"#
        ),
        secret_group: 1,
        entropy: Some(OWN_ENTROPY),
        keywords: vec![keyword.to_owned()],
        allowlists: vec![plain_word_allowlist()],
        generic: true,
    }
}

/// The entropy a value given to a sensitive name must exceed. Lower than gitleaks' 3.5 for its
/// generic rule, since the name already says what the value is: `hunter2` (2.8) and `abc123`
/// (2.6) go, `4096` (2.0) and `{}` stay.
const OWN_ENTROPY: f64 = 2.0;

/// A value that is a plain word (`allowed`, `Bearer`, `self.token`), a call
/// (`read_password()`), a type (`Option<String>`, `&str`), a version range (`^3.0.0 || ^4`),
/// a template's or a document's placeholder (`{token}`, `<your-password>`,
/// `<string|buffer>`) or a variable of a script (`$_POST[`, `!$pass`, `${DB_PASSWORD}`,
/// `$(cat` cut at its space, `$dir/key.pem`, `$this->password`) names something; it is not a
/// secret. A value that only begins with `$` and a letter (`$argon2id$v=19$…`), a default
/// after a variable (`${DB_PASSWORD:-hunter2}`) and a command substitution with more in it
/// (`$(curl…|sh)`) are not one.
fn plain_word_allowlist() -> AllowlistData {
    AllowlistData {
        target: Target::Secret,
        words: true,
        regexes: vec![
            r"^[A-Za-z_][A-Za-z0-9_.:]*!?[(\[]".to_owned(),
            r"^[!-]?\$(?:\{[A-Za-z_][A-Za-z0-9_.]*\}$|\([A-Za-z_][A-Za-z0-9_-]*$|[A-Za-z_][A-Za-z0-9_]*(?:$|[\[/.]|::|->))"
                .to_owned(),
            r"^&[A-Za-z_'][A-Za-z0-9_:]*[),]?$|^[A-Za-z_][A-Za-z0-9_:]*<".to_owned(),
            r"^[0-9.x*~^<>=v| ,-]*[0-9]\.[0-9.x*~^<>=v| ,-]*$".to_owned(),
            r"^\{[A-Za-z0-9_.:]*\}$".to_owned(),
            r"^<[A-Za-z][A-Za-z0-9_|.-]*>\W*$".to_owned(),
        ],
        stopwords: Vec::new(),
    }
}

/// Whether `text` reads as words (`allowed`, `Bearer`, `self.token`, `getSecretValue`,
/// `OkmBlock`) rather than letters drawn at random (`UKSLmOrWpm`, `rqBbNcgoIreW`, base64
/// without digits): letters and `_ . -` only, and in each run of eight letters or more at least
/// half of the three-letter windows, lowercased, are among the 4,000 most frequent of ordinary
/// text (`crates/toolgate-core/data/trigram-frequencies.json`). Drawn at random, about one in
/// six is.
fn reads_as_words(text: &str) -> bool {
    // Without the counts, nothing reads as words: the value is redacted.
    let Ok(frequent) = trigram_frequencies() else {
        return false;
    };
    if text.is_empty()
        || !text
            .bytes()
            .all(|b| b.is_ascii_alphabetic() || matches!(b, b'_' | b'.' | b'-'))
    {
        return false;
    }
    text.split(['_', '.', '-']).all(|run| {
        if run.len() < 8 {
            return true;
        }
        let lowered = run.to_ascii_lowercase();
        let windows = lowered.as_bytes().windows(3);
        let total = windows.len();
        let known = windows
            .filter(|window| {
                std::str::from_utf8(window).is_ok_and(|window| frequent.contains_key(window))
            })
            .count();
        known * 2 >= total
    })
}

/// A property of Maven, Ant or MSBuild (`${env.REPO_PASSWORD}`, `$(DbPassword)`), which
/// names where the value comes from.
fn property_allowlist() -> AllowlistData {
    AllowlistData {
        target: Target::Secret,
        regexes: vec![r"^\$[{(][A-Za-z0-9_.-]+[})]$".to_owned()],
        stopwords: Vec::new(),
        words: false,
    }
}

#[derive(Debug, Deserialize)]
struct RuleSetData {
    allowlist: AllowlistData,
    rules: Vec<RuleData>,
}

#[derive(Debug, Deserialize)]
struct RuleData {
    id: String,
    regex: String,
    #[serde(default, rename = "secretGroup")]
    secret_group: usize,
    #[serde(default)]
    entropy: Option<f64>,
    #[serde(default)]
    keywords: Vec<String>,
    #[serde(default)]
    allowlists: Vec<AllowlistData>,
    /// Whether the rule matches on a name alone (see [`Rule::generic`]).
    #[serde(skip)]
    generic: bool,
}

#[derive(Debug, Deserialize)]
struct AllowlistData {
    #[serde(default)]
    target: Target,
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    /// Also let through a secret that reads as words (see [`reads_as_words`]): toolgate's own
    /// plain-word allowlist.
    #[serde(skip)]
    words: bool,
}

/// What an allowlist's regular expressions are checked against, as in gitleaks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Target {
    /// The secret alone (the capture group).
    #[default]
    Secret,
    /// The whole match, the name before the secret included.
    Match,
    /// The line or lines the match is on.
    Line,
}

/// A rule ready to run. Its regular expression is compiled on first need: most rules never
/// run at all in a server's lifetime, and compiling all of them would cost every start.
#[derive(Debug)]
pub(crate) struct Rule {
    #[cfg_attr(not(test), expect(dead_code, reason = "named in the tests' failures"))]
    id: String,
    pattern: String,
    compiled: OnceLock<Option<Compiled>>,
    secret_group: usize,
    entropy: Option<f64>,
    keywords: Vec<String>,
    allowlists: Vec<Allowlist>,
    /// gitleaks' generic rule and toolgate's own: they match on a name alone, so digests,
    /// object ids and UUIDs are exempt from them.
    generic: bool,
}

#[derive(Debug)]
struct Allowlist {
    target: Target,
    words: bool,
    /// The allowlist's expressions joined into one, as gitleaks does.
    pattern: Option<String>,
    compiled: OnceLock<Option<Regex>>,
    /// Lowercased; searched for by an automaton built when a finding is first checked, since
    /// building the largest list's (generic-api-key's, some 1,500 words) costs milliseconds.
    stopwords: Vec<String>,
    stopword_search: OnceLock<Option<AhoCorasick>>,
}

/// Every rule, the keyword searchers over all of them, and gitleaks' global allowlist.
#[derive(Debug)]
pub(crate) struct RuleSet {
    rules: Vec<Rule>,
    global: Allowlist,
    /// The keywords, lowercased.
    words: Vec<String>,
    /// What the searchers look for: the frequent keywords, then pieces of the rest.
    pieces: Vec<Piece>,
    /// The searchers over every piece.
    search: Scanner,
    /// For each keyword, whether it is frequent: looked for whole, its places kept for
    /// anchored rules.
    is_frequent: Vec<bool>,
    /// Every keyword in one automaton, for short texts (a name, a path, a value of a JSON
    /// object), where setting up a dozen searchers costs more than stepping through the bytes.
    every_keyword: AhoCorasick,
    /// For each keyword, the rules that name it.
    keyword_rules: Vec<Vec<usize>>,
    /// Keywords of one or two bytes, each with its finder.
    tiny: Vec<(usize, memchr::memmem::Finder<'static>)>,
    /// Rules without keywords, which run on every text.
    always: Vec<usize>,
}

/// Something the keyword search looks for, and what finding it means.
#[derive(Debug)]
struct Piece {
    bytes: Vec<u8>,
    /// The keyword it is, if it is a whole (frequent) keyword.
    keyword: Option<usize>,
    /// Keywords that hold it, each with where in the keyword it begins: such a keyword is found
    /// where the text around the piece reads as the whole keyword.
    within: Vec<(usize, usize)>,
    /// Pieces of the same searcher that it begins with, and so begin where it begins.
    prefixes: Vec<usize>,
}

/// Pieces looked for together: a few dozen at a time with the SIMD searcher of
/// `aho-corasick`'s packed module where the processor has it, one automaton where it has not.
/// A byte-at-a-time automaton over all two hundred keywords costs more than running the few
/// rules that ordinary text meets.
#[derive(Debug)]
struct Scanner {
    groups: Vec<Group>,
}

#[derive(Debug)]
struct Group {
    search: GroupSearch,
    /// For each pattern of the group, the index of what it spells (a piece, a keyword).
    members: Vec<usize>,
}

#[derive(Debug)]
enum GroupSearch {
    Packed(aho_corasick::packed::Searcher),
    Automaton(AhoCorasick),
}

/// Texts up to this many bytes are searched by one automaton for all keywords.
const SHORT_TEXT: usize = 256;

/// How many pieces one packed searcher takes. Above 32 it spreads them over sixteen buckets
/// instead of eight (AVX2's "fat" Teddy) and reads half as many bytes a step, so a pass costs
/// about the same per piece either way; fuller buckets send it to check more places. The 182
/// pieces (the frequent keywords among them) of 4 KiB and 1 MiB of source, by the criterion
/// benchmark in one run: in searchers of 48, 6.56 us and 6.50 ms; of 40, 6.40 us and 6.99 ms;
/// of 64, 7.08 us and 8.78 ms. A frequent keywords' searcher of their own, beside 164 pieces
/// in searchers of 48, cost a pass more: 8.71 us.
const GROUP_SIZE: usize = 48;

impl Scanner {
    /// A scanner for `chosen`, indexes into `texts`, in groups of at most `size`.
    fn new<T: AsRef<[u8]>>(texts: &[T], chosen: Vec<usize>, size: usize) -> Result<Self, String> {
        Self::build(texts, chosen, size, true)
    }

    /// A scanner, with packed searchers if `packed` and the processor has them. The groups are
    /// as few as `size` allows and as even as can be.
    fn build<T: AsRef<[u8]>>(
        texts: &[T],
        mut chosen: Vec<usize>,
        size: usize,
        packed: bool,
    ) -> Result<Self, String> {
        let text = |index: &usize| texts.get(*index).map_or(&[][..], AsRef::as_ref);
        // A searcher reads as many bytes of each place as its shortest pattern has, up to four:
        // the shorter patterns go together, so that only one searcher reads fewer. Alphabetical
        // groups share their first bytes, which is what the fingerprints read.
        chosen.sort_by_key(|index| (text(index).len() >= PIECE_LEN, text(index)));
        let count = chosen.len().div_ceil(size.max(1)).max(1);
        let groups = chosen
            .chunks(chosen.len().div_ceil(count).max(1))
            .map(|chunk| {
                let mut members = chunk.to_vec();
                // At a position where two begin, the one listed first is reported: the longer,
                // whose prefixes are then marked with it.
                members.sort_by_key(|member| std::cmp::Reverse(text(member).len()));
                let patterns: Vec<&[u8]> = members.iter().map(text).collect();
                let mut searcher = aho_corasick::packed::Config::new().builder();
                for pattern in &patterns {
                    searcher.add(pattern);
                }
                let search = match packed.then(|| searcher.build()).flatten() {
                    Some(searcher) => GroupSearch::Packed(searcher),
                    None => GroupSearch::Automaton(
                        AhoCorasick::builder()
                            .match_kind(MatchKind::LeftmostFirst)
                            .build(&patterns)
                            .map_err(|err| format!("keywords: {err}"))?,
                    ),
                };
                Ok(Group { search, members })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self { groups })
    }

    /// Calls `found` with every place a pattern begins in `bytes`, and the longest of a group
    /// that begins there.
    fn scan(&self, bytes: &[u8], mut found: impl FnMut(usize, usize)) {
        for group in &self.groups {
            let mut at = 0;
            while at < bytes.len() {
                let span = aho_corasick::Span::from(at..bytes.len());
                let hit = match &group.search {
                    GroupSearch::Packed(searcher) => searcher.find_in(bytes, span),
                    GroupSearch::Automaton(automaton) => {
                        automaton.find(Input::new(bytes).span(span))
                    }
                };
                let Some(hit) = hit else {
                    break;
                };
                if let Some(member) = group.members.get(hit.pattern().as_usize()) {
                    found(*member, hit.start());
                }
                at = hit.start() + 1;
            }
        }
    }
}

/// Keywords that occur in most text, of gitleaks' generic rule and toolgate's own.
const FREQUENT_KEYWORDS: &[&str] = &[
    "access",
    "api_key",
    "apikey",
    "auth",
    "credential",
    "creds",
    "passwd",
    "password",
    "secret",
    "token",
];

/// How often three-byte sequences occur in ordinary text, in a million, as
/// `scripts/trigram-frequencies` counted them: the 4,000 most frequent.
const TRIGRAM_DATA: &str = include_str!("../data/trigram-frequencies.json");

#[derive(Deserialize)]
struct TrigramData {
    trigrams: HashMap<String, f64>,
}

/// The counts, read once: the keyword search chooses its pieces by them and the plain-word
/// allowlist reads values by them.
fn trigram_frequencies() -> Result<&'static HashMap<String, f64>, String> {
    static COUNTS: LazyLock<Result<HashMap<String, f64>, String>> = LazyLock::new(|| {
        serde_json::from_str::<TrigramData>(TRIGRAM_DATA)
            .map(|data| data.trigrams)
            .map_err(|err| format!("trigram-frequencies.json: {err}"))
    });
    COUNTS.as_ref().map_err(Clone::clone)
}

/// How many bytes a piece has. With four, a packed searcher's fingerprints are specific enough
/// that ordinary text seldom sends it to check a place; with three, far more often.
const PIECE_LEN: usize = 4;

/// How often ordinary text holds `piece`, in a million, at most: as often as the rarest three
/// bytes within it (0 for a piece that is not in the list of the most frequent).
fn seen(piece: &[u8], frequencies: &HashMap<String, f64>) -> f64 {
    piece
        .windows(3)
        .map(|three| {
            std::str::from_utf8(three)
                .ok()
                .and_then(|three| frequencies.get(three))
                .copied()
                .unwrap_or(0.0)
        })
        .fold(f64::INFINITY, f64::min)
        .min(1_000_000.0)
}

/// How much rarer a piece must be to be chosen over one more keywords share: a piece ordinary
/// text holds this many times in a million counts half as much as one it never holds.
const PIECE_RARITY: f64 = 1000.0;

/// Pieces of `PIECE_LEN` bytes, few, that between them are within every keyword of `rest`
/// holding no keyword of `frequent`. Each is chosen in turn for how many of the keywords still without one
/// it is in, against how often ordinary text holds it; which are chosen decides only how fast
/// the search is, since a keyword counts as found only where it reads in full.
fn cover(
    words: &[String],
    frequent: &[usize],
    rest: &[usize],
    frequencies: &HashMap<String, f64>,
) -> Result<Vec<Vec<u8>>, String> {
    let text = |word: usize| words.get(word).map_or(&[][..], |text| text.as_bytes());
    let holds = |word: usize, piece: &[u8]| memchr::memmem::find(text(word), piece).is_some();
    let need: Vec<usize> = rest
        .iter()
        .copied()
        .filter(|word| !frequent.iter().any(|other| holds(*word, text(*other))))
        .collect();
    // Every piece of the keywords that need one, in byte order, with how often ordinary text
    // holds it and how many of the keywords still without one do; each keyword with its own
    // pieces (as indexes), until a chosen piece is in it.
    let mut windows: Vec<&[u8]> = need
        .iter()
        .flat_map(|word| text(*word).windows(PIECE_LEN))
        .collect();
    windows.sort_unstable();
    windows.dedup();
    let rarity: Vec<f64> = windows
        .iter()
        .map(|piece| 1.0 + seen(piece, frequencies) / PIECE_RARITY)
        .collect();
    let mut counts = vec![0_u32; windows.len()];
    let mut need: Vec<(usize, Vec<usize>)> = need
        .into_iter()
        .map(|word| {
            let mut own: Vec<usize> = text(word)
                .windows(PIECE_LEN)
                .filter_map(|piece| windows.binary_search(&piece).ok())
                .collect();
            own.sort_unstable();
            own.dedup();
            for at in &own {
                if let Some(count) = counts.get_mut(*at) {
                    *count += 1;
                }
            }
            (word, own)
        })
        .collect();
    let mut pieces = Vec::new();
    while let Some((first, _)) = need.first() {
        // The first of the best in byte order, as a scan of the pieces in order finds it.
        let mut best: Option<(usize, f64)> = None;
        for (at, (count, rarity)) in counts.iter().zip(&rarity).enumerate() {
            if *count == 0 {
                continue;
            }
            let score = f64::from(*count) / rarity;
            if best.is_none_or(|(_, best)| score > best) {
                best = Some((at, score));
            }
        }
        let Some(best) = best.and_then(|(at, _)| windows.get(at).copied()) else {
            return Err(format!(
                "keyword {:?} is shorter than a piece",
                words.get(*first)
            ));
        };
        need.retain(|(word, own)| {
            if !holds(*word, best) {
                return true;
            }
            for at in own {
                if let Some(count) = counts.get_mut(*at) {
                    *count = count.saturating_sub(1);
                }
            }
            false
        });
        pieces.push(best.to_vec());
    }
    Ok(pieces)
}

/// Regular expressions as big as gitleaks' largest need more room than the regex crate's
/// default; the limit still bounds what a broken data file could cost.
const SIZE_LIMIT: usize = 64 << 20;

fn compile(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .build()
        .ok()
}

impl Rule {
    fn new(data: RuleData) -> Result<Self, String> {
        let generic = data.generic || data.id == "generic-api-key";
        let allowlists = data
            .allowlists
            .into_iter()
            .map(Allowlist::new)
            .collect::<Result<_, _>>()?;
        Ok(Self {
            id: data.id,
            pattern: data.regex,
            compiled: OnceLock::new(),
            secret_group: data.secret_group,
            entropy: data.entropy.filter(|entropy| *entropy > 0.0),
            keywords: data.keywords,
            allowlists,
            generic,
        })
    }

    fn compiled(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| {
                let regex = compile(&self.pattern)?;
                let anchor = Anchor::new(&self.pattern);
                Some(Compiled { regex, anchor })
            })
            .as_ref()
    }

    fn regex(&self) -> Option<&Regex> {
        self.compiled().map(|compiled| &compiled.regex)
    }

    /// The byte ranges where this rule's expression matches `text`, as `find_iter` over the
    /// whole text reports them; `None` if the expression does not compile. `lowered` is the
    /// text lowercased.
    fn matches(
        &self,
        text: &str,
        lowered: &[u8],
        keywords: &Keywords<'_>,
    ) -> Option<Vec<(usize, usize)>> {
        let compiled = self.compiled()?;
        let anchor = compiled
            .anchor
            .as_ref()
            .filter(|_| !keywords.folds_outside_ascii);
        let Some(anchor) = anchor else {
            return Some(
                compiled
                    .regex
                    .find_iter(text)
                    .map(|found| (found.start(), found.end()))
                    .collect(),
            );
        };
        let mut starts: Vec<usize> = match anchor.covering(keywords) {
            // Each of its starts holds a frequent keyword, whose places are known.
            Some(covering) => keywords
                .places
                .iter()
                .flat_map(|(word, place)| {
                    covering
                        .iter()
                        .filter(move |(covered, _)| covered == word)
                        .filter_map(move |(_, offset)| place.checked_sub(*offset))
                })
                .filter(|start| {
                    lowered.get(*start..).is_some_and(|rest| {
                        anchor
                            .literals
                            .iter()
                            .any(|literal| rest.starts_with(literal))
                    })
                })
                .collect(),
            None => anchor
                .finders
                .iter()
                .flat_map(|finder| finder.find_iter(lowered).collect::<Vec<_>>())
                .collect(),
        };
        starts.sort_unstable();
        starts.dedup();
        let mut found = Vec::new();
        let mut searched_to = 0;
        for at in starts {
            if at < searched_to || !anchor.holds_at(text, at) {
                continue;
            }
            // A match can begin at most `room` bytes before its name. Searching from there
            // finds what a search of the whole text finds: no earlier match can reach past
            // `searched_to`, and any match starting in between holds a name found before.
            let mut from = anchor
                .room
                .map_or(searched_to, |room| at.saturating_sub(room).max(searched_to));
            while !text.is_char_boundary(from) {
                from -= 1;
            }
            match compiled.regex.find_at(text, from) {
                Some(hit) => {
                    found.push((hit.start(), hit.end()));
                    searched_to = hit.end().max(hit.start() + 1);
                }
                None => break,
            }
        }
        Some(found)
    }
}

/// A rule's expression and, where it has one, its anchor.
#[derive(Debug)]
struct Compiled {
    regex: Regex,
    anchor: Option<Anchor>,
}

/// Most of gitleaks' rules and all of toolgate's begin with a name (`key`, `heroku`,
/// `password`) that their keywords name, after at most a bounded run of name characters
/// (`[\w.-]{0,50}?`). Such a rule cannot match where no keyword occurs that the rest of the
/// expression follows, so the rest is tried, anchored, at each keyword found: a few bytes
/// each, where running the whole expression costs a pass over all the text, slowed by its
/// leading run, which keeps the regex engine from skipping ahead.
#[derive(Debug)]
struct Anchor {
    /// The expression without its leading run and look-arounds, anchored where it starts.
    rest: regex_automata::meta::Regex,
    /// How many bytes the leading run can take at most; `None` if it has no bound.
    room: Option<usize>,
    /// What every match of `rest` starts with, lowercased: where to try it.
    literals: Vec<Vec<u8>>,
    finders: Vec<memchr::memmem::Finder<'static>>,
    /// A frequent keyword within each literal and where, if each holds one.
    covering: OnceLock<Option<Vec<(usize, usize)>>>,
}

/// Whether `text` holds `ſ` or the Kelvin sign, which a case-insensitive expression takes for
/// `s` and `k`.
fn folds_outside_ascii(text: &str) -> bool {
    !text.is_ascii() && (text.contains('\u{17f}') || text.contains('\u{212a}'))
}

/// The keywords of a rule set, and where the frequent ones begin in one text.
struct Keywords<'a> {
    /// The text holds one of the two characters outside ASCII that a case-insensitive
    /// expression takes for an ASCII letter (`ſ` for `s`, the Kelvin sign for `k`): anchors,
    /// found in ASCII-lowercased text, could miss a name spelled with one.
    folds_outside_ascii: bool,
    words: &'a [String],
    frequent: &'a [bool],
    places: &'a [(usize, usize)],
}

/// The most prefixes a rule's leading name may spell out, with case variants, to be anchored.
const ANCHOR_LITERALS: usize = 20_000;

/// The most distinct lowercased prefixes an anchored rule may have, and the fewest bytes each:
/// more or shorter would be found nearly everywhere.
const ANCHOR_STARTS: usize = 32;
const ANCHOR_MIN_LEN: usize = 3;

impl Anchor {
    /// The anchor of `pattern`, if it has the shape described above.
    fn new(pattern: &str) -> Option<Self> {
        use regex_syntax::hir::literal::{ExtractKind, Extractor};
        use regex_syntax::hir::{Hir, HirKind};
        let hir = regex_syntax::Parser::new().parse(pattern).ok()?;
        let HirKind::Concat(parts) = hir.kind() else {
            return None;
        };
        let skipped = parts
            .iter()
            .take_while(|part| match part.kind() {
                HirKind::Look(_) => true,
                HirKind::Repetition(repetition) => repetition.min == 0,
                _ => false,
            })
            .count();
        let (lead, rest) = parts.split_at(skipped);
        let rest = Hir::concat(rest.to_vec());
        let spellings = Extractor::new()
            .kind(ExtractKind::Prefix)
            .limit_class(16)
            .limit_repeat(16)
            .limit_total(ANCHOR_LITERALS)
            .extract(&rest);
        let literals = spellings.literals()?;
        // Spellings outside ASCII (`ſ` for `s`, the Kelvin sign for `k`) are left out: where a
        // text holds one of those two characters the whole expression runs instead.
        let mut starts: Vec<Vec<u8>> = literals
            .iter()
            .map(|literal| literal.as_bytes())
            .filter(|bytes| bytes.is_ascii())
            .map(<[u8]>::to_ascii_lowercase)
            .collect();
        starts.sort_unstable();
        starts.dedup();
        if starts.len() > ANCHOR_STARTS {
            // Many spellings of what follows a name (`pass"`, `pass:`, `pass =` …): cut to the
            // length they all have, they find every place the longer ones do, and `rest` is
            // tried at each.
            let shortest = starts.iter().map(Vec::len).min().unwrap_or(0);
            starts.iter_mut().for_each(|start| start.truncate(shortest));
            starts.dedup();
        }
        if starts.is_empty()
            || starts.len() > ANCHOR_STARTS
            || starts.iter().any(|start| start.len() < ANCHOR_MIN_LEN)
        {
            return None;
        }
        let room = lead.iter().try_fold(0usize, |room, part| {
            part.properties()
                .maximum_len()
                .and_then(|len| room.checked_add(len))
        });
        let rest = regex_automata::meta::Regex::builder()
            .configure(
                regex_automata::meta::Config::new()
                    .nfa_size_limit(Some(SIZE_LIMIT))
                    .hybrid_cache_capacity(SIZE_LIMIT),
            )
            .build_from_hir(&rest)
            .ok()?;
        let finders = starts
            .iter()
            .map(|start| memchr::memmem::Finder::new(start).into_owned())
            .collect();
        Some(Self {
            rest,
            room,
            literals: starts,
            finders,
            covering: OnceLock::new(),
        })
    }

    /// For each literal of this anchor, a frequent keyword within it and where, if every
    /// literal holds one: then the places the keyword search keeps for those keywords are
    /// where to try it.
    fn covering(&self, keywords: &Keywords<'_>) -> Option<&[(usize, usize)]> {
        self.covering
            .get_or_init(|| {
                let frequent: Vec<(usize, &str)> = keywords
                    .frequent
                    .iter()
                    .zip(keywords.words)
                    .enumerate()
                    .filter(|(_, (frequent, _))| **frequent)
                    .map(|(index, (_, word))| (index, word.as_str()))
                    .collect();
                let mut covering = Vec::new();
                for literal in &self.literals {
                    let within = frequent.iter().find_map(|(index, word)| {
                        memchr::memmem::find(literal, word.as_bytes()).map(|at| (*index, at))
                    });
                    covering.push(within?);
                }
                covering.sort_unstable();
                covering.dedup();
                Some(covering)
            })
            .as_deref()
    }

    /// Whether the rest of the expression matches at `at`.
    fn holds_at(&self, text: &str, at: usize) -> bool {
        let input = regex_automata::Input::new(text)
            .range(at..)
            .anchored(regex_automata::Anchored::Yes)
            .earliest(true);
        self.rest.is_match(input)
    }
}

impl Allowlist {
    fn new(data: AllowlistData) -> Result<Self, String> {
        let pattern = match data.regexes.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(
                many.iter()
                    .map(|regex| format!("(?:{regex})"))
                    .collect::<Vec<_>>()
                    .join("|"),
            ),
        };
        Ok(Self {
            target: data.target,
            words: data.words,
            pattern,
            compiled: OnceLock::new(),
            stopwords: data
                .stopwords
                .iter()
                .map(|word| word.to_lowercase())
                .collect(),
            stopword_search: OnceLock::new(),
        })
    }

    /// Whether the allowlist lets this finding through. An expression that does not compile
    /// allows nothing: the finding is redacted.
    fn allows(&self, finding: &Finding<'_>) -> bool {
        let target = match self.target {
            Target::Secret => finding.secret,
            Target::Match => finding.matched,
            Target::Line => finding.line(),
        };
        let by_regex = self.pattern.as_deref().is_some_and(|pattern| {
            self.compiled
                .get_or_init(|| compile(pattern))
                .as_ref()
                .is_some_and(|regex| !target.is_empty() && regex.is_match(target))
        });
        by_regex || (self.words && reads_as_words(target)) || self.has_stopword(finding.secret)
    }

    /// Whether `secret` holds a stop word. A list whose search cannot be built allows nothing.
    fn has_stopword(&self, secret: &str) -> bool {
        if self.stopwords.is_empty() {
            return false;
        }
        self.stopword_search
            .get_or_init(|| {
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .build(&self.stopwords)
                    .ok()
            })
            .as_ref()
            .is_some_and(|search| search.is_match(secret))
    }
}

impl RuleSet {
    fn load() -> Result<Self, String> {
        let data: RuleSetData =
            serde_json::from_str(RULE_DATA).map_err(|err| format!("secret-rules.json: {err}"))?;
        let rules: Vec<Rule> = data
            .rules
            .into_iter()
            .chain(own_rules())
            .map(Rule::new)
            .collect::<Result<_, _>>()?;
        let mut words: Vec<String> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (index, rule) in rules.iter().enumerate() {
            if rule.keywords.is_empty() {
                always.push(index);
            }
            for keyword in &rule.keywords {
                let keyword = keyword.to_lowercase();
                match words.iter().position(|word| *word == keyword) {
                    Some(at) => {
                        if let Some(list) = keyword_rules.get_mut(at) {
                            list.push(index);
                        }
                    }
                    None => {
                        words.push(keyword);
                        keyword_rules.push(vec![index]);
                    }
                }
            }
        }
        // Keywords of one or two bytes (`ey` of a JWT, `sk`, `q~`) would leave a packed
        // searcher's fingerprints too short: each is looked for on its own.
        let tiny: Vec<(usize, memchr::memmem::Finder<'static>)> = words
            .iter()
            .enumerate()
            .filter(|(_, word)| word.len() <= 2)
            .map(|(index, word)| (index, memchr::memmem::Finder::new(word).into_owned()))
            .collect();
        let frequent: Vec<usize> = (0..words.len())
            .filter(|index| {
                words.get(*index).is_some_and(|word| {
                    word.len() == 3 || FREQUENT_KEYWORDS.contains(&word.as_str())
                })
            })
            .collect();
        let is_frequent: Vec<bool> = (0..words.len())
            .map(|word| frequent.contains(&word))
            .collect();
        let mut pieces: Vec<Piece> = frequent
            .iter()
            .filter_map(|word| words.get(*word).map(|text| (*word, text)))
            .map(|(word, text)| Piece {
                bytes: text.as_bytes().to_vec(),
                keyword: Some(word),
                within: Vec::new(),
                prefixes: Vec::new(),
            })
            .collect();
        // The rest are found by pieces: a frequent keyword within them, or four bytes.
        let rest: Vec<usize> = (0..words.len())
            .filter(|index| {
                words.get(*index).is_some_and(|word| {
                    word.len() > 2 && !is_frequent.get(*index).copied().unwrap_or(false)
                })
            })
            .collect();
        let frequencies = trigram_frequencies()?;
        pieces.extend(
            cover(&words, &frequent, &rest, frequencies)?
                .into_iter()
                .map(|bytes| Piece {
                    bytes,
                    keyword: None,
                    within: Vec::new(),
                    prefixes: Vec::new(),
                }),
        );
        for word in rest {
            let Some(text) = words.get(word) else {
                continue;
            };
            for piece in &mut pieces {
                let mut from = 0;
                while let Some(at) = text
                    .as_bytes()
                    .get(from..)
                    .and_then(|rest| memchr::memmem::find(rest, &piece.bytes))
                {
                    piece.within.push((word, from + at));
                    from += at + 1;
                }
            }
        }
        let texts: Vec<&[u8]> = pieces.iter().map(|piece| piece.bytes.as_slice()).collect();
        let search = Scanner::new(&texts, (0..pieces.len()).collect(), GROUP_SIZE)?;
        // A searcher reports the longest of its pieces that begin at a place; those it begins
        // with are marked on it.
        for group in &search.groups {
            for piece in &group.members {
                let prefixes: Vec<usize> = group
                    .members
                    .iter()
                    .copied()
                    .filter(|other| {
                        let (Some(long), Some(short)) = (pieces.get(*piece), pieces.get(*other))
                        else {
                            return false;
                        };
                        short.bytes.len() < long.bytes.len() && long.bytes.starts_with(&short.bytes)
                    })
                    .collect();
                if let Some(piece) = pieces.get_mut(*piece) {
                    piece.prefixes = prefixes;
                }
            }
        }
        Ok(Self {
            rules,
            global: Allowlist::new(data.allowlist)?,
            is_frequent,
            every_keyword: AhoCorasick::builder()
                .kind(Some(aho_corasick::AhoCorasickKind::DFA))
                .build(&words)
                .map_err(|err| format!("keywords: {err}"))?,
            search,
            words,
            pieces,
            tiny,
            keyword_rules,
            always,
        })
    }

    /// The rules, for tests that check each compiles.
    #[cfg(test)]
    fn rules(&self) -> impl Iterator<Item = (&str, Option<&Regex>)> {
        self.rules
            .iter()
            .map(|rule| (rule.id.as_str(), rule.regex()))
    }

    /// Whether `text` holds a keyword of any rule.
    fn mentions_keyword(&self, text: &str) -> bool {
        let (candidates, _) = self.candidates(&Lowered::new(text));
        candidates.len() > self.always.len()
    }

    /// The indexes of the rules whose keywords occur in `lowered`, text lowercased as gitleaks
    /// does, in rule order; and where each frequent keyword begins, for anchored rules.
    fn candidates(&self, lowered: &[u8]) -> (Vec<usize>, Vec<(usize, usize)>) {
        self.candidates_by(lowered, lowered.len() <= SHORT_TEXT)
    }

    /// The same, with one automaton if `short`, else with the packed searchers.
    fn candidates_by(&self, bytes: &[u8], short: bool) -> (Vec<usize>, Vec<(usize, usize)>) {
        let mut found: Vec<usize> = Vec::new();
        let mut places = Vec::new();
        if short {
            for hit in self.every_keyword.find_overlapping_iter(bytes) {
                let word = hit.pattern().as_usize();
                found.push(word);
                if self.is_frequent.get(word).copied().unwrap_or(false) {
                    places.push((word, hit.start()));
                }
            }
        } else {
            let mut at = |piece: usize, start: usize| {
                let Some(reported) = self.pieces.get(piece) else {
                    return;
                };
                let prefixes = reported.prefixes.iter().filter_map(|p| self.pieces.get(*p));
                for piece in std::iter::once(reported).chain(prefixes) {
                    if let Some(word) = piece.keyword {
                        places.push((word, start));
                        found.push(word);
                    }
                    for (word, offset) in &piece.within {
                        let reads = start.checked_sub(*offset).is_some_and(|from| {
                            let keyword = self.words.get(*word).map_or(&[][..], |w| w.as_bytes());
                            bytes
                                .get(from..)
                                .is_some_and(|rest| rest.starts_with(keyword))
                        });
                        if reads {
                            found.push(*word);
                        }
                    }
                }
            };
            self.search.scan(bytes, &mut at);
            for (word, finder) in &self.tiny {
                if finder.find(bytes).is_some() {
                    found.push(*word);
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        let mut wanted: Vec<usize> = self
            .always
            .iter()
            .chain(
                found
                    .iter()
                    .flat_map(|word| self.keyword_rules.get(*word).into_iter().flatten()),
            )
            .copied()
            .collect();
        wanted.sort_unstable();
        wanted.dedup();
        (wanted, places)
    }

    /// The byte ranges of `text` to replace, sorted, or `None` if a rule that could match
    /// failed to compile and the text cannot be checked.
    fn secrets(&self, text: &str) -> Option<Vec<(usize, usize)>> {
        let mut spans = Vec::new();
        let mut protected: Option<Vec<(usize, usize)>> = None;
        let lowered = Lowered::new(text);
        let (candidates, places) = self.candidates(&lowered);
        let folds_outside_ascii = folds_outside_ascii(text);
        for index in candidates {
            let rule = self.rules.get(index)?;
            let regex = rule.regex()?;
            let keywords = Keywords {
                folds_outside_ascii,
                words: &self.words,
                frequent: &self.is_frequent,
                places: &places,
            };
            for (start, end) in rule.matches(text, &lowered, &keywords)? {
                let Some(finding) = Finding::new(rule, regex, text, start, end) else {
                    continue;
                };
                if rule
                    .entropy
                    .is_some_and(|limit| entropy(finding.secret) <= limit)
                    || self.global.allows(&finding)
                    || rule.allowlists.iter().any(|list| list.allows(&finding))
                {
                    continue;
                }
                // A digest, object id or UUID is exempt when it is all a rule matched, or the
                // rule matched on a generic name alone.
                let shape_only = finding.secret_start == finding.match_start
                    && finding.secret_end == finding.match_end;
                if rule.generic || shape_only {
                    let protected = protected.get_or_insert_with(|| protected_spans(text));
                    if protected.iter().any(|(start, end)| {
                        *start <= finding.secret_start && finding.secret_end <= *end
                    }) || is_protected_shape(finding.secret)
                    {
                        continue;
                    }
                }
                spans.push((finding.secret_start, finding.secret_end));
            }
        }
        spans.sort_unstable();
        Some(spans)
    }
}

/// A text lowercased (ASCII only, as gitleaks does) into memory that begins on a cache line.
/// The packed searchers read 16 or 32 bytes at a time from the start; from 8 or 16 bytes into
/// a line, where every other read straddles two, the rarer keywords' search of 4 KiB of source
/// took 4.0 us at best against 3.2 us from a line's start.
struct Lowered {
    buffer: Vec<u8>,
    start: usize,
}

impl Lowered {
    fn new(text: &str) -> Self {
        let mut buffer: Vec<u8> = Vec::with_capacity(text.len() + 64);
        let start = buffer.as_ptr().align_offset(64).min(64);
        buffer.resize(start, 0);
        buffer.extend_from_slice(text.as_bytes());
        if let Some(copy) = buffer.get_mut(start..) {
            copy.make_ascii_lowercase();
        }
        Self { buffer, start }
    }
}

impl std::ops::Deref for Lowered {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        self.buffer.get(self.start..).unwrap_or_default()
    }
}

/// One match of a rule, with its secret as gitleaks chooses it.
#[derive(Debug)]
struct Finding<'t> {
    /// The whole text, for the line around the match (see [`Finding::line`]).
    text: &'t str,
    matched: &'t str,
    secret: &'t str,
    match_start: usize,
    match_end: usize,
    secret_start: usize,
    secret_end: usize,
}

impl<'t> Finding<'t> {
    fn new(rule: &Rule, regex: &Regex, text: &'t str, start: usize, end: usize) -> Option<Self> {
        // gitleaks trims line breaks off a match before it looks at it.
        let whole = text.get(start..end)?;
        let trimmed_front = whole.len() - whole.trim_start_matches('\n').len();
        let match_start = start + trimmed_front;
        let match_end = match_start + whole.trim_matches('\n').len();
        let matched = text.get(match_start..match_end)?;
        if matched.is_empty() {
            return None;
        }
        // The secret is the rule's capture group, or else the first that matched anything,
        // found again within the match as gitleaks does.
        let (mut secret_start, mut secret_end) = (match_start, match_end);
        if let Some(groups) = regex.captures(matched)
            && groups.len() >= 2
        {
            let group = if rule.secret_group > 0 {
                groups.get(rule.secret_group)
            } else {
                groups
                    .iter()
                    .skip(1)
                    .flatten()
                    .find(|group| !group.is_empty())
            };
            match group {
                Some(group) => {
                    secret_start = match_start + group.start();
                    secret_end = match_start + group.end();
                }
                // The group the rule names took no part in this match: nothing to report.
                None if rule.secret_group > 0 => return None,
                None => {}
            }
        }
        Some(Self {
            text,
            matched,
            secret: text.get(secret_start..secret_end)?,
            match_start,
            match_end,
            secret_start,
            secret_end,
        })
    }

    /// The line the match is on, as far as [`LINE_WINDOW`] bytes reach on either side of it.
    /// Read only for an allowlist that looks at the line, and never further: output of one
    /// long line full of matches would otherwise be read again for each of them, and take
    /// seconds a mebibyte.
    fn line(&self) -> &'t str {
        let text = self.text;
        let mut from = self.match_start.saturating_sub(LINE_WINDOW);
        while !text.is_char_boundary(from) {
            from += 1;
        }
        let mut to = self.match_end.saturating_add(LINE_WINDOW).min(text.len());
        while !text.is_char_boundary(to) {
            to -= 1;
        }
        let before = text
            .as_bytes()
            .get(from..self.match_start)
            .unwrap_or_default();
        let start = memchr::memrchr(b'\n', before).map_or(from, |at| from + at + 1);
        let after = text.as_bytes().get(self.match_end..to).unwrap_or_default();
        let end = memchr::memchr(b'\n', after).map_or(to, |at| self.match_end + at);
        text.get(start..end).unwrap_or(self.matched)
    }
}

/// How much of a match's line, on either side of it, an allowlist of lines reads. gitleaks'
/// only ones (of its generic rule) look for a Dockerfile's `--mount=type=secret,` and a
/// JavaScript `import { … } from '…'` around the match; a line longer than this around a
/// match is read in part, so such an allowlist may miss it and the match is redacted.
const LINE_WINDOW: usize = 4096;

/// Shannon entropy of `data` in bits per character, computed as gitleaks does (counts per
/// character, divided by the length in bytes).
pub(crate) fn entropy(data: &str) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts: Vec<(char, usize)> = Vec::new();
    for ch in data.chars() {
        match counts.iter_mut().find(|(seen, _)| *seen == ch) {
            Some((_, count)) => *count += 1,
            None => counts.push((ch, 1)),
        }
    }
    #[expect(
        clippy::cast_precision_loss,
        reason = "text lengths are far below 2^52 bytes"
    )]
    let length = data.len() as f64;
    counts
        .iter()
        .map(|(_, count)| {
            #[expect(clippy::cast_precision_loss, reason = "counts are far below 2^52")]
            let frequency = *count as f64 / length;
            -frequency * frequency.log2()
        })
        .sum()
}

/// toolgate's digests (`sha256:` and 64 hex digits), git object ids (40 or 64 hex digits) and
/// UUIDs, wherever they stand in the text.
static PROTECTED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r"(?i)(?:sha256:[0-9a-f]{64}|(?-u:\b)(?:[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?-u:\b))",
    )
});

/// The same shapes as a whole secret, quotes aside.
static PROTECTED_SHAPE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r#"(?i)^["']?(?:sha256:[0-9a-f]{64}|[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})["']?$"#,
    )
});

fn protected_spans(text: &str) -> Vec<(usize, usize)> {
    PROTECTED.as_ref().map_or_else(Vec::new, |regex| {
        regex
            .find_iter(text)
            .map(|found| (found.start(), found.end()))
            .collect()
    })
}

fn is_protected_shape(secret: &str) -> bool {
    PROTECTED_SHAPE
        .as_ref()
        .is_some_and(|regex| regex.is_match(secret))
}

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

    /// Every rule in the data file and of toolgate's own compiles with the regex crate: none
    /// is dropped. There is no exclusion list; a rule that stops compiling after an update of
    /// the data fails here, and at run time makes every text that has its keyword redacted
    /// whole.
    #[test]
    fn every_rule_compiles() {
        let rules = rule_set().unwrap();
        let failed: Vec<&str> = rules
            .rules()
            .filter_map(|(id, regex)| regex.is_none().then_some(id))
            .collect();
        assert_eq!(failed, Vec::<&str>::new());
        assert!(rules.rules().count() > 200);
        for rule in &rules.rules {
            for list in &rule.allowlists {
                if let Some(pattern) = &list.pattern {
                    assert!(compile(pattern).is_some(), "{}: {pattern}", rule.id);
                }
            }
        }
        let global = rules.global.pattern.as_deref().unwrap();
        assert!(compile(global).is_some());
    }

    /// The rule's pattern with its look-arounds dropped, for a generator: what it generates
    /// need not match, only look like what does.
    fn without_looks(hir: &regex_syntax::hir::Hir) -> regex_syntax::hir::Hir {
        use regex_syntax::hir::{Capture, Hir, HirKind, Repetition};
        match hir.kind() {
            HirKind::Look(_) => Hir::empty(),
            HirKind::Repetition(rep) => Hir::repetition(Repetition {
                sub: Box::new(without_looks(&rep.sub)),
                ..rep.clone()
            }),
            HirKind::Capture(capture) => Hir::capture(Capture {
                sub: Box::new(without_looks(&capture.sub)),
                ..capture.clone()
            }),
            HirKind::Concat(parts) => Hir::concat(parts.iter().map(without_looks).collect()),
            HirKind::Alternation(parts) => {
                Hir::alternation(parts.iter().map(without_looks).collect())
            }
            _ => hir.clone(),
        }
    }

    /// An anchored rule finds exactly what its expression finds over the whole text: samples
    /// of every rule, alone, side by side and inside ordinary source, each compared span for
    /// span with `find_iter`. `ANCHOR_SEED=<n>` draws other samples.
    #[test]
    fn anchored_rules_find_what_the_whole_expression_finds() {
        use rand::{RngExt, SeedableRng};
        let rules = rule_set().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(
            std::env::var("ANCHOR_SEED")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(7),
        );
        let source = include_str!("approval.rs");
        let mut anchored = 0;
        for rule in &rules.rules {
            let compiled = rule.compiled().unwrap();
            if compiled.anchor.is_none() {
                continue;
            }
            anchored += 1;
            let hir = regex_syntax::Parser::new().parse(&rule.pattern).unwrap();
            let generator = rand_regex::Regex::with_hir(without_looks(&hir), 24).unwrap();
            for round in 0..6 {
                let one: String = rng.sample(&generator);
                let two: String = rng.sample(&generator);
                let cut = (round * 397) % 3000;
                let around = source.get(..cut).unwrap_or_default();
                let texts = [
                    one.clone(),
                    format!("{one}{two}"),
                    format!("{one} {two}\n{one}"),
                    format!("{around}\nlet key = \"{one}\";\n{two}"),
                    format!("x{one}y"),
                ];
                for text in texts {
                    let lowered = text.to_ascii_lowercase();
                    let (_, places) = rules.candidates(lowered.as_bytes());
                    let keywords = Keywords {
                        folds_outside_ascii: folds_outside_ascii(&text),
                        words: &rules.words,
                        frequent: &rules.is_frequent,
                        places: &places,
                    };
                    let found = rule.matches(&text, lowered.as_bytes(), &keywords).unwrap();
                    let whole: Vec<(usize, usize)> = compiled
                        .regex
                        .find_iter(&text)
                        .map(|m| (m.start(), m.end()))
                        .collect();
                    assert_eq!(found, whole, "{}: {text:?}", rule.id);
                }
            }
        }
        assert!(anchored > 150, "{anchored} rules anchored");
    }

    /// toolgate's own rules for names are tried only where their names are: a rule that lost
    /// its anchor would run over every text (the short password names cost 1.4–3.6 ms a
    /// mebibyte that way).
    #[test]
    fn own_name_rules_are_anchored() {
        let rules = rule_set().unwrap();
        for id in [
            "toolgate-secret-assignment",
            "toolgate-secret-quoted",
            "toolgate-password-colon",
            "toolgate-pass-assignment",
            "toolgate-pwd-assignment",
            "toolgate-xml-element",
            "toolgate-xml-setting",
            "toolgate-command-line-flag",
            "toolgate-mysql-password",
            "toolgate-docker-login-password",
            "toolgate-sshpass-password",
            "toolgate-redis-cli-password",
            "toolgate-kubernetes-env",
        ] {
            let rule = rules.rules.iter().find(|rule| rule.id == id).unwrap();
            assert!(rule.compiled().unwrap().anchor.is_some(), "{id}");
        }
    }

    /// Where the processor has no packed searcher, the automaton finds the same places.
    #[test]
    fn both_searchers_find_the_same_places() {
        let rules = rule_set().unwrap();
        let mut text = include_str!("approval.rs").to_ascii_lowercase();
        for word in &rules.words {
            text.push_str(word);
            text.push(' ');
        }
        let places = |scanner: &Scanner| {
            let mut places = Vec::new();
            scanner.scan(text.as_bytes(), |word, start| places.push((word, start)));
            places.sort_unstable();
            places
        };
        // The keywords themselves, and the searchers load built, each against an automaton of
        // the same patterns.
        let words: Vec<&[u8]> = rules.words.iter().map(|word| word.as_bytes()).collect();
        let chosen: Vec<usize> = (0..words.len())
            .filter(|word| words[*word].len() > 2)
            .collect();
        let keywords = Scanner::build(&words, chosen.clone(), GROUP_SIZE, true).unwrap();
        let pieces: Vec<&[u8]> = rules.pieces.iter().map(|p| p.bytes.as_slice()).collect();
        let members = |scanner: &Scanner| -> Vec<usize> {
            scanner
                .groups
                .iter()
                .flat_map(|g| g.members.iter().copied())
                .collect()
        };
        for (packed, texts, chosen, size) in [
            (&keywords, &words, chosen, GROUP_SIZE),
            (&rules.search, &pieces, members(&rules.search), GROUP_SIZE),
        ] {
            assert!(
                matches!(packed.groups[0].search, GroupSearch::Packed(_))
                    || !cfg!(target_arch = "x86_64")
            );
            let automaton = Scanner::build(texts, chosen.clone(), size, false).unwrap();
            assert_eq!(places(packed), places(&automaton));
            assert!(
                places(packed).len() >= chosen.len(),
                "every pattern is in the text"
            );
        }
    }

    /// Short texts go through one automaton, longer ones through the packed searchers: both
    /// choose the same rules and keep the same places.
    #[test]
    fn short_and_long_texts_are_searched_alike() {
        let rules = rule_set().unwrap();
        let mut text = include_str!("approval.rs").to_ascii_lowercase();
        for word in &rules.words {
            text.push_str(word);
            text.push_str(" x");
            text.push_str(word);
            text.push('\n');
        }
        let mut checked = 0;
        for window in text.as_bytes().chunks(200) {
            let Ok(window) = std::str::from_utf8(window) else {
                continue;
            };
            let sorted = |(candidates, mut places): (Vec<usize>, Vec<(usize, usize)>)| {
                places.sort_unstable();
                places.dedup();
                (candidates, places)
            };
            assert_eq!(
                sorted(rules.candidates_by(window.as_bytes(), true)),
                sorted(rules.candidates_by(window.as_bytes(), false)),
                "{window:?}"
            );
            checked += 1;
        }
        assert!(checked > 20);
    }

    #[test]
    fn entropy_matches_gitleaks() {
        assert_eq!(entropy(""), 0.0);
        assert_eq!(entropy("aaaa"), 0.0);
        assert!((entropy("ab") - 1.0).abs() < 1e-12);
        assert!((entropy("abcd") - 2.0).abs() < 1e-12);
    }

    #[test]
    fn a_finding_reads_its_line_only_near_the_match() {
        let rule = Rule::new(RuleData {
            id: "t".to_owned(),
            regex: "needle".to_owned(),
            secret_group: 0,
            entropy: None,
            keywords: Vec::new(),
            allowlists: Vec::new(),
            generic: false,
        })
        .unwrap();
        let regex = rule.compiled().unwrap().regex.clone();
        let finding = |text: &'static str, at: usize| {
            Finding::new(&rule, &regex, text, at, at + "needle".len()).unwrap()
        };
        let short = "first line\nthe needle here\nlast";
        assert_eq!(finding(short, 15).line(), "the needle here");
        // One line of two mebibytes: the window, not the line, and cut at characters.
        let long: &'static str = Box::leak(
            format!("{}needle{}", "é".repeat(1 << 20), "ü".repeat(1 << 20)).into_boxed_str(),
        );
        let line = finding(long, 2 << 20).line();
        assert!(line.contains("needle"));
        assert!(
            line.len() <= 2 * LINE_WINDOW + "needle".len(),
            "{}",
            line.len()
        );
        assert!(line.len() >= 2 * LINE_WINDOW - 2);
    }
}
