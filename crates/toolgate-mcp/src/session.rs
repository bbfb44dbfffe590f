//! One MCP session: the tools it was shown, and its calls through the pipeline.
//!
//! A session resolves a tool name only against the tools it has been shown: those of its last
//! `tools/list`, or, before it ever listed, those visible when it began. A tool that became
//! visible since is refused until the session lists again; a tool that was hidden since, or
//! whose entry changed, is refused too. A call in flight keeps the entry it resolved to (the
//! pipeline holds it), whatever happens to the registry meanwhile.
//!
//! A call, once started, is watched by the `watcher` module (progress, the executor's notices,
//! cancellation, asking the person at the client); one that answered `input_required` waits
//! in the parking lot of [`crate::elicit`] for its retry.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rmcp::ErrorData as McpError;
use rmcp::RoleServer;
use rmcp::ServerHandler;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, DiscoverResult, InitializeRequestParams,
    InitializeResult, InputRequiredResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerConfig, SubscriptionFilter, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolgate_core::{EffectClass, Pipeline, RawArguments, RawCall, Shown, Status, Surface, Tool};

use crate::auth::Principal;
use crate::elicit::{self, Parked};
use crate::logging::{self, LogLevel};
use crate::reply;
use crate::server::Server;
use crate::subscriptions::{self, ListenEnd};
use crate::watcher::{Ask, Logs, Progress, Running, Watched, watch_call};
use crate::wire::{ArgumentText, ClientRequestId};

/// Set by a transport that can tell when the client stopped listening for one call's answer
/// (an HTTP response stream that closed): the call is then cancelled.
#[derive(Debug, Clone, Default)]
pub struct AnswerWatch(pub CancellationToken);

/// One MCP session, as rmcp's server handler.
#[derive(Debug)]
pub struct Session {
    state: Arc<SessionState>,
}

/// What a session holds. Shared with the HTTP transport, which answers some of the
/// session's calls itself (see `crate::http::direct`).
#[derive(Debug)]
pub(crate) struct SessionState {
    server: Arc<Server>,
    identity: Identity,
    shown: Mutex<Option<Arc<Shown>>>,
    pub(crate) log: LogLevel,
    /// Cancelled when the session ends, to stop what it started in the background.
    pub(crate) ended: CancellationToken,
    /// Whether the client said it is initialized: only then are calls answered directly.
    pub(crate) ready: std::sync::atomic::AtomicBool,
    /// Calls answered directly and still running, by the client's request id (as JSON), for
    /// a `notifications/cancelled` to reach; each with a marker of its own, so that a call
    /// that ends removes its own entry and not a later call's under the same id.
    pub(crate) direct: Mutex<std::collections::HashMap<String, DirectCall>>,
    /// This session's number in the server's run, counted from 1: which session asked.
    number: u64,
    /// What the client said it is in `initialize` (`clientInfo`), for the calls the HTTP
    /// transport answers itself, which have no request context to ask.
    pub(crate) client: OnceLock<rmcp::model::Implementation>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.state.ended.cancel();
    }
}

/// A call answered directly: its marker, and what cancels it.
pub(crate) type DirectCall = (Arc<()>, CancellationToken);

/// Given with an HTTP `initialize`: the session it begins puts its state here, for the
/// transport to find by the session's id.
#[derive(Debug, Clone, Default)]
pub(crate) struct Registration(pub(crate) Arc<OnceLock<std::sync::Weak<SessionState>>>);

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
    pub fn new(server: Arc<Server>, principal: Principal) -> Self {
        Session::with(server, Identity::Fixed(principal))
    }

    /// A session whose principal the first request's [`Principal`] extension decides.
    pub fn bound_by_request(server: Arc<Server>) -> Self {
        Session::with(server, Identity::Bound(OnceLock::new()))
    }

    fn with(server: Arc<Server>, identity: Identity) -> Self {
        Session {
            state: Arc::new(SessionState {
                server,
                identity,
                shown: Mutex::new(None),
                log: LogLevel::default(),
                ended: CancellationToken::new(),
                ready: std::sync::atomic::AtomicBool::new(false),
                direct: Mutex::default(),
                number: next_session_number(),
                client: OnceLock::new(),
            }),
        }
    }
}

/// The next session's number: sessions are numbered in the order they start in this process.
fn next_session_number() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl SessionState {
    /// Who asks, as a person is shown it: what the client said it is (`clientInfo`'s name and
    /// version, from `initialize` or, at 2026-07-28, from the request's own `_meta`: its
    /// claim, unchecked) and this session's number.
    fn client_claim(&self, info: Option<&rmcp::model::Implementation>) -> String {
        match info {
            Some(info) => format!(
                "{}, session {}",
                format!("{} {}", info.name, info.version).trim(),
                self.number
            ),
            None => format!("a client that did not name itself, session {}", self.number),
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

    /// Starts call `name` as `principal`: its arguments as the client sent them (`text`, when
    /// the transport kept it, so that stage 1 sees duplicate keys), stage 2 letting through only
    /// what this session was shown. Every transport's `tools/call` begins here.
    pub(crate) fn start_call(
        &self,
        principal: Principal,
        name: &str,
        text: Option<String>,
        arguments: Option<rmcp::model::JsonObject>,
        request_id: String,
        client: Option<&rmcp::model::Implementation>,
    ) -> Running {
        let pipeline = self.server.pipeline();
        let shown = self.shown(&pipeline, &principal);
        let arguments = match text {
            Some(text) => RawArguments::Text(text),
            None => RawArguments::Value(arguments.map_or(Value::Null, Value::Object)),
        };
        let raw = RawCall {
            tool: name.to_owned(),
            arguments,
            surface: Surface::Chat,
            actor: principal.actor,
            profile: principal.profile,
            request_id: Some(request_id),
            client: Some(self.client_claim(client)),
        };
        Running::start(pipeline, raw, shown)
    }

    /// What the session may call: its last listing, or what was visible when it began.
    pub(crate) fn shown(&self, pipeline: &Pipeline, principal: &Principal) -> Arc<Shown> {
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
        self.state.server.info()
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        let principal = self.state.principal(&context)?;
        if let Some(Registration(slot)) = request_extension::<Registration>(&context) {
            let _ = slot.set(Arc::downgrade(&self.state));
        }
        context.peer.set_peer_info(request.clone());
        let _ = self.state.client.set(request.client_info.clone());
        // The session begins here: what it may call until it lists is what is visible now.
        self.state.shown(&self.state.server.pipeline(), &principal);
        self.negotiate_initialize(&request)
    }

    /// What a 2026-07-28 client learns before its first request: the capabilities less those
    /// that revision deprecates.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, McpError> {
        let mut info = self.state.server.info();
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
        self.state.log.set(&request);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(subscriptions::honoured())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), McpError> {
        self.state.principal(subscription.request_context())?;
        let ending = request_extension::<ListenEnd>(subscription.request_context());
        subscriptions::serve(&self.state.server, subscription, &self.state.ended, ending).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.state
            .ready
            .store(true, std::sync::atomic::Ordering::Release);
        let mut changes = self.state.server.changes();
        let peer = context.peer;
        let ended = self.state.ended.clone();
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
        let principal = self.state.principal(&context)?;
        let listed = self.state.list(&self.state.server.pipeline(), &principal);
        let tools = listed.tools().map(|tool| mcp_tool(tool)).collect();
        // The list depends on the session's principal: rmcp marks it private, uncached, for
        // clients of the revisions that have cache hints.
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> impl Future<Output = Result<CallToolResponse, McpError>> + Send + '_ {
        // rmcp runs each request as a task of its own, whose future it moves whole several
        // times (into the task, then at each change of the task's stage), and a call's future
        // is several kibibytes: boxed, each move copies a pointer.
        Box::pin(self.serve_call(request, context))
    }
}

impl Session {
    /// A `tools/call`: the request's arguments through the pipeline, watched for
    /// cancellation, progress and an answer asked of the client, then its result.
    async fn serve_call(
        &self,
        request: CallToolRequestParams,
        mut context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let principal = self.state.principal(&context)?;
        if let Some(state) = &request.request_state {
            return self.resume(state, &request, &principal, &context).await;
        }
        // The text as sent, when the transport kept it, so that stage 1 sees duplicate keys.
        let text = match context.extensions.remove::<ArgumentText>() {
            Some(ArgumentText(text)) => Some(text),
            None => request_extension::<ArgumentText>(&context).map(|ArgumentText(text)| text),
        };
        let ask = match self
            .state
            .server
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
        let request_id = request_extension::<ClientRequestId>(&context)
            .map_or_else(|| context.id.to_string(), |id| id.0.to_string());
        let mut call = self.state.start_call(
            principal,
            &request.name,
            text,
            request.arguments,
            request_id,
            context.client_info().as_ref(),
        );
        let mut progress = self.progress(&context, &request.name);
        let logs = self.logs(&context);
        let answer = request_extension::<AnswerWatch>(&context).unwrap_or_default();
        let interval = self.state.server.progress_interval();
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
            match self.state.server.park(parked) {
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
            .state
            .server
            .claim(state, principal, &request.name, request.arguments.as_ref())
            .map_err(|e| McpError::invalid_params(e, None))?;
        if let (Some(elicitation), Some(responses)) =
            (self.state.server.elicitation(), &request.input_responses)
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
            self.state.server.progress_interval(),
            &Ask::Nobody,
        )
        .await;
        self.respond(watched, context).await
    }

    /// Where the log messages of the request's call go, at the level the client asked for.
    fn logs(&self, context: &RequestContext<RoleServer>) -> Logs<'_> {
        Logs::new(
            &self.state.log,
            context.meta.log_level(),
            Some(context.peer.clone()),
        )
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
        let outcome = ended(watched)?;
        let summary = (outcome.status() != Status::Completed).then(|| outcome.summary());
        let result = reply::tool_result(outcome);
        if let Some(summary) = summary {
            self.state
                .log
                .warn(&context.peer, context.meta.log_level(), summary)
                .await;
        }
        Ok(CallToolResponse::from(result))
    }
}

/// The outcome of a call whose watch ended, or the JSON-RPC error that says why there is none.
pub(crate) fn ended(watched: Watched) -> Result<toolgate_core::Outcome, McpError> {
    match watched {
        Watched::Ended(ended) => (*ended)
            .map_err(|e| McpError::internal_error(format!("the call's worker failed: {e}"), None)),
        Watched::AskLater { .. } => Err(McpError::internal_error(
            "the call was left waiting for an answer nobody was asked for",
            None,
        )),
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

/// A registry entry as an MCP tool. Annotations come from the operator's effect class, never
/// from the tool's own claims.
fn mcp_tool(tool: &Tool) -> McpTool {
    let mut listed = McpTool::new_with_raw(
        tool.entry().name.clone(),
        Some(tool.description().to_owned().into()),
        schema_object(&tool.descriptor().input_schema),
    );
    listed.title.clone_from(&tool.descriptor().title);
    listed.output_schema = tool
        .descriptor()
        .output_schema
        .as_ref()
        .map(|schema| Arc::new(schema_object(schema)));
    let effect = tool.entry().effect();
    let mut annotations = ToolAnnotations::new();
    annotations.title.clone_from(&tool.descriptor().title);
    annotations.read_only_hint = Some(effect == EffectClass::ReadOnly);
    annotations.destructive_hint = Some(effect == EffectClass::Irreversible);
    annotations.open_world_hint = Some(effect == EffectClass::Network);
    listed.annotations = Some(annotations);
    listed
}

fn schema_object(schema: &Value) -> Map<String, Value> {
    match schema {
        Value::Object(map) => map.clone(),
        // `true` (and an absent schema) accept anything; MCP wants an object schema.
        _ => Map::from_iter([("type".to_owned(), Value::from("object"))]),
    }
}
