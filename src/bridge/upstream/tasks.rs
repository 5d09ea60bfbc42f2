//! Calls to wrapped tools that must be called as tasks (MCP 2025-11-25, basic/utilities/
//! tasks): a tool listed with `execution.taskSupport: "required"` refuses a plain
//! `tools/call` (-32601), so the bridge calls it as a task. `"optional"` and `"forbidden"`
//! tools get plain calls.
//!
//! A task call: `tools/call` with `params.task` (ttl = the call's timeout) answers a task;
//! `tasks/get` is polled at the server's `pollInterval` (kept within 50 ms .. 5 s, 500 ms
//! when none or a malformed one is given: [`crate::mcp_tasks`] reads it leniently) until the task is terminal; then `tasks/result` gives the
//! `tools/call` result, read and repaired like a plain call's. A task the server cancelled
//! or failed, or one that asks for input (the bridge has none to give), fails the call with
//! a message that says so. When the call ends before its task does (its timeout, a cancel
//! of the run, the run's deadline: the call's future is dropped), `tasks/cancel` is sent for
//! it.
//!
//! rmcp 3.11 cannot send these (its tasks are a later draft's, [`crate::mcp_tasks`]), so
//! they go through [`RawRequests`]: JSON-RPC requests with ids of their own
//! (`mcp-code-mode-task-N`, never one rmcp uses). To a local server they are written on its
//! stdin, and the transport's reader hands their answers back here instead of to rmcp; to a
//! remote server each is a POST on rmcp's session whose response is read here
//! (`raw_http.rs`).
//!
//! rmcp's `Tool` drops `execution`, so the task support of a tool is read from the raw
//! `tools/list` answer: a local server's, as the transport's reader sees it; a remote
//! server's, by reading the list once more through [`RawRequests`] after rmcp read it
//! ([`discover_task_support`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use rmcp::model::{CallToolResult, RequestId};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::CallOutcome;
use super::raw_http::RawHttp;
use super::repair::{Pending, repair_result};
use super::ticket::WriteTicket;
use super::write_queue::Line;
use crate::mcp_tasks::{self, CreateTaskResult, Task, TaskStatus, TaskSupport};

/// Prefix of the ids of [`RawRequests`].
pub(super) const RAW_ID_PREFIX: &str = "mcp-code-mode-task-";
/// Poll interval used when the server suggests none.
pub(super) const DEFAULT_POLL: Duration = Duration::from_millis(500);
/// Bounds put on the server's suggested poll interval.
pub(super) const POLL_BOUNDS: (Duration, Duration) =
    (Duration::from_millis(50), Duration::from_secs(5));
/// Time a `tasks/cancel` sent for an abandoned task may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// The task support of a server's tools, by tool name, as its `tools/list` said; tools
/// not named are forbidden (plain calls). Kept across restarts of the server.
pub(super) type TaskTools = Arc<Mutex<HashMap<String, TaskSupport>>>;

/// Record the task support of the tools of one `tools/list` answer (`result`).
pub(super) fn record_task_support(tools: &TaskTools, result: &Value) {
    let Some(list) = result.get("tools").and_then(Value::as_array) else {
        return;
    };
    if let Ok(mut map) = tools.lock() {
        for tool in list {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                match TaskSupport::of_tool(tool) {
                    TaskSupport::Forbidden => map.remove(name),
                    support => map.insert(name.to_owned(), support),
                };
            }
        }
    }
}

/// Writes one whole line on the server's stdin.
pub(super) trait LineWriter: Send + Sync {
    /// Write `line` (a request of ours, its `\n` included) as `kind` says: a
    /// [`Line::Call`] marks its ticket when the line is taken to be written, and is skipped
    /// (resolving `Ok`) when its call gave it up first.
    fn write_line(&self, line: Vec<u8>, kind: Line) -> BoxFuture<'static, std::io::Result<()>>;
}

/// What a raw request came to.
#[derive(Debug)]
pub(super) enum RawAnswer {
    /// The `result`.
    Result(Value),
    /// The JSON-RPC `error`'s message.
    Error(String),
}

/// JSON-RPC requests sent beside rmcp's on one connection (see the module docs).
#[derive(Clone)]
pub(super) struct RawRequests(Arc<RawInner>);

struct RawInner {
    channel: Channel,
    waiting: Mutex<HashMap<String, oneshot::Sender<RawAnswer>>>,
    next: AtomicU64,
}

/// How requests reach the server and answers come back.
enum Channel {
    /// Lines on a local server's stdin; answers are handed over by the reader
    /// ([`RawRequests::deliver`]).
    Lines(Box<dyn LineWriter>),
    /// POSTs on a remote server's session, answered in their responses.
    Http(RawHttp),
}

impl RawRequests {
    pub(super) fn new(writer: impl LineWriter + 'static) -> Self {
        Self::with(Channel::Lines(Box::new(writer)))
    }

    /// Requests sent as POSTs on a remote server's session.
    pub(super) fn over_http(http: RawHttp) -> Self {
        Self::with(Channel::Http(http))
    }

    fn with(channel: Channel) -> Self {
        Self(Arc::new(RawInner {
            channel,
            waiting: Mutex::default(),
            next: AtomicU64::new(1),
        }))
    }

    /// Take `message` if it answers one of our requests (true), else leave it for rmcp.
    pub(super) fn deliver(&self, message: &Value) -> bool {
        let Some(id) = message
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| id.starts_with(RAW_ID_PREFIX))
        else {
            return false;
        };
        if message.get("method").is_some() {
            return false;
        }
        let waiter = self.0.waiting.lock().ok().and_then(|mut w| w.remove(id));
        if let Some(waiter) = waiter {
            let _ = waiter.send(answer_of(message));
        }
        // An answer to a request given up already is ours all the same.
        true
    }

    /// The connection ended: every request waiting gets `None`.
    pub(super) fn close(&self) {
        if let Ok(mut waiting) = self.0.waiting.lock() {
            waiting.clear();
        }
    }

    /// Send `method` with `params` and wait for its answer; `None` when the connection
    /// ended first.
    pub(super) async fn request(&self, method: &str, params: Value) -> Option<RawAnswer> {
        self.send(method, params, None).await
    }

    /// [`Self::request`] for a call's request: `ticket` is marked when the request is
    /// handed to the server (its line taken to be written, its POST started); `None`, and
    /// nothing sent, when the call gave it up before that ([`WriteTicket::settle`]).
    async fn send(
        &self,
        method: &str,
        params: Value,
        ticket: Option<&WriteTicket>,
    ) -> Option<RawAnswer> {
        let id = format!(
            "{RAW_ID_PREFIX}{}",
            self.0.next.fetch_add(1, Ordering::SeqCst)
        );
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let writer = match &self.0.channel {
            Channel::Lines(writer) => writer,
            Channel::Http(_) if ticket.is_some_and(|t| !t.mark_written()) => return None,
            // Dropping this future drops the POST, which ends its request.
            Channel::Http(http) => return Some(answer_of(&http.request(&id, &message).await)),
        };
        let (tx, rx) = oneshot::channel();
        self.0.waiting.lock().ok()?.insert(id.clone(), tx);
        // Dropped (the call was given up): no answer is awaited any more.
        let _forget = Forget(self, &id);
        let mut line = serde_json::to_vec(&message).ok()?;
        line.push(b'\n');
        let kind = match ticket {
            Some(ticket) => Line::Call(RequestId::String(id.as_str().into()), ticket.clone()),
            None => Line::Request(None),
        };
        writer.write_line(line, kind).await.ok()?;
        if ticket.is_some_and(WriteTicket::is_withdrawn) {
            // Skipped by the writer: it never reached the server, no answer comes.
            return None;
        }
        rx.await.ok()
    }
}

/// What a JSON-RPC response came to.
fn answer_of(message: &Value) -> RawAnswer {
    match (message.get("result"), message.get("error")) {
        (Some(result), _) => RawAnswer::Result(result.clone()),
        (None, error) => RawAnswer::Error(crate::bridge::refusal::cap(
            error
                .and_then(|e| e.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("the server answered with an error"),
            500,
        )),
    }
}

/// Read the task support of a remote server's tools: its whole `tools/list` (every page, at
/// most [`super::MAX_TOOL_PAGES`] and [`super::listing::MAX_LISTED_TOOLS`] tools) through
/// `raw`, each page recorded in `tools`; the caller bounds its time. A failure leaves the
/// tools it did not reach as plain calls, and is logged.
pub(super) async fn discover_task_support(raw: &RawRequests, tools: &TaskTools, server: &str) {
    let mut cursor: Option<String> = None;
    let mut listed = 0usize;
    for _ in 0..super::MAX_TOOL_PAGES {
        let params = cursor
            .as_ref()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let page = match raw.request("tools/list", params).await {
            Some(RawAnswer::Result(page)) => page,
            Some(RawAnswer::Error(why)) => {
                tracing::warn!(server = %server, "cannot read which tools require tasks: {why}");
                return;
            }
            None => return,
        };
        listed += page
            .get("tools")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        if listed > super::listing::MAX_LISTED_TOOLS {
            tracing::warn!(server = %server, "stopped reading which tools require tasks: more than {} tools", super::listing::MAX_LISTED_TOOLS);
            return;
        }
        record_task_support(tools, &page);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) if !next.is_empty() && cursor.as_deref() != Some(next) => {
                cursor = Some(next.to_owned());
            }
            _ => return,
        }
    }
}

struct Forget<'a>(&'a RawRequests, &'a str);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        if let Ok(mut waiting) = self.0.0.waiting.lock() {
            waiting.remove(self.1);
        }
    }
}

/// Sends `tasks/cancel` for a task still armed when dropped.
struct CancelOnDrop {
    raw: RawRequests,
    server: String,
    task_id: Option<String>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (raw, server) = (self.raw.clone(), self.server.clone());
        runtime.spawn(async move {
            let params = json!({"taskId": task_id});
            let answer =
                tokio::time::timeout(CANCEL_TIMEOUT, raw.request(mcp_tasks::CANCEL, params)).await;
            let outcome = match answer {
                Ok(Some(RawAnswer::Result(_))) => "done".to_owned(),
                Ok(Some(RawAnswer::Error(e))) => format!("refused: {e}"),
                Ok(None) => "the connection ended".to_owned(),
                Err(_) => "no answer in time".to_owned(),
            };
            tracing::info!(server = %server, task = %task_id, "tasks/cancel for a task the run gave up on: {outcome}");
        });
    }
}

/// Send the task-augmented `tools/call` from a task of its own: when the call is given up
/// before the server answered, the task the answer names is cancelled all the same. The
/// answer comes with the armed guard of the task it names, so an answer that reached the
/// channel but was never read (the call dropped between the two) cancels its task too.
async fn create(
    raw: &RawRequests,
    server: &str,
    params: Value,
    ticket: Option<&WriteTicket>,
) -> Option<(RawAnswer, Option<CancelOnDrop>)> {
    let (tx, rx) = oneshot::channel();
    let (raw, server, ticket) = (raw.clone(), server.to_owned(), ticket.cloned());
    tokio::spawn(async move {
        let answer = raw.send("tools/call", params, ticket.as_ref()).await;
        // Any answer naming a task id gets a guard, a task the call cannot read too: a
        // call that fails on it still cancels the task the server made.
        let guard = match &answer {
            Some(RawAnswer::Result(value)) => value
                .pointer("/task/taskId")
                .and_then(Value::as_str)
                .map(|task_id| CancelOnDrop {
                    raw: raw.clone(),
                    server,
                    task_id: Some(task_id.to_owned()),
                }),
            _ => None,
        };
        // A call already given up drops what it would have read, and with it the guard.
        let _ = tx.send(answer.map(|answer| (answer, guard)));
    });
    rx.await.ok().flatten()
}

/// Call `tool` of `server` as a task through `raw`, asking the server to keep it for
/// `ttl`. The caller bounds the time; dropping the future cancels the task. `ticket` goes
/// with the task-augmented `tools/call` (the one request that makes the call `sent`).
pub(super) async fn call_as_task(
    raw: &RawRequests,
    server: &str,
    tool: &str,
    args: serde_json::Map<String, Value>,
    ttl: Duration,
    ticket: Option<&WriteTicket>,
) -> CallOutcome {
    let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1);
    let params = json!({"name": tool, "arguments": args, "task": {"ttl": ttl_ms}});
    let (created, guard) = match create(raw, server, params, ticket).await {
        None => return CallOutcome::Broken(String::new()),
        Some((RawAnswer::Error(message), _)) => return CallOutcome::Rejected(message),
        Some((RawAnswer::Result(value), guard)) => (value, guard),
    };
    let (Ok(CreateTaskResult { mut task }), Some(mut guard)) =
        (crate::exact_json::typed(created), guard)
    else {
        // A guard, if the answer named a task id, cancels that task.
        return CallOutcome::Rejected(format!(
            "the tool {tool:?} must be called as a task, and the server's answer to the task-augmented call is not a task"
        ));
    };
    let task_id = task.task_id.clone();
    while !task.status.is_terminal() {
        if task.status == TaskStatus::InputRequired {
            // The guard cancels the task.
            return CallOutcome::Rejected(format!(
                "the tool {tool:?} asked for input (task status input_required), which the bridge cannot give; its task was cancelled"
            ));
        }
        let poll = task
            .poll_interval
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(POLL_BOUNDS.0, POLL_BOUNDS.1);
        tokio::time::sleep(poll).await;
        task = match raw
            .request(mcp_tasks::GET, json!({"taskId": task_id}))
            .await
        {
            None => return CallOutcome::Broken(String::new()),
            Some(RawAnswer::Error(message)) => return CallOutcome::Rejected(message),
            Some(RawAnswer::Result(value)) => match crate::exact_json::typed::<Task>(value) {
                Ok(task) if task.task_id == task_id => task,
                _ => {
                    return CallOutcome::Rejected(format!(
                        "the server's answer to tasks/get for the tool {tool:?} is not its task"
                    ));
                }
            },
        };
    }
    guard.task_id = None;
    if task.status == TaskStatus::Cancelled {
        let why = task
            .status_message
            .map(|m| format!(": {}", crate::bridge::refusal::cap(&m, 300)))
            .unwrap_or_default();
        return CallOutcome::Rejected(format!("the server cancelled the task{why}"));
    }
    match raw
        .request(mcp_tasks::RESULT, json!({"taskId": task_id}))
        .await
    {
        None => CallOutcome::Broken(String::new()),
        Some(RawAnswer::Error(message)) => CallOutcome::Rejected(message),
        Some(RawAnswer::Result(mut value)) => {
            repair_result(Pending::CallTool, &mut value);
            match crate::exact_json::typed::<CallToolResult>(value) {
                Ok(result) => CallOutcome::Result(result),
                Err(e) => CallOutcome::NotAToolResult(crate::bridge::refusal::cap(
                    &format!("the server's tasks/result answer is not a tool result: {e}"),
                    300,
                )),
            }
        }
    }
}
