//! The `run_python` MCP server (stdio transport).
//!
//! Exactly one tool, `run_python(code: string)`. Each call runs the code in a fresh sandbox
//! (at most [`crate::limits::MAX_CONCURRENT_RUNS`] at once; more calls wait their turn)
//! and returns the result object `{"stdout", "error", "truncated", "stopped"}` as JSON text
//! and as `structuredContent`; a run that raised or was stopped is a normal tool result with
//! `isError: true` (a JSON-RPC error is kept for malformed requests: an unknown tool name or
//! arguments without a string `code`).

pub mod description;
pub mod progress;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::description::describe;
use crate::bridge::Bridge;
use crate::run::pool::Pool;
use crate::run::{CANCELLED, RunOptions, Steering};
use crate::sandbox::Backend;
use progress::ProgressReporter;

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
    pool: Arc<Pool>,
    options: RunOptions,
    tool: Tool,
    slots: Arc<tokio::sync::Semaphore>,
    /// Cancelled when the client goes away (stdin reaches its end): every run is cancelled.
    disconnected: CancellationToken,
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
            bridge.catalog(),
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
        Self {
            pool,
            options,
            tool,
            slots: Arc::new(tokio::sync::Semaphore::new(
                crate::limits::MAX_CONCURRENT_RUNS,
            )),
            disconnected: CancellationToken::new(),
        }
    }

    /// Serve MCP on this process's stdin/stdout until the client disconnects.
    ///
    /// # Errors
    /// The transport's or the handshake's error.
    ///
    /// When stdin reaches its end, every run (queued or running) is cancelled at once, so
    /// the service ends without waiting for them (rmcp would wait up to 5 s).
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        let (stdin, stdout) = rmcp::transport::stdio_pipes();
        let stdin = StdinWatch::new(stdin, self.disconnected.clone());
        let disconnected = self.disconnected.clone();
        let service = self.serve((stdin, stdout)).await?;
        service.waiting().await?;
        disconnected.cancel();
        Ok(())
    }

    /// Run `code` once a slot is free, steered by `steering`.
    async fn run(&self, code: &str, steering: &Steering) -> CallToolResult {
        // The semaphore is never closed, so acquiring only waits; a run cancelled while it
        // waits never starts.
        let _slot = tokio::select! {
            biased;
            () = steering.cancel.cancelled() => {
                tracing::info!("a queued run was cancelled before it started");
                return cancelled_result();
            }
            slot = self.slots.acquire() => slot,
        };
        match self.pool.run_steered(code, &self.options, steering).await {
            Ok(report) => {
                tracing::info!(
                    limits = %report.limits,
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
                meta.insert(LIMITS_META_KEY.into(), Value::String(report.limits));
                meta.insert(CALLS_META_KEY.into(), Value::from(report.calls));
                meta.insert(POOLED_META_KEY.into(), Value::Bool(report.pooled));
                result.meta = Some(rmcp::model::MetaObject(meta));
                result
            }
            Err(e) => {
                tracing::error!("{e}");
                CallToolResult::error(vec![ContentBlock::text(format!(
                    "{e}. Run `mcp-code-mode doctor` to see what this host lacks."
                ))])
            }
        }
    }
}

/// The result of a run cancelled before it started (the client never reads it: rmcp drops
/// the response to a cancelled request).
fn cancelled_result() -> CallToolResult {
    let result = crate::run::RunResult {
        stdout: String::new(),
        error: Some(CANCELLED.into()),
        truncated: false,
        stopped: true,
    };
    let mut out = CallToolResult::error(vec![ContentBlock::text(result.to_json())]);
    out.structured_content = serde_json::to_value(&result).ok();
    out
}

impl ServerHandler for CodeModeServer {
    fn get_info(&self) -> ServerConfig {
        let mut config = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        config.server_info = Implementation::new("mcp-code-mode", env!("CARGO_PKG_VERSION"));
        config.instructions = Some(
            "Call run_python with Python code that awaits the wrapped tools; see its description for the tools and limits.".into(),
        );
        config
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(vec![self.tool.clone()]))
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
        let code = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("code"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                McpError::invalid_params("run_python needs a string argument \"code\"", None)
            })?;
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
        let steering = Steering {
            cancel: cancel.clone(),
            events: progress.as_ref().map(ProgressReporter::events),
        };
        let result = self.run(code, &steering).await;
        watch.abort();
        if let Some(progress) = progress {
            progress.finish().await;
        }
        if let Some(at) = cancelled_at.get() {
            tracing::info!(
                "run_python request {} was cancelled; its slot was free {} ms after the cancel",
                context.id,
                at.elapsed().as_millis()
            );
        }
        Ok(CallToolResponse::Complete(result))
    }
}

/// The client's end of the conversation: reads pass through, and the end of input (or a
/// read error) cancels `disconnected`.
struct StdinWatch<R> {
    inner: R,
    disconnected: CancellationToken,
}

impl<R> StdinWatch<R> {
    fn new(inner: R, disconnected: CancellationToken) -> Self {
        Self {
            inner,
            disconnected,
        }
    }
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for StdinWatch<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining() > 0;
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        match &polled {
            std::task::Poll::Ready(Ok(())) if asked && buf.filled().len() == before => {
                tracing::info!("the client closed its input; cancelling every run");
                self.disconnected.cancel();
            }
            std::task::Poll::Ready(Err(_)) => self.disconnected.cancel(),
            _ => {}
        }
        polled
    }
}
