//! A running `toolgate serve --http` with its approval console, driven as a person's browser
//! would drive it: the login link printed on standard error opened once, the session cookie
//! its answer sets, the page's CSRF value, JSON bodies. Shared by the tests that need a
//! person's decision.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::clients::Driving;
pub use super::http::Reply;
use super::{home, http};

/// A running `toolgate serve --http` with its console, and what it printed.
pub struct Served {
    pub child: Child,
    pub mcp_url: String,
    pub mcp_token: String,
    /// A login link nobody has opened yet, for one browser (Chromium, in the console tests);
    /// [`Served::login_link`] gives more.
    pub console_url: String,
    pub port: u16,
    /// The session token, as the cookie set by the printed login link carries it.
    pub token: String,
    /// Where the server keeps the token (`console-PORT.token` in its state directory).
    pub token_file: PathBuf,
    /// The lines the server printed on standard error before it served.
    pub banner: Vec<String>,
    pub _state: Option<tempfile::TempDir>,
}

impl Served {
    pub fn start(ws: &Path, config: &str) -> Served {
        let state = tempfile::tempdir().unwrap();
        let mut served = Served::start_at(ws, config, state.path());
        served._state = Some(state);
        served
    }

    /// A server keeping its state (token file, standing grants) in `state`.
    pub fn start_at(ws: &Path, config: &str, state: &Path) -> Served {
        Served::start_with_env(ws, config, state, &[])
    }

    /// As [`Served::start_at`], with `env` set in the server's environment besides (a fake
    /// `HOME`, say, and the toolchain homes that would otherwise be looked up under it).
    pub fn start_with_env(
        ws: &Path,
        config: &str,
        state: &Path,
        env: &[(&str, std::ffi::OsString)],
    ) -> Served {
        let config_path = state.join("toolgate.toml");
        fs::write(&config_path, config).unwrap();
        // A fake `HOME` among `env` keeps the XDG directories that default beneath it.
        let fake_home = env.iter().find(|(k, _)| *k == "HOME");
        let mut command = match fake_home {
            Some((_, h)) => home::toolgate_at(Path::new(h)),
            None => home::toolgate(),
        };
        let child = command
            .args(["serve", "--http", "127.0.0.1:0", "--workspace"])
            .arg(ws)
            .arg("--config")
            .arg(&config_path)
            .env("XDG_STATE_HOME", state)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Served::from_child(child, state)
    }

    /// A `toolgate serve --http` already started with its standard error piped and
    /// `XDG_STATE_HOME` at `state`, once its banner says where it serves, logged in to its
    /// console through the link the banner holds.
    pub fn from_child(mut child: Child, state: &Path) -> Served {
        let (mcp_url, banner) = super::clients::mcp_url(&mut child);
        Served::from_banner(child, mcp_url, banner, state)
    }

    /// As [`Served::from_child`], from the lines the server printed before `serving MCP at
    /// MCP_URL`, read by the caller.
    pub fn from_banner(child: Child, mcp_url: String, banner: Vec<String>, state: &Path) -> Served {
        let mcp_token = generated_token(&banner);
        let link = printed_login_link(&banner);
        let mut served = Served::log_in(child, &link, Some(state));
        served.mcp_url = mcp_url;
        served.mcp_token = mcp_token;
        served.banner = banner;
        served
    }

    /// The console of the server `child` (which printed `link`), logged in through `link` as
    /// a browser would: the link opened, the cookie its answer sets kept. `state` is the
    /// server's `XDG_STATE_HOME`, where the token file is, if known.
    pub fn log_in(child: Child, link: &str, state: Option<&Path>) -> Served {
        let (base, _) = link.split_once("/login?code=").unwrap();
        let port: u16 = base
            .strip_prefix("http://127.0.0.1:")
            .unwrap()
            .parse()
            .unwrap();
        let token_file = state
            .map(|s| s.join(format!("toolgate/console-{port}.token")))
            .unwrap_or_default();
        let mut served = Served::logged_out(child, port, token_file);
        let opened = served.open(link);
        assert_eq!(opened.status, 303, "the login link: {}", opened.body);
        assert_eq!(opened.header("location"), Some("/"));
        let set_cookie = opened.header("set-cookie").unwrap();
        let (pair, attributes) = set_cookie.split_once("; ").unwrap();
        assert_eq!(attributes, "HttpOnly; SameSite=Strict; Path=/");
        let (name, token) = pair.split_once('=').unwrap();
        assert_eq!(name, format!("toolgate_console_{port}"));
        served.token = token.to_owned();
        served.console_url = served.login_link();
        served
    }

    /// The server `child` with its console on `port`, nobody logged in to it yet.
    pub fn logged_out(child: Child, port: u16, token_file: PathBuf) -> Served {
        Served {
            child,
            mcp_url: String::new(),
            mcp_token: String::new(),
            console_url: String::new(),
            port,
            token: String::new(),
            token_file,
            banner: Vec::new(),
            _state: None,
        }
    }

    /// Opens `link` (a console login link) as a browser would, without a cookie.
    pub fn open(&self, link: &str) -> Reply {
        let path = link
            .strip_prefix(&format!("http://127.0.0.1:{}", self.port))
            .unwrap();
        self.http("GET", path, &[], "")
    }

    /// A fresh login link, as a logged-in page asks for one to open the console elsewhere.
    pub fn login_link(&self) -> String {
        let reply = self.http(
            "POST",
            "/api/login-links",
            &[("cookie", self.cookie()), ("x-toolgate-csrf", self.csrf())],
            "",
        );
        assert_eq!(reply.status, 200, "a fresh login link: {}", reply.body);
        let start = reply.body.find('{').unwrap();
        let end = reply.body.rfind('}').unwrap();
        let answer: Value = serde_json::from_str(&reply.body[start..=end]).unwrap();
        answer["url"].as_str().unwrap().to_owned()
    }

    pub fn cookie(&self) -> String {
        format!("toolgate_console_{}={}", self.port, self.token)
    }

    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// One request to the console; `headers` replace the defaults of the same name (Host).
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, String)], body: &str) -> Reply {
        let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        http::request(self.port, method, path, &headers, body)
    }

    /// An authenticated GET of a JSON endpoint.
    pub fn get_json(&self, path: &str) -> Value {
        let reply = self.http("GET", path, &[("cookie", self.cookie())], "");
        assert_eq!(reply.status, 200, "{path}: {}", reply.body);
        // Bodies are small and sent whole; a chunked one has its framing around the JSON.
        let start = reply.body.find(['[', '{']).unwrap();
        let end = reply.body.rfind([']', '}']).unwrap();
        serde_json::from_str(&reply.body[start..=end]).unwrap()
    }

    /// The CSRF value the page carries.
    pub fn csrf(&self) -> String {
        let page = self.http("GET", "/", &[("cookie", self.cookie())], "");
        assert_eq!(page.status, 200);
        http::csrf_of(&page.body)
    }

    /// Waits until `count` requests are pending, and returns them.
    pub fn pending(&self, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let pending = self.get_json("/api/pending");
            let list = pending.as_array().unwrap();
            if list.len() == count {
                return list.clone();
            }
            assert!(Instant::now() < deadline, "pending: {pending}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts the Python SDK client on `steps`, in the background.
    pub fn client(&self, steps: Value) -> Driving {
        self.client_session(json!({"steps": steps}))
    }

    /// Starts the Python SDK client on one session of `tests/mcp/drive.py`'s plan (steps and
    /// options), over HTTP to this server, in the background.
    pub fn client_session(&self, mut session: Value) -> Driving {
        session["transport"] = json!("http");
        session["url"] = json!(self.mcp_url);
        session["token"] = json!(self.mcp_token);
        Driving::start(&json!({"sessions": [session]}))
    }

    /// Decides, one after another, the next `count` requests as they come up in the console:
    /// `decide` sees each request and the pending list it was found in, and gives the
    /// decision's body. Fails the test when they have not all come up within `limit`.
    pub fn decide_each(
        &self,
        count: usize,
        limit: Duration,
        mut decide: impl FnMut(&Value, &Value) -> String,
    ) {
        let mut decided: Vec<String> = Vec::new();
        let deadline = Instant::now() + limit;
        while decided.len() < count {
            assert!(Instant::now() < deadline, "decided only {decided:?}");
            let pending = self.get_json("/api/pending");
            let fresh = pending
                .as_array()
                .unwrap()
                .iter()
                .find(|p| !decided.iter().any(|d| p["id"] == d.as_str()))
                .cloned();
            let Some(request) = fresh else {
                std::thread::sleep(Duration::from_millis(25));
                continue;
            };
            let body = decide(&request, &pending);
            let id = request["id"].as_str().unwrap().to_owned();
            let reply = self.decide(&id, &body);
            assert_eq!(reply.status, 204, "{}", reply.body);
            decided.push(id);
        }
    }

    /// A person's decision on pending request `id`, as the console's page posts it.
    pub fn decide(&self, id: &str, body: &str) -> Reply {
        self.http(
            "POST",
            &format!("/api/pending/{id}/decision"),
            &[
                ("cookie", self.cookie()),
                ("x-toolgate-csrf", self.csrf()),
                ("content-type", "application/json".into()),
            ],
            body,
        )
    }

    /// Stops the server as a service manager would (SIGTERM, which it handles by cleaning up)
    /// and waits for it to end.
    pub fn terminate(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid}");
        self.child.wait().unwrap();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bearer token a server without `[[serve.token]]` generated, read from the user-only file
/// its banner names (it prints the file, never the token).
pub fn generated_token(banner: &[String]) -> String {
    let line = banner
        .iter()
        .find(|l| l.contains("this run's token"))
        .unwrap_or_else(|| panic!("no generated token in {banner:?}"));
    let (_, rest) = line.split_once(") is in ").unwrap();
    let (path, _) = rest.rsplit_once(", readable by you only").unwrap();
    let token = fs::read_to_string(path).unwrap().trim().to_owned();
    assert!(
        !banner.iter().any(|l| l.contains(&token)),
        "the token is printed: {banner:?}"
    );
    token
}

/// The login link a server's banner holds: the last word of the one line that has one.
pub fn printed_login_link(lines: &[String]) -> String {
    let links: Vec<&str> = lines
        .iter()
        .filter(|l| l.contains("/login?code="))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(links.len(), 1, "one login link is printed: {lines:?}");
    links[0].to_owned()
}
