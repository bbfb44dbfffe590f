//! The rules loaded together: gitleaks' data file and toolgate's own, the keyword search over
//! all of them and gitleaks' global allowlist; and the secrets of one text, rule by rule.

use aho_corasick::AhoCorasick;
use serde::Deserialize;

use super::allowlist::{Allowlist, AllowlistData, is_protected_shape, protected_spans};
use super::own_rules::own_rules;
use super::prefilter::{
    FREQUENT_KEYWORDS, GROUP_SIZE, Keywords, Lowered, Piece, Scanner, cover, trigram_frequencies,
};
use super::rule::{Finding, Rule, RuleData, entropy, folds_outside_ascii};

/// gitleaks' rules as `scripts/update-secret-rules` wrote them.
const RULE_DATA: &str = include_str!("../../data/secret-rules.json");

#[derive(Debug, Deserialize)]
struct RuleSetData {
    allowlist: AllowlistData,
    rules: Vec<RuleData>,
}

/// Every rule, the keyword searchers over all of them, and gitleaks' global allowlist.
#[derive(Debug)]
pub(crate) struct RuleSet {
    pub(super) rules: Vec<Rule>,
    global: Allowlist,
    /// The keywords, lowercased.
    pub(super) words: Vec<String>,
    /// What the searchers look for: the frequent keywords, then pieces of the rest.
    pub(super) pieces: Vec<Piece>,
    /// The searchers over every piece.
    pub(super) search: Scanner,
    /// For each keyword, whether it is frequent: looked for whole, its places kept for
    /// anchored rules.
    pub(super) is_frequent: Vec<bool>,
    /// Every keyword in one automaton, for short texts (a name, a path, a value of a JSON
    /// object), where setting up a dozen searchers costs more than stepping through the bytes.
    pub(super) every_keyword: AhoCorasick,
    /// For each keyword, the rules that name it.
    pub(super) keyword_rules: Vec<Vec<usize>>,
    /// Keywords of one or two bytes, each with its finder.
    pub(super) tiny: Vec<(usize, memchr::memmem::Finder<'static>)>,
    /// Rules without keywords, which run on every text.
    pub(super) always: Vec<usize>,
}

impl RuleSet {
    pub(super) fn load() -> Result<Self, String> {
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
    fn rules(&self) -> impl Iterator<Item = (&str, Option<&regex::Regex>)> {
        self.rules
            .iter()
            .map(|rule| (rule.id.as_str(), rule.regex()))
    }

    /// The byte ranges of `text` to replace, sorted, or `None` if a rule that could match
    /// failed to compile and the text cannot be checked.
    pub(super) fn secrets(&self, text: &str) -> Option<Vec<(usize, usize)>> {
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

#[cfg(test)]
mod tests {
    use super::super::rule::compile;
    use super::super::rule_set;

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
}
