//! Characters a person cannot see, made visible in text shown for approval.
//!
//! A model can write characters that render as nothing, or that reorder what is around them:
//! bidirectional controls (U+202E turns `admin = false` into something that reads otherwise),
//! zero-width characters, tag characters that smuggle ASCII, control characters that move a
//! terminal's cursor. Every channel that shows a person what a call will do — the terminal
//! prompt, the MCP elicitation form, the approval console — marks each of them as a visible
//! token `<U+202E>` instead, so what the person approves is what they read.
//!
//! [`INVISIBLE`] is the one list. The console's page script keeps the same ranges
//! (`crates/toolgate-console/src/page/console.js`, `INVISIBLE`), and a test compares the two
//! and checks, with the JavaScript engine's Unicode data, that every format (`Cf`), control
//! (`Cc`, except tab and newline) and line or paragraph separator (`Zl`, `Zp`) is in it.
//!
//! ```
//! use toolgate_core::visible::mark_invisible;
//!
//! assert_eq!(mark_invisible("admin\u{202E} = false"), "admin<U+202E> = false");
//! assert_eq!(mark_invisible("plain\ttext\n"), "plain\ttext\n");
//! ```

use std::borrow::Cow;
use std::fmt::Write;

/// The code points marked, as sorted, disjoint, inclusive ranges.
///
/// Tab and newline stay as they are: they are visible as layout, and diffs and arguments are
/// made of lines. Carriage return is marked, since it can make a terminal overwrite the line
/// it ends. Besides the `Cf`, `Cc`, `Zl` and `Zp` characters this holds the variation
/// selectors (which can carry hidden bytes) and the fillers and inherent vowels that render
/// as blank although Unicode classes them as letters or marks.
pub const INVISIBLE: &[(u32, u32)] = &[
    (0x0000, 0x0008),   // C0 controls before tab
    (0x000B, 0x001F),   // C0 controls after newline, carriage return and escape among them
    (0x007F, 0x009F),   // delete and the C1 controls
    (0x00AD, 0x00AD),   // soft hyphen
    (0x034F, 0x034F),   // combining grapheme joiner
    (0x0600, 0x0605),   // Arabic number signs
    (0x061C, 0x061C),   // Arabic letter mark
    (0x06DD, 0x06DD),   // Arabic end of ayah
    (0x070F, 0x070F),   // Syriac abbreviation mark
    (0x0890, 0x0891),   // Arabic pound and piastre marks above
    (0x08E2, 0x08E2),   // Arabic disputed end of ayah
    (0x115F, 0x1160),   // Hangul fillers
    (0x17B4, 0x17B5),   // Khmer inherent vowels
    (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),   // zero-width space, non-joiner, joiner; left-to-right, right-to-left marks
    (0x2028, 0x202E),   // line and paragraph separators; bidirectional embeddings and overrides
    (0x2060, 0x206F),   // word joiner, invisible operators, bidirectional isolates, deprecated
    (0x3164, 0x3164),   // Hangul filler
    (0xFE00, 0xFE0F),   // variation selectors
    (0xFEFF, 0xFEFF),   // zero-width no-break space (byte order mark)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
    (0xFFF9, 0xFFFB),   // interlinear annotation
    (0x110BD, 0x110BD), // Kaithi number sign
    (0x110CD, 0x110CD), // Kaithi number sign above
    (0x13430, 0x1343F), // Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol format controls
    (0xE0000, 0xE007F), // tag characters
    (0xE0100, 0xE01EF), // variation selectors supplement
];

/// Whether `c` is one of the characters that [`mark_invisible`] marks.
pub fn is_invisible(c: char) -> bool {
    let code = u32::from(c);
    // The list is sorted: the candidate is the last range starting at or before `code`.
    let after = INVISIBLE.partition_point(|&(start, _)| start <= code);
    after
        .checked_sub(1)
        .and_then(|at| INVISIBLE.get(at))
        .is_some_and(|&(_, end)| code <= end)
}

/// `text` with every invisible character replaced by the visible token `<U+XXXX>` (at least
/// four uppercase hexadecimal digits). Borrowed when there is none.
///
/// A token is plain ASCII, so marking twice changes nothing more. Text that already reads
/// `<U+202E>` is left alone: it can only make a preview look more suspicious than it is,
/// never hide a character.
pub fn mark_invisible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut marked = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            // Writing to a `String` cannot fail.
            let _ = write!(marked, "<U+{:04X}>", u32::from(c));
        } else {
            marked.push(c);
        }
    }
    Cow::Owned(marked)
}

/// `text` with every invisible character written as a Rust-style escape, `\u{1b}`,
/// `\u{202e}`: the spelling for a terminal, where a control character is an instruction
/// (OSC 52 sets the clipboard, `ESC [ 8 m` hides text) and a mark like `<U+202E>` would read
/// as text a program wrote. Borrowed when there is none. Everything toolgate writes to a
/// terminal from a file, a model or an upstream goes through this (the `toolgate` binary's
/// `terminal` module, an upstream's standard error).
///
/// ```
/// use toolgate_core::visible::escape_invisible;
///
/// assert_eq!(escape_invisible("a\u{1b}]52;c;eA==\u{7}"), "a\\u{1b}]52;c;eA==\\u{7}");
/// assert_eq!(escape_invisible("tab\tand\n"), "tab\tand\n");
/// ```
pub fn escape_invisible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            // Writing to a `String` cannot fail.
            let _ = write!(shown, "\\u{{{:x}}}", u32::from(c));
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_are_sorted_and_disjoint() {
        for pair in INVISIBLE.windows(2) {
            let [(a_start, a_end), (b_start, b_end)] = pair else {
                unreachable!("windows of two");
            };
            assert!(a_start <= a_end && b_start <= b_end, "{pair:?}");
            assert!(a_end < b_start, "{pair:?}");
        }
    }

    #[test]
    fn each_kind_of_invisible_character_is_marked() {
        let table: &[(&str, &str, &str)] = &[
            ("right-to-left override", "a\u{202E}b", "a<U+202E>b"),
            ("left-to-right embedding", "\u{202A}x", "<U+202A>x"),
            ("pop directional formatting", "x\u{202C}", "x<U+202C>"),
            ("left-to-right isolate", "\u{2066}x", "<U+2066>x"),
            ("pop directional isolate", "x\u{2069}", "x<U+2069>"),
            ("right-to-left mark", "\u{200F}", "<U+200F>"),
            ("left-to-right mark", "\u{200E}", "<U+200E>"),
            ("Arabic letter mark", "\u{061C}", "<U+061C>"),
            ("zero-width space", "pass\u{200B}word", "pass<U+200B>word"),
            ("zero-width joiner", "\u{200D}", "<U+200D>"),
            ("word joiner", "\u{2060}", "<U+2060>"),
            ("invisible plus", "\u{2064}", "<U+2064>"),
            ("byte order mark", "\u{FEFF}x", "<U+FEFF>x"),
            ("soft hyphen", "ad\u{AD}min", "ad<U+00AD>min"),
            ("Mongolian vowel separator", "\u{180E}", "<U+180E>"),
            ("tag latin small a", "\u{E0061}", "<U+E0061>"),
            ("cancel tag", "\u{E007F}", "<U+E007F>"),
            (
                "variation selector 16",
                "\u{2764}\u{FE0F}",
                "\u{2764}<U+FE0F>",
            ),
            ("variation selector 17", "\u{E0100}", "<U+E0100>"),
            ("escape", "\u{1B}[2J", "<U+001B>[2J"),
            ("null", "\0", "<U+0000>"),
            ("carriage return", "ok\rno", "ok<U+000D>no"),
            ("delete", "\u{7F}", "<U+007F>"),
            ("C1 control", "\u{9B}", "<U+009B>"),
            ("line separator", "a\u{2028}b", "a<U+2028>b"),
            ("paragraph separator", "\u{2029}", "<U+2029>"),
            ("Hangul filler", "\u{3164}", "<U+3164>"),
            ("interlinear annotation", "\u{FFF9}", "<U+FFF9>"),
        ];
        for (name, text, marked) in table {
            assert_eq!(mark_invisible(text), *marked, "{name}");
            // A mark is plain text: marking again changes nothing.
            assert_eq!(mark_invisible(marked), *marked, "{name}");
        }
    }

    #[test]
    fn visible_text_is_borrowed_unchanged() {
        for text in [
            "",
            "plain\ttext\nwith lines\n",
            "caf\u{E9} \u{65E5}\u{672C} \u{1F600} \u{5D0}\u{5D1}",
            "a\u{A0}b\u{2003}c",
            "<U+202E> written by hand",
        ] {
            assert!(
                matches!(mark_invisible(text), Cow::Borrowed(t) if t == text),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_edges_of_each_range_are_marked_and_their_neighbours_are_not() {
        for &(start, end) in INVISIBLE {
            for code in [start, end] {
                let c = char::from_u32(code).unwrap();
                assert!(is_invisible(c), "U+{code:04X}");
            }
            for code in [start.checked_sub(1), end.checked_add(1)]
                .into_iter()
                .flatten()
            {
                let Some(c) = char::from_u32(code) else {
                    continue;
                };
                let inside = INVISIBLE.iter().any(|&(s, e)| s <= code && code <= e);
                assert_eq!(is_invisible(c), inside, "U+{code:04X}");
            }
        }
        assert!(!is_invisible('\t') && !is_invisible('\n') && !is_invisible(' '));
    }
}
