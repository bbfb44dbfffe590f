//! The checks every console request passes before any handler sees it, in order: `Host`,
//! `Origin`, the session token, and for requests that change state a CSRF value.
//!
//! They are pure functions of the request's header values and the console's secrets, so they
//! are tested as tables. A page on another site can make a browser send requests here (DNS
//! rebinding, a form post, an image tag); the `Host` check defeats rebinding, the `Origin`
//! check cross-site scripts, the `SameSite=Strict` cookie cross-site navigations, and the CSRF
//! value, which only a page served by the console can read, anything that slipped past those.
//!
//! The `Host` rule and the random secrets are toolgate's MCP server over HTTP's as well
//! ([`toolgate_edge::loopback`], [`toolgate_edge::random_hex`]): both are loopback servers a
//! browser page may aim at, and one rule for both cannot drift apart. The console's `Origin`
//! rule is stricter than the loopback one the MCP server applies: only its own page.

use std::net::SocketAddr;

use subtle::ConstantTimeEq;

pub use toolgate_edge::RandomError;
use toolgate_edge::loopback::{is_own_host, own_hosts};
use toolgate_edge::random_hex;

/// Why a request was turned away, and the status it is answered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the request's host is not this console")]
    ForeignHost,
    #[error("the request comes from another origin")]
    ForeignOrigin,
    #[error("the request carries no valid console token")]
    NoToken,
    #[error("the request carries no valid csrf value")]
    NoCsrf,
}

impl Refusal {
    /// The HTTP status for this refusal: 421 for a host this server does not serve, 401 for a
    /// missing or wrong token, 403 for the rest.
    pub fn status(self) -> u16 {
        match self {
            Refusal::ForeignHost => 421,
            Refusal::NoToken => 401,
            Refusal::ForeignOrigin | Refusal::NoCsrf => 403,
        }
    }
}

/// A random secret: the session token or the CSRF value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A fresh [`random_hex`] value.
    pub fn generate() -> Result<Secret, RandomError> {
        random_hex().map(Secret)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Compares in constant time, so the time an answer takes says nothing of how much of a
    /// guess was right.
    pub fn matches(&self, candidate: &str) -> bool {
        self.0.as_bytes().ct_eq(candidate.as_bytes()).into()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// What the checks need to know about one request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestFacts<'a> {
    pub host: Option<&'a str>,
    pub origin: Option<&'a str>,
    /// The `Cookie` header.
    pub cookie: Option<&'a str>,
    /// Whether this is the `GET` of a login link: its `Host` and `Origin` are checked here,
    /// its single-use code by the handler (see [`crate::login`]), and it needs no cookie.
    pub login: bool,
    pub csrf: Option<&'a str>,
    /// Whether the request may change state (anything but GET and HEAD).
    pub changes_state: bool,
}

/// The console's identity and secrets.
#[derive(Debug, Clone)]
pub struct Guard {
    port: u16,
    /// The `Host` values that name the console (see [`own_hosts`]).
    hosts: Vec<String>,
    token: Secret,
    csrf: Secret,
}

impl Guard {
    /// The guard of a console listening on `127.0.0.1:port`.
    pub fn new(port: u16, token: Secret, csrf: Secret) -> Guard {
        let hosts = own_hosts(SocketAddr::from(([127, 0, 0, 1], port)), &[]);
        Guard {
            port,
            hosts,
            token,
            csrf,
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn token(&self) -> &Secret {
        &self.token
    }

    pub fn csrf(&self) -> &Secret {
        &self.csrf
    }

    /// The cookie's name carries the port: browsers share cookies between ports of one host,
    /// and two consoles must not overwrite each other's sessions.
    pub fn cookie_name(&self) -> String {
        format!("toolgate_console_{}", self.port)
    }

    /// Checks a request in order: `Host`, `Origin`, the token cookie (except on a login
    /// link, whose code the handler checks), CSRF for requests that change state. The token
    /// is taken from the cookie only: an address never carries it.
    pub fn check(&self, facts: &RequestFacts<'_>) -> Result<(), Refusal> {
        let host = facts.host.ok_or(Refusal::ForeignHost)?;
        if !is_own_host(Some(host), &self.hosts) {
            return Err(Refusal::ForeignHost);
        }
        // Browsers send `Origin` on every cross-origin request and on same-origin POSTs; an
        // absent one is a same-origin GET or a client that is not a browser.
        if let Some(origin) = facts.origin
            && origin != format!("http://{host}")
        {
            return Err(Refusal::ForeignOrigin);
        }
        if facts.login && !facts.changes_state {
            return Ok(());
        }
        let presented = facts
            .cookie
            .and_then(|header| cookie_value(header, &self.cookie_name()))
            .ok_or(Refusal::NoToken)?;
        if !self.token.matches(presented) {
            return Err(Refusal::NoToken);
        }
        if facts.changes_state {
            let csrf = facts.csrf.ok_or(Refusal::NoCsrf)?;
            if !self.csrf.matches(csrf) {
                return Err(Refusal::NoCsrf);
            }
        }
        Ok(())
    }
}

/// The value of cookie `name` in a `Cookie` header.
fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|pair| {
        let (key, value) = pair.trim().split_once('=')?;
        (key == name).then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
    const CSRF: &str = "c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5c5";

    fn guard() -> Guard {
        Guard::new(4000, Secret(TOKEN.into()), Secret(CSRF.into()))
    }

    fn cookie(value: &str) -> String {
        format!("other=1; toolgate_console_4000={value}")
    }

    #[test]
    fn requests_are_checked_host_origin_token_csrf_in_that_order() {
        let good_cookie = cookie(TOKEN);
        let bad_cookie = cookie("a1");
        let other_port = format!("toolgate_console_4001={TOKEN}");
        let ok = RequestFacts {
            host: Some("127.0.0.1:4000"),
            cookie: Some(&good_cookie),
            ..RequestFacts::default()
        };
        #[rustfmt::skip]
        let table: Vec<(&str, RequestFacts<'_>, Result<(), Refusal>)> = vec![
            ("cookie, same host", ok, Ok(())),
            ("localhost spelling", RequestFacts { host: Some("localhost:4000"), ..ok }, Ok(())),
            ("same origin", RequestFacts { origin: Some("http://127.0.0.1:4000"), ..ok }, Ok(())),
            ("login link, no cookie", RequestFacts { cookie: None, login: true, ..ok }, Ok(())),
            ("login link, foreign host", RequestFacts { cookie: None, login: true, host: Some("evil.example:4000"), ..ok }, Err(Refusal::ForeignHost)),
            ("login link, foreign origin", RequestFacts { cookie: None, login: true, origin: Some("http://evil.example"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("login link posted", RequestFacts { cookie: None, login: true, changes_state: true, ..ok }, Err(Refusal::NoToken)),
            ("no host", RequestFacts { host: None, ..ok }, Err(Refusal::ForeignHost)),
            ("rebinding host", RequestFacts { host: Some("evil.example:4000"), ..ok }, Err(Refusal::ForeignHost)),
            ("other port", RequestFacts { host: Some("127.0.0.1:4001"), ..ok }, Err(Refusal::ForeignHost)),
            ("no port", RequestFacts { host: Some("127.0.0.1"), ..ok }, Err(Refusal::ForeignHost)),
            ("host checked first", RequestFacts { host: Some("evil.example"), cookie: None, ..ok }, Err(Refusal::ForeignHost)),
            ("foreign origin", RequestFacts { origin: Some("http://evil.example"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("other console", RequestFacts { origin: Some("http://127.0.0.1:4001"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("https spelling", RequestFacts { origin: Some("https://127.0.0.1:4000"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("null origin", RequestFacts { origin: Some("null"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("origin of the other spelling", RequestFacts { origin: Some("http://localhost:4000"), ..ok }, Err(Refusal::ForeignOrigin)),
            ("origin before token", RequestFacts { origin: Some("http://evil.example"), cookie: None, ..ok }, Err(Refusal::ForeignOrigin)),
            ("no cookie", RequestFacts { cookie: None, ..ok }, Err(Refusal::NoToken)),
            ("wrong cookie", RequestFacts { cookie: Some(&bad_cookie), ..ok }, Err(Refusal::NoToken)),
            ("another console's cookie", RequestFacts { cookie: Some(&other_port), ..ok }, Err(Refusal::NoToken)),
            ("post without csrf", RequestFacts { changes_state: true, ..ok }, Err(Refusal::NoCsrf)),
            ("post with wrong csrf", RequestFacts { changes_state: true, csrf: Some(TOKEN), ..ok }, Err(Refusal::NoCsrf)),
            ("post with csrf", RequestFacts { changes_state: true, csrf: Some(CSRF), ..ok }, Ok(())),
            ("token before csrf", RequestFacts { changes_state: true, csrf: Some(CSRF), cookie: None, ..ok }, Err(Refusal::NoToken)),
        ];
        for (name, facts, expected) in table {
            assert_eq!(guard().check(&facts), expected, "{name}");
        }
    }

    #[test]
    fn cookies_and_queries_are_read_by_exact_name() {
        #[rustfmt::skip]
        let table = [
            ("toolgate_console_4000=abc", Some("abc")),
            ("a=1;toolgate_console_4000=abc; b=2", Some("abc")),
            ("xtoolgate_console_4000=abc", None),
            ("toolgate_console_40000=abc", None),
            ("", None),
        ];
        for (header, expected) in table {
            assert_eq!(
                cookie_value(header, "toolgate_console_4000"),
                expected,
                "{header}"
            );
        }
    }

    #[test]
    fn secrets_are_long_random_and_never_printed_by_debug() {
        let a = Secret::generate().unwrap();
        let b = Secret::generate().unwrap();
        assert_eq!(a.expose().len(), 64);
        assert_ne!(a, b);
        assert!(a.matches(a.expose()));
        assert!(!a.matches(b.expose()));
        assert!(!a.matches(""));
        assert_eq!(format!("{a:?}"), "Secret(..)");
    }
}
