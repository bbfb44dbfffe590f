//! Single-use login links: how a browser gets the console's session cookie without the
//! session token ever being printed.
//!
//! The token that the session cookie carries lives for the whole run, so it must never reach
//! standard error, which agent clients keep in log files a model can later read (issue 36).
//! What is printed instead is a link holding a login code: 256 random bits, good for one
//! exchange within a short time (five minutes by default). The first `GET` of the link sets
//! the cookie and sends the browser to the bare address; a second use, an expired code or one
//! this console never issued is refused and changes nothing. A link that leaked into a log is
//! therefore dead once the person has used it, and one a model used first shows up as a
//! refused login for the person.
//!
//! The console can issue more codes while it runs ([`LoginLinks::issue`]), so a later command
//! can hand a person a fresh link for a running server. Time is passed in by the caller, so
//! expiry is tested without waiting.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::guard::{RandomError, Secret};

/// How long a login link works when nothing else is configured.
pub const DEFAULT_LOGIN_TTL: Duration = Duration::from_secs(300);

/// How many codes are remembered (live, used or expired); the oldest is forgotten first. A
/// forgotten code is refused as unknown, which is as closed as used or expired.
const REMEMBERED_CODES: usize = 32;

/// Why a login code was not exchanged for a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LoginRefusal {
    #[error("this login link was already used; a login link works once")]
    Used,
    #[error("this login link has expired")]
    Expired,
    #[error("this login link was not issued by this console")]
    Unknown,
}

/// One code issued.
#[derive(Debug)]
struct Issued {
    code: Secret,
    expires: Instant,
    used: bool,
}

/// The login codes a console has issued, each good for one exchange before it expires.
#[derive(Debug)]
pub struct LoginLinks {
    ttl: Duration,
    issued: Mutex<Vec<Issued>>,
}

impl LoginLinks {
    /// Codes that work for `ttl` after they are issued.
    pub fn new(ttl: Duration) -> LoginLinks {
        LoginLinks {
            ttl,
            issued: Mutex::new(Vec::new()),
        }
    }

    /// How long a code works.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// A fresh code, good once until `now + ttl`.
    pub fn issue(&self, now: Instant) -> Result<Secret, RandomError> {
        let code = Secret::generate()?;
        let mut issued = self.issued.lock().unwrap_or_else(PoisonError::into_inner);
        if issued.len() >= REMEMBERED_CODES {
            issued.remove(0);
        }
        issued.push(Issued {
            code: code.clone(),
            expires: now + self.ttl,
            used: false,
        });
        Ok(code)
    }

    /// Exchanges `candidate` for a session: succeeds once for a code issued here and not yet
    /// expired at `now`, and marks it used. Every remembered code is compared, in constant
    /// time, so the time the answer takes says nothing of which code came close.
    pub fn redeem(&self, candidate: &str, now: Instant) -> Result<(), LoginRefusal> {
        let mut issued = self.issued.lock().unwrap_or_else(PoisonError::into_inner);
        let mut found: Option<&mut Issued> = None;
        for entry in issued.iter_mut() {
            if entry.code.matches(candidate) {
                found = Some(entry);
            }
        }
        let entry = found.ok_or(LoginRefusal::Unknown)?;
        if entry.used {
            return Err(LoginRefusal::Used);
        }
        if now >= entry.expires {
            return Err(LoginRefusal::Expired);
        }
        entry.used = true;
        Ok(())
    }
}

/// The value of `code` in a query string.
pub fn query_code(query: &str) -> Option<&str> {
    query.split('&').find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        (key == "code").then_some(value)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_code_works_once_before_it_expires() {
        let links = LoginLinks::new(Duration::from_secs(300));
        let start = Instant::now();
        let code = links.issue(start).unwrap();
        let other = links.issue(start).unwrap();
        assert_ne!(code.expose(), other.expose());
        assert_eq!(code.expose().len(), 64, "256 bits as hex");
        assert_eq!(links.redeem(code.expose(), start), Ok(()));
        assert_eq!(links.redeem(code.expose(), start), Err(LoginRefusal::Used));
        // A used code stays used even after it would have expired.
        assert_eq!(
            links.redeem(code.expose(), start + Duration::from_secs(400)),
            Err(LoginRefusal::Used)
        );
        // The second code is untouched by the first one's use, and expires on time.
        assert_eq!(
            links.redeem(other.expose(), start + Duration::from_secs(300)),
            Err(LoginRefusal::Expired)
        );
        // The refusal changed nothing: before its expiry the code still works, once.
        assert_eq!(
            links.redeem(other.expose(), start + Duration::from_secs(299)),
            Ok(())
        );
    }

    #[test]
    fn unknown_empty_and_partial_codes_are_refused() {
        let links = LoginLinks::new(Duration::from_secs(300));
        let now = Instant::now();
        let code = links.issue(now).unwrap();
        let half = &code.expose()[..32];
        let longer = format!("{}0", code.expose());
        let upper = code.expose().to_ascii_uppercase();
        for candidate in ["", "0", half, &longer, &upper] {
            if candidate == code.expose() {
                continue;
            }
            assert_eq!(
                links.redeem(candidate, now),
                Err(LoginRefusal::Unknown),
                "{candidate}"
            );
        }
        assert_eq!(links.redeem(code.expose(), now), Ok(()));
    }

    #[test]
    fn only_the_newest_codes_are_remembered() {
        let links = LoginLinks::new(Duration::from_secs(300));
        let now = Instant::now();
        let first = links.issue(now).unwrap();
        let rest: Vec<Secret> = (0..REMEMBERED_CODES)
            .map(|_| links.issue(now).unwrap())
            .collect();
        assert_eq!(
            links.redeem(first.expose(), now),
            Err(LoginRefusal::Unknown)
        );
        for code in &rest {
            assert_eq!(links.redeem(code.expose(), now), Ok(()));
        }
    }

    #[test]
    fn codes_are_read_from_the_query_by_exact_name() {
        assert_eq!(query_code("code=abc"), Some("abc"));
        assert_eq!(query_code("x=1&code=abc"), Some("abc"));
        assert_eq!(query_code("xcode=abc"), None);
        assert_eq!(query_code("token=abc"), None);
        assert_eq!(query_code(""), None);
    }
}
