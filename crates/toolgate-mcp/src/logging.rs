//! MCP logging, for clients of the revisions that have it (SEP-2577 deprecates it from
//! 2026-07-28 on): a session that sets a level is sent a `warning` for every call that was
//! rejected or failed, so that a client's log shows what the model was told.

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

/// What a server offers: tools whose list may change, and logging.
pub(crate) fn capabilities() -> ServerCapabilities {
    ServerCapabilities::builder()
        .enable_logging()
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

    /// Sends `text` as a warning, if the session asked for warnings.
    pub(crate) async fn warn(&self, peer: &Peer<RoleServer>, text: String) {
        let wanted = *self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if wanted.is_some_and(|least| rank(LoggingLevel::Warning) >= least) {
            let mut params =
                LoggingMessageNotificationParam::new(LoggingLevel::Warning, Value::String(text));
            params.logger = Some("toolgate".to_owned());
            // Logging is a courtesy: a client that stopped listening does not fail the call.
            let _ = peer.notify_logging_message(params).await;
        }
    }
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
