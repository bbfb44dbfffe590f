//! A `tools/call` of a session answered by toolgate itself, not by rmcp's session worker.
//!
//! rmcp serves every request of a session through its session worker: the request goes to
//! the worker's task, from there to the service's, a task of its own runs the handler, and its
//! result comes back the same way as an event stream, which `answer` then turns into one JSON
//! body. For a call that needs nothing of that machinery, this costs more than the rest of
//! the call: a profile of a read forwarded to an upstream put a sixth of toolgate's CPU there.
//!
//! So a call whose answer is only its result is run here, on the session's own state, through
//! the same pipeline, watcher and reply as rmcp's handler runs it, and answered as
//! `application/json`. That is a `tools/call` that:
//!
//! - belongs to a session whose client said it is initialized, which has not ended;
//! - carries no `_meta` (no progress token, no per-request log level or protocol version),
//!   no `requestState` and no `inputResponses`;
//! - comes to a session that asked for no log messages, and to a profile whose approvals are
//!   not asked of the client (elicitation);
//! - has the headers rmcp would accept without a further look: it accepts both JSON and event
//!   streams, its body is JSON, any `MCP-Protocol-Version` names a revision with sessions, and
//!   it has no `Mcp-Method` or `Mcp-Name` header to check against the body.
//!
//! Anything else goes to rmcp, as before. A call still running after the keep-alive interval
//! is answered as an event stream instead: keep-alive comments, then its result, so that a
//! client that went away is noticed by the next comment and its call cancelled, as on rmcp's
//! streams. A `notifications/cancelled` naming a call answered here cancels it
//! ([`cancelled`]), and so does the end of its session.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Response, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Body as HttpBody, Frame};
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, ClientNotification, ClientRequest, GetMeta as _, JsonRpcRequest,
    ProtocolVersion, RequestId, ServerJsonRpcMessage, ServerResult,
};
use tokio_util::sync::CancellationToken;

use super::Body;
use crate::auth::Principal;
use crate::reply;
use crate::server::Server;
use crate::session::{self, SessionState};
use crate::watcher::{Ask, Logs, Watched, watch_call};
use crate::wire::ArgumentText;

/// Whether `request` can be answered here (see the module's documentation).
pub(super) fn eligible(
    headers: &HeaderMap,
    request: &JsonRpcRequest<ClientRequest>,
    state: &SessionState,
    server: &Server,
    principal: &Principal,
) -> bool {
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return false;
    };
    let params = &call.params;
    state.ready.load(std::sync::atomic::Ordering::Acquire)
        && !state.ended.is_cancelled()
        && !state.log.is_set()
        && params.meta.as_ref().is_none_or(|meta| meta.is_empty())
        && request.request.get_meta().is_empty()
        && params.request_state.is_none()
        && params.input_responses.is_none()
        && server
            .elicitation()
            .is_none_or(|e| !e.profiles.contains(&principal.profile))
        && plain_headers(headers)
}

/// Headers rmcp would take as they are: both media types accepted, a JSON body, a revision
/// with sessions if one is named, and no standard headers (SEP-2243) to check.
fn plain_headers(headers: &HeaderMap) -> bool {
    let (mut json, mut events) = (false, false);
    for value in headers.get_all(ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        for media in value.split(',') {
            let essence = media.split(';').next().unwrap_or_default().trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            events |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    let body_is_json = headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .eq_ignore_ascii_case("application/json")
        });
    let revision = match headers.get("mcp-protocol-version") {
        None => true,
        Some(value) => value.to_str().is_ok_and(|version| {
            [
                ProtocolVersion::V_2024_11_05,
                ProtocolVersion::V_2025_03_26,
                ProtocolVersion::V_2025_06_18,
                ProtocolVersion::V_2025_11_25,
            ]
            .iter()
            .any(|known| known.as_str() == version)
        }),
    };
    json && events
        && body_is_json
        && revision
        && !headers.contains_key("mcp-method")
        && !headers.contains_key("mcp-name")
}

/// Cancels the call answered here that `notification` names, if it is one. rmcp, which sees
/// the notification too, knows no such call and lets it be.
pub(super) fn cancelled(state: &SessionState, notification: &ClientNotification) {
    let ClientNotification::CancelledNotification(cancelled) = notification else {
        return;
    };
    let Some(id) = &cancelled.params.request_id else {
        return;
    };
    let calls = state.direct.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, call)) = calls.get(&id_key(id)) {
        call.cancel();
    }
}

/// A request id as the table of calls answered here knows it: as JSON, so that `7` and `"7"`
/// stay two ids, as they are to rmcp.
fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// Runs the call `request` of the session `state` and answers it: one JSON body, or an event
/// stream if it runs longer than `keep_alive`.
pub(super) async fn answer(
    state: Arc<SessionState>,
    server: &Server,
    principal: Principal,
    request: JsonRpcRequest<ClientRequest>,
    text: Option<ArgumentText>,
    keep_alive: Duration,
) -> Response<Body> {
    let id = request.id;
    let ClientRequest::CallToolRequest(call) = request.request else {
        let refused = McpError::internal_error("only a tool call is answered here", None);
        return message_response(&ServerJsonRpcMessage::error(refused, Some(id)));
    };
    let params = call.params;
    let key = id_key(&id);
    // Cancelled by the client's `notifications/cancelled`, or by the end of the session.
    let stop = state.ended.child_token();
    let running = state.start_call(
        principal,
        &params.name,
        text.map(|ArgumentText(text)| text),
        params.arguments,
        id.to_string(),
        state.client.get(),
    );
    let mine = Arc::new(());
    let mut abandon = Abandon {
        call: Some(running.cancelled()),
        state: Arc::clone(&state),
        key: key.clone(),
        mine: Arc::clone(&mine),
    };
    state
        .direct
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(key, (mine, stop.clone()));
    let interval = server.progress_interval();
    let mut finished: Finished = Box::pin(async move {
        let mut running = running;
        // Nobody asked for log messages: what the tool reports has no one to go to.
        let logs = Logs::new(&state.log, None, None);
        let unheard = CancellationToken::new();
        let watched = watch_call(
            &mut running,
            &stop,
            &unheard,
            &mut None,
            &logs,
            interval,
            &Ask::Nobody,
        )
        .await;
        result(watched, id)
    });
    tokio::select! {
        message = &mut finished => {
            abandon.done();
            message_response(&message)
        }
        () = tokio::time::sleep(keep_alive) => {
            let stream = Events {
                finished: std::sync::Mutex::new(finished),
                ticks: tokio::time::interval(keep_alive),
                abandon: Some(abandon),
            };
            let mut response = Response::new(stream.boxed());
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
    }
}

type Finished = Pin<Box<dyn Future<Output = ServerJsonRpcMessage> + Send>>;

/// The JSON-RPC answer to call `id` as its watch ended, as rmcp's handler gives it.
fn result(watched: Watched, id: RequestId) -> ServerJsonRpcMessage {
    match session::ended(watched) {
        Ok(outcome) => {
            let mut result =
                ServerResult::from(CallToolResponse::from(reply::tool_result(outcome)));
            // Sessions are of the revisions before 2026-07-28: their results have the shape
            // rmcp's handler gives those peers.
            result.strip_result_type_for_legacy_peer();
            result.strip_non_object_output_for_legacy_peer();
            ServerJsonRpcMessage::response(result, id)
        }
        Err(error) => ServerJsonRpcMessage::error(error, Some(id)),
    }
}

fn message_response(message: &ServerJsonRpcMessage) -> Response<Body> {
    let body = serde_json::to_vec(message).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed());
    *response.status_mut() = StatusCode::OK;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A call answered here, until it has been answered: dropped before (its client went away),
/// it cancels the call, whose outcome is recorded as for any cancelled call. Either way the
/// call is no longer one a `notifications/cancelled` can name.
struct Abandon {
    call: Option<toolgate_core::Cancel>,
    state: Arc<SessionState>,
    key: String,
    /// Tells this call's entry in the table from a later call's under the same id.
    mine: Arc<()>,
}

impl Abandon {
    fn done(&mut self) {
        self.call = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            call.cancel();
        }
        let mut calls = self
            .state
            .direct
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if calls
            .get(&self.key)
            .is_some_and(|(entry, _)| Arc::ptr_eq(entry, &self.mine))
        {
            calls.remove(&self.key);
        }
    }
}

/// The event stream of a call that ran past the keep-alive interval: a comment at once and
/// every interval after, then the result as one event.
struct Events {
    /// In a mutex only so that the body may be shared between threads; only `poll_frame`,
    /// which has it alone, touches it.
    finished: std::sync::Mutex<Finished>,
    ticks: tokio::time::Interval,
    /// `None` once the result was sent.
    abandon: Option<Abandon>,
}

impl HttpBody for Events {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let Some(abandon) = this.abandon.as_mut() else {
            return Poll::Ready(None);
        };
        let finished = this
            .finished
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner);
        if let Poll::Ready(message) = finished.as_mut().poll(cx) {
            abandon.done();
            this.abandon = None;
            let mut event = b"event: message\ndata: ".to_vec();
            event.extend(serde_json::to_vec(&message).unwrap_or_default());
            event.extend_from_slice(b"\n\n");
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(event)))));
        }
        if this.ticks.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(
                b": keep-alive\n\n",
            )))));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.abandon.is_none()
    }
}
