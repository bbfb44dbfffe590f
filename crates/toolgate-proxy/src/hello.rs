//! The server name of a TLS ClientHello, read from the first bytes of a tunnel.
//!
//! After a CONNECT the proxy sees the client's first bytes before anything reaches the
//! destination. They must be TLS handshake records carrying one ClientHello whose server name
//! (SNI) is the CONNECT host; otherwise the tunnel is closed, so a tunnel cannot carry another
//! protocol, another proxy request or a TLS session to a different name behind an allowed one.
//!
//! The parser is small and strict on purpose: every length is checked against what holds it,
//! every vector must be consumed exactly, a duplicate extension or a second host name is an
//! error, and the whole ClientHello must fit in [`MAX_HELLO`] bytes (fragmented over several
//! records if the client likes). It only reads; it never allocates more than the handshake
//! message it was given.

/// The largest ClientHello the proxy reads, handshake header included. Real ones are a few
/// kilobytes, post-quantum key shares included.
pub const MAX_HELLO: usize = 64 * 1024;

/// The largest TLS plaintext record (RFC 8446, section 5.1).
const MAX_RECORD: usize = 1 << 14;
const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;
const EXTENSION_SERVER_NAME: u16 = 0;
const NAME_TYPE_HOST: u8 = 0;

/// Why the first bytes of a tunnel are not a ClientHello with a server name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloError {
    /// More bytes are needed to decide.
    #[error("incomplete client hello")]
    Incomplete,
    /// The bytes are not a TLS handshake.
    #[error("not tls")]
    NotTls,
    /// A TLS handshake, but its first message is not a ClientHello.
    #[error("handshake does not start with a client hello")]
    NotClientHello,
    /// A ClientHello that breaks its own grammar or the proxy's bounds.
    #[error("malformed client hello: {0}")]
    Malformed(&'static str),
    /// A well-formed ClientHello without a host name.
    #[error("client hello names no server")]
    NoServerName,
}

/// Reads the SNI host name from `bytes`, the start of what a client sent into a tunnel.
///
/// Returns [`HelloError::Incomplete`] while `bytes` could still grow into a valid ClientHello;
/// any other error is final. The name is returned as sent (not yet normalized).
pub fn server_name(bytes: &[u8]) -> Result<String, HelloError> {
    // Fail as early as possible on the first byte, so a plain-text request is refused without
    // waiting for more of it.
    match bytes.first() {
        None => return Err(HelloError::Incomplete),
        Some(&CONTENT_HANDSHAKE) => {}
        Some(_) => return Err(HelloError::NotTls),
    }
    let message = handshake_message(bytes)?;
    let hello = message.as_deref().ok_or(HelloError::Incomplete)?;
    parse_client_hello(hello).map(str::to_owned)
}

/// Gathers the first handshake message from consecutive handshake records; `None` while it is
/// still incomplete. Returns the message body without its four-byte header.
fn handshake_message(bytes: &[u8]) -> Result<Option<Vec<u8>>, HelloError> {
    let mut records = Reader::new(bytes);
    let mut message: Vec<u8> = Vec::new();
    loop {
        let Some(header) = records.take(5) else {
            return Ok(None);
        };
        let mut header = Reader::new(header);
        let content_type = header.u8().ok_or(HelloError::NotTls)?;
        let major = header.u8().ok_or(HelloError::NotTls)?;
        let _minor = header.u8().ok_or(HelloError::NotTls)?;
        let length = usize::from(header.u16().ok_or(HelloError::NotTls)?);
        if content_type != CONTENT_HANDSHAKE || major != 3 {
            return Err(HelloError::NotTls);
        }
        if length == 0 || length > MAX_RECORD {
            return Err(HelloError::Malformed("record length"));
        }
        let Some(fragment) = records.take(length) else {
            return Ok(None);
        };
        if message.len() + fragment.len() > MAX_HELLO {
            return Err(HelloError::Malformed("client hello too large"));
        }
        message.extend_from_slice(fragment);
        let mut head = Reader::new(&message);
        let (Some(kind), Some(body_len)) = (head.u8(), head.u24()) else {
            continue;
        };
        if kind != HANDSHAKE_CLIENT_HELLO {
            return Err(HelloError::NotClientHello);
        }
        if body_len + 4 > MAX_HELLO {
            return Err(HelloError::Malformed("client hello too large"));
        }
        match message.len().cmp(&(body_len + 4)) {
            std::cmp::Ordering::Less => continue,
            // Nothing else may share the ClientHello's records: the server has not answered
            // yet, so a client has nothing more to say in the handshake.
            std::cmp::Ordering::Greater => {
                return Err(HelloError::Malformed("data after the client hello"));
            }
            std::cmp::Ordering::Equal => {
                message.drain(..4);
                return Ok(Some(message));
            }
        }
    }
}

/// Parses a ClientHello body (RFC 8446, section 4.1.2) down to its server name.
fn parse_client_hello(body: &[u8]) -> Result<&str, HelloError> {
    let bad = HelloError::Malformed;
    let mut hello = Reader::new(body);
    let _legacy_version = hello.u16().ok_or(bad("version"))?;
    hello.take(32).ok_or(bad("random"))?;
    let session_id = hello.vec8().ok_or(bad("session id"))?;
    if session_id.len() > 32 {
        return Err(bad("session id"));
    }
    let suites = hello.vec16().ok_or(bad("cipher suites"))?;
    if suites.is_empty() || suites.len() % 2 != 0 {
        return Err(bad("cipher suites"));
    }
    let compression = hello.vec8().ok_or(bad("compression methods"))?;
    if compression.is_empty() {
        return Err(bad("compression methods"));
    }
    if hello.is_empty() {
        // No extensions at all (allowed before TLS 1.3), hence no server name.
        return Err(HelloError::NoServerName);
    }
    let mut extensions = Reader::new(hello.vec16().ok_or(bad("extensions"))?);
    if !hello.is_empty() {
        return Err(bad("data after the extensions"));
    }
    let mut seen: Vec<u16> = Vec::new();
    let mut name = None;
    while !extensions.is_empty() {
        let kind = extensions.u16().ok_or(bad("extension"))?;
        let data = extensions.vec16().ok_or(bad("extension"))?;
        if seen.contains(&kind) {
            return Err(bad("duplicate extension"));
        }
        seen.push(kind);
        if kind == EXTENSION_SERVER_NAME {
            name = Some(parse_server_name(data)?);
        }
    }
    name.ok_or(HelloError::NoServerName)
}

/// Parses the `server_name` extension (RFC 6066, section 3): exactly one host name.
fn parse_server_name(data: &[u8]) -> Result<&str, HelloError> {
    let bad = HelloError::Malformed;
    let mut outer = Reader::new(data);
    let mut list = Reader::new(outer.vec16().ok_or(bad("server name list"))?);
    if !outer.is_empty() || list.is_empty() {
        return Err(bad("server name list"));
    }
    let mut host = None;
    while !list.is_empty() {
        let kind = list.u8().ok_or(bad("server name"))?;
        let name = list.vec16().ok_or(bad("server name"))?;
        if kind != NAME_TYPE_HOST {
            // Other name types were never defined; their length still has to hold.
            continue;
        }
        if host.is_some() {
            return Err(bad("two host names"));
        }
        if name.is_empty() || !name.is_ascii() {
            return Err(bad("host name"));
        }
        host = Some(std::str::from_utf8(name).map_err(|_| bad("host name"))?);
    }
    host.ok_or(HelloError::NoServerName)
}

/// A cursor over a byte slice that never reads past its end.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.rest.split_at_checked(n)?;
        self.rest = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    fn u16(&mut self) -> Option<u16> {
        let bytes: [u8; 2] = self.take(2)?.try_into().ok()?;
        Some(u16::from_be_bytes(bytes))
    }

    fn u24(&mut self) -> Option<usize> {
        let [a, b, c]: [u8; 3] = self.take(3)?.try_into().ok()?;
        Some(usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c))
    }

    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}

/// Builds a syntactically valid ClientHello carrying `names` as host names, with `extra`
/// extensions after the server name extension, in one record.
#[cfg(test)]
fn build_client_hello(names: &[&str], extra: &[(u16, Vec<u8>)]) -> Vec<u8> {
    fn vec16(bytes: &[u8]) -> Vec<u8> {
        let len = u16::try_from(bytes.len()).unwrap_or(u16::MAX);
        let mut out = len.to_be_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }
    let mut extensions = Vec::new();
    if !names.is_empty() {
        let mut list = Vec::new();
        for name in names {
            list.push(NAME_TYPE_HOST);
            list.extend(vec16(name.as_bytes()));
        }
        extensions.extend(EXTENSION_SERVER_NAME.to_be_bytes());
        extensions.extend(vec16(&vec16(&list)));
    }
    for (kind, data) in extra {
        extensions.extend(kind.to_be_bytes());
        extensions.extend(vec16(data));
    }
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.push(0); // no session id
    body.extend(vec16(&[0x13, 0x01, 0x13, 0x02]));
    body.extend([1, 0]); // null compression
    body.extend(vec16(&extensions));
    let len = u32::try_from(body.len()).unwrap_or(0).to_be_bytes();
    let mut message = vec![HANDSHAKE_CLIENT_HELLO];
    message.extend(len.get(1..).unwrap_or_default());
    message.extend(body);
    let mut record = vec![CONTENT_HANDSHAKE, 3, 1];
    record.extend(vec16(&message));
    record
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(name: &str) -> Vec<u8> {
        build_client_hello(&[name], &[(0x002b, vec![2, 3, 4])])
    }

    /// Splits one record into two records carrying the handshake message in two fragments.
    fn fragmented(record: &[u8], at: usize) -> Vec<u8> {
        let message = &record[5..];
        let (a, b) = message.split_at(at);
        let mut out = Vec::new();
        for part in [a, b] {
            out.extend([22, 3, 1]);
            out.extend((part.len() as u16).to_be_bytes());
            out.extend(part);
        }
        out
    }

    #[test]
    fn reads_the_server_name() {
        assert_eq!(
            server_name(&hello("allowed.test")).as_deref(),
            Ok("allowed.test")
        );
        assert_eq!(
            server_name(&fragmented(&hello("allowed.test"), 3)).as_deref(),
            Ok("allowed.test")
        );
        assert_eq!(
            server_name(&fragmented(&hello("allowed.test"), 40)).as_deref(),
            Ok("allowed.test")
        );
        // Bytes after the ClientHello's records (early data, say) are not its business.
        let mut more = hello("allowed.test");
        more.extend([23, 3, 3, 0, 1, 0]);
        assert_eq!(server_name(&more).as_deref(), Ok("allowed.test"));
    }

    #[test]
    fn every_prefix_is_incomplete_and_never_panics() {
        let full = hello("allowed.test");
        for n in 0..full.len() {
            assert_eq!(
                server_name(&full[..n]),
                Err(HelloError::Incomplete),
                "prefix {n}"
            );
        }
    }

    #[test]
    fn hostile_inputs_fail_closed() {
        let full = hello("allowed.test");
        let table: Vec<(&str, Vec<u8>, HelloError)> = vec![
            (
                "plain http",
                b"GET / HTTP/1.1\r\n\r\n".to_vec(),
                HelloError::NotTls,
            ),
            (
                "a connect",
                b"CONNECT a:443 HTTP/1.1\r\n\r\n".to_vec(),
                HelloError::NotTls,
            ),
            ("ssh banner", b"SSH-2.0-x\r\n".to_vec(), HelloError::NotTls),
            (
                "application data",
                vec![23, 3, 3, 0, 5, 1, 2, 3, 4, 5],
                HelloError::NotTls,
            ),
            (
                "sslv2-ish",
                vec![22, 2, 0, 0, 5, 1, 2, 3, 4, 5],
                HelloError::NotTls,
            ),
            (
                "empty record",
                vec![22, 3, 1, 0, 0],
                HelloError::Malformed("record length"),
            ),
            (
                "huge record",
                vec![22, 3, 1, 0x40, 0x01],
                HelloError::Malformed("record length"),
            ),
            (
                "server hello",
                vec![22, 3, 3, 0, 4, 2, 0, 0, 0],
                HelloError::NotClientHello,
            ),
            (
                "huge hello",
                vec![22, 3, 3, 0, 4, 1, 0xff, 0xff, 0xff],
                HelloError::Malformed("client hello too large"),
            ),
            (
                "no extensions",
                {
                    let mut body = vec![3, 3];
                    body.extend([0; 32]);
                    body.extend([0, 0, 2, 0x13, 0x01, 1, 0]);
                    wrap(&body)
                },
                HelloError::NoServerName,
            ),
            (
                "no sni",
                build_client_hello(&[], &[(0x002b, vec![2, 3, 4])]),
                HelloError::NoServerName,
            ),
            (
                "two names",
                build_client_hello(&["a.test", "b.test"], &[]),
                HelloError::Malformed("two host names"),
            ),
            (
                "empty name",
                build_client_hello(&[""], &[]),
                HelloError::Malformed("host name"),
            ),
            (
                "non-ascii name",
                build_client_hello(&["é.test"], &[]),
                HelloError::Malformed("host name"),
            ),
            (
                "duplicate extension",
                build_client_hello(&["a.test"], &[(0, vec![0, 0])]),
                HelloError::Malformed("duplicate extension"),
            ),
            (
                "trailing data",
                {
                    let mut r = full.clone();
                    r.push(0);
                    let len = u16::from_be_bytes([r[3], r[4]]) + 1;
                    r[3..5].copy_from_slice(&len.to_be_bytes());
                    r
                },
                HelloError::Malformed("data after the client hello"),
            ),
        ];
        for (what, bytes, expected) in table {
            assert_eq!(server_name(&bytes), Err(expected), "{what}");
        }
    }

    /// Wraps a ClientHello body in a handshake header and a record.
    fn wrap(body: &[u8]) -> Vec<u8> {
        let mut message = vec![1, 0, 0, body.len() as u8];
        message.extend(body);
        let mut record = vec![22, 3, 1, 0, message.len() as u8];
        record.extend(message);
        record
    }

    #[test]
    fn lengths_that_lie_are_refused() {
        // Shrink or grow every two-byte length field inside the handshake body in turn: each
        // result must be an error or the original name, never a panic or another name.
        let full = hello("allowed.test");
        for i in 9..full.len() - 1 {
            for delta in [1i32, -1, 0x100, -0x100] {
                let mut bytes = full.clone();
                let v = i32::from(u16::from_be_bytes([bytes[i], bytes[i + 1]])) + delta;
                if !(0..=0xffff).contains(&v) {
                    continue;
                }
                bytes[i..i + 2].copy_from_slice(&(v as u16).to_be_bytes());
                if let Ok(name) = server_name(&bytes) {
                    assert!(
                        name == "allowed.test" || name.len() == 12,
                        "{i} {delta}: {name}"
                    );
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        // A small deterministic generator stands in for a fuzzer run.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let full = hello("allowed.test");
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut bytes = full.clone();
            let at = (state as usize) % bytes.len();
            bytes[at] = (state >> 32) as u8;
            let cut = ((state >> 40) as usize) % (bytes.len() + 1);
            let _ = server_name(&bytes[..cut]);
        }
    }
}
