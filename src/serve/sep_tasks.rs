//! run_python as a task of the tasks extension of protocol 2026-07-28 (SEP-2663,
//! `io.modelcontextprotocol/tasks`), on rmcp 3.11's own support: its [`TaskManager`] keeps
//! the tasks, and its request handling answers `tasks/get`, `tasks/update` and
//! `tasks/cancel` through the [`rmcp::ServerHandler`] methods of [`CodeModeServer`].
//!
//! The server declares the extension in `capabilities.extensions`. A `tools/call` of
//! run_python from a client that declared the extension too (at `initialize`, or in the
//! request's `_meta`) answers at once with a task (`resultType: "task"`, a `pollIntervalMs`
//! of [`POLL_INTERVAL_MS`], a `ttlMs` of [`DEFAULT_TTL_MS`]); every other client gets the
//! plain result, as before. `tasks/get` answers the task with its result inlined once it is
//! `completed` (a run that raised or was stopped is still `completed`, with `isError`);
//! `tasks/cancel` kills the run as a request cancel does and the task ends `cancelled`.
//! A call that needs approval asks through the extension: the task goes `input_required`
//! with the question in `inputRequests`, and `tasks/update` answers it
//! ([`super::sep_approval`]). How the run goes (the sandbox started, each finished call, a
//! heartbeat) is the task's `statusMessage`, the same messages a plain run sends as
//! progress ([`super::progress`]): the `tools/call` was answered with the task, so no
//! request is left to send `notifications/progress` under. The 2025-11-25
//! tasks of [`super::tasks`] are kept apart: their ids are their own, and a `tasks/get` or
//! `tasks/cancel` for an id they do not hold reaches rmcp.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResult, CancelTaskParams, CreateTaskResult, GetTaskParams, GetTaskResult,
    UpdateTaskParams,
};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};

use super::CodeModeServer;
use super::progress::ProgressSink;
use super::sep_approval::approver;
use super::tasks::{DEFAULT_TTL_MS, POLL_INTERVAL_MS};

impl CodeModeServer {
    /// Start `code` as a task of this session's [`TaskManager`]; `elicitation`: whether the
    /// client declared it on the `tools/call` (else calls that need approval are refused).
    pub(super) fn start_extension_task(&self, code: String, elicitation: bool) -> CreateTaskResult {
        let server = self.detached();
        let options = TaskOptions::new()
            .with_ttl_ms(DEFAULT_TTL_MS)
            .with_poll_interval_ms(POLL_INTERVAL_MS);
        let task = self.extension_tasks.spawn(options, move |context| {
            Box::pin(async move {
                let cancel = server.disconnected.child_token();
                let watch = {
                    let (context, cancel) = (context.clone(), cancel.clone());
                    tokio::spawn(async move {
                        context.cancelled().await;
                        cancel.cancel();
                    })
                };
                let status = ProgressSink::TaskStatus(context.clone());
                let asks = approver(context.clone(), elicitation);
                let result: CallToolResult =
                    server.run_task(&code, cancel, Some(status), Some(asks)).await;
                watch.abort();
                if context.is_cancel_requested() {
                    tracing::info!(task = %context.task_id(), "run_python task cancelled by the client");
                    Err(TaskExit::Cancelled)
                } else {
                    Ok(result)
                }
            })
        });
        tracing::info!(task = %task.task_id, "run_python started as a task (SEP-2663)");
        CreateTaskResult::new(task)
    }

    pub(super) fn extension_get(&self, request: &GetTaskParams) -> Result<GetTaskResult, McpError> {
        self.extension_tasks
            .get_task(&request.task_id)
            .map(GetTaskResult::new)
    }

    pub(super) fn extension_update(&self, request: UpdateTaskParams) -> Result<(), McpError> {
        self.extension_tasks
            .update_task(&request.task_id, request.input_responses)
    }

    pub(super) fn extension_cancel(&self, request: &CancelTaskParams) -> Result<(), McpError> {
        self.extension_tasks.cancel_task(&request.task_id)
    }
}

/// A session's extension tasks (a new, empty one per session).
pub(super) fn new_manager() -> TaskManager {
    TaskManager::new()
}
