//! Where a rule that begins with a name is tried: the rest of its expression, anchored at each
//! place one of its names begins, instead of a pass of the whole expression over the text.

use std::sync::OnceLock;

use super::prefilter::Keywords;
use super::rule::SIZE_LIMIT;

/// Most of gitleaks' rules and all of toolgate's begin with a name (`key`, `heroku`,
/// `password`) that their keywords name, after at most a bounded run of name characters
/// (`[\w.-]{0,50}?`). Such a rule cannot match where no keyword occurs that the rest of the
/// expression follows, so the rest is tried, anchored, at each keyword found: a few bytes
/// each, where running the whole expression costs a pass over all the text, slowed by its
/// leading run, which keeps the regex engine from skipping ahead.
#[derive(Debug)]
pub(super) struct Anchor {
    /// The expression without its leading run and look-arounds, anchored where it starts.
    rest: regex_automata::meta::Regex,
    /// How many bytes the leading run can take at most; `None` if it has no bound.
    pub(super) room: Option<usize>,
    /// What every match of `rest` starts with, lowercased: where to try it.
    pub(super) literals: Vec<Vec<u8>>,
    pub(super) finders: Vec<memchr::memmem::Finder<'static>>,
    /// A frequent keyword within each literal and where, if each holds one.
    covering: OnceLock<Option<Vec<(usize, usize)>>>,
}

/// The most prefixes a rule's leading name may spell out, with case variants, to be anchored.
const ANCHOR_LITERALS: usize = 20_000;

/// The most distinct lowercased prefixes an anchored rule may have, and the fewest bytes each:
/// more or shorter would be found nearly everywhere.
const ANCHOR_STARTS: usize = 32;
const ANCHOR_MIN_LEN: usize = 3;

impl Anchor {
    /// The anchor of `pattern`, if it has the shape described above.
    pub(super) fn new(pattern: &str) -> Option<Self> {
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
    pub(super) fn covering(&self, keywords: &Keywords<'_>) -> Option<&[(usize, usize)]> {
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
    pub(super) fn holds_at(&self, text: &str, at: usize) -> bool {
        let input = regex_automata::Input::new(text)
            .range(at..)
            .anchored(regex_automata::Anchored::Yes)
            .earliest(true);
        self.rest.is_match(input)
    }
}

#[cfg(test)]
mod tests {
    use super::super::rule::folds_outside_ascii;
    use super::super::rule_set;
    use super::*;

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
        let source = include_str!("../approval.rs");
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
}
