//! Approval of the calls of a run_python task of the 2026-07-28 tasks extension (SEP-2663,
//! `io.modelcontextprotocol/tasks`), through the extension's own channel for asking the
//! client: the task goes to `input_required`, `tasks/get` carries the question in
//! `inputRequests` (an `elicitation/create` request under a key of its own), and the client
//! answers it with `tasks/update` `inputResponses` (an elicitation result), after which the
//! task is `working` again. rmcp 3.11's [`TaskContext::request_input`] keeps that state.
//!
//! The question is the one a plain run asks ([`ApprovalRequest::form`]). A client whose
//! `tools/call` declared no elicitation capability is not asked, and the call is refused as
//! for a plain run. A question still open when the run ends (its deadline) goes with it: the
//! task is then terminal, which is what `tasks/get` answers, and the call is never sent. A
//! `tasks/cancel` while the question is open ends the wait with a cancel.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequest, ElicitationAction, InputRequest};
use rmcp::task_manager::{TaskContext, TaskExit};
use serde_json::Value;

use crate::governance::approval::{Answer, ApprovalRequest, Approver, Unavailable};

/// Asks the client of one extension task.
pub(super) struct ExtensionTaskApprover {
    context: TaskContext,
    /// Whether the client declared elicitation on the task's `tools/call`.
    elicitation: bool,
    next: AtomicU64,
}

impl std::fmt::Debug for ExtensionTaskApprover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExtensionTaskApprover")
            .field("task_id", &self.context.task_id())
            .field("elicitation", &self.elicitation)
            .finish_non_exhaustive()
    }
}

impl ExtensionTaskApprover {
    /// The approver of the task of `context`.
    pub(super) fn new(context: TaskContext, elicitation: bool) -> Self {
        Self {
            context,
            elicitation,
            next: AtomicU64::new(1),
        }
    }
}

impl Approver for ExtensionTaskApprover {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        if !self.elicitation {
            let why = Unavailable::NoElicitation;
            return Box::pin(std::future::ready(Answer::Unavailable(why)));
        }
        let key = format!("approval-{}", self.next.fetch_add(1, Ordering::SeqCst));
        let context = self.context.clone();
        Box::pin(async move {
            let question = InputRequest::Elicitation(ElicitRequest::new(request.form()));
            match context.request_input(key, question).await {
                Ok(response) => answer_of(&response)
                    .unwrap_or(Answer::Unavailable(Unavailable::NotAnElicitationResult)),
                // The client cancelled the task: its question is gone with it.
                Err(TaskExit::Cancelled) => Answer::Cancel,
                Err(TaskExit::Error(e)) => Answer::Unavailable(Unavailable::AskingFailed(
                    crate::bridge::refusal::cap(&e.message, 200),
                )),
            }
        })
    }
}

/// The answer of an `inputResponses` value, when it is an elicitation result.
fn answer_of(response: &Value) -> Option<Answer> {
    let action = serde_json::from_value::<ElicitationAction>(response.get("action")?.clone());
    action.ok().map(|action| Answer::of(&action))
}

/// The approver of an extension task, as the run takes it.
pub(super) fn approver(context: TaskContext, elicitation: bool) -> Arc<dyn Approver> {
    Arc::new(ExtensionTaskApprover::new(context, elicitation))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_an_elicitation_result_answers_a_question() {
        assert_eq!(
            answer_of(&json!({"action": "accept"})),
            Some(Answer::Accept)
        );
        assert_eq!(
            answer_of(&json!({"action": "decline"})),
            Some(Answer::Decline)
        );
        assert_eq!(
            answer_of(&json!({"action": "cancel"})),
            Some(Answer::Cancel)
        );
        assert_eq!(answer_of(&json!({"roots": []})), None);
        assert_eq!(answer_of(&Value::Null), None);
        assert_eq!(answer_of(&json!({"action": 3})), None);
    }
}
