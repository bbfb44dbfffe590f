//! toolgate's own rules, for what gitleaks leaves to file scanning: private-key blocks cut off
//! by truncation, short values assigned to sensitive names, passwords in URLs and command
//! lines, `Authorization` headers, and keys whose prefix alone names them. They are written as
//! the data file's rules are ([`RuleData`]) and run on the same machinery.

use super::allowlist::{AllowlistData, Target, plain_word_allowlist, property_allowlist};
use super::rule::RuleData;

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
pub(super) fn own_rules() -> Vec<RuleData> {
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
