//! MCP logging (SEP-2577 deprecates it from 2026-07-28 on): a client that asks for logs is
//! sent a `warning` for every call that was rejected or failed, so that its log shows what the
//! model was told, and the log messages a tool reports while it runs (an upstream server's own).
//!
//! A client of the 2025 revisions asks once for the session (`logging/setLevel`); one of
//! 2026-07-28 asks per request (`_meta["io.modelcontextprotocol/logLevel"]`), has no
//! `logging/setLevel`, and is not offered the deprecated `logging` capability.

#![expect(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577, and clients of the 2025 revisions still use it"
)]

use std::sync::{Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities, SetLevelRequestParams,
};
use rmcp::service::Peer;
use serde_json::Value;

/// MCP's logging levels, under a name the rest of the crate may use without repeating why.
pub(crate) type Level = LoggingLevel;

/// What a server offers clients of the 2025 revisions: tools whose list may change, and
/// logging.
pub(crate) fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_logging()
        .enable_tools()
        .enable_tool_list_changed()
        .build()
}

/// What a server offers clients of 2026-07-28: the same less what that revision deprecates
/// (logging; toolgate never offered roots or sampling, which are client capabilities). Tool
/// list changes are heard through `subscriptions/listen`.
pub(crate) fn modern_capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_tools()
        .enable_tool_list_changed()
        .build()
}

/// The least severe level a session wants to hear about; nothing until it says.
#[derive(Debug, Default)]
pub(crate) struct LogLevel(Mutex<Option<u8>>);

impl LogLevel {
    pub(crate) fn set(&self, params: &SetLevelRequestParams) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(rank(params.level));
    }

    /// Whether the session asked for log messages at all (`logging/setLevel`).
    pub(crate) fn is_set(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Whether a message at `level` is wanted: by the request's own level when it has one
    /// (2026-07-28), else by the session's.
    pub(crate) fn wants(&self, level: LoggingLevel, request: Option<LoggingLevel>) -> bool {
        let least = match request {
            Some(least) => Some(rank(least)),
            None => *self.0.lock().unwrap_or_else(PoisonError::into_inner),
        };
        least.is_some_and(|least| rank(level) >= least)
    }

    /// Sends `text` as a warning, if the request or the session asked for warnings.
    pub(crate) async fn warn(
        &self,
        peer: &Peer<RoleServer>,
        request: Option<LoggingLevel>,
        text: String,
    ) {
        self.send(
            peer,
            request,
            LoggingLevel::Warning,
            Some("toolgate".to_owned()),
            Value::String(text),
        )
        .await;
    }

    /// Sends a log message at `level`, if the request or the session asked for that level.
    pub(crate) async fn send(
        &self,
        peer: &Peer<RoleServer>,
        request: Option<LoggingLevel>,
        level: LoggingLevel,
        logger: Option<String>,
        data: Value,
    ) {
        if self.wants(level, request) {
            let mut params = LoggingMessageNotificationParam::new(level, data);
            params.logger = logger;
            // Logging is a courtesy: a client that stopped listening does not fail the call.
            let _ = peer.notify_logging_message(params).await;
        }
    }
}

/// A level named as MCP names them (`debug` … `emergency`); a name MCP does not know reads as
/// `info`, so that a message from a tool with its own vocabulary is neither lost nor raised.
pub(crate) fn level_named(name: &str) -> LoggingLevel {
    serde_json::from_value(Value::String(name.to_owned())).unwrap_or(LoggingLevel::Info)
}

fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
