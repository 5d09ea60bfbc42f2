//! One wrapped MCP server: its process, its rmcp client session, its tool list and calls.
//!
//! The server runs on the host as an ordinary child process (it is not sandboxed; README
//! "What it does not protect"), with MCP's default environment (the Python SDK's
//! `get_default_environment` on POSIX: HOME, LOGNAME, PATH, SHELL, TERM, USER, skipping values
//! that start with `()`) plus the variables the user passed (`--env NAME`, or a config entry's
//! `env`, as written). Its stderr is always drained: lines go to our log (cut at 500
//! characters), and the last few are kept to explain a failed start.
//!
//! If the server exits, the call in flight fails at once with a clear message, and the next
//! call starts it again (once per [`RESTART_COOLDOWN`]); the private-data taint lives in the
//! bridge, so a restart never resets it.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ProtocolVersion, Tool,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::{ClientHandler, ServiceExt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, Command};

use super::transport::{CloseReason, line_transport};

/// Time allowed for a server to start and answer `initialize` and `tools/list`.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Least time between two restarts of a server that died.
pub const RESTART_COOLDOWN: Duration = Duration::from_secs(2);
/// Pages of `tools/list` read at most (a server that never stops paging is cut off).
pub const MAX_TOOL_PAGES: usize = 1000;
/// Stderr lines kept to explain a failed start.
const STDERR_TAIL_LINES: usize = 20;
/// Longest stderr line logged, in characters.
const MAX_STDERR_LINE_CHARS: usize = 500;

/// MCP's default environment variables, inherited when set (POSIX).
pub const DEFAULT_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// How to start one wrapped server.
#[derive(Debug, Clone, PartialEq)]
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
pub enum CallOutcome {
    /// The server answered.
    Result(CallToolResult),
    /// No answer within the timeout; `notifications/cancelled` was sent.
    TimedOut,
    /// The connection failed; the text is the bridge's own explanation (no host details).
    Broken(String),
    /// The server answered with a JSON-RPC error.
    Rejected(String),
}

#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        if let Ok(mut t) = self.0.lock() {
            if t.len() == STDERR_TAIL_LINES {
                t.pop_front();
            }
            t.push_back(line);
        }
    }

    fn render(&self) -> String {
        let lines: Vec<String> = self
            .0
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        if lines.is_empty() {
            String::new()
        } else {
            format!("\n  its stderr ended with:\n    {}", lines.join("\n    "))
        }
    }
}

/// Answers what a server may ask of us: ping, roots (none), and refuses sampling and
/// elicitation (not offered in our capabilities). Logs notifications, bounded.
#[derive(Clone)]
pub struct BridgeClient {
    server: String,
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
        tracing::warn!(server = %self.server, "the server says its tool list changed; the catalog stays as read at startup");
    }
}

struct Live {
    session: RunningService<RoleClient, BridgeClient>,
    reason: CloseReason,
    _child: Child,
}

/// One wrapped server and its (re)startable session.
pub struct Upstream {
    spec: ServerSpec,
    live: tokio::sync::Mutex<Option<Live>>,
    last_start: Mutex<Instant>,
}

impl Upstream {
    /// Start the server, complete the MCP handshake and read its whole tool list.
    ///
    /// # Errors
    /// [`UpstreamError`] naming the server, the step and the reason (plus its stderr tail).
    pub async fn start(spec: ServerSpec) -> Result<(Self, Vec<Tool>), UpstreamError> {
        let live = connect(&spec).await?;
        let tools = list_all(&spec, &live).await?;
        Ok((
            Self {
                spec,
                live: tokio::sync::Mutex::new(Some(live)),
                last_start: Mutex::new(Instant::now()),
            },
            tools,
        ))
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Call `tool` with `args`, waiting at most `timeout`.
    pub async fn call(
        &self,
        tool: &str,
        args: serde_json::Map<String, serde_json::Value>,
        timeout: Duration,
    ) -> CallOutcome {
        let peer = match self.peer().await {
            Ok(peer) => peer,
            Err(why) => return CallOutcome::Broken(why),
        };
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => CallOutcome::TimedOut,
            Ok(Ok(result)) => CallOutcome::Result(result),
            Ok(Err(rmcp::ServiceError::McpError(e))) => {
                CallOutcome::Rejected(e.message.to_string())
            }
            Ok(Err(_)) => {
                let reason = self.close_reason().await;
                CallOutcome::Broken(reason.unwrap_or_else(|| {
                    format!("the connection to the server {:?} failed", self.spec.name)
                }))
            }
        }
    }

    async fn close_reason(&self) -> Option<String> {
        let live = self.live.lock().await;
        live.as_ref().and_then(|l| l.reason.get())
    }

    async fn peer(&self) -> Result<rmcp::Peer<RoleClient>, String> {
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
                    return Err(format!("{why}; it will be restarted on a later call"));
                }
                *last = Instant::now();
            }
            tracing::warn!(server = %self.spec.name, "{why}; restarting it");
            *live = None;
            match connect(&self.spec).await {
                Ok(l) => *live = Some(l),
                Err(e) => return Err(super::refusal::cap(&e.to_string(), 300)),
            }
        }
        live.as_ref()
            .map(|l| l.session.peer().clone())
            .ok_or_else(|| "the server is not running".to_owned())
    }

    /// Close the session and end the server process.
    pub async fn close(&self) {
        if let Some(live) = self.live.lock().await.take() {
            let Live {
                session,
                mut _child,
                ..
            } = live;
            let _ = tokio::time::timeout(Duration::from_secs(2), session.cancel()).await;
            let _ = _child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(2), _child.wait()).await;
        }
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

async fn connect(spec: &ServerSpec) -> Result<Live, UpstreamError> {
    let mut command = Command::new(&spec.command);
    command
        .args(&spec.args)
        .env_clear()
        .envs(environment(spec))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    let mut child = command.spawn().map_err(|e| UpstreamError::Spawn {
        name: spec.name.clone(),
        command: spec.command.clone(),
        why: match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "{:?} was not found (not on PATH, or the path is wrong; relative paths are taken from the current directory)",
                spec.command
            ),
            _ => e.to_string(),
        },
    })?;
    let tail = StderrTail::default();
    if let Some(stderr) = child.stderr.take() {
        let tail = tail.clone();
        let name = spec.name.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                // Drain in bounded pieces: a line without a newline never grows past 64 KiB.
                match AsyncReadExt::take(&mut lines, 64 * 1024)
                    .read_until(b'\n', &mut buf)
                    .await
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&buf);
                        let line = super::refusal::cap(text.trim_end(), MAX_STDERR_LINE_CHARS);
                        tracing::info!(server = %name, "stderr: {line}");
                        tail.push(line);
                    }
                }
            }
        });
    }
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(session_error(spec, "start", "no stdio pipes".into(), &tail));
    };
    let (transport, reason) = line_transport(&spec.name, stdout, stdin);
    let client = BridgeClient {
        server: spec.name.clone(),
    };
    let session = match tokio::time::timeout(STARTUP_TIMEOUT, client.serve(transport)).await {
        Ok(Ok(session)) => session,
        Ok(Err(e)) => {
            let why = reason.get().unwrap_or_else(|| e.to_string());
            let _ = child.start_kill();
            tokio::time::sleep(Duration::from_millis(50)).await;
            return Err(session_error(spec, "initialize", why, &tail));
        }
        Err(_) => {
            let _ = child.start_kill();
            return Err(session_error(
                spec,
                "initialize",
                format!("no answer within {} s", STARTUP_TIMEOUT.as_secs()),
                &tail,
            ));
        }
    };
    Ok(Live {
        session,
        reason,
        _child: child,
    })
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

async fn list_all(spec: &ServerSpec, live: &Live) -> Result<Vec<Tool>, UpstreamError> {
    let peer = live.session.peer();
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    let mut seen = std::collections::HashSet::new();
    for _ in 0..MAX_TOOL_PAGES {
        let params = cursor
            .clone()
            .map(|c| rmcp::model::PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = tokio::time::timeout(STARTUP_TIMEOUT, peer.list_tools(params))
            .await
            .map_err(|_| UpstreamError::Session {
                name: spec.name.clone(),
                step: "list the tools of",
                why: "no answer in time".into(),
                tail: String::new(),
            })?
            .map_err(|e| UpstreamError::Session {
                name: spec.name.clone(),
                step: "list the tools of",
                why: live.reason.get().unwrap_or_else(|| e.to_string()),
                tail: String::new(),
            })?;
        tools.extend(page.tools);
        match page.next_cursor {
            Some(next) if !next.is_empty() && seen.insert(next.clone()) => cursor = Some(next),
            _ => return Ok(tools),
        }
    }
    tracing::warn!(server = %spec.name, "stopped reading tools/list after {MAX_TOOL_PAGES} pages");
    Ok(tools)
}
