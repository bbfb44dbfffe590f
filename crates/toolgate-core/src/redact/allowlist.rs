//! What lets a finding through: gitleaks' allowlists (expressions over the secret, the match or
//! its line, and stop words), toolgate's plain-word and build-property allowlists for values
//! given to sensitive names, and the shapes toolgate itself prints (`sha256:` digests, git
//! object ids, UUIDs), which a rule that matched on a name alone never redacts.

use std::sync::{LazyLock, OnceLock};

use aho_corasick::AhoCorasick;
use regex::Regex;
use serde::Deserialize;

use super::prefilter::trigram_frequencies;
use super::rule::{Finding, compile};

/// A value that is a plain word (`allowed`, `Bearer`, `self.token`), a call
/// (`read_password()`), a type (`Option<String>`, `&str`), a version range (`^3.0.0 || ^4`),
/// a template's or a document's placeholder (`{token}`, `<your-password>`,
/// `<string|buffer>`) or a variable of a script (`$_POST[`, `!$pass`, `${DB_PASSWORD}`,
/// `$(cat` cut at its space, `$dir/key.pem`, `$this->password`) names something; it is not a
/// secret. A value that only begins with `$` and a letter (`$argon2id$v=19$…`), a default
/// after a variable (`${DB_PASSWORD:-hunter2}`) and a command substitution with more in it
/// (`$(curl…|sh)`) are not one.
pub(super) fn plain_word_allowlist() -> AllowlistData {
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
pub(super) fn property_allowlist() -> AllowlistData {
    AllowlistData {
        target: Target::Secret,
        regexes: vec![r"^\$[{(][A-Za-z0-9_.-]+[})]$".to_owned()],
        stopwords: Vec::new(),
        words: false,
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct AllowlistData {
    #[serde(default)]
    pub(super) target: Target,
    #[serde(default)]
    pub(super) regexes: Vec<String>,
    #[serde(default)]
    pub(super) stopwords: Vec<String>,
    /// Also let through a secret that reads as words (see [`reads_as_words`]): toolgate's own
    /// plain-word allowlist.
    #[serde(skip)]
    pub(super) words: bool,
}

/// What an allowlist's regular expressions are checked against, as in gitleaks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Target {
    /// The secret alone (the capture group).
    #[default]
    Secret,
    /// The whole match, the name before the secret included.
    Match,
    /// The line or lines the match is on.
    Line,
}

#[derive(Debug)]
pub(super) struct Allowlist {
    target: Target,
    words: bool,
    /// The allowlist's expressions joined into one, as gitleaks does.
    pub(super) pattern: Option<String>,
    compiled: OnceLock<Option<Regex>>,
    /// Lowercased; searched for by an automaton built when a finding is first checked, since
    /// building the largest list's (generic-api-key's, some 1,500 words) costs milliseconds.
    stopwords: Vec<String>,
    stopword_search: OnceLock<Option<AhoCorasick>>,
}

impl Allowlist {
    pub(super) fn new(data: AllowlistData) -> Result<Self, String> {
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
    pub(super) fn allows(&self, finding: &Finding<'_>) -> bool {
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

/// toolgate's digests (`sha256:` and 64 hex digits), git object ids (40 or 64 hex digits) and
/// UUIDs, wherever they stand in the text.
pub(super) static PROTECTED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r"(?i)(?:sha256:[0-9a-f]{64}|(?-u:\b)(?:[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?-u:\b))",
    )
});

/// The same shapes as a whole secret, quotes aside.
pub(super) static PROTECTED_SHAPE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(
        r#"(?i)^["']?(?:sha256:[0-9a-f]{64}|[0-9a-f]{64}|[0-9a-f]{40}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})["']?$"#,
    )
});

pub(super) fn protected_spans(text: &str) -> Vec<(usize, usize)> {
    PROTECTED.as_ref().map_or_else(Vec::new, |regex| {
        regex
            .find_iter(text)
            .map(|found| (found.start(), found.end()))
            .collect()
    })
}

pub(super) fn is_protected_shape(secret: &str) -> bool {
    PROTECTED_SHAPE
        .as_ref()
        .is_some_and(|regex| regex.is_match(secret))
}
