//! Newline-delimited input split as it arrives, each line capped at a size: a longer line is
//! read to its end and dropped, keeping only its first and last bytes (where a JSON-RPC id is
//! found), so memory stays bounded whatever the other side writes.
//!
//! [`LineSplitter`] does no I/O of its own, so a blocking reader ([`read_line`]), an async one
//! and a stream of HTTP body frames split lines alike.

use std::collections::VecDeque;
use std::io::BufRead;

/// How many bytes of an oversized line are kept at each end, to find its id.
const KEPT: usize = 256;

/// One line as read by [`read_line`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Full(Vec<u8>),
    Oversized {
        head: Vec<u8>,
        tail: Vec<u8>,
        length: usize,
    },
    End,
}

/// One newline-terminated line of at most `max` bytes (the newline not included). A longer one
/// is read to its end and dropped, keeping only its first and last bytes, so memory stays
/// bounded whatever the other side writes. A last line without a newline is a line.
pub fn read_line(reader: &mut impl BufRead, max: usize) -> std::io::Result<Line> {
    let mut lines = LineSplitter::new(max);
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(lines.end());
        }
        let (used, line) = lines.take(buffer);
        reader.consume(used);
        if let Some(line) = line {
            return Ok(line);
        }
    }
}

/// Splits bytes, as they arrive, into the lines [`read_line`] reads; it does no I/O of its
/// own, so a blocking reader and a stream of HTTP body frames split lines alike.
#[derive(Debug)]
pub struct LineSplitter {
    max: usize,
    line: Vec<u8>,
    /// For a line over `max`: its first bytes, its last bytes, and its length so far.
    oversized: Option<(Vec<u8>, VecDeque<u8>, usize)>,
}

impl LineSplitter {
    pub fn new(max: usize) -> Self {
        LineSplitter {
            max,
            line: Vec::new(),
            oversized: None,
        }
    }

    /// Takes bytes from `available` up to and including the first newline: how many it took,
    /// and the line they completed.
    pub fn take(&mut self, available: &[u8]) -> (usize, Option<Line>) {
        let (chunk, done) = match available.iter().position(|b| *b == b'\n') {
            Some(end) => (available.get(..end).unwrap_or_default(), Some(end + 1)),
            None => (available, None),
        };
        let used = done.unwrap_or(chunk.len());
        match &mut self.oversized {
            Some((_, tail, length)) => {
                *length += chunk.len();
                tail.extend(
                    chunk
                        .get(chunk.len().saturating_sub(KEPT)..)
                        .unwrap_or_default(),
                );
                while tail.len() > KEPT {
                    tail.pop_front();
                }
            }
            None if self.line.len() + chunk.len() > self.max => {
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(chunk);
                let head = line.iter().take(KEPT).copied().collect();
                let tail = line
                    .get(line.len().saturating_sub(KEPT)..)
                    .unwrap_or_default()
                    .iter()
                    .copied()
                    .collect();
                self.oversized = Some((head, tail, line.len()));
            }
            None => self.line.extend_from_slice(chunk),
        }
        (used, done.map(|_| self.complete()))
    }

    /// The end of the input: the line it cut short, if one was begun, else [`Line::End`].
    pub fn end(&mut self) -> Line {
        if self.oversized.is_none() && self.line.is_empty() {
            return Line::End;
        }
        self.complete()
    }

    fn complete(&mut self) -> Line {
        match self.oversized.take() {
            Some((head, tail, length)) => Line::Oversized {
                head,
                tail: tail.into(),
                length,
            },
            None => Line::Full(std::mem::take(&mut self.line)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::BufReader;

    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<String> {
        let mut reader = BufReader::with_capacity(7, input);
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader, max).unwrap() {
                Line::End => return out,
                Line::Full(line) => out.push(String::from_utf8(line).unwrap()),
                Line::Oversized { head, tail, length } => out.push(format!(
                    "oversized {length} {}..{}",
                    String::from_utf8_lossy(&head),
                    String::from_utf8_lossy(&tail)
                )),
            }
        }
    }

    #[test]
    fn lines_are_read_with_a_cap() {
        assert_eq!(lines(b"ab\ncd\n\nlast", 10), ["ab", "cd", "", "last"]);
        let long = format!("{{\"id\":7,{}}}\nnext\n", "x".repeat(600));
        let read = lines(long.as_bytes(), 100);
        assert_eq!(read.len(), 2);
        assert!(
            read[0].starts_with("oversized 609 {\"id\":7,xx"),
            "{}",
            read[0]
        );
        assert!(read[0].ends_with("xx}"), "{}", read[0]);
        assert_eq!(read[1], "next");
    }
}
