//! Asking a person before a call goes out (`--approve`, `approve` in a config entry),
//! through MCP elicitation (spec 2025-06-18 "Elicitation": `elicitation/create` in form
//! mode; the client answers `accept`, `decline` or `cancel`).
//!
//! The bridge asks only after every other check of the call passed (a kept tool, its
//! schema, the call budget, the private-data rule), so nobody is asked about a call that
//! would be refused anyway; the run's deadline keeps running while the person decides.

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, Peer, RoleServer};
use serde_json::Value;

use crate::sandbox::escape_controls;

/// The `ToolError` message of a call a person declined or dismissed.
pub(crate) const DECLINED: &str = "declined by the user";

/// Characters of the arguments' JSON shown in an approval request; longer is cut with `…`.
pub(crate) const MAX_SHOWN_ARGS_CHARS: usize = 2000;

/// One call waiting for approval.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalRequest {
    /// The wrapped server's name.
    pub server: String,
    /// The tool's MCP name.
    pub tool: String,
    /// The arguments the code sent.
    pub args: Value,
}

impl ApprovalRequest {
    /// The text a person reads: the server, the tool and the arguments, the arguments as
    /// compact JSON cut at [`MAX_SHOWN_ARGS_CHARS`], control characters escaped everywhere
    /// (a name or a value cannot move the cursor or retitle a terminal).
    pub fn message(&self) -> String {
        let args = serde_json::to_string(&self.args).unwrap_or_default();
        let args = crate::bridge::refusal::cap(&args, MAX_SHOWN_ARGS_CHARS);
        escape_controls(&format!(
            "The code wants to call the tool {:?} of the server {:?} with these arguments:\n{args}\nAccept to send this call; decline or cancel to refuse it.",
            self.tool, self.server
        ))
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
    /// Nobody could be asked; the call is refused with this reason.
    Unavailable(String),
}

/// Who is asked. `serve` asks its MCP client ([`ElicitingClient`]); `exec` has nobody.
pub trait Approver: Send + Sync + std::fmt::Debug {
    /// Ask about one call; the future ends with the answer.
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer>;
}

/// The reason when there is nobody to ask at all (`exec`, a run_python task, a library
/// caller without an approver).
pub(crate) const NOBODY_TO_ASK: &str = "needs a person's approval (--approve), and this run has no MCP client to ask (exec, or run_python called as a task); the call was not sent";

/// The MCP client of one `run_python` request, asked with `elicitation/create`.
#[derive(Clone, Debug)]
pub(crate) struct ElicitingClient {
    peer: Peer<RoleServer>,
}

impl ElicitingClient {
    /// Ask through this peer (the request context's).
    pub(crate) fn new(peer: Peer<RoleServer>) -> Self {
        Self { peer }
    }
}

impl Approver for ElicitingClient {
    fn approve(&self, request: ApprovalRequest) -> BoxFuture<'static, Answer> {
        let peer = self.peer.clone();
        Box::pin(async move {
            if !peer
                .supported_elicitation_modes()
                .contains(&ElicitationMode::Form)
            {
                return Answer::Unavailable(format!(
                    "{} needs a person's approval (--approve), and this MCP client did not declare the elicitation capability, so nobody can be asked; the call was not sent",
                    request.tool
                ));
            }
            let mut schema = ElicitationSchema::new(Default::default());
            schema.title = Some(format!("Allow {} on {}?", request.tool, request.server).into());
            let params = ElicitRequestParams::FormElicitationParams {
                meta: None,
                message: request.message(),
                requested_schema: schema,
            };
            match peer.create_elicitation(params).await {
                Ok(result) => match result.action {
                    ElicitationAction::Accept => Answer::Accept,
                    ElicitationAction::Decline => Answer::Decline,
                    // Cancel, and any action a later protocol adds: not an acceptance.
                    _ => Answer::Cancel,
                },
                Err(e) => {
                    tracing::warn!("elicitation/create failed: {e}");
                    Answer::Unavailable(format!(
                        "{} needs a person's approval (--approve), and asking the MCP client failed; the call was not sent",
                        request.tool
                    ))
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_request_names_server_tool_and_arguments_escaped_and_cut() {
        let request = ApprovalRequest {
            server: "files\u{1b}]0;x\u{7}".into(),
            tool: "delete".into(),
            args: serde_json::json!({"path": "/tmp/a", "note": "\u{9b}2J", "pad": "y".repeat(5000)}),
        };
        let text = request.message();
        assert!(text.contains("\"delete\""), "{text}");
        assert!(text.contains("/tmp/a"), "{text}");
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        assert!(text.chars().count() < MAX_SHOWN_ARGS_CHARS + 300);
        assert!(text.contains('…'));
    }
}
