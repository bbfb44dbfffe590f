//! What the proxy did during one call: bytes each way, requests allowed and refused.

use std::fmt;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::address::AddressClass;
use crate::hello::HelloError;

/// How many requests of each kind a report keeps; the rest are only counted in
/// [`ProxyReport::omitted`].
pub const MAX_REPORTED: usize = 256;

/// Why the proxy refused a request or closed a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The target is not on the allowlist.
    HostNotAllowed,
    /// The target is not a valid `host:port`.
    InvalidTarget,
    /// The target resolved to (or is) an address the proxy never connects to.
    AddressRefused {
        /// The first refused address.
        address: IpAddr,
        /// Its class.
        class: AddressClass,
    },
    /// The target is the proxy's own listening address.
    ProxyItself,
    /// The name did not resolve, or not in time.
    ResolveFailed,
    /// A plain HTTP request not in absolute form (`GET http://host/path`).
    NotAbsoluteForm,
    /// An absolute-form request for a scheme other than `http`.
    UnsupportedScheme,
    /// The `Host` header is missing, repeated, or names another host than the URL.
    HostHeaderMismatch,
    /// The tunnel's first bytes are not a TLS ClientHello.
    NotTls,
    /// The ClientHello names no server.
    NoServerName,
    /// The ClientHello names another server than the CONNECT host.
    ServerNameMismatch {
        /// The server name the client sent, as sent.
        server_name: String,
    },
    /// The client sent no complete ClientHello in time.
    HelloTimeout,
    /// The proxy already serves as many connections as it may.
    TooManyConnections,
    /// The request's head is larger than the proxy reads.
    HeadersTooLarge,
    /// The request could not be parsed.
    BadRequest,
    /// The checked address did not accept a connection (answered 502, not 403).
    UpstreamUnreachable,
}

impl Refusal {
    /// A short stable code, sent in the `x-toolgate-refused` header.
    pub fn code(&self) -> &'static str {
        match self {
            Self::HostNotAllowed => "host_not_allowed",
            Self::InvalidTarget => "invalid_target",
            Self::AddressRefused { .. } => "address_refused",
            Self::ProxyItself => "proxy_itself",
            Self::ResolveFailed => "resolve_failed",
            Self::NotAbsoluteForm => "not_absolute_form",
            Self::UnsupportedScheme => "unsupported_scheme",
            Self::HostHeaderMismatch => "host_header_mismatch",
            Self::NotTls => "not_tls",
            Self::NoServerName => "no_server_name",
            Self::ServerNameMismatch { .. } => "server_name_mismatch",
            Self::HelloTimeout => "hello_timeout",
            Self::TooManyConnections => "too_many_connections",
            Self::HeadersTooLarge => "headers_too_large",
            Self::BadRequest => "bad_request",
            Self::UpstreamUnreachable => "upstream_unreachable",
        }
    }

    pub(crate) fn from_hello(error: &HelloError) -> Self {
        match error {
            HelloError::NoServerName => Self::NoServerName,
            HelloError::Incomplete => Self::HelloTimeout,
            HelloError::NotTls | HelloError::NotClientHello | HelloError::Malformed(_) => {
                Self::NotTls
            }
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::HostNotAllowed => f.write_str("host not on the allowlist"),
            Self::InvalidTarget => f.write_str("invalid target"),
            Self::AddressRefused { address, class } => {
                write!(f, "address `{address}` is {class}")
            }
            Self::ProxyItself => f.write_str("target is the proxy itself"),
            Self::ResolveFailed => f.write_str("name did not resolve"),
            Self::NotAbsoluteForm => f.write_str("request is not in absolute form"),
            Self::UnsupportedScheme => f.write_str("only `http` urls are forwarded"),
            Self::HostHeaderMismatch => f.write_str("host header does not match the url"),
            Self::NotTls => f.write_str("tunnel does not start with a tls client hello"),
            Self::NoServerName => f.write_str("client hello names no server"),
            Self::ServerNameMismatch { server_name } => {
                write!(f, "server name `{server_name}` is not the connect host")
            }
            Self::HelloTimeout => f.write_str("no client hello in time"),
            Self::TooManyConnections => f.write_str("too many connections"),
            Self::HeadersTooLarge => f.write_str("request head too large"),
            Self::BadRequest => f.write_str("malformed request"),
            Self::UpstreamUnreachable => f.write_str("upstream did not accept the connection"),
        }
    }
}

/// A request the proxy let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// `CONNECT`, `GET`, …
    pub method: String,
    /// The `host:port` asked for, normalized.
    pub target: String,
}

/// A request the proxy refused, or a tunnel it closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The method, when a request was read.
    pub method: String,
    /// The target as the client wrote it (bounded), or empty when none was read.
    pub target: String,
    /// Why.
    pub reason: Refusal,
}

/// What the proxy did for one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyReport {
    /// Bytes sent to destinations.
    pub bytes_up: u64,
    /// Bytes received from destinations.
    pub bytes_down: u64,
    /// Requests let through, in order, at most [`MAX_REPORTED`].
    pub allowed: Vec<Allowed>,
    /// Requests refused, in order, at most [`MAX_REPORTED`].
    pub refused: Vec<Refused>,
    /// Requests not listed because a list was full.
    pub omitted: u64,
}

/// The report as it grows, shared by the proxy's tasks.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) bytes_up: AtomicU64,
    pub(crate) bytes_down: AtomicU64,
    lists: Mutex<Lists>,
}

#[derive(Debug, Default)]
struct Lists {
    allowed: Vec<Allowed>,
    refused: Vec<Refused>,
    omitted: u64,
}

/// The longest target text a refusal keeps.
const MAX_TARGET_TEXT: usize = 300;

impl Ledger {
    fn lists(&self) -> std::sync::MutexGuard<'_, Lists> {
        // A panic elsewhere while holding the lock leaves lists that are still valid values.
        self.lists
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn allow(&self, method: &str, target: String) {
        let mut lists = self.lists();
        if lists.allowed.len() < MAX_REPORTED {
            let method = method.to_owned();
            lists.allowed.push(Allowed { method, target });
        } else {
            lists.omitted += 1;
        }
    }

    pub(crate) fn refuse(&self, method: &str, target: &str, reason: Refusal) {
        let mut lists = self.lists();
        if lists.refused.len() < MAX_REPORTED {
            let target = target.chars().take(MAX_TARGET_TEXT).collect();
            let method = method.chars().take(MAX_TARGET_TEXT).collect();
            lists.refused.push(Refused {
                method,
                target,
                reason,
            });
        } else {
            lists.omitted += 1;
        }
    }

    pub(crate) fn snapshot(&self) -> ProxyReport {
        let lists = self.lists();
        ProxyReport {
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
            allowed: lists.allowed.clone(),
            refused: lists.refused.clone(),
            omitted: lists.omitted,
        }
    }
}
