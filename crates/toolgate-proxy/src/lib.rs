//! toolgate's filtering HTTP and HTTPS proxy: the one TCP destination a confined command may
//! reach when its network mode is `proxy`.
//!
//! A [`Proxy`] serves one call. It listens on `127.0.0.1` on an ephemeral port, on a thread
//! and runtime of its own, and is announced to the command through `HTTP_PROXY` and
//! `HTTPS_PROXY` ([`Proxy::env`]). For each request it decides, before any byte reaches a
//! destination:
//!
//! - the target is on the allowlist ([`HostPattern`]: `example.com`, `*.example.com`, ports 80
//!   and 443 unless an entry names its own);
//! - the proxy resolves the name itself ([`Resolver`]) and every address it gets is public
//!   unicast ([`classify`]): loopback, private, link-local, shared, multicast, reserved, unique
//!   local and cloud metadata addresses are refused whatever the name, and so is an address
//!   literal of one, in any IPv6 spelling that carries it;
//! - the connection goes to an address that was checked, through the [`Connector`], never by
//!   resolving the name again;
//! - a CONNECT tunnel must start with a TLS ClientHello whose server name is the CONNECT host,
//!   or it is closed before the destination is dialled;
//! - a plain HTTP request must be in absolute form (`GET http://host/path`) with a `Host`
//!   header naming the same host; it is forwarded without its hop-by-hop headers.
//!
//! A refused request is answered `403 Forbidden` with its reason's code in the
//! `x-toolgate-refused` header and a short text body, and counted; a tunnel refused after its
//! `200` is closed. [`Proxy::report`] and [`Proxy::stop`] give the call's [`ProxyReport`]:
//! bytes to and from destinations, and the requests allowed and refused, with reasons.
//!
//! ```
//! use std::io::{Read, Write};
//! use toolgate_proxy::{HostPattern, Proxy, ProxySpec, Refusal};
//!
//! let spec = ProxySpec::new(vec![HostPattern::parse("*.crates.io").unwrap()]);
//! let proxy = Proxy::start(spec).unwrap();
//! let mut client = std::net::TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
//! client
//!     .write_all(b"CONNECT elsewhere.test:443 HTTP/1.1\r\nhost: elsewhere.test:443\r\n\r\n")
//!     .unwrap();
//! let mut answer = [0; 12];
//! client.read_exact(&mut answer).unwrap();
//! assert_eq!(&answer, b"HTTP/1.1 403");
//! drop(client);
//! let report = proxy.stop();
//! assert_eq!(report.refused[0].reason, Refusal::HostNotAllowed);
//! assert_eq!(report.bytes_up, 0);
//! ```
//!
//! `toolgate-tools` starts one for each command whose call names hosts; the sandbox allows that
//! command TCP connections to the proxy's port alone.

mod address;
mod hello;
mod host;
mod net;
mod report;
mod server;

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

pub use address::{AddressClass, classify};
pub use hello::{HelloError, MAX_HELLO, server_name};
pub use host::{Host, HostError, HostPattern, Target};
pub use net::{Connecting, Connector, DirectConnector, PinnedResolver, Resolver, SystemResolver};
pub use report::{Allowed, MAX_REPORTED, ProxyReport, Refusal, Refused};
pub use server::REFUSAL_HEADER;

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The loopback listener could not be opened.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Listen(#[source] std::io::Error),
    /// The proxy's runtime or thread could not be started.
    #[error("cannot start the proxy's runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// What a proxy allows, how it resolves and connects, and its bounds.
#[derive(Clone)]
pub struct ProxySpec {
    /// The hosts the proxy lets through; empty allows nothing.
    pub allow: Vec<HostPattern>,
    /// Resolves names; [`SystemResolver`] by default.
    pub resolver: Arc<dyn Resolver>,
    /// Connects to checked addresses; [`DirectConnector`] by default. Tests replace it to send
    /// public-looking addresses to local listeners; it only ever sees addresses that passed
    /// the checks.
    pub connector: Arc<dyn Connector>,
    /// Bounds on connections and requests.
    pub limits: Limits,
}

impl ProxySpec {
    /// A proxy allowing `allow`, with the system resolver, direct connections and default
    /// limits.
    pub fn new(allow: Vec<HostPattern>) -> Self {
        Self {
            allow,
            resolver: Arc::new(SystemResolver),
            connector: Arc::new(DirectConnector),
            limits: Limits::default(),
        }
    }

    /// Replaces the resolver.
    #[must_use]
    pub fn resolver(mut self, resolver: Arc<dyn Resolver>) -> Self {
        self.resolver = resolver;
        self
    }

    /// Replaces the connector.
    #[must_use]
    pub fn connector(mut self, connector: Arc<dyn Connector>) -> Self {
        self.connector = connector;
        self
    }

    /// Replaces the limits.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

impl fmt::Debug for ProxySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let allow: Vec<String> = self.allow.iter().map(ToString::to_string).collect();
        f.debug_struct("ProxySpec")
            .field("allow", &allow)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Bounds on what one proxy serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest request head read, in bytes (hyper's buffer; at least 8 KiB).
    pub max_header_bytes: usize,
    /// The most header fields in a request.
    pub max_headers: usize,
    /// Connections served at once; one more is answered 403 `too_many_connections`.
    pub max_connections: usize,
    /// How long a connection may wait for a request head, a tunnel for its ClientHello, and
    /// an open tunnel or forwarded exchange move no byte, before it is closed.
    pub idle_timeout: Duration,
    /// How long resolving a name may take.
    pub resolve_timeout: Duration,
    /// How long connecting to a destination may take.
    pub connect_timeout: Duration,
}

/// The smallest buffer hyper accepts.
const MIN_HEADER_BUFFER: usize = 8192;

/// The longest any of the proxy's timeouts may be; longer settings are cut to it, since a
/// deadline past what `Instant` holds would overflow.
const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

impl Limits {
    fn header_buffer(&self) -> usize {
        // hyper panics below its minimum; a smaller setting means "as small as possible".
        self.max_header_bytes.max(MIN_HEADER_BUFFER)
    }

    /// The limits with every value inside what the proxy's parts accept without panicking.
    fn bounded(self) -> Self {
        Self {
            max_connections: self
                .max_connections
                .min(tokio::sync::Semaphore::MAX_PERMITS),
            idle_timeout: self.idle_timeout.min(MAX_TIMEOUT),
            resolve_timeout: self.resolve_timeout.min(MAX_TIMEOUT),
            connect_timeout: self.connect_timeout.min(MAX_TIMEOUT),
            ..self
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_header_bytes: 32 * 1024,
            max_headers: 100,
            max_connections: 64,
            idle_timeout: Duration::from_secs(60),
            resolve_timeout: Duration::from_secs(10),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A running proxy for one call. Stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    local: SocketAddr,
    ledger: Arc<report::Ledger>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// Names resolved at once.
const MAX_RESOLVER_THREADS: usize = 4;

/// How long stopping waits for resolutions still running on blocking threads.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(200);

impl Proxy {
    /// Starts a proxy on `127.0.0.1` on an ephemeral port.
    pub fn start(mut spec: ProxySpec) -> Result<Self, ProxyError> {
        spec.limits = spec.limits.bounded();
        let listener =
            std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(ProxyError::Listen)?;
        listener.set_nonblocking(true).map_err(ProxyError::Listen)?;
        let local = listener.local_addr().map_err(ProxyError::Listen)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            // Resolutions run on blocking threads and outlive their timeout; a few threads are
            // enough, and a flood of slow names then waits (and times out) instead of
            // starting hundreds of threads.
            .max_blocking_threads(MAX_RESOLVER_THREADS)
            .thread_name("toolgate-proxy")
            .build()
            .map_err(ProxyError::Runtime)?;
        let listener = {
            let _entered = runtime.enter();
            tokio::net::TcpListener::from_std(listener).map_err(ProxyError::Listen)?
        };
        let ledger = Arc::new(report::Ledger::default());
        let shared = Arc::new(server::Shared {
            spec,
            local,
            ledger: Arc::clone(&ledger),
        });
        let (stop, stopped) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("toolgate-proxy".to_owned())
            .spawn(move || {
                runtime.block_on(server::accept_loop(listener, shared, stopped));
                // Dropping the runtime ends every connection task with it.
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })
            .map_err(ProxyError::Runtime)?;
        Ok(Self {
            local,
            ledger,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The port the proxy listens on, on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.local
    }

    /// The variables that point a command at this proxy, in both the upper- and lower-case
    /// spellings programs read.
    pub fn env(&self) -> Vec<(String, String)> {
        let url = format!("http://{}", self.local);
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .into_iter()
            .map(|name| (name.to_owned(), url.clone()))
            .collect()
    }

    /// What the proxy has done so far.
    pub fn report(&self) -> ProxyReport {
        self.ledger.snapshot()
    }

    /// Stops the proxy, closing every connection, and returns its final report.
    pub fn stop(mut self) -> ProxyReport {
        self.shutdown();
        self.ledger.snapshot()
    }

    fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shutdown();
    }
}
