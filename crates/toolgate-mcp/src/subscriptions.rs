//! `subscriptions/listen`, the 2026-07-28 way for a client to hear that toolgate's tools
//! changed (SEP-2575).
//!
//! From that revision on a server sends nothing a client did not ask for: no unsolicited
//! `notifications/tools/list_changed`. A client that wants to hear of changes opens a
//! `subscriptions/listen` request naming the notifications it wants; toolgate acknowledges the
//! subset it honours (tool list changes only: it serves no prompts and no resources) and then
//! sends each change as a notification tagged with the id of that request
//! (`_meta["io.modelcontextprotocol/subscriptionId"]`). rmcp sends the acknowledgement, tags
//! and filters; this module decides what is honoured and when the stream ends:
//!
//! - the client cancels the request (`notifications/cancelled` on stdio, closing the response
//!   stream over HTTP) or goes away: the stream ends without a result;
//! - the server stops, or the client closes a stdio session's input: the stream ends with its
//!   result, which tells the client the end was deliberate.
//!
//! Clients of the older revisions go on hearing of changes unasked, for the whole session.

use rmcp::ErrorData as McpError;
use rmcp::model::SubscriptionFilter;
use rmcp::service::SubscriptionContext;
use tokio_util::sync::CancellationToken;

use crate::server::Server;

/// Set by a transport on each `subscriptions/listen` request: cancelled when that transport
/// is about to stop (a stdio client closed its input), so the subscription ends with its
/// result while it can still be written.
#[derive(Debug, Clone, Default)]
pub struct ListenEnd(pub CancellationToken);

/// What toolgate honours of a request: changes to the tool list. It has no prompts and no
/// resources, so their notifications are never acknowledged (rmcp intersects this with what
/// the client asked for and what the server advertises).
pub(crate) fn honoured() -> SubscriptionFilter {
    SubscriptionFilter::builder().tools_list_changed().build()
}

/// Serves one subscription until the client cancels it, the session ends, or the server or
/// transport stops; `Ok` sends the final result (transports drop it for a cancelled request).
pub(crate) async fn serve(
    server: &Server,
    subscription: SubscriptionContext,
    session_ended: &CancellationToken,
    transport_ending: Option<ListenEnd>,
) -> Result<(), McpError> {
    let _open = server.listening();
    let mut changes = server.changes();
    // Only what changes from now on: the client lists after it was acknowledged.
    changes.mark_unchanged();
    let tools = subscription.accepted().tools_list_changed == Some(true);
    let transport_ending = transport_ending.unwrap_or_default();
    loop {
        tokio::select! {
            () = subscription.cancelled() => return Ok(()),
            () = session_ended.cancelled() => return Ok(()),
            () = server.closing().cancelled() => return Ok(()),
            () = transport_ending.0.cancelled() => return Ok(()),
            changed = changes.changed(), if tools => {
                // The server went away, or the client stopped reading: nothing more to say.
                if changed.is_err() || subscription.sink().notify_tool_list_changed().await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}
