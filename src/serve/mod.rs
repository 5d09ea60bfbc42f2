//! The `run_python` MCP server, on stdio or Streamable HTTP ([`http`]).
//!
//! Exactly one tool, `run_python(code: string)`. Each call runs the code in a fresh sandbox
//! (at most [`crate::limits::MAX_CONCURRENT_RUNS`] at once, and at most the session's own
//! run slots at once, see [`session`]; more calls wait their turn, as many and as much code
//! as [`queue`] lets wait)
//! and returns the result object `{"stdout", "error", "truncated", "stopped"}` as JSON text
//! and as `structuredContent`; a run that raised or was stopped, or never started (refused,
//! its sandbox failed to start), is a normal tool result with `isError: true` (a JSON-RPC
//! error is kept for malformed requests: an unknown tool name, arguments without a string
//! `code`, or with any other argument: [`run_python_code`]).

pub mod description;

mod arguments;
pub(crate) use arguments::run_python_code;
mod catalog_changes;
mod client_input;
mod client_output;
pub(crate) mod http;
mod ids_in_use;
mod in_flight;
mod metrics;
mod progress;
pub mod queue;
mod sep_approval;
mod sep_tasks;
mod session;
mod stdio;
mod stdio_client;
mod task_approval;
mod tasks;
mod unreadable;

pub use stdio_client::StdioClient;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    ContentBlock, GetTaskParams, GetTaskResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter,
    Tool, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::description::describe;
use crate::bridge::Bridge;
use crate::governance::approval::{Approver, ElicitingClient};
use crate::run::pool::Pool;
use crate::run::{CANCELLED, CallEnd, RunEvent, RunOptions, Steering};
use crate::sandbox::Backend;
use metrics::{CallOutcome, Metrics, RunOutcome};
use progress::{ProgressReporter, ProgressSink};
use session::Session;

/// `_meta` key of a run_python result that says which resource limits held in its sandbox.
pub const LIMITS_META_KEY: &str = "mcp-code-mode/limits";
/// `_meta` key of a run_python result that counts the calls sent to wrapped servers.
pub const CALLS_META_KEY: &str = "mcp-code-mode/calls";
/// `_meta` key of a run_python result that says whether its sandbox came from the warm pool.
pub const POOLED_META_KEY: &str = "mcp-code-mode/pooled";

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// The run_python server, ready to serve over any rmcp transport.
#[derive(Clone)]
pub struct CodeModeServer {
    bridge: Arc<Bridge>,
    pool: Arc<Pool>,
    options: RunOptions,
    tool: Tool,
    /// The catalog generation `tool` was described from.
    tool_generation: u64,
    /// The process's run slots, shared by every session.
    slots: Arc<tokio::sync::Semaphore>,
    /// The runs waiting for a slot, shared by every session.
    queue: Arc<queue::RunQueue>,
    /// This session's taint and run slots.
    session: Session,
    /// Cancelled when the client goes away (stdin reaches its end) or the process shuts
    /// down: every run is cancelled.
    disconnected: CancellationToken,
    metrics: Arc<Metrics>,
    /// Runs asked for and not finished yet (queued ones included), over all sessions.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// Offer only the protocol versions with an `initialize` handshake (up to 2025-11-25):
    /// over HTTP, later versions have no session for the taint to live in.
    handshake_only: bool,
    /// Cancelled when the process starts shutting down: new runs are refused.
    draining: CancellationToken,
    /// Cancelled when shutdown cancels the runs left after its grace period: a run
    /// cancelled then says so ([`CANCELLED_AT_SHUTDOWN`]), not that its client cancelled it.
    shutdown: CancellationToken,
    /// This session's client, once it has sent `notifications/initialized`: where the
    /// notifications of task runs go ([`tasks`]), which have no request context of their own.
    peer: Arc<std::sync::OnceLock<Peer<RoleServer>>>,
    /// Cancels `disconnected` when the last clone holding it is dropped: an HTTP session's
    /// service, which rmcp drops when the session ends (`DELETE`, idle expiry, shutdown),
    /// so the session's task runs end with it. `None` on stdio and in task layers' clones.
    _session_end: Option<Arc<tokio_util::sync::DropGuard>>,
    /// This session's tasks of the SEP-2663 tasks extension ([`sep_tasks`]).
    extension_tasks: rmcp::task_manager::TaskManager,
    /// A request's id as the client wrote it (JSON text), from rmcp's id for it, for log
    /// lines: on stdio rmcp's id is serve's own ([`in_flight::client_id`]).
    client_id: fn(&rmcp::model::RequestId) -> String,
}

/// The run_python tool definition for `bridge` with these run options.
pub fn run_python_tool(bridge: &Bridge, options: &RunOptions) -> Tool {
    let input = json!({
        "type": "object",
        "properties": {"code": {"type": "string", "description": "Python source; top-level await is allowed."}},
        "required": ["code"],
        "additionalProperties": false
    });
    let output = json!({
        "type": "object",
        "properties": {
            "stdout": {"type": "string"},
            "error": {"type": ["string", "null"]},
            "truncated": {"type": "boolean"},
            "stopped": {"type": "boolean"}
        },
        "required": ["stdout", "error", "truncated", "stopped"]
    });
    let as_object = |v: Value| match v {
        Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    };
    Tool::new(
        TOOL_NAME,
        describe(
            &bridge.catalog(),
            options.deadline.as_secs(),
            options.max_calls,
            &bridge.call_timeouts(),
        ),
        as_object(input),
    )
    .with_raw_output_schema(as_object(output))
}

impl CodeModeServer {
    /// Build the server without starting it, to serve it on a transport of the caller's;
    /// every run starts its sandbox cold (see [`Self::with_pool`]).
    pub fn new(bridge: Arc<Bridge>, backend: Arc<dyn Backend>, options: RunOptions) -> Self {
        let pool = Arc::new(Pool::new(bridge.clone(), backend, 0));
        Self::with_pool(bridge, pool, options)
    }

    /// Build the server with runs taking their sandboxes from `pool` (a pool of `bridge`).
    /// The caller closes the pool after serving ([`Pool::close`]).
    pub fn with_pool(bridge: Arc<Bridge>, pool: Arc<Pool>, options: RunOptions) -> Self {
        let tool = run_python_tool(&bridge, &options);
        let tool_generation = bridge.generation();
        Self {
            bridge,
            pool,
            options,
            tool,
            tool_generation,
            slots: Arc::new(tokio::sync::Semaphore::new(
                crate::limits::MAX_CONCURRENT_RUNS,
            )),
            queue: queue::RunQueue::new(queue::QueueLimits::default()),
            // stdio's one session may use every slot of the process; HTTP sessions get
            // `--session-runs` ([`Self::with_session_runs`]).
            session: Session::unseated(crate::limits::MAX_CONCURRENT_RUNS),
            disconnected: CancellationToken::new(),
            metrics: Arc::new(Metrics::default()),
            in_flight: Arc::default(),
            handshake_only: false,
            draining: CancellationToken::new(),
            shutdown: CancellationToken::new(),
            peer: Arc::default(),
            _session_end: None,
            extension_tasks: sep_tasks::new_manager(),
            client_id: |id| id.clone().into_json_value().to_string(),
        }
    }

    /// The same server for another MCP session: the process's run slots, pool, metrics and
    /// shutdown are shared; the taint and the session's run slots are `session`'s.
    pub fn for_session(&self, session: Session) -> Self {
        Self {
            session,
            disconnected: self.disconnected.child_token(),
            peer: Arc::default(),
            _session_end: None,
            extension_tasks: sep_tasks::new_manager(),
            ..self.clone()
        }
    }

    /// The same server for one Streamable HTTP session ([`Self::for_session`], offering
    /// only the protocol versions that have sessions). Every run of the session, its task
    /// runs included, is cancelled once [`Session::closed`] is or rmcp drops the last clone
    /// of it (the session ended). Must be called inside a Tokio runtime.
    pub fn for_http_session(&self, session: Session) -> Self {
        let server = self.for_session(session);
        let (closed, disconnected) = (server.session.closed.clone(), server.disconnected.clone());
        tokio::spawn(async move {
            tokio::select! {
                () = closed.cancelled() => disconnected.cancel(),
                () = disconnected.cancelled() => {}
            }
        });
        Self {
            handshake_only: true,
            _session_end: Some(Arc::new(server.disconnected.clone().drop_guard())),
            ..server
        }
    }

    /// A clone that does not keep the session alive (`_session_end`) or its seat under the
    /// session cap: what a task layer keeps, so that the tasks of an ended session are
    /// cancelled and its seat freed.
    pub(crate) fn detached(&self) -> Self {
        Self {
            _session_end: None,
            session: self.session.unseat(),
            ..self.clone()
        }
    }

    /// This session's client, once it has initialized.
    pub(crate) fn peer(&self) -> Option<Peer<RoleServer>> {
        self.peer.get().cloned()
    }

    /// Give every session of this server its own run slots, `runs` at once (at least 1).
    pub fn with_session_runs(mut self, runs: usize) -> Self {
        self.session = Session::unseated(runs);
        self
    }

    /// Bound the runs that wait for a slot by `limits` (shared by every session made from
    /// this server afterwards); the default is [`queue::QueueLimits::default`].
    pub fn with_queue_limits(mut self, limits: queue::QueueLimits) -> Self {
        self.queue = queue::RunQueue::new(limits);
        self
    }

    /// The counters of this server (shared by its sessions).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The bridge over the wrapped servers.
    pub fn bridge(&self) -> &Arc<Bridge> {
        &self.bridge
    }

    /// The pool runs take their sandboxes from.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The run options of every run.
    pub fn options(&self) -> &RunOptions {
        &self.options
    }

    /// Runs asked for and not finished, queued ones included, over all sessions.
    pub fn runs_in_flight(&self) -> usize {
        self.in_flight.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether this session has ended (or the process is shutting down).
    pub(crate) fn ended(&self) -> bool {
        self.disconnected.is_cancelled()
    }

    /// Cancel every run of every session now (shutdown, after its grace period).
    pub fn cancel_all_runs(&self) {
        self.shutdown.cancel();
        self.disconnected.cancel();
    }

    /// Refuse every run asked for from now on, in every session (shutdown): each gets a
    /// tool error saying the server is shutting down.
    pub fn stop_taking_runs(&self) {
        self.draining.cancel();
    }

    /// Serve MCP to `client` (this process's stdin/stdout, with what the client sent while
    /// serve started) until the client disconnects, run_python also callable as a task
    /// (`stdio`, `tasks`).
    ///
    /// # Errors
    /// The transport's or the handshake's error.
    ///
    /// When stdin reaches its end, every run (queued, running, or a task's) is cancelled at
    /// once, so the service ends without waiting for them (rmcp would wait up to 5 s).
    pub async fn serve_stdio(self, client: StdioClient) -> anyhow::Result<()> {
        stdio::serve(self, client).await
    }

    /// Run `code` as the task of a task-augmented call ([`tasks`]): as a plain call runs,
    /// cancelled by `cancel` (`tasks/cancel`, the client going away), with progress under
    /// `progress_token` (the call's own) when it carried one and the client has initialized;
    /// calls that need approval are asked of `approver` ([`task_approval`]), or refused
    /// without one.
    /// A server shutting down refuses it like a plain call.
    async fn run_task(
        &self,
        code: &str,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
        approver: Option<Arc<dyn Approver>>,
    ) -> CallToolResult {
        if self.draining.is_cancelled() {
            return unstarted_result(DRAINING);
        }
        let progress = progress.map(|sink| ProgressReporter::to_sink(sink, self.options.deadline));
        let (events, counting) = self.events(progress.as_ref());
        let steering = Steering {
            cancel,
            events: Some(events),
            taint: self.session.taint.clone(),
            // 2025-11-25 tasks ask through the session's client, the question naming the
            // task; without an approver such calls are refused, saying so.
            approver,
            session: Some(self.session.id.clone()),
        };
        let result = self.run(code, &steering).await;
        drop(steering);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), counting).await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        result
    }

    /// Run `code` once a slot is free, steered by `steering`.
    async fn run(&self, code: &str, steering: &Steering) -> CallToolResult {
        let begun = std::time::Instant::now();
        // The session is not idle while this run waits, runs or asks its questions.
        let _busy = self.session.activity.run();
        self.in_flight
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let result = self.run_in_slots(code, steering).await;
        self.in_flight
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        let (result, outcome) = result;
        self.metrics.run_ended(outcome, begun.elapsed());
        result
    }

    async fn run_in_slots(&self, code: &str, steering: &Steering) -> (CallToolResult, RunOutcome) {
        // A run takes its slots at once when both are free; one that must wait takes a place
        // in the bounded queue first, or is refused.
        let place = match self
            .queue
            .admit([&self.session.slots, &self.slots], code.len())
        {
            Ok(queue::Admission::Now(session, process)) => {
                let _slots = (session, process);
                return self.run_in_slot(code, steering).await;
            }
            Ok(queue::Admission::Wait(place)) => place,
            Err(full) => return (queue::refusal(&full), RunOutcome::queue_full),
        };
        // The semaphores are never closed, so acquiring only waits; a run cancelled while
        // it waits never starts (and leaves the queue). The session's slot first: one
        // session's queue never holds one of the process's slots.
        let slots = async {
            let session = self.session.slots.acquire().await;
            let process = self.slots.acquire().await;
            (session, process)
        };
        let _slots = tokio::select! {
            biased;
            () = steering.cancel.cancelled() => {
                tracing::info!("a queued run was cancelled before it started");
                return (unstarted_result(self.cancelled_error()), RunOutcome::cancelled);
            }
            slots = slots => slots,
        };
        drop(place);
        self.run_in_slot(code, steering).await
    }

    /// Run `code` in a sandbox, its slots held by the caller.
    async fn run_in_slot(&self, code: &str, steering: &Steering) -> (CallToolResult, RunOutcome) {
        let _running = self.metrics.sandbox_running();
        match self.pool.run_steered(code, &self.options, steering).await {
            Ok(mut report) => {
                if report.result.error.as_deref() == Some(CANCELLED) {
                    report.result.error = Some(self.cancelled_error().into());
                }
                tracing::info!(
                    limits = %report.limits_text(),
                    calls = report.calls,
                    pooled = report.pooled,
                    "run finished"
                );
                let text = report.result.to_json();
                let structured = serde_json::to_value(&report.result).unwrap_or(Value::Null);
                let mut result = if report.result.succeeded() {
                    CallToolResult::success(vec![ContentBlock::text(text)])
                } else {
                    CallToolResult::error(vec![ContentBlock::text(text)])
                };
                result.structured_content = Some(structured);
                let mut meta = serde_json::Map::new();
                meta.insert(LIMITS_META_KEY.into(), Value::String(report.limits_text()));
                meta.insert(CALLS_META_KEY.into(), Value::from(report.calls));
                meta.insert(POOLED_META_KEY.into(), Value::Bool(report.pooled));
                result.meta = Some(rmcp::model::MetaObject(meta));
                let outcome = match &report.result {
                    r if r.succeeded() => RunOutcome::ok,
                    r if matches!(r.error.as_deref(), Some(CANCELLED | CANCELLED_AT_SHUTDOWN)) => {
                        RunOutcome::cancelled
                    }
                    r if r.stopped => RunOutcome::stopped,
                    _ => RunOutcome::error,
                };
                (result, outcome)
            }
            Err(e) => {
                tracing::error!("{e}");
                let result = unstarted_result(&format!(
                    "{e}. Run `mcp-code-mode doctor` to see what this host lacks."
                ));
                (result, RunOutcome::failed_to_start)
            }
        }
    }

    /// Where a run's events go: counted here, and passed on to `progress` when the
    /// request asked for progress.
    /// The task ends once every clone of the sender is dropped.
    fn events(
        &self,
        progress: Option<&ProgressReporter>,
    ) -> (mpsc::UnboundedSender<RunEvent>, tokio::task::JoinHandle<()>) {
        let (events, mut rx) = mpsc::unbounded_channel();
        let forward = progress.map(ProgressReporter::events);
        let metrics = self.metrics.clone();
        let bridge = self.bridge.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = rx.recv().await {
                if let RunEvent::CallFinished { tool, end, .. } = &event {
                    let server = bridge
                        .catalog()
                        .get(tool)
                        .map_or_else(String::new, |t| t.server_name.clone());
                    let outcome = match end {
                        CallEnd::Answered => CallOutcome::ok,
                        CallEnd::Failed => CallOutcome::tool_error,
                        CallEnd::Refused { reason } => {
                            metrics.call_refused(reason);
                            CallOutcome::refused
                        }
                        CallEnd::HostFault => CallOutcome::host_fault,
                    };
                    metrics.call_ended(&server, outcome);
                }
                if let Some(forward) = &forward {
                    let _ = forward.send(event);
                }
            }
        });
        (events, task)
    }
}

/// The error of a run cancelled at shutdown: by a signal on stdio, after the grace period
/// (`--shutdown-grace`) over HTTP.
pub const CANCELLED_AT_SHUTDOWN: &str = "the run was cancelled because mcp-code-mode is shutting down (a signal ended it, over HTTP after its shutdown grace period); the sandbox was killed; run it again in a new session";

impl CodeModeServer {
    /// The error of a cancelled run: [`CANCELLED_AT_SHUTDOWN`] once shutdown cancelled the
    /// runs left ([`Self::cancel_all_runs`]), else the client's [`CANCELLED`].
    fn cancelled_error(&self) -> &'static str {
        if self.shutdown.is_cancelled() {
            CANCELLED_AT_SHUTDOWN
        } else {
            CANCELLED
        }
    }
}

/// What a call refused while serve shuts down gets as its `error`.
const DRAINING: &str = "mcp-code-mode is shutting down and takes no new runs; run it again in a new session (another replica takes it)";

/// The result of a run that never started (refused at shutdown or by the full queue, its
/// sandbox failed to start, cancelled while it waited), `error` saying why: the same
/// `{"stdout", "error", "truncated", "stopped"}` object, as text and `structuredContent`,
/// as every run's result, with `stopped` true and `isError`. (The client of a cancelled
/// request never reads it: rmcp drops the response to a cancelled request.)
fn unstarted_result(error: &str) -> CallToolResult {
    let result = crate::run::RunResult {
        stdout: String::new(),
        error: Some(error.into()),
        truncated: false,
        stopped: true,
    };
    let mut out = CallToolResult::error(vec![ContentBlock::text(result.to_json())]);
    out.structured_content = serde_json::to_value(&result).ok();
    out
}

impl ServerHandler for CodeModeServer {
    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        if self.handshake_only {
            std::borrow::Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        } else {
            std::borrow::Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        }
    }

    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
            .build();
        let mut config = ServerConfig::new(capabilities);
        config.server_info = Implementation::new("mcp-code-mode", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(
            "Call run_python with Python code that awaits the wrapped tools; see its description for the tools and limits.".into(),
        );
        config
    }

    /// Protocols before 2026-07-28: from `notifications/initialized` on, tell this client
    /// `notifications/tools/list_changed` whenever the wrapped catalog changes (the
    /// run_python description embeds it), until it goes away. Protocol 2026-07-28 and later
    /// clients opt in through `subscriptions/listen` ([`Self::listen`]).
    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let peer = context.peer;
        let _ = self.peer.set(peer.clone());
        let legacy = peer
            .peer_info()
            .is_some_and(|info| info.protocol_version < ProtocolVersion::V_2026_07_28);
        if !legacy {
            return;
        }
        let changes = self.catalog_changes();
        let disconnected = self.disconnected.clone();
        tokio::spawn(async move {
            tokio::select! {
                () = disconnected.cancelled() => {}
                () = changes.each(|| async {
                    peer.notify_tool_list_changed().await.map_err(|e| e.to_string())
                }) => {}
            }
        });
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let wanted = requested.tools_list_changed == Some(true);
        Some(if wanted {
            SubscriptionFilter::builder().tools_list_changed().build()
        } else {
            SubscriptionFilter::new()
        })
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        if context.accepted().tools_list_changed != Some(true) {
            context.cancelled().await;
            return Ok(());
        }
        let changes = self.catalog_changes();
        let sink = context.sink().clone();
        tokio::select! {
            () = context.cancelled() => {}
            () = self.disconnected.cancelled() => {}
            () = changes.each(|| async {
                sink.notify_tool_list_changed().await.map_err(|e| e.to_string())
            }) => {}
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // The description follows the current catalog: a server that started on a later
        // try, or one whose tools changed, shows up here.
        let bridge = self.pool.bridge();
        let tool = if bridge.generation() == self.tool_generation {
            self.tool.clone()
        } else {
            run_python_tool(bridge, &self.options)
        };
        Ok(ListToolsResult::with_all_items(vec![tool]))
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.extension_get(&request)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.extension_update(request)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.extension_cancel(&request)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if request.name != TOOL_NAME {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool {:?}; the only tool is {TOOL_NAME}",
                    request.name
                ),
                None,
            ));
        }
        let code = run_python_code(request.arguments.as_ref())
            .map_err(|why| McpError::invalid_params(why, None))?;
        if self.draining.is_cancelled() {
            return Ok(CallToolResponse::Complete(unstarted_result(DRAINING)));
        }
        if let Some(capabilities) = context
            .client_capabilities()
            .filter(ClientCapabilities::supports_tasks)
        {
            let elicitation = capabilities.elicitation.is_some();
            return Ok(CallToolResponse::Task(
                self.start_extension_task(code.to_owned(), elicitation),
            ));
        }
        // One token for the run: cancelled by the client's notifications/cancelled for
        // this request (rmcp cancels `context.ct`) or by the client going away.
        let cancel = self.disconnected.child_token();
        let cancelled_at = Arc::new(std::sync::OnceLock::new());
        let watch = {
            let (request, run, at) = (context.ct.clone(), cancel.clone(), cancelled_at.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = request.cancelled() => {}
                    () = run.cancelled() => {}
                }
                let _ = at.set(std::time::Instant::now());
                run.cancel();
            })
        };
        let progress = ProgressReporter::start(&context, self.options.deadline);
        let (events, counting) = self.events(progress.as_ref());
        let steering = Steering {
            cancel: cancel.clone(),
            events: Some(events),
            taint: self.session.taint.clone(),
            approver: Some(Arc::new(ElicitingClient::new(context.peer.clone()))),
            session: Some(self.session.id.clone()),
        };
        let result = self.run(code, &steering).await;
        watch.abort();
        // Every event is counted and passed on before the progress ends (the calls' own
        // clones of the sender go with their aborted tasks).
        drop(steering);
        let _ = tokio::time::timeout(std::time::Duration::from_secs(1), counting).await;
        if let Some(progress) = progress {
            progress.finish().await;
        }
        if let Some(at) = cancelled_at.get() {
            tracing::info!(
                "run_python request {} was cancelled; its slot was free {} ms after the cancel",
                (self.client_id)(&context.id),
                at.elapsed().as_millis()
            );
        }
        Ok(CallToolResponse::Complete(result))
    }
}
