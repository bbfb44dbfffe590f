//! How the answer to one POSTed request goes back: one JSON body when that is all there is to
//! say, an event stream when the call has more to tell on the way.
//!
//! rmcp answers every request of a session with an event stream: a priming event, whatever the
//! call reports while it runs (progress, log messages, an elicitation), then its result. Most
//! calls report nothing, and for them the stream costs a client several small writes to read,
//! a chunked body to decode and an event parser to run, where one JSON object would do; MCP lets
//! the server choose ("the server MUST either return `Content-Type: text/event-stream` … or
//! `Content-Type: application/json`"), and every client must accept both.
//!
//! So toolgate reads the stream's first events before it answers. If the first message is the
//! request's own result (or error), that message alone is the answer, as `application/json`
//! with a length, written at once. If anything else comes first — a notification, a request to
//! the client, or a keep-alive comment because the call is still running after the keep-alive
//! interval — toolgate answers with the event stream, the events already read first, and the
//! client hears everything in order, as before. A client that hangs up while toolgate waits
//! drops the wait, and so cancels the call, as closing the stream does.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use serde::Deserialize;
use serde::de::IgnoredAny;

use super::Body;

/// The longest event text read while deciding; an event stream longer than this before its
/// first message is answered as a stream.
const MAX_UNDECIDED_BYTES: usize = 16 << 20;

/// `response`, as one JSON body if its event stream's first message is the request's result,
/// else the same event stream.
pub(super) async fn settle(response: Response<Body>) -> Response<Body> {
    if response.status() != StatusCode::OK || !is_event_stream(&response) {
        return response;
    }
    let (mut parts, mut body) = response.into_parts();
    let mut events = Events::default();
    loop {
        let Some(frame) = body.frame().await else {
            // The stream ended without a message: give the client what there was.
            return Response::from_parts(parts, replayed(events.seen, body));
        };
        let Ok(frame) = frame;
        let Ok(data) = frame.into_data() else {
            // Trailers: nothing rmcp sends. Answer as a stream from here.
            return Response::from_parts(parts, replayed(events.seen, body));
        };
        match events.push(data) {
            Seen::Nothing => {}
            Seen::Result(message) => {
                parts
                    .headers
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                parts.headers.remove(http::header::CACHE_CONTROL);
                parts.headers.remove("x-accel-buffering");
                return Response::from_parts(parts, Full::new(Bytes::from(message)).boxed());
            }
            Seen::More => return Response::from_parts(parts, replayed(events.seen, body)),
        }
    }
}

fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// What the events read so far come to.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Nothing to decide on yet: more events are needed.
    Nothing,
    /// The first message is the request's result or error: its JSON text.
    Result(Vec<u8>),
    /// Something else came first: the answer is the event stream.
    More,
}

/// The event text read so far, and what of it is not yet a whole event.
#[derive(Debug, Default)]
struct Events {
    /// Every frame read, in order, to replay if the answer is a stream.
    seen: Vec<Bytes>,
    /// Bytes past the last whole event.
    partial: Vec<u8>,
    read: usize,
}

impl Events {
    fn push(&mut self, data: Bytes) -> Seen {
        self.read += data.len();
        self.partial.extend_from_slice(&data);
        self.seen.push(data);
        loop {
            let Some(end) = event_end(&self.partial) else {
                return if self.read > MAX_UNDECIDED_BYTES {
                    Seen::More
                } else {
                    Seen::Nothing
                };
            };
            let rest = self.partial.split_off(end);
            let event = std::mem::replace(&mut self.partial, rest);
            match classify(&event) {
                Event::Priming => {}
                Event::Comment => return Seen::More,
                Event::Message(message) if is_result(&message) => {
                    return Seen::Result(message);
                }
                Event::Message(_) => return Seen::More,
            }
        }
    }
}

/// Where the first whole event in `text` ends (past its blank line), if it is whole. A line
/// of nothing but carriage returns is blank.
fn event_end(text: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for newline in memchr::memchr_iter(b'\n', text) {
        let line = text.get(line_start..newline).unwrap_or_default();
        if line.iter().all(|&b| b == b'\r') {
            return Some(newline + 1);
        }
        line_start = newline + 1;
    }
    None
}

/// One whole event, as far as the choice of answer goes.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    /// An event with no data: rmcp's priming event, which only names a retry interval.
    Priming,
    /// Only comments: a keep-alive, which comes when the call has run for a while.
    Comment,
    /// An event with data: a JSON-RPC message.
    Message(Vec<u8>),
}

fn classify(event: &[u8]) -> Event {
    let mut line_start = 0;
    let ends = memchr::memchr_iter(b'\n', event).chain(std::iter::once(event.len()));
    event_of(ends.map(|end| {
        let line = event.get(line_start..end).unwrap_or_default();
        line_start = end + 1;
        line
    }))
}

/// The event its lines (without their `\n`) make.
fn event_of<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Event {
    let mut data: Option<Vec<u8>> = None;
    let mut fields = false;
    for line in lines {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.first() == Some(&b':') {
            continue;
        }
        fields = true;
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let (name, value) = line.split_at(colon);
                let value = value.get(1..).unwrap_or_default();
                (name, value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        if name == b"data" {
            let data = data.get_or_insert_with(Vec::new);
            if !data.is_empty() {
                data.push(b'\n');
            }
            data.extend_from_slice(value);
        }
    }
    match data {
        Some(data) if !data.iter().all(u8::is_ascii_whitespace) => Event::Message(data),
        _ if fields => Event::Priming,
        _ => Event::Comment,
    }
}

/// Whether a message is an answer (a result or an error) rather than a notification or a
/// request of the server's: answers have no method.
fn is_result(message: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Shape {
        method: Option<IgnoredAny>,
        result: Option<IgnoredAny>,
        error: Option<IgnoredAny>,
    }
    serde_json::from_slice::<Shape>(message)
        .is_ok_and(|m| m.method.is_none() && (m.result.is_some() || m.error.is_some()))
}

/// The event stream again: the frames already read, then the rest as it comes.
fn replayed(seen: Vec<Bytes>, rest: Body) -> Body {
    let seen = match seen.len() {
        0 => None,
        1 => seen.into_iter().next(),
        _ => Some(Bytes::from(seen.concat())),
    };
    Replayed { seen, rest }.boxed()
}

struct Replayed {
    seen: Option<Bytes>,
    rest: Body,
}

impl HttpBody for Replayed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if let Some(seen) = self.seen.take() {
            return Poll::Ready(Some(Ok(Frame::data(seen))));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        let mut hint = self.rest.size_hint();
        let seen = self.seen.as_ref().map_or(0, |s| s.len() as u64);
        hint.set_lower(hint.lower().saturating_add(seen));
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper.saturating_add(seen));
        }
        hint
    }
}

/// `body`, keeping `kept` alive until it is dropped: unlike a mapped body, it still tells
/// its length, so that a JSON answer goes out with `content-length` rather than chunked.
pub(super) fn keeping<T: Send + Sync + Unpin + 'static>(body: Body, kept: T) -> Body {
    Keeping { body, _kept: kept }.boxed()
}

struct Keeping<T> {
    body: Body,
    _kept: T,
}

impl<T: Unpin> HttpBody for Keeping<T> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push_all(events: &mut Events, pieces: &[&str]) -> Vec<Seen> {
        pieces
            .iter()
            .map(|p| events.push(Bytes::from(p.to_string())))
            .collect()
    }

    #[test]
    fn a_result_after_the_priming_event_is_the_answer() {
        let mut events = Events::default();
        let seen = push_all(
            &mut events,
            &[
                "id: 0\nretry: 3000\ndata: \n\n",
                "data: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\nid: 1\n\n",
            ],
        );
        assert_eq!(seen[0], Seen::Nothing);
        assert_eq!(
            seen[1],
            Seen::Result(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#.to_vec())
        );
    }

    #[test]
    fn notifications_requests_and_keep_alives_keep_the_stream() {
        for first in [
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"elicitation/create\",\"params\":{}}\n\n",
            ":\n\n",
        ] {
            let mut events = Events::default();
            assert_eq!(events.push(Bytes::from(first)), Seen::More, "{first}");
        }
    }

    #[test]
    fn an_event_split_over_frames_is_read_whole() {
        let mut events = Events::default();
        let seen = push_all(
            &mut events,
            &[
                "data: {\"jsonrpc\":\"2.0\",",
                "\"id\":1,\"error\":{}}\r\n",
                "\r\n",
            ],
        );
        assert_eq!(seen[..2], [Seen::Nothing, Seen::Nothing]);
        assert!(matches!(seen[2], Seen::Result(_)));
    }

    #[test]
    fn events_are_classified_by_their_fields() {
        assert_eq!(classify(b"id: 0\nretry: 3000\ndata: \n\n"), Event::Priming);
        assert_eq!(classify(b": ping\n\n"), Event::Comment);
        assert_eq!(
            classify(b"data: a\ndata:b\n\n"),
            Event::Message(b"a\nb".to_vec())
        );
    }

    /// The event's end and lines, found byte by byte: what the line scans must agree with.
    fn event_end_bytewise(text: &[u8]) -> Option<usize> {
        let mut line_start = true;
        for (at, &byte) in text.iter().enumerate() {
            match byte {
                b'\n' if line_start => return Some(at + 1),
                b'\n' => line_start = true,
                b'\r' => {}
                _ => line_start = false,
            }
        }
        None
    }

    fn classify_bytewise(event: &[u8]) -> Event {
        event_of(event.split(|&b| b == b'\n'))
    }

    /// Every text of up to seven pieces of line ends, colons and field names.
    #[test]
    fn line_scans_agree_with_a_byte_by_byte_reading() {
        let pieces: [&[u8]; 6] = [b"\n", b"\r", b":", b" ", b"data", b"x"];
        let mut texts: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..7 {
            let longer: Vec<Vec<u8>> = texts
                .iter()
                .filter(|t| t.len() < 7)
                .flat_map(|t| pieces.iter().map(move |p| [t.as_slice(), p].concat()))
                .collect();
            texts.extend(longer);
        }
        texts.sort();
        texts.dedup();
        assert!(texts.len() > 10_000, "{}", texts.len());
        for text in &texts {
            assert_eq!(event_end(text), event_end_bytewise(text), "{text:?}");
            assert_eq!(classify(text), classify_bytewise(text), "{text:?}");
        }
    }

    #[tokio::test]
    async fn a_stream_that_is_not_answered_at_once_is_replayed_whole() {
        let text = "id: 0\ndata: \n\ndata: {\"method\":\"notifications/message\"}\n\n";
        let response = Response::builder()
            .header(CONTENT_TYPE, "text/event-stream")
            .body(Full::new(Bytes::from(text)).boxed())
            .unwrap();
        let settled = settle(response).await;
        assert_eq!(
            settled.headers().get(CONTENT_TYPE).unwrap(),
            "text/event-stream"
        );
        let body = settled.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body, text.as_bytes());
    }
}
