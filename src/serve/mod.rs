//! The `run_python` MCP server (stdio transport).
//!
//! Exactly one tool, `run_python(code: string)`. Each call runs the code in a fresh sandbox
//! (at most [`crate::limits::MAX_CONCURRENT_RUNS`] at once; more calls wait their turn)
//! and returns the result object `{"stdout", "error", "truncated", "stopped"}` as JSON text
//! and as `structuredContent`; a run that raised or was stopped is a normal tool result with
//! `isError: true` (a JSON-RPC error is kept for malformed requests: an unknown tool name or
//! arguments without a string `code`).

pub mod description;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use self::description::describe;
use crate::bridge::Bridge;
use crate::run::{RunOptions, run_code};
use crate::sandbox::Backend;

/// `_meta` key of a run_python result that says which resource limits held in its sandbox.
pub const LIMITS_META_KEY: &str = "mcp-code-mode/limits";
/// `_meta` key of a run_python result that counts the calls sent to wrapped servers.
pub const CALLS_META_KEY: &str = "mcp-code-mode/calls";

/// The one tool's name.
pub const TOOL_NAME: &str = "run_python";

/// The run_python server, ready to serve over any rmcp transport.
#[derive(Clone)]
pub struct CodeModeServer {
    bridge: Arc<Bridge>,
    backend: Arc<dyn Backend>,
    options: RunOptions,
    tool: Tool,
    slots: Arc<tokio::sync::Semaphore>,
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
        ),
        as_object(input),
    )
    .with_raw_output_schema(as_object(output))
}

impl CodeModeServer {
    /// Build the server without starting it (the seed's `build_server`).
    pub fn new(bridge: Arc<Bridge>, backend: Arc<dyn Backend>, options: RunOptions) -> Self {
        let tool = run_python_tool(&bridge, &options);
        Self {
            bridge,
            backend,
            options,
            tool,
            slots: Arc::new(tokio::sync::Semaphore::new(
                crate::limits::MAX_CONCURRENT_RUNS,
            )),
        }
    }

    /// Serve MCP on this process's stdin/stdout until the client disconnects.
    ///
    /// # Errors
    /// The transport's or the handshake's error.
    pub async fn serve_stdio(self) -> anyhow::Result<()> {
        let service = self.serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        Ok(())
    }

    async fn run(&self, code: &str) -> CallToolResult {
        // The semaphore is never closed, so acquiring only waits.
        let _slot = self.slots.acquire().await;
        match run_code(&self.bridge, self.backend.as_ref(), code, &self.options).await {
            Ok(report) => {
                tracing::info!(limits = %report.limits, calls = report.calls, "run finished");
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
        _context: RequestContext<RoleServer>,
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
        Ok(CallToolResponse::Complete(self.run(code).await))
    }
}
