//! The proxy's connections: accept, read a request with hyper, decide, then tunnel or forward.
//!
//! Every request is decided the same way before any byte reaches a destination: the target
//! parses ([`Target`]), is on the allowlist, is not the proxy itself, and every address it
//! resolves to is public ([`classify`]). The connection then goes to one of those checked
//! addresses. A CONNECT is answered `200` and the tunnel's first bytes must be a ClientHello
//! naming the CONNECT host; only then is the destination dialled and the ClientHello sent on.

use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};

use crate::ProxySpec;
use crate::address::classify;
use crate::hello::{self, HelloError};
use crate::host::{Host, Target};
use crate::report::{Ledger, Refusal};

/// The header that carries a refusal's code.
pub const REFUSAL_HEADER: &str = "x-toolgate-refused";

type Body = Either<Full<Bytes>, Incoming>;

/// What every connection task shares.
pub(crate) struct Shared {
    pub(crate) spec: ProxySpec,
    pub(crate) local: SocketAddr,
    pub(crate) ledger: Arc<Ledger>,
}

/// A request refused before anything was sent on.
struct Refuse(Refusal);

impl From<Refusal> for Refuse {
    fn from(refusal: Refusal) -> Self {
        Self(refusal)
    }
}

pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
) {
    let permits = Arc::new(Semaphore::new(shared.spec.limits.max_connections));
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => match Arc::clone(&permits).try_acquire_owned() {
                    Ok(permit) => {
                        tokio::spawn(serve(stream, Arc::clone(&shared), Arc::new(permit)));
                    }
                    Err(_) => {
                        tokio::spawn(refuse_connection(stream, Arc::clone(&shared)));
                    }
                },
                // Out of descriptors, most likely: give the tasks that hold them time to end
                // rather than spinning on the error.
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            },
        }
    }
}

/// Answers a connection beyond the limit with a 403 without reading its request.
async fn refuse_connection(mut stream: TcpStream, shared: Arc<Shared>) {
    let refusal = Refusal::TooManyConnections;
    shared.ledger.refuse("", "", refusal.clone());
    let body = format!("toolgate proxy refused: {refusal}\n");
    let head = format!(
        "HTTP/1.1 403 Forbidden\r\n{REFUSAL_HEADER}: {}\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        refusal.code(),
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

async fn serve(stream: TcpStream, shared: Arc<Shared>, permit: Arc<OwnedSemaphorePermit>) {
    let limits = shared.spec.limits.clone();
    let service_shared = Arc::clone(&shared);
    let service = service_fn(move |request| {
        handle(request, Arc::clone(&service_shared), Arc::clone(&permit))
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout)
        .max_buf_size(limits.header_buffer())
        .max_headers(limits.max_headers);
    let connection = builder
        .serve_connection(TokioIo::new(stream), service)
        .with_upgrades();
    if let Err(error) = connection.await {
        if error.is_parse_too_large() {
            shared.ledger.refuse("", "", Refusal::HeadersTooLarge);
        } else if error.is_parse() {
            shared.ledger.refuse("", "", Refusal::BadRequest);
        }
    }
}

async fn handle(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    permit: Arc<OwnedSemaphorePermit>,
) -> Result<Response<Body>, Infallible> {
    let method = request.method().to_string();
    let target = request.uri().to_string();
    let outcome = if request.method() == Method::CONNECT {
        connect(request, Arc::clone(&shared), permit).await
    } else {
        forward(request, &shared).await
    };
    Ok(match outcome {
        Ok(response) => response,
        Err(Refuse(refusal)) => {
            let status = match refusal {
                Refusal::UpstreamUnreachable => StatusCode::BAD_GATEWAY,
                _ => StatusCode::FORBIDDEN,
            };
            let response = refusal_response(status, &refusal);
            shared.ledger.refuse(&method, &target, refusal);
            response
        }
    })
}

fn refusal_response(status: StatusCode, refusal: &Refusal) -> Response<Body> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(format!(
        "toolgate proxy refused: {refusal}\n"
    )))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(REFUSAL_HEADER, HeaderValue::from_static(refusal.code()));
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

/// A CONNECT: decide, answer 200, then check the ClientHello in a task of its own.
async fn connect(
    request: Request<Incoming>,
    shared: Arc<Shared>,
    permit: Arc<OwnedSemaphorePermit>,
) -> Result<Response<Body>, Refuse> {
    let authority = request
        .uri()
        .authority()
        .filter(|_| request.uri().scheme().is_none())
        .ok_or(Refusal::InvalidTarget)?;
    let target = parse_authority(authority.as_str(), None)?;
    let addresses = decide(&target, &shared).await?;
    let upgrade = hyper::upgrade::on(request);
    tokio::spawn(async move {
        let _permit = permit;
        let idle = shared.spec.limits.idle_timeout;
        let Ok(Ok(upgraded)) = tokio::time::timeout(idle, upgrade).await else {
            return;
        };
        tunnel(TokioIo::new(upgraded), target, addresses, &shared).await;
    });
    Ok(Response::new(Either::Left(Full::new(Bytes::new()))))
}

async fn tunnel<C>(mut client: C, target: Target, addresses: Vec<SocketAddr>, shared: &Shared)
where
    C: AsyncRead + AsyncWrite + Unpin,
{
    let ledger = &shared.ledger;
    let idle = shared.spec.limits.idle_timeout;
    let shown = target.to_string();
    let hello = match read_hello(&mut client, &target, idle).await {
        Ok(hello) => hello,
        Err(refusal) => {
            ledger.refuse("CONNECT", &shown, refusal);
            let _ = client.shutdown().await;
            return;
        }
    };
    let activity = Arc::new(Activity::new());
    let Some(upstream) = dial(&addresses, shared).await else {
        ledger.refuse("CONNECT", &shown, Refusal::UpstreamUnreachable);
        let _ = client.shutdown().await;
        return;
    };
    ledger.allow("CONNECT", shown);
    let mut upstream = Metered::new(upstream, Arc::clone(ledger), Arc::clone(&activity));
    if upstream.write_all(&hello).await.is_err() {
        return;
    }
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
        () = activity.idle_for(idle) => {}
    }
}

/// Reads the tunnel's first bytes until they hold a ClientHello, and checks its server name.
async fn read_hello<C>(client: &mut C, target: &Target, idle: Duration) -> Result<Vec<u8>, Refusal>
where
    C: AsyncRead + Unpin,
{
    let mut buffer = Vec::new();
    let deadline = tokio::time::Instant::now() + idle;
    loop {
        match hello::server_name(&buffer) {
            Ok(name) => {
                let matches = match (Host::parse(&name), &target.host) {
                    (Ok(Host::Name(sent)), Host::Name(host)) => sent == *host,
                    _ => false,
                };
                if !matches {
                    let server_name = name.chars().take(255).collect();
                    return Err(Refusal::ServerNameMismatch { server_name });
                }
                return Ok(buffer);
            }
            Err(HelloError::Incomplete) => {}
            Err(error) => return Err(Refusal::from_hello(&error)),
        }
        // A record header plus one maximal record at most per read; the parser refuses
        // anything past `MAX_HELLO` long before the buffer grows further.
        let mut chunk = vec![0u8; 16 * 1024 + 5];
        let read = tokio::time::timeout_at(deadline, client.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(Refusal::NotTls),
            Ok(Ok(n)) => buffer.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(_) => return Err(Refusal::HelloTimeout),
        }
        if buffer.len() > hello::MAX_HELLO + 1024 {
            return Err(Refusal::NotTls);
        }
    }
}

/// A plain HTTP request in absolute form: decide, then forward it to the checked address.
async fn forward(request: Request<Incoming>, shared: &Shared) -> Result<Response<Body>, Refuse> {
    let uri = request.uri();
    let authority = match (uri.scheme_str(), uri.authority()) {
        (Some("http"), Some(authority)) => authority,
        (Some(_), Some(_)) => return Err(Refusal::UnsupportedScheme.into()),
        _ => return Err(Refusal::NotAbsoluteForm.into()),
    };
    let target = parse_authority(authority.as_str(), Some(80))?;
    let mut hosts = request.headers().get_all(header::HOST).iter();
    let host_header = match (hosts.next(), hosts.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .and_then(|text| parse_authority(text, Some(80)).ok()),
        _ => None,
    };
    if host_header.as_ref() != Some(&target) {
        return Err(Refusal::HostHeaderMismatch.into());
    }
    let addresses = decide(&target, shared).await?;
    let upstream = dial(&addresses, shared)
        .await
        .ok_or(Refusal::UpstreamUnreachable)?;
    let activity = Arc::new(Activity::new());
    let upstream = Metered::new(upstream, Arc::clone(&shared.ledger), Arc::clone(&activity));
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(|_| Refusal::UpstreamUnreachable)?;
    let idle = shared.spec.limits.idle_timeout;
    tokio::spawn(async move {
        tokio::select! {
            _ = connection => {}
            () = activity.idle_for(idle) => {}
        }
    });

    let method = request.method().to_string();
    let (mut parts, body) = request.into_parts();
    let origin_form = parts
        .uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .parse::<Uri>()
        .map_err(|_| Refusal::BadRequest)?;
    parts.uri = origin_form;
    parts.version = http::Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    shared.ledger.allow(&method, target.to_string());
    let response = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|_| Refusal::UpstreamUnreachable)?;
    let (mut parts, body) = response.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, Either::Right(body)))
}

/// Removes the headers that concern one connection only (RFC 9110, section 7.6.1), and the
/// proxy's own, so they neither reach the destination nor come back from it.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    // With the chunked framing gone, a Content-Length beside it would be believed; hyper frames
    // the body again from what it reads.
    if headers.remove(header::TRANSFER_ENCODING).is_some() {
        headers.remove(header::CONTENT_LENGTH);
    }
    for name in [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::UPGRADE,
    ] {
        headers.remove(name);
    }
    for name in ["keep-alive", "proxy-connection"] {
        headers.remove(name);
    }
}

fn parse_authority(text: &str, default_port: Option<u16>) -> Result<Target, Refusal> {
    // Credentials in an authority (`user@host`) would be forwarded to someone; nothing needs them.
    if text.contains('@') {
        return Err(Refusal::InvalidTarget);
    }
    Target::parse(text, default_port).map_err(|_| Refusal::InvalidTarget)
}

/// The decision shared by CONNECT and plain HTTP: allowlist, resolution, address checks.
async fn decide(target: &Target, shared: &Shared) -> Result<Vec<SocketAddr>, Refusal> {
    // The proxy itself is named first, whatever the allowlist says, so the reason is plain.
    if let Host::Ip(ip) = target.host
        && is_proxy_itself(SocketAddr::new(ip, target.port), shared.local)
    {
        return Err(Refusal::ProxyItself);
    }
    if !shared
        .spec
        .allow
        .iter()
        .any(|pattern| pattern.allows(target))
    {
        return Err(Refusal::HostNotAllowed);
    }
    let ips = match &target.host {
        Host::Ip(ip) => vec![*ip],
        Host::Name(name) => resolve(name, shared).await?,
    };
    if ips.is_empty() {
        return Err(Refusal::ResolveFailed);
    }
    let addresses: Vec<SocketAddr> = ips
        .iter()
        .map(|ip| SocketAddr::new(*ip, target.port))
        .collect();
    if addresses
        .iter()
        .any(|address| is_proxy_itself(*address, shared.local))
    {
        return Err(Refusal::ProxyItself);
    }
    // Every answer must be public, not just one: a name that answers with a public and a
    // private address is a name someone is playing with.
    for ip in &ips {
        let class = classify(*ip);
        if !class.is_public() {
            return Err(Refusal::AddressRefused {
                address: *ip,
                class,
            });
        }
    }
    Ok(addresses)
}

/// Whether `address` is the proxy's listener, in any spelling of loopback or unspecified.
fn is_proxy_itself(address: SocketAddr, local: SocketAddr) -> bool {
    let ip = match address.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    address.port() == local.port() && (ip == local.ip() || ip.is_loopback() || ip.is_unspecified())
}

async fn resolve(name: &str, shared: &Shared) -> Result<Vec<IpAddr>, Refusal> {
    let resolver = Arc::clone(&shared.spec.resolver);
    let owned = name.to_owned();
    let lookup = tokio::task::spawn_blocking(move || resolver.resolve(&owned));
    match tokio::time::timeout(shared.spec.limits.resolve_timeout, lookup).await {
        Ok(Ok(Ok(ips))) => Ok(ips),
        _ => Err(Refusal::ResolveFailed),
    }
}

/// Connects to the first checked address that answers.
async fn dial(addresses: &[SocketAddr], shared: &Shared) -> Option<TcpStream> {
    let timeout = shared.spec.limits.connect_timeout;
    for address in addresses {
        let connecting = shared.spec.connector.connect(*address);
        if let Ok(Ok(stream)) = tokio::time::timeout(timeout, connecting).await {
            return Some(stream);
        }
    }
    None
}

/// When a connection last moved a byte.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_ms.store(now, Ordering::Relaxed);
    }

    /// Completes once nothing has moved for `idle`.
    async fn idle_for(&self, idle: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.start.elapsed().saturating_sub(last);
            match idle.checked_sub(quiet) {
                Some(left) if !left.is_zero() => tokio::time::sleep(left).await,
                _ => return,
            }
        }
    }
}

/// A destination connection that counts bytes into the ledger and marks activity.
struct Metered {
    inner: TcpStream,
    ledger: Arc<Ledger>,
    activity: Arc<Activity>,
}

impl Metered {
    fn new(inner: TcpStream, ledger: Arc<Ledger>, activity: Arc<Activity>) -> Self {
        activity.touch();
        Self {
            inner,
            ledger,
            activity,
        }
    }
}

impl AsyncRead for Metered {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let read = buf.filled().len().saturating_sub(before);
        this.ledger
            .bytes_down
            .fetch_add(u64::try_from(read).unwrap_or(u64::MAX), Ordering::Relaxed);
        this.activity.touch();
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Metered {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = ready!(Pin::new(&mut this.inner).poll_write(cx, buf))?;
        this.ledger.bytes_up.fetch_add(
            u64::try_from(written).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        this.activity.touch();
        Poll::Ready(Ok(written))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_are_removed() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic x"),
            ("proxy-connection", "keep-alive"),
            ("transfer-encoding", "chunked"),
            ("content-length", "5"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
        ] {
            headers.append(name, HeaderValue::from_static(value));
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, ["accept"]);
    }

    #[test]
    fn the_proxy_itself_in_any_spelling() {
        let local: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        for (address, expected) in [
            ("127.0.0.1:4000", true),
            ("127.0.0.2:4000", true),
            ("0.0.0.0:4000", true),
            ("[::1]:4000", true),
            ("[::ffff:127.0.0.1]:4000", true),
            ("127.0.0.1:4001", false),
            ("203.0.113.5:4000", false),
        ] {
            let address: SocketAddr = address.parse().unwrap();
            assert_eq!(is_proxy_itself(address, local), expected, "{address}");
        }
    }
}
