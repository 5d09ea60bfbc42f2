//! run_python as a task (MCP 2025-11-25, basic/utilities/tasks): a client may call it with
//! `params.task` and then poll, fetch and cancel it, instead of holding one request open
//! for the whole run.
//!
//! The wire shapes are [`crate::mcp_tasks`] (rmcp 3.11 has only a later draft's, see there);
//! [`super::stdio`] and, over Streamable HTTP, [`super::http::tasks`] route the messages
//! here before rmcp reads them. What a client sees:
//! - run_python is listed with `execution.taskSupport: "optional"`, and the server's
//!   capabilities carry `tasks` (list, cancel, `requests.tools.call`);
//! - `tools/call` with `task` answers at once with the task (status `working`, a
//!   `pollInterval` of [`POLL_INTERVAL_MS`], the ttl asked for, at most [`MAX_TTL_MS`],
//!   [`DEFAULT_TTL_MS`] when none is asked); the run waits for a slot like any other;
//! - `tasks/get` answers the task; `tasks/result` waits until it is terminal and answers the
//!   run's `tools/call` result (the same object a plain call gets, `isError` for a run that
//!   raised or was stopped, which is still status `completed`), its `_meta` naming the task;
//!   as for a plain call, `resultType` (a field protocol 2026-07-28 added) is sent only to a
//!   client that speaks 2026-07-28 or later;
//! - `tasks/cancel` kills the run as a `notifications/cancelled` of a plain call does (a
//!   queued run never starts, a running sandbox is killed, its calls in flight are cancelled
//!   upstream) and answers the task in status `cancelled`; `tasks/result` of a cancelled
//!   task is refused (-32602), as is `tasks/cancel` of a terminal task and any unknown id;
//! - `tasks/list` answers every task kept, oldest first, in one page (no `nextCursor`), so
//!   any `cursor` a client sends is one this server never gave and is refused (-32602), as
//!   the specification's "Protocol Errors" asks.
//!
//! Limits: at most [`MAX_TASKS`] tasks are kept; a terminal task is forgotten once its ttl
//! has passed since its creation, and a new task beyond the limit first evicts the oldest
//! terminal one, else is refused (-32603). When the client disconnects, every task's run is
//! cancelled with the others.
//!
//! Notifications, once the client has sent `notifications/initialized`:
//! - `notifications/progress` under the task-augmented call's own `progressToken` (its
//!   `_meta`), as a plain call's run sends them ([`super::progress`]): the token stays valid
//!   for the task's whole life;
//! - `notifications/tasks/status` (params: the task) when the task becomes terminal
//!   (completed, or cancelled), and when a call that needs approval turns it
//!   `input_required` and its answer turns it `working` again ([`super::task_approval`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResult, CustomNotification, NumberOrString, ProgressToken, ProtocolVersion,
    ServerNotification, ServerResult,
};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::progress::ProgressSink;
use super::task_approval::TaskApprover;
use super::{CodeModeServer, TOOL_NAME};
use crate::governance::approval::Approver;
use crate::mcp_tasks::{
    self, CreateTaskResult, RELATED_TASK_META_KEY, Task, TaskIdParams, TaskMetadata, TaskStatus,
};

/// Tasks kept at most (working and terminal).
pub(super) const MAX_TASKS: usize = 64;
/// Retention of a task whose creator asked for none, in milliseconds (10 minutes).
pub(super) const DEFAULT_TTL_MS: u64 = 600_000;
/// Longest retention granted, in milliseconds (1 hour).
pub(super) const MAX_TTL_MS: u64 = 3_600_000;
/// Suggested time between two `tasks/get`, in milliseconds.
pub(super) const POLL_INTERVAL_MS: u64 = 500;

/// JSON-RPC "Invalid params".
const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC "Internal error".
const INTERNAL_ERROR: i64 = -32603;

struct Entry {
    task: Task,
    created: Instant,
    cancel: CancellationToken,
    /// The run's `tools/call` result once it is completed.
    result: Option<CallToolResult>,
    /// Becomes true when the task is terminal.
    terminal: watch::Sender<bool>,
}

/// The tasks of one client connection (stdio) or session (Streamable HTTP).
#[derive(Clone)]
pub(super) struct Tasks {
    server: CodeModeServer,
    entries: Arc<Mutex<Vec<Entry>>>,
    ids: Arc<std::sync::atomic::AtomicU64>,
}

/// Whether `message` (a JSON-RPC message from the client) is one [`Tasks::handle`] answers:
/// a task method, or a `tools/call` carrying `task`, with an id rmcp's ids can hold (a
/// string or an i64; others are refused by [`super::unreadable::invalid`]).
pub(super) fn is_task_message(message: &Value) -> bool {
    // An id rmcp could not hold (`1e20`, `[1]`) is refused as rmcp's requests are.
    let Some(id) = message.get("id") else {
        return false;
    };
    if NumberOrString::deserialize(id).is_err() {
        return false;
    }
    match message.get("method").and_then(Value::as_str) {
        Some(mcp_tasks::GET | mcp_tasks::RESULT | mcp_tasks::LIST | mcp_tasks::CANCEL) => true,
        Some("tools/call") => message.pointer("/params/task").is_some(),
        _ => false,
    }
}

impl Tasks {
    /// Tasks running on `server` (a clone that does not keep an HTTP session alive is
    /// kept, so the session's end cancels its tasks).
    pub(super) fn new(server: &CodeModeServer) -> Self {
        Self {
            server: server.detached(),
            entries: Arc::default(),
            ids: Arc::default(),
        }
    }

    /// Whether [`Self::handle`] takes `message` (one for which [`is_task_message`] holds):
    /// all but a `tasks/get` or `tasks/cancel` of a task id not held here from a client that
    /// declared the SEP-2663 extension (or has not initialized: 2026-07-28 has no
    /// `initialize`), which may be one of the tasks rmcp keeps ([`super::sep_tasks`]) and
    /// goes on to rmcp.
    pub(super) fn claims(&self, message: &Value) -> bool {
        let method = message.get("method").and_then(Value::as_str);
        if !matches!(method, Some(mcp_tasks::GET | mcp_tasks::CANCEL)) {
            return true;
        }
        let Some(task_id) = message.pointer("/params/taskId").and_then(Value::as_str) else {
            return true;
        };
        let known = self.lock().iter().any(|e| e.task.task_id == task_id);
        // A client that initialized without declaring the extension gets this layer's
        // answer (-32602 for an unknown id), as 2025-11-25 says.
        let extension_client = self.server.peer().is_none_or(|peer| {
            peer.peer_info()
                .is_some_and(|info| info.capabilities.supports_tasks())
        });
        known || !extension_client
    }

    /// Whether the session these tasks belong to has ended.
    pub(super) fn ended(&self) -> bool {
        self.server.ended()
    }

    /// Answer one request for which [`is_task_message`] holds by calling `reply` with the
    /// whole JSON-RPC response: before returning, except for a `tasks/result` that must
    /// wait, which calls it later from a task of its own.
    pub(super) fn handle(&self, message: &Value, reply: impl FnOnce(Value) + Send + 'static) {
        // As rmcp answers: an integer written in float form (`1.0`) as the integer.
        let id = message
            .get("id")
            .and_then(|id| NumberOrString::deserialize(id).ok())
            .map_or(Value::Null, NumberOrString::into_json_value);
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let method = message.get("method").and_then(Value::as_str).unwrap_or("");
        let answer = match method {
            "tools/call" => self.create(&params),
            mcp_tasks::LIST => self.list(&params),
            _ => match serde_json::from_value::<TaskIdParams>(params) {
                Err(e) => Err((INVALID_PARAMS, format!("{method} needs a taskId: {e}"))),
                Ok(TaskIdParams { task_id }) => match method {
                    mcp_tasks::GET => self.get(&task_id),
                    mcp_tasks::CANCEL => self.cancel(&task_id),
                    _ => {
                        let this = self.clone();
                        let modern = speaks_2026_07_28(message, self.server.peer().as_ref());
                        tokio::spawn(async move {
                            let answer = this.result(&task_id, modern).await;
                            reply(response(id, answer));
                        });
                        return;
                    }
                },
            },
        };
        reply(response(id, answer));
    }

    /// Tell the client the task's new status (`notifications/tasks/status`, whose params
    /// are the task), when it has initialized. rmcp 3.11 has no such notification of the
    /// 2025-11-25 shape (its `notifications/tasks` is SEP-2663's), so it goes as a custom one.
    fn notify_status(&self, task: &Task) {
        let (Some(peer), Ok(params)) = (self.server.peer(), serde_json::to_value(task)) else {
            return;
        };
        tokio::spawn(async move {
            let notification =
                CustomNotification::new(mcp_tasks::STATUS_NOTIFICATION, Some(params));
            if let Err(e) = peer
                .send_notification(ServerNotification::CustomNotification(notification))
                .await
            {
                tracing::debug!("notifications/tasks/status not sent: {e}");
            }
        });
    }

    /// `tools/call` with `task`: check it as a plain call is checked, keep the task, start
    /// the run.
    fn create(&self, params: &Value) -> Result<Value, (i64, String)> {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        if name != TOOL_NAME {
            return Err((
                INVALID_PARAMS,
                format!("unknown tool {name:?}; the only tool is {TOOL_NAME}"),
            ));
        }
        let code = super::run_python_code(params.get("arguments").and_then(Value::as_object))
            .map_err(|why| (INVALID_PARAMS, why))?;
        if let Some(why) = super::unreadable::progress_token_error(params) {
            return Err((INVALID_PARAMS, why));
        }
        let progress_token = params
            .pointer("/_meta/progressToken")
            .cloned()
            .and_then(|t| serde_json::from_value::<ProgressToken>(t).ok());
        // `task` is an object (`{"ttl": ms}`, every member optional); anything else is no
        // task request the client could mean.
        let asked = match params.get("task").unwrap_or(&Value::Null) {
            task @ Value::Object(_) => TaskMetadata::deserialize(task)
                .map_err(|e| (INVALID_PARAMS, format!("task: {e}")))?,
            other => {
                return Err((
                    INVALID_PARAMS,
                    format!("task must be an object such as {{\"ttl\": 60000}}, not {other}"),
                ));
            }
        };
        let ttl = asked.ttl.unwrap_or(DEFAULT_TTL_MS).min(MAX_TTL_MS);
        let now = mcp_tasks::now_iso8601();
        let task = Task {
            task_id: self.new_id(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: now.clone(),
            last_updated_at: now,
            ttl: Some(ttl),
            poll_interval: Some(POLL_INTERVAL_MS),
        };
        let cancel = self.server.disconnected.child_token();
        let (terminal, _) = watch::channel(false);
        {
            let mut entries = self.lock();
            forget_expired(&mut entries);
            if entries.len() >= MAX_TASKS {
                match entries.iter().position(|e| e.task.status.is_terminal()) {
                    Some(oldest) => {
                        entries.remove(oldest);
                    }
                    None => {
                        return Err((
                            INTERNAL_ERROR,
                            format!("{MAX_TASKS} tasks are working already; wait for one to end"),
                        ));
                    }
                }
            }
            entries.push(Entry {
                task: task.clone(),
                created: Instant::now(),
                cancel: cancel.clone(),
                result: None,
                terminal,
            });
        }
        tracing::info!(task = %task.task_id, "run_python started as a task");
        let (this, code, task_id) = (self.clone(), code.to_owned(), task.task_id.clone());
        tokio::spawn(async move {
            let approver: Arc<dyn Approver> =
                Arc::new(TaskApprover::new(this.clone(), task_id.clone()));
            let progress = progress_token.map(|token| ProgressSink::SessionClient {
                peer: this.server.peer.clone(),
                token,
            });
            let result = this
                .server
                .run_task(&code, cancel, progress, Some(approver))
                .await;
            this.finish(&task_id, result);
        });
        serde_json::to_value(CreateTaskResult { task }).map_err(|e| (INTERNAL_ERROR, e.to_string()))
    }

    /// The session's client, once it has initialized.
    pub(super) fn peer(&self) -> Option<rmcp::service::Peer<rmcp::service::RoleServer>> {
        self.server.peer()
    }

    /// The task waits for a person's answer (`input_required`), or no longer does
    /// (`working`); a terminal task stays as it is. The client is told either way.
    pub(super) fn input_required(&self, task_id: &str, waiting: bool) {
        let mut entries = self.lock();
        if let Some(entry) = entries.iter_mut().find(|e| e.task.task_id == task_id)
            && !entry.task.status.is_terminal()
        {
            entry.task.status = if waiting {
                TaskStatus::InputRequired
            } else {
                TaskStatus::Working
            };
            entry.task.status_message =
                waiting.then(|| "waiting for a person to approve a tool call".to_owned());
            entry.task.last_updated_at = mcp_tasks::now_iso8601();
            self.notify_status(&entry.task);
        }
    }

    /// Record the run's result, unless the task was cancelled meanwhile.
    fn finish(&self, task_id: &str, result: CallToolResult) {
        let is_error = result.is_error == Some(true);
        let mut entries = self.lock();
        if let Some(entry) = entries.iter_mut().find(|e| e.task.task_id == task_id)
            && !entry.task.status.is_terminal()
        {
            entry.task.status = TaskStatus::Completed;
            entry.task.status_message = Some(
                if is_error {
                    "the run ended with an error (see the result)"
                } else {
                    "the run succeeded"
                }
                .into(),
            );
            entry.task.last_updated_at = mcp_tasks::now_iso8601();
            entry.result = Some(result);
            entry.terminal.send_replace(true);
            self.notify_status(&entry.task);
        }
    }

    fn get(&self, task_id: &str) -> Result<Value, (i64, String)> {
        let entries = self.lock();
        let entry = find(&entries, task_id)?;
        serde_json::to_value(&entry.task).map_err(|e| (INTERNAL_ERROR, e.to_string()))
    }

    /// `tasks/list`: every task kept, in one page. This server never gives a `nextCursor`,
    /// so a `cursor` (other than an absent or `null` one) names no page: -32602.
    fn list(&self, params: &Value) -> Result<Value, (i64, String)> {
        match params.get("cursor").unwrap_or(&Value::Null) {
            Value::Null => {}
            cursor => {
                let shown = crate::bridge::refusal::cap(&cursor.to_string(), 100);
                return Err((
                    INVALID_PARAMS,
                    format!(
                        "unknown cursor {shown}: tasks/list answers every task in one page and gives no cursor; ask without one"
                    ),
                ));
            }
        }
        let mut entries = self.lock();
        forget_expired(&mut entries);
        let tasks: Vec<&Task> = entries.iter().map(|e| &e.task).collect();
        Ok(json!({ "tasks": tasks }))
    }

    fn cancel(&self, task_id: &str) -> Result<Value, (i64, String)> {
        let mut entries = self.lock();
        let entry = entries
            .iter_mut()
            .find(|e| e.task.task_id == task_id)
            .ok_or_else(|| unknown(task_id))?;
        if entry.task.status.is_terminal() {
            return Err((
                INVALID_PARAMS,
                format!(
                    "the task {task_id:?} is already {} and cannot be cancelled",
                    status_word(entry.task.status)
                ),
            ));
        }
        entry.cancel.cancel();
        entry.task.status = TaskStatus::Cancelled;
        entry.task.status_message = Some(crate::run::CANCELLED.into());
        entry.task.last_updated_at = mcp_tasks::now_iso8601();
        entry.terminal.send_replace(true);
        self.notify_status(&entry.task);
        tracing::info!(task = %task_id, "run_python task cancelled by the client");
        serde_json::to_value(&entry.task).map_err(|e| (INTERNAL_ERROR, e.to_string()))
    }

    /// `tasks/result`: wait until the task is terminal, then its run's result, in the shape
    /// of the client's protocol (`modern`: 2026-07-28 or later, see [`speaks_2026_07_28`]).
    async fn result(&self, task_id: &str, modern: bool) -> Result<Value, (i64, String)> {
        let mut terminal = {
            let entries = self.lock();
            find(&entries, task_id)?.terminal.subscribe()
        };
        // The sender lives in the entry; an entry forgotten meanwhile ends the wait too.
        let _ = terminal.wait_for(|t| *t).await;
        let entries = self.lock();
        let entry = find(&entries, task_id)?;
        match (&entry.result, entry.task.status) {
            (Some(result), _) => {
                let mut result = ServerResult::CallToolResult(result.clone());
                // The same rule rmcp applies to a plain call's answer: older protocols have
                // no `resultType` and only object `structuredContent`.
                if !modern {
                    result.strip_result_type_for_legacy_peer();
                    result.strip_non_object_output_for_legacy_peer();
                }
                let mut result =
                    serde_json::to_value(&result).map_err(|e| (INTERNAL_ERROR, e.to_string()))?;
                if let Some(object) = result.as_object_mut() {
                    let meta = object.entry("_meta").or_insert_with(|| json!({}));
                    if let Some(meta) = meta.as_object_mut() {
                        meta.insert(RELATED_TASK_META_KEY.into(), json!({"taskId": task_id}));
                    }
                }
                Ok(result)
            }
            (None, status) => Err((
                INVALID_PARAMS,
                format!(
                    "the task {task_id:?} was {} and has no result",
                    status_word(status)
                ),
            )),
        }
    }

    fn new_id(&self) -> String {
        use std::hash::BuildHasher;
        let n = self.ids.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Unique per connection (the counter) and not guessable across connections (the
        // hasher's random keys).
        let salt = std::collections::hash_map::RandomState::new().hash_one(n);
        format!("run-{n}-{salt:016x}")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the client that sent `request` speaks protocol 2026-07-28 or later: the version
/// in the request's own `_meta` (`io.modelcontextprotocol/protocolVersion`), else the one
/// negotiated by `initialize`; neither counts as older, as rmcp counts it for a plain call.
fn speaks_2026_07_28(
    request: &Value,
    peer: Option<&rmcp::service::Peer<rmcp::service::RoleServer>>,
) -> bool {
    let in_request = request
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .cloned()
        .and_then(|v| serde_json::from_value::<ProtocolVersion>(v).ok());
    let version = in_request.or_else(|| {
        peer.and_then(|p| p.peer_info())
            .map(|i| i.protocol_version.clone())
    });
    version.is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// The JSON-RPC response with `id` for `answer`.
fn response(id: Value, answer: Result<Value, (i64, String)>) -> Value {
    match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    }
}

fn find<'a>(entries: &'a [Entry], task_id: &str) -> Result<&'a Entry, (i64, String)> {
    entries
        .iter()
        .find(|e| e.task.task_id == task_id)
        .ok_or_else(|| unknown(task_id))
}

fn unknown(task_id: &str) -> (i64, String) {
    (
        INVALID_PARAMS,
        format!(
            "unknown task {:?} (never made here, or forgotten after its ttl)",
            crate::bridge::refusal::cap(task_id, 100)
        ),
    )
}

fn status_word(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::InputRequired => "waiting for input",
        _ => "working",
    }
}

/// Forget terminal tasks whose ttl has passed since their creation.
fn forget_expired(entries: &mut Vec<Entry>) {
    entries.retain(|e| {
        let ttl = Duration::from_millis(e.task.ttl.unwrap_or(u64::MAX));
        !(e.task.status.is_terminal() && e.created.elapsed() > ttl)
    });
}

/// `tools/list` answer with run_python marked as callable as a task.
pub(super) fn mark_task_support(result: &mut Value) {
    if let Some(tools) = result.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools {
            if tool.get("name").and_then(Value::as_str) == Some(TOOL_NAME)
                && let Some(tool) = tool.as_object_mut()
            {
                tool.insert("execution".into(), json!({"taskSupport": "optional"}));
            }
        }
    }
}

/// `initialize` answer with the server's tasks capability added.
pub(super) fn add_capability(result: &mut Value) {
    if let Some(capabilities) = result
        .get_mut("capabilities")
        .and_then(Value::as_object_mut)
    {
        capabilities.insert("tasks".into(), mcp_tasks::server_capability());
    }
}

/// `message` (a JSON-RPC message of rmcp's) with run_python's task support added, when it is
/// the answer to `initialize` (the `tasks` capability) or `tools/list` (`execution`); `false`
/// when it is neither and was left as it is.
pub(super) fn patch_answer(message: &mut Value) -> bool {
    let Some(result) = message.get_mut("result") else {
        return false;
    };
    if result.get("serverInfo").is_some() && result.get("protocolVersion").is_some() {
        add_capability(result);
    } else if result.get("tools").is_some_and(Value::is_array) {
        mark_task_support(result);
    } else {
        return false;
    }
    true
}
