//! What toolgate writes for a person to read, with control characters made visible.
//!
//! A file, a model or an upstream server can put bytes in front of a person's terminal
//! through toolgate: a call's output, a tool's description, a rejection quoting an argument,
//! an audit record's tool name. Some of those bytes are instructions to the terminal rather
//! than text: OSC 52 sets the clipboard, `ESC [ 8 m` hides what follows, the C1 control
//! U+009B starts a sequence without an ESC, U+202E reverses the text after it (issue 36).
//! Everything the `toolgate` command prints therefore goes through this module:
//!
//! - text through [`visible`] (the [`outln!`]-family macros call it), which writes each
//!   character of core's [`toolgate_core::visible::INVISIBLE`] list (C0 controls but tab and
//!   newline, DEL, the C1 controls, bidirectional and zero-width format characters, …) as a
//!   Rust-style escape, `\u{1b}`, `\u{202e}`;
//! - JSON through [`json`] and [`JsonWriter`], which write the same characters as JSON
//!   escapes (`\u001b`, `\u202e`, a surrogate pair above U+FFFF), so a program reading the
//!   JSON gets exactly the values it would have, and a terminal sees only ASCII where they
//!   were.
//!
//! Text already marked by [`toolgate_core::visible::mark_invisible`] (`<U+202E>`) is plain
//! ASCII and passes unchanged.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;

use toolgate_core::visible::{escape_invisible, is_invisible};

/// `text` with every invisible or control character (but tab and newline) written as
/// `\u{hex}`, by core's [`escape_invisible`]. Borrowed when there is none.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_invisible(text)
}

/// `value` as pretty JSON, with every invisible or control character escaped.
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string_pretty(value).map(|text| json_escaped(&text).into_owned())
}

/// As [`json`], on one line.
pub fn json_line<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(value).map(|text| json_escaped(&text).into_owned())
}

/// JSON text with each invisible character written as a JSON escape. serde_json writes the C0
/// controls escaped already, and only inside strings can any of these characters appear, so
/// the JSON means what it meant.
fn json_escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_invisible) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_invisible(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(escaped, "\\u{unit:04x}");
            }
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// A writer of JSON text (as serde_json writes it, in pieces) that escapes as [`json`] does.
/// A character split between two writes is held until its last byte comes; a byte that is
/// not UTF-8, which serde_json never writes, is written as `\ufffd`, never raw.
#[derive(Debug)]
pub struct JsonWriter<W: Write> {
    inner: W,
    /// The first bytes of a character whose rest is still to come (at most three).
    pending: Vec<u8>,
}

impl<W: Write> JsonWriter<W> {
    pub fn new(inner: W) -> JsonWriter<W> {
        JsonWriter {
            inner,
            pending: Vec::new(),
        }
    }

    /// Writes what is still held (a character cut short for good) and flushes.
    pub fn finish(mut self) -> std::io::Result<W> {
        if !self.pending.is_empty() {
            self.pending.clear();
            self.inner.write_all(b"\\ufffd")?;
        }
        self.inner.flush()?;
        Ok(self.inner)
    }
}

impl<W: Write> Write for JsonWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let mut rest: &[u8] = &std::mem::take(&mut self.pending);
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    self.inner.write_all(json_escaped(text).as_bytes())?;
                    break;
                }
                Err(e) => {
                    let (good, after) = rest.split_at(e.valid_up_to());
                    // `good` is UTF-8 up to `valid_up_to`, by the error's own account.
                    let text = std::str::from_utf8(good).unwrap_or_default();
                    self.inner.write_all(json_escaped(text).as_bytes())?;
                    match e.error_len() {
                        // A character begun at the end: keep it for the next write.
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                        Some(bad) => {
                            self.inner.write_all(b"\\ufffd")?;
                            rest = after.get(bad..).unwrap_or_default();
                        }
                    }
                }
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// `items` joined with `, ` for a person to read, or `none` when there are none.
pub fn listed_or<S: std::borrow::Borrow<str>>(items: &[S], none: &str) -> String {
    if items.is_empty() {
        none.to_owned()
    } else {
        items.join(", ")
    }
}

/// Writes `text`, made [`visible`], to standard output, with a newline when `line`. A
/// standard output that is gone (a closed pipe) is not an error worth dying of here.
pub fn write_out(text: &str, line: bool) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(visible(text).as_bytes());
    if line {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
}

/// As [`write_out`], to standard error.
pub fn write_err(text: &str, line: bool) {
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(visible(text).as_bytes());
    if line {
        let _ = stderr.write_all(b"\n");
    }
}

/// `println!`, made [`visible`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::terminal::write_out(&format!($($arg)*), true)
    };
}

/// `print!`, made [`visible`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::terminal::write_out(&format!($($arg)*), false)
    };
}

/// `eprintln!`, made [`visible`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::terminal::write_err(&format!($($arg)*), true)
    };
}

pub(crate) use {errln, out, outln};

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row: what a file or model wrote, and what a person's terminal is given.
    #[test]
    fn controls_and_invisible_characters_are_written_as_escapes() {
        #[rustfmt::skip]
        let table: &[(&str, &str, &str)] = &[
            ("plain text, tab and newline", "a\tb\nc", "a\tb\nc"),
            ("OSC 52 sets the clipboard", "\u{1b}]52;c;ZWNobyBoaQ==\u{7}", "\\u{1b}]52;c;ZWNobyBoaQ==\\u{7}"),
            ("CSI hides text", "\u{1b}[8mhidden\u{1b}[0m", "\\u{1b}[8mhidden\\u{1b}[0m"),
            ("C1 CSI without ESC", "\u{9b}2J", "\\u{9b}2J"),
            ("C1 OSC", "\u{9d}0;title\u{9c}", "\\u{9d}0;title\\u{9c}"),
            ("carriage return overwrites a line", "safe\rrm -rf", "safe\\u{d}rm -rf"),
            ("backspace", "ab\u{8}", "ab\\u{8}"),
            ("delete", "a\u{7f}", "a\\u{7f}"),
            ("right-to-left override", "x\u{202e}y", "x\\u{202e}y"),
            ("bidi isolates", "\u{2066}a\u{2069}", "\\u{2066}a\\u{2069}"),
            ("zero-width space and marks", "\u{200b}\u{200f}", "\\u{200b}\\u{200f}"),
            ("byte order mark", "\u{feff}x", "\\u{feff}x"),
            ("tag characters", "\u{e0041}", "\\u{e0041}"),
            ("marks stay as they are", "a<U+202E>b", "a<U+202E>b"),
            ("other text is kept", "héllo → 世界 🙂", "héllo → 世界 🙂"),
        ];
        for (name, raw, shown) in table {
            assert_eq!(visible(raw), *shown, "{name}");
            assert!(!visible(raw).chars().any(is_invisible), "{name}");
        }
    }

    #[test]
    fn json_keeps_its_values_and_shows_no_control_character() {
        let value = serde_json::json!({
            "text": "\u{1b}]52;c;eA==\u{7}\u{9b}8m\u{202e}\u{2066}\u{200b}\u{feff}\u{e0041}ok\n",
        });
        let text = json(&value).unwrap();
        assert!(!text.chars().any(is_invisible), "{text}");
        assert!(text.contains("\\u009b"), "{text}");
        assert!(text.contains("\\u202e"), "{text}");
        assert!(text.contains("\\udb40\\udc41"), "a surrogate pair: {text}");
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn the_json_writer_escapes_characters_split_between_writes() {
        let line = serde_json::to_vec(&serde_json::json!({"t": "a\u{9b}b\u{202e}c"})).unwrap();
        // Every split point, within characters too.
        for cut in 0..line.len() {
            let mut writer = JsonWriter::new(Vec::new());
            writer.write_all(&line[..cut]).unwrap();
            writer.write_all(&line[cut..]).unwrap();
            let written = String::from_utf8(writer.finish().unwrap()).unwrap();
            assert_eq!(written, r#"{"t":"a\u009bb\u202ec"}"#, "cut at {cut}");
        }
        let mut writer = JsonWriter::new(Vec::new());
        writer.write_all(b"\"\x9b\"").unwrap();
        writer.write_all(b"\"\xe2\x80").unwrap();
        let written = String::from_utf8(writer.finish().unwrap()).unwrap();
        assert_eq!(written, r#""\ufffd""\ufffd"#, "no raw byte");
    }
}
