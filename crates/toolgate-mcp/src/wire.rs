//! Bytes to JSON-RPC: the one place that decides what a client's message is.
//!
//! rmcp parses messages into typed values, and in doing so forgets two things toolgate needs:
//! the exact text of a `tools/call`'s `arguments` (so that stage 1 can refuse an object that
//! names a key twice, which a parsed map silently collapses) and a precise answer for input
//! that is not a message at all. [`decode`] reads one message and returns either a typed
//! message for rmcp, with the argument text attached, or the JSON-RPC error to send back at
//! once.

use std::borrow::Cow;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData,
    GetExtensions, JsonObject, JsonRpcRequest, RequestId, RequestMetaObject, ServerJsonRpcMessage,
};
use serde::Deserialize;
use serde_json::value::RawValue;

/// The exact JSON text of a `tools/call`'s `arguments`, as the client sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentText(pub String);

/// The request id the client chose, before any transport renamed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientRequestId(pub RequestId);

/// What one message turned out to be.
#[derive(Debug)]
pub enum Decoded {
    /// A message for the MCP service. A `tools/call` carries its [`ArgumentText`] and every
    /// request its [`ClientRequestId`] in the request's extensions.
    Message(Box<ClientJsonRpcMessage>),
    /// Not a message the service can take; send this answer back and go on.
    Reply(Box<ServerJsonRpcMessage>),
    /// Nothing to do: a blank line, or a notification nobody answers.
    Ignore,
}

/// The envelope of a JSON-RPC message, read without parsing what it carries. A derived
/// `Deserialize` refuses a field named twice, so `{"id": 1, "id": 2}` is refused here.
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// `tools/call` params as toolgate reads them: the arguments stay text, for stage 1 to parse
/// once, strictly; nothing else about them is parsed here.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
    #[serde(rename = "_meta", default)]
    meta: Option<JsonObject>,
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
    /// Answers to input requests toolgate never makes; a call that has them goes the long way.
    #[serde(rename = "inputResponses", borrow, default)]
    input_responses: Option<&'a RawValue>,
}

/// Request methods MCP defines; a malformed one of these is answered "invalid params".
const REQUEST_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "subscriptions/listen",
    "completion/complete",
    "logging/setLevel",
];

/// Decodes one message: a line on stdio, a body over HTTP.
pub fn decode(bytes: &[u8]) -> Decoded {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let bytes = bytes.trim_ascii();
    if bytes.is_empty() {
        return Decoded::Ignore;
    }
    if bytes.first() == Some(&b'[') {
        return reply(
            ErrorData::invalid_request("batched JSON-RPC requests are not supported", None),
            None,
        );
    }
    let envelope: Envelope<'_> = match serde_json::from_slice(bytes) {
        Ok(envelope) => envelope,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return reply(
                ErrorData::parse_error(format!("the message is not valid JSON: {e}"), None),
                None,
            );
        }
        Err(e) => {
            return reply(
                ErrorData::invalid_request(format!("not a JSON-RPC message: {e}"), None),
                None,
            );
        }
    };
    let id = match envelope
        .id
        .map(|raw| serde_json::from_str::<RequestId>(raw.get()))
    {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return reply(
                ErrorData::invalid_request("the request id must be a string or an integer", None),
                None,
            );
        }
    };
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return match (envelope.method, id) {
            (Some(_), None) => Decoded::Ignore,
            (_, id) => reply(
                ErrorData::invalid_request("`jsonrpc` must be \"2.0\"", None),
                id,
            ),
        };
    }
    if let (Some("tools/call"), Some(id)) = (envelope.method.as_deref(), &id) {
        match tool_call(envelope.params) {
            Ok(Some(call)) => {
                let mut message =
                    ClientJsonRpcMessage::Request(JsonRpcRequest::new(id.clone(), call));
                if let ClientJsonRpcMessage::Request(request) = &mut message {
                    request
                        .request
                        .extensions_mut()
                        .insert(ClientRequestId(id.clone()));
                }
                return Decoded::Message(Box::new(message));
            }
            Ok(None) => {}
            Err(e) => {
                return reply(
                    ErrorData::invalid_params(format!("invalid `tools/call` params: {e}"), None),
                    Some(id.clone()),
                );
            }
        }
    }
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(bytes) {
        Ok(message) => message,
        Err(e) => return malformed(&envelope, id, &e),
    };
    if let ClientJsonRpcMessage::Request(request) = &mut message {
        // rmcp reads a known method whose params do not fit as a custom request; answer it as
        // what it is, a malformed known request.
        if let ClientRequest::CustomRequest(custom) = &request.request
            && REQUEST_METHODS.contains(&custom.method.as_str())
        {
            return reply(
                ErrorData::invalid_params(format!("invalid `{}` params", custom.method), None),
                Some(request.id.clone()),
            );
        }
        if matches!(request.request, ClientRequest::CallToolRequest(_))
            && let Ok(params) = serde_json::from_str::<CallParams<'_>>(
                envelope.params.map_or("null", RawValue::get),
            )
            && let Some(text) = params.arguments
        {
            request
                .request
                .extensions_mut()
                .insert(ArgumentText(text.get().to_owned()));
        }
        request
            .request
            .extensions_mut()
            .insert(ClientRequestId(request.id.clone()));
    }
    Decoded::Message(Box::new(message))
}

/// A `tools/call` read the short way: the name and metadata parsed, the arguments kept as
/// their text (rmcp would parse them into a map, losing a repeated key, and refuse some that
/// stage 1 should refuse in words a model can use). `None` for a call that needs rmcp's own
/// reading.
fn tool_call(params: Option<&RawValue>) -> Result<Option<ClientRequest>, serde_json::Error> {
    let params: CallParams<'_> = serde_json::from_str(params.map_or("null", RawValue::get))?;
    if params.input_responses.is_some() {
        return Ok(None);
    }
    let mut call = CallToolRequestParams::new(params.name.into_owned());
    call.request_state = params.request_state;
    let mut request = CallToolRequest::new(call);
    if let Some(meta) = params.meta {
        request.extensions.insert(RequestMetaObject::from(meta));
    }
    if let Some(text) = params.arguments {
        request
            .extensions
            .insert(ArgumentText(text.get().to_owned()));
    }
    Ok(Some(ClientRequest::CallToolRequest(request)))
}

/// A well-formed envelope whose content rmcp could not read.
fn malformed(envelope: &Envelope<'_>, id: Option<RequestId>, error: &serde_json::Error) -> Decoded {
    match (&envelope.method, id) {
        // A notification is never answered, not even when it is malformed or unknown.
        (Some(_), None) => Decoded::Ignore,
        (Some(method), Some(id)) if REQUEST_METHODS.contains(&method.as_ref()) => reply(
            ErrorData::invalid_params(format!("invalid `{method}` params: {error}"), None),
            Some(id),
        ),
        (Some(_), Some(id)) => reply(
            ErrorData::invalid_request(format!("not a JSON-RPC request: {error}"), None),
            Some(id),
        ),
        // A response or error from the client that does not fit: there is nobody to tell.
        (None, Some(_)) => Decoded::Ignore,
        (None, None) => reply(
            ErrorData::invalid_request("a JSON-RPC message needs a `method` or an `id`", None),
            None,
        ),
    }
}

fn reply(error: ErrorData, id: Option<RequestId>) -> Decoded {
    Decoded::Reply(Box::new(ServerJsonRpcMessage::error(error, id)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorCode, NumberOrString};

    fn error_of(line: &str) -> (ErrorCode, Option<RequestId>, String) {
        match decode(line.as_bytes()) {
            Decoded::Reply(message) => match *message {
                ServerJsonRpcMessage::Error(e) => (e.error.code, e.id, e.error.message.into()),
                other => panic!("{line}: not an error: {other:?}"),
            },
            other => panic!("{line}: not a reply: {other:?}"),
        }
    }

    fn message_of(line: &str) -> ClientJsonRpcMessage {
        match decode(line.as_bytes()) {
            Decoded::Message(message) => *message,
            other => panic!("{line}: not a message: {other:?}"),
        }
    }

    #[test]
    fn malformed_input_gets_the_json_rpc_error_it_deserves() {
        let n = |i| Some(NumberOrString::Number(i));
        assert_eq!(error_of("{").0, ErrorCode::PARSE_ERROR);
        assert_eq!(error_of("not json").0, ErrorCode::PARSE_ERROR);
        assert_eq!(error_of("[]").0, ErrorCode::INVALID_REQUEST);
        assert_eq!(error_of("42").0, ErrorCode::INVALID_REQUEST);
        assert_eq!(error_of("{}").0, ErrorCode::INVALID_REQUEST);
        let (code, id, message) = error_of(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
        assert_eq!((code, id), (ErrorCode::INVALID_REQUEST, None));
        assert!(message.contains("duplicate field `id`"), "{message}");
        assert_eq!(
            error_of(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#).0,
            ErrorCode::INVALID_REQUEST
        );
        let (code, id, _) =
            error_of(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{}}"#);
        assert_eq!((code, id), (ErrorCode::INVALID_PARAMS, n(7)));
        let (code, id, _) = error_of(r#"{"jsonrpc":"1.0","id":3,"method":"frobnicate"}"#);
        assert_eq!((code, id), (ErrorCode::INVALID_REQUEST, n(3)));
    }

    #[test]
    fn notifications_are_never_answered() {
        for line in [
            "",
            "   \r",
            r#"{"jsonrpc":"2.0","id":1,"result":7,"error":8}"#,
        ] {
            assert!(matches!(decode(line.as_bytes()), Decoded::Ignore), "{line}");
        }
        // Unknown or malformed notifications go on to rmcp, which ignores them.
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/whatever"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":7}"#,
        ] {
            assert!(
                !matches!(decode(line.as_bytes()), Decoded::Reply(_)),
                "{line}"
            );
        }
    }

    #[test]
    fn tool_calls_keep_their_argument_text() {
        let line = r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"read_file","arguments":{"path": "a", "path": "b"}}}"#;
        let ClientJsonRpcMessage::Request(request) = message_of(line) else {
            panic!("not a request")
        };
        let extensions = request.request.extensions();
        assert_eq!(
            extensions.get::<ArgumentText>(),
            Some(&ArgumentText(r#"{"path": "a", "path": "b"}"#.into()))
        );
        assert_eq!(
            extensions.get::<ClientRequestId>(),
            Some(&ClientRequestId(NumberOrString::String("a".into())))
        );
        let twice = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{},"arguments":{}}}"#;
        assert_eq!(error_of(twice).0, ErrorCode::INVALID_PARAMS);
        let none = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}"#;
        let ClientJsonRpcMessage::Request(request) = message_of(none) else {
            panic!("not a request")
        };
        assert_eq!(request.request.extensions().get::<ArgumentText>(), None);
    }

    #[test]
    fn unknown_methods_reach_the_service_which_answers_method_not_found() {
        let line = "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"frobnicate\"}\r";
        assert!(matches!(
            message_of(line),
            ClientJsonRpcMessage::Request(r) if matches!(r.request, ClientRequest::CustomRequest(_))
        ));
    }
}
