//! What an upstream reports about a call while it runs, relayed as that call's own.
//!
//! toolgate sends each upstream `tools/call` a progress token of its own (the request's id), so
//! the upstream can report progress; its `notifications/progress` for that token, and its
//! `notifications/message` log lines for the call, become [`Notice`]s of the call's
//! [`toolgate_core::ExecContext`], which redacts them and limits how many reach the client.
//! Everything else is dropped here, before the client could see it: a progress token toolgate
//! did not give this call, a call that has ended, a level MCP does not name, a progress value
//! that does not grow (MCP requires it to), a notice too large to be a report.
//!
//! Which call a log line belongs to is plain over HTTP, where it arrives inside the response
//! stream of the call's own request. Over stdio a log line names no request, so it is the
//! call's only while exactly one call that listens is in flight on that upstream; with two or
//! more, whose it is would be a guess, and it is dropped rather than shown to the wrong client.

use std::cell::Cell;

use serde_json::{Map, Value};
use toolgate_core::Notice;

/// The longest notification line (or event) read as a notice; a longer one is dropped whole,
/// since a report that large is no progress report, and cutting it could cut a secret in two
/// where redaction no longer recognises either half.
pub const MAX_NOTICE_BYTES: usize = 16 << 10;

/// The levels of MCP's `notifications/message`.
const LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// An upstream notification that may be a call's notice.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Heard {
    /// Progress for the request whose id is `token`; `None` when the token is not one toolgate
    /// gives (not a non-negative integer).
    Progress { token: Option<u64>, notice: Notice },
    /// A log line, for whichever call it can be told to belong to.
    Log(Notice),
}

/// `method` and `params` of a notification of `bytes` bytes as a notice, or `None` when it is
/// not one toolgate relays.
pub(crate) fn heard(method: &str, params: Option<&Value>, bytes: usize) -> Option<Heard> {
    if bytes > MAX_NOTICE_BYTES {
        return None;
    }
    let params = params.and_then(Value::as_object);
    match method {
        "notifications/progress" => progress(params?),
        "notifications/message" => log(params?),
        _ => None,
    }
}

fn progress(params: &Map<String, Value>) -> Option<Heard> {
    let token = params.get("progressToken")?.as_u64();
    let progress = params.get("progress")?.as_f64()?;
    let total = match params.get("total") {
        None | Some(Value::Null) => None,
        Some(total) => Some(total.as_f64()?),
    };
    let message = match params.get("message") {
        None | Some(Value::Null) => None,
        Some(message) => Some(message.as_str()?.to_owned()),
    };
    Some(Heard::Progress {
        token,
        notice: Notice::Progress {
            progress,
            total,
            message,
        },
    })
}

fn log(params: &Map<String, Value>) -> Option<Heard> {
    let level = params.get("level")?.as_str()?;
    if !LEVELS.contains(&level) {
        return None;
    }
    let logger = match params.get("logger") {
        None | Some(Value::Null) => None,
        Some(logger) => Some(logger.as_str()?.to_owned()),
    };
    let data = params.get("data").cloned().unwrap_or(Value::Null);
    Some(Heard::Log(Notice::Log {
        level: level.to_owned(),
        logger,
        data,
    }))
}

/// One call's listener, on the thread that made the call: passes notices on in order, dropping
/// progress that does not grow.
pub(crate) struct Relay<L: Fn(Notice)> {
    listener: L,
    last_progress: Cell<Option<f64>>,
}

impl<L: Fn(Notice)> Relay<L> {
    pub(crate) fn new(listener: L) -> Self {
        Relay {
            listener,
            last_progress: Cell::new(None),
        }
    }

    pub(crate) fn pass(&self, notice: Notice) {
        if let Notice::Progress { progress, .. } = &notice {
            if self
                .last_progress
                .get()
                .is_some_and(|last| *progress <= last)
            {
                return;
            }
            self.last_progress.set(Some(*progress));
        }
        (self.listener)(notice);
    }
}

/// Request `id` of `method`, as sent over either transport. A call that listens for what the
/// upstream reports carries its id as its progress token too.
pub(crate) fn request_message(id: u64, method: &str, params: Value, listening: bool) -> Value {
    let params = if listening {
        with_progress_token(params, id)
    } else {
        params
    };
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// `params` with `_meta.progressToken` set to `token`, so the upstream may report progress.
pub(crate) fn with_progress_token(mut params: Value, token: u64) -> Value {
    if let Value::Object(object) = &mut params {
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if !meta.is_object() {
            *meta = Value::Object(Map::new());
        }
        if let Value::Object(meta) = meta {
            meta.insert("progressToken".to_owned(), Value::from(token));
        }
    }
    params
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::*;

    #[test]
    fn progress_and_log_notifications_become_notices() {
        let progress = json!({"progressToken": 7, "progress": 1, "total": 4, "message": "one"});
        assert_eq!(
            heard("notifications/progress", Some(&progress), 80),
            Some(Heard::Progress {
                token: Some(7),
                notice: Notice::Progress {
                    progress: 1.0,
                    total: Some(4.0),
                    message: Some("one".into())
                }
            })
        );
        let foreign = json!({"progressToken": "abc", "progress": 1});
        assert!(matches!(
            heard("notifications/progress", Some(&foreign), 40),
            Some(Heard::Progress { token: None, .. })
        ));
        let log = json!({"level": "warning", "logger": "db", "data": {"rows": 3}});
        assert_eq!(
            heard("notifications/message", Some(&log), 60),
            Some(Heard::Log(Notice::Log {
                level: "warning".into(),
                logger: Some("db".into()),
                data: json!({"rows": 3})
            }))
        );
    }

    #[test]
    fn malformed_or_oversized_notifications_are_not_notices() {
        let cases = [
            ("notifications/progress", json!({"progress": 1})),
            (
                "notifications/progress",
                json!({"progressToken": 1, "progress": "half"}),
            ),
            (
                "notifications/progress",
                json!({"progressToken": 1, "progress": 1, "message": 5}),
            ),
            ("notifications/message", json!({"level": "loud", "data": 1})),
            ("notifications/message", json!({"data": 1})),
            ("notifications/resources/updated", json!({"uri": "x"})),
        ];
        for (method, params) in cases {
            assert_eq!(heard(method, Some(&params), 50), None, "{method} {params}");
        }
        let fine = json!({"level": "info", "data": "x"});
        assert_eq!(
            heard("notifications/message", Some(&fine), MAX_NOTICE_BYTES + 1),
            None
        );
        assert_eq!(heard("notifications/message", None, 10), None);
    }

    #[test]
    fn progress_that_does_not_grow_is_dropped() {
        let seen = Mutex::new(Vec::new());
        let listener = |notice: Notice| seen.lock().unwrap().push(notice);
        let relay = Relay::new(&listener);
        for value in [1.0, 2.0, 2.0, 1.5, 3.0] {
            relay.pass(Notice::Progress {
                progress: value,
                total: None,
                message: None,
            });
        }
        relay.pass(Notice::Log {
            level: "info".into(),
            logger: None,
            data: json!("still passed"),
        });
        let progress: Vec<f64> = seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|n| match n {
                Notice::Progress { progress, .. } => Some(*progress),
                Notice::Log { .. } => None,
            })
            .collect();
        assert_eq!(progress, [1.0, 2.0, 3.0]);
        assert_eq!(seen.lock().unwrap().len(), 4);
    }

    #[test]
    fn the_progress_token_joins_whatever_meta_there_is() {
        let params = json!({"name": "t", "arguments": {}, "_meta": {"other": 1}});
        assert_eq!(
            with_progress_token(params, 9),
            json!({"name": "t", "arguments": {}, "_meta": {"other": 1, "progressToken": 9}})
        );
        assert_eq!(
            with_progress_token(json!({"name": "t", "_meta": 3}), 2)["_meta"],
            json!({"progressToken": 2})
        );
    }
}
