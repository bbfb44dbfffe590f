//! An upstream reached over MCP's streamable HTTP, with a small blocking HTTP/1.1 client.
//!
//! Each JSON-RPC message is one `POST` on its own TCP connection; the answer is either one JSON
//! body or a server-sent-event stream whose events are read until the response with the
//! request's id arrives. Like the stdio client, everything read is capped (status line,
//! headers, chunk sizes, each event, each body), a response with an id nobody asked for is a
//! protocol fault, and a fault that leaves the session in doubt marks the connection dead so
//! the supervisor starts a new session. An `https://` upstream is spoken to over TLS (rustls),
//! its certificate checked against the built-in web roots and the configuration's `ca_file`;
//! the handshake completes before the request is written, within the call's deadline.
//! Server-initiated messages arrive only inside responses (no standing `GET` stream); the
//! periodic refresh covers a `list_changed` sent outside one. A call's progress and log
//! notifications arrive in its own response stream, so they are plainly its own (see
//! [`crate::relay`]).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use toolgate_core::Notice;

use crate::config::UpstreamSpec;
use crate::connection::{
    Event, Events, Fault, Line, Rpc, find_id, lock, preview, protocol, read_line,
};
use crate::relay::{Heard, Relay, heard, with_progress_token};

/// The longest status line, header line or chunk-size line read.
const MAX_HEADER_LINE: usize = 8 << 10;
const MAX_HEADERS: usize = 100;
/// How often a blocked read looks at its deadline and stop flag.
const POLL: Duration = Duration::from_millis(20);

/// Whether a value the upstream chose may go into a later request's header: visible ASCII
/// only, so that no value can end a header line and start another.
fn header_safe(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The error a [`Patient`] read returns when its caller gave up. It is not
/// `ErrorKind::Interrupted`, which `read_to_end` and friends retry forever.
#[derive(Debug, thiserror::Error)]
#[error("the call was cancelled")]
struct Stopped;

/// The rest of an `https://` (`true`) or `http://` (`false`) URL.
pub(crate) fn scheme_of(url: &str) -> Option<(bool, &str)> {
    match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => Some((true, rest)),
        (None, Some(rest)) => Some((false, rest)),
        (None, None) => None,
    }
}

/// The PEM certificates of `file`: at least one, every one readable.
pub(crate) fn certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .and_then(Iterator::collect)
        .map_err(|e| format!("cannot read certificates from `{}`: {e}", file.display()))?;
    if certificates.is_empty() {
        return Err(format!("`{}` holds no certificate", file.display()));
    }
    Ok(certificates)
}

/// What a connection to an `https://` upstream is checked against.
#[derive(Debug)]
struct Tls {
    config: Arc<rustls::ClientConfig>,
    server: ServerName<'static>,
}

impl Tls {
    /// The built-in web roots, and the certificates of `ca_file` when there is one.
    fn new(host: &str, ca_file: Option<&Path>) -> Result<Tls, String> {
        let mut roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(file) = ca_file {
            for certificate in certificates(file)? {
                roots.add(certificate).map_err(|e| {
                    format!("a certificate in `{}` is not usable: {e}", file.display())
                })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot set up TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server = ServerName::try_from(host.to_owned())
            .map_err(|e| format!("`{host}` cannot name a TLS server: {e}"))?;
        Ok(Tls {
            config: Arc::new(config),
            server,
        })
    }

    /// A TLS session over `tcp`, its handshake complete and the certificate checked. The
    /// handshake is driven here, one short read at a time (`tcp` reads with a [`POLL`]
    /// timeout), so that it ends by `deadline` or when `stop` says so, however slowly the
    /// server answers.
    fn connect(
        &self,
        mut tcp: TcpStream,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
        peer: &str,
    ) -> Result<Stream, Fault> {
        let failed = |what: &dyn std::fmt::Display| {
            Fault::Unavailable(format!("{peer}: TLS handshake failed: {what}"))
        };
        let mut session =
            rustls::ClientConnection::new(Arc::clone(&self.config), self.server.clone())
                .map_err(|e| failed(&e))?;
        while session.is_handshaking() {
            if stop() {
                return Err(Fault::Cancelled);
            }
            if Instant::now() >= deadline {
                return Err(Fault::Timeout(format!(
                    "{peer}: the TLS handshake did not finish in time"
                )));
            }
            if session.wants_write() {
                session.write_tls(&mut tcp).map_err(|e| failed(&e))?;
                continue;
            }
            match session.read_tls(&mut tcp) {
                Ok(0) => return Err(failed(&"the server closed the connection")),
                Ok(_) => {
                    session.process_new_packets().map_err(|e| failed(&e))?;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(e) => return Err(failed(&e)),
            }
        }
        Ok(Stream::Tls(Box::new(rustls::StreamOwned::new(
            session, tcp,
        ))))
    }
}

/// A connection to the upstream, in the clear or over TLS.
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(tcp) => tcp.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(tcp) => tcp.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// An MCP session with an HTTP upstream.
#[derive(Debug)]
pub struct HttpConnection {
    upstream: String,
    addr: SocketAddr,
    /// Set for an `https://` upstream.
    tls: Option<Tls>,
    authority: String,
    path: String,
    headers: Vec<(String, String)>,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    max: usize,
    next_id: AtomicU64,
    dead: AtomicBool,
    events: Events,
}

impl HttpConnection {
    /// Resolves `url`; nothing is sent until [`Rpc::initialize`].
    pub fn open(spec: &UpstreamSpec, url: &str, events: Events) -> Result<Arc<dyn Rpc>, Fault> {
        let unavailable =
            |what: String| Fault::Unavailable(format!("upstream `{}`: {what}", spec.name));
        let (secure, rest) = scheme_of(url)
            .ok_or_else(|| unavailable(format!("`{url}` is not an http:// or https:// URL")))?;
        let (authority, path) = match rest.find('/') {
            Some(at) => (
                rest.get(..at).unwrap_or(rest),
                rest.get(at..).unwrap_or("/"),
            ),
            None => (rest, "/"),
        };
        // A port follows the last colon outside an IPv6 address's brackets.
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !port.contains(']') => (host, Some(port)),
            _ => (authority, None),
        };
        let with_port = match port {
            Some(_) => authority.to_owned(),
            None => format!("{authority}:{}", if secure { 443 } else { 80 }),
        };
        let tls = if secure {
            Some(Tls::new(host, spec.ca_file.as_deref()).map_err(&unavailable)?)
        } else {
            None
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| unavailable(format!("cannot resolve `{authority}`: {e}")))?
            .next()
            .ok_or_else(|| unavailable(format!("`{authority}` has no address")))?;
        let connection: Arc<dyn Rpc> = Arc::new(HttpConnection {
            upstream: spec.name.clone(),
            addr,
            tls,
            authority: authority.to_owned(),
            path: path.to_owned(),
            headers: spec.headers.clone(),
            session: Mutex::new(None),
            protocol_version: Mutex::new(None),
            max: spec.max_message_bytes,
            next_id: AtomicU64::new(1),
            dead: AtomicBool::new(false),
            events,
        });
        Ok(connection)
    }

    /// Marks the session dead and tells the supervisor, once.
    fn fail(&self, fault: Fault) -> Fault {
        if !self.dead.swap(true, Ordering::SeqCst) {
            self.events.send(Event::Died(fault.message().to_owned()));
        }
        fault
    }

    /// POSTs `message`; for a request, waits for the response with `id`, passing what the
    /// upstream reports about it on the way to `relay`.
    fn post(
        &self,
        message: &Value,
        id: Option<u64>,
        deadline: Instant,
        stop: &dyn Fn() -> bool,
        relay: Option<&Relay<'_>>,
    ) -> Result<Option<Value>, Fault> {
        let unavailable =
            |what: String| Fault::Unavailable(format!("upstream `{}`: {what}", self.upstream));
        let body = serde_json::to_vec(message)
            .map_err(|e| protocol(&self.upstream, &format!("cannot encode a request: {e}")))?;
        let connect_within = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let tcp = TcpStream::connect_timeout(&self.addr, connect_within)
            .map_err(|e| unavailable(format!("cannot connect to `{}`: {e}", self.authority)))?;
        let _ = tcp.set_nodelay(true);
        // Reads wait in short slices (see `Patient`), and an upstream that stops reading must
        // not hold a write past the call's deadline.
        tcp.set_read_timeout(Some(POLL))
            .and_then(|()| {
                tcp.set_write_timeout(Some(
                    deadline
                        .saturating_duration_since(Instant::now())
                        .max(Duration::from_millis(1)),
                ))
            })
            .map_err(|e| unavailable(e.to_string()))?;
        let mut stream = match &self.tls {
            Some(tls) => tls.connect(
                tcp,
                deadline,
                stop,
                &format!("upstream `{}`: `{}`", self.upstream, self.authority),
            )?,
            None => Stream::Plain(tcp),
        };
        let mut head = format!(
            "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.path,
            self.authority,
            body.len()
        );
        if let Some(session) = lock(&self.session).as_ref() {
            head.push_str(&format!("Mcp-Session-Id: {session}\r\n"));
        }
        if let Some(version) = lock(&self.protocol_version).as_ref() {
            head.push_str(&format!("MCP-Protocol-Version: {version}\r\n"));
        }
        for (name, value) in &self.headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(&body))
            .and_then(|()| stream.flush())
            .map_err(|e| unavailable(format!("cannot send to `{}`: {e}", self.authority)))?;
        let mut reader = BufReader::new(Patient {
            inner: stream,
            deadline,
            stop,
        });
        let (status, headers) = self.read_head(&mut reader)?;
        let header = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        };
        if let Some(session) = header("mcp-session-id") {
            if !header_safe(session) {
                return Err(self.fail(protocol(
                    &self.upstream,
                    &format!(
                        "an `Mcp-Session-Id` that is not visible ASCII: `{}`",
                        preview(session.as_bytes())
                    ),
                )));
            }
            *lock(&self.session) = Some(session.to_owned());
        }
        if status == 404 && lock(&self.session).is_some() {
            return Err(self.fail(unavailable(
                "the upstream ended the session (HTTP 404)".into(),
            )));
        }
        if !(200..300).contains(&status) {
            return Err(unavailable(format!("HTTP status {status}")));
        }
        let Some(id) = id else {
            return Ok(None);
        };
        let chunked =
            header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let length = header("content-length").and_then(|v| v.trim().parse::<usize>().ok());
        let body: Box<dyn BufRead + '_> = if chunked {
            Box::new(BufReader::new(Chunked {
                inner: reader,
                left: 0,
                done: false,
            }))
        } else if let Some(length) = length {
            Box::new(reader.take(u64::try_from(length).unwrap_or(u64::MAX)))
        } else {
            Box::new(reader)
        };
        let event_stream =
            header("content-type").is_some_and(|v| v.starts_with("text/event-stream"));
        if event_stream {
            self.read_events(body, id, relay)
        } else {
            self.read_json(body, id)
        }
        .map(Some)
    }

    fn read_head(&self, reader: &mut impl BufRead) -> Result<(u16, Vec<(String, String)>), Fault> {
        let status_line = self.header_line(reader)?;
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| {
                self.fail(protocol(
                    &self.upstream,
                    &format!(
                        "not an HTTP status line: `{}`",
                        preview(status_line.as_bytes())
                    ),
                ))
            })?;
        let mut headers = Vec::new();
        loop {
            let line = self.header_line(reader)?;
            if line.is_empty() {
                return Ok((status, headers));
            }
            if headers.len() >= MAX_HEADERS {
                return Err(self.fail(protocol(&self.upstream, "too many HTTP headers")));
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.push((name.trim().to_owned(), value.trim().to_owned()));
            }
        }
    }

    fn header_line(&self, reader: &mut impl BufRead) -> Result<String, Fault> {
        match read_line(reader, MAX_HEADER_LINE).map_err(|e| self.io_fault(&e))? {
            Line::Full(line) => Ok(String::from_utf8_lossy(&line)
                .trim_end_matches('\r')
                .to_owned()),
            Line::Oversized { .. } => {
                Err(self.fail(protocol(&self.upstream, "an HTTP header line is too long")))
            }
            Line::End => Err(self.fail(Fault::Unavailable(format!(
                "upstream `{}` closed the connection without an answer",
                self.upstream
            )))),
        }
    }

    fn io_fault(&self, error: &std::io::Error) -> Fault {
        match error.kind() {
            std::io::ErrorKind::TimedOut => Fault::Timeout(format!(
                "upstream `{}` did not answer in time",
                self.upstream
            )),
            _ if error.get_ref().is_some_and(|e| e.is::<Stopped>()) => Fault::Cancelled,
            // Broken chunked framing: the stream cannot be trusted any more.
            std::io::ErrorKind::InvalidData => self.fail(protocol(
                &self.upstream,
                &format!("a malformed HTTP body: {error}"),
            )),
            _ => Fault::Unavailable(format!("upstream `{}`: {error}", self.upstream)),
        }
    }

    fn read_json(&self, mut body: impl BufRead, id: u64) -> Result<Value, Fault> {
        let mut bytes = Vec::new();
        let cap = u64::try_from(self.max)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        (&mut body)
            .take(cap)
            .read_to_end(&mut bytes)
            .map_err(|e| self.io_fault(&e))?;
        if bytes.len() > self.max {
            return Err(Fault::TooLarge(format!(
                "upstream `{}` answered with more than {} bytes",
                self.upstream, self.max
            )));
        }
        let message: Value = serde_json::from_slice(&bytes).map_err(|_| {
            self.fail(protocol(
                &self.upstream,
                &format!("an answer that is not JSON: `{}`", preview(&bytes)),
            ))
        })?;
        self.response(message, id)?
            .ok_or_else(|| self.fail(protocol(&self.upstream, "the answer holds no response")))
    }

    /// Reads events until the response with `id`.
    fn read_events(
        &self,
        mut body: impl BufRead,
        id: u64,
        relay: Option<&Relay<'_>>,
    ) -> Result<Value, Fault> {
        let mut data = Vec::new();
        loop {
            match read_line(&mut body, self.max).map_err(|e| self.io_fault(&e))? {
                Line::End => {
                    return Err(self.fail(Fault::Unavailable(format!(
                        "upstream `{}` ended its event stream before answering",
                        self.upstream
                    ))));
                }
                Line::Oversized { head, tail, length } => {
                    let ours = [head.as_slice(), tail.as_slice()]
                        .into_iter()
                        .filter_map(find_id)
                        .any(|found| found == id);
                    let message = format!(
                        "upstream `{}` sent an event of {length} bytes; toolgate reads at most {}",
                        self.upstream, self.max
                    );
                    return Err(if ours {
                        Fault::TooLarge(message)
                    } else {
                        self.fail(Fault::TooLarge(message))
                    });
                }
                Line::Full(line) => {
                    let line = line.strip_suffix(b"\r").unwrap_or(&line);
                    if let Some(value) = line.strip_prefix(b"data:") {
                        if data.len() + value.len() > self.max {
                            return Err(Fault::TooLarge(format!(
                                "upstream `{}` sent an event over {} bytes",
                                self.upstream, self.max
                            )));
                        }
                        if !data.is_empty() {
                            data.push(b'\n');
                        }
                        data.extend_from_slice(value.strip_prefix(b" ").unwrap_or(value));
                    } else if line.is_empty() && !data.is_empty() {
                        let message: Value = serde_json::from_slice(&data).map_err(|_| {
                            self.fail(protocol(
                                &self.upstream,
                                &format!("an event that is not JSON: `{}`", preview(&data)),
                            ))
                        })?;
                        let bytes = data.len();
                        data.clear();
                        if let Some(notice) = self.notice_in(&message, id, bytes)
                            && let Some(relay) = relay
                        {
                            relay.pass(notice);
                        }
                        if let Some(result) = self.response(message, id)? {
                            return Ok(result);
                        }
                    }
                }
            }
        }
    }

    /// `Some` for the response to `id`; `None` for a notification or a request from the
    /// upstream; a fault for anything else.
    fn response(&self, message: Value, id: u64) -> Result<Option<Value>, Fault> {
        let Some(object) = message.as_object() else {
            return Err(self.fail(protocol(&self.upstream, "a message that is not an object")));
        };
        if object.get("method").and_then(Value::as_str) == Some("notifications/tools/list_changed")
        {
            self.events.list_changed();
        }
        if object.contains_key("method") {
            return Ok(None);
        }
        let answered = object.get("id").and_then(Value::as_u64);
        if answered != Some(id) {
            let shown = object
                .get("id")
                .map_or_else(|| "none".to_owned(), Value::to_string);
            return Err(self.fail(protocol(
                &self.upstream,
                &format!("it answered id `{shown}` to request `{id}`"),
            )));
        }
        if let Some(result) = object.get("result") {
            return Ok(Some(result.clone()));
        }
        match object.get("error") {
            Some(error) if error.is_object() => Ok(Some(json!({"error": error}))),
            _ => Err(self.fail(protocol(
                &self.upstream,
                "a response with neither `result` nor an `error` object",
            ))),
        }
    }
}

impl HttpConnection {
    /// The notice a notification in the response stream of request `id` carries for it: its
    /// log lines, and progress for its own token only.
    fn notice_in(&self, message: &Value, id: u64, bytes: usize) -> Option<Notice> {
        if message.get("id").is_some() {
            return None;
        }
        let method = message.get("method").and_then(Value::as_str)?;
        match heard(method, message.get("params"), bytes)? {
            Heard::Progress { token, notice } if token == Some(id) => Some(notice),
            Heard::Progress { .. } => None,
            Heard::Log(notice) => Some(notice),
        }
    }
}

impl Rpc for HttpConnection {
    fn upstream(&self) -> &str {
        &self.upstream
    }

    fn request_reporting(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        stop: &dyn Fn() -> bool,
        listener: Option<&dyn Fn(Notice)>,
    ) -> Result<Value, Fault> {
        if self.is_dead() {
            return Err(Fault::Unavailable(format!(
                "upstream `{}` is not connected",
                self.upstream
            )));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let relay = listener.map(Relay::new);
        let params = match relay {
            Some(_) => with_progress_token(params, id),
            None => params,
        };
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let deadline = Instant::now() + timeout;
        let result = self.post(&message, Some(id), deadline, stop, relay.as_ref());
        if method == "initialize"
            && let Ok(Some(result)) = &result
            && let Some(version) = result.get("protocolVersion").and_then(Value::as_str)
        {
            if !header_safe(version) {
                return Err(self.fail(protocol(
                    &self.upstream,
                    &format!(
                        "a `protocolVersion` that is not visible ASCII: `{}`",
                        preview(version.as_bytes())
                    ),
                )));
            }
            *lock(&self.protocol_version) = Some(version.to_owned());
        }
        match result {
            Ok(Some(result)) => Ok(result),
            Ok(None) => Err(protocol(&self.upstream, "no response")),
            Err(fault @ (Fault::Timeout(_) | Fault::Cancelled)) => {
                let reason = if matches!(fault, Fault::Cancelled) {
                    "cancelled by the client"
                } else {
                    "timeout"
                };
                let _ = self.notify(
                    "notifications/cancelled",
                    json!({"requestId": id, "reason": reason}),
                );
                Err(match fault {
                    Fault::Timeout(_) => Fault::Timeout(format!(
                        "upstream `{}` did not answer `{method}` within {} ms",
                        self.upstream,
                        timeout.as_millis()
                    )),
                    other => other,
                })
            }
            Err(fault) => Err(fault),
        }
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), Fault> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.post(
            &message,
            None,
            Instant::now() + Duration::from_secs(5),
            &|| false,
            None,
        )
        .map(|_| ())
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }
}

/// A socket read that waits, in short slices, until its deadline or until `stop` says so.
struct Patient<'a> {
    inner: Stream,
    deadline: Instant,
    stop: &'a dyn Fn() -> bool,
}

impl Read for Patient<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.inner.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    if (self.stop)() {
                        return Err(std::io::Error::other(Stopped));
                    }
                    if Instant::now() >= self.deadline {
                        return Err(std::io::ErrorKind::TimedOut.into());
                    }
                }
                other => return other,
            }
        }
    }
}

/// `Transfer-Encoding: chunked`, decoded with every size line capped.
struct Chunked<R> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let invalid =
            |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned());
        if self.done {
            return Ok(0);
        }
        if self.left == 0 {
            let size = match read_line(&mut self.inner, MAX_HEADER_LINE)? {
                Line::Full(line) => line,
                _ => return Err(invalid("a bad chunk size line")),
            };
            let text = String::from_utf8_lossy(&size);
            let hex = text.trim().split(';').next().unwrap_or_default();
            self.left = usize::from_str_radix(hex, 16).map_err(|_| invalid("a bad chunk size"))?;
            if self.left == 0 {
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let read = self.inner.read(buf.get_mut(..want).unwrap_or_default())?;
        if read == 0 {
            return Err(invalid("the chunked body ended early"));
        }
        self.left -= read;
        if self.left == 0 {
            // Each chunk ends with CRLF; anything else means the sizes were lies.
            match read_line(&mut self.inner, 2)? {
                Line::Full(end) if end == b"\r" => {}
                _ => return Err(invalid("a chunk not followed by CRLF")),
            }
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_trickling_its_handshake_is_given_up_on_at_the_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A handshake record header announcing 16 KiB, then its body one byte at a time.
        std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let _ = peer.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]);
            while peer.write_all(&[0]).is_ok() {
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let tls = Tls::new("localhost", None).unwrap();
        let polled = || {
            let tcp = TcpStream::connect(addr).unwrap();
            tcp.set_read_timeout(Some(POLL)).unwrap();
            tcp
        };
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let outcome = tls.connect(polled(), deadline, &|| false, "peer");
        assert!(
            matches!(outcome, Err(Fault::Timeout(_))),
            "{:?}",
            outcome.err()
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );

        let stopped = tls.connect(
            polled(),
            Instant::now() + Duration::from_secs(30),
            &|| true,
            "peer",
        );
        assert!(
            matches!(stopped, Err(Fault::Cancelled)),
            "{:?}",
            stopped.err()
        );
    }

    #[test]
    fn chunked_bodies_decode() {
        let raw: &[u8] = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n";
        let mut decoded = String::new();
        Chunked {
            inner: BufReader::new(raw),
            left: 0,
            done: false,
        }
        .read_to_string(&mut decoded)
        .unwrap();
        assert_eq!(decoded, "hello, world");
        let mut bad = String::new();
        let error = Chunked {
            inner: BufReader::new(&b"zz\r\n"[..]),
            left: 0,
            done: false,
        }
        .read_to_string(&mut bad)
        .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
        // A chunk longer than its size line says is refused, not resynchronised.
        let mut smuggled = String::new();
        let error = Chunked {
            inner: BufReader::new(&b"5\r\nhelloXX\r\n0\r\n\r\n"[..]),
            left: 0,
            done: false,
        }
        .read_to_string(&mut smuggled)
        .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::InvalidData);
    }

    #[test]
    fn upstream_values_in_headers_are_visible_ascii() {
        assert!(header_safe("2025-06-18"));
        assert!(header_safe("a1B2-c3_d4"));
        for bad in ["", "x\r\nHost: evil", "x y", "x\ty", "caf\u{e9}", "x\n"] {
            assert!(!header_safe(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_stopped_read_is_not_retried() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _held = listener.accept().unwrap();
        stream.set_read_timeout(Some(POLL)).unwrap();
        let mut patient = Patient {
            inner: Stream::Plain(stream),
            deadline: Instant::now() + Duration::from_secs(30),
            stop: &|| true,
        };
        let started = Instant::now();
        let error = patient.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(
            error.get_ref().is_some_and(|e| e.is::<Stopped>()),
            "{error}"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
