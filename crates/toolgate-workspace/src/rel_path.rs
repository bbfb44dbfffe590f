//! Lexical validation of a model-supplied path: [`RelPath::parse`].
//!
//! A model can spell "the parent directory" in many ways: `..`, `%2e%2e`, `%252e%252e`,
//! `..\`, fullwidth `．．／`, the one-dot leader `‥`, an overlong UTF-8 `%c0%ae`. Each of them
//! means `..` to *something* — a URL decoder, a Windows API, a Unicode-normalizing file
//! system, a careless tool further down the line — so each is refused here, not only the plain
//! one. We do not try to decide which decoding the caller "meant": we compute every decoding we
//! know of and refuse the path if *any* of them is absolute or climbs. The path that is
//! accepted is the raw text with its separators normalized; the decodings are only ever used to
//! refuse.

use std::fmt;

use unicode_normalization::UnicodeNormalization;

use crate::PathError;

/// Longest path accepted, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// How many rounds of decoding are applied. Three rounds of percent-decoding catch
/// `%25252e`, and every round also applies NFKC and the look-alike folding.
const DECODE_ROUNDS: usize = 4;

/// Bound on the number of distinct decodings examined, so a path full of `%` cannot make the
/// check expensive.
const MAX_VARIANTS: usize = 64;

/// A validated, workspace-relative path: `/`-separated, no empty, `.` or `..` components, not
/// absolute, free of control characters. The workspace root is `.`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// The workspace root itself.
    pub fn root() -> RelPath {
        RelPath(".".to_owned())
    }

    /// Validates `raw` lexically. `""` and `"."` are the root; callers that need a file
    /// refuse the root themselves.
    pub fn parse(raw: &str) -> Result<RelPath, PathError> {
        if raw.len() > MAX_PATH_BYTES {
            return Err(PathError::invalid(
                raw,
                format!("it is longer than {MAX_PATH_BYTES} bytes"),
            ));
        }
        if let Some(c) = raw.chars().find(|c| is_forbidden_char(*c)) {
            return Err(PathError::invalid(raw, forbidden_reason(c)));
        }
        // Every decoding is checked for escapes before any is checked for control characters,
        // so that `%2e%2e/%00` is reported as the escape it is.
        let variants = decodings(raw);
        for variant in &variants {
            if let Some(reason) = escape_reason(variant) {
                let reason = if variant == raw {
                    reason.to_owned()
                } else {
                    format!("{reason} once decoded as `{}`", crate::shown(variant))
                };
                return Err(PathError::outside(raw, reason));
            }
        }
        for variant in &variants {
            if let Some(c) = variant.chars().find(|c| is_forbidden_char(*c)) {
                return Err(PathError::invalid(
                    raw,
                    format!("{} once decoded", forbidden_reason(c)),
                ));
            }
        }
        let components: Vec<&str> = raw
            .split(['/', '\\'])
            .filter(|c| !c.is_empty() && *c != ".")
            .collect();
        if components.is_empty() {
            return Ok(RelPath::root());
        }
        let joined = components.join("/");
        if joined == raw {
            return Ok(RelPath(joined));
        }
        // Dropping `.` and empty components can bring a drive, a home, a scheme or an encoded
        // separator to the front (`./C:/x`, `./file:../x`, `.\.\%2fetc`): the path as
        // accepted must pass every check the path as sent did. The joined path joins to
        // itself, so this checks it once.
        RelPath::parse(&joined).map_err(|error| match error {
            PathError::Outside { reason, .. } => {
                PathError::outside(raw, format!("{reason}, once `.` components are removed"))
            }
            PathError::Invalid { reason, .. } => {
                PathError::invalid(raw, format!("{reason}, once `.` components are removed"))
            }
            other => other,
        })
    }

    /// Builds a path from components already known to be plain names (from the file system,
    /// not from a caller). Any component that is not a plain name makes the result `None`.
    pub fn from_components<'a>(components: impl IntoIterator<Item = &'a str>) -> Option<RelPath> {
        let mut text = String::new();
        for component in components {
            let plain = !component.is_empty()
                && component != "."
                && component != ".."
                && !component.contains(['/', '\\'])
                && !component.chars().any(is_forbidden_char);
            if !plain {
                return None;
            }
            if !text.is_empty() {
                text.push('/');
            }
            text.push_str(component);
        }
        if text.is_empty() {
            Some(RelPath::root())
        } else {
            Some(RelPath(text))
        }
    }

    /// The path as text, `.` for the root.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0 == "."
    }

    /// The components, none for the root.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/').filter(|c| *c != ".")
    }

    /// How many components deep the path is; the root is 0.
    pub fn depth(&self) -> usize {
        self.components().count()
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Control characters (C0, DEL, C1) and the invisible format characters that make a name
/// display as something it is not (bidirectional overrides, zero-width joiners, BOM).
fn is_forbidden_char(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}')
}

fn forbidden_reason(c: char) -> String {
    if c == '\0' {
        "it contains a NUL byte".to_owned()
    } else {
        format!("it contains the control character U+{:04X}", u32::from(c))
    }
}

/// Why `text`, read as a path, leaves the workspace, if it does.
fn escape_reason(text: &str) -> Option<&'static str> {
    const CLIMBS: &str = "it climbs out with `..`";
    if text.split(['/', '\\']).any(is_parent_component) {
        return Some(CLIMBS);
    }
    // `file:../x` is `../x` to a URL decoder, and `a:file:///x` may be peeled twice: what
    // follows each scheme-like prefix is checked as a path of its own. Each round starts
    // after the previous colon, so the whole check stays linear in the length of `text`.
    let mut rest = text;
    loop {
        let mut chars = rest.chars();
        let first = chars.next()?;
        let second = chars.next();
        if first == '/' || first == '\\' {
            return Some("it is absolute; paths are relative to the workspace root");
        }
        if first.is_ascii_alphabetic() && second == Some(':') {
            return Some("it names a Windows drive; paths are relative to the workspace root");
        }
        if first == '~' {
            return Some("it names a home directory; paths are relative to the workspace root");
        }
        let (scheme, after) = rest.split_once(':')?;
        if !is_scheme(scheme) {
            return None;
        }
        if after.starts_with(['/', '\\']) {
            return Some("it is a URL, not a workspace path");
        }
        if is_parent_component(after) {
            return Some(CLIMBS);
        }
        rest = after;
    }
}

/// A URL scheme as RFC 3986 spells it, two characters or more (one is a drive letter).
fn is_scheme(text: &str) -> bool {
    text.len() >= 2
        && text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// Whether the first component of `text` is `..`, or a spelling Windows reads as `..`
/// because it drops trailing dots and spaces (`...`, `.. `): a name made only of dots and
/// spaces is never worth the risk. Stops at the first other character.
fn is_parent_component(text: &str) -> bool {
    let mut dots = 0;
    for c in text.chars() {
        match c {
            '.' => dots += 1,
            ' ' => {}
            '/' | '\\' => break,
            _ => return false,
        }
    }
    dots >= 2
}

/// `raw` and every decoding of it reachable in [`DECODE_ROUNDS`] rounds of percent-decoding,
/// NFKC normalization and look-alike folding.
fn decodings(raw: &str) -> Vec<String> {
    let mut seen: Vec<String> = vec![raw.to_owned()];
    let mut frontier: Vec<String> = vec![raw.to_owned()];
    for _ in 0..DECODE_ROUNDS {
        let mut next = Vec::new();
        for text in &frontier {
            // Compatibility decomposition and the lookalike table leave ASCII as it is: only
            // percent-decoding can change an ASCII text.
            let unicode = !text.is_ascii();
            for decoded in [
                percent_decode(text),
                unicode.then(|| text.nfkc().collect::<String>()),
                unicode.then(|| fold_lookalikes(text)),
            ]
            .into_iter()
            .flatten()
            {
                if seen.len() >= MAX_VARIANTS {
                    return seen;
                }
                if !seen.contains(&decoded) {
                    seen.push(decoded.clone());
                    next.push(decoded);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        frontier = next;
    }
    seen
}

/// One round of percent-decoding, with IIS's `%uXXXX` too, and overlong UTF-8 decoded to the
/// character it spells (`%c0%ae` is `.`). `None` when there is nothing to decode.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return None;
    }
    let bytes = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        if byte == b'%' {
            if let Some(value) = hex_value(bytes.get(i + 1..i + 3)) {
                out.push(value);
                i += 3;
                continue;
            }
            if matches!(bytes.get(i + 1), Some(b'u' | b'U'))
                && let (Some(high), Some(low)) = (
                    hex_value(bytes.get(i + 2..i + 4)),
                    hex_value(bytes.get(i + 4..i + 6)),
                )
            {
                let c = char::from_u32(u32::from(high) << 8 | u32::from(low))
                    .unwrap_or(char::REPLACEMENT_CHARACTER);
                let mut buffer = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buffer).as_bytes());
                i += 6;
                continue;
            }
        }
        out.push(byte);
        i += 1;
    }
    Some(decode_lenient(&out))
}

fn hex_value(pair: Option<&[u8]>) -> Option<u8> {
    let text = std::str::from_utf8(pair?).ok()?;
    if text.len() != 2 {
        return None;
    }
    u8::from_str_radix(text, 16).ok()
}

/// UTF-8 decoding that, unlike `String::from_utf8_lossy`, decodes overlong sequences to the
/// character they spell instead of replacing them: a decoder somewhere might do the same.
fn decode_lenient(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&lead) = bytes.get(i) {
        let (length, initial) = match lead {
            0x00..=0x7F => (1, u32::from(lead)),
            0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
            0xE0..=0xEF => (3, u32::from(lead & 0x0F)),
            0xF0..=0xF7 => (4, u32::from(lead & 0x07)),
            _ => (0, 0),
        };
        let continuation = bytes.get(i + 1..i + length.max(1));
        let decoded = match continuation {
            Some(rest) if length > 0 && rest.iter().all(|b| b & 0xC0 == 0x80) => rest
                .iter()
                .try_fold(initial, |acc, b| {
                    acc.checked_shl(6).map(|a| a | u32::from(b & 0x3F))
                })
                .and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                i += length;
            }
            None => {
                out.push(char::REPLACEMENT_CHARACTER);
                i += 1;
            }
        }
    }
    out
}

/// Characters that look like `.`, `/` or `\` and that NFKC leaves alone (or that we fold
/// anyway, to be sure).
fn fold_lookalikes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            // ONE DOT LEADER, FULLWIDTH FULL STOP, SMALL FULL STOP, IDEOGRAPHIC and
            // HALFWIDTH IDEOGRAPHIC FULL STOP, DOT OPERATOR, MIDDLE DOT.
            '\u{2024}' | '\u{FF0E}' | '\u{FE52}' | '\u{3002}' | '\u{FF61}' | '\u{22C5}'
            | '\u{00B7}' => out.push('.'),
            // TWO DOT LEADER.
            '\u{2025}' => out.push_str(".."),
            // HORIZONTAL ELLIPSIS.
            '\u{2026}' => out.push_str("..."),
            // FULLWIDTH SOLIDUS, DIVISION SLASH, FRACTION SLASH, BIG SOLIDUS.
            '\u{FF0F}' | '\u{2215}' | '\u{2044}' | '\u{29F8}' => out.push('/'),
            // FULLWIDTH and SMALL REVERSE SOLIDUS, SET MINUS, REVERSE SOLIDUS OPERATOR,
            // BIG REVERSE SOLIDUS.
            '\u{FF3C}' | '\u{FE68}' | '\u{2216}' | '\u{29F5}' | '\u{29F9}' => out.push('\\'),
            // FULLWIDTH TILDE, SMALL TILDE, TILDE OPERATOR.
            '\u{FF5E}' | '\u{02DC}' | '\u{223C}' => out.push('~'),
            // FULLWIDTH COLON, RATIO.
            '\u{FF1A}' | '\u{2236}' => out.push(':'),
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `decodings` skips both for ASCII text, which is right only if both leave it as it is.
    #[test]
    fn compatibility_and_lookalike_folding_leave_ascii_alone() {
        let ascii: String = (0u8..=0x7f).map(char::from).collect();
        assert_eq!(ascii.nfkc().collect::<String>(), ascii);
        assert_eq!(fold_lookalikes(&ascii), ascii);
    }

    /// Expected outcome of [`RelPath::parse`] for one spelling.
    #[derive(Debug, PartialEq)]
    enum Expect {
        Ok(&'static str),
        Outside,
        Invalid,
    }

    fn check(raw: &str, expect: Expect) {
        match (RelPath::parse(raw), expect) {
            (Ok(path), Expect::Ok(want)) => {
                assert_eq!(path.as_str(), want, "path `{}`", raw.escape_debug());
            }
            (Err(PathError::Outside { .. }), Expect::Outside)
            | (Err(PathError::Invalid { .. }), Expect::Invalid) => {}
            (got, want) => panic!("path `{}`: got {got:?}, want {want:?}", raw.escape_debug()),
        }
    }

    #[test]
    fn plain_paths_are_normalized() {
        check("a.txt", Expect::Ok("a.txt"));
        check("./a//b/", Expect::Ok("a/b"));
        check("src/lib.rs", Expect::Ok("src/lib.rs"));
        check("a\\b", Expect::Ok("a/b"));
        check("", Expect::Ok("."));
        check(".", Expect::Ok("."));
        check("./", Expect::Ok("."));
        check(".hidden/x", Expect::Ok(".hidden/x"));
        check("100%.txt", Expect::Ok("100%.txt"));
        check("a%2fb", Expect::Ok("a%2fb"));
        check("notes: 2024.txt", Expect::Ok("notes: 2024.txt"));
        check("file:name", Expect::Ok("file:name"));
        check("dir/C:x", Expect::Ok("dir/C:x"));
        check("a..b", Expect::Ok("a..b"));
        check("..a", Expect::Ok("..a"));
        check("日本語/ファイル.txt", Expect::Ok("日本語/ファイル.txt"));
    }

    #[test]
    fn leading_dot_components_hide_nothing() {
        // Found by the `rel_path` fuzz target: the path as accepted must parse again.
        for raw in [
            "./Rwwswcles:diles:E:r",
            "./C:/x",
            ".\\C:x",
            "./~/x",
            "./file:../x",
            "././ftp:..",
            ".\\.\\%2fasi\\eswd",
            "./%2e%2e/x",
        ] {
            check(raw, Expect::Outside);
        }
        check("./dir/C:x", Expect::Ok("dir/C:x"));
    }

    #[test]
    fn hostile_spellings_are_refused() {
        let outside = [
            "..",
            "../x",
            "a/../b",
            "src/../../outside",
            "a/..",
            "/etc/passwd",
            "//etc/passwd",
            "\\etc\\passwd",
            "%2e%2e/x",
            "%2E%2E%2Fx",
            "..%2fx",
            "%2e%2e%2f",
            "%252e%252e%252f",
            "%25252e%25252e/x",
            "%2fetc%2fpasswd",
            "%c0%ae%c0%ae/x",
            "%e0%80%ae%e0%80%ae/x",
            "%u002e%u002e/x",
            "..\\x",
            "a\\..\\..\\x",
            "．．/x",
            "．．\\x",
            "..／x",
            "．．／x",
            "\u{2024}\u{2024}/x",
            "\u{2025}/x",
            "\u{FE52}\u{FE52}/x",
            "a/\u{2026}/x",
            "...",
            ".. /x",
            "C:\\Windows\\win.ini",
            "c:/windows",
            "C:",
            "Ｃ：/x",
            "\\\\server\\share\\x",
            "\\\\?\\C:\\x",
            "~/.ssh/id_rsa",
            "~root/x",
            "～/.ssh",
            "file:///etc/passwd",
            "file:/etc/passwd",
            "http://example.com/x",
            "file:../x",
            "file:%2e%2e/x",
            "%66ile:///etc/passwd",
            "／etc／passwd",
        ];
        for raw in outside {
            check(raw, Expect::Outside);
        }
        let invalid = [
            "a\0b",
            "a.txt\u{0}.png",
            "a\u{1b}[2J.txt",
            "a\nb",
            "a\u{7f}",
            "a\u{85}b",
            "a\u{202E}txt.exe",
            "a\u{200B}b",
            "a%00b",
            "a%0ab",
            "a%2500b",
        ];
        for raw in invalid {
            check(raw, Expect::Invalid);
        }
    }

    #[test]
    fn overlong_paths_are_invalid() {
        check(&"a".repeat(MAX_PATH_BYTES + 1), Expect::Invalid);
        let long = "a/".repeat(MAX_PATH_BYTES / 2);
        assert_eq!(
            RelPath::parse(&long).unwrap().as_str(),
            long.trim_end_matches('/')
        );
    }

    #[test]
    fn many_scheme_prefixes_stay_cheap() {
        check(
            &"ab:".repeat(MAX_PATH_BYTES / 3),
            Expect::Ok(leaked_scheme_path()),
        );
        check(
            &format!("{}../x", "ab:".repeat(MAX_PATH_BYTES / 4)),
            Expect::Outside,
        );
    }

    fn leaked_scheme_path() -> &'static str {
        String::leak("ab:".repeat(MAX_PATH_BYTES / 3))
    }

    #[test]
    fn many_percent_signs_stay_cheap() {
        let raw = "%25".repeat(MAX_PATH_BYTES / 3);
        let started = std::time::Instant::now();
        let _ = RelPath::parse(&raw);
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
    }

    #[test]
    fn from_components_refuses_non_names() {
        assert_eq!(
            RelPath::from_components(["a", "b"]).map(|p| p.as_str().to_owned()),
            Some("a/b".to_owned())
        );
        assert_eq!(RelPath::from_components([]), Some(RelPath::root()));
        assert_eq!(RelPath::from_components(["a", ".."]), None);
        assert_eq!(RelPath::from_components(["a/b"]), None);
        assert_eq!(RelPath::from_components(["a\0"]), None);
    }

    #[test]
    fn components_and_depth() {
        let path = RelPath::parse("a/b/c").unwrap();
        assert_eq!(path.components().collect::<Vec<_>>(), ["a", "b", "c"]);
        assert_eq!(path.depth(), 3);
        assert_eq!(RelPath::root().depth(), 0);
        assert!(RelPath::root().is_root());
        assert_eq!(RelPath::root().to_string(), ".");
    }
}
