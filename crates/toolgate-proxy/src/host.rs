//! Host names as the proxy compares them, and the allowlist's patterns.
//!
//! Every host the proxy sees — an allowlist entry, a CONNECT target, an absolute URL, a `Host`
//! header, a TLS server name — goes through [`Host::parse`], so one spelling is compared with
//! one spelling: ASCII letters lowercased, one trailing dot dropped, IPv4 literals in dotted
//! decimal only and IPv6 literals in brackets. Non-ASCII names are refused rather than
//! converted (no IDNA), and so are numeric forms that resolvers read as addresses
//! (`127.1`, `2130706433`, `0x7f.0.0.1`), since the allowlist could not say what they mean.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why a host or a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// The text is empty.
    #[error("empty host")]
    Empty,
    /// The text holds a character outside ASCII.
    #[error("non-ascii host `{0}` (write its punycode form)")]
    NonAscii(String),
    /// The text is not a host name or an address literal.
    #[error("invalid host `{0}`")]
    Invalid(String),
    /// The port is missing, zero or not a number.
    #[error("invalid port in `{0}`")]
    Port(String),
    /// A wildcard over a single label (`*.com`): the whole of a top-level domain.
    #[error("`{0}` allows a whole top-level domain; name the domain (`*.example.com`)")]
    TooBroad(String),
}

/// A host, normalized: a lowercase DNS name without a trailing dot, or an address literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A DNS name, lowercase, without a trailing dot.
    Name(String),
    /// An IPv4 or (written in brackets) IPv6 literal.
    Ip(IpAddr),
}

/// The longest DNS name, without the trailing dot.
const MAX_NAME: usize = 253;
/// The longest DNS label.
const MAX_LABEL: usize = 63;

impl Host {
    /// Parses and normalizes a host: a DNS name, a dotted-decimal IPv4 literal, or an IPv6
    /// literal in brackets.
    pub fn parse(text: &str) -> Result<Self, HostError> {
        if text.is_empty() {
            return Err(HostError::Empty);
        }
        if !text.is_ascii() {
            return Err(HostError::NonAscii(text.to_owned()));
        }
        if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            return inner
                .parse::<Ipv6Addr>()
                .map(|ip| Self::Ip(IpAddr::V6(ip)))
                .map_err(|_| HostError::Invalid(text.to_owned()));
        }
        let name = text.strip_suffix('.').unwrap_or(text).to_ascii_lowercase();
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(HostError::Invalid(text.to_owned()));
        }
        if let Ok(ip) = name.parse::<Ipv4Addr>() {
            return Ok(Self::Ip(IpAddr::V4(ip)));
        }
        let valid_label = |label: &str| {
            !label.is_empty()
                && label.len() <= MAX_LABEL
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        };
        if !name.split('.').all(valid_label) {
            return Err(HostError::Invalid(text.to_owned()));
        }
        // A top-level label is never all digits; a name whose last label is would be read as an
        // address by some resolver (`127.1`, `0x7f.0.0.1`, `2130706433`).
        let last = name.rsplit('.').next().unwrap_or_default();
        if last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x") {
            return Err(HostError::Invalid(text.to_owned()));
        }
        Ok(Self::Name(name))
    }

    /// The name, if this host is one.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Name(name) => Some(name),
            Self::Ip(_) => None,
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// A host and port a client asked for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// The normalized host.
    pub host: Host,
    /// The port.
    pub port: u16,
}

impl Target {
    /// Parses `host:port`, or `host` alone when a default port is given.
    pub fn parse(text: &str, default_port: Option<u16>) -> Result<Self, HostError> {
        let (host, port) = split_port(text)?;
        let port = match (port, default_port) {
            (Some(port), _) => port,
            (None, Some(port)) => port,
            (None, None) => return Err(HostError::Port(text.to_owned())),
        };
        Ok(Self {
            host: Host::parse(host)?,
            port,
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Splits an optional `:port` off `text`, leaving brackets of an IPv6 literal on the host.
fn split_port(text: &str) -> Result<(&str, Option<u16>), HostError> {
    let bad_port = || HostError::Port(text.to_owned());
    let (host, port) = if text.starts_with('[') {
        match text.find(']') {
            Some(end) => {
                let (host, rest) = text.split_at(end + 1);
                match rest.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None if rest.is_empty() => (host, None),
                    None => return Err(HostError::Invalid(text.to_owned())),
                }
            }
            None => return Err(HostError::Invalid(text.to_owned())),
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        Some(port) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            match port.parse::<u16>() {
                Ok(0) | Err(_) => return Err(bad_port()),
                Ok(port) => Some(port),
            }
        }
        Some(_) => return Err(bad_port()),
        None => None,
    };
    Ok((host, port))
}

/// One allowlist entry.
///
/// Written as the operator writes it:
///
/// - `example.com` — that host only, on ports 80 and 443;
/// - `*.example.com` — any name *under* `example.com` (`api.example.com`,
///   `a.b.example.com`), not `example.com` itself, on ports 80 and 443;
/// - either with `:PORT` (`example.com:8443`, `*.example.com:8080`) — that port only;
/// - an address literal (`203.0.113.7`, `[2001:db8::1]:8443`) — allowed by the list, and then
///   judged like any resolved address, so a private or loopback literal is still refused.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HostPattern {
    host: PatternHost,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum PatternHost {
    Exact(Host),
    /// A name under this suffix (held without the `*.`).
    Under(String),
}

/// Ports a pattern without `:PORT` allows.
const WEB_PORTS: [u16; 2] = [80, 443];

impl HostPattern {
    /// Parses an allowlist entry (see the type's documentation for the forms).
    pub fn parse(text: &str) -> Result<Self, HostError> {
        let (host, port) = split_port(text)?;
        let host = match host.strip_prefix("*.") {
            Some(suffix) => match Host::parse(suffix)? {
                // A pattern asked for by a model and allowed by a hurried person should not
                // open a whole top-level domain.
                Host::Name(name) if !name.contains('.') => {
                    return Err(HostError::TooBroad(text.to_owned()));
                }
                Host::Name(name) => PatternHost::Under(name),
                Host::Ip(_) => return Err(HostError::Invalid(text.to_owned())),
            },
            None => PatternHost::Exact(Host::parse(host)?),
        };
        Ok(Self { host, port })
    }

    /// Whether this entry allows `target`.
    pub fn allows(&self, target: &Target) -> bool {
        let port_ok = match self.port {
            Some(port) => port == target.port,
            None => WEB_PORTS.contains(&target.port),
        };
        let host_ok = match (&self.host, &target.host) {
            (PatternHost::Exact(host), target) => host == target,
            (PatternHost::Under(suffix), Host::Name(name)) => name
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (PatternHost::Under(_), Host::Ip(_)) => false,
        };
        port_ok && host_ok
    }
}

impl std::str::FromStr for HostPattern {
    type Err = HostError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            PatternHost::Exact(host) => write!(f, "{host}")?,
            PatternHost::Under(suffix) => write!(f, "*.{suffix}")?,
        }
        match self.port {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_normalize_or_refuse() {
        let table: &[(&str, Option<&str>)] = &[
            ("Example.COM", Some("example.com")),
            ("example.com.", Some("example.com")),
            ("a-b_c.example.com", Some("a-b_c.example.com")),
            ("203.0.113.5", Some("203.0.113.5")),
            ("[2001:DB8::1]", Some("[2001:db8::1]")),
            ("", None),
            (".", None),
            ("example..com", None),
            ("example.com..", None),
            ("-bad.example.com", None),
            ("bad-.example.com", None),
            ("exa mple.com", None),
            ("exämple.com", None),
            ("127.1", None),
            ("2130706433", None),
            ("0x7f.0.0.1", None),
            ("1.2.3.0x7f", None),
            ("[127.0.0.1]", None),
            ("[::1", None),
            ("2001:db8::1", None),
            ("user@example.com", None),
        ];
        for (text, expected) in table {
            let got = Host::parse(text).ok().map(|h| h.to_string());
            assert_eq!(got.as_deref(), *expected, "{text:?}");
        }
        assert!(Host::parse(&format!("{}.com", "a".repeat(64))).is_err());
        assert!(Host::parse(&format!("{}com", "a.".repeat(126))).is_err());
        assert!(Host::parse(&format!("{}com.", "a.".repeat(125))).is_ok());
    }

    #[test]
    fn patterns_allow_what_they_say() {
        let table: &[(&str, &str, bool)] = &[
            ("example.com", "example.com:443", true),
            ("example.com", "EXAMPLE.com.:80", true),
            ("example.com", "example.com:8443", false),
            ("example.com", "api.example.com:443", false),
            ("example.com:8443", "example.com:8443", true),
            ("example.com:8443", "example.com:443", false),
            ("*.example.com", "api.example.com:443", true),
            ("*.example.com", "a.b.example.com:80", true),
            ("*.example.com", "example.com:443", false),
            ("*.example.com", "badexample.com:443", false),
            ("*.example.com", "example.com.evil.test:443", false),
            ("*.example.com:8080", "api.example.com:8080", true),
            ("*.example.com:8080", "api.example.com:443", false),
            ("203.0.113.7", "203.0.113.7:443", true),
            ("[2001:db8::1]:8443", "[2001:db8::1]:8443", true),
            ("*.example.com", "[2001:db8::1]:443", false),
        ];
        for (pattern, target, expected) in table {
            let pattern = HostPattern::parse(pattern).unwrap();
            let target = Target::parse(target, None).unwrap();
            assert_eq!(pattern.allows(&target), *expected, "{pattern} {target}");
        }
    }

    #[test]
    fn bad_patterns_and_targets_are_refused() {
        for text in [
            "",
            "*.",
            "*.com",
            "*.COM.",
            "*.test:8080",
            "*.*.example.com",
            "ex*.com",
            "*.203.0.113.7",
            "a.com:0",
            "a.com:x",
            "a.com:",
            "a.com:70000",
        ] {
            assert!(HostPattern::parse(text).is_err(), "{text:?}");
        }
        assert!(Target::parse("example.com", None).is_err());
        assert_eq!(Target::parse("example.com", Some(80)).unwrap().port, 80);
        assert!(Target::parse("[::1]x", None).is_err());
    }
}
