//! Stage 7, fused with stage 8: the only caller of an executor, and so of a tool. It issues
//! no reject code of its own: what stops a call here is approval's last act (`approve`), or a
//! failure that did not run.

use std::sync::atomic::AtomicUsize;
use std::sync::{Mutex, PoisonError};

use super::*;

impl Pipeline {
    /// Stages 7 and 8, as one step: re-checks the grant, runs the executor of the tool the
    /// proof was issued for, then describes the result and records it. The proof is consumed,
    /// so it runs once; there is no way to run it without a record.
    #[must_use = "the outcome is the call's only result, and may be a refusal"]
    pub(crate) fn execute(&self, authorized: Authorized, cx: &ExecContext) -> Outcome {
        self.describe(self.execute_step(authorized, cx))
    }

    /// Stage 7: re-checks the grant, then hands the call to its own tool's executor.
    pub(super) fn execute_step(
        &self,
        authorized: Authorized,
        cx: &ExecContext,
    ) -> Result<Executed, Stopped> {
        let cleared = match self.clear(authorized, cx) {
            Ok(cleared) => cleared,
            Err(ended) => return ended,
        };
        Ok(cleared.run())
    }

    /// Stage 7 up to the executor: the proof is this pipeline's, the grant still good, and a
    /// call with effects on the record as started. A call that may not go on ends here, as a
    /// refusal or as a failure that did not run.
    pub(super) fn clear(
        &self,
        authorized: Authorized,
        cx: &ExecContext,
    ) -> Result<Cleared, Result<Executed, Stopped>> {
        let started = Instant::now();
        let authorized = self.redeem(authorized, started).map_err(Err)?;
        // A call with effects is on the record before it runs, so that a toolgate stopped
        // while it runs leaves a log saying the call began; a call whose intent cannot be kept
        // durably does not run at all.
        if authorized.effect != EffectClass::ReadOnly {
            let trace = &authorized.trace;
            let argument_digest = sha256_digest(canonical_json(&authorized.arguments).as_bytes());
            let version = authorized.tool.entry.version.to_string();
            let intent = crate::record::Intent {
                call_id: &trace.call_id,
                request_id: trace.request_id.as_deref(),
                tool: &trace.tool,
                version: Some(&version),
                surface: trace.surface,
                actor: &trace.actor,
                profile: &trace.profile,
                effect: authorized.effect,
                argument_digest: argument_digest.as_str(),
                approval_id: authorized.approval_id(),
                resources: &trace.resources,
                sandbox: None,
            };
            let refused = self.recorders.iter().find_map(|r| r.intend(&intent).err());
            if let Some(error) = refused {
                let mut trace = authorized.trace;
                trace.arguments = Some(authorized.arguments);
                trace.record(Stage::Execute, started);
                let message = format!(
                    "the call did not run: its start could not be recorded: {}",
                    error.0
                );
                return Err(Ok(Executed {
                    result: Err(ToolError::new(
                        crate::outcome::ToolErrorCode::AuditUnavailable,
                        message,
                    )),
                    trace,
                }));
            }
        }
        // The tool withholds what this pipeline's policy input calls sensitive, and ends by its
        // own time limit, whatever context the caller built.
        let limit = Duration::from_millis(authorized.limits().timeout_ms);
        let cx = cx
            .clone()
            .within(limit)
            .with_sensitivity(Arc::clone(&self.sensitivity));
        Ok(Cleared {
            authorized,
            cx,
            started,
        })
    }
}

/// A call stage 7 let through to its executor, with the context it runs in.
pub(super) struct Cleared {
    authorized: Authorized,
    cx: ExecContext,
    started: Instant,
}

impl Cleared {
    /// Runs the call's own executor here, to its end.
    pub(super) fn run(self) -> Executed {
        // A tool that panics has still run, perhaps halfway: its outcome must reach stage 8
        // (and the record) like any failure, not vanish with the thread that ran it.
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = Handed(&self.authorized);
            self.authorized.tool.executor.dispatch(call, &self.cx)
        }))
        .unwrap_or_else(|payload| Err(panicked(payload.as_ref())));
        self.executed(result)
    }

    /// The call with its executor's `result`, the time since it was cleared counted as
    /// execution.
    fn executed(self, result: Result<ToolOutput, ToolError>) -> Executed {
        let mut trace = self.authorized.trace;
        trace.arguments = Some(self.authorized.arguments);
        trace.record(Stage::Execute, self.started);
        Executed { result, trace }
    }
}

/// A call [placed](Placement::Forwarded) to be forwarded, cleared to run and not yet begun
/// (see [`Stages::finish`]). A transport that can await it [begins](Forward::begin) it; any
/// other runs it where it is, to its end ([`Forward::run_here`]). Dropped unused, it is
/// recorded as given up before it ran.
pub struct Forward {
    pipeline: Arc<Pipeline>,
    cleared: Option<Cleared>,
}

impl Forward {
    pub(super) fn new(pipeline: Arc<Pipeline>, cleared: Cleared) -> Self {
        Forward {
            pipeline,
            cleared: Some(cleared),
        }
    }

    /// Begins stage 7 here, and returns the call in flight, which resolves to its outcome,
    /// described and recorded.
    ///
    /// A call in flight is recorded whatever becomes of it: dropped before its end (its
    /// runtime stopped), it is recorded as given up, and its executor's future is dropped
    /// first, which tells the other process.
    pub fn begin(mut self) -> Forwarding {
        let pipeline = Arc::clone(&self.pipeline);
        let cleared = self.take();
        let begun = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = Handed(&cleared.authorized);
            cleared
                .authorized
                .tool
                .executor
                .dispatch_forward(call, &cleared.cx)
        }));
        let state = match begun {
            Ok(future) => ForwardingState::Awaiting { future, cleared },
            Err(payload) => ForwardingState::Ended(Some(
                pipeline.describe(Ok(cleared.executed(Err(panicked(payload.as_ref()))))),
            )),
        };
        Forwarding { pipeline, state }
    }

    /// Runs the call where it is, to its end, as a call placed on a worker runs: for a caller
    /// that cannot await a call in flight.
    pub fn run_here(mut self) -> Outcome {
        let cleared = self.take();
        self.pipeline.describe(Ok(cleared.run()))
    }

    /// The call, taken once: by `begin` or `run_here`, which consume the `Forward`.
    #[expect(
        clippy::expect_used,
        reason = "only `begin` and `run_here` take the call, once, and they consume `self`"
    )]
    fn take(&mut self) -> Cleared {
        // INVARIANT: `cleared` is `Some` from `new` until `begin` or `run_here` takes it, and
        // both consume the `Forward`; only its `Drop` sees it taken.
        self.cleared.take().expect("a forward is begun or run once")
    }
}

impl std::fmt::Debug for Forward {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Forward")
    }
}

impl Drop for Forward {
    fn drop(&mut self) {
        if let Some(cleared) = self.cleared.take() {
            let error = ToolError::new(
                crate::outcome::ToolErrorCode::Cancelled,
                "the call was given up before it was forwarded; it did not run",
            );
            let _ = self.pipeline.describe(Ok(cleared.executed(Err(error))));
        }
    }
}

/// A forwarded call in flight (see [`Forward::begin`]): resolves to its outcome, described
/// and recorded.
///
/// It is polled where its transport's requests arrive, often on a thread every session
/// shares. So an answer of more than 64 KiB of JSON is described (measured, redacted,
/// recorded) on a thread of its own, and the call resolves when that is done.
pub struct Forwarding {
    pipeline: Arc<Pipeline>,
    state: ForwardingState,
}

/// The most JSON an answer may come to and still be described where it was awaited: some
/// 0.2 ms of stage 8, as much as a brief read keeps there.
pub(crate) const DESCRIBED_IN_PLACE: usize = 64 * 1024;

enum ForwardingState {
    /// Forwarded, its answer awaited.
    Awaiting { future: Forwarded, cleared: Cleared },
    /// Its answer is being described on a thread of its own, which records it whatever
    /// becomes of this call; dropped meanwhile, the call waits for that thread.
    Describing {
        handoff: Arc<Mutex<Handoff>>,
        thread: std::thread::JoinHandle<()>,
    },
    /// Its outcome, ready; taken once polled.
    Ended(Option<Outcome>),
}

/// The most answers described on threads of their own at once. An upstream that answers
/// many calls at once with large answers gets no more threads than this; the answers beyond
/// are described where they were awaited, as a small one is.
pub(crate) const DESCRIBING_AT_MOST: usize = 16;

static DESCRIBING: AtomicUsize = AtomicUsize::new(0);

/// One of the [`DESCRIBING_AT_MOST`] places, given back when dropped.
struct DescribingPlace;

impl DescribingPlace {
    fn take() -> Option<DescribingPlace> {
        DESCRIBING
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |taken| {
                (taken < DESCRIBING_AT_MOST).then_some(taken + 1)
            })
            .ok()
            .map(|_| DescribingPlace)
    }
}

impl Drop for DescribingPlace {
    fn drop(&mut self) {
        DESCRIBING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where a description made on another thread is left, and whom to wake when it is.
struct Handoff {
    outcome: Option<Outcome>,
    waker: Option<std::task::Waker>,
}

impl std::fmt::Debug for Forwarding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.state {
            ForwardingState::Awaiting { .. } => "Forwarding(in flight)",
            ForwardingState::Describing { .. } => "Forwarding(being described)",
            ForwardingState::Ended(_) => "Forwarding(ended)",
        })
    }
}

impl std::future::Future for Forwarding {
    type Output = Outcome;

    /// Polled again after it resolved, it never resolves again.
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Outcome> {
        use std::task::Poll;
        let this = &mut *self;
        let result = match &mut this.state {
            ForwardingState::Ended(outcome) => {
                return outcome.take().map_or(Poll::Pending, Poll::Ready);
            }
            ForwardingState::Describing { handoff, .. } => {
                let mut handoff = handoff.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(outcome) = handoff.outcome.take() else {
                    handoff.waker = Some(context.waker().clone());
                    return Poll::Pending;
                };
                drop(handoff);
                this.state = ForwardingState::Ended(None);
                return Poll::Ready(outcome);
            }
            // A tool that panics has still run, perhaps halfway (see `execute_step`).
            ForwardingState::Awaiting { future, .. } => {
                match std::panic::catch_unwind(AssertUnwindSafe(|| future.as_mut().poll(context))) {
                    Ok(Poll::Pending) => return Poll::Pending,
                    Ok(Poll::Ready(result)) => result,
                    Err(payload) => Err(panicked(payload.as_ref())),
                }
            }
        };
        let ForwardingState::Awaiting { cleared, .. } =
            std::mem::replace(&mut this.state, ForwardingState::Ended(None))
        else {
            return Poll::Pending;
        };
        let executed = cleared.executed(result);
        if fits_in(&executed.result, DESCRIBED_IN_PLACE) {
            return Poll::Ready(this.pipeline.describe(Ok(executed)));
        }
        match describe_elsewhere(&this.pipeline, executed, context.waker().clone()) {
            Ok(describing) => {
                this.state = describing;
                Poll::Pending
            }
            // No thread to be had: described here, as a smaller answer is.
            Err(executed) => Poll::Ready(this.pipeline.describe(Ok(*executed))),
        }
    }
}

/// Describes `executed` on a thread of its own, which wakes `waker` once the outcome is
/// there: the call is [`ForwardingState::Describing`] meanwhile. Gives `executed` back if every
/// place is taken or no thread can be started.
fn describe_elsewhere(
    pipeline: &Arc<Pipeline>,
    executed: Executed,
    waker: std::task::Waker,
) -> Result<ForwardingState, Box<Executed>> {
    let Some(place) = DescribingPlace::take() else {
        return Err(Box::new(executed));
    };
    let handoff = Arc::new(Mutex::new(Handoff {
        outcome: None,
        waker: Some(waker),
    }));
    // Sent once the thread has started: a spawn that fails leaves the call here, to be
    // described and recorded all the same.
    let (send, receive) = std::sync::mpsc::channel::<Executed>();
    let started = std::thread::Builder::new()
        .name("toolgate-describe".to_owned())
        .spawn({
            let (pipeline, handoff) = (Arc::clone(pipeline), Arc::clone(&handoff));
            move || {
                let _place = place;
                let Ok(executed) = receive.recv() else { return };
                let outcome = pipeline.describe(Ok(executed));
                let waker = {
                    let mut handoff = handoff.lock().unwrap_or_else(PoisonError::into_inner);
                    handoff.outcome = Some(outcome);
                    handoff.waker.take()
                };
                if let Some(waker) = waker {
                    waker.wake();
                }
            }
        });
    match started {
        Ok(thread) => match send.send(executed) {
            Ok(()) => Ok(ForwardingState::Describing { handoff, thread }),
            Err(std::sync::mpsc::SendError(executed)) => Err(Box::new(executed)),
        },
        Err(_) => Err(Box::new(executed)),
    }
}

/// Whether `result`, written as JSON, comes to at most `limit` bytes. Counted as far as the
/// limit only, from below (strings and names by their length, every other value by one
/// byte), so that deciding costs no more than a small answer's description.
pub(super) fn fits_in(result: &Result<ToolOutput, ToolError>, limit: usize) -> bool {
    fn fits(value: &Value, left: &mut usize) -> bool {
        let cost = match value {
            Value::String(text) => text.len() + 2,
            _ => 1,
        };
        let Some(rest) = left.checked_sub(cost) else {
            return false;
        };
        *left = rest;
        match value {
            Value::Array(items) => items.iter().all(|item| fits(item, left)),
            Value::Object(map) => map.iter().all(|(name, item)| {
                match left.checked_sub(name.len() + 3) {
                    Some(rest) => *left = rest,
                    None => return false,
                }
                fits(item, left)
            }),
            _ => true,
        }
    }
    match result {
        Ok(output) => {
            let mut left = limit;
            fits(&output.value, &mut left)
        }
        Err(error) => error.message.len() <= limit,
    }
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        let (future, cleared) =
            match std::mem::replace(&mut self.state, ForwardingState::Ended(None)) {
                ForwardingState::Awaiting { future, cleared } => (future, cleared),
                // Its description records the call: waited for, so that a runtime that stops
                // (and drops its tasks) before the process ends loses no record.
                ForwardingState::Describing { thread, .. } => {
                    let _ = thread.join();
                    return;
                }
                ForwardingState::Ended(_) => return,
            };
        // Dropping the executor's future first tells the other process the call is given up.
        drop(future);
        let mut error = ToolError::new(
            crate::outcome::ToolErrorCode::Cancelled,
            "the call was given up before it ended: toolgate stopped waiting for it",
        );
        error
            .unknowns
            .push("the call was forwarded; whether it took effect is unknown".to_owned());
        let _ = self.pipeline.describe(Ok(cleared.executed(Err(error))));
    }
}

/// The failure of an executor that panicked, with what its panic said.
fn panicked(payload: &(dyn std::any::Any + Send)) -> ToolError {
    let said = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let mut error = ToolError::new(
        crate::outcome::ToolErrorCode::ToolPanicked,
        format!("the tool stopped unexpectedly: {said}"),
    );
    error
        .unknowns
        .push("the tool may have done part of its work before it stopped".to_owned());
    error
}
