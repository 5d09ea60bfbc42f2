//! Asking a person before a call goes out (`--approve`, `approve` in a config entry),
//! through MCP elicitation (spec 2025-06-18 "Elicitation": `elicitation/create` in form
//! mode; the client answers `accept`, `decline` or `cancel`).
//!
//! The bridge asks only after every other check of the call passed (a kept tool, its
//! schema, the call budget, the private-data rule), so nobody is asked about a call that
//! would be refused anyway; the run's deadline keeps running while the person decides.

use std::sync::Arc;

use futures::future::BoxFuture;
use rmcp::model::{
    CancelledNotificationParam, ClientResult, ElicitRequest, ElicitRequestParams,
    ElicitationAction, ElicitationSchema, MetaObject, RequestId, RequestMetaObject, ServerRequest,
};
use rmcp::service::{ElicitationMode, Peer, PeerRequestOptions, RoleServer, ServiceError};
use serde_json::Value;

use crate::sandbox::escape_controls;

/// The `ToolError` message of a call a person declined or dismissed.
pub(crate) const DECLINED: &str = "declined by the user";

/// Most characters of the arguments' JSON (control and format characters escaped) an
/// approval request shows. The arguments are always shown whole: a call whose arguments
/// are longer is refused without asking ([`ApprovalRequest::shown_args`]), since a cut
/// request would let the code hide what matters behind a padded early value.
pub(crate) const MAX_SHOWN_ARGS_CHARS: usize = 2000;

/// One call waiting for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The wrapped server's name as its user knows it: its config entry's name, or for the
    /// server given after `--`, its command's file name (`ServerEntry::shown_name`).
    pub server: String,
    /// The tool's MCP name.
    pub tool: String,
    /// The arguments the code sent.
    pub args: Value,
}

impl ApprovalRequest {
    /// The arguments as a person reads them: compact JSON, control and format characters
    /// escaped ([`escape_controls`]); `Err` with its length in characters when that is over
    /// [`MAX_SHOWN_ARGS_CHARS`] (the call must then be refused without asking).
    pub fn shown_args(&self) -> Result<String, usize> {
        let args = escape_controls(&serde_json::to_string(&self.args).unwrap_or_default());
        match args.chars().count() {
            n if n > MAX_SHOWN_ARGS_CHARS => Err(n),
            _ => Ok(args),
        }
    }

    /// The text a person reads: the server, the tool and the whole arguments
    /// ([`Self::shown_args`]), control and format characters escaped everywhere (a name or
    /// a value cannot move the cursor, retitle a terminal or reorder the text). Arguments
    /// too long to show are not shown at all: such a call is refused before anyone is asked.
    pub fn message(&self) -> String {
        let args = self
            .shown_args()
            .unwrap_or_else(|n| format!("(arguments too long to show: {n} characters)"));
        format!(
            "The code wants to call the tool {} of the server {} with these arguments:\n{args}\nAccept to send this call; decline or cancel to refuse it.",
            quoted(&self.tool),
            quoted(&self.server),
        )
    }
}

/// `name` as the approval form shows it: in double quotes, with every control and format
/// character escaped (Rust's `{:?}`, then [`escape_controls`]), so a name the wrapped server
/// chose cannot break a line, move the cursor or reorder the text of the form's title or
/// message.
fn quoted(name: &str) -> String {
    escape_controls(&format!("{name:?}"))
}

impl ApprovalRequest {
    /// The `elicitation/create` parameters that ask about this call: form mode, an empty
    /// schema (the answer is the action alone), titled with the tool and server, each quoted
    /// and escaped as in the message ([`quoted`]).
    pub(crate) fn form(&self) -> ElicitRequestParams {
        let mut schema = ElicitationSchema::new(Default::default());
        schema.title =
            Some(format!("Allow {} on {}?", quoted(&self.tool), quoted(&self.server)).into());
        ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: self.message(),
            requested_schema: schema,
        }
    }
}

/// A person's answer, or why nobody could answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Send the call.
    Accept,
    /// Refuse it: [`DECLINED`].
    Decline,
    /// Dismissed without a choice: refused as [`DECLINED`] too.
    Cancel,
    /// Nobody could be asked; the call is refused saying why.
    Unavailable(Unavailable),
}

/// Why nobody could approve a call. The `Display` text says what happened, that the call
/// was not sent, and what would let a later call be asked about; the bridge puts the
/// called function's name and the settings that asked for approval before it
/// (`Refusal::NotApproved` in `bridge::refusal`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    /// There is no MCP client at all: `exec`, or a library caller without an approver.
    #[error(
        "this run has no MCP client to ask (exec, or a run without an approver); the call was not sent. Run the code through serve, whose MCP client is asked"
    )]
    NoClient,
    /// A task's session has no client yet (it has not sent `notifications/initialized`).
    #[error(
        "this task's MCP client has not finished initializing, so nobody can be asked; the call was not sent. Calls made once it has are asked about"
    )]
    ClientNotReady,
    /// The client declared no elicitation capability (form mode).
    #[error(
        "this MCP client did not declare the elicitation capability, so nobody can be asked; the call was not sent. Only a client that supports elicitation (form mode) can approve it"
    )]
    NoElicitation,
    /// The client answered with something other than an elicitation result.
    #[error(
        "the MCP client's answer was not an elicitation result; the call was not sent. A later call asks again"
    )]
    NotAnElicitationResult,
    /// Sending the question or waiting for its answer failed (the reason, at most 200
    /// characters).
    #[error("asking the MCP client failed ({0}); the call was not sent. A later call asks again")]
    AskingFailed(String),
}

impl Answer {
    /// The answer an elicitation result's `action` gives.
    pub(crate) fn of(action: &ElicitationAction) -> Self {
        match action {
            ElicitationAction::Accept => Self::Accept,
            ElicitationAction::Decline => Self::Decline,
            // Cancel, and any action a later protocol adds: not an acceptance.
            _ => Self::Cancel,
        }
    }
}

/// Who is asked. `serve` asks its MCP client ([`ElicitingClient`]); `exec` has nobody.
pub trait Approver: Send + Sync + std::fmt::Debug {
    /// Ask about one call; the future ends with the answer.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer>;
}

/// The MCP client of one `run_python` request, asked with `elicitation/create`.
///
/// A request still unanswered when the run ends (its deadline, a cancel) is withdrawn with
/// `notifications/cancelled` (spec 2025-06-18 "Cancellation"), so the client can take the
/// question off the screen; the call is never sent.
#[derive(Clone)]
pub(crate) struct ElicitingClient {
    peer: Peer<RoleServer>,
    related_task: Option<String>,
    waiting: Option<Arc<dyn Fn(bool) + Send + Sync>>,
}

impl std::fmt::Debug for ElicitingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElicitingClient")
            .field("related_task", &self.related_task)
            .finish_non_exhaustive()
    }
}

impl ElicitingClient {
    /// Ask through this peer (the request context's).
    pub(crate) fn new(peer: Peer<RoleServer>) -> Self {
        Self {
            peer,
            related_task: None,
            waiting: None,
        }
    }

    /// Ask on behalf of the task `task_id` (a run_python called as a task, MCP 2025-11-25
    /// basic/utilities/tasks "Input Required Status"): each request carries
    /// `_meta["io.modelcontextprotocol/related-task"] = {"taskId": task_id}`, and
    /// `waiting(true)` is called before it goes out (the task turns `input_required`),
    /// `waiting(false)` once it is answered or withdrawn (back to `working`).
    pub(crate) fn for_task(
        mut self,
        task_id: impl Into<String>,
        waiting: Arc<dyn Fn(bool) + Send + Sync>,
    ) -> Self {
        self.related_task = Some(task_id.into());
        self.waiting = Some(waiting);
        self
    }
}

/// Calls `waiting(false)` and withdraws the request when dropped before it is answered.
struct Pending {
    peer: Peer<RoleServer>,
    id: Option<RequestId>,
    waiting: Option<Arc<dyn Fn(bool) + Send + Sync>>,
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(waiting) = self.waiting.take() {
            waiting(false);
        }
        let Some(id) = self.id.take() else {
            return;
        };
        let peer = self.peer.clone();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let cancelled = CancelledNotificationParam::new(Some(id), Some(WITHDRAWN.into()));
                let _ = peer.notify_cancelled(cancelled).await;
            });
        }
    }
}

/// The `reason` of the `notifications/cancelled` that withdraws an unanswered request.
pub(crate) const WITHDRAWN: &str = "the run ended before anyone answered; the call was not sent";

impl Approver for ElicitingClient {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let this = self.clone();
        Box::pin(async move {
            let peer = &this.peer;
            if !peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                return Answer::Unavailable(Unavailable::NoElicitation);
            }
            let params = request.form();
            let mut options = PeerRequestOptions::no_options();
            options.meta = this.related_task.as_ref().map(|task_id| {
                let mut meta = serde_json::Map::new();
                meta.insert(
                    crate::mcp_tasks::RELATED_TASK_META_KEY.into(),
                    serde_json::json!({ "taskId": task_id }),
                );
                RequestMetaObject(MetaObject(meta))
            });
            let mut pending = Pending {
                peer: peer.clone(),
                id: None,
                waiting: this.waiting.clone(),
            };
            if let Some(waiting) = &pending.waiting {
                waiting(true);
            }
            let sent = peer
                .send_request_with_option(
                    ServerRequest::ElicitRequest(ElicitRequest::new(params)),
                    options,
                )
                .await;
            let answer = match sent {
                Ok(handle) => {
                    pending.id = Some(handle.id.clone());
                    let answer = handle.await_response().await;
                    pending.id = None;
                    answer
                }
                Err(e) => Err(e),
            };
            drop(pending);
            match answer {
                Ok(ClientResult::ElicitResult(result)) => Answer::of(&result.action),
                Ok(other) => {
                    tracing::warn!("elicitation/create was answered with {other:?}");
                    Answer::Unavailable(Unavailable::NotAnElicitationResult)
                }
                Err(e) => {
                    tracing::warn!("elicitation/create failed: {e}");
                    Answer::Unavailable(Unavailable::AskingFailed(failure(&e)))
                }
            }
        })
    }
}

/// What went wrong asking the client, as the refusal tells the code: the client's own error
/// answer (its code and message, at most 200 characters), else only what kind of failure
/// it was (a transport's text would be a host detail).
fn failure(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(error) => crate::bridge::refusal::cap(
            &format!("it answered error {}: {}", error.code.0, error.message),
            200,
        ),
        ServiceError::TransportClosed => "the connection to it is closed".to_owned(),
        _ => "the question could not be sent, or was not answered".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_server_tool_and_whole_arguments_escaped() {
        let request = ApprovalRequest {
            server: "files\u{1b}]0;x\u{7}".into(),
            tool: "delete\u{202e}".into(),
            args: serde_json::json!({"path": "/tmp/a\u{202e}", "note": "\u{9b}2J", "pad": "y".repeat(1500), "tail": "/../etc"}),
        };
        let text = request.message();
        assert!(text.contains("\"delete\\u{202e}\""), "{text}");
        assert!(text.contains("/tmp/a\\u{202e}"), "{text}");
        assert!(text.contains(&"y".repeat(1500)), "{text}");
        assert!(text.contains("\"tail\":\"/../etc\""), "{text}");
        assert!(!text.contains('…'), "{text}");
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "{text:?}"
        );
    }

    #[test]
    fn the_form_title_quotes_the_tool_name_with_its_line_breaks_escaped() {
        let request = ApprovalRequest {
            server: "hs.py\ton".into(),
            tool: "tool\u{202e}evil\u{1b}[2J\nApprove? yes".into(),
            args: serde_json::json!({}),
        };
        let ElicitRequestParams::FormElicitationParams {
            requested_schema, ..
        } = request.form()
        else {
            panic!("not a form");
        };
        let title = requested_schema.title.expect("a title").to_string();
        assert_eq!(
            title,
            r#"Allow "tool\u{202e}evil\u{1b}[2J\nApprove? yes" on "hs.py\ton"?"#
        );
        assert!(!title.chars().any(char::is_control), "{title:?}");
    }

    #[test]
    fn arguments_too_long_to_show_whole_are_not_shown_cut() {
        let request = ApprovalRequest {
            server: "files".into(),
            tool: "delete_all".into(),
            args: serde_json::json!({"path": format!("/harmless/tmp/file{}/../../../../etc", " ".repeat(2000))}),
        };
        let n = serde_json::to_string(&request.args)
            .unwrap()
            .chars()
            .count();
        assert_eq!(request.shown_args(), Err(n));
        assert!(!request.message().contains("/harmless"));
        // Escaping counts: a value that fits raw but not escaped is too long to show.
        let request = ApprovalRequest {
            args: serde_json::json!({"p": "\u{200b}".repeat(300)}),
            ..request
        };
        assert!(request.shown_args().is_err());
    }
}
