//! One wrapped MCP server: its process, its rmcp client session, its tool list and calls.
//!
//! The server runs on the host as an ordinary child process (it is not sandboxed; README
//! "What it does not protect"), with MCP's default environment (the Python SDK's
//! `get_default_environment` on POSIX: HOME, LOGNAME, PATH, SHELL, TERM, USER, skipping values
//! that start with `()`) plus the variables the user passed (`--env NAME`, or a config entry's
//! `env`, as written). Its stderr is always drained: lines go to our log (cut at 500
//! characters), and the last few are kept to explain a failed start.
//!
//! When the server dies (it exits, is killed, closes its stdout, or sends a line the
//! transport refuses), the call in flight fails within [`CLOSE_GRACE`] with a message that
//! says how (`exited with status 9`, `was killed by signal 9`, `sent a line over 16 MiB`):
//! the call races its answer against the transport's close signal and a task that waits on
//! the process, so a server whose own child keeps its stdout open cannot hang the call.
//!
//! What the next call (in this run or the next) gets: the server is restarted by that call,
//! at most once per [`RESTART_COOLDOWN`] after its last start, and the restart counts
//! against that call's timeout; a call inside the cooldown fails at once with a clear
//! message ("… it is restarted by a call made 2 s or more after its last start"). The
//! catalog is not read again: tools stay as listed at startup. The private-data taint lives
//! in the client's session, so a restart never resets it.
//!
//! A plain call to a stdio server is written beside rmcp's service loop (`raw_call.rs`);
//! other requests go through rmcp. A call that times out is dropped and `notifications/cancelled`
//! sent; one still in the write queue is withdrawn, never written (`write_queue.rs`). The
//! server's requests are answered: ping, `roots/list` (no roots), sampling refused, elicitation
//! declined, else "method not found" (logged sparingly: `refusals.rs`); an unreadable one is
//! refused. An `initialize` answer with an older or an unknown protocol version is accepted.

mod call_answer;
mod call_timer;
mod http_thread;
pub(crate) mod json_scan;
mod lenient;
mod lenient_http;
mod line_decode;
pub(crate) mod listing;
pub(crate) mod plain;
mod raw_call;
mod raw_http;
mod refusals;
mod remote;
mod repair;
pub(crate) mod result;
mod stderr_tail;
mod tasks;
pub(crate) mod ticket;
pub(crate) mod tied;
mod tools_changed;
mod transport;
mod unanswered;
mod write_queue;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::process::Child;

use self::listing::{Connection, list_all};
use self::raw_call::RawCalls;
use self::stderr_tail::StderrTail;
use self::tasks::{RawRequests, TaskTools};
pub(crate) use self::tools_changed::ToolsChanged;
use self::transport::{CloseReason, line_transport};

/// Default time allowed for a server to start and answer `initialize` and `tools/list`
/// (`--startup-timeout`; a config entry's `startupTimeout`): [`ServerSpec::startup_timeout`].
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Least time between two restarts of a server that died.
pub const RESTART_COOLDOWN: Duration = Duration::from_secs(2);
/// Pages of `tools/list` read at most (a server that never stops paging is cut off).
pub(crate) const MAX_TOOL_PAGES: usize = 1000;
/// Time a call still waits for its answer after the connection ended: a server that
/// writes its answer and exits at once is answered, not failed.
const CLOSE_GRACE: Duration = Duration::from_millis(200);

/// MCP's default environment variables, inherited when set (POSIX).
pub const DEFAULT_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How to start (or reach) one wrapped server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ServerSpec {
    /// The server's name: the config entry's, or `server` for the single-server form.
    pub name: String,
    /// The program, found on PATH when it has no `/`.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it on top of MCP's default environment, as written.
    pub env: Vec<(String, String)>,
    /// Working directory (default: ours).
    pub cwd: Option<PathBuf>,
    /// A remote server: reached at this URL instead of started (`command`, `args`, `env`
    /// and `cwd` are then empty and unused).
    pub remote: Option<RemoteSpec>,
    /// Time allowed to start and answer `initialize` and every page of `tools/list`, all
    /// together (a re-list gets this again for all its pages); `None`: [`STARTUP_TIMEOUT`]. A client's `initialize` of `serve` waits for every server's
    /// start, so for the slowest of these.
    pub startup_timeout: Option<Duration>,
}

impl ServerSpec {
    /// [`Self::startup_timeout`], or [`STARTUP_TIMEOUT`] when it is not set.
    pub fn startup_wait(&self) -> Duration {
        self.startup_timeout.unwrap_or(STARTUP_TIMEOUT)
    }
}

/// A remote server's address.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteSpec {
    /// `http://` or `https://` URL of its MCP endpoint.
    pub url: String,
    /// Headers sent with every request (an `Authorization` bearer token, an API key).
    pub headers: Vec<(String, String)>,
    /// Which HTTP transport it speaks.
    pub transport: RemoteTransport,
}

/// The HTTP transports of MCP (spec "Transports").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RemoteTransport {
    /// Streamable HTTP (protocol 2025-03-26 and later).
    StreamableHttp,
    /// The HTTP+SSE transport of protocol 2024-11-05.
    Sse,
}

/// Why a server could not be used.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    /// The program could not be started.
    #[error("failed to start the server {name:?} ({command}): {why}")]
    Spawn {
        /// Server name.
        name: String,
        /// The command.
        command: String,
        /// The OS error, with a hint.
        why: String,
    },
    /// The MCP handshake or the tool list failed.
    #[error("failed to {step} the server {name:?}: {why}{tail}")]
    Session {
        /// Server name.
        name: String,
        /// What was being done.
        step: &'static str,
        /// Why.
        why: String,
        /// The last lines the server wrote to stderr, if any.
        tail: String,
    },
}

/// What a tool call to a server came to.
#[derive(Debug)]
pub(crate) enum CallOutcome {
    /// The server answered.
    Result(CallToolResult),
    /// No answer within the timeout; `notifications/cancelled` was sent.
    TimedOut,
    /// The connection failed; the text is the bridge's own explanation (no host details).
    Broken(String),
    /// The server answered with a JSON-RPC error.
    Rejected(String),
    /// The server's answer is no tool result (a `null` or array `result`); the text says so.
    NotAToolResult(String),
}

/// Answers what a server may ask of us: ping, roots (none), and refuses sampling and
/// elicitation (not offered in our capabilities). Logs notifications, bounded.
#[derive(Clone)]
pub(crate) struct BridgeClient {
    server: String,
    tools_changed: Arc<ToolsChanged>,
}

impl ClientHandler for BridgeClient {
    fn get_info(&self) -> ClientConfig {
        let mut config = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mcp-code-mode", env!("CARGO_PKG_VERSION")),
        );
        config.protocol_version = ProtocolVersion::LATEST_WITH_INITIALIZE;
        config
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        // One line per re-list is logged (relist.rs), not one per notification: a server
        // may send them in a loop.
        tracing::debug!(server = %self.server, "the server says its tool list changed");
        self.tools_changed.set();
    }
}

struct Live {
    session: RunningService<RoleClient, BridgeClient>,
    reason: CloseReason,
    /// The local server's process; `None` for a remote server.
    process: Option<Process>,
    /// Requests sent beside rmcp's (tasks).
    raw: RawRequests,
    /// Plain tool calls sent beside rmcp's (raw_call.rs): a local server whose protocol has
    /// `initialize`; `None` sends them through rmcp.
    calls: Option<RawCalls>,
}

/// The server (leader of a [`tied::ProcessGroup`]), watched until it ends; dropping this kills it.
struct Process {
    kill: Option<tokio::sync::oneshot::Sender<()>>,
    watcher: tokio::task::JoinHandle<()>,
}

impl Process {
    /// Watch `child`: when it exits, `reason` learns how (so a call in flight fails at once,
    /// even when a child of the server still holds its stdout open).
    fn watch(mut child: Child, server: String, reason: CloseReason) -> Self {
        let (kill, killed) = tokio::sync::oneshot::channel::<()>();
        let group = tied::ProcessGroup::led_by(child.id());
        let watcher = tokio::spawn(async move {
            let status = tokio::select! {
                status = child.wait() => status,
                _ = killed => {
                    let _ = child.start_kill();
                    child.wait().await
                }
            };
            drop(group);
            reason.set_exit(describe_exit(&server, status));
        });
        Self {
            kill: Some(kill),
            watcher,
        }
    }

    /// Kill the process and wait (bounded) until it is reaped.
    async fn kill(mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
        let _ = tokio::time::timeout(Duration::from_secs(2), &mut self.watcher).await;
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Dropping the sender wakes the watcher, which kills the process.
        self.kill.take();
    }
}

fn describe_exit(server: &str, status: std::io::Result<std::process::ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("the server {server:?} exited with status {code}"),
            (None, Some(sig)) => format!("the server {server:?} was killed by signal {sig}"),
            _ => format!("the server {server:?} exited"),
        },
        Err(e) => format!("the server {server:?} ended (failed to wait for it: {e})"),
    }
}

/// What a call needs of the live session: [`Upstream::peer`].
type Peered = (
    rmcp::Peer<RoleClient>,
    CloseReason,
    RawRequests,
    Option<RawCalls>,
);

/// One wrapped server and its (re)startable session.
pub(crate) struct Upstream {
    spec: ServerSpec,
    live: tokio::sync::Mutex<Option<Live>>,
    last_start: Mutex<Instant>,
    tools_changed: Arc<ToolsChanged>,
    restarts: std::sync::atomic::AtomicU64,
    task_tools: TaskTools,
    timers: call_timer::CallTimers,
}

impl Upstream {
    /// Start the server, complete the MCP handshake and read its whole tool list;
    /// `tools_changed` is set (and its waker woken) by the server's
    /// `notifications/tools/list_changed`.
    ///
    /// # Errors
    /// [`UpstreamError`] naming the server, the step and the reason (plus its stderr tail).
    pub(crate) async fn start_with(
        spec: ServerSpec,
        tools_changed: Arc<ToolsChanged>,
    ) -> Result<(Self, Vec<Tool>), UpstreamError> {
        let task_tools = TaskTools::default();
        // One deadline for the start, the handshake and every page of the tool list.
        let deadline = tokio::time::Instant::now() + spec.startup_wait();
        let live = connect(&spec, &tools_changed, &task_tools, deadline).await?;
        let tools = match list_all(&spec, &Connection::of(&live), &task_tools, deadline).await {
            Ok(tools) => tools,
            Err(e) => {
                close_live(live).await;
                return Err(e);
            }
        };
        Ok((
            Self {
                spec,
                live: tokio::sync::Mutex::new(Some(live)),
                last_start: Mutex::new(Instant::now()),
                tools_changed,
                restarts: std::sync::atomic::AtomicU64::new(0),
                task_tools,
                timers: call_timer::CallTimers::default(),
            },
            tools,
        ))
    }

    /// The flag the server's `notifications/tools/list_changed` sets.
    pub(crate) fn tools_changed(&self) -> &ToolsChanged {
        &self.tools_changed
    }

    /// Read the server's whole tool list again (after `list_changed`), all pages within its
    /// startup timeout and under the caps of [`listing`].
    ///
    /// # Errors
    /// [`UpstreamError`] when the server is not running, does not answer in time, or lists
    /// more than a cap allows.
    pub(crate) async fn list_tools(&self) -> Result<Vec<Tool>, UpstreamError> {
        // Only the handles are taken under the lock: a slow answer holds up no call or close.
        let connection = self.live.lock().await.as_ref().map(Connection::of);
        match connection {
            Some(connection) => {
                let deadline = tokio::time::Instant::now() + self.spec.startup_wait();
                list_all(&self.spec, &connection, &self.task_tools, deadline).await
            }
            None => Err(UpstreamError::Session {
                name: self.spec.name.clone(),
                step: "list the tools of",
                why: "it is not running".into(),
                tail: String::new(),
            }),
        }
    }

    /// The server's name.
    pub(crate) fn name(&self) -> &str {
        &self.spec.name
    }

    /// How often the server was restarted.
    pub(crate) fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::SeqCst)
    }

    /// How `tool` may be called as a task, as the server's `tools/list` said.
    pub(crate) fn task_support(&self, tool: &str) -> crate::mcp_tasks::TaskSupport {
        self.task_tools
            .lock()
            .ok()
            .and_then(|t| t.get(tool).copied())
            .unwrap_or_default()
    }

    /// Call `tool` with `args`, waiting at most `timeout` in all (a restart included).
    ///
    /// The call races its answer against the end of the connection: when the server exits,
    /// closes its stdout or breaks the transport, the call fails within [`CLOSE_GRACE`].
    /// When the timeout passes, the request is dropped, and the server is sent
    /// `notifications/cancelled` for it (or the request is withdrawn unwritten). A tool whose `taskSupport` is `"required"` is
    /// called as a task ([`tasks`]); dropping that call (a timeout, a cancelled run) sends
    /// `tasks/cancel` for its task. Any other call to a local server whose protocol has
    /// `initialize` is written beside rmcp ([`raw_call`]), with the same cancellation.
    /// `ticket`, when given, goes with the request (a task's `tools/call` too) and is marked
    /// when the request is handed to the server ([`ticket`]).
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: &serde_json::Map<String, serde_json::Value>,
        timeout: Duration,
        ticket: Option<&ticket::WriteTicket>,
    ) -> CallOutcome {
        let deadline = tokio::time::Instant::now() + timeout;
        let (peer, reason, raw, calls) = match tokio::time::timeout_at(deadline, self.peer()).await
        {
            Ok(Ok(live)) => live,
            Ok(Err(why)) => return CallOutcome::Broken(why),
            Err(_) => return CallOutcome::TimedOut,
        };
        let as_task = self.task_support(tool) == crate::mcp_tasks::TaskSupport::Required;
        let answer = async {
            if as_task {
                // The ticket goes with the task-augmented `tools/call`; polls and the result
                // are the call's own business once that reached the server.
                let ttl = deadline.saturating_duration_since(tokio::time::Instant::now());
                let call =
                    tasks::call_as_task(&raw, &self.spec.name, tool, args.clone(), ttl, ticket);
                return tokio::time::timeout_at(deadline, call)
                    .await
                    .unwrap_or(CallOutcome::TimedOut);
            }
            if let Some(calls) = &calls {
                let call = calls.call(tool, args, ticket);
                let bounded = self.timers.within(deadline, call).await;
                return bounded.unwrap_or(CallOutcome::TimedOut);
            }
            let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args.clone());
            let call = async {
                match ticket {
                    Some(ticket) => ticket::call_tool(&peer, params, ticket).await,
                    None => peer.call_tool(params).await,
                }
            };
            match self.timers.within(deadline, call).await {
                None => CallOutcome::TimedOut,
                Some(Ok(result)) => CallOutcome::Result(result),
                Some(Err(e)) => raw_call::outcome_of_error(e),
            }
        };
        let closed = async {
            reason.closed().await;
            tokio::time::sleep(CLOSE_GRACE).await;
        };
        let outcome = tokio::select! {
            biased;
            outcome = answer => outcome,
            () = closed => CallOutcome::Broken(String::new()),
        };
        match outcome {
            CallOutcome::Broken(_) => {
                let why = reason.explain(CLOSE_GRACE).await.unwrap_or_else(|| {
                    format!("the connection to the server {:?} failed", self.spec.name)
                });
                CallOutcome::Broken(format!("{why} during the call; a later call restarts it"))
            }
            other => other,
        }
    }

    /// The live session's peer, close signal, raw requests and raw calls, restarting a dead
    /// server first.
    async fn peer(&self) -> Result<Peered, String> {
        let mut live = self.live.lock().await;
        let dead = live
            .as_ref()
            .is_none_or(|l| l.session.is_transport_closed() || l.reason.get().is_some());
        if dead {
            let why = live
                .as_ref()
                .and_then(|l| l.reason.get())
                .unwrap_or_else(|| format!("the server {:?} is not running", self.spec.name));
            {
                let mut last = self.last_start.lock().map_err(|_| why.clone())?;
                if last.elapsed() < RESTART_COOLDOWN {
                    return Err(format!(
                        "{why}; it is restarted by a call made {} s or more after its last start",
                        RESTART_COOLDOWN.as_secs()
                    ));
                }
                *last = Instant::now();
            }
            tracing::warn!(server = %self.spec.name, "{why}; restarting it");
            if let Some(process) = live.take().and_then(|old| old.process) {
                process.kill().await;
            }
            let deadline = tokio::time::Instant::now() + self.spec.startup_wait();
            match connect(&self.spec, &self.tools_changed, &self.task_tools, deadline).await {
                Ok(l) => {
                    *live = Some(l);
                    self.restarts.fetch_add(1, Ordering::SeqCst);
                }
                Err(e) => {
                    tracing::warn!(server = %self.spec.name, "{e}");
                    return Err(format!(
                        "{why}, and restarting it failed: {}",
                        crate::bridge::refusal::cap(&restart_failure(&e), 200)
                    ));
                }
            }
        }
        live.as_ref()
            .map(|l| {
                let peer = l.session.peer().clone();
                (peer, l.reason.clone(), l.raw.clone(), l.calls.clone())
            })
            .ok_or_else(|| "the server is not running".to_owned())
    }

    /// Close the session and end the server process.
    pub(crate) async fn close(&self) {
        if let Some(live) = self.live.lock().await.take() {
            close_live(live).await;
        }
    }
}

/// Close a session and end its process.
async fn close_live(live: Live) {
    let Live {
        session, process, ..
    } = live;
    let _ = tokio::time::timeout(Duration::from_secs(2), session.cancel()).await;
    if let Some(process) = process {
        process.kill().await;
    }
}

/// A failed restart as the code may see it: the step and reason, never the stderr tail
/// (it goes to our log).
fn restart_failure(e: &UpstreamError) -> String {
    match e {
        // The OS error names host paths; the code gets only that the command did not run.
        UpstreamError::Spawn { .. } => "failed to start it: its command could not be run".into(),
        UpstreamError::Session { step, why, .. } => format!("failed to {step} it: {why}"),
    }
}

fn environment(spec: &ServerSpec) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = DEFAULT_ENV
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .filter(|(_, v)| !v.starts_with("()"))
        .collect();
    for (k, v) in &spec.env {
        env.retain(|(existing, _)| existing != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// Start (or reach) the server and complete the MCP handshake before `deadline`.
async fn connect(
    spec: &ServerSpec,
    tools_changed: &Arc<ToolsChanged>,
    task_tools: &TaskTools,
    deadline: tokio::time::Instant,
) -> Result<Live, UpstreamError> {
    if let Some(remote) = &spec.remote {
        let client = BridgeClient {
            server: spec.name.clone(),
            tools_changed: tools_changed.clone(),
        };
        return remote::connect(spec, remote, client, deadline)
            .await
            .map(|(session, raw)| {
                warn_unknown_protocol(spec, &session);
                Live {
                    session,
                    reason: CloseReason::default(),
                    process: None,
                    raw,
                    calls: None,
                }
            });
    }
    let env = environment(spec);
    let not_found = || UpstreamError::Spawn {
        name: spec.name.clone(),
        command: spec.command.clone(),
        why: format!(
            "{:?} was not found (not on PATH, or the path is wrong; a relative path is taken from the server's working directory, by default ours)",
            spec.command
        ),
    };
    // The server is started through `__tied` (it dies with serve), so a program that is not
    // there is found out here, as execvp would look for it.
    let cwd = match &spec.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/")),
    };
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    if tied::resolve(std::path::Path::new(&spec.command), path, &cwd).is_none() {
        return Err(not_found());
    }
    let mut command = tied::command(std::path::Path::new(&spec.command), &spec.args);
    command
        .env_clear()
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => not_found(),
        _ => UpstreamError::Spawn {
            name: spec.name.clone(),
            command: spec.command.clone(),
            why: e.to_string(),
        },
    })?;
    let tail = StderrTail::default();
    if let Some(stderr) = child.stderr.take() {
        tail.drain(spec.name.clone(), stderr);
    }
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(session_error(spec, "start", "no stdio pipes".into(), &tail));
    };
    let (transport, reason, raw, calls) =
        line_transport(&spec.name, stdout, stdin, task_tools.clone());
    let process = Process::watch(child, spec.name.clone(), reason.clone());
    let client = BridgeClient {
        server: spec.name.clone(),
        tools_changed: tools_changed.clone(),
    };
    // The handshake also fails soon after the server dies, whatever holds its stdout.
    let died = async {
        reason.closed().await;
        tokio::time::sleep(CLOSE_GRACE).await;
    };
    let startup = spec.startup_wait();
    let handshake = tokio::time::timeout_at(deadline, client.serve(transport));
    let outcome = tokio::select! {
        biased;
        outcome = handshake => match outcome {
            Ok(Ok(session)) => Ok(session),
            Ok(Err(e)) => {
                tracing::info!(server = %spec.name, "initialize failed: {e}");
                // A write that failed because the server exited races the read of its end:
                // how it ended says more than the failed write.
                let _ = tokio::time::timeout(CLOSE_GRACE, reason.closed()).await;
                Err(reason
                    .explain(CLOSE_GRACE)
                    .await
                    .unwrap_or_else(|| plain::stdio_initialize(&e)))
            }
            Err(_) => Err(format!("no answer within {} s", startup.as_secs_f64())),
        },
        () = died => Err(reason.get().unwrap_or_else(|| "the connection ended".to_owned())),
    };
    let session = match outcome {
        Ok(session) => {
            warn_unknown_protocol(spec, &session);
            session
        }
        Err(why) => {
            process.kill().await;
            // Let the stderr drain catch the last lines the server wrote.
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(session_error(spec, "initialize", why, &tail));
        }
    };
    // Under a protocol without `initialize`, rmcp puts the client's metadata in every
    // request: calls then go through rmcp.
    let has_initialize = session
        .peer_info()
        .is_some_and(|info| info.protocol_version.has_initialize());
    Ok(Live {
        session,
        reason,
        process: Some(process),
        raw,
        calls: has_initialize.then_some(calls),
    })
}

/// Warn when the server's `initialize` answer names a protocol version serve does not know
/// (the session goes on, rmcp speaking its own: lenient, but visible in serve's log).
fn warn_unknown_protocol(spec: &ServerSpec, session: &RunningService<RoleClient, BridgeClient>) {
    if let Some(info) = session.peer_info()
        && !ProtocolVersion::KNOWN_VERSIONS.contains(&info.protocol_version)
    {
        tracing::warn!(
            server = %spec.name,
            "it answered initialize with protocol version {:?}, which serve does not know; going on with it",
            crate::bridge::refusal::cap(&info.protocol_version.to_string(), 80)
        );
    }
}

fn session_error(
    spec: &ServerSpec,
    step: &'static str,
    why: String,
    tail: &StderrTail,
) -> UpstreamError {
    UpstreamError::Session {
        name: spec.name.clone(),
        step,
        why,
        tail: tail.render(),
    }
}
