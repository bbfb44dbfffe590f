//! The hook stage (`hook_denied`, `hook_failed`): the operator's own checks, run twice in a
//! call. A *pre_call* hook runs after stage 4, before the policy: it may allow, deny, ask for a
//! person, or change the arguments, which are validated and classified again and are then what
//! the policy, the person and the executor see. A *post_call* hook runs on the output before
//! stage 8: it may pass it, withhold it, or replace it.
//!
//! A hook only narrows: its allow is no permit (stage 5 still decides), and anything that is
//! not a clean answer refuses the call with `hook_failed` and the failure's kind. A hook in
//! [`HookMode::Observe`] is run and recorded, and changes nothing.

use std::fmt;

use serde::Deserialize;

use super::*;
use crate::approval::HookAsk;

/// The version of the protocol a hook is spoken to in (see [`HookInput::to_json`]).
pub const HOOK_PROTOCOL: &str = "toolgate.hook/1";

/// The most bytes a hook may answer with.
pub const MAX_HOOK_ANSWER_BYTES: usize = 64 * 1024;

/// When a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// After stage 4, before the policy.
    PreCall,
    /// On the output of a call that ran, before stage 8.
    PostCall,
}

impl HookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreCall => "pre_call",
            HookEvent::PostCall => "post_call",
        }
    }
}

/// Whether a hook decides, or is only heard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookMode {
    /// Its deny, ask, changed arguments or output, and its failure, all count.
    #[default]
    Enforce,
    /// Run and recorded; it can neither block nor change anything.
    Observe,
}

/// What a hook answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    Allow,
    Deny,
    /// A person must approve the call, whatever the policy says (pre_call only).
    Ask,
}

/// A hook's clean answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HookAnswer {
    pub decision: Option<HookDecision>,
    /// Why, for a deny: it reaches the model.
    pub reason: Option<String>,
    /// The arguments to use instead (pre_call).
    pub arguments: Option<Map<String, Value>>,
    /// The output to return instead (post_call).
    pub output: Option<Value>,
}

impl HookAnswer {
    /// An answer that lets the call go on unchanged.
    pub fn allow() -> Self {
        HookAnswer {
            decision: Some(HookDecision::Allow),
            ..HookAnswer::default()
        }
    }

    /// An answer that refuses the call, saying `reason`.
    pub fn deny(reason: impl Into<String>) -> Self {
        HookAnswer {
            decision: Some(HookDecision::Deny),
            reason: Some(reason.into()),
            ..HookAnswer::default()
        }
    }

    /// The answer a hook wrote: exactly one JSON object, at most
    /// [`MAX_HOOK_ANSWER_BYTES`], with a known decision and no key the protocol does not name.
    pub fn parse(bytes: &[u8], event: HookEvent) -> Result<HookAnswer, HookFailure> {
        use HookFailureKind as Kind;
        if bytes.len() > MAX_HOOK_ANSWER_BYTES {
            return Err(HookFailure::new(
                Kind::OutputTooLarge,
                format!("more than {MAX_HOOK_ANSWER_BYTES} bytes of answer"),
            ));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Err(HookFailure::new(Kind::NoOutput, "the hook wrote nothing"));
        }
        let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<Value>();
        let first = match values.next() {
            Some(Ok(value)) => value,
            Some(Err(error)) => {
                return Err(HookFailure::new(Kind::InvalidJson, error.to_string()));
            }
            None => return Err(HookFailure::new(Kind::NoOutput, "the hook wrote nothing")),
        };
        match values.next() {
            None => {}
            Some(Ok(_)) => {
                return Err(HookFailure::new(
                    Kind::SeveralValues,
                    "the hook wrote more than one JSON value",
                ));
            }
            Some(Err(error)) => {
                return Err(HookFailure::new(Kind::InvalidJson, error.to_string()));
            }
        }
        let Value::Object(mut object) = first else {
            return Err(HookFailure::new(
                Kind::InvalidAnswer,
                "the answer is not a JSON object",
            ));
        };
        let decision = match object.remove("decision") {
            None | Some(Value::Null) => {
                return Err(HookFailure::new(
                    Kind::NoDecision,
                    "the answer has no `decision`",
                ));
            }
            Some(value) => HookDecision::deserialize(&value).map_err(|_| {
                HookFailure::new(
                    Kind::UnknownDecision,
                    format!("`{value}` is not a decision (allow, deny or ask)"),
                )
            })?,
        };
        let reason = match object.remove("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(reason)) => Some(reason),
            Some(_) => {
                return Err(HookFailure::new(
                    Kind::InvalidAnswer,
                    "`reason` is not a string",
                ));
            }
        };
        let arguments = match object.remove("arguments") {
            None => None,
            Some(Value::Object(map)) if event == HookEvent::PreCall => Some(map),
            Some(_) => {
                return Err(HookFailure::new(
                    Kind::InvalidAnswer,
                    "`arguments` is an object a pre_call hook may answer with",
                ));
            }
        };
        let output = match object.remove("output") {
            None => None,
            Some(output) if event == HookEvent::PostCall => Some(output),
            Some(_) => {
                return Err(HookFailure::new(
                    Kind::InvalidAnswer,
                    "`output` is what a post_call hook may answer with",
                ));
            }
        };
        if let Some(key) = object.keys().next() {
            return Err(HookFailure::new(
                Kind::InvalidAnswer,
                format!("the answer has `{key}`, which the protocol does not name"),
            ));
        }
        Ok(HookAnswer {
            decision: Some(decision),
            reason,
            arguments,
            output,
        })
    }
}

/// Why a hook gave no clean answer: each refuses the call with `hook_failed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookFailureKind {
    /// It exited with a status other than 0, whatever it wrote.
    Exit,
    /// A signal ended it.
    Signal,
    /// It did not answer within its time; its processes were killed.
    Timeout,
    NoOutput,
    InvalidJson,
    SeveralValues,
    NoDecision,
    UnknownDecision,
    /// An object that breaks the protocol otherwise (a key it does not name, a wrong type).
    InvalidAnswer,
    /// The arguments it answered with do not pass stage 3.
    InvalidArguments,
    MissingProgram,
    OutputTooLarge,
    /// Its program, or a file its command names, changed since the configuration was loaded.
    Changed,
    /// It could not be started confined.
    Unstarted,
    /// A process of its tree could not be confirmed dead once it was killed (it would not
    /// die, or could not be looked for): whatever it answered is not taken.
    Unkillable,
    /// An in-process hook panicked.
    Panicked,
    /// The hooks kept changing the arguments: a pass over them all changed them again after
    /// as many passes as there are hooks.
    Unsettled,
}

impl HookFailureKind {
    pub fn as_str(self) -> &'static str {
        use HookFailureKind::*;
        match self {
            Exit => "exit",
            Signal => "signal",
            Timeout => "timeout",
            NoOutput => "no_output",
            InvalidJson => "invalid_json",
            SeveralValues => "several_values",
            NoDecision => "no_decision",
            UnknownDecision => "unknown_decision",
            InvalidAnswer => "invalid_answer",
            InvalidArguments => "invalid_arguments",
            MissingProgram => "missing_program",
            OutputTooLarge => "output_too_large",
            Changed => "changed",
            Unstarted => "unstarted",
            Unkillable => "unkillable",
            Panicked => "panicked",
            Unsettled => "unsettled",
        }
    }
}

impl fmt::Display for HookFailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A hook that gave no clean answer: the kind, and what happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookFailure {
    pub kind: HookFailureKind,
    pub detail: String,
}

impl HookFailure {
    pub fn new(kind: HookFailureKind, detail: impl Into<String>) -> Self {
        HookFailure {
            kind,
            detail: detail.into(),
        }
    }
}

/// What a hook is told of a call.
#[derive(Debug, Clone)]
pub struct HookInput<'a> {
    pub event: HookEvent,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub version: &'a str,
    /// The validated arguments.
    pub arguments: &'a Value,
    pub effect: Option<EffectClass>,
    pub actor: &'a str,
    pub surface: Surface,
    /// What stage 4 says the call touches, `kind:value`.
    pub resources: &'a [String],
    /// The output, for post_call.
    pub output: Option<&'a Value>,
}

impl HookInput<'_> {
    /// The object a process hook reads on its standard input, canonical.
    pub fn to_json(&self) -> String {
        let mut object = serde_json::json!({
            "protocol": HOOK_PROTOCOL,
            "event": self.event,
            "call_id": self.call_id,
            "tool": self.tool,
            "version": self.version,
            "arguments": self.arguments,
            "effect": self.effect,
            "actor": self.actor,
            "surface": self.surface,
            "resources": self.resources,
        });
        if let (Some(output), Value::Object(map)) = (self.output, &mut object) {
            map.insert("output".to_owned(), output.clone());
        }
        canonical_json(&object)
    }
}

/// An operator's check run on every call of the tools it names: in process, for a library
/// user, or a program the binary starts confined.
pub trait Hook: Send + Sync + fmt::Debug {
    /// The name the configuration gives it, in rejections and the record.
    fn name(&self) -> &str;

    fn event(&self) -> HookEvent;

    fn mode(&self) -> HookMode {
        HookMode::Enforce
    }

    /// Whether it runs on calls of the tool named `tool`; the default is every tool.
    fn applies_to(&self, _tool: &str) -> bool {
        true
    }

    /// What identifies this hook, as it is: bound into the approval of a call it let through,
    /// so that a person's approval is of the call as this hook judged it. A process hook adds
    /// the digests of its program and of the files its command names.
    fn identity(&self) -> String {
        self.name().to_owned()
    }

    /// Judges the call. Anything but `Ok` refuses it, unless the hook only observes.
    fn call(&self, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure>;
}

/// What the record keeps of one hook a call ran. The fields are in the byte order of their
/// names, so that the audit log writes them canonical at once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookRecord {
    /// Whether it changed the arguments or the output (or, observing, would have).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed: bool,
    /// Its decision, if it answered cleanly.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<HookDecision>,
    pub event: HookEvent,
    /// Why it gave no clean answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<HookFailureKind>,
    pub mode: HookMode,
    pub name: String,
    /// The reason an enforcing pre_call hook gave with its `ask`, for the person asked; not
    /// recorded.
    #[serde(skip)]
    pub ask_reason: Option<String>,
}

/// The enforcing pre_call hooks of `records` that asked for a person, with their reasons.
pub(super) fn asks(records: &[HookRecord]) -> Vec<HookAsk> {
    records
        .iter()
        .filter(|r| {
            r.event == HookEvent::PreCall
                && r.mode == HookMode::Enforce
                && r.decision == Some(HookDecision::Ask)
        })
        .map(|r| HookAsk {
            name: r.name.clone(),
            reason: r.ask_reason.clone(),
        })
        .collect()
}

impl Pipeline {
    /// The hooks of `event` that run on calls of `tool`.
    fn hooks_for(&self, event: HookEvent, tool: &str) -> Vec<Arc<dyn Hook>> {
        self.hooks
            .iter()
            .filter(|h| h.event() == event && h.applies_to(tool))
            .cloned()
            .collect()
    }

    /// The pre_call hooks, in the order configured: a call one of them refuses stops here;
    /// changed arguments go through stages 3 and 4 again, and the next hook sees them.
    pub(super) fn pre_call(&self, classified: Classified) -> Result<Classified, Stopped> {
        if self.hooks.is_empty() {
            return Ok(classified);
        }
        let name = &classified.tool.entry.name;
        let hooks = self.hooks_for(HookEvent::PreCall, name);
        let hooked = !hooks.is_empty()
            || self
                .hooks
                .iter()
                .any(|h| h.event() == HookEvent::PostCall && h.applies_to(name));
        let mut classified = if hooks.is_empty() {
            classified
        } else {
            self.judged(classified, hooks)?
        };
        if hooked {
            // A hook may take its whole time to answer: the rest of the call waits on a
            // thread that may wait. Placed after the hooks ran, because arguments a hook
            // changed are classified, and so placed, again.
            classified.trace.placement = Placement::Worker;
        }
        Ok(classified)
    }

    /// The pre_call `hooks` of the call, one after another.
    fn judged(
        &self,
        mut classified: Classified,
        hooks: Vec<Arc<dyn Hook>>,
    ) -> Result<Classified, Stopped> {
        if let Some(rejection) = self.foreign(&classified.trace) {
            let mut trace = classified.trace;
            trace.arguments = Some(classified.arguments);
            return Err(Stopped { rejection, trace });
        }
        let version = classified.tool.entry.version.to_string();
        // Every enforcing hook judges the arguments that will run: after one changes them, the
        // hooks are asked again from the first, until a pass changes nothing. A hook that
        // allowed the old arguments has not allowed the new ones. Each pass but the last
        // changed something, so more passes than hooks means they do not settle.
        let mut passes = 0;
        'pass: loop {
            passes += 1;
            classified.trace.hooks_bound.clear();
            for hook in &hooks {
                let judged = self.judge(&mut classified, &**hook, &version);
                let changed = match judged {
                    Ok(changed) => changed,
                    Err(rejection) => return Err(stop(classified, rejection)),
                };
                if let Some(arguments) = changed {
                    if passes > hooks.len() {
                        let failure = HookFailure::new(
                            HookFailureKind::Unsettled,
                            format!(
                                "the hooks changed the arguments again on pass {passes}; they do not settle"
                            ),
                        );
                        return Err(stop(classified, failed(&**hook, failure)));
                    }
                    classified = self.again(classified, arguments, &**hook)?;
                    continue 'pass;
                }
            }
            return Ok(classified);
        }
    }

    /// Asks one pre_call `hook` about `classified`; the arguments it changed, if it did.
    fn judge(
        &self,
        classified: &mut Classified,
        hook: &dyn Hook,
        version: &str,
    ) -> Result<Option<Map<String, Value>>, Rejection> {
        let started = Instant::now();
        let input = HookInput {
            event: HookEvent::PreCall,
            call_id: &classified.trace.call_id,
            tool: &classified.tool.entry.name,
            version,
            arguments: &classified.arguments,
            effect: Some(classified.effect),
            actor: &classified.invocation.actor,
            surface: classified.invocation.surface,
            resources: &classified.trace.resources,
            output: None,
        };
        let answered = ask(hook, &input);
        let changed = answered.as_ref().is_ok_and(|a| {
            a.arguments
                .as_ref()
                .is_some_and(|args| classified.arguments.as_object() != Some(args))
        });
        let trace = &mut classified.trace;
        trace.hooks.push(record(hook, &answered, changed));
        trace.record(Stage::Hook, started);
        if hook.mode() == HookMode::Observe {
            return Ok(None);
        }
        let answer = match answered {
            Ok(answer) => answer,
            Err(failure) => return Err(failed(hook, failure)),
        };
        match answer.decision {
            Some(HookDecision::Deny) => {
                return Err(denied(hook, answer.reason));
            }
            Some(HookDecision::Ask) => classified.trace.hook_asks = true,
            Some(HookDecision::Allow) | None => {}
        }
        classified.trace.hooks_bound.push(hook.identity());
        Ok(answer.arguments.filter(|_| changed))
    }

    /// Stages 3 and 4 again, over the arguments `hook` answered with; arguments that do not
    /// pass are the hook's failure.
    fn again(
        &self,
        classified: Classified,
        arguments: Map<String, Value>,
        hook: &dyn Hook,
    ) -> Result<Classified, Stopped> {
        let Classified {
            mut invocation,
            tool,
            trace,
            ..
        } = classified;
        invocation.arguments = arguments;
        let resolved = Resolved {
            invocation,
            tool,
            trace,
        };
        match self.validate(resolved) {
            Ok(validated) => Ok(self.classify(validated)),
            Err(Stopped {
                rejection,
                mut trace,
            }) => {
                if let Some(last) = trace.hooks.last_mut() {
                    last.failure = Some(HookFailureKind::InvalidArguments);
                }
                let failure = HookFailure::new(
                    HookFailureKind::InvalidArguments,
                    format!("{} ({})", rejection.message(), rejection.code()),
                );
                Err(Stopped {
                    rejection: failed(hook, failure),
                    trace,
                })
            }
        }
    }

    /// The post_call hooks, on the output of a call that ran: each may withhold it or replace
    /// it. Anything else passes through untouched.
    pub(super) fn post_call(&self, result: Result<Executed, Stopped>) -> Result<Executed, Stopped> {
        // Every call is described: without hooks, nothing is cloned or formatted for them.
        if self.hooks.is_empty() {
            return result;
        }
        let Ok(Executed {
            result: Ok(mut output),
            mut trace,
        }) = result
        else {
            return result;
        };
        let Some(tool) = trace.resolved.clone() else {
            return Ok(Executed {
                result: Ok(output),
                trace,
            });
        };
        let hooks = self.hooks_for(HookEvent::PostCall, &tool.entry.name);
        let version = tool.entry.version.to_string();
        let none = Value::Object(Map::new());
        for hook in hooks {
            let started = Instant::now();
            let input = HookInput {
                event: HookEvent::PostCall,
                call_id: &trace.call_id,
                tool: &tool.entry.name,
                version: &version,
                arguments: trace.arguments.as_ref().unwrap_or(&none),
                effect: trace.effect,
                actor: &trace.actor,
                surface: trace.surface,
                resources: &trace.resources,
                output: Some(&output.value),
            };
            let mut answered = ask(&*hook, &input);
            if let Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                ..
            }) = answered
            {
                answered = Err(HookFailure::new(
                    HookFailureKind::UnknownDecision,
                    "`ask` is no answer once the call ran",
                ));
            }
            let changed = answered
                .as_ref()
                .is_ok_and(|a| a.output.as_ref().is_some_and(|o| *o != output.value));
            trace.hooks.push(record(&*hook, &answered, changed));
            trace.record(Stage::Hook, started);
            if hook.mode() == HookMode::Observe {
                continue;
            }
            let rejection = match answered {
                Err(failure) => failed(&*hook, failure),
                Ok(answer) if answer.decision == Some(HookDecision::Deny) => {
                    denied(&*hook, answer.reason)
                }
                Ok(answer) => {
                    if let Some(replaced) = answer.output {
                        output.value = replaced;
                    }
                    continue;
                }
            };
            return Err(Stopped { rejection, trace });
        }
        Ok(Executed {
            result: Ok(output),
            trace,
        })
    }
}

/// `hook`'s answer to `input`; an in-process hook that panics has failed.
fn ask(hook: &dyn Hook, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
    std::panic::catch_unwind(AssertUnwindSafe(|| hook.call(input))).unwrap_or_else(|payload| {
        let said = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(HookFailure::new(
            HookFailureKind::Panicked,
            format!("the hook panicked: {said}"),
        ))
    })
}

fn record(
    hook: &dyn Hook,
    answered: &Result<HookAnswer, HookFailure>,
    changed: bool,
) -> HookRecord {
    HookRecord {
        name: hook.name().to_owned(),
        event: hook.event(),
        mode: hook.mode(),
        decision: answered.as_ref().ok().and_then(|a| a.decision),
        changed,
        failure: answered.as_ref().err().map(|f| f.kind),
        ask_reason: answered
            .as_ref()
            .ok()
            .filter(|a| a.decision == Some(HookDecision::Ask))
            .and_then(|a| a.reason.clone())
            .filter(|r| !r.trim().is_empty()),
    }
}

fn stop(classified: Classified, rejection: Rejection) -> Stopped {
    let mut trace = classified.trace;
    trace.arguments = Some(classified.arguments);
    Stopped { rejection, trace }
}

fn denied(hook: &dyn Hook, reason: Option<String>) -> Rejection {
    let reason = reason.filter(|r| !r.trim().is_empty());
    Rejection::new(
        RejectCode::HookDenied,
        match reason {
            Some(reason) => format!("hook `{}` refused the call: {reason}", hook.name()),
            None => format!("hook `{}` refused the call", hook.name()),
        },
    )
    .with_hint(Some(
        "this is the operator's check; do not retry the same call".into(),
    ))
}

fn failed(hook: &dyn Hook, failure: HookFailure) -> Rejection {
    Rejection::new(
        RejectCode::HookFailed,
        format!(
            "hook `{}` failed ({}): {}; the call is refused",
            hook.name(),
            failure.kind,
            failure.detail
        ),
    )
    .with_hint(Some(
        "the operator's check could not decide; tell the user, do not retry".into(),
    ))
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use serde_json::json;

    use super::super::tests::serving;
    use super::*;
    use crate::approval::HeadlessBroker;
    use crate::outcome::Status;
    use crate::registry::{Descriptor, ToolEntry};

    /// How a scripted hook answers.
    type Answers = fn(&HookInput<'_>) -> Result<HookAnswer, HookFailure>;

    /// Answers every call with what it was made with, noting the arguments it saw.
    #[derive(Debug)]
    struct Scripted {
        name: &'static str,
        event: HookEvent,
        mode: HookMode,
        answer: Answers,
        seen: Mutex<Vec<String>>,
    }

    impl Hook for Scripted {
        fn name(&self) -> &str {
            self.name
        }
        fn event(&self) -> HookEvent {
            self.event
        }
        fn mode(&self) -> HookMode {
            self.mode
        }
        fn call(&self, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
            self.seen.lock().unwrap().push(input.to_json());
            (self.answer)(input)
        }
    }

    fn hook(event: HookEvent, mode: HookMode, answer: Answers) -> Arc<Scripted> {
        Arc::new(Scripted {
            name: "guard",
            event,
            mode,
            answer,
            seen: Mutex::default(),
        })
    }

    /// Returns the arguments it ran with.
    #[derive(Debug, Default)]
    struct Echo(Mutex<Vec<Value>>);

    impl Executor for Echo {
        fn execute(&self, call: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            let arguments = Value::Object(call.arguments().clone());
            self.0.lock().unwrap().push(arguments.clone());
            Ok(ToolOutput::new(arguments))
        }
    }

    /// Allows every call it is asked about, keeping the requests.
    #[derive(Debug, Default)]
    struct Allows(Mutex<Vec<ApprovalDigest>>);

    impl ApprovalBroker for Allows {
        fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
            self.0.lock().unwrap().push(request.digest.clone());
            ApprovalDecision::AllowOnce
        }
    }

    fn pipeline(
        echo: &Arc<Echo>,
        broker: Arc<dyn ApprovalBroker>,
        hooks: Vec<Arc<dyn Hook>>,
    ) -> Pipeline {
        let mut entry = ToolEntry::new("echo", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let schema = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "additionalProperties": false,
        });
        let descriptor = Descriptor::new("echo", "t", schema);
        let policy = PolicyEngine::default_policy().unwrap();
        serving(descriptor, entry, echo.clone(), policy, broker).with_hooks(hooks)
    }

    fn call(pipeline: &Pipeline) -> Outcome {
        pipeline.run(RawCall::text("echo", r#"{"path":"a"}"#, Surface::Chat))
    }

    fn code(outcome: &Outcome) -> Option<RejectCode> {
        outcome.rejection().map(|r| r.code())
    }

    /// The message of a call that must have been refused.
    fn message(outcome: &Outcome) -> &str {
        outcome.rejection().unwrap().message()
    }

    #[test]
    fn an_allow_lets_the_call_run_and_is_recorded() {
        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer::allow())
        });
        let outcome = call(&pipeline(
            &echo,
            Arc::new(HeadlessBroker),
            vec![guard.clone()],
        ));
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        let seen = guard.seen.lock().unwrap();
        let input: Value = serde_json::from_str(&seen[0]).unwrap();
        assert_eq!(input["protocol"], HOOK_PROTOCOL);
        assert_eq!(input["event"], "pre_call");
        assert_eq!(input["arguments"], json!({"path": "a"}));
        assert_eq!(input["effect"], "read_only");
        assert_eq!(input["tool"], "echo");
        let record = &outcome.evidence().hooks;
        assert_eq!(record.len(), 1);
        assert_eq!(record[0].decision, Some(HookDecision::Allow));
        assert!(outcome.evidence().durations_ns.contains_key("hook"));
    }

    #[test]
    fn a_deny_refuses_with_the_hooks_reason_and_nothing_runs() {
        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer::deny("no writes on Fridays"))
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]));
        assert_eq!(code(&outcome), Some(RejectCode::HookDenied));
        assert_eq!(outcome.rejection().unwrap().stage(), Stage::Hook);
        assert!(
            message(&outcome).contains("no writes on Fridays"),
            "{outcome:?}"
        );
        assert!(echo.0.lock().unwrap().is_empty());
    }

    #[test]
    fn a_failure_or_a_panic_refuses_with_its_kind() {
        let cases: [Answers; 3] = [
            |_| Err(HookFailure::new(HookFailureKind::Timeout, "5000 ms")),
            |_| panic!("the hook broke"),
            |_| Ok(HookAnswer::default()),
        ];
        for (answer, kind) in cases.into_iter().zip(["timeout", "panicked", "allow"]) {
            let echo = Arc::new(Echo::default());
            let guard = hook(HookEvent::PreCall, HookMode::Enforce, answer);
            let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]));
            if kind == "allow" {
                // An answer without a decision from an in-process hook goes on: the
                // protocol's parser is what refuses one from a program.
                assert_eq!(outcome.status(), Status::Completed);
                continue;
            }
            assert_eq!(code(&outcome), Some(RejectCode::HookFailed), "{outcome:?}");
            let message = message(&outcome);
            assert!(message.contains(&format!("({kind})")), "{message}");
            let record = &outcome.evidence().hooks[0];
            assert_eq!(record.failure.map(HookFailureKind::as_str), Some(kind));
            assert!(echo.0.lock().unwrap().is_empty(), "nothing ran");
        }
    }

    /// A hook that allowed the arguments before a later hook changed them is asked again:
    /// it judges what runs. Hooks that never settle refuse the call.
    #[test]
    fn every_hook_judges_the_arguments_a_later_hook_changed() {
        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |input| {
            Ok(if input.arguments["path"] == "secret" {
                HookAnswer::deny("not that file")
            } else {
                HookAnswer::allow()
            })
        });
        let rewriter = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                arguments: json!({"path": "secret"}).as_object().cloned(),
                ..HookAnswer::allow()
            })
        });
        let outcome = call(&pipeline(
            &echo,
            Arc::new(HeadlessBroker),
            vec![guard.clone(), rewriter],
        ));
        assert_eq!(code(&outcome), Some(RejectCode::HookDenied), "{outcome:?}");
        assert!(message(&outcome).contains("not that file"), "{outcome:?}");
        assert_eq!(guard.seen.lock().unwrap().len(), 2, "asked again");
        assert!(echo.0.lock().unwrap().is_empty(), "nothing ran");

        let flip = hook(HookEvent::PreCall, HookMode::Enforce, |input| {
            let other = if input.arguments["path"] == "a" {
                "b"
            } else {
                "a"
            };
            Ok(HookAnswer {
                arguments: json!({"path": other}).as_object().cloned(),
                ..HookAnswer::allow()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![flip]));
        assert_eq!(code(&outcome), Some(RejectCode::HookFailed), "{outcome:?}");
        let message = message(&outcome);
        assert!(message.contains("(unsettled)"), "{message}");
        assert!(echo.0.lock().unwrap().is_empty(), "nothing ran");
    }

    #[test]
    fn changed_arguments_are_validated_again_and_are_what_runs() {
        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                arguments: json!({"path": "b"}).as_object().cloned(),
                ..HookAnswer::allow()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]));
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        assert_eq!(*echo.0.lock().unwrap(), [json!({"path": "b"})]);
        assert!(outcome.evidence().hooks[0].changed);

        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                arguments: json!({"path": 1, "rm": true}).as_object().cloned(),
                ..HookAnswer::allow()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]));
        assert_eq!(code(&outcome), Some(RejectCode::HookFailed), "{outcome:?}");
        assert!(
            message(&outcome).contains("(invalid_arguments)"),
            "{outcome:?}"
        );
        assert_eq!(
            outcome.evidence().hooks[0].failure,
            Some(HookFailureKind::InvalidArguments)
        );
        assert!(echo.0.lock().unwrap().is_empty());
    }

    #[test]
    fn an_observing_hook_changes_nothing() {
        let answers: [Answers; 4] = [
            |_| Ok(HookAnswer::deny("no")),
            |_| Err(HookFailure::new(HookFailureKind::Exit, "status 1")),
            |_| {
                Ok(HookAnswer {
                    arguments: json!({"path": "b"}).as_object().cloned(),
                    ..HookAnswer::allow()
                })
            },
            |_| {
                Ok(HookAnswer {
                    decision: Some(HookDecision::Ask),
                    ..HookAnswer::default()
                })
            },
        ];
        for answer in answers {
            for event in [HookEvent::PreCall, HookEvent::PostCall] {
                let echo = Arc::new(Echo::default());
                let guard = hook(event, HookMode::Observe, answer);
                let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]));
                assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
                assert_eq!(outcome.output(), Some(&json!({"path": "a"})));
                assert_eq!(outcome.evidence().hooks.len(), 1);
                assert_eq!(outcome.evidence().hooks[0].mode, HookMode::Observe);
            }
        }
    }

    #[test]
    fn an_ask_needs_a_person_and_an_allow_overrides_no_policy() {
        let echo = Arc::new(Echo::default());
        let asks = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                ..HookAnswer::default()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![asks]));
        assert_eq!(code(&outcome), Some(RejectCode::ApprovalRequired));
        assert!(echo.0.lock().unwrap().is_empty());

        // A policy that forbids everything: a hook's allow is no permit.
        let allows = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer::allow())
        });
        let mut entry = ToolEntry::new("echo", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        let descriptor = Descriptor::new(
            "echo",
            "t",
            json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        );
        let policy = PolicyEngine::from_sources(&[(
            "operator",
            "@id(\"no\") forbid (principal, action, resource);",
        )])
        .unwrap();
        let broker = Arc::new(Allows::default());
        let denying =
            serving(descriptor, entry, echo.clone(), policy, broker).with_hooks(vec![allows]);
        let outcome = call(&denying);
        assert_eq!(
            code(&outcome),
            Some(RejectCode::PolicyDenied),
            "{outcome:?}"
        );
        assert!(echo.0.lock().unwrap().is_empty());
    }

    #[test]
    fn the_approval_digest_binds_the_hooks_identity_and_the_changed_arguments() {
        #[derive(Debug)]
        struct Named(&'static str);
        impl Hook for Named {
            fn name(&self) -> &str {
                "guard"
            }
            fn event(&self) -> HookEvent {
                HookEvent::PreCall
            }
            fn identity(&self) -> String {
                self.0.to_owned()
            }
            fn call(&self, _: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
                Ok(HookAnswer {
                    decision: Some(HookDecision::Ask),
                    arguments: json!({"path": "b"}).as_object().cloned(),
                    ..HookAnswer::default()
                })
            }
        }
        let digest = |hook: &'static str| {
            let echo = Arc::new(Echo::default());
            let broker = Arc::new(Allows::default());
            let outcome = call(&pipeline(
                &echo,
                broker.clone(),
                vec![Arc::new(Named(hook))],
            ));
            assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
            assert_eq!(*echo.0.lock().unwrap(), [json!({"path": "b"})]);
            broker.0.lock().unwrap().pop().unwrap()
        };
        let unhooked = ApprovalDigest::compute(
            "echo",
            "1.0",
            &json!({"path": "b"}),
            WorkspaceId::new("/ws").digest(),
            &[],
            &[],
        );
        assert_eq!(digest("one"), digest("one"));
        assert_ne!(digest("one"), digest("two"));
        assert_ne!(digest("one"), unhooked);
        assert_eq!(
            digest("one"),
            unhooked.with_hooks(&["one".to_owned()]),
            "the changed arguments are what is approved"
        );
    }

    #[test]
    fn a_post_call_hook_withholds_or_replaces_the_output() {
        let echo = Arc::new(Echo::default());
        let withholds = hook(HookEvent::PostCall, HookMode::Enforce, |input| {
            assert_eq!(input.output, Some(&json!({"path": "a"})));
            Ok(HookAnswer::deny("it names a secret"))
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![withholds]));
        assert_eq!(code(&outcome), Some(RejectCode::HookDenied), "{outcome:?}");
        assert_eq!(outcome.output(), None);
        assert_eq!(echo.0.lock().unwrap().len(), 1, "the tool ran");

        let replaces = hook(HookEvent::PostCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                output: Some(json!("[withheld]")),
                ..HookAnswer::allow()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![replaces]));
        assert_eq!(outcome.output(), Some(&json!("[withheld]")), "{outcome:?}");

        let asks = hook(HookEvent::PostCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                ..HookAnswer::default()
            })
        });
        let outcome = call(&pipeline(&echo, Arc::new(HeadlessBroker), vec![asks]));
        assert_eq!(code(&outcome), Some(RejectCode::HookFailed), "{outcome:?}");
    }

    /// A brief tool's call that a hook judges is not decided nor run where its request
    /// arrived: a hook may take its whole time to answer.
    #[test]
    fn a_hooked_call_waits_on_a_worker() {
        #[derive(Debug)]
        struct Brief;
        impl Executor for Brief {
            fn execute(
                &self,
                _: &Call<'_, Self>,
                _: &ExecContext,
            ) -> Result<ToolOutput, ToolError> {
                Ok(ToolOutput::new(Value::Null))
            }
            fn brief(&self) -> bool {
                true
            }
        }
        let permitted = |hooks: Vec<Arc<dyn Hook>>| {
            let mut entry = ToolEntry::new("brief", "test");
            entry.effect = Some(EffectClass::ReadOnly);
            let schema = json!({"type": "object", "properties": {"path": {"type": "string"}}});
            let descriptor = Descriptor::new("brief", "t", schema);
            let policy = PolicyEngine::default_policy().unwrap();
            let broker = Arc::new(HeadlessBroker);
            let pipeline =
                serving(descriptor, entry, Arc::new(Brief), policy, broker).with_hooks(hooks);
            let arrives = pipeline.decides_on_arrival("brief");
            match pipeline.decide(RawCall::text("brief", "{}", Surface::Chat), None) {
                Decided::Permitted(permitted) => (arrives, permitted.placement()),
                Decided::Ended(outcome) => panic!("{outcome:?}"),
            }
        };
        assert_eq!(permitted(Vec::new()), (true, Placement::Arrival));
        for event in [HookEvent::PreCall, HookEvent::PostCall] {
            let guard = hook(event, HookMode::Observe, |_| Ok(HookAnswer::allow()));
            assert_eq!(
                permitted(vec![guard]),
                (false, Placement::Worker),
                "{event:?}"
            );
        }
        // Arguments a hook changed are classified, and placed, again: still on a worker.
        let changes = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                arguments: json!({"path": "b"}).as_object().cloned(),
                ..HookAnswer::allow()
            })
        });
        assert_eq!(permitted(vec![changes]), (false, Placement::Worker));
    }

    /// Remembers the scope each request could be granted for, and allows it for the workspace
    /// when it may.
    #[derive(Debug, Default)]
    struct Scopes(Mutex<Vec<GrantScope>>);

    impl ApprovalBroker for Scopes {
        fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
            self.0.lock().unwrap().push(request.scope_allowed);
            match request.scope_allowed {
                GrantScope::WorkspaceAction => ApprovalDecision::AllowWorkspace,
                GrantScope::Once => ApprovalDecision::AllowOnce,
            }
        }
    }

    /// A call a hook asked about is approved once, never for the workspace: the next call
    /// the hook asks about asks the person again.
    #[test]
    fn a_hooks_ask_is_answered_for_the_call_only() {
        let scopes = |hooks: Vec<Arc<dyn Hook>>| {
            let echo = Arc::new(Echo::default());
            let mut entry = ToolEntry::new("echo", "test");
            entry.effect = Some(EffectClass::LocalWrite);
            let descriptor = Descriptor::new("echo", "t", json!({"type": "object"}));
            let policy = PolicyEngine::default_policy().unwrap();
            let broker = Arc::new(Scopes::default());
            let pipeline =
                serving(descriptor, entry, echo.clone(), policy, broker.clone()).with_hooks(hooks);
            for _ in 0..2 {
                let outcome = pipeline.run(RawCall::text("echo", "{}", Surface::Chat));
                assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
            }
            broker.0.lock().unwrap().clone()
        };
        assert_eq!(scopes(Vec::new()), [GrantScope::WorkspaceAction]);
        let asks = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                ..HookAnswer::default()
            })
        });
        assert_eq!(scopes(vec![asks]), [GrantScope::Once, GrantScope::Once]);
    }

    /// The person asked about a call a hook asked about is told which hook asked and why; an
    /// observing hook's ask is not theirs to hear, and the reason is not in the record.
    #[test]
    fn the_request_names_the_hook_that_asked_and_its_reason() {
        #[derive(Debug, Default)]
        struct Keeps(Mutex<Vec<Vec<HookAsk>>>);
        impl ApprovalBroker for Keeps {
            fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
                self.0.lock().unwrap().push(request.hook_asks.clone());
                ApprovalDecision::AllowOnce
            }
        }
        let asks = |_: &HookInput<'_>| {
            Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                reason: Some("a is under review".into()),
                ..HookAnswer::default()
            })
        };
        let echo = Arc::new(Echo::default());
        let broker = Arc::new(Keeps::default());
        let observer = hook(HookEvent::PreCall, HookMode::Observe, asks);
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, asks);
        let outcome = call(&pipeline(&echo, broker.clone(), vec![observer, guard]));
        assert_eq!(outcome.status(), Status::Completed, "{outcome:?}");
        let asked = broker.0.lock().unwrap().clone();
        assert_eq!(
            asked,
            [vec![HookAsk {
                name: "guard".into(),
                reason: Some("a is under review".into()),
            }]]
        );
        let record = serde_json::to_string(&outcome.evidence().hooks).unwrap();
        assert!(!record.contains("under review"), "{record}");
    }

    /// `toolgate explain` says what each hook answered, at the hook stage.
    #[test]
    fn explain_reports_the_hooks_answers() {
        let echo = Arc::new(Echo::default());
        let guard = hook(HookEvent::PreCall, HookMode::Enforce, |_| {
            Ok(HookAnswer {
                decision: Some(HookDecision::Ask),
                ..HookAnswer::default()
            })
        });
        let pipeline = pipeline(&echo, Arc::new(HeadlessBroker), vec![guard]);
        let reports = pipeline.explain(RawCall::text("echo", r#"{"path":"a"}"#, Surface::Chat));
        let hooked = reports.iter().find(|r| r.stage == Stage::Hook).unwrap();
        assert_eq!(hooked.detail, "`guard`: ask");
        assert!(echo.0.lock().unwrap().is_empty(), "explain runs no tool");
    }

    /// What a program writes, against the kind of failure it is, or a clean answer.
    #[test]
    fn a_programs_answer_is_one_object_with_a_known_decision() {
        let big = format!(
            r#"{{"decision":"allow","reason":"{}"}}"#,
            "x".repeat(70_000)
        );
        let rows: &[(&str, HookEvent, Option<HookFailureKind>)] = &[
            (r#"{"decision":"allow"}"#, HookEvent::PreCall, None),
            (
                " {\"decision\":\"deny\",\"reason\":\"r\"}\n",
                HookEvent::PreCall,
                None,
            ),
            (
                r#"{"decision":"ask","arguments":{}}"#,
                HookEvent::PreCall,
                None,
            ),
            (
                r#"{"decision":"allow","output":1}"#,
                HookEvent::PostCall,
                None,
            ),
            ("", HookEvent::PreCall, Some(HookFailureKind::NoOutput)),
            (" \n", HookEvent::PreCall, Some(HookFailureKind::NoOutput)),
            (
                "{\"decision\":",
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidJson),
            ),
            (
                "allow",
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidJson),
            ),
            (
                r#"{"decision":"allow"}{"decision":"deny"}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::SeveralValues),
            ),
            (
                r#"{"decision":"allow"} x"#,
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidJson),
            ),
            ("{}", HookEvent::PreCall, Some(HookFailureKind::NoDecision)),
            (
                r#"{"decision":"yes"}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::UnknownDecision),
            ),
            (
                r#"{"decision":"ALLOW"}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::UnknownDecision),
            ),
            (
                "[]",
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidAnswer),
            ),
            (
                r#"{"decision":"allow","extra":1}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidAnswer),
            ),
            (
                r#"{"decision":"allow","arguments":[]}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidAnswer),
            ),
            (
                r#"{"decision":"allow","output":1}"#,
                HookEvent::PreCall,
                Some(HookFailureKind::InvalidAnswer),
            ),
            (
                r#"{"decision":"allow","arguments":{}}"#,
                HookEvent::PostCall,
                Some(HookFailureKind::InvalidAnswer),
            ),
            (
                &big,
                HookEvent::PreCall,
                Some(HookFailureKind::OutputTooLarge),
            ),
        ];
        for (bytes, event, expected) in rows {
            let parsed = HookAnswer::parse(bytes.as_bytes(), *event);
            assert_eq!(
                parsed.as_ref().err().map(|f| f.kind),
                *expected,
                "{bytes:.60}: {parsed:?}"
            );
        }
    }
}
