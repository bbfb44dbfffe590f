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
    CallToolRequest, CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, ErrorData, GetExtensions, RequestId,
    ServerJsonRpcMessage,
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
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// The parts of `tools/call` params toolgate reads itself.
#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow, default, rename = "name")]
    _name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    arguments: Option<&'a RawValue>,
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
    let id = match envelope.id.map(|raw| serde_json::from_str::<RequestId>(raw.get())) {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return reply(
                ErrorData::invalid_request("the request id must be a string or an integer", None),
                None,
            );
        }
    };
    let mut message: ClientJsonRpcMessage = match serde_json::from_slice(bytes) {
        Ok(message) => message,
        Err(e) => return malformed(&envelope, id, &e),
    };
    if let ClientJsonRpcMessage::Request(request) = &mut message {
        if let ClientRequest::CustomRequest(custom) = &request.request
            && REQUEST_METHODS.contains(&custom.method.as_str())
        {
            // rmcp reads a known method whose params do not fit as a custom request. A
            // `tools/call` whose only fault is its arguments goes on, for stage 1 to refuse
            // them in words a model can use; anything else is answered as malformed.
            match (custom.method.as_str(), envelope.params) {
                ("tools/call", params) => match call_with_odd_arguments(params) {
                    Ok(call) => request.request = call,
                    Err(detail) => {
                        return reply(
                            ErrorData::invalid_params(
                                format!("invalid `tools/call` params: {detail}"),
                                None,
                            ),
                            Some(request.id.clone()),
                        );
                    }
                },
                (method, _) => {
                    return reply(
                        ErrorData::invalid_params(format!("invalid `{method}` params"), None),
                        Some(request.id.clone()),
                    );
                }
            }
        }
        if matches!(request.request, ClientRequest::CallToolRequest(_)) {
            let params = envelope.params.map_or("{}", RawValue::get);
            match serde_json::from_str::<CallParams<'_>>(params) {
                Ok(CallParams {
                    arguments: Some(text),
                    ..
                }) => {
                    request
                        .request
                        .extensions_mut()
                        .insert(ArgumentText(text.get().to_owned()));
                }
                Ok(_) => {}
                Err(e) => {
                    return reply(
                        ErrorData::invalid_params(format!("invalid `tools/call` params: {e}"), None),
                        Some(request.id.clone()),
                    );
                }
            }
        }
        request
            .request
            .extensions_mut()
            .insert(ClientRequestId(request.id.clone()));
    }
    Decoded::Message(Box::new(message))
}

/// A `tools/call` whose params are well formed except for an `arguments` that is not an
/// object: the call without its arguments (their text travels beside it), or what is wrong.
fn call_with_odd_arguments(params: Option<&RawValue>) -> Result<ClientRequest, String> {
    let params = params.map_or("null", RawValue::get);
    serde_json::from_str::<CallParams<'_>>(params).map_err(|e| e.to_string())?;
    let mut value: serde_json::Value = serde_json::from_str(params).map_err(|e| e.to_string())?;
    if let Some(object) = value.as_object_mut() {
        object.remove("arguments");
    }
    let params: CallToolRequestParams =
        serde_json::from_value(value).map_err(|e| e.to_string())?;
    Ok(ClientRequest::CallToolRequest(CallToolRequest::new(params)))
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
        let (code, id, message) =
            error_of(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#);
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
            assert!(!matches!(decode(line.as_bytes()), Decoded::Reply(_)), "{line}");
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
