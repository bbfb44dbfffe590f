//! Which rules a text can match. Its keywords are found in the text lowercased: the frequent
//! ones and rare four-byte pieces of the others by packed SIMD searchers, the one- and two-byte
//! ones by a substring search each, a short text by one automaton. Only the rules whose keyword
//! occurs run.

use std::collections::HashMap;
use std::sync::LazyLock;

use aho_corasick::{AhoCorasick, Input, MatchKind};
use serde::Deserialize;

use super::rule_set::RuleSet;

/// Something the keyword search looks for, and what finding it means.
#[derive(Debug)]
pub(super) struct Piece {
    pub(super) bytes: Vec<u8>,
    /// The keyword it is, if it is a whole (frequent) keyword.
    pub(super) keyword: Option<usize>,
    /// Keywords that hold it, each with where in the keyword it begins: such a keyword is found
    /// where the text around the piece reads as the whole keyword.
    pub(super) within: Vec<(usize, usize)>,
    /// Pieces of the same searcher that it begins with, and so begin where it begins.
    pub(super) prefixes: Vec<usize>,
}

/// Pieces looked for together: a few dozen at a time with the SIMD searcher of
/// `aho-corasick`'s packed module where the processor has it, one automaton where it has not.
/// A byte-at-a-time automaton over all the keywords costs more than running the few rules
/// that ordinary text meets.
#[derive(Debug)]
pub(super) struct Scanner {
    pub(super) groups: Vec<Group>,
}

#[derive(Debug)]
pub(super) struct Group {
    search: GroupSearch,
    /// For each pattern of the group, the index of what it spells (a piece, a keyword).
    pub(super) members: Vec<usize>,
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
/// about the same per piece either way; fuller buckets send it to check more places. When the
/// rules made 182 pieces (the frequent keywords among them), the criterion benchmark timed a
/// pass over 4 KiB and 1 MiB of source in one run: in searchers of 48, 6.56 us and 6.50 ms; of
/// 40, 6.40 us and 6.99 ms; of 64, 7.08 us and 8.78 ms. A frequent keywords' searcher of their
/// own, beside 164 pieces in searchers of 48, cost a pass more: 8.71 us.
pub(super) const GROUP_SIZE: usize = 48;

impl Scanner {
    /// A scanner for `chosen`, indexes into `texts`, in groups of at most `size`.
    pub(super) fn new<T: AsRef<[u8]>>(
        texts: &[T],
        chosen: Vec<usize>,
        size: usize,
    ) -> Result<Self, String> {
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

/// Keywords that occur in most text, of gitleaks' generic rule and toolgate's own. They and
/// every keyword of three bytes, which has no rarer four-byte piece, are looked for whole.
pub(super) const FREQUENT_KEYWORDS: &[&str] = &[
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
const TRIGRAM_DATA: &str = include_str!("../../data/trigram-frequencies.json");

#[derive(Deserialize)]
struct TrigramData {
    trigrams: HashMap<String, f64>,
}

/// The counts, read once: the keyword search chooses its pieces by them and the plain-word
/// allowlist reads values by them.
pub(super) fn trigram_frequencies() -> Result<&'static HashMap<String, f64>, String> {
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
pub(super) fn cover(
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

/// The keywords of a rule set, and where the frequent ones begin in one text.
pub(super) struct Keywords<'a> {
    /// The text holds one of the two characters outside ASCII that a case-insensitive
    /// expression takes for an ASCII letter (`ſ` for `s`, the Kelvin sign for `k`): anchors,
    /// found in ASCII-lowercased text, could miss a name spelled with one.
    pub(super) folds_outside_ascii: bool,
    pub(super) words: &'a [String],
    pub(super) frequent: &'a [bool],
    pub(super) places: &'a [(usize, usize)],
}

/// A text lowercased (ASCII only, as gitleaks does) into memory that begins on a cache line.
/// The packed searchers read 16 or 32 bytes at a time from the start; from 8 or 16 bytes into
/// a line, where every other read straddles two, the rarer keywords' search of 4 KiB of source
/// took 4.0 us at best against 3.2 us from a line's start.
pub(super) struct Lowered {
    buffer: Vec<u8>,
    start: usize,
}

impl Lowered {
    pub(super) fn new(text: &str) -> Self {
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

impl RuleSet {
    /// Whether `text` holds a keyword of any rule.
    pub(super) fn mentions_keyword(&self, text: &str) -> bool {
        let (candidates, _) = self.candidates(&Lowered::new(text));
        candidates.len() > self.always.len()
    }

    /// The indexes of the rules whose keywords occur in `lowered`, text lowercased as gitleaks
    /// does, in rule order; and where each frequent keyword begins, for anchored rules.
    pub(super) fn candidates(&self, lowered: &[u8]) -> (Vec<usize>, Vec<(usize, usize)>) {
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
}

#[cfg(test)]
mod tests {
    use super::super::rule_set;
    use super::*;

    /// Where the processor has no packed searcher, the automaton finds the same places.
    #[test]
    fn both_searchers_find_the_same_places() {
        let rules = rule_set().unwrap();
        let mut text = include_str!("../approval.rs").to_ascii_lowercase();
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
        let mut text = include_str!("../approval.rs").to_ascii_lowercase();
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
}
