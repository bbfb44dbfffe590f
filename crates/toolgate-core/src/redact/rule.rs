//! One rule: its data as the rule file holds it, its expression compiled on first need, the
//! places it matches a text, the finding each match makes (the secret as gitleaks picks it, the
//! line an allowlist may read), and the entropy a secret must clear.

use std::sync::OnceLock;

use regex::{Regex, RegexBuilder};
use serde::Deserialize;

use super::allowlist::{Allowlist, AllowlistData};
use super::anchor::Anchor;
use super::prefilter::Keywords;

#[derive(Debug, Deserialize)]
pub(super) struct RuleData {
    pub(super) id: String,
    pub(super) regex: String,
    #[serde(default, rename = "secretGroup")]
    pub(super) secret_group: usize,
    #[serde(default)]
    pub(super) entropy: Option<f64>,
    #[serde(default)]
    pub(super) keywords: Vec<String>,
    #[serde(default)]
    pub(super) allowlists: Vec<AllowlistData>,
    /// Whether the rule matches on a name alone (see [`Rule::generic`]).
    #[serde(skip)]
    pub(super) generic: bool,
}

/// A rule ready to run. Its regular expression is compiled on first need: most rules never
/// run at all in a server's lifetime, and compiling all of them would cost every start.
#[derive(Debug)]
pub(crate) struct Rule {
    #[cfg_attr(not(test), expect(dead_code, reason = "named in the tests' failures"))]
    pub(super) id: String,
    pub(super) pattern: String,
    compiled: OnceLock<Option<Compiled>>,
    secret_group: usize,
    pub(super) entropy: Option<f64>,
    pub(super) keywords: Vec<String>,
    pub(super) allowlists: Vec<Allowlist>,
    /// gitleaks' generic rule and toolgate's own: they match on a name alone, so digests,
    /// object ids and UUIDs are exempt from them.
    pub(super) generic: bool,
}

/// Regular expressions as big as gitleaks' largest need more room than the regex crate's
/// default; the limit still bounds what a broken data file could cost.
pub(super) const SIZE_LIMIT: usize = 64 << 20;

pub(super) fn compile(pattern: &str) -> Option<Regex> {
    RegexBuilder::new(pattern)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .build()
        .ok()
}

impl Rule {
    pub(super) fn new(data: RuleData) -> Result<Self, String> {
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

    pub(super) fn compiled(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| {
                let regex = compile(&self.pattern)?;
                let anchor = Anchor::new(&self.pattern);
                Some(Compiled { regex, anchor })
            })
            .as_ref()
    }

    pub(super) fn regex(&self) -> Option<&Regex> {
        self.compiled().map(|compiled| &compiled.regex)
    }

    /// The byte ranges where this rule's expression matches `text`, as `find_iter` over the
    /// whole text reports them; `None` if the expression does not compile. `lowered` is the
    /// text lowercased.
    pub(super) fn matches(
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
pub(super) struct Compiled {
    pub(super) regex: Regex,
    pub(super) anchor: Option<Anchor>,
}

/// Whether `text` holds `ſ` or the Kelvin sign, which a case-insensitive expression takes for
/// `s` and `k`.
pub(super) fn folds_outside_ascii(text: &str) -> bool {
    !text.is_ascii() && (text.contains('\u{17f}') || text.contains('\u{212a}'))
}

/// One match of a rule, with its secret as gitleaks chooses it.
#[derive(Debug)]
pub(super) struct Finding<'t> {
    /// The whole text, for the line around the match (see [`Finding::line`]).
    text: &'t str,
    pub(super) matched: &'t str,
    pub(super) secret: &'t str,
    pub(super) match_start: usize,
    pub(super) match_end: usize,
    pub(super) secret_start: usize,
    pub(super) secret_end: usize,
}

impl<'t> Finding<'t> {
    pub(super) fn new(
        rule: &Rule,
        regex: &Regex,
        text: &'t str,
        start: usize,
        end: usize,
    ) -> Option<Self> {
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
    pub(super) fn line(&self) -> &'t str {
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

#[cfg(test)]
mod tests {
    use super::*;

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
