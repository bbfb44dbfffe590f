//! What an executor tells the client about a call while it runs: progress and log messages,
//! such as an upstream server's own for the call it is serving.
//!
//! Whatever an executor reports is the tool's words, so it is redacted like its output, and
//! it is rate-limited per call: a tool that reports in a tight loop cannot flood the client
//! or starve the session of the time it needs for other calls. What is dropped is counted.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::redact::{redact_string, redact_value};

/// The most notices one call passes on in any one-second window; the rest are dropped.
pub const NOTICES_PER_SECOND: u32 = 10;

/// One report about a running call.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// How far the call has come, as MCP's `notifications/progress` carries it.
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// A log message, as MCP's `notifications/message` carries it.
    Log {
        /// An MCP logging level: `debug`, `info`, `notice`, `warning`, `error`, `critical`,
        /// `alert` or `emergency`.
        level: String,
        logger: Option<String>,
        data: Value,
    },
}

impl Notice {
    /// Replaces secrets in what the notice says; the number replaced.
    fn redact(&mut self) -> usize {
        match self {
            Notice::Progress { message, .. } => message.as_mut().map_or(0, redact_string),
            Notice::Log { logger, data, .. } => {
                logger.as_mut().map_or(0, redact_string) + redact_value(data)
            }
        }
    }
}

/// Where a transport hears a call's notices.
pub type NoticeSink = Arc<dyn Fn(Notice) + Send + Sync>;

/// One call's notices: redacted, limited, then handed to the transport's sink.
pub(crate) struct Notices {
    sink: NoticeSink,
    window: Mutex<Window>,
}

struct Window {
    started: Instant,
    passed: u32,
    dropped: u64,
}

impl Notices {
    pub(crate) fn new(sink: NoticeSink) -> Self {
        Notices {
            sink,
            window: Mutex::new(Window {
                started: Instant::now(),
                passed: 0,
                dropped: 0,
            }),
        }
    }

    /// Passes `notice` on unless this call already passed [`NOTICES_PER_SECOND`] in the
    /// current second; whether it was passed on.
    pub(crate) fn send(&self, mut notice: Notice) -> bool {
        {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            let now = Instant::now();
            if now.duration_since(window.started) >= Duration::from_secs(1) {
                window.started = now;
                window.passed = 0;
            }
            if window.passed >= NOTICES_PER_SECOND {
                window.dropped += 1;
                return false;
            }
            window.passed += 1;
        }
        notice.redact();
        (self.sink)(notice);
        true
    }

    /// How many notices the limit dropped.
    pub(crate) fn dropped(&self) -> u64 {
        self.window
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .dropped
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collecting() -> (NoticeSink, Arc<Mutex<Vec<Notice>>>) {
        let seen: Arc<Mutex<Vec<Notice>>> = Arc::default();
        let into = Arc::clone(&seen);
        let sink: NoticeSink = Arc::new(move |notice| into.lock().unwrap().push(notice));
        (sink, seen)
    }

    #[test]
    fn a_flood_is_cut_to_the_limit_and_counted() {
        let (sink, seen) = collecting();
        let notices = Notices::new(sink);
        let passed = (0..1_000)
            .filter(|n| {
                notices.send(Notice::Progress {
                    progress: f64::from(*n),
                    total: None,
                    message: None,
                })
            })
            .count();
        assert_eq!(passed, NOTICES_PER_SECOND as usize);
        assert_eq!(seen.lock().unwrap().len(), passed);
        assert_eq!(notices.dropped(), 1_000 - passed as u64);
    }

    #[test]
    fn what_a_notice_says_is_redacted() {
        let (sink, seen) = collecting();
        let notices = Notices::new(sink);
        let key = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
        notices.send(Notice::Progress {
            progress: 1.0,
            total: Some(2.0),
            message: Some(format!("cloning with {key}")),
        });
        notices.send(Notice::Log {
            level: "info".into(),
            logger: None,
            data: serde_json::json!({"token": key}),
        });
        let seen = seen.lock().unwrap();
        let text = format!("{seen:?}");
        assert!(!text.contains(key), "{text}");
        assert_eq!(seen.len(), 2);
    }
}
