//! Bounded capture of one output stream: the first bytes and the last bytes, with a count of
//! everything in between.
//!
//! The head shows how a command started (its banner, the first error), the tail how it ended
//! (the test summary, the final error); the middle of a long log is what a reader can most
//! easily do without. Memory stays at the cap however much the command writes.

use std::collections::VecDeque;

/// What was kept of one stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Capture {
    head: Vec<u8>,
    tail: Vec<u8>,
    total: u64,
}

impl Capture {
    /// The first bytes of the stream, up to half the cap.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The last bytes of the stream, up to half the cap; empty when the head holds everything.
    pub fn tail(&self) -> &[u8] {
        &self.tail
    }

    /// Every byte the stream carried, kept or not.
    pub fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Bytes dropped between head and tail.
    pub fn elided_bytes(&self) -> u64 {
        let kept = u64::try_from(self.head.len() + self.tail.len()).unwrap_or(u64::MAX);
        self.total.saturating_sub(kept)
    }

    /// Head and tail as text (invalid UTF-8 replaced), with a marker where bytes were dropped.
    pub fn text(&self) -> String {
        let elided = self.elided_bytes();
        if elided == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&self.tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[… {elided} bytes elided …]\n{}",
            String::from_utf8_lossy(&self.head),
            String::from_utf8_lossy(&self.tail)
        )
    }

    /// At most `max` bytes from the end of the stream as text, for a one-line summary. Never
    /// reaches across elided bytes.
    pub fn last_text(&self, max: usize) -> String {
        let mut kept = if self.elided_bytes() == 0 {
            self.head.clone()
        } else {
            Vec::new()
        };
        kept.extend_from_slice(&self.tail);
        let start = kept.len().saturating_sub(max);
        String::from_utf8_lossy(kept.get(start..).unwrap_or_default()).into_owned()
    }
}

/// A capture being filled.
#[derive(Debug)]
pub(crate) struct CaptureBuffer {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl CaptureBuffer {
    /// Keeps at most `cap` bytes: the first half and the last half.
    pub(crate) fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        CaptureBuffer {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.total = self
            .total
            .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at_checked(room).unwrap_or((bytes, &[]));
        self.head.extend_from_slice(to_head);
        if rest.is_empty() {
            return;
        }
        match rest.split_at_checked(rest.len().saturating_sub(self.tail_cap)) {
            // More than the whole tail: only its end survives.
            Some((_, last)) if last.len() < rest.len() => {
                self.tail.clear();
                self.tail.extend(last);
            }
            _ => {
                let overflow = (self.tail.len() + rest.len()).saturating_sub(self.tail_cap);
                self.tail.drain(..overflow.min(self.tail.len()));
                self.tail.extend(rest);
            }
        }
    }

    pub(crate) fn finish(self) -> Capture {
        Capture {
            head: self.head,
            tail: self.tail.into(),
            total: self.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(cap: usize, chunks: &[&[u8]]) -> Capture {
        let mut buffer = CaptureBuffer::new(cap);
        for chunk in chunks {
            buffer.push(chunk);
        }
        buffer.finish()
    }

    #[test]
    fn short_streams_are_kept_whole() {
        let c = capture(8, &[b"ab", b"cd"]);
        assert_eq!(
            (c.head(), c.tail(), c.total_bytes()),
            (&b"abcd"[..], &b""[..], 4)
        );
        assert_eq!(c.text(), "abcd");
        assert_eq!(c.elided_bytes(), 0);
        let c = capture(8, &[b"abcdefgh"]);
        assert_eq!((c.head(), c.tail()), (&b"abcd"[..], &b"efgh"[..]));
        assert_eq!(c.text(), "abcdefgh");
    }

    #[test]
    fn long_streams_keep_head_and_tail_whatever_the_chunking() {
        let data: Vec<u8> = (0..100u8).collect();
        for chunk in [1, 3, 4, 7, 50, 100] {
            let chunks: Vec<&[u8]> = data.chunks(chunk).collect();
            let c = capture(8, &chunks);
            assert_eq!(c.head(), &data[..4], "chunk {chunk}");
            assert_eq!(c.tail(), &data[96..], "chunk {chunk}");
            assert_eq!(
                (c.total_bytes(), c.elided_bytes()),
                (100, 92),
                "chunk {chunk}"
            );
        }
        let c = capture(4, &[b"0123456789"]);
        assert_eq!(c.text(), "01\n[… 6 bytes elided …]\n89");
        assert_eq!(c.last_text(3), "89");
        assert_eq!(capture(8, &[b"abc"]).last_text(2), "bc");
    }

    #[test]
    fn a_zero_cap_counts_only() {
        let c = capture(0, &[b"abc", b"def"]);
        assert_eq!(
            (c.head(), c.tail(), c.total_bytes()),
            (&b""[..], &b""[..], 6)
        );
        assert_eq!(c.text(), "\n[… 6 bytes elided …]\n");
    }

    #[test]
    fn invalid_utf8_is_replaced() {
        assert_eq!(capture(16, &[b"a\xffb"]).text(), "a\u{fffd}b");
    }
}
