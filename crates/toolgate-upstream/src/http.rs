//! An upstream reached over MCP's streamable HTTP, spoken to with hyper's HTTP/1.1 client.
//!
//! Each JSON-RPC message is one `POST` on its own TCP connection; the answer is either one JSON
//! body or a server-sent-event stream whose events are read until the response with the
//! request's id arrives. hyper frames the request and parses the response (status line,
//! headers, chunked bodies); toolgate keeps its own ids and caps on top: the response head is
//! capped (headers and bytes), and so is each event, each line of the stream and each body. As
//! with the stdio client, a response with an id nobody asked for is a protocol fault, and a
//! fault that leaves the session in doubt marks the connection dead so the supervisor starts a
//! new session. An `https://` upstream is spoken to over TLS (rustls), its certificate checked
//! against the built-in web roots and the configuration's `ca_file`. Every exchange of a
//! session runs on one runtime, which a thread of the session's own drives for as long as the
//! session lives: a caller on a thread waits for its answer there (woken by the answer, its
//! deadline or its cancellation, never by a timer), and a caller on an async runtime
//! ([`Rpc::request_async`]) gets a future that waits without holding a thread. An exchange is
//! given up at the call's deadline, or as soon as the caller is cancelled or stops waiting,
//! whatever stage it is in (connecting, the TLS handshake, sending, reading).
//! Server-initiated messages arrive only inside responses (no standing `GET` stream); the
//! periodic refresh covers a `list_changed` sent outside one. A call's progress and log
//! notifications arrive in its own response stream, so they are plainly its own (see
//! [`crate::relay`]).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Buf as _, Bytes};
use http::header::{ACCEPT, CONNECTION, CONTENT_TYPE, HOST};
use http::{HeaderName, HeaderValue, Request};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use toolgate_core::Notice;
use toolgate_edge::lines::{Line, LineSplitter};

use crate::config::UpstreamSpec;
use crate::connection::{
    Answer, Event, Events, Fault, Rpc, cancellation, find_id, lock, preview, protocol, unanswered,
};
use crate::relay::{Heard, Relay, heard, request_message};

/// The most bytes of a response head (status line and headers) read.
const MAX_HEAD: usize = 64 << 10;
/// The most headers of a response read.
const MAX_HEADERS: usize = 100;

/// Whether a value the upstream chose may go into a later request's header: visible ASCII
/// only, so that no value can end a header line and start another.
fn header_safe(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// The rest of an `https://` (`true`) or `http://` (`false`) URL.
pub(crate) fn scheme_of(url: &str) -> Option<(bool, &str)> {
    match (url.strip_prefix("https://"), url.strip_prefix("http://")) {
        (Some(rest), _) => Some((true, rest)),
        (None, Some(rest)) => Some((false, rest)),
        (None, None) => None,
    }
}

/// Why an `https://` upstream's TLS cannot be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    #[error("cannot read certificates from `{}`: {source}", .file.display())]
    Unreadable {
        file: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("`{}` holds no certificate", .0.display())]
    Empty(PathBuf),
    #[error("a certificate in `{}` is not usable: {source}", .file.display())]
    Unusable {
        file: PathBuf,
        source: rustls::Error,
    },
    #[error("cannot set up TLS: {0}")]
    Setup(rustls::Error),
    #[error("`{host}` cannot name a TLS server: {source}")]
    ServerName {
        host: String,
        source: rustls::pki_types::InvalidDnsNameError,
    },
}

/// The PEM certificates of `file`: at least one, every one readable.
pub(crate) fn certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(file)
        .and_then(Iterator::collect)
        .map_err(|source| TlsError::Unreadable {
            file: file.to_owned(),
            source,
        })?;
    if certificates.is_empty() {
        return Err(TlsError::Empty(file.to_owned()));
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
    fn new(host: &str, ca_file: Option<&Path>) -> Result<Tls, TlsError> {
        let mut roots =
            rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        if let Some(file) = ca_file {
            for certificate in certificates(file)? {
                roots
                    .add(certificate)
                    .map_err(|source| TlsError::Unusable {
                        file: file.to_owned(),
                        source,
                    })?;
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Setup)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let server =
            ServerName::try_from(host.to_owned()).map_err(|source| TlsError::ServerName {
                host: host.to_owned(),
                source,
            })?;
        Ok(Tls {
            config: Arc::new(config),
            server,
        })
    }
}

/// The runtime every exchange of a session runs on: current-thread, driven by a thread of its
/// own until the session is dropped. Its timers and sockets work for any caller: a thread that
/// waits with [`tokio::runtime::Handle::block_on`], or a task spawned on it.
#[derive(Debug)]
struct Client {
    handle: tokio::runtime::Handle,
    /// Dropped with the session, which ends the thread, and the runtime with it.
    _running: tokio::sync::oneshot::Sender<()>,
}

impl Client {
    fn start(upstream: &str) -> std::io::Result<Client> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()?;
        let handle = runtime.handle().clone();
        let (running, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("upstream-{upstream}-http"))
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
            })?;
        Ok(Client {
            handle,
            _running: running,
        })
    }
}

/// Returns once `cancel` is given, woken by it.
async fn cancelled(cancel: &toolgate_core::Cancel) {
    let woken = Arc::new(tokio::sync::Notify::new());
    // A permit is stored when nobody waits yet, so the wake is never lost.
    let _on_cancel = cancel.on_cancel({
        let woken = Arc::clone(&woken);
        move || woken.notify_one()
    });
    while !cancel.is_cancelled() {
        woken.notified().await;
    }
}

/// How far an exchange got, for the fault of one given up on at its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Connecting,
    Handshaking,
    Waiting,
}

/// The task that drives one exchange's connection, aborted when the exchange is over.
struct Driving(tokio::task::JoinHandle<Result<(), hyper::Error>>);

impl Drop for Driving {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What an HTTP body reads as: its bytes, a frame at a time, and the error that ended it.
struct Body {
    incoming: Incoming,
    /// What the last frame held that was not taken yet.
    left: Bytes,
}

/// Why a body could not be read to its end.
enum BodyError {
    /// It ended before its framing said it would.
    Early,
    /// Its framing is broken: the stream cannot be trusted any more.
    Malformed(String),
    /// The connection failed under it.
    Failed(String),
}

impl Body {
    /// The next bytes of the body; `None` at its end.
    async fn next(&mut self) -> Result<Option<Bytes>, BodyError> {
        if !self.left.is_empty() {
            return Ok(Some(std::mem::take(&mut self.left)));
        }
        loop {
            match self.incoming.frame().await {
                None => return Ok(None),
                Some(Err(error)) => return Err(body_error(&error)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data()
                        && !data.is_empty()
                    {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }

    /// The next line of the body, split by `lines`.
    async fn line(&mut self, lines: &mut LineSplitter) -> Result<Line, BodyError> {
        loop {
            let Some(mut bytes) = self.next().await? else {
                return Ok(lines.end());
            };
            let (used, line) = lines.take(&bytes);
            bytes.advance(used);
            self.left = bytes;
            if let Some(line) = line {
                return Ok(line);
            }
        }
    }
}

/// The I/O error somewhere under `error`, if there is one.
fn io_error_in<'e>(error: &'e (dyn std::error::Error + 'static)) -> Option<&'e std::io::Error> {
    let mut at = Some(error);
    while let Some(error) = at {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        at = error.source();
    }
    None
}

/// `error` and what caused it, for a message.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut at = error.source();
    while let Some(cause) = at {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        at = cause.source();
    }
    text
}

fn body_error(error: &hyper::Error) -> BodyError {
    if error.is_incomplete_message() {
        return BodyError::Early;
    }
    match io_error_in(error).map(std::io::Error::kind) {
        Some(std::io::ErrorKind::UnexpectedEof) => BodyError::Early,
        // hyper's decoder says InvalidInput or InvalidData of broken chunked framing.
        Some(std::io::ErrorKind::InvalidData | std::io::ErrorKind::InvalidInput) | None => {
            BodyError::Malformed(chain(error))
        }
        Some(_) => BodyError::Failed(chain(error)),
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
    client: Client,
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
            Some(Tls::new(host, spec.ca_file.as_deref()).map_err(|e| unavailable(e.to_string()))?)
        } else {
            None
        };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| unavailable(format!("cannot resolve `{authority}`: {e}")))?
            .next()
            .ok_or_else(|| unavailable(format!("`{authority}` has no address")))?;
        let client = Client::start(&spec.name)
            .map_err(|e| unavailable(format!("cannot start an HTTP client: {e}")))?;
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
            client,
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

    /// Request `method`, and its answer, passing what the upstream reports about it on the
    /// way to `listener`. Gives up (and tells the upstream) at the deadline `timeout` sets,
    /// once `cancel` is given, or once `gone` resolves (the caller stopped waiting).
    async fn requested<L: Fn(Notice)>(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
        cancel: &toolgate_core::Cancel,
        listener: Option<L>,
        gone: impl std::future::Future<Output = ()>,
    ) -> Result<Value, Fault> {
        if self.is_dead() {
            return Err(Fault::Unavailable(format!(
                "upstream `{}` is not connected",
                self.upstream
            )));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut relay = listener.map(Relay::new);
        let message = request_message(id, method, params, relay.is_some());
        let deadline = Instant::now() + timeout;
        let result = self
            .post_until(&message, Some(id), deadline, cancel, gone, relay.as_mut())
            .await;
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
                let _ = self
                    .notified("notifications/cancelled", cancellation(id, reason))
                    .await;
                Err(match fault {
                    Fault::Timeout(_) => unanswered(&self.upstream, method, timeout),
                    other => other,
                })
            }
            Err(fault) => Err(fault),
        }
    }

    /// [`HttpConnection::post`], given up as soon as `cancel` is given or `gone` resolves.
    async fn post_until<L: Fn(Notice)>(
        &self,
        message: &Value,
        id: Option<u64>,
        deadline: Instant,
        cancel: &toolgate_core::Cancel,
        gone: impl std::future::Future<Output = ()>,
        relay: Option<&mut Relay<L>>,
    ) -> Result<Option<Value>, Fault> {
        tokio::select! {
            result = self.post(message, id, deadline, relay) => result,
            () = cancelled(cancel) => Err(Fault::Cancelled),
            () = gone => Err(Fault::Cancelled),
        }
    }

    /// Sends notification `method`, giving up after a few seconds.
    async fn notified(&self, method: &str, params: Value) -> Result<(), Fault> {
        let message = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let deadline = Instant::now() + Duration::from_secs(5);
        self.post::<fn(Notice)>(&message, None, deadline, None)
            .await
            .map(|_| ())
    }

    /// POSTs `message`; for a request, waits for the response with `id`, passing what the
    /// upstream reports about it on the way to `relay`. Gives up at `deadline`, in whatever
    /// stage the exchange is.
    async fn post<L: Fn(Notice)>(
        &self,
        message: &Value,
        id: Option<u64>,
        deadline: Instant,
        relay: Option<&mut Relay<L>>,
    ) -> Result<Option<Value>, Fault> {
        let body = serde_json::to_vec(message)
            .map_err(|e| protocol(&self.upstream, &format!("cannot encode a request: {e}")))?;
        let stage = Mutex::new(Stage::Connecting);
        let exchange = self.exchange(body, id, &stage, relay);
        match tokio::time::timeout_at(deadline.into(), exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(self.given_up(*lock(&stage))),
        }
    }

    /// The fault of an exchange given up on at its deadline in `stage`.
    fn given_up(&self, stage: Stage) -> Fault {
        match stage {
            Stage::Connecting => self.unavailable(format!(
                "cannot connect to `{}`: it did not accept in time",
                self.authority
            )),
            Stage::Handshaking => Fault::Timeout(format!(
                "upstream `{}`: `{}`: the TLS handshake did not finish in time",
                self.upstream, self.authority
            )),
            Stage::Waiting => Fault::Timeout(format!(
                "upstream `{}` did not answer in time",
                self.upstream
            )),
        }
    }

    fn unavailable(&self, what: String) -> Fault {
        Fault::Unavailable(format!("upstream `{}`: {what}", self.upstream))
    }

    /// One request and its answer, on a connection of its own.
    async fn exchange<L: Fn(Notice)>(
        &self,
        body: Vec<u8>,
        id: Option<u64>,
        stage: &Mutex<Stage>,
        relay: Option<&mut Relay<L>>,
    ) -> Result<Option<Value>, Fault> {
        let request = self.request(body)?;
        let tcp = tokio::net::TcpStream::connect(self.addr)
            .await
            .map_err(|e| {
                self.unavailable(format!("cannot connect to `{}`: {e}", self.authority))
            })?;
        let _ = tcp.set_nodelay(true);
        // The connection's task lives as long as this exchange: it asked to be closed after
        // this answer, and one whose rest is not read (an event stream left open) is cut.
        let (response, _driving) = match &self.tls {
            Some(tls) => {
                *lock(stage) = Stage::Handshaking;
                let stream = tokio_rustls::TlsConnector::from(Arc::clone(&tls.config))
                    .connect(tls.server.clone(), tcp)
                    .await
                    .map_err(|e| {
                        self.unavailable(format!(
                            "`{}`: TLS handshake failed: {}",
                            self.authority,
                            chain(&e)
                        ))
                    })?;
                *lock(stage) = Stage::Waiting;
                self.send(TokioIo::new(stream), request).await?
            }
            None => {
                *lock(stage) = Stage::Waiting;
                self.send(TokioIo::new(tcp), request).await?
            }
        };
        let header = |name: &str| response.headers().get(name);
        if let Some(session) = header("mcp-session-id") {
            let safe = session.to_str().ok().filter(|v| header_safe(v));
            let Some(session) = safe else {
                return Err(self.fail(protocol(
                    &self.upstream,
                    &format!(
                        "an `Mcp-Session-Id` that is not visible ASCII: `{}`",
                        preview(session.as_bytes())
                    ),
                )));
            };
            *lock(&self.session) = Some(session.to_owned());
        }
        let status = response.status().as_u16();
        if status == 404 && lock(&self.session).is_some() {
            return Err(
                self.fail(self.unavailable("the upstream ended the session (HTTP 404)".into()))
            );
        }
        if !(200..300).contains(&status) {
            return Err(self.unavailable(format!("HTTP status {status}")));
        }
        let Some(id) = id else {
            return Ok(None);
        };
        let event_stream = header("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = Body {
            incoming: response.into_body(),
            left: Bytes::new(),
        };
        if event_stream {
            self.read_events(&mut body, id, relay).await
        } else {
            self.read_json(&mut body, id).await
        }
        .map(Some)
    }

    /// The `POST` of `body`, with the session's headers and the configured ones.
    fn request(&self, body: Vec<u8>) -> Result<Request<Full<Bytes>>, Fault> {
        let mut request = Request::post(self.path.as_str())
            .header(HOST, self.authority.as_str())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONNECTION, "close");
        if let Some(session) = lock(&self.session).as_ref() {
            request = request.header("mcp-session-id", session.as_str());
        }
        if let Some(version) = lock(&self.protocol_version).as_ref() {
            request = request.header("mcp-protocol-version", version.as_str());
        }
        // The configuration checked these; one that still cannot be sent is not left out,
        // since the upstream may rely on it (a credential, say).
        for (name, value) in &self.headers {
            let header = HeaderName::from_bytes(name.as_bytes())
                .ok()
                .zip(HeaderValue::from_bytes(value.as_bytes()).ok());
            let Some((name, value)) = header else {
                return Err(self.unavailable(format!("header `{name}` cannot be sent")));
            };
            request = request.header(name, value);
        }
        request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| self.unavailable(format!("cannot make a request of `{}`: {e}", self.path)))
    }

    /// Sends `request` over `io` and reads the head of the response, within the caps.
    async fn send<T>(
        &self,
        io: T,
        request: Request<Full<Bytes>>,
    ) -> Result<(hyper::Response<Incoming>, Driving), Fault>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .max_headers(MAX_HEADERS)
            .max_header_size(MAX_HEAD)
            .handshake(io)
            .await
            .map_err(|e| {
                self.unavailable(format!(
                    "cannot talk to `{}`: {}",
                    self.authority,
                    chain(&e)
                ))
            })?;
        // The connection is driven beside the exchange, until the exchange ends.
        let driving = Driving(tokio::spawn(connection));
        let response = sender.send_request(request).await.map_err(|e| {
            if e.is_parse_too_large() {
                self.fail(protocol(
                    &self.upstream,
                    &format!(
                        "an HTTP response head over {MAX_HEADERS} headers or {MAX_HEAD} bytes"
                    ),
                ))
            } else if e.is_parse() {
                self.fail(protocol(
                    &self.upstream,
                    &format!("not an HTTP response: {}", chain(&e)),
                ))
            } else if e.is_incomplete_message() {
                self.fail(Fault::Unavailable(format!(
                    "upstream `{}` closed the connection without an answer",
                    self.upstream
                )))
            } else {
                self.unavailable(format!(
                    "cannot send to `{}`: {}",
                    self.authority,
                    chain(&e)
                ))
            }
        })?;
        Ok((response, driving))
    }

    /// The fault of a body that could not be read to its end.
    fn body_fault(&self, error: BodyError, early: &str) -> Fault {
        match error {
            BodyError::Early => self.fail(Fault::Unavailable(format!(
                "upstream `{}` {early}",
                self.upstream
            ))),
            BodyError::Malformed(what) => self.fail(protocol(
                &self.upstream,
                &format!("a malformed HTTP body: {what}"),
            )),
            BodyError::Failed(what) => self.unavailable(what),
        }
    }

    async fn read_json(&self, body: &mut Body, id: u64) -> Result<Value, Fault> {
        let mut bytes = Vec::new();
        while let Some(frame) = body
            .next()
            .await
            .map_err(|e| self.body_fault(e, "ended its answer early"))?
        {
            if bytes.len() + frame.len() > self.max {
                return Err(Fault::TooLarge(format!(
                    "upstream `{}` answered with more than {} bytes",
                    self.upstream, self.max
                )));
            }
            bytes.extend_from_slice(&frame);
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
    async fn read_events<L: Fn(Notice)>(
        &self,
        body: &mut Body,
        id: u64,
        mut relay: Option<&mut Relay<L>>,
    ) -> Result<Value, Fault> {
        let early = "ended its event stream before answering";
        let mut lines = LineSplitter::new(self.max);
        let mut data = Vec::new();
        loop {
            match body
                .line(&mut lines)
                .await
                .map_err(|e| self.body_fault(e, early))?
            {
                Line::End => {
                    return Err(self.fail(Fault::Unavailable(format!(
                        "upstream `{}` {early}",
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
                            && let Some(relay) = relay.as_deref_mut()
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
        cancel: &toolgate_core::Cancel,
        listener: Option<&dyn Fn(Notice)>,
    ) -> Result<Value, Fault> {
        // This thread polls the exchange; the session's own thread drives its sockets and
        // timers, and wakes this one when there is something to do.
        let requested = self.requested(
            method,
            params,
            timeout,
            cancel,
            listener,
            std::future::pending(),
        );
        self.client.handle.block_on(requested)
    }

    /// The exchange runs as a task on the session's runtime; the future returned only waits
    /// for its answer, and dropping it gives the request up.
    fn request_async(
        self: Arc<Self>,
        method: &'static str,
        params: Value,
        timeout: Duration,
        cancel: toolgate_core::Cancel,
        listener: Box<dyn Fn(Notice) + Send + Sync>,
    ) -> Result<Answer, Value> {
        let (mut answer, answered) = tokio::sync::oneshot::channel();
        let this = Arc::clone(&self);
        drop(self.client.handle.spawn(async move {
            let result = this
                .requested(
                    method,
                    params,
                    timeout,
                    &cancel,
                    Some(listener),
                    answer.closed(),
                )
                .await;
            let _ = answer.send(result);
        }));
        let upstream = self.upstream.clone();
        Ok(Box::pin(async move {
            answered.await.unwrap_or_else(|_| {
                Err(Fault::Unavailable(format!(
                    "upstream `{upstream}`: its HTTP client stopped"
                )))
            })
        }))
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), Fault> {
        self.client.handle.block_on(self.notified(method, params))
    }

    fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    fn kill(&self) {
        self.dead.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;
    use std::sync::mpsc;

    use super::*;

    /// A connection to `addr`, over TLS for `localhost` when `tls`, and what it tells the
    /// supervisor.
    fn upstream_at(
        addr: SocketAddr,
        tls: bool,
        max: usize,
    ) -> (HttpConnection, mpsc::Receiver<Event>) {
        let (sender, events) = mpsc::channel();
        let connection = HttpConnection {
            upstream: "peer".to_owned(),
            addr,
            tls: tls.then(|| Tls::new("localhost", None).unwrap()),
            authority: addr.to_string(),
            path: "/mcp".to_owned(),
            headers: vec![("X-Token".to_owned(), "t0ken".to_owned())],
            session: Mutex::new(None),
            protocol_version: Mutex::new(None),
            max,
            next_id: AtomicU64::new(1),
            dead: AtomicBool::new(false),
            events: Events::new(sender),
            client: Client::start("peer").unwrap(),
        };
        (connection, events)
    }

    /// A server that answers one request with `answer`, and hands back the request it read.
    fn answering(answer: Vec<u8>) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let served = std::thread::spawn(move || {
            let (mut peer, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut byte = [0u8; 1];
            while !request.ends_with(b"\r\n\r\n") && peer.read(&mut byte).unwrap() == 1 {
                request.push(byte[0]);
            }
            let head = String::from_utf8_lossy(&request).into_owned();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |n| n.trim().parse().unwrap());
            let mut body = vec![0u8; length];
            peer.read_exact(&mut body).unwrap();
            let _ = peer.write_all(&answer);
            let _ = peer.flush();
            std::thread::sleep(Duration::from_millis(100));
            head + &String::from_utf8_lossy(&body)
        });
        (addr, served)
    }

    fn call(connection: &HttpConnection, timeout: Duration) -> Result<Value, Fault> {
        let cancel = toolgate_core::Cancel::new();
        connection.request_reporting("tools/list", json!({}), timeout, &cancel, None)
    }

    fn json_answer(head: &str, body: &str) -> Vec<u8> {
        format!(
            "HTTP/1.1 200 OK\r\n{head}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes()
    }

    #[test]
    fn a_json_answer_is_read_and_the_session_kept() {
        let (addr, served) = answering(json_answer(
            "Mcp-Session-Id: s-1\r\n",
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        ));
        let (connection, _events) = upstream_at(addr, false, 1 << 20);
        assert_eq!(
            call(&connection, Duration::from_secs(5)),
            Ok(json!({"tools": []}))
        );
        let request = served.join().unwrap();
        assert!(request.starts_with("POST /mcp HTTP/1.1\r\n"), "{request}");
        for header in [
            "host: ",
            "x-token: t0ken",
            "accept: application/json, text/event-stream",
        ] {
            assert!(request.to_ascii_lowercase().contains(header), "{request}");
        }
        assert!(request.contains(r#""method":"tools/list""#), "{request}");
        assert_eq!(lock(&connection.session).as_deref(), Some("s-1"));
        assert!(!connection.is_dead());
    }

    #[test]
    fn a_chunked_event_stream_is_read_to_the_response() {
        let events = concat!(
            ": a comment\r\n\r\n",
            "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":1,\n",
            "data: \"result\":{\"ok\":true}}\n\n",
        );
        let mut chunked = String::new();
        for piece in events.as_bytes().chunks(7) {
            let piece = std::str::from_utf8(piece).unwrap();
            chunked.push_str(&format!("{:x};ext=1\r\n{piece}\r\n", piece.len()));
        }
        chunked.push_str("0\r\n\r\n");
        let (addr, _served) = answering(
            format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n{chunked}")
                .into_bytes(),
        );
        let (connection, events) = upstream_at(addr, false, 1 << 20);
        assert_eq!(
            call(&connection, Duration::from_secs(5)),
            Ok(json!({"ok": true}))
        );
        assert_eq!(events.try_recv(), Ok(Event::ListChanged));
    }

    #[test]
    fn broken_chunked_framing_fails_the_session() {
        let (addr, _served) = answering(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX\r\n0\r\n\r\n".to_vec(),
        );
        let (connection, _events) = upstream_at(addr, false, 1 << 20);
        let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&fault, Fault::Protocol(m) if m.contains("malformed HTTP body")),
            "{fault:?}"
        );
        assert!(connection.is_dead());
    }

    #[test]
    fn heads_past_the_caps_fail_the_session() {
        let many: String = (0..=MAX_HEADERS).map(|n| format!("X-{n}: v\r\n")).collect();
        let long = format!("X-Long: {}\r\n", "v".repeat(MAX_HEAD));
        for head in [many, long] {
            let (addr, _served) = answering(json_answer(&head, "{}"));
            let (connection, _events) = upstream_at(addr, false, 1 << 20);
            let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
            assert!(
                matches!(&fault, Fault::Protocol(m) if m.contains("response head over")),
                "{fault:?}"
            );
            assert!(connection.is_dead());
        }
        let (addr, _served) = answering(b"SMTP ready\r\n\r\n".to_vec());
        let (connection, _events) = upstream_at(addr, false, 1 << 20);
        let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&fault, Fault::Protocol(m) if m.contains("not an HTTP response")),
            "{fault:?}"
        );
    }

    #[test]
    fn answers_and_events_past_the_cap_are_too_large() {
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":"{}"}}}}"#,
            "x".repeat(300)
        );
        let (addr, _served) = answering(json_answer("", &big));
        let (connection, _events) = upstream_at(addr, false, 100);
        let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&fault, Fault::TooLarge(m) if m.contains("more than 100 bytes")),
            "{fault:?}"
        );
        assert!(!connection.is_dead(), "the answer was the call's own");

        // An event line over the cap: the call's own fails alone; anyone else's fails the session.
        for (id, dies) in [(1, false), (9, true)] {
            let event = format!(
                "data: {{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":{{\"x\":\"{}\"}}}}\n\n",
                "x".repeat(300)
            );
            let (addr, _served) = answering(
                format!("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n{event}")
                    .into_bytes(),
            );
            let (connection, _events) = upstream_at(addr, false, 100);
            let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
            assert!(
                matches!(&fault, Fault::TooLarge(m) if m.contains("event of")),
                "{fault:?}"
            );
            assert_eq!(connection.is_dead(), dies, "id {id}");
        }
    }

    #[test]
    fn a_session_id_that_is_not_visible_ascii_is_refused() {
        let (addr, _served) = answering(json_answer("Mcp-Session-Id: a b\r\n", "{}"));
        let (connection, _events) = upstream_at(addr, false, 1 << 20);
        let fault = call(&connection, Duration::from_secs(5)).unwrap_err();
        assert!(
            matches!(&fault, Fault::Protocol(m) if m.contains("Mcp-Session-Id")),
            "{fault:?}"
        );
        assert_eq!(*lock(&connection.session), None);
    }

    #[test]
    fn a_silent_server_is_given_up_on_at_the_deadline_or_when_stopped() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while let Ok((peer, _)) = listener.accept() {
                held.push(peer);
            }
        });
        let (connection, _events) = upstream_at(addr, false, 1 << 20);
        gives_up(&connection, "did not answer in time");
        // The call's fault names the method and its timeout.
        let fault = call(&connection, Duration::from_millis(300)).unwrap_err();
        assert!(
            matches!(&fault, Fault::Timeout(m) if m.contains("`tools/list` within 300 ms")),
            "{fault:?}"
        );
        assert!(!connection.is_dead());
    }

    #[test]
    fn a_server_trickling_its_handshake_is_given_up_on_at_the_deadline() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        // A handshake record header announcing 16 KiB, then its body one byte at a time.
        std::thread::spawn(move || {
            while let Ok((mut peer, _)) = listener.accept() {
                std::thread::spawn(move || {
                    let _ = peer.write_all(&[0x16, 0x03, 0x03, 0x40, 0x00]);
                    while peer.write_all(&[0]).is_ok() {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                });
            }
        });
        let (connection, _events) = upstream_at(addr, true, 1 << 20);
        gives_up(&connection, "TLS handshake did not finish");
    }

    /// An exchange with `connection` ends at its deadline with a timeout that says `why`, and
    /// at once when its caller stops waiting.
    fn gives_up(connection: &HttpConnection, why: &str) {
        let post = |id, deadline, cancel: toolgate_core::Cancel| {
            connection.client.handle.block_on(connection.post_until(
                &json!({}),
                Some(id),
                deadline,
                &cancel,
                std::future::pending(),
                None::<&mut Relay<fn(Notice)>>,
            ))
        };
        let started = Instant::now();
        let deadline = started + Duration::from_millis(300);
        let outcome = post(1, deadline, toolgate_core::Cancel::new());
        assert!(
            matches!(&outcome, Err(Fault::Timeout(m)) if m.contains(why)),
            "{outcome:?}"
        );
        let started_again = Instant::now();
        let far = started_again + Duration::from_secs(30);
        let stopped = post(2, far, toolgate_core::Cancel::given());
        assert_eq!(stopped, Err(Fault::Cancelled));
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn upstream_values_in_headers_are_visible_ascii() {
        assert!(header_safe("2025-06-18"));
        assert!(header_safe("a1B2-c3_d4"));
        for bad in ["", "x\r\nHost: evil", "x y", "x\ty", "caf\u{e9}", "x\n"] {
            assert!(!header_safe(bad), "{bad:?}");
        }
    }
}
