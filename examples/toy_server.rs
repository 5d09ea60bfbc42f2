//! A small MCP server over stdio, for the tests and the README's examples.
//!
//! Tools: `add` (`a`, `b` integers → structured `{"sum": a+b}`), `echo` (`text` → the text),
//! `slow` (`seconds` → sleeps, then "done"), `huge` (`size` → "x" × size), `fail` (an
//! `isError` result "boom"), `long_doc` (a 5,000-character description), `getenv` (`name` →
//! this process's variable or ""), `calls` (calls received so far, this one included), and
//! `secret` (returns "s3cr3t", for private-data tests) and `exit` (ends the process).
//!
//! Options (for tests): `--many N` adds N extra tools `tool_0…` with long descriptions;
//! `--hostile` adds tools with awkward names and schemas; `--name-prefix P` prefixes every
//! tool name with P; `--only a,b` lists only those tools; `--journal FILE` appends one line
//! per event to FILE, so a test can see what reached the server: `call <tool> <arguments
//! JSON>` when a call arrives, `done <tool>` when it was answered, `cancelled <request id>`
//! for each `notifications/cancelled`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone)]
struct Toy {
    tools: Vec<Tool>,
    calls: Arc<AtomicU64>,
    journal: Option<Arc<std::path::PathBuf>>,
}

impl Toy {
    /// Append `line` to the journal, if there is one, in one write: calls served at once
    /// note from several threads, and `writeln!` writes the text and its newline apart, so
    /// two lines could interleave into one (`call slow {..}call slow {..}`), losing a call.
    fn note(&self, line: &str) {
        use std::io::Write;
        if let Some(path) = &self.journal
            && let Ok(mut file) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path.as_path())
        {
            let _ = file.write_all(format!("{line}\n").as_bytes());
        }
    }
}

fn object(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::default(),
    }
}

fn tool(name: &str, description: &str, schema: Value) -> Tool {
    Tool::new(name.to_owned(), description.to_owned(), object(schema))
}

fn base_tools() -> Vec<Tool> {
    vec![
        tool(
            "add",
            "Add two integers.",
            json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}),
        ),
        tool(
            "echo",
            "Echo the text back.",
            json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        ),
        tool(
            "slow",
            "Sleep for some seconds, then answer done.",
            json!({"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]}),
        ),
        tool(
            "huge",
            "Return a string of `size` x characters.",
            json!({"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}),
        ),
        tool("fail", "Always fails with boom.", json!({"type": "object"})),
        tool(
            "long_doc",
            &"A very long description. ".repeat(200),
            json!({"type": "object"}),
        ),
        tool(
            "getenv",
            "Read an environment variable of the server process.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        tool(
            "calls",
            "How many calls this server has received.",
            json!({"type": "object"}),
        ),
        tool("secret", "Return a secret.", json!({"type": "object"})),
        tool(
            "exit",
            "End this server process at once.",
            json!({"type": "object"}),
        ),
    ]
}

fn hostile_tools() -> Vec<Tool> {
    let mut deep = json!({"type": "string"});
    for _ in 0..200 {
        deep = json!({"type": "object", "properties": {"x": deep}});
    }
    let mut nested = json!({"type": "string"});
    for _ in 0..12 {
        nested = json!({"type": "array", "items": nested});
    }
    vec![
        tool("too_deep", "A schema too deep to check.", deep),
        tool(
            "get-weather",
            "A name with a dash.",
            json!({"type": "object", "properties": {"from": {"type": "string"}, "cik-A": {"type": "integer"}, "1st": {"type": "boolean"}, "n".repeat(100): {"type": "string"}, "nested": nested}}),
        ),
        tool("print", "Shadows a builtin.", json!({"type": "object"})),
        tool(
            "refs",
            "Uses $defs.",
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "definitions": {"p": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}, "properties": {"point": {"$ref": "#/definitions/p"}}, "required": ["point"]}),
        ),
    ]
}

impl ServerHandler for Toy {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn on_cancelled(
        &self,
        notification: rmcp::model::CancelledNotificationParam,
        _context: rmcp::service::NotificationContext<RoleServer>,
    ) {
        let id = notification
            .request_id
            .map_or_else(|| "?".to_owned(), |id| id.to_string());
        self.note(&format!("cancelled {id}"));
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let n = self.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let args = request.arguments.unwrap_or_default();
        let int = |k: &str| args.get(k).and_then(Value::as_i64).unwrap_or(0);
        let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let name = request.name.to_string();
        self.note(&format!("call {name} {}", Value::Object(args.clone())));
        let base = name.rsplit("__").next().unwrap_or(&name).to_owned();
        let result = match base.as_str() {
            "add" => {
                let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
                    "{}",
                    int("a") + int("b")
                ))]);
                r.structured_content = Some(json!({"sum": int("a") + int("b")}));
                r
            }
            "echo" => CallToolResult::success(vec![ContentBlock::text(text("text"))]),
            "slow" => {
                let secs = args.get("seconds").and_then(Value::as_f64).unwrap_or(1.0);
                tokio::time::sleep(Duration::from_secs_f64(secs.clamp(0.0, 600.0))).await;
                CallToolResult::success(vec![ContentBlock::text("done")])
            }
            "huge" => CallToolResult::success(vec![ContentBlock::text(
                "x".repeat(int("size").clamp(0, 50_000_000) as usize),
            )]),
            "fail" => CallToolResult::error(vec![ContentBlock::text("boom")]),
            "getenv" => CallToolResult::success(vec![ContentBlock::text(
                std::env::var(text("name")).unwrap_or_default(),
            )]),
            "calls" => CallToolResult::success(vec![ContentBlock::text(n.to_string())]),
            "secret" => CallToolResult::success(vec![ContentBlock::text("s3cr3t")]),
            "exit" => std::process::exit(3),
            _ => CallToolResult::success(vec![ContentBlock::text(format!("ok {name}"))]),
        };
        self.note(&format!("done {name}"));
        Ok(CallToolResponse::Complete(result))
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut tools = base_tools();
    let mut prefix = String::new();
    let mut only: Option<Vec<String>> = None;
    let mut journal = None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--many" => {
                let n: usize = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(100);
                for k in 0..n {
                    tools.push(tool(
                        &format!("tool_{k}"),
                        &format!("Extra tool number {k}. {}", "Padding text. ".repeat(40)),
                        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
                    ));
                }
                i += 1;
            }
            "--hostile" => tools.extend(hostile_tools()),
            "--name-prefix" => {
                prefix = args.get(i + 1).cloned().unwrap_or_default();
                i += 1;
            }
            "--only" => {
                only = args
                    .get(i + 1)
                    .map(|s| s.split(',').map(str::to_owned).collect());
                i += 1;
            }
            "--journal" => {
                journal = args.get(i + 1).map(|p| Arc::new(p.into()));
                i += 1;
            }
            other => anyhow::bail!("unknown option {other}"),
        }
        i += 1;
    }
    if let Some(only) = only {
        tools.retain(|t| only.iter().any(|o| o == t.name.as_ref()));
    }
    for t in &mut tools {
        t.name = format!("{prefix}{}", t.name).into();
    }
    let toy = Toy {
        tools,
        calls: Arc::default(),
        journal,
    };
    let service = toy.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
