//! The proxy against a table of probes, over loopback only.
//!
//! The test's resolver answers test names with the addresses a row needs, public ones from the
//! documentation range `203.0.113.0/24`; the test's connector sends those to listeners this test
//! opens on `127.0.0.1`, and refuses every other address, so the proxy's address checks run for
//! real in every row and nothing leaves this machine. The connector records every address it is
//! asked for: a refused row must never reach it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use toolgate_proxy::{
    Connecting, Connector, HostPattern, Limits, Proxy, ProxySpec, Refusal, Resolver,
};

const ECHO_IP: &str = "203.0.113.5";
const WEB_IP: &str = "203.0.113.6";
const TIMEOUT: Duration = Duration::from_secs(10);

struct TestResolver {
    answers: HashMap<&'static str, Vec<IpAddr>>,
}

impl Resolver for TestResolver {
    fn resolve(&self, name: &str) -> io::Result<Vec<IpAddr>> {
        self.answers
            .get(name)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such test name"))
    }
}

/// Sends the documentation addresses to local listeners; refuses every other address.
struct TestConnector {
    routes: HashMap<IpAddr, SocketAddr>,
    dialled: Mutex<Vec<SocketAddr>>,
}

impl Connector for TestConnector {
    fn connect(&self, addr: SocketAddr) -> Connecting {
        self.dialled.lock().unwrap().push(addr);
        let route = self.routes.get(&addr.ip()).copied();
        Box::pin(async move {
            match route {
                Some(local) => tokio::net::TcpStream::connect(local).await,
                None => Err(io::Error::new(
                    io::ErrorKind::ConnectionRefused,
                    "not a test route",
                )),
            }
        })
    }
}

/// A TCP echo server on loopback, standing for a TLS server: it echoes the ClientHello.
fn echo_server() -> SocketAddr {
    serve_each(|mut stream| {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stream.read(&mut buf) {
            if n == 0 || stream.write_all(&buf[..n]).is_err() {
                break;
            }
        }
    })
}

/// An HTTP server on loopback that answers every request with the request head it received.
fn web_server() -> SocketAddr {
    serve_each(|mut stream| {
        let Ok(head) = read_head(&mut stream) else {
            return;
        };
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close, x-upstream-hop\r\nx-upstream-hop: 1\r\nkeep-alive: timeout=5\r\n\r\n{head}",
            head.len()
        );
        let _ = stream.write_all(answer.as_bytes());
    })
}

/// A loopback listener that hands each connection, with a read timeout set, to `answer` on a
/// thread of its own.
fn serve_each(answer: fn(TcpStream)) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            thread::spawn(move || {
                stream.set_read_timeout(Some(TIMEOUT)).unwrap();
                answer(stream);
            });
        }
    });
    addr
}

/// Reads up to and including the blank line, one byte at a time so nothing after it is taken.
fn read_head(stream: &mut TcpStream) -> io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.push(byte[0]);
        assert!(head.len() < 64 * 1024, "head too long");
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

struct Answer {
    status: u16,
    code: Option<String>,
    head: String,
    body: String,
}

fn read_answer(stream: &mut TcpStream) -> Answer {
    let head = read_head(stream).unwrap();
    let status = head[9..12].parse().unwrap();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length").map_or(0, |v| v.parse().unwrap());
    let mut body = vec![0; length];
    stream.read_exact(&mut body).unwrap();
    Answer {
        status,
        code: header("x-toolgate-refused"),
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// A ClientHello written out by hand: one record, TLS 1.2 framing, two cipher suites, null
/// compression, an SNI extension when `sni` is given, and a supported_versions extension.
fn client_hello(sni: Option<&str>) -> Vec<u8> {
    fn with_len16(bytes: &[u8]) -> Vec<u8> {
        let mut out = (bytes.len() as u16).to_be_bytes().to_vec();
        out.extend_from_slice(bytes);
        out
    }
    let mut extensions = Vec::new();
    if let Some(name) = sni {
        let mut entry = vec![0u8]; // host_name
        entry.extend(with_len16(name.as_bytes()));
        extensions.extend([0x00, 0x00]); // server_name
        extensions.extend(with_len16(&with_len16(&entry)));
    }
    extensions.extend([0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]); // supported_versions: 1.3
    let mut body = vec![0x03, 0x03]; // legacy_version
    body.extend([0x42; 32]); // random
    body.push(0); // session id
    body.extend([0x00, 0x04, 0x13, 0x01, 0x13, 0x02]); // cipher suites
    body.extend([0x01, 0x00]); // compression methods
    body.extend(with_len16(&extensions));
    let mut handshake = vec![0x01, 0x00];
    handshake.extend((body.len() as u16).to_be_bytes());
    handshake.extend(body);
    let mut record = vec![0x16, 0x03, 0x01];
    record.extend(with_len16(&handshake));
    record
}

enum Then {
    /// Nothing after the answer.
    Nothing,
    /// These bytes into the tunnel, then expect them back from the echo server.
    Relayed(Vec<u8>),
    /// These bytes into the tunnel, then expect it closed, with this refusal reported.
    Closed(Vec<u8>, &'static str),
    /// The forwarded request head must contain these and lack those.
    Forwarded(&'static [&'static str], &'static [&'static str]),
}

struct Probe {
    name: &'static str,
    request: String,
    status: u16,
    code: Option<&'static str>,
    then: Then,
}

fn connect(target: &str) -> String {
    format!("CONNECT {target} HTTP/1.1\r\nhost: {target}\r\n\r\n")
}

fn get(url: &str, host: &str) -> String {
    format!(
        "GET {url} HTTP/1.1\r\nhost: {host}\r\nproxy-authorization: Basic c2VjcmV0\r\nconnection: x-hop\r\nx-hop: 1\r\nproxy-connection: keep-alive\r\naccept: */*\r\n\r\n"
    )
}

fn refused(name: &'static str, request: String, code: &'static str) -> Probe {
    Probe {
        name,
        request,
        status: 403,
        code: Some(code),
        then: Then::Nothing,
    }
}

struct Fixture {
    proxy: Proxy,
    connector: Arc<TestConnector>,
}

fn fixture(limits: Limits) -> Fixture {
    let ip = |text: &str| -> IpAddr { text.parse().unwrap() };
    let answers = HashMap::from([
        ("allowed.test", vec![ip(ECHO_IP)]),
        ("web.test", vec![ip(WEB_IP)]),
        ("loopback.test", vec![ip("127.0.0.1")]),
        ("private.test", vec![ip("10.0.0.1")]),
        ("metadata.test", vec![ip("169.254.169.254")]),
        ("metadata6.test", vec![ip("fd00:ec2::254")]),
        ("mapped.test", vec![ip("::ffff:127.0.0.1")]),
        ("shared.test", vec![ip("100.64.0.1")]),
        ("nat64.test", vec![ip("64:ff9b::a9fe:a9fe")]),
        ("mixed.test", vec![ip(ECHO_IP), ip("10.0.0.1")]),
        ("empty.test", vec![]),
    ]);
    let connector = Arc::new(TestConnector {
        routes: HashMap::from([(ip(ECHO_IP), echo_server()), (ip(WEB_IP), web_server())]),
        dialled: Mutex::new(Vec::new()),
    });
    let allow = [
        "allowed.test",
        "web.test",
        "loopback.test",
        "private.test",
        "metadata.test",
        "metadata6.test",
        "mapped.test",
        "shared.test",
        "nat64.test",
        "mixed.test",
        "empty.test",
        "nowhere.test",
        "127.0.0.1",
        "10.0.0.1",
        "169.254.169.254",
        "[::ffff:127.0.0.1]",
        "100.64.0.1",
        "[::1]",
    ]
    .iter()
    .map(|entry| HostPattern::parse(entry).unwrap())
    .collect();
    let spec = ProxySpec::new(allow)
        .resolver(Arc::new(TestResolver { answers }))
        .connector(Arc::clone(&connector) as Arc<dyn Connector>)
        .limits(limits);
    Fixture {
        proxy: Proxy::start(spec).unwrap(),
        connector,
    }
}

fn short_limits() -> Limits {
    Limits {
        idle_timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

fn client(proxy: &Proxy) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream
}

/// A client whose `CONNECT allowed.test:443` the proxy has answered 200, its tunnel open.
fn tunnel(proxy: &Proxy) -> TcpStream {
    let mut stream = client(proxy);
    stream
        .write_all(connect("allowed.test:443").as_bytes())
        .unwrap();
    assert_eq!(read_answer(&mut stream).status, 200);
    stream
}

/// Reads until the peer closes; errors (a reset) count as closed too.
fn closed_without_data(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(error) => !matches!(
            error.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn probes() {
    let Fixture { proxy, connector } = fixture(short_limits());
    let own = format!("127.0.0.1:{}", proxy.port());
    let hello = client_hello(Some("allowed.test"));
    let probes = vec![
        refused(
            "a host not on the list",
            connect("evil.test:443"),
            "host_not_allowed",
        ),
        refused(
            "an allowed host on another port",
            connect("allowed.test:22"),
            "host_not_allowed",
        ),
        refused(
            "a suffix of an allowed host",
            connect("test:443"),
            "host_not_allowed",
        ),
        refused(
            "an allowed name resolving to loopback",
            connect("loopback.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to 10/8",
            connect("private.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to metadata",
            connect("metadata.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to v6 metadata",
            connect("metadata6.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to mapped loopback",
            connect("mapped.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to 100.64/10",
            connect("shared.test:443"),
            "address_refused",
        ),
        refused(
            "an allowed name resolving to nat64 metadata",
            connect("nat64.test:443"),
            "address_refused",
        ),
        refused(
            "a name answering public and private",
            connect("mixed.test:443"),
            "address_refused",
        ),
        refused(
            "a name answering nothing",
            connect("empty.test:443"),
            "resolve_failed",
        ),
        refused(
            "a name that does not resolve",
            connect("nowhere.test:443"),
            "resolve_failed",
        ),
        refused(
            "literal 127.0.0.1",
            connect("127.0.0.1:443"),
            "address_refused",
        ),
        refused(
            "literal 10.0.0.1",
            connect("10.0.0.1:443"),
            "address_refused",
        ),
        refused(
            "literal 169.254.169.254",
            connect("169.254.169.254:443"),
            "address_refused",
        ),
        refused(
            "literal ::ffff:127.0.0.1",
            connect("[::ffff:127.0.0.1]:443"),
            "address_refused",
        ),
        refused(
            "literal 100.64.0.1",
            connect("100.64.0.1:443"),
            "address_refused",
        ),
        refused("literal ::1", connect("[::1]:443"), "address_refused"),
        refused("the proxy itself", connect(&own), "proxy_itself"),
        refused(
            "credentials in the target",
            connect("user@allowed.test:443"),
            "invalid_target",
        ),
        refused(
            "a numeric host",
            connect("2130706433:443"),
            "invalid_target",
        ),
        Probe {
            name: "a tls hello naming the connect host",
            request: connect("allowed.test:443"),
            status: 200,
            code: None,
            then: Then::Relayed(hello.clone()),
        },
        Probe {
            name: "a host and server name in other cases, with a trailing dot",
            request: connect("ALLOWED.test.:443"),
            status: 200,
            code: None,
            then: Then::Relayed(client_hello(Some("allowed.TEST"))),
        },
        Probe {
            name: "a tls hello naming another server",
            request: connect("allowed.test:443"),
            status: 200,
            code: None,
            then: Then::Closed(client_hello(Some("evil.test")), "server_name_mismatch"),
        },
        Probe {
            name: "a tls hello naming no server",
            request: connect("allowed.test:443"),
            status: 200,
            code: None,
            then: Then::Closed(client_hello(None), "no_server_name"),
        },
        Probe {
            name: "plain text in the tunnel",
            request: connect("allowed.test:443"),
            status: 200,
            code: None,
            then: Then::Closed(
                b"GET / HTTP/1.1\r\nhost: allowed.test\r\n\r\n".to_vec(),
                "not_tls",
            ),
        },
        Probe {
            name: "a connect relayed twice",
            request: connect("allowed.test:443"),
            status: 200,
            code: None,
            then: Then::Closed(connect("allowed.test:443").into_bytes(), "not_tls"),
        },
        Probe {
            name: "plain http to an allowed host",
            request: get("http://web.test/path?q=1", "web.test"),
            status: 200,
            code: None,
            then: Then::Forwarded(
                &[
                    "GET /path?q=1 HTTP/1.1\r\n",
                    "host: web.test\r\n",
                    "accept: */*\r\n",
                ],
                &[
                    "proxy-authorization",
                    "x-hop",
                    "proxy-connection",
                    "http://",
                ],
            ),
        },
        Probe {
            name: "plain http with the port spelled out",
            request: get("http://web.test:80/", "WEB.test:80"),
            status: 200,
            code: None,
            then: Then::Forwarded(&["GET / HTTP/1.1\r\n"], &[]),
        },
        refused(
            "plain http with another host header",
            get("http://web.test/", "evil.test"),
            "host_header_mismatch",
        ),
        refused(
            "plain http with another port in the host header",
            get("http://web.test/", "web.test:8080"),
            "host_header_mismatch",
        ),
        refused(
            "plain http with two host headers",
            "GET http://web.test/ HTTP/1.1\r\nhost: web.test\r\nhost: evil.test\r\n\r\n".to_owned(),
            "host_header_mismatch",
        ),
        refused(
            "plain http in origin form",
            get("/path", "web.test"),
            "not_absolute_form",
        ),
        refused(
            "https in absolute form",
            get("https://web.test/", "web.test"),
            "unsupported_scheme",
        ),
        refused(
            "plain http to a host not on the list",
            get("http://evil.test/", "evil.test"),
            "host_not_allowed",
        ),
        refused(
            "plain http to the metadata literal",
            get(
                "http://169.254.169.254/latest/meta-data/",
                "169.254.169.254",
            ),
            "address_refused",
        ),
        refused(
            "plain http to a name resolving to metadata",
            get("http://metadata.test/", "metadata.test"),
            "address_refused",
        ),
        refused(
            "plain http to the proxy itself",
            get(&format!("http://{own}/"), &own),
            "proxy_itself",
        ),
    ];

    let mut expected_refusals = Vec::new();
    let mut relayed = 0u64;
    for probe in &probes {
        let mut stream = client(&proxy);
        stream.write_all(probe.request.as_bytes()).unwrap();
        let answer = read_answer(&mut stream);
        assert_eq!(
            answer.status, probe.status,
            "{}: {}",
            probe.name, answer.head
        );
        assert_eq!(
            answer.code.as_deref(),
            probe.code,
            "{}: {}",
            probe.name,
            answer.head
        );
        if let Some(code) = probe.code {
            assert!(
                answer.body.starts_with("toolgate proxy refused: "),
                "{}",
                probe.name
            );
            expected_refusals.push(code);
        }
        match &probe.then {
            Then::Nothing => {}
            Then::Relayed(bytes) => {
                stream.write_all(bytes).unwrap();
                stream.write_all(b"after the hello").unwrap();
                let mut back = vec![0; bytes.len() + 15];
                stream.read_exact(&mut back).unwrap();
                assert_eq!(&back[..bytes.len()], &bytes[..], "{}", probe.name);
                assert_eq!(&back[bytes.len()..], b"after the hello", "{}", probe.name);
                relayed += back.len() as u64;
            }
            Then::Closed(bytes, code) => {
                stream.write_all(bytes).unwrap();
                assert!(
                    closed_without_data(&mut stream),
                    "{}: tunnel left open",
                    probe.name
                );
                expected_refusals.push(code);
            }
            Then::Forwarded(present, absent) => {
                for text in *present {
                    assert!(
                        answer.body.contains(text),
                        "{}: {text:?} in {}",
                        probe.name,
                        answer.body
                    );
                }
                for text in *absent {
                    assert!(
                        !answer.body.to_ascii_lowercase().contains(text),
                        "{}: {text:?} in {}",
                        probe.name,
                        answer.body
                    );
                }
                for hop in ["x-upstream-hop", "keep-alive"] {
                    assert!(
                        !answer.head.to_ascii_lowercase().contains(hop),
                        "{}: {hop} came back",
                        probe.name
                    );
                }
            }
        }
    }

    // Tunnel refusals are recorded by the tunnel's task before it closes; give the last one a
    // moment to land in the report anyway.
    let deadline = Instant::now() + TIMEOUT;
    while proxy.report().refused.len() < expected_refusals.len() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let report = proxy.stop();
    let codes: Vec<&str> = report.refused.iter().map(|r| r.reason.code()).collect();
    assert_eq!(codes, expected_refusals);
    let allowed: Vec<(&str, &str)> = report
        .allowed
        .iter()
        .map(|a| (a.method.as_str(), a.target.as_str()))
        .collect();
    assert_eq!(
        allowed,
        [
            ("CONNECT", "allowed.test:443"),
            ("CONNECT", "allowed.test:443"),
            ("GET", "web.test:80"),
            ("GET", "web.test:80"),
        ]
    );
    assert!(report.bytes_up >= relayed, "{report:?}");
    assert!(report.bytes_down >= relayed, "{report:?}");
    assert_eq!(report.omitted, 0);
    assert!(matches!(
        report
            .refused
            .iter()
            .find(|r| r.target.contains("metadata.test"))
            .map(|r| &r.reason),
        Some(Refusal::AddressRefused {
            class: toolgate_proxy::AddressClass::Metadata,
            ..
        })
    ));

    // Only the two checked destinations were ever dialled, once per allowed request.
    let dialled = connector.dialled.lock().unwrap().clone();
    let echo: SocketAddr = format!("{ECHO_IP}:443").parse().unwrap();
    let web: SocketAddr = format!("{WEB_IP}:80").parse().unwrap();
    assert_eq!(dialled, [echo, echo, web, web]);
}

#[test]
fn bytes_are_counted_each_way() {
    let Fixture { proxy, .. } = fixture(short_limits());
    let mut stream = tunnel(&proxy);
    let hello = client_hello(Some("allowed.test"));
    let payload = vec![0x17u8; 100_000];
    stream.write_all(&hello).unwrap();
    let mut back = vec![0; hello.len()];
    stream.read_exact(&mut back).unwrap();
    let writer = {
        let mut stream = stream.try_clone().unwrap();
        let payload = payload.clone();
        thread::spawn(move || stream.write_all(&payload).unwrap())
    };
    let mut back = vec![0; payload.len()];
    stream.read_exact(&mut back).unwrap();
    writer.join().unwrap();
    assert_eq!(back, payload);
    drop(stream);
    let report = proxy.stop();
    let total = (hello.len() + payload.len()) as u64;
    assert_eq!(report.bytes_up, total, "{report:?}");
    assert_eq!(report.bytes_down, total, "{report:?}");
}

#[test]
fn connections_beyond_the_limit_are_refused() {
    let Fixture { proxy, .. } = fixture(Limits {
        max_connections: 1,
        ..short_limits()
    });
    let mut first = tunnel(&proxy);
    let mut second = client(&proxy);
    let answer = read_answer(&mut second);
    assert_eq!(answer.status, 403);
    assert_eq!(answer.code.as_deref(), Some("too_many_connections"));
    // The tunnel still works, and its end frees the place.
    let hello = client_hello(Some("allowed.test"));
    first.write_all(&hello).unwrap();
    let mut back = vec![0; hello.len()];
    first.read_exact(&mut back).unwrap();
    drop(first);
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let mut third = client(&proxy);
        third
            .write_all(connect("evil.test:443").as_bytes())
            .unwrap();
        let answer = read_answer(&mut third);
        if answer.code.as_deref() == Some("host_not_allowed") {
            break;
        }
        assert!(Instant::now() < deadline, "the place was never freed");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_and_silent_tunnels_are_closed() {
    let Fixture { proxy, .. } = fixture(Limits {
        idle_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let started = Instant::now();
    let mut silent = client(&proxy);
    assert!(
        closed_without_data(&mut silent),
        "an idle connection stayed open"
    );
    let mut tunnel = tunnel(&proxy);
    assert!(
        closed_without_data(&mut tunnel),
        "a tunnel without a hello stayed open"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let report = proxy.stop();
    assert_eq!(
        report.refused.last().map(|r| r.reason.code()),
        Some("hello_timeout")
    );
}

#[test]
fn oversized_heads_are_refused_and_counted() {
    let Fixture { proxy, connector } = fixture(short_limits());
    let mut stream = client(&proxy);
    let filler = "a".repeat(64 * 1024);
    let request =
        format!("GET http://web.test/ HTTP/1.1\r\nhost: web.test\r\nx-filler: {filler}\r\n\r\n");
    // hyper answers an oversized head itself (431) and closes; the write may fail part way.
    let _ = stream.write_all(request.as_bytes());
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    assert!(!answer.starts_with("HTTP/1.1 200"), "{answer}");
    let report = proxy.stop();
    assert_eq!(
        report
            .refused
            .iter()
            .map(|r| r.reason.code())
            .collect::<Vec<_>>(),
        ["headers_too_large"]
    );
    assert!(connector.dialled.lock().unwrap().is_empty());
}

#[test]
fn the_proxy_stops_and_announces_itself() {
    let Fixture { proxy, .. } = fixture(short_limits());
    let port = proxy.port();
    let env = proxy.env();
    assert!(env.contains(&("HTTPS_PROXY".to_owned(), format!("http://127.0.0.1:{port}"))));
    assert!(env.contains(&("http_proxy".to_owned(), format!("http://127.0.0.1:{port}"))));
    let mut open = client(&proxy);
    open.write_all(connect("allowed.test:443").as_bytes())
        .unwrap();
    assert_eq!(read_answer(&mut open).status, 200);
    drop(proxy);
    // The listener is gone and the open tunnel was closed with it.
    assert!(closed_without_data(&mut open));
    assert!(TcpStream::connect(("127.0.0.1", port)).is_err());
}

#[test]
fn extreme_limits_are_bounded_not_fatal() {
    let Fixture { proxy, .. } = fixture(Limits {
        max_header_bytes: 0,
        max_connections: usize::MAX,
        idle_timeout: Duration::MAX,
        resolve_timeout: Duration::MAX,
        connect_timeout: Duration::MAX,
        ..Limits::default()
    });
    let mut stream = tunnel(&proxy);
    let hello = client_hello(Some("allowed.test"));
    stream.write_all(&hello).unwrap();
    let mut back = vec![0; hello.len()];
    stream.read_exact(&mut back).unwrap();
    assert_eq!(back, hello);
}
