//! A second channel for approvals: the person at the MCP client, asked by elicitation.
//!
//! Off unless the operator enables it for a profile ([`Elicitation`], given to
//! [`Server::with_elicitation`](crate::Server::with_elicitation)); a session uses it only
//! when its profile is one of those and its client declared the `elicitation` capability for
//! forms. The request stays in the approval console too, and the first answer wins; an answer
//! that comes second is refused by the desk and changes nothing.
//!
//! The form carries no secrets and asks for none: its message is the desk's account of the
//! request (tool, effect, workspace, what will happen; never a grant, a token or a request id
//! of the console, and none at all for a request holding what redaction would hide), and its
//! only fields are the decision —
//! allow once or reject — and an optional reason for the model. Standing workspace grants are
//! given in the console only.
//!
//! A form is offered only when it can show the whole request: every byte that will run (a
//! command's `stdin` line by line, a script's text) is in the tool's preview, which the desk's
//! account holds whole; a desk answers `None` for an account past its bound (the console's is
//! 6,000 characters or 200 lines), and then no form is sent and the call waits in the console
//! as it would without elicitation.
//!
//! How the form reaches the client depends on the revision:
//!
//! - **Handshake revisions (2025-11-25 and before)**: an `elicitation/create` request while the
//!   call waits; when the call ends first (decided in the console, cancelled, expired), the
//!   request is cancelled with `notifications/cancelled`.
//! - **2026-07-28**, which forbids requests from server to client: the call answers
//!   `input_required` with the same form while it keeps waiting on the server, under a random
//!   `requestState` that names it. The client's retry of the same call (same principal, tool
//!   and arguments) carries the answer and gets the call's result. A waiting call nobody comes
//!   back for is cancelled after [`Elicitation::hold`].

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema,
    InputRequest, InputRequests,
};
use rmcp::service::RequestContext;
use serde_json::{Map, Value, json};

use crate::auth::Principal;

/// The key of the approval form in an `input_required` result's `inputRequests`.
pub(crate) const INPUT_KEY: &str = "approval";

/// The most calls that wait at once for a 2026-07-28 client to come back with an answer
/// (the console's desk holds fewer requests than this).
pub(crate) const MAX_PARKED: usize = 64;

const UNKNOWN_STATE: &str =
    "unknown requestState: the call it named has ended or was never made; call the tool again";

/// How long a session waits for a call's request to arrive at the desk after the call said it
/// waits for a person: the request is registered at once, unless a standing grant or a full
/// desk answered it without asking anybody.
const FIND_REQUEST: Duration = Duration::from_secs(2);

/// Where a session finds the request a waiting call made and puts a person's answer to it:
/// in toolgate, the approval console's broker.
pub trait ApprovalDesk: Send + Sync + Debug {
    /// What a person should read about call `call_id`'s request, while it waits for one;
    /// `None` also when the request cannot be shown whole in a form, which is then not sent.
    fn question(&self, call_id: &str) -> Option<String>;

    /// A count of the requests that arrived at the desk, which changes each time one arrives:
    /// a session waiting for a call's request wakes then, not on a timer.
    fn arrivals(&self) -> Arrivals;

    /// A person's answer to call `call_id`'s request; `Err` says why it was not taken (it was
    /// answered already, say).
    fn answer(&self, call_id: &str, answer: Answer) -> Result<(), NotTaken>;
}

/// Why a desk did not take a person's answer: the desk's own error.
pub type NotTaken = Box<dyn std::error::Error + Send + Sync>;

/// A count of the requests that arrived at a desk (see [`ApprovalDesk::arrivals`]).
pub type Arrivals = tokio::sync::watch::Receiver<u64>;

/// What a person answered in the client's form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    AllowOnce,
    Reject { reason: Option<String> },
}

/// Asking the person at the client, for sessions of some profiles.
#[derive(Debug, Clone)]
pub struct Elicitation {
    pub desk: Arc<dyn ApprovalDesk>,
    /// The profiles whose sessions may be asked.
    pub profiles: BTreeSet<String>,
    /// How long a 2026-07-28 call waits on the server for the client's retry after answering
    /// `input_required`; past it the call is cancelled. Set it above the approval timeout, or
    /// a call may be cancelled while the console could still answer it.
    pub hold: Duration,
}

impl Elicitation {
    /// The desk, if a call of `profile` in this request's session may be asked about by form.
    pub(crate) fn for_request(
        &self,
        profile: &str,
        context: &RequestContext<RoleServer>,
    ) -> Option<Arc<dyn ApprovalDesk>> {
        if !self.profiles.contains(profile) {
            return None;
        }
        let capability = context.client_capabilities()?.elicitation?;
        // A capability that names neither mode is the form mode of the first revisions.
        let forms = capability.form.is_some() || capability.url.is_none();
        forms.then(|| Arc::clone(&self.desk))
    }
}

/// The form asking for a decision on a request described by `message`; `None` if the SDK
/// refused its schema, and then nobody is asked. Every invisible or direction-changing
/// character of `message` is shown as its `<U+XXXX>` mark, whatever desk wrote it: a client
/// renders the message as it likes, and a person must read the characters that are there.
pub(crate) fn form(message: String) -> Option<ElicitRequestParams> {
    let message = toolgate_core::visible::mark_invisible(&message).into_owned();
    let schema = json!({
        "type": "object",
        "properties": {
            "decision": {
                "type": "string",
                "title": "Decision",
                "oneOf": [
                    {"const": "allow_once", "title": "Allow once"},
                    {"const": "reject", "title": "Reject"},
                ],
            },
            "reason": {
                "type": "string",
                "title": "Reason (for a rejection; the model reads it)",
                "maxLength": toolgate_core::MAX_REASON_CHARS,
            },
        },
        "required": ["decision"],
    });
    let requested_schema: ElicitationSchema = serde_json::from_value(schema).ok()?;
    Some(ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    })
}

/// The form as one of an `input_required` result's requests.
pub(crate) fn input_requests(form: ElicitRequestParams) -> InputRequests {
    InputRequests::from([(
        INPUT_KEY.to_owned(),
        InputRequest::Elicitation(ElicitRequest::new(form)),
    )])
}

/// The answer a form's result gives, if any. Only an accepted form with a decision allows;
/// a declined form rejects; a cancelled, malformed or unknown one decides nothing, and the
/// request keeps waiting in the console.
pub(crate) fn answer_of(result: &ElicitResult) -> Option<Answer> {
    match result.action {
        ElicitationAction::Accept => {
            let content = result.content.as_ref()?.as_object()?;
            let reason = match content.get("reason") {
                None | Some(Value::Null) => None,
                // The form's `maxLength` binds no client; a longer reason is cut, not allowed
                // to lose the rejection it comes with.
                Some(Value::String(reason)) => Some(
                    reason
                        .trim()
                        .chars()
                        .take(toolgate_core::MAX_REASON_CHARS)
                        .collect::<String>(),
                )
                .filter(|r| !r.is_empty()),
                Some(_) => return None,
            };
            match content.get("decision")?.as_str()? {
                "allow_once" => Some(Answer::AllowOnce),
                "reject" => Some(Answer::Reject { reason }),
                _ => None,
            }
        }
        ElicitationAction::Decline => Some(Answer::Reject {
            reason: Some("declined in the MCP client".to_owned()),
        }),
        // Cancelled, or an action this revision does not know: nothing decided.
        _ => None,
    }
}

/// The answer in a retry's `inputResponses`, if it holds a valid one.
pub(crate) fn answer_in(responses: &rmcp::model::InputResponses) -> Option<Answer> {
    let result: ElicitResult = serde_json::from_value(responses.get(INPUT_KEY)?.clone()).ok()?;
    answer_of(&result)
}

/// The form for call `call_id`'s request, once the desk has it (woken by each arrival at the
/// desk): `None` when it does not show up within [`FIND_REQUEST`] (a standing grant or a full
/// desk answered without asking), so nobody is asked.
pub(crate) async fn find_form(
    desk: &dyn ApprovalDesk,
    call_id: &str,
) -> Option<ElicitRequestParams> {
    let deadline = tokio::time::Instant::now() + FIND_REQUEST;
    let mut arrivals = desk.arrivals();
    loop {
        // Marked seen before the look, so that an arrival after it wakes the wait below.
        arrivals.borrow_and_update();
        if let Some(question) = desk.question(call_id) {
            return form(question);
        }
        match tokio::time::timeout_at(deadline, arrivals.changed()).await {
            Ok(Ok(())) => {}
            // The deadline passed, or the desk is gone.
            Err(_) | Ok(Err(_)) => return None,
        }
    }
}

/// A 2026-07-28 call that answered `input_required` and waits, on the server, for the
/// client's retry.
#[derive(Debug)]
pub(crate) struct Parked<C> {
    pub(crate) principal: Principal,
    pub(crate) tool: String,
    pub(crate) arguments: Option<Map<String, Value>>,
    pub(crate) call_id: Arc<str>,
    pub(crate) call: C,
}

/// What the parking lot needs of a waiting call: that it can be told to stop, when nobody
/// comes back for it or the server stops.
pub(crate) trait Parkable {
    fn cancel(&self);
}

/// Calls that answered `input_required`, by the `requestState` they gave, shared by every
/// session of one server: a retry may come on another session than the call.
#[derive(Debug)]
pub(crate) struct ParkingLot<C: Parkable> {
    table: Arc<Mutex<HashMap<String, Box<Parked<C>>>>>,
}

impl<C: Parkable> Default for ParkingLot<C> {
    fn default() -> Self {
        ParkingLot {
            table: Arc::default(),
        }
    }
}

impl<C: Parkable + Send + 'static> ParkingLot<C> {
    /// Leaves `parked` waiting for its client's retry under a fresh random `requestState`,
    /// for at most `hold`; then it is cancelled. Gives it back when too many wait already or
    /// no state could be drawn.
    pub(crate) fn park(
        &self,
        parked: Box<Parked<C>>,
        hold: Duration,
    ) -> Result<String, Box<Parked<C>>> {
        let Ok(state) = crate::auth::generate_token() else {
            return Err(parked);
        };
        {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            if table.len() >= MAX_PARKED {
                return Err(parked);
            }
            table.insert(state.clone(), parked);
        }
        let table = Arc::downgrade(&self.table);
        let expiring = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(hold).await;
            let Some(table) = table.upgrade() else {
                return;
            };
            let left = table
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&expiring);
            if let Some(parked) = left {
                parked.call.cancel();
            }
        });
        Ok(state)
    }

    /// The call parked under `state`, for a retry by the same principal of the same tool with
    /// the same arguments. A retry that does not match leaves it parked.
    pub(crate) fn claim(
        &self,
        state: &str,
        principal: &Principal,
        tool: &str,
        arguments: Option<&Map<String, Value>>,
    ) -> Result<Box<Parked<C>>, &'static str> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let matches = |parked: &Parked<C>| {
            parked.principal == *principal
                && parked.tool == tool
                && parked.arguments.as_ref() == arguments
        };
        match table.get(state) {
            Some(parked) if matches(parked) => table.remove(state).ok_or(UNKNOWN_STATE),
            Some(_) => Err(
                "this requestState belongs to another call: a retry must repeat the same tool and arguments",
            ),
            None => Err(UNKNOWN_STATE),
        }
    }
}

impl<C: Parkable> Drop for ParkingLot<C> {
    fn drop(&mut self) {
        for parked in self
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
        {
            parked.call.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut result = ElicitResult::new(action);
        result.content = content;
        result
    }

    /// A desk that counts how often it is looked at, with the request of `call-1` once
    /// `arrive` was called.
    #[derive(Debug)]
    struct CountingDesk {
        looks: std::sync::atomic::AtomicUsize,
        arrived: tokio::sync::watch::Sender<u64>,
    }

    impl CountingDesk {
        fn arrive(&self) {
            self.arrived.send_modify(|count| *count += 1);
        }
    }

    impl ApprovalDesk for CountingDesk {
        fn question(&self, call_id: &str) -> Option<String> {
            self.looks
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (call_id == "call-1" && *self.arrived.borrow() > 0).then(|| "allow?".to_owned())
        }
        fn arrivals(&self) -> Arrivals {
            self.arrived.subscribe()
        }
        fn answer(&self, _: &str, _: Answer) -> Result<(), NotTaken> {
            Ok(())
        }
    }

    /// A session waiting for a call's request at the desk looks at the desk once, then again
    /// only when a request arrives: never on a timer (it looked every 5 ms, issue 38).
    #[tokio::test(flavor = "current_thread")]
    async fn the_form_is_found_when_its_request_arrives_not_by_looking_on_a_timer() {
        let desk = Arc::new(CountingDesk {
            looks: Default::default(),
            arrived: tokio::sync::watch::Sender::new(0),
        });
        let looks = || desk.looks.load(std::sync::atomic::Ordering::Relaxed);
        let waited = tokio::time::timeout(Duration::from_millis(300), find_form(&*desk, "call-1"));
        assert!(waited.await.is_err(), "no request arrived: still waiting");
        assert_eq!(looks(), 1, "looked once while nothing arrived");

        let finding = tokio::spawn({
            let desk = Arc::clone(&desk);
            async move { find_form(&*desk, "call-1").await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        desk.arrive();
        let found = tokio::time::timeout(Duration::from_secs(5), finding).await;
        assert!(matches!(found, Ok(Ok(Some(_)))), "found once it arrived");
        assert_eq!(looks(), 3, "one look before the arrival, one after");
    }

    #[test]
    fn only_an_accepted_decision_allows() {
        let accept = |content| answer_of(&result(ElicitationAction::Accept, Some(content)));
        assert_eq!(
            accept(json!({"decision": "allow_once"})),
            Some(Answer::AllowOnce)
        );
        assert_eq!(
            accept(json!({"decision": "reject", "reason": "  not that file "})),
            Some(Answer::Reject {
                reason: Some("not that file".into())
            })
        );
        assert_eq!(
            accept(json!({"decision": "reject", "reason": ""})),
            Some(Answer::Reject { reason: None })
        );
        let long = "x".repeat(toolgate_core::MAX_REASON_CHARS + 5);
        assert_eq!(
            accept(json!({"decision": "reject", "reason": long})),
            Some(Answer::Reject {
                reason: Some("x".repeat(toolgate_core::MAX_REASON_CHARS))
            }),
            "a reason too long for the console still rejects"
        );
        for malformed in [
            json!({}),
            json!({"decision": "allow_workspace"}),
            json!({"decision": "ALLOW_ONCE"}),
            json!({"decision": true}),
            json!({"decision": "allow_once", "reason": 3}),
            json!("allow_once"),
        ] {
            assert_eq!(accept(malformed.clone()), None, "{malformed}");
        }
        assert_eq!(answer_of(&result(ElicitationAction::Accept, None)), None);
        assert!(matches!(
            answer_of(&result(ElicitationAction::Decline, None)),
            Some(Answer::Reject { .. })
        ));
        assert_eq!(
            answer_of(&result(
                ElicitationAction::Cancel,
                Some(json!({"decision": "allow_once"}))
            )),
            None,
            "a cancelled form decides nothing, whatever it holds"
        );
    }

    #[test]
    fn a_retry_answer_is_read_from_its_key() {
        let responses =
            |value: Value| rmcp::model::InputResponses::from([(INPUT_KEY.to_owned(), value)]);
        assert_eq!(
            answer_in(&responses(
                json!({"action": "accept", "content": {"decision": "allow_once"}})
            )),
            Some(Answer::AllowOnce)
        );
        assert_eq!(answer_in(&responses(json!({"action": "maybe"}))), None);
        assert_eq!(
            answer_in(&rmcp::model::InputResponses::from([(
                "other".to_owned(),
                json!({"action": "accept", "content": {"decision": "allow_once"}})
            )])),
            None
        );
    }

    #[test]
    fn the_form_marks_every_invisible_character_of_its_message() {
        let table = [
            ("+admin = \u{202E}false", "+admin = <U+202E>false"),
            ("\u{2066}if\u{2069}", "<U+2066>if<U+2069>"),
            ("pass\u{200B}word\u{FEFF}", "pass<U+200B>word<U+FEFF>"),
            ("\u{E0041}\u{E007F}", "<U+E0041><U+E007F>"),
            ("\u{1B}[2Jok\r", "<U+001B>[2Jok<U+000D>"),
            ("line\u{2028}break", "line<U+2028>break"),
            ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
        ];
        for (message, shown) in table {
            let ElicitRequestParams::FormElicitationParams { message, .. } =
                form(message.into()).unwrap()
            else {
                panic!("a form");
            };
            assert_eq!(message, shown);
        }
    }

    #[test]
    fn the_form_asks_for_a_decision_and_a_reason_only() {
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = form("m".into()).unwrap()
        else {
            panic!("a form");
        };
        let schema = serde_json::to_value(&requested_schema).unwrap();
        let fields: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(fields, ["decision", "reason"]);
        assert_eq!(schema["required"], json!(["decision"]));
    }
}
