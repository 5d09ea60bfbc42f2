//! The wire shapes of MCP tasks as protocol 2025-11-25 defines them (specification
//! 2025-11-25, basic/utilities/tasks, "Tasks"), which rmcp 3.11 lacks.
//!
//! rmcp 3.11 implements a later tasks draft (SEP-2663, the `io.modelcontextprotocol/tasks`
//! extension): its `Task` has `ttlMs`/`pollIntervalMs`, its `CreateTaskResult` is flattened
//! with `resultType: "task"`, it has no `tasks/result` or `tasks/list`, its `tasks/cancel`
//! answers an empty acknowledgement, its `Tool` has no `execution.taskSupport`, its
//! `tools/call` parameters have no `task`, and its `ServerCapabilities` no `tasks`. The
//! clients and servers people run (the TypeScript SDK 1.x, the Python SDK 2.x types) speak
//! the 2025-11-25 shapes, so those are written here; the status values are rmcp's
//! [`TaskStatus`], which both drafts share.
//!
//! In 2025-11-25:
//! - a tool says in `execution.taskSupport` whether it may (`"optional"`), must
//!   (`"required"`) or must not (`"forbidden"`, the default) be called as a task;
//! - a server that accepts task-augmented `tools/call` says so in
//!   `capabilities.tasks.requests.tools.call`;
//! - `tools/call` with `params.task` (a [`TaskMetadata`]) answers at once with a
//!   [`CreateTaskResult`]; `tasks/get` answers the [`Task`]; `tasks/result` waits until the
//!   task is terminal and answers the `tools/call` result, its `_meta` naming the task under
//!   [`RELATED_TASK_META_KEY`]; `tasks/cancel` answers the task in status `cancelled`, and
//!   refuses (-32602) a task already terminal; `tasks/list` answers `{"tasks": [...]}`;
//! - an unknown task id is refused with -32602 (Invalid params).
//!
//! A [`Task`] a wrapped server sent is read leniently, as the rest of what servers send is
//! (README "What wrapped servers send"): an optional field of the wrong type or out of range
//! (`pollInterval: -5`, `"fast"`, `1e300`; a `ttl` or `statusMessage` likewise) is read as
//! absent or, for a number too large, as `u64::MAX`, never as a task that is not one.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Value, json};

pub(crate) use rmcp::model::TaskStatus;

/// `_meta` key that ties a message to its task (`{"taskId": "..."}`).
pub(crate) const RELATED_TASK_META_KEY: &str = "io.modelcontextprotocol/related-task";

/// `tasks/get`.
pub(crate) const GET: &str = "tasks/get";
/// `tasks/result`.
pub(crate) const RESULT: &str = "tasks/result";
/// `tasks/list`.
pub(crate) const LIST: &str = "tasks/list";
/// `tasks/cancel`.
pub(crate) const CANCEL: &str = "tasks/cancel";
/// `notifications/tasks/status`: a task's status changed (params: the [`Task`]).
pub(crate) const STATUS_NOTIFICATION: &str = "notifications/tasks/status";

/// Whether a tool may be called as a task (`Tool.execution.taskSupport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub(crate) enum TaskSupport {
    /// Never as a task (the default when absent).
    #[default]
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task; a plain call is refused (-32601).
    Required,
}

impl TaskSupport {
    /// The `taskSupport` of one tool object of a `tools/list` answer (forbidden when absent
    /// or unknown).
    pub(crate) fn of_tool(tool: &Value) -> Self {
        tool.pointer("/execution/taskSupport")
            .cloned()
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default()
    }
}

/// `params.task` of a task-augmented request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub(crate) struct TaskMetadata {
    /// Requested retention from creation, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u64>,
}

/// One task (`Task`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Task {
    /// The id the receiver gave it.
    pub task_id: String,
    /// Where it stands.
    pub status: TaskStatus,
    /// A human-readable word on the status.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_string"
    )]
    pub status_message: Option<String>,
    /// ISO 8601 time of creation.
    pub created_at: String,
    /// ISO 8601 time of the last change.
    pub last_updated_at: String,
    /// Retention from creation in milliseconds; `null` for unlimited (always sent).
    #[serde(default, deserialize_with = "lenient_millis")]
    pub ttl: Option<u64>,
    /// Suggested milliseconds between two `tasks/get`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient_millis"
    )]
    pub poll_interval: Option<u64>,
}

/// A millisecond count as a server may have written it: a whole number in `u64` as it is,
/// any other number from 0 up rounded down (past `u64::MAX`, such as `1e300`, `u64::MAX`);
/// a negative number or any other value is absent.
fn lenient_millis<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::Number(n) => n.as_u64().or_else(|| {
            // `as` saturates: 1e300 becomes u64::MAX. JSON numbers are never NaN.
            n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)
        }),
        _ => None,
    })
}

/// A string as a server may have written it: any other value is absent.
fn lenient_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(deserializer)? {
        Value::String(text) => Some(text),
        _ => None,
    })
}

/// The answer to a task-augmented request (`CreateTaskResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CreateTaskResult {
    /// The task just made.
    pub task: Task,
}

/// The parameters of `tasks/get`, `tasks/result` and `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TaskIdParams {
    /// The task.
    pub task_id: String,
}

/// `capabilities.tasks` of a server that accepts task-augmented `tools/call`, lists and
/// cancels tasks.
pub(crate) fn server_capability() -> Value {
    json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}})
}

/// The current time as ISO 8601 UTC with milliseconds (`2025-11-25T10:30:00.000Z`).
pub(crate) fn now_iso8601() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_has_the_2025_11_25_field_names_and_always_sends_ttl() {
        let task = Task {
            task_id: "t1".into(),
            status: TaskStatus::InputRequired,
            status_message: None,
            created_at: "2025-11-25T10:30:00.000Z".into(),
            last_updated_at: "2025-11-25T10:30:00.000Z".into(),
            ttl: None,
            poll_interval: Some(500),
        };
        assert_eq!(
            serde_json::to_value(CreateTaskResult { task }).unwrap(),
            json!({"task": {"taskId": "t1", "status": "input_required",
                "createdAt": "2025-11-25T10:30:00.000Z", "lastUpdatedAt": "2025-11-25T10:30:00.000Z",
                "ttl": null, "pollInterval": 500}})
        );
    }

    #[test]
    fn a_task_with_malformed_optional_fields_reads_as_a_task_without_them() {
        let read = |poll: Value, ttl: Value, message: Value| {
            serde_json::from_value::<CreateTaskResult>(json!({"task": {"taskId": "t1",
                "status": "working", "createdAt": "2026-01-01T00:00:00Z",
                "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": ttl, "pollInterval": poll,
                "statusMessage": message}}))
            .expect("still a task")
            .task
        };
        let task = read(json!(-5), json!("forever"), json!(7));
        assert_eq!(
            (task.poll_interval, task.ttl, task.status_message),
            (None, None, None)
        );
        assert_eq!(
            read(json!("fast"), json!(null), json!(null)).poll_interval,
            None
        );
        assert_eq!(
            read(json!(1e300), json!(-1), json!("ok")).poll_interval,
            Some(u64::MAX)
        );
        let task = read(json!(250.7), json!(60000), json!("ok"));
        assert_eq!(
            (task.poll_interval, task.ttl, task.status_message.as_deref()),
            (Some(250), Some(60000), Some("ok"))
        );
    }

    #[test]
    fn task_support_is_read_from_a_tool_and_defaults_to_forbidden() {
        let required = json!({"name": "t", "execution": {"taskSupport": "required"}});
        assert_eq!(TaskSupport::of_tool(&required), TaskSupport::Required);
        assert_eq!(
            TaskSupport::of_tool(&json!({"name": "t"})),
            TaskSupport::Forbidden
        );
        let odd = json!({"execution": {"taskSupport": "sometimes"}});
        assert_eq!(TaskSupport::of_tool(&odd), TaskSupport::Forbidden);
    }
}
