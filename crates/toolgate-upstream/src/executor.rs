//! Stage 7 for an admitted upstream tool: forward the validated arguments, check the answer.
//!
//! The arguments reaching this executor already passed stage 3 against the *pinned* input
//! schema. The answer is checked here against the pinned output schema; stage 8 then bounds
//! and redacts it like any builtin result.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolgate_core::{
    Call, Classification, ExecContext, Forwarded, Notice, ToolError, ToolErrorCode, ToolOutput,
    ToolSchema, TypedExecutor,
};

use crate::connection::{Fault, Rpc};
use crate::supervisor::{Stale, Supervisor};

/// Forwards calls to one tool of one upstream.
#[derive(Clone)]
pub struct UpstreamExecutor {
    supervisor: Arc<Supervisor>,
    tool: String,
    /// The digest of the admitted descriptor, under the upstream's own name.
    pinned: toolgate_core::Digest,
    output_schema: Option<Arc<ToolSchema>>,
}

impl std::fmt::Debug for UpstreamExecutor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamExecutor")
            .field("upstream", &self.supervisor.spec.name)
            .field("tool", &self.tool)
            .field("output_schema", &self.output_schema.is_some())
            .finish()
    }
}

impl UpstreamExecutor {
    pub(crate) fn new(
        supervisor: Arc<Supervisor>,
        tool: String,
        pinned: toolgate_core::Digest,
        output_schema: Option<Arc<ToolSchema>>,
    ) -> Self {
        UpstreamExecutor {
            supervisor,
            tool,
            pinned,
            output_schema,
        }
    }

    fn failure(&self, fault: &Fault) -> ToolError {
        let mut error = ToolError::new(fault.code(), fault.message());
        let unknown = match fault {
            Fault::Timeout(_) => Some(
                "the upstream may still be working on the call; it was sent `notifications/cancelled`",
            ),
            Fault::Cancelled => Some(
                "the upstream was sent `notifications/cancelled`; what it had done by then is unknown",
            ),
            Fault::Unavailable(m) if m.contains("while") || m.contains("exited") => Some(
                "the upstream stopped while the call was pending; whether it took effect is unknown",
            ),
            Fault::Protocol(_) | Fault::TooLarge(_) => {
                Some("the upstream's answer was not used; whether the call took effect is unknown")
            }
            Fault::Unavailable(_) | Fault::SandboxUnavailable(_) => None,
        };
        error.unknowns.extend(unknown.map(str::to_owned));
        let status = self.supervisor.status();
        error.unknowns.extend(
            status
                .events
                .iter()
                .rev()
                .take(3)
                .rev()
                .map(|e| format!("upstream `{}`: {e}", status.name)),
        );
        if !matches!(fault, Fault::Cancelled | Fault::Timeout(_)) {
            self.supervisor.record(format!(
                "call to `{}` failed: {}",
                self.tool,
                fault.message()
            ));
        }
        error
    }

    /// The connection to forward a call to, if the pin still holds, with the request's
    /// parameters and how long to wait for its answer.
    fn prepare(
        &self,
        arguments: &Map<String, Value>,
        cx: &ExecContext,
    ) -> Result<(Arc<dyn Rpc>, Value, Duration), ToolError> {
        // The registry that resolved this call may predate the upstream's latest list; the
        // pin is checked again against that list at the moment the call is forwarded.
        let connection = self
            .supervisor
            .connection_for(&self.tool, &self.pinned)
            .map_err(|stale| match stale {
                Stale::Fault(fault) => self.failure(&fault),
                Stale::Changed | Stale::Missing => self.stale(matches!(stale, Stale::Missing)),
            })?;
        let limit = cx.deadline().saturating_duration_since(Instant::now());
        let timeout = limit.min(self.supervisor.spec.call_timeout);
        let params = json!({"name": self.tool, "arguments": arguments});
        Ok((connection, params, timeout))
    }

    /// Sends the call over `connection` and waits for its result on this thread.
    fn wait_for(
        &self,
        connection: &Arc<dyn Rpc>,
        params: Value,
        timeout: Duration,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        // The context's deadline is in `timeout` already: only the caller's cancellation stops
        // the wait early, and it wakes it.
        // What the upstream reports while it works is the call's own, limited and redacted by
        // the context like everything else the tool says.
        let listener = |notice: Notice| {
            cx.notify(notice);
        };
        let result = connection.request_reporting(
            "tools/call",
            params,
            timeout,
            cx.cancel(),
            Some(&listener),
        );
        self.conclude(connection, result)
    }

    /// The call's result, from the upstream's answer (or the fault that stopped it).
    fn conclude(
        &self,
        connection: &Arc<dyn Rpc>,
        result: Result<Value, Fault>,
    ) -> Result<ToolOutput, ToolError> {
        // Whatever it answered, a change to a file that runs later is put back and fails the
        // call: nobody approved it.
        if let Some(undone) = connection.undo_later_changes() {
            return Err(ToolError::new(
                ToolErrorCode::RunsLaterChanged,
                format!(
                    "upstream `{}` changed files that other programs run later: {undone}",
                    self.supervisor.spec.name
                ),
            ));
        }
        let result = result.map_err(|fault| {
            if matches!(fault, Fault::Timeout(_)) {
                self.supervisor.probe(Arc::clone(connection));
            }
            self.failure(&fault)
        })?;
        if let Some(error) = result.get("error") {
            let message = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(ToolError::new(
                ToolErrorCode::UpstreamError,
                format!(
                    "upstream `{}` refused the call: {message}",
                    self.supervisor.spec.name
                ),
            ));
        }
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Err(ToolError::new(ToolErrorCode::ToolError, text_of(&result)));
        }
        self.output(result).map_err(|fault| self.failure(&fault))
    }

    /// The call was not forwarded: the upstream no longer serves the pinned descriptor.
    fn stale(&self, missing: bool) -> ToolError {
        let upstream = &self.supervisor.spec.name;
        let what = if missing {
            format!("upstream `{upstream}` no longer lists `{}`", self.tool)
        } else {
            format!(
                "upstream `{upstream}` now serves a descriptor of `{}` that differs from the pinned one",
                self.tool
            )
        };
        ToolError::new(
            ToolErrorCode::StaleDescriptor,
            format!(
                "{what}; the call was not forwarded (review it with `toolgate tools diff` and re-pin it with `toolgate tools pin`)"
            ),
        )
    }

    /// The tool result as a toolgate output, or why it cannot be one.
    fn output(&self, result: Value) -> Result<ToolOutput, Fault> {
        let protocol = |what: String| {
            Fault::Protocol(format!(
                "upstream `{}` broke the protocol: {what}",
                self.supervisor.spec.name
            ))
        };
        let Value::Object(mut result) = result else {
            return Err(protocol("`tools/call` answered with a non-object".into()));
        };
        let content = result.remove("content").unwrap_or(Value::Array(Vec::new()));
        if !content.is_array() {
            return Err(protocol("`content` is not an array".into()));
        }
        let structured = result.remove("structuredContent");
        if let Some(schema) = &self.output_schema {
            let Some(structured) = &structured else {
                return Err(protocol(format!(
                    "`{}` has an output schema but returned no `structuredContent`",
                    self.tool
                )));
            };
            if let Some(error) = schema.check(structured).first() {
                return Err(protocol(format!(
                    "`structuredContent` of `{}` does not match the pinned output schema at `{}`: {}",
                    self.tool, error.pointer, error.message
                )));
            }
        }
        Ok(ToolOutput::new(match structured {
            Some(structured @ Value::Object(_)) => structured,
            Some(_) => return Err(protocol("`structuredContent` is not an object".into())),
            None => json!({ "content": content }),
        }))
    }
}

/// The text parts of a tool result, for an error message.
fn text_of(result: &Value) -> String {
    let texts: Vec<&str> = result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| c.get("text").and_then(Value::as_str))
        .collect();
    if texts.is_empty() {
        "the upstream reported an error without text".to_owned()
    } else {
        texts.join("\n")
    }
}

/// An upstream tool has no type of its own: its arguments are the object its pinned schema
/// accepted, and the plan is to forward that object as it is.
impl TypedExecutor for UpstreamExecutor {
    type Args = Map<String, Value>;
    type Plan = Map<String, Value>;

    fn plan(&self, arguments: Map<String, Value>) -> (Map<String, Value>, Classification) {
        (arguments, Classification::default())
    }

    fn execute(
        &self,
        arguments: &Map<String, Value>,
        _call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let (connection, params, timeout) = self.prepare(arguments, cx)?;
        self.wait_for(&connection, params, timeout, cx)
    }

    fn forwards(&self) -> bool {
        true
    }

    /// Over a connection that can wait without a thread (a process's standard streams), the
    /// call's task waits for the answer itself; otherwise a blocking thread waits, as
    /// [`TypedExecutor::execute`] does.
    fn forward(
        &self,
        arguments: &Map<String, Value>,
        _call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Forwarded {
        let (connection, params, timeout) = match self.prepare(arguments, cx) {
            Ok(prepared) => prepared,
            Err(error) => return Box::pin(std::future::ready(Err(error))),
        };
        let this = self.clone();
        let listener = {
            let cx = cx.clone();
            Box::new(move |notice: Notice| {
                cx.notify(notice);
            })
        };
        let answer = Arc::clone(&connection).request_async(
            "tools/call",
            params,
            timeout,
            cx.cancel().clone(),
            listener,
        );
        match answer {
            Ok(answer) => Box::pin(async move {
                let result = answer.await;
                this.conclude(&connection, result)
            }),
            Err(params) => {
                let cx = cx.clone();
                Box::pin(async move {
                    let waited = tokio::task::spawn_blocking(move || {
                        this.wait_for(&connection, params, timeout, &cx)
                    })
                    .await;
                    match waited {
                        Ok(result) => result,
                        Err(e) => Err(ToolError::new(
                            ToolErrorCode::ToolPanicked,
                            format!("the call's thread stopped unexpectedly: {e}"),
                        )),
                    }
                })
            }
        }
    }
}
