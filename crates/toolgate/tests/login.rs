//! The approval console opens through a single-use login link, and the session token it is
//! exchanged for is printed nowhere (issue 36): `toolgate serve` wrote
//! `approval console at http://127.0.0.1:PORT/?token=…` to standard error, which agent clients
//! keep in log files, and with the workspace at `$HOME` `search_text` and `read_file` gave it
//! to the model. The token is read here from the state directory's token file, the one place
//! it is kept, and looked for in everything the server wrote; so is the bearer token a server
//! over HTTP without configured ones generates.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing
)]

#[path = "../../../tests/support/mod.rs"]
mod support;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use fixture::Fixture;
use served::{Served, printed_login_link};
use support::{fixture, home, served};

/// A `toolgate serve` whose standard error goes to a file, so that every line it ever writes
/// can be read, before and after it stops.
struct Logged {
    child: Option<Child>,
    stderr: PathBuf,
    state: PathBuf,
}

impl Logged {
    fn start(ws: &Path, dir: &Path, name: &str, config: &str, http: bool) -> Logged {
        let state = dir.join(format!("{name}-state"));
        fs::create_dir_all(&state).unwrap();
        let config_path = dir.join(format!("{name}.toml"));
        fs::write(&config_path, config).unwrap();
        let stderr = dir.join(format!("{name}.stderr"));
        let mut command = home::toolgate();
        command.arg("serve");
        if http {
            command.args(["--http", "127.0.0.1:0"]);
        }
        let child = command
            .arg("--workspace")
            .arg(ws)
            .arg("--config")
            .arg(&config_path)
            .env("XDG_STATE_HOME", &state)
            .env("XDG_CONFIG_HOME", "/nonexistent-toolgate-test-config")
            // Over stdio the server waits on this pipe as on a client that has not spoken.
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let logged = Logged {
            child: Some(child),
            stderr,
            state,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !logged.printed().contains("/login?code=") {
            assert!(
                Instant::now() < deadline,
                "no login link: {}",
                logged.printed()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
        if http {
            while !logged.printed().contains("serving MCP at") {
                assert!(Instant::now() < deadline, "{}", logged.printed());
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        logged
    }

    fn printed(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn link(&self) -> String {
        let lines: Vec<String> = self.printed().lines().map(str::to_owned).collect();
        printed_login_link(&lines)
    }

    fn port(&self) -> u16 {
        let link = self.link();
        let rest = link.strip_prefix("http://127.0.0.1:").unwrap();
        rest.split_once('/').unwrap().0.parse().unwrap()
    }

    /// The session token, from the one file that keeps it.
    fn token(&self) -> String {
        let file = self
            .state
            .join(format!("toolgate/console-{}.token", self.port()));
        fs::read_to_string(file).unwrap().trim().to_owned()
    }

    /// Logged in through the printed link, as a browser would.
    fn served(&mut self) -> Served {
        let child = self.child.take().unwrap();
        let printed = self.printed();
        let mut banner = Vec::new();
        let mut mcp_url = String::new();
        for line in printed.lines() {
            if let Some(url) = line.strip_prefix("toolgate: serving MCP at ") {
                mcp_url = url.to_owned();
                break;
            }
            banner.push(line.to_owned());
        }
        Served::from_banner(child, mcp_url, banner, &self.state)
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Every file under `dir`, as bytes.
fn files_under(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else if let Ok(bytes) = fs::read(&path) {
            found.push((path, bytes));
        }
    }
    found
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn the_printed_link_logs_in_once_and_the_token_is_never_printed() {
    let fx = Fixture::new();
    let ws = fx.workspace();
    fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let mut logged = Logged::start(&ws, fx.dir.path(), "first", "", true);
    let token = logged.token();
    assert_eq!(token.len(), 64);
    let link = logged.link();
    assert!(!link.contains(&token));
    let code = link.split_once("code=").unwrap().1;
    assert!(
        code.len() >= 32 && code.chars().all(|c| c.is_ascii_hexdigit()),
        "at least 128 bits: {code}"
    );
    let printed = logged.printed();
    assert!(
        printed.contains("works once"),
        "the message says the link works once: {printed}"
    );

    // The first use sets the cookie (the log-in checks its attributes) and redirects to the
    // bare address; the second is refused and sets nothing.
    let served = logged.served();
    assert_eq!(served.token, token);
    let again = served.open(&link);
    assert_eq!(again.status, 410, "{}", again.body);
    assert!(again.body.contains("already used"), "{}", again.body);
    assert_eq!(again.header("set-cookie"), None);
    assert!(!again.body.contains(&token));
    let page = served.http("GET", "/", &[("cookie", served.cookie())], "");
    assert_eq!(page.status, 200);
    assert!(
        !page.body.contains(&token),
        "the page never carries the token"
    );

    // A person decides a call in the console; the server keeps serving and printing.
    let client = served.client(json!([
        {"op": "call", "tool": "write_file", "arguments":
            {"path": "notes.txt", "content": "bye\n", "expected_content": "hello\n"}},
        {"op": "call", "tool": "read_file", "arguments": {"path": "notes.txt"}},
    ]));
    served.decide_each(1, Duration::from_secs(30), |_, _| {
        r#"{"decision":"allow_once"}"#.to_owned()
    });
    let results = client.steps();
    assert_eq!(results[0]["isError"], false, "{}", results[0]);
    // A fresh link, for another browser: it is no token either, and it works once.
    let fresh = served.login_link();
    assert!(!fresh.contains(&token));
    assert_eq!(served.open(&fresh).status, 303);
    assert_eq!(served.open(&fresh).status, 410);

    // Stopped: nothing it wrote, in its standard error or its state directory's logs and
    // records, holds the token, except the token file itself (now removed).
    let state = logged.state.clone();
    // The bearer token this run generated for MCP over HTTP is kept the same way.
    let mcp_token = served.mcp_token.clone();
    assert_eq!(mcp_token.len(), 64);
    served.terminate();
    let printed = logged.printed();
    assert!(!printed.contains(&token), "{printed}");
    assert!(!printed.contains(&mcp_token), "{printed}");
    for (path, bytes) in files_under(&state) {
        for secret in [&token, &mcp_token] {
            assert!(
                !contains(&bytes, secret),
                "{} holds a token",
                path.display()
            );
        }
    }

    // A later start prints a new link; the first one is dead with its server.
    let second = Logged::start(&ws, fx.dir.path(), "second", "", true);
    assert_ne!(second.link(), link);
    assert!(!second.printed().contains(&second.token()));
}

#[test]
fn an_expired_link_is_refused_and_opens_nothing() {
    let fx = Fixture::new();
    let config = "[approval]\nlogin_link_secs = 1\n";
    let mut logged = Logged::start(&fx.workspace(), fx.dir.path(), "late", config, true);
    let printed = logged.printed();
    assert!(printed.contains("within 1 second"), "{printed}");
    let link = logged.link();
    std::thread::sleep(Duration::from_millis(1300));
    let port = logged.port();
    let child = logged.child.take().unwrap();
    let late = Served::logged_out(child, port, PathBuf::new());
    let refused = late.open(&link);
    assert_eq!(refused.status, 410, "{}", refused.body);
    assert!(refused.body.contains("expired"), "{}", refused.body);
    assert_eq!(refused.header("set-cookie"), None);
    // Still nobody is logged in.
    assert_eq!(late.http("GET", "/", &[], "").status, 401);
    assert_eq!(late.http("GET", "/api/pending", &[], "").status, 401);
}

/// Over stdio, the way agent clients start it, and whose standard error they keep in a log.
#[test]
fn a_server_on_stdio_prints_a_link_and_never_the_token() {
    let fx = Fixture::new();
    let logged = Logged::start(&fx.workspace(), fx.dir.path(), "stdio", "", false);
    let token = logged.token();
    let printed = logged.printed();
    assert!(!printed.contains(&token), "{printed}");
    assert!(!printed.contains("token="), "{printed}");
    assert!(
        printed.contains(&format!(
            "approval console at http://127.0.0.1:{}/",
            logged.port()
        )),
        "{printed}"
    );
}
