//! One raw HTTP/1.1 request to a console on a loopback port, written and read by hand so the
//! tests see exactly the bytes a browser or a hostile page would send and get. Built only for
//! this crate's tests; the `toolgate` binary's end-to-end tests include the same file
//! (`tests/support/mod.rs`), so a served console is asked as this crate's tests ask it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// What came back: the status, the headers (names lowercased), the body.
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `method path` with `headers` and `body` to `127.0.0.1:port`; a `host` header given
/// replaces the one naming the console.
pub fn request(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nconnection: close\r\n");
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("host: 127.0.0.1:{port}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    let mut head_lines = head.lines();
    let status = head_lines.next().unwrap()[9..12].parse().unwrap();
    let headers = head_lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// The CSRF value a console page carries in its `toolgate-csrf` meta tag.
pub fn csrf_of(page: &str) -> String {
    let (_, rest) = page
        .split_once("name=\"toolgate-csrf\" content=\"")
        .unwrap();
    rest.split_once('"').unwrap().0.to_owned()
}
