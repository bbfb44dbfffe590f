//! Watching one call while it runs (on a blocking thread, as a task when it waits for another
//! process's answer, or not at all when it ran to its end where its request arrived):
//! cancelling it when the client asks or stops listening, reporting progress, relaying what the
//! executor reports, and asking the person at the client when the call waits for approval.

use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams,
    ProgressNotificationParam, ProgressToken, RequestId, ServerRequest,
};
use rmcp::service::{Peer, PeerRequestOptions};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use toolgate_core::{
    Decided, Finished, Notice, NoticeSink, Outcome, Pipeline, Placement, RawCall, Rest, Shown,
    Watch,
};

use crate::elicit::{self, ApprovalDesk, Parkable};
use crate::logging::{self, LogLevel};

/// Where a call is, for progress reports and for asking a person.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Deciding,
    /// Waiting for a person's answer to the request of the call with this id.
    AwaitingApproval(Arc<str>),
    Running,
}

/// A call, as a transport watches it: on a blocking thread or a task, or already ended.
#[derive(Debug)]
pub(crate) struct Running {
    task: Task,
    /// Given to cancel the call.
    cancelled: toolgate_core::Cancel,
    phase: watch::Receiver<Phase>,
    /// What the executor reports while it runs, for the client.
    notices: mpsc::UnboundedReceiver<Notice>,
}

/// Where a call's outcome comes from.
#[derive(Debug)]
enum Task {
    /// It ended where its request arrived; taken once watched.
    Ended(Option<Box<Outcome>>),
    /// It runs on a blocking thread, or as a task of its own.
    Spawned(tokio::task::JoinHandle<Outcome>),
}

impl Future for Task {
    type Output = Result<Outcome, tokio::task::JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut *self {
            Task::Ended(outcome) => outcome
                .take()
                .map_or(Poll::Pending, |o| Poll::Ready(Ok(*o))),
            Task::Spawned(handle) => Pin::new(handle).poll(cx),
        }
    }
}

/// How much of a call is left to run.
enum Step {
    /// Stages 1 to 8.
    Whole(RawCall),
    /// Stages 6 to 8, after stages 1 to 5 let it through.
    Rest(Box<Rest>),
}

impl Running {
    /// Starts `raw`: the pipeline's own run, stages 1 to 8, stage 2 judging by the tools the
    /// session was `shown`.
    ///
    /// A call of a tool whose executor is brief (a bounded read of one file) or forwards its
    /// calls (an upstream's tool) is decided here, where its request arrived, and the rest
    /// runs where stage 4 placed it ([`Placement`]): a brief read nobody need approve here to
    /// its end, a forwarded one as a task waiting for its answer (handing a call to another
    /// thread and back costs more than a call of some microseconds, and a thread parked on
    /// another process's answer costs two hand-offs more), any other on a blocking thread,
    /// watched. Every one takes the same path, [`toolgate_core::Stages::finish`].
    pub(crate) fn start(pipeline: Arc<Pipeline>, raw: RawCall, shown: Arc<Shown>) -> Running {
        let cancelled = toolgate_core::Cancel::new();
        let (phase_tx, phase) = watch::channel(Phase::Deciding);
        // Core limits each call's notices (ten a second), so this channel stays short.
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let sink: NoticeSink = Arc::new(move |notice| {
            // The call outlived its watcher (its client went away): nobody to tell.
            let _ = notice_tx.send(notice);
        });
        let step = if pipeline.decides_on_arrival(&raw.tool) {
            pipeline.enter(|stages| match stages.decide(raw, Some(&shown)) {
                Decided::Ended(outcome) => Err(Task::Ended(Some(Box::new(outcome)))),
                Decided::Permitted(permitted) if permitted.placement() == Placement::Worker => {
                    Ok(Step::Rest(Box::new(stages.rest(permitted))))
                }
                // Placed where it arrived, or to be forwarded: stages 6–8 begin here.
                Decided::Permitted(permitted) => {
                    let finished = with_watch(&shown, &phase_tx, Arc::clone(&sink), |watching| {
                        stages.finish(permitted, cancelled.clone(), watching)
                    });
                    match finished {
                        Finished::Ended(outcome) => Err(Task::Ended(Some(Box::new(outcome)))),
                        // The call runs to its end, and is recorded, even when nobody watches
                        // it any more.
                        Finished::Forward(forward) => {
                            Err(Task::Spawned(tokio::spawn(forward.begin())))
                        }
                    }
                }
            })
        } else {
            Ok(Step::Whole(raw))
        };
        let task = match step {
            Err(task) => task,
            Ok(step) => Task::Spawned(tokio::task::spawn_blocking({
                let cancelled = cancelled.clone();
                move || run_call(&pipeline, &shown, step, cancelled, &phase_tx, sink)
            })),
        };
        Running {
            task,
            cancelled,
            phase,
            notices,
        }
    }

    /// Cancels the call; its thread ends soon after, and its outcome is recorded.
    pub(crate) fn cancel(&self) {
        self.cancelled.cancel();
    }

    /// A call of `pipeline` that waits until it is cancelled, then runs `tool`.
    #[cfg(test)]
    pub(crate) fn waiting(pipeline: Arc<Pipeline>, tool: &str) -> Running {
        let cancelled = toolgate_core::Cancel::new();
        let (_, phase) = watch::channel(Phase::Deciding);
        let (_, notices) = mpsc::unbounded_channel();
        let raw = RawCall::text(tool, "{}", toolgate_core::Surface::Chat);
        let task = Task::Spawned(tokio::task::spawn_blocking({
            let cancelled = cancelled.clone();
            move || {
                cancelled.wait_until(std::time::Instant::now() + Duration::from_secs(3600));
                pipeline.run(raw)
            }
        }));
        Running {
            task,
            cancelled,
            phase,
            notices,
        }
    }

    /// The flag that cancels the call.
    pub(crate) fn cancelled(&self) -> toolgate_core::Cancel {
        self.cancelled.clone()
    }
}

impl Parkable for Running {
    fn cancel(&self) {
        Running::cancel(self);
    }
}

/// What is left of one call, to its end: the pipeline's own run, stage 2 judging by `shown`,
/// `phase` told when the call waits for a person or runs, and what the executor reports
/// (already redacted and limited) sent to `notices`.
fn run_call(
    pipeline: &Pipeline,
    shown: &Shown,
    step: Step,
    cancelled: toolgate_core::Cancel,
    phase: &watch::Sender<Phase>,
    notices: NoticeSink,
) -> Outcome {
    with_watch(shown, phase, notices, |watching| match step {
        Step::Whole(raw) => pipeline.run_with(raw, cancelled, watching),
        Step::Rest(rest) => match rest.finish(cancelled, watching) {
            Finished::Ended(outcome) => outcome,
            Finished::Forward(forward) => forward.run_here(),
        },
    })
}

/// `f` given the [`Watch`] of one call: what the session was `shown`, for stage 2, `phase`
/// told when the call waits for a person or runs, and what the executor reports sent to
/// `notices`.
fn with_watch<R>(
    shown: &Shown,
    phase: &watch::Sender<Phase>,
    notices: NoticeSink,
    f: impl FnOnce(&Watch) -> R,
) -> R {
    f(&Watch {
        shown: Some(shown),
        awaiting_approval: &|call_id| {
            phase.send_replace(Phase::AwaitingApproval(call_id.into()));
        },
        executing: &|| {
            phase.send_replace(Phase::Running);
        },
        notices: Some(notices),
    })
}

/// Progress notifications for one call, to a client that sent a progress token: toolgate's
/// own reports of where the call is, and those the tool makes itself.
///
/// MCP wants the value to grow with every notification, whoever made it. toolgate's own
/// reports count up by one until the tool reports progress; from then on they add only a
/// little, so that the tool's numbers keep their meaning against its total. A tool's value
/// that does not grow is raised just past the last one sent.
pub(crate) struct Progress {
    token: ProgressToken,
    peer: Peer<RoleServer>,
    tool: String,
    /// The value last sent.
    last: f64,
    /// Whether the tool reported progress of its own.
    relayed: bool,
}

/// How much a report adds to the last value once the tool counts for itself.
const STEP_AFTER_TOOL: f64 = 0.001;

impl Progress {
    pub(crate) fn new(token: ProgressToken, peer: Peer<RoleServer>, tool: String) -> Self {
        Progress {
            token,
            peer,
            tool,
            last: 0.0,
            relayed: false,
        }
    }

    /// The next value when nobody says what it is.
    fn step(&self) -> f64 {
        self.last + if self.relayed { STEP_AFTER_TOOL } else { 1.0 }
    }

    /// Sends the tool's own report, `progress` of `total`, under the call's token.
    async fn relay(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        let value = if progress.is_finite() && progress > self.last {
            progress
        } else {
            self.step()
        };
        self.relayed = true;
        self.last = value;
        let mut params = ProgressNotificationParam::new(self.token.clone(), value);
        params.total = total.filter(|total| total.is_finite() && *total >= value);
        params.message = message;
        let _ = self.peer.notify_progress(params).await;
    }

    async fn report(&mut self, phase: &Phase, waited: Duration) {
        let message = match phase {
            Phase::Deciding => return,
            Phase::AwaitingApproval(_) => format!(
                "`{}` is waiting for a person's approval ({}s)",
                self.tool,
                waited.as_secs()
            ),
            Phase::Running => format!("`{}` is running ({}s)", self.tool, waited.as_secs()),
        };
        self.last = self.step();
        let mut params = ProgressNotificationParam::new(self.token.clone(), self.last);
        params.message = Some(message);
        // A client that stopped listening for progress does not stop the call.
        let _ = self.peer.notify_progress(params).await;
    }
}

/// Where one call's log messages go.
pub(crate) struct Logs<'a> {
    /// The session's level (`logging/setLevel`, before 2026-07-28).
    level: &'a LogLevel,
    /// The request's own level (`_meta["io.modelcontextprotocol/logLevel"]`, 2026-07-28).
    request: Option<logging::Level>,
    /// `None` for a call answered without rmcp, which is answered so only when nobody asked
    /// for log messages.
    peer: Option<Peer<RoleServer>>,
}

impl<'a> Logs<'a> {
    /// Log messages for `peer`, at the session's `level` unless the request names its own.
    pub(crate) fn new(
        level: &'a LogLevel,
        request: Option<logging::Level>,
        peer: Option<Peer<RoleServer>>,
    ) -> Self {
        Logs {
            level,
            request,
            peer,
        }
    }
}

/// Passes one of the executor's notices to the client, as the call's own: progress under the
/// call's token (only if the client sent one), a log message if the client wants its level.
async fn relay(notice: Notice, progress: &mut Option<Progress>, logs: &Logs<'_>) {
    match notice {
        Notice::Progress {
            progress: value,
            total,
            message,
        } => {
            if let Some(progress) = progress.as_mut() {
                progress.relay(value, total, message).await;
            }
        }
        Notice::Log {
            level,
            logger,
            data,
        } => {
            if let Some(peer) = &logs.peer {
                logs.level
                    .send(
                        peer,
                        logs.request,
                        logging::level_named(&level),
                        logger,
                        data,
                    )
                    .await;
            }
        }
    }
}

/// Whom a call that waits for approval asks, besides the console.
pub(crate) enum Ask {
    Nobody,
    /// The client, by an `elicitation/create` request, now.
    Now {
        desk: Arc<dyn ApprovalDesk>,
        peer: Peer<RoleServer>,
    },
    /// The client, in an `input_required` result: the watch ends with [`Watched::AskLater`].
    Later(Arc<dyn ApprovalDesk>),
}

/// How watching a call ended.
pub(crate) enum Watched {
    Ended(Box<Result<Outcome, tokio::task::JoinError>>),
    /// The call waits for a person, who may be asked by `form` in an `input_required`
    /// result; it is still running.
    AskLater {
        call_id: Arc<str>,
        form: Box<ElicitRequestParams>,
    },
}

/// What an elicitation started by [`Ask`] came to: for [`Ask::Later`], the form to send.
type Asking =
    std::pin::Pin<Box<dyn std::future::Future<Output = Option<Box<ElicitRequestParams>>> + Send>>;

/// Waits for a call to end, cancelling it when the client asks (`notifications/cancelled`),
/// stops listening (`answer` closed) or the session ends, reporting progress and relaying the
/// executor's notices meanwhile, and asking the client about a call that waits for approval as
/// `ask` says.
pub(crate) async fn watch_call(
    call: &mut Running,
    request: &CancellationToken,
    answer: &CancellationToken,
    progress: &mut Option<Progress>,
    logs: &Logs<'_>,
    interval: Duration,
    ask: &Ask,
) -> Watched {
    let started = tokio::time::Instant::now();
    let mut ticker = tokio::time::interval_at(started + interval, interval);
    let mut since = started;
    let mut phases_open = progress.is_some() || !matches!(ask, Ask::Nobody);
    let mut cancel_sent = false;
    // The elicitation in progress, and the id of its request once sent.
    let mut asking: Option<Asking> = None;
    let sent: Arc<Mutex<Option<RequestId>>> = Arc::default();
    let mut notices_open = true;
    let watched = loop {
        tokio::select! {
            ended = &mut call.task => break Watched::Ended(Box::new(ended)),
            notice = call.notices.recv(), if notices_open => match notice {
                Some(notice) => relay(notice, progress, logs).await,
                None => notices_open = false,
            },
            () = request.cancelled(), if !cancel_sent => {
                call.cancel();
                cancel_sent = true;
            }
            () = answer.cancelled(), if !cancel_sent => {
                call.cancel();
                cancel_sent = true;
            }
            changed = call.phase.changed(), if phases_open => {
                if changed.is_err() {
                    phases_open = false;
                    continue;
                }
                since = tokio::time::Instant::now();
                let now = call.phase.borrow_and_update().clone();
                if let Phase::AwaitingApproval(call_id) = &now {
                    asking = start_asking(ask, call_id, &sent);
                } else if asking.take().is_some() {
                    // Answered in the console: the client's form has nothing left to decide.
                    withdraw(ask, &sent).await;
                }
                if let Some(progress) = progress.as_mut() {
                    // Approval may take long: say so at once. A run reports on the next tick.
                    if matches!(now, Phase::AwaitingApproval(_)) {
                        progress.report(&now, Duration::ZERO).await;
                    }
                    ticker.reset();
                }
            }
            asked = async {
                match asking.as_mut() {
                    Some(asking) => asking.await,
                    None => std::future::pending().await,
                }
            }, if asking.is_some() => {
                asking = None;
                if let (Ask::Later(_), Some(form), Phase::AwaitingApproval(call_id)) =
                    (ask, asked, &*call.phase.borrow())
                {
                    break Watched::AskLater { call_id: Arc::clone(call_id), form };
                }
            }
            _ = ticker.tick(), if progress.is_some() => {
                if let Some(progress) = progress.as_mut() {
                    let now = call.phase.borrow().clone();
                    progress.report(&now, since.elapsed()).await;
                }
            }
        }
    };
    // What the executor reported just before it ended goes out before the result.
    if matches!(watched, Watched::Ended(_)) {
        while let Ok(notice) = call.notices.try_recv() {
            relay(notice, progress, logs).await;
        }
    }
    // The call ended before the person at the client answered.
    withdraw(ask, &sent).await;
    watched
}

/// Cancels the form sent to the client, if it is still unanswered.
async fn withdraw(ask: &Ask, sent: &Mutex<Option<RequestId>>) {
    let unanswered = sent.lock().unwrap_or_else(PoisonError::into_inner).take();
    if let (Ask::Now { peer, .. }, Some(id)) = (ask, unanswered) {
        let reason = "the approval was answered elsewhere, or its call ended".to_owned();
        let _ = peer
            .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason)))
            .await;
    }
}

/// The elicitation `ask` calls for, for the request of call `call_id`: for [`Ask::Now`] it
/// sends the form and gives the answer to the desk (and comes to `None`); for [`Ask::Later`]
/// it comes to the form to put in an `input_required` result.
fn start_asking(
    ask: &Ask,
    call_id: &Arc<str>,
    sent: &Arc<Mutex<Option<RequestId>>>,
) -> Option<Asking> {
    let call_id = Arc::clone(call_id);
    match ask {
        Ask::Nobody => None,
        Ask::Later(desk) => {
            let desk = Arc::clone(desk);
            Some(Box::pin(async move {
                elicit::find_form(&*desk, &call_id).await.map(Box::new)
            }))
        }
        Ask::Now { desk, peer } => {
            let (desk, peer, sent) = (Arc::clone(desk), peer.clone(), Arc::clone(sent));
            Some(Box::pin(async move {
                let form = elicit::find_form(&*desk, &call_id).await?;
                let form = ServerRequest::ElicitRequest(ElicitRequest::new(form));
                let handle = peer
                    .send_cancellable_request(form, PeerRequestOptions::no_options())
                    .await
                    .ok()?;
                *sent.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle.id.clone());
                let response = handle.await_response().await;
                sent.lock().unwrap_or_else(PoisonError::into_inner).take();
                if let Ok(ClientResult::ElicitResult(result)) = response
                    && let Some(answer) = elicit::answer_of(&result)
                {
                    // Refused only when the request no longer waits (answered in the console, cancelled
                    // or expired).
                    let _ = desk.answer(&call_id, answer);
                }
                None
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    //! A call's notices, from a fake executor through a real session over pipes.

    use std::io::{BufRead, BufReader, Write};
    use std::sync::mpsc as std_mpsc;

    use serde_json::{Value, json};
    use toolgate_core::{
        Call, Descriptor, EffectClass, ExecContext, Executor, HeadlessBroker, PolicyEngine,
        RegistryBuilder, ToolEntry, ToolError, ToolOutput, WorkspaceId,
    };

    use super::*;
    use crate::auth::Principal;
    use crate::server::Server;

    const WAIT: Duration = Duration::from_secs(10);

    /// Reports as an upstream server would for the call it serves, with a pause in which
    /// toolgate makes a report of its own.
    #[derive(Debug)]
    struct Chatty;

    impl Executor for Chatty {
        fn execute(&self, _: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
            cx.notify(Notice::Progress {
                progress: 1.0,
                total: Some(4.0),
                message: Some("cloning".into()),
            });
            std::thread::sleep(Duration::from_millis(250));
            // Lower than what was sent since: raised past it.
            cx.notify(Notice::Progress {
                progress: 0.5,
                total: Some(4.0),
                message: Some("resolving".into()),
            });
            cx.notify(Notice::Log {
                level: "info".into(),
                logger: Some("upstream".into()),
                data: json!({"fetched": 3}),
            });
            cx.notify(Notice::Log {
                level: "debug".into(),
                logger: None,
                data: json!("too chatty"),
            });
            Ok(ToolOutput::new(json!({"done": true})))
        }
    }

    /// Notes the thread it ran on.
    #[derive(Debug)]
    struct Where {
        brief: bool,
        /// Whether its calls are brief too (a brief tool's call may be too large to be).
        brief_call: bool,
        ran_on: Arc<Mutex<Vec<std::thread::ThreadId>>>,
    }

    impl Executor for Where {
        fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
            self.ran_on
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            Ok(ToolOutput::new(json!("here")))
        }

        fn brief(&self) -> bool {
            self.brief
        }

        fn brief_call(&self, _: &toolgate_core::Planned) -> bool {
            self.brief_call
        }
    }

    fn server() -> Arc<Server> {
        server_with(Vec::new())
    }

    /// The chatty tool, and more read-only tools.
    fn server_with(more: Vec<(&str, Arc<dyn Executor>)>) -> Arc<Server> {
        // The redaction rules load on first use, which in a debug build takes longer than
        // several of the test's progress intervals; loaded here, they do not hold up the
        // first notice behind toolgate's own reports.
        toolgate_core::redact::prepare();
        let mut builder = RegistryBuilder::new();
        let mut entry = ToolEntry::new("chatty", "test");
        entry.effect = Some(EffectClass::ReadOnly);
        entry.profiles = ["default".to_owned()].into_iter().collect();
        builder
            .register(
                Descriptor::new("chatty", "Talks while it works.", json!({"type": "object"})),
                entry,
                Arc::new(Chatty),
            )
            .unwrap();
        for (name, executor) in more {
            let mut entry = ToolEntry::new(name, "test");
            entry.effect = Some(EffectClass::ReadOnly);
            entry.profiles = ["default".to_owned()].into_iter().collect();
            let descriptor = Descriptor::new(name, "Reads.", json!({"type": "object"}));
            builder.register(descriptor, entry, executor).unwrap();
        }
        let registry = builder.build().unwrap();
        let mut policy = PolicyEngine::default_policy().unwrap();
        policy.prepare(&registry).unwrap();
        let pipeline = Pipeline::new(
            Arc::new(registry),
            Arc::new(policy),
            Arc::new(HeadlessBroker),
            WorkspaceId::new("/test"),
        );
        Arc::new(
            Server::new(pipeline, "toolgate", "test")
                .with_progress_interval(Duration::from_millis(50)),
        )
    }

    /// A session over pipes: send lines, read every message until the answer to `id`.
    struct Client {
        input: std::io::PipeWriter,
        lines: std_mpsc::Receiver<Value>,
    }

    impl Client {
        fn start() -> Client {
            Client::serving(server()).0
        }

        /// A client of `server`, and the thread its session's runtime runs on.
        fn serving(server: Arc<Server>) -> (Client, std::thread::ThreadId) {
            let (server_in, input) = std::io::pipe().unwrap();
            let (output, server_out) = std::io::pipe().unwrap();
            let runtime_thread = std::thread::spawn(move || {
                let runtime = crate::runtime().unwrap();
                let principal = Principal::new("tester", "default");
                let served =
                    crate::serve_streams(server, principal, server_in, server_out, 1 << 20);
                runtime.block_on(served).unwrap();
            });
            let (tx, lines) = std_mpsc::channel();
            std::thread::spawn(move || {
                for line in BufReader::new(output).lines() {
                    let Ok(line) = line else { return };
                    if tx.send(serde_json::from_str(&line).unwrap()).is_err() {
                        return;
                    }
                }
            });
            (Client { input, lines }, runtime_thread.thread().id())
        }

        /// Everything up to and including the answer to `message`.
        fn exchange(&mut self, message: &Value) -> Vec<Value> {
            writeln!(self.input, "{message}").unwrap();
            let mut seen = Vec::new();
            loop {
                let next = self.lines.recv_timeout(WAIT).expect("an answer in time");
                let done = next["id"] == message["id"] && next.get("method").is_none();
                seen.push(next);
                if done {
                    return seen;
                }
            }
        }

        fn initialize(&mut self) {
            self.exchange(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
            );
            writeln!(
                self.input,
                r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
            )
            .unwrap();
        }
    }

    fn of<'a>(seen: &'a [Value], method: &str) -> Vec<&'a Value> {
        seen.iter().filter(|m| m["method"] == method).collect()
    }

    #[test]
    fn a_calls_notices_reach_the_client_as_its_own() {
        let mut client = Client::start();
        client.initialize();
        client.exchange(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
            "params": {"level": "info"}}),
        );
        let seen = client.exchange(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "chatty", "arguments": {}, "_meta": {"progressToken": "p"}}}));
        assert_eq!(seen.last().unwrap()["result"]["isError"], false, "{seen:?}");

        let progress = of(&seen, "notifications/progress");
        assert!(
            progress.iter().all(|p| p["params"]["progressToken"] == "p"),
            "{progress:?}"
        );
        let values: Vec<f64> = progress
            .iter()
            .map(|p| p["params"]["progress"].as_f64().unwrap())
            .collect();
        assert!(
            values.windows(2).all(|w| w[0] < w[1]),
            "strictly increasing: {values:?}"
        );
        let message = |p: &&Value| p["params"]["message"].as_str().unwrap_or("").to_owned();
        let messages: Vec<String> = progress.iter().map(message).collect();
        let cloning = progress.iter().find(|p| message(p) == "cloning").unwrap();
        assert_eq!(cloning["params"]["progress"], 1.0);
        assert_eq!(cloning["params"]["total"], 4.0);
        assert!(
            messages.iter().any(|m| m.contains("`chatty` is running")),
            "toolgate's own reports go on: {messages:?}"
        );
        let resolving = progress.iter().find(|p| message(p) == "resolving").unwrap();
        assert!(
            resolving["params"]["progress"].as_f64().unwrap() > 1.0,
            "{resolving}"
        );

        let logs = of(&seen, "notifications/message");
        assert_eq!(
            logs.len(),
            1,
            "debug is below the session's level: {logs:?}"
        );
        assert_eq!(logs[0]["params"]["level"], "info");
        assert_eq!(logs[0]["params"]["logger"], "upstream");
        assert_eq!(logs[0]["params"]["data"], json!({"fetched": 3}));
    }

    /// A brief read that nobody must approve runs where its request arrived, on the session's
    /// own thread; any other call runs on a blocking thread, a brief tool's call too large to
    /// be brief included.
    #[test]
    fn a_brief_read_runs_where_its_request_arrived() {
        let ran_on = Arc::new(Mutex::new(Vec::new()));
        let tool = |brief, brief_call| -> Arc<dyn Executor> {
            Arc::new(Where {
                brief,
                brief_call,
                ran_on: Arc::clone(&ran_on),
            })
        };
        let server = server_with(vec![
            ("brief", tool(true, true)),
            ("long", tool(false, false)),
            ("large", tool(true, false)),
        ]);
        let (mut client, runtime) = Client::serving(server);
        client.initialize();
        for (id, name) in [(1, "brief"), (2, "long"), (3, "brief"), (4, "large")] {
            let seen = client.exchange(&json!({"jsonrpc": "2.0", "id": id,
                "method": "tools/call", "params": {"name": name, "arguments": {}}}));
            let answer = seen.last().unwrap();
            assert_eq!(answer["result"]["isError"], false, "{answer}");
        }
        let ran_on = ran_on.lock().unwrap().clone();
        assert_eq!(ran_on.len(), 4);
        assert_eq!(
            ran_on[0], runtime,
            "the brief read ran on the session's thread"
        );
        assert_ne!(
            ran_on[1], runtime,
            "the other call ran on a blocking thread"
        );
        assert_eq!(ran_on[2], runtime);
        assert_ne!(
            ran_on[3], runtime,
            "the large read ran on a blocking thread"
        );
    }

    #[test]
    fn a_client_that_asked_for_nothing_hears_nothing() {
        let mut client = Client::start();
        client.initialize();
        let seen = client.exchange(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "chatty", "arguments": {}}}));
        assert_eq!(seen.len(), 1, "only the answer: {seen:?}");
    }

    #[test]
    fn a_2026_client_names_its_log_level_on_the_request() {
        let mut client = Client::start();
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/logLevel": "debug",
        });
        let seen = client.exchange(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "chatty", "arguments": {}, "_meta": meta}}));
        let logs = of(&seen, "notifications/message");
        let levels: Vec<&Value> = logs.iter().map(|l| &l["params"]["level"]).collect();
        assert_eq!(levels, [&json!("info"), &json!("debug")], "{seen:?}");
        assert!(
            of(&seen, "notifications/progress").is_empty(),
            "no token, no progress"
        );
    }
}
