//! MCP over streamable HTTP, for several sessions at once, each with its own principal.
//!
//! Every request passes these checks, in this order, before rmcp sees it:
//!
//! 1. `Host` must name the bound address or `localhost`, with the port (DNS rebinding: a
//!    hostile page whose name resolves to 127.0.0.1 still sends its own name), and a present
//!    `Origin` must be a loopback origin — else 403;
//! 2. the path must be `/mcp` — else 404;
//! 3. `Authorization: Bearer <token>` must name a configured token — else 401;
//! 4. a request in a session must carry the token that began it, and the session must be
//!    open — else 404;
//! 5. an `initialize` must find room under the session limits — else 503, with a JSON-RPC
//!    error that names the limit (see [`sessions`]).
//!
//! Sessions idle for the configured time end as if their client had ended them.
//!
//! The server binds loopback addresses only, unless told otherwise in so many words
//! ([`bind`]'s `dangerous_bind_any`). When the response stream of a call closes early, the
//! call is cancelled.
//!
//! A request whose call reports nothing on the way is answered with its result alone, as
//! `application/json`; one that sends notifications or asks the client something gets an event
//! stream (see `answer`). Accepted sockets have `TCP_NODELAY` set.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HOST, ORIGIN, RETRY_AFTER, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetExtensions, RequestId};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use toolgate_edge::loopback;

use crate::auth::{Principal, TokenTable};
use crate::server::Server;
use crate::session::{AnswerWatch, Registration, Session};
use crate::wire::{ArgumentText, Decoded, decode};

mod answer;
mod direct;
pub mod sessions;

pub use sessions::SessionLimits;
use sessions::{Holder, Refusal, Reservation, SessionLedger};

/// The one path toolgate answers.
pub const MCP_PATH: &str = "/mcp";
const SESSION_HEADER: &str = "mcp-session-id";

/// The most connections served at once. Sessions are limited per token, but a connection
/// costs a descriptor before anyone is known, and a 2026-07-28 client's stateless requests
/// (a `subscriptions/listen` stream among them) belong to no session: this bounds them all,
/// whoever opens them.
pub const MAX_CONNECTIONS: usize = 512;

type Body = BoxBody<Bytes, Infallible>;

/// Why the HTTP server would not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error(
        "refusing to listen on `{0}`, which is not a loopback address; pass --dangerous-bind-any (or set `dangerous_bind_any = true` under [serve]) if you mean it"
    )]
    NotLoopback(SocketAddr),
    #[error(
        "refusing to serve `{0}` without tokens: unauthenticated serving is for loopback addresses only"
    )]
    AnonymousNotLoopback(SocketAddr),
    #[error("no bearer token is configured, so no request could be served")]
    NoTokens,
    #[error("cannot listen on `{addr}`: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the listening socket failed: {0}")]
    Io(#[from] std::io::Error),
}

/// Who may call, and what the server accepts.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Bearer tokens and their principals.
    pub tokens: TokenTable,
    /// The principal of a request that carries no token at all; `None` (the default) refuses
    /// such requests with 401. For loopback test rigs that cannot send a header.
    pub dangerous_anonymous: Option<Principal>,
    /// `Host` values accepted beyond the bound address and `localhost` (a reverse proxy's
    /// name), as `host:port`.
    pub allowed_hosts: Vec<String>,
    /// The largest request body.
    pub max_message_bytes: usize,
    /// How often an idle event stream carries a keep-alive comment; a client that went away
    /// is noticed, and its call cancelled, by the next one at the latest.
    pub keep_alive: Duration,
    /// How many sessions may be open, and when an idle one ends.
    pub sessions: SessionLimits,
    /// Gives memory the allocator holds free back to the system; run after sessions ended
    /// (see [`sessions`]). `None` leaves it to the allocator.
    pub release_memory: Option<fn()>,
}

impl HttpOptions {
    pub fn new(tokens: TokenTable) -> Self {
        HttpOptions {
            tokens,
            dangerous_anonymous: None,
            allowed_hosts: Vec::new(),
            max_message_bytes: 4 * 1024 * 1024,
            keep_alive: Duration::from_secs(5),
            sessions: SessionLimits::default(),
            release_memory: None,
        }
    }
}

/// Binds `addr`: a loopback address, or any address with `dangerous_bind_any`.
pub fn bind(
    addr: SocketAddr,
    dangerous_bind_any: bool,
) -> Result<std::net::TcpListener, HttpError> {
    if !addr.ip().is_loopback() && !dangerous_bind_any {
        return Err(HttpError::NotLoopback(addr));
    }
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| HttpError::Bind { addr, source })?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// [`serve_http`] on a single-threaded runtime of its own until SIGINT or SIGTERM, for a
/// synchronous `main`.
pub fn run_http(
    server: Arc<Server>,
    listener: std::net::TcpListener,
    options: HttpOptions,
) -> Result<(), HttpError> {
    let runtime = crate::runtime()?;
    let shutdown = CancellationToken::new();
    let result = runtime.block_on(async {
        let stop = shutdown.clone();
        tokio::spawn(async move {
            interrupted().await;
            stop.cancel();
        });
        serve_http(server, listener, options, shutdown).await
    });
    runtime.shutdown_timeout(crate::SHUTDOWN_GRACE);
    result
}

/// Returns when the process is asked to stop.
async fn interrupted() {
    #[cfg(unix)]
    if let Ok(mut terminate) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
    {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
        return;
    }
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Serves MCP on `listener` until `shutdown` is cancelled.
pub async fn serve_http(
    server: Arc<Server>,
    listener: std::net::TcpListener,
    options: HttpOptions,
    shutdown: CancellationToken,
) -> Result<(), HttpError> {
    let local = listener.local_addr()?;
    if options.tokens.is_empty() && options.dangerous_anonymous.is_none() {
        return Err(HttpError::NoTokens);
    }
    if options.dangerous_anonymous.is_some() && !local.ip().is_loopback() {
        return Err(HttpError::AnonymousNotLoopback(local));
    }
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let streams_end = CancellationToken::new();
    let config = StreamableHttpServerConfig::default()
        // Host and Origin are checked before rmcp sees the request, by the rules above.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(options.max_message_bytes)
        .with_sse_keep_alive(Some(options.keep_alive))
        // Cancelled only once open subscriptions have sent their final result (see below).
        .with_cancellation_token(streams_end.child_token());
    let mut manager = LocalSessionManager::default();
    // The ledger ends idle sessions (see `sessions`); rmcp's own timer would also end those
    // whose client only listens.
    manager.session_config.keep_alive = None;
    let manager = Arc::new(manager);
    let ledger = Arc::new(SessionLedger::new(options.sessions));
    tokio::spawn(sessions::sweep(
        Arc::clone(&ledger),
        Arc::clone(&manager),
        options.release_memory,
        shutdown.child_token(),
    ));
    let sessions_server = Arc::clone(&server);
    let mcp = StreamableHttpService::new(
        move || Ok(Session::bound_by_request(Arc::clone(&sessions_server))),
        manager,
        config,
    );
    let front = Arc::new(Front {
        server: Arc::clone(&server),
        hosts: loopback::own_hosts(local, &options.allowed_hosts),
        options,
        ledger,
        mcp,
    });
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => {
                // A subscription's stream ends with its result, which tells its client that
                // the end was deliberate; rmcp cuts every stream at once when told to stop.
                server.end_subscriptions().await;
                streams_end.cancel();
                return Ok(());
            }
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            // Out of descriptors, a connection reset before accept: wait a moment, go on.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // An answer goes out in more than one write when it is an event stream (and a client
        // may send a request's head and body in two): without this, Nagle's algorithm holds
        // the second write until the peer's delayed acknowledgement, some 40 ms, every call.
        let _ = stream.set_nodelay(true);
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            tokio::spawn(refuse_busy(stream));
            continue;
        };
        let front = Arc::clone(&front);
        tokio::spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |request| {
                let front = Arc::clone(&front);
                async move { Ok::<_, Infallible>(front.handle(request).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Answers a connection over [`MAX_CONNECTIONS`] with a 503 and closes it, without reading
/// the request: a JSON-RPC error with no id, since none was read.
async fn refuse_busy(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt as _;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32000,"message":"toolgate serves {MAX_CONNECTIONS} connections at once and all are open; close connections no longer needed, or retry shortly"}}}}"#
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let answer = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    // A client that does not take the answer within a second gets the connection closed.
    let _ = tokio::time::timeout(Duration::from_secs(1), answer).await;
}

/// The checks in front of rmcp's service.
struct Front {
    server: Arc<Server>,
    hosts: Vec<String>,
    options: HttpOptions,
    /// Which principal began each open session, and which are idle.
    ledger: Arc<SessionLedger>,
    mcp: StreamableHttpService<Session, LocalSessionManager>,
}

impl Front {
    async fn handle(self: &Arc<Self>, request: Request<Incoming>) -> Response<Body> {
        if !self.host_allowed(request.headers()) {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: the Host header is not this server",
            );
        }
        if !origin_allowed(request.headers()) {
            return plain(
                StatusCode::FORBIDDEN,
                "forbidden: the Origin is not a loopback origin",
            );
        }
        if request.uri().path() != MCP_PATH {
            return plain(
                StatusCode::NOT_FOUND,
                "not found: toolgate serves MCP at /mcp",
            );
        }
        let Some(principal) = self.principal(request.headers()) else {
            let mut response = plain(
                StatusCode::UNAUTHORIZED,
                "unauthorized: send a configured token as `Authorization: Bearer <token>`",
            );
            response.headers_mut().insert(
                WWW_AUTHENTICATE,
                http::HeaderValue::from_static("Bearer realm=\"toolgate\""),
            );
            return response;
        };
        let session = request
            .headers()
            .get(SESSION_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        // While this request is answered, its session is not idle.
        let busy = match &session {
            Some(session) => match self.ledger.enter(session, &principal) {
                Some(busy) => Some(busy),
                // Another token's session gets the same answer as one that does not exist
                // (or no longer does): nothing to learn here.
                None => return plain(StatusCode::NOT_FOUND, "not found: no such session"),
            },
            None => None,
        };
        let (mut parts, body) = request.into_parts();
        let mut beginning = None;
        let bytes = if parts.method == Method::POST {
            match Limited::new(body, self.options.max_message_bytes)
                .collect()
                .await
            {
                Ok(collected) => collected.to_bytes(),
                Err(_) => {
                    return plain(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "payload too large, or the body could not be read",
                    );
                }
            }
        } else {
            Bytes::new()
        };
        if parts.method == Method::POST {
            match decode(&bytes) {
                Decoded::Reply(reply) => {
                    let body = serde_json::to_vec(&*reply).unwrap_or_default();
                    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    response.headers_mut().insert(
                        CONTENT_TYPE,
                        http::HeaderValue::from_static("application/json"),
                    );
                    return response;
                }
                Decoded::Message(message) => match *message {
                    ClientJsonRpcMessage::Request(mut request) => {
                        if session.is_none()
                            && matches!(request.request, ClientRequest::InitializeRequest(_))
                        {
                            let holder =
                                Holder::of(parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes()));
                            match self.ledger.reserve(holder) {
                                Ok(reservation) => beginning = Some(reservation),
                                Err(refusal) => return refused(&refusal, &request.id),
                            }
                        }
                        let text = request.request.extensions_mut().remove::<ArgumentText>();
                        // A call that needs nothing of rmcp's session worker is answered here.
                        if let Some(state) = busy.as_ref().and_then(sessions::Stream::session)
                            && direct::eligible(
                                &parts.headers,
                                &request,
                                &state,
                                &self.server,
                                &principal,
                            )
                        {
                            let response = direct::answer(
                                state,
                                &self.server,
                                principal,
                                request,
                                text,
                                self.options.keep_alive,
                            )
                            .await;
                            return response.map(|body| answer::keeping(body, busy));
                        }
                        if let Some(text) = text {
                            parts.extensions.insert(text);
                        }
                    }
                    ClientJsonRpcMessage::Notification(notification) => {
                        if let Some(state) = busy.as_ref().and_then(sessions::Stream::session) {
                            direct::cancelled(&state, &notification.notification);
                        }
                    }
                    ClientJsonRpcMessage::Response(_) | ClientJsonRpcMessage::Error(_) => {}
                },
                Decoded::Ignore => {}
            }
        }
        let method = parts.method.clone();
        let answer = AnswerWatch::default();
        parts.extensions.insert(principal.clone());
        parts.extensions.insert(answer.clone());
        // The response carries the call's answer: when the client drops it, or hangs up while
        // the answer is awaited (see `answer`), the call is cancelled (its executor kills what
        // it started).
        let guard = answer.0.drop_guard();
        let request = Request::from_parts(parts, Full::new(bytes));
        let response = match beginning {
            Some(reservation) => self.begin(request, reservation, principal).await,
            None => self.mcp.handle(request).await,
        };
        if let Some(ended) = &session
            && method == Method::DELETE
            && response.status().is_success()
        {
            self.ledger.forget(ended);
        }
        let response = if method == Method::POST {
            answer::settle(response).await
        } else {
            response
        };
        response.map(|body| answer::keeping(body, (guard, busy)))
    }

    /// Answers an `initialize` that has a slot, and gives the slot to the session it begins.
    /// On a task of its own, so that a client hanging up halfway cannot leave a session
    /// that rmcp holds and the ledger does not know.
    async fn begin(
        self: &Arc<Self>,
        mut request: Request<Full<Bytes>>,
        reservation: Reservation,
        principal: Principal,
    ) -> Response<Body> {
        // The session's handler leaves its state here, for the calls answered directly.
        let registration = Registration::default();
        request.extensions_mut().insert(registration.clone());
        let front = Arc::clone(self);
        let task = tokio::spawn(async move {
            let response = front.mcp.handle(request).await;
            if let Some(begun) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                let handler = registration.0.get().cloned().unwrap_or_default();
                reservation.open(begun, principal, handler);
            }
            response
        });
        match task.await {
            Ok(response) => response,
            Err(_) => plain(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal error: the session could not be begun",
            ),
        }
    }

    /// Whether `Host` names this server, by the rule the approval console follows too (see
    /// [`toolgate_edge::loopback`]); a header that is not text names nothing.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        loopback::is_own_host(host, &self.hosts)
    }

    /// The request's principal: its token's, or the anonymous one for a request without any.
    fn principal(&self, headers: &HeaderMap) -> Option<Principal> {
        match headers.get(AUTHORIZATION) {
            Some(value) => self
                .options
                .tokens
                .authorize(Some(value.as_bytes()))
                .cloned(),
            None => self.options.dangerous_anonymous.clone(),
        }
    }
}

/// An absent `Origin`, or a loopback one; one that is not text is neither.
fn origin_allowed(headers: &HeaderMap) -> bool {
    match headers.get(ORIGIN) {
        None => true,
        Some(origin) => origin
            .to_str()
            .is_ok_and(|origin| loopback::is_loopback_origin(Some(origin))),
    }
}

/// HTTP 503 with the JSON-RPC error answering the refused `initialize` `id`, and when to try
/// again.
fn refused(refusal: &Refusal, id: &RequestId) -> Response<Body> {
    let body = serde_json::to_vec(&refusal.body(Some(id))).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    headers.insert(
        RETRY_AFTER,
        http::HeaderValue::from(refusal.retry_after_secs()),
    );
    response
}

fn plain(status: StatusCode, text: &'static str) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())).boxed());
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_that_are_not_text_fail_the_origin_rule() {
        assert!(origin_allowed(&HeaderMap::new()));
        let mut headers = HeaderMap::new();
        headers.insert(ORIGIN, http::HeaderValue::from_static("http://localhost:1"));
        assert!(origin_allowed(&headers));
        headers.insert(
            ORIGIN,
            http::HeaderValue::from_bytes(b"http://\xff").unwrap(),
        );
        assert!(!origin_allowed(&headers));
        headers.insert(
            ORIGIN,
            http::HeaderValue::from_static("http://evil.example"),
        );
        assert!(!origin_allowed(&headers));
    }

    #[test]
    fn non_loopback_binds_are_refused_unless_dangerous() {
        let lan: SocketAddr = "192.0.2.7:0".parse().unwrap();
        assert!(matches!(bind(lan, false), Err(HttpError::NotLoopback(_))));
        let listener = bind("127.0.0.1:0".parse().unwrap(), false).unwrap();
        assert!(listener.local_addr().unwrap().ip().is_loopback());
    }
}
