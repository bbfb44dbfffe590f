//! One MCP session: the tools it was shown, and its calls through the pipeline.
//!
//! A session resolves a tool name only against the tools it has been shown: those of its last
//! `tools/list`, or, before it ever listed, those visible when it began. A tool that became
//! visible since is refused until the session lists again; a tool that was hidden since, or
//! whose entry changed, is refused too. A call in flight keeps the entry it resolved to (the
//! pipeline holds it), whatever happens to the registry meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelledNotificationParam, ClientResult,
    DiscoverResult, ElicitRequest, ElicitRequestParams, InitializeRequestParams, InitializeResult,
    InputRequiredResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ProgressToken, ProtocolVersion, RequestId, ServerConfig, ServerRequest, SubscriptionFilter,
    Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{
    NotificationContext, Peer, PeerRequestOptions, RequestContext, SubscriptionContext,
};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use toolgate_core::hint::{did_you_mean, hint_for};
use toolgate_core::{
    EffectClass, Invocation, Notice, NoticeSink, Outcome, Pipeline, RawArguments, RawCall,
    Registry, RejectCode, Rejection, RunHooks, Status, Surface, Tool,
};

use crate::auth::Principal;
use crate::elicit::{self, ApprovalDesk};
use crate::gateway::Gateway;
use crate::logging::{self, LogLevel};
use crate::reply;
use crate::subscriptions::{self, ListenEnd};
use crate::wire::{ArgumentText, ClientRequestId};

/// Set by a transport that can tell when the client stopped listening for one call's answer
/// (an HTTP response stream that closed): the call is then cancelled.
#[derive(Debug, Clone, Default)]
pub struct AnswerWatch(pub CancellationToken);

/// One MCP session, as rmcp's server handler.
#[derive(Debug)]
pub struct Session {
    gateway: Arc<Gateway>,
    identity: Identity,
    shown: Mutex<Option<Arc<Shown>>>,
    log: LogLevel,
    /// Cancelled when the session ends, to stop what it started in the background.
    ended: CancellationToken,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

/// Where a session's principal comes from.
#[derive(Debug)]
enum Identity {
    /// Fixed when the session started (stdio: the `--profile` the server was started with).
    Fixed(Principal),
    /// Bound by the first request, from the [`Principal`] the HTTP layer attached to it after
    /// checking its bearer token; every later request must carry the same one.
    Bound(OnceLock<Principal>),
}

impl Session {
    /// A session whose calls all run as `principal`.
    pub fn new(gateway: Arc<Gateway>, principal: Principal) -> Self {
        Session {
            gateway,
            identity: Identity::Fixed(principal),
            shown: Mutex::new(None),
            log: LogLevel::default(),
            ended: CancellationToken::new(),
        }
    }

    /// A session whose principal the first request's [`Principal`] extension decides.
    pub fn bound_by_request(gateway: Arc<Gateway>) -> Self {
        Session {
            gateway,
            identity: Identity::Bound(OnceLock::new()),
            shown: Mutex::new(None),
            log: LogLevel::default(),
            ended: CancellationToken::new(),
        }
    }

    fn principal(&self, ctx: &RequestContext<RoleServer>) -> Result<Principal, McpError> {
        match &self.identity {
            Identity::Fixed(principal) => Ok(principal.clone()),
            Identity::Bound(bound) => {
                let Some(presented) = request_extension::<Principal>(ctx) else {
                    return Err(McpError::internal_error(
                        "the request reached the session without a principal",
                        None,
                    ));
                };
                let principal = bound.get_or_init(|| presented.clone());
                if *principal == presented {
                    Ok(presented)
                } else {
                    Err(McpError::invalid_request(
                        "this session belongs to another token",
                        None,
                    ))
                }
            }
        }
    }

    /// What the session may call: its last listing, or what was visible when it began.
    fn shown(&self, pipeline: &Pipeline, principal: &Principal) -> Arc<Shown> {
        let mut shown = self.shown.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            shown.get_or_insert_with(|| {
                Arc::new(Shown::of(pipeline.registry(), &principal.profile))
            }),
        )
    }

    fn list(&self, pipeline: &Pipeline, principal: &Principal) -> Arc<Shown> {
        let listed = Arc::new(Shown::of(pipeline.registry(), &principal.profile));
        *self.shown.lock().unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&listed));
        listed
    }
}

impl ServerHandler for Session {
    fn get_info(&self) -> ServerConfig {
        self.gateway.info()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let principal = self.principal(&context)?;
        context.peer.set_peer_info(request.clone());
        // The session begins here: what it may call until it lists is what is visible now.
        self.shown(&self.gateway.pipeline(), &principal);
        self.negotiate_initialize(&request)
    }

    /// What a 2026-07-28 client learns before its first request: the capabilities less those
    /// that revision deprecates.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let mut info = self.gateway.info();
        info.capabilities = logging::modern_capabilities();
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    #[expect(
        deprecated,
        reason = "MCP logging is deprecated by SEP-2577, and clients of the 2025 revisions still use it"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // 2026-07-28 removed the method: such a client names its level on each request.
        if modern(&context) {
            return Err(McpError::method_not_found::<
                rmcp::model::SetLevelRequestMethod,
            >());
        }
        self.log.set(&request);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(subscriptions::honoured())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        self.principal(subscription.request_context())?;
        let ending = request_extension::<ListenEnd>(subscription.request_context());
        subscriptions::serve(&self.gateway, subscription, &self.ended, ending).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut changes = self.gateway.changes();
        let peer = context.peer;
        let ended = self.ended.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    changed = changes.changed() => {
                        if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                            return;
                        }
                    }
                    () = ended.cancelled() => return,
                }
            }
        });
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if request.and_then(|r| r.cursor).is_some() {
            return Err(McpError::invalid_params(
                "unknown cursor: toolgate lists every tool in one page",
                None,
            ));
        }
        let principal = self.principal(&context)?;
        let listed = self.list(&self.gateway.pipeline(), &principal);
        let tools = listed.tools.iter().map(|tool| mcp_tool(tool)).collect();
        // The list depends on the session's principal: rmcp marks it private, uncached, for
        // clients of the revisions that have cache hints.
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = self.principal(&context)?;
        if let Some(state) = &request.request_state {
            return self.resume(state, &request, &principal, &context).await;
        }
        let pipeline = self.gateway.pipeline();
        let shown = self.shown(&pipeline, &principal);
        // The text as sent, when the transport kept it, so that stage 1 sees duplicate keys.
        let text = match context.extensions.remove::<ArgumentText>() {
            Some(ArgumentText(text)) => Some(text),
            None => request_extension::<ArgumentText>(&context).map(|ArgumentText(text)| text),
        };
        let ask = match self
            .gateway
            .elicitation()
            .and_then(|e| e.for_request(&principal.profile, &context))
        {
            None => Ask::Nobody,
            Some(desk) if modern(&context) => Ask::Later(desk),
            Some(desk) => Ask::Now {
                desk,
                peer: context.peer.clone(),
            },
        };
        // What a retry of this call must repeat, however each was read: kept only for a call
        // that may answer `input_required`.
        let retry = matches!(ask, Ask::Later(_)).then(|| {
            let arguments = match &text {
                Some(text) => serde_json::from_str(text).ok(),
                None => request.arguments.clone(),
            };
            (principal.clone(), arguments)
        });
        let arguments = match text {
            Some(text) => RawArguments::Text(text),
            None => RawArguments::Value(request.arguments.map_or(Value::Null, Value::Object)),
        };
        let request_id = request_extension::<ClientRequestId>(&context)
            .map_or_else(|| context.id.to_string(), |id| id.0.to_string());
        let raw = RawCall {
            tool: request.name.to_string(),
            arguments,
            surface: Surface::Chat,
            actor: principal.actor,
            profile: principal.profile,
            request_id: Some(request_id),
        };
        let cancelled = Arc::new(AtomicBool::new(false));
        let (phase_tx, phase_rx) = watch::channel(Phase::Deciding);
        // Core limits each call's notices (ten a second), so this channel stays short.
        let (notice_tx, notices) = mpsc::unbounded_channel();
        let sink: NoticeSink = Arc::new(move |notice| {
            // The call outlived its watcher (its client went away): nobody to tell.
            let _ = notice_tx.send(notice);
        });
        let task = tokio::task::spawn_blocking({
            let cancelled = Arc::clone(&cancelled);
            move || run_call(&pipeline, &shown, raw, cancelled, &phase_tx, sink)
        });
        let mut call = Running {
            task,
            cancelled,
            phase: phase_rx,
            notices,
        };
        let mut progress = self.progress(&context, &request.name);
        let logs = self.logs(&context);
        let answer = request_extension::<AnswerWatch>(&context).unwrap_or_default();
        let interval = self.gateway.progress_interval();
        let mut watched = watch_call(
            &mut call,
            &context.ct,
            &answer.0,
            &mut progress,
            &logs,
            interval,
            &ask,
        )
        .await;
        // Only an `Ask::Later` watch ends asking later, and only then is `retry` kept.
        if let (Watched::AskLater { call_id, form }, Some((principal, arguments))) =
            (&watched, retry)
        {
            let (call_id, form) = (Arc::clone(call_id), form.clone());
            let parked = Box::new(Parked {
                principal,
                tool: request.name.to_string(),
                arguments,
                call_id,
                call,
            });
            match self.gateway.park(parked) {
                Ok(state) => {
                    let asked =
                        InputRequiredResult::new(Some(elicit::input_requests(*form)), Some(state));
                    return Ok(CallToolResponse::from(asked));
                }
                // No room to leave it waiting: it waits here, for the console.
                Err(mut parked) => {
                    watched = watch_call(
                        &mut parked.call,
                        &context.ct,
                        &answer.0,
                        &mut progress,
                        &logs,
                        interval,
                        &Ask::Nobody,
                    )
                    .await;
                }
            }
        }
        self.respond(watched, &context).await
    }
}

impl Session {
    /// A 2026-07-28 client's retry of a call that answered `input_required`: the answer it
    /// carries goes to the desk, then the retry waits for the call's result.
    async fn resume(
        &self,
        state: &str,
        request: &CallToolRequestParams,
        principal: &Principal,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // A retry carries answers, which the transports leave to rmcp to read whole.
        let mut parked = self
            .gateway
            .claim(state, principal, &request.name, request.arguments.as_ref())
            .map_err(|e| McpError::invalid_params(e, None))?;
        if let (Some(elicitation), Some(responses)) =
            (self.gateway.elicitation(), &request.input_responses)
            && let Some(answer) = elicit::answer_in(responses)
        {
            // Refused only when the request no longer waits (answered in the console, cancelled or
            // expired); the call's result says how.
            let _ = elicitation.desk.answer(&parked.call_id, answer);
        }
        let mut progress = self.progress(context, &request.name);
        let logs = self.logs(context);
        let answer = request_extension::<AnswerWatch>(context).unwrap_or_default();
        let watched = watch_call(
            &mut parked.call,
            &context.ct,
            &answer.0,
            &mut progress,
            &logs,
            self.gateway.progress_interval(),
            &Ask::Nobody,
        )
        .await;
        self.respond(watched, context).await
    }

    /// Where the log messages of the request's call go, at the level the client asked for.
    fn logs(&self, context: &RequestContext<RoleServer>) -> Logs<'_> {
        Logs {
            level: &self.log,
            request: context.meta.log_level(),
            peer: context.peer.clone(),
        }
    }

    fn progress(&self, context: &RequestContext<RoleServer>, tool: &str) -> Option<Progress> {
        context
            .meta
            .get_progress_token()
            .map(|token| Progress::new(token, context.peer.clone(), tool.to_owned()))
    }

    /// The tool result of a call that ended.
    async fn respond(
        &self,
        watched: Watched,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let ended = match watched {
            Watched::Ended(ended) => *ended,
            Watched::AskLater { .. } => {
                return Err(McpError::internal_error(
                    "the call was left waiting for an answer nobody was asked for",
                    None,
                ));
            }
        };
        let outcome = match ended {
            Ok(outcome) => outcome,
            Err(e) => {
                return Err(McpError::internal_error(
                    format!("the call's worker failed: {e}"),
                    None,
                ));
            }
        };
        let summary = (outcome.status != Status::Completed).then(|| outcome.summary());
        let result = reply::tool_result(outcome);
        if let Some(summary) = summary {
            self.log
                .warn(&context.peer, context.meta.log_level(), summary)
                .await;
        }
        Ok(CallToolResponse::from(result))
    }
}

/// Whether the request came at revision 2026-07-28 or later, which has no requests from
/// server to client.
fn modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28)
}

/// A request extension, from the request itself (stdio) or the HTTP request it came in.
fn request_extension<T: Clone + Send + Sync + 'static>(
    context: &RequestContext<RoleServer>,
) -> Option<T> {
    context.extensions.get::<T>().cloned().or_else(|| {
        context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<T>().cloned())
    })
}

/// The tools a session was shown, in registry order, one entry per name.
#[derive(Debug, Default)]
pub(crate) struct Shown {
    tools: Vec<Arc<Tool>>,
}

impl Shown {
    /// The tools visible in `profile`; where several versions of a name are visible, the
    /// newest.
    pub(crate) fn of(registry: &Registry, profile: &str) -> Shown {
        let mut tools: Vec<Arc<Tool>> = Vec::new();
        for tool in registry.visible(profile) {
            match tools.iter_mut().find(|t| t.entry.name == tool.entry.name) {
                Some(listed) if listed.entry.version < tool.entry.version => {
                    *listed = Arc::clone(tool);
                }
                Some(_) => {}
                None => tools.push(Arc::clone(tool)),
            }
        }
        Shown { tools }
    }

    fn get(&self, name: &str) -> Option<&Arc<Tool>> {
        self.tools.iter().find(|t| t.entry.name == name)
    }

    /// Stage 2's further condition for this session (see [`toolgate_core::Admit`]): a tool
    /// the session was not shown is unknown to it, whatever the registry holds; one whose entry
    /// changed since it was shown is stale. A tool hidden since, disabled or unavailable the
    /// registry refuses with its own code.
    fn admit(
        &self,
        invocation: &Invocation,
        resolved: Option<&Arc<Tool>>,
    ) -> Result<(), Rejection> {
        let name = invocation.tool.as_str();
        let Some(listed) = self.get(name) else {
            let hint = if resolved.is_some() {
                // The registry resolved it in this profile, so it became visible after the
                // session's listing.
                Some(format!(
                    "`{name}` became available after this session last listed its tools; list them again (tools/list) before calling it"
                ))
            } else {
                let names = self.tools.iter().map(|t| t.entry.name.as_str());
                hint_for(did_you_mean(name, names.clone())).or_else(|| {
                    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
                    Some(if names.is_empty() {
                        "this session has no tools".to_owned()
                    } else {
                        format!("available tools: {}", names.join(", "))
                    })
                })
            };
            return Err(Rejection::new(
                RejectCode::UnknownTool,
                format!("no tool `{name}` in this session's tool list"),
            )
            .with_hint(hint));
        };
        let Some(resolved) = resolved else {
            return Ok(());
        };
        if let Some(major) = invocation.version
            && major != listed.entry.version.major
        {
            return Err(Rejection::new(
                RejectCode::VersionIncompatible,
                format!(
                    "this session was shown `{name}` version {}, not major version {major}",
                    listed.entry.version
                ),
            )
            .with_hint(Some(format!("call it as `{name}`"))));
        }
        if same_entry(listed, resolved) {
            Ok(())
        } else {
            Err(Rejection::new(
                RejectCode::StaleDescriptor,
                format!("tool `{name}` changed since this session listed it"),
            )
            .with_hint(Some(
                "list the tools again (tools/list) and read its description and schema".into(),
            )))
        }
    }
}

/// The same tool as far as a model can tell: same version, descriptor and description.
fn same_entry(a: &Arc<Tool>, b: &Arc<Tool>) -> bool {
    Arc::ptr_eq(a, b)
        || (a.entry.name == b.entry.name
            && a.entry.version == b.entry.version
            && a.digest == b.digest
            && a.description() == b.description())
}

/// A registry entry as an MCP tool. Annotations come from the operator's effect class, never
/// from the tool's own claims.
fn mcp_tool(tool: &Tool) -> McpTool {
    let mut listed = McpTool::new_with_raw(
        tool.entry.name.clone(),
        Some(tool.description().to_owned().into()),
        schema_object(&tool.descriptor.input_schema),
    );
    listed.title.clone_from(&tool.descriptor.title);
    listed.output_schema = tool
        .descriptor
        .output_schema
        .as_ref()
        .map(|schema| Arc::new(schema_object(schema)));
    let effect = tool.entry.effect();
    let mut annotations = ToolAnnotations::new();
    annotations.title.clone_from(&tool.descriptor.title);
    annotations.read_only_hint = Some(effect == EffectClass::ReadOnly);
    annotations.destructive_hint = Some(effect == EffectClass::Irreversible);
    annotations.open_world_hint = Some(effect == EffectClass::Network);
    listed.annotations = Some(annotations);
    listed
}

fn schema_object(schema: &Value) -> Map<String, Value> {
    match schema {
        Value::Object(map) => map.clone(),
        // `true` (and an absent schema) admit anything; MCP wants an object schema.
        _ => Map::from_iter([("type".to_owned(), Value::from("object"))]),
    }
}

/// Where a call is, for progress reports and for asking a person.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Phase {
    Deciding,
    /// Waiting for a person's answer to the request of the call with this id.
    AwaitingApproval(Arc<str>),
    Running,
}

/// A call on its blocking thread, as a transport watches it.
#[derive(Debug)]
pub(crate) struct Running {
    task: tokio::task::JoinHandle<Outcome>,
    /// Set to cancel the call.
    cancelled: Arc<AtomicBool>,
    phase: watch::Receiver<Phase>,
    /// What the executor reports while it runs, for the client.
    notices: mpsc::UnboundedReceiver<Notice>,
}

impl Running {
    /// Cancels the call; its thread ends soon after, and its outcome is recorded.
    pub(crate) fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// A call of `pipeline` that waits until it is cancelled, then runs `tool`.
    #[cfg(test)]
    pub(crate) fn waiting(pipeline: Arc<Pipeline>, tool: &str) -> Running {
        let cancelled = Arc::new(AtomicBool::new(false));
        let (_, phase) = watch::channel(Phase::Deciding);
        let (_, notices) = mpsc::unbounded_channel();
        let raw = RawCall::text(tool, "{}", Surface::Chat);
        let task = tokio::task::spawn_blocking({
            let cancelled = Arc::clone(&cancelled);
            move || {
                while !cancelled.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                pipeline.run(raw)
            }
        });
        Running {
            task,
            cancelled,
            phase,
            notices,
        }
    }

    /// The flag that cancels the call, to watch from a test.
    #[cfg(test)]
    pub(crate) fn cancelled(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancelled)
    }
}

/// A 2026-07-28 call that answered `input_required` and waits, on the server, for the
/// client's retry.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) principal: Principal,
    pub(crate) tool: String,
    pub(crate) arguments: Option<Map<String, Value>>,
    pub(crate) call_id: Arc<str>,
    pub(crate) call: Running,
}

/// One call, stages 1 to 8, on a blocking thread: the pipeline's own run, with the session's
/// admission in stage 2, `phase` told when the call waits for a person or runs, and what the
/// executor reports (already redacted and limited) sent to `notices`.
fn run_call(
    pipeline: &Pipeline,
    shown: &Shown,
    raw: RawCall,
    cancelled: Arc<AtomicBool>,
    phase: &watch::Sender<Phase>,
    notices: NoticeSink,
) -> Outcome {
    let hooks = RunHooks {
        admit: &|invocation, tool| shown.admit(invocation, tool),
        awaiting_approval: &|call_id| {
            phase.send_replace(Phase::AwaitingApproval(call_id.into()));
        },
        executing: &|| {
            phase.send_replace(Phase::Running);
        },
        notices: Some(notices),
    };
    pipeline.run_with(raw, cancelled, &hooks)
}

/// Progress notifications for one call, to a client that sent a progress token: toolgate's
/// own reports of where the call is, and those the tool makes itself.
///
/// MCP wants the value to grow with every notification, whoever made it. toolgate's own
/// reports count up by one until the tool reports progress; from then on they add only a
/// little, so that the tool's numbers keep their meaning against its total. A tool's value
/// that does not grow is raised just past the last one sent.
struct Progress {
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
    fn new(token: ProgressToken, peer: Peer<RoleServer>, tool: String) -> Self {
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
struct Logs<'a> {
    /// The session's level (`logging/setLevel`, before 2026-07-28).
    level: &'a LogLevel,
    /// The request's own level (`_meta["io.modelcontextprotocol/logLevel"]`, 2026-07-28).
    request: Option<logging::Level>,
    peer: Peer<RoleServer>,
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
            logs.level
                .send(
                    &logs.peer,
                    logs.request,
                    logging::level_named(&level),
                    logger,
                    data,
                )
                .await;
        }
    }
}

/// Whom a call that waits for approval asks, besides the console.
enum Ask {
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
enum Watched {
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
async fn watch_call(
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

    use serde_json::json;
    use toolgate_core::{
        Authorized, Descriptor, ExecContext, Executor, HeadlessBroker, PolicyEngine,
        RegistryBuilder, ToolEntry, ToolError, ToolOutput, WorkspaceId,
    };

    use super::*;
    use crate::auth::Principal;

    const WAIT: Duration = Duration::from_secs(10);

    /// Reports as an upstream server would for the call it serves, with a pause in which
    /// toolgate makes a report of its own.
    #[derive(Debug)]
    struct Chatty;

    impl Executor for Chatty {
        fn execute(&self, _: &Authorized, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
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

    fn gateway() -> Arc<Gateway> {
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
            Gateway::new(pipeline, "toolgate", "test")
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
            let (server_in, input) = std::io::pipe().unwrap();
            let (output, server_out) = std::io::pipe().unwrap();
            let gateway = gateway();
            std::thread::spawn(move || {
                let runtime = crate::runtime().unwrap();
                let principal = Principal::new("tester", "default");
                let served =
                    crate::serve_streams(gateway, principal, server_in, server_out, 1 << 20);
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
            Client { input, lines }
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
