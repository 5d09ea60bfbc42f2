//! Approval of the calls of a run_python task (MCP 2025-11-25 basic/utilities/tasks, "Input
//! Required Status"): the run has no request of its own to ask through, so the session's
//! client is asked with an `elicitation/create` that names the task in
//! `_meta["io.modelcontextprotocol/related-task"]`, and the task is `input_required` while
//! the question is open (with `notifications/tasks/status` each way), `working` again once
//! it is answered or withdrawn.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::tasks::Tasks;
use crate::governance::approval::{
    Answer, ApprovalRequest, Approver, ElicitingClient, Unavailable,
};

/// Asks the session's client on behalf of one task.
pub(super) struct TaskApprover {
    tasks: Tasks,
    task_id: String,
}

impl std::fmt::Debug for TaskApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskApprover")
            .field("task_id", &self.task_id)
            .finish_non_exhaustive()
    }
}

impl TaskApprover {
    /// The approver of the task `task_id` of `tasks`.
    pub(super) fn new(tasks: Tasks, task_id: String) -> Self {
        Self { tasks, task_id }
    }
}

impl Approver for TaskApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        // The client is looked up when a call needs it: a task can be created before rmcp
        // has seen the client's `notifications/initialized`.
        let Some(peer) = self.tasks.peer() else {
            let why = Unavailable::ClientNotReady;
            return Box::pin(std::future::ready(Answer::Unavailable(why)));
        };
        let (tasks, task_id) = (self.tasks.clone(), self.task_id.clone());
        ElicitingClient::new(peer)
            .for_task(
                self.task_id.clone(),
                Arc::new(move |waiting| tasks.input_required(&task_id, waiting)),
            )
            .approve(request)
    }
}
