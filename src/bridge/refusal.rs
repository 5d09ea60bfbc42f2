//! What the code sees when a call does not return a result: a `ToolError` message.
//!
//! Only the bridge's own refusal messages and a server's `isError` text reach the code, each
//! capped at [`MAX_ERROR_CHARS`]; any other fault on the host reaches it only as a type name
//! (test `a_host_fault_raises_in_the_cell_without_its_details`), so no host detail leaks.

use std::time::Duration;

use crate::governance::approval::Unavailable;
use crate::limits::{MAX_ARGS_BYTES, MAX_ERROR_CHARS};

/// Cut `text` to at most `max` characters, ending with `…` when cut.
pub(crate) fn cap(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Where the result limit is raised: `--max-result-bytes`, and for a config file's server
/// also its entry's `maxResultBytes`.
fn raise_result_limit(config_entry: &Option<String>) -> String {
    match config_entry {
        Some(name) => {
            format!("--max-result-bytes, or \"maxResultBytes\" in the config entry of {name:?}")
        }
        None => "--max-result-bytes".to_owned(),
    }
}

/// ` (server "NAME")` for a named server (cut to 64 characters, control characters
/// escaped), else nothing.
fn of_server(server: &Option<String>) -> String {
    server.as_ref().map_or_else(String::new, |name| {
        crate::sandbox::escape_controls(&format!(" (server {:?})", cap(name, 64)))
    })
}

/// Why the bridge refused a call, or could not deliver it. Each check of
/// [`super::Bridge::call`] has its variant, in the order the checks run; the code sees the
/// `Display` text (capped at [`MAX_ERROR_CHARS`]) as its `ToolError`. `tool` is the Python
/// name the code called.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// No kept tool has this Python name (shown cut to 64 characters). The sandbox's
    /// `TOOLS` is the catalog its run started with, so the text also says that a server
    /// may have removed the tool since (a catalog change mid-run is checked here, not there).
    #[error(
        "there is no tool called {}; TOOLS lists the tools as they were when this run started, and a server may have removed this one since",
        cap(.name, 64)
    )]
    NoSuchTool {
        /// The name the code called.
        name: String,
    },
    /// The arguments are not a JSON object.
    #[error("{tool} refused: the arguments must be a dict")]
    NotADict {
        /// The tool's Python name.
        tool: String,
    },
    /// The arguments, as JSON, are over [`MAX_ARGS_BYTES`].
    #[error(
        "{tool} refused: the arguments are {bytes} bytes, over the {} KiB limit",
        MAX_ARGS_BYTES / 1024
    )]
    ArgumentsTooLarge {
        /// The tool's Python name.
        tool: String,
        /// Size of the arguments as JSON, in bytes.
        bytes: usize,
    },
    /// The arguments do not match the tool's input schema.
    #[error("{tool} refused: arguments outside its schema: {why}")]
    OutsideSchema {
        /// The tool's Python name.
        tool: String,
        /// The first schema error (see `super::catalog::schema`).
        why: String,
    },
    /// Checking the arguments against the tool's input schema would take too much work (its
    /// `$ref`s repeat subschemas, or loop without moving into the arguments); they are not
    /// checked and the call is not sent (see `super::catalog::cost`).
    #[error("{tool} refused: its arguments cannot be checked against its schema: {why}")]
    TooCostlyToCheck {
        /// The tool's Python name.
        tool: String,
        /// Why, with the limit.
        why: String,
    },
    /// The run has sent as many calls as its budget allows.
    #[error("{tool} refused: this run's budget of {max} tool calls is spent")]
    BudgetSpent {
        /// The tool's Python name.
        tool: String,
        /// The run's budget, in calls.
        max: u32,
    },
    /// A private tool was called earlier in the session, and this one is not private
    /// (README, "Private data").
    #[error(
        "{tool} refused: a private tool was called earlier in this session, so only private tools can be called until the session ends"
    )]
    PrivateOnly {
        /// The tool's Python name.
        tool: String,
    },
    /// The tool's server is not running (it failed to start, or died and is not back yet).
    #[error("{tool} failed: the server {server:?} is not running; a later run starts it again")]
    ServerDown {
        /// The tool's Python name.
        tool: String,
        /// The server's name.
        server: String,
    },
    /// The result, as the string the code would get, is over the server's limit.
    #[error(
        "{tool}'s result is {bytes} bytes, over the limit of {limit} bytes; it was refused, not cut. \
The limit is raised with {}",
        raise_result_limit(.config_entry)
    )]
    ResultTooLarge {
        /// The tool's Python name.
        tool: String,
        /// Size of the result, in bytes.
        bytes: usize,
        /// The limit in force, in bytes.
        limit: usize,
        /// The server's config entry, or `None` for the server given after `--` (then
        /// only `--max-result-bytes` raises the limit).
        config_entry: Option<String>,
    },
    /// The server did not answer within the call timeout; the call was cancelled.
    #[error(
        "{tool} did not answer within {} s; the call was cancelled",
        .timeout.as_secs_f64()
    )]
    TimedOut {
        /// The tool's Python name.
        tool: String,
        /// The timeout in force.
        timeout: Duration,
    },
    /// The call needs approval and its arguments, escaped as the request shows them, are
    /// longer than a request shows whole (`MAX_SHOWN_ARGS_CHARS` of
    /// `governance::approval`); nobody is asked, since nobody could see every character
    /// that would reach the server (README "Governance").
    #[error(
        "{tool} refused: arguments too long to show for approval: {chars} characters, limit {limit}"
    )]
    TooLongToApprove {
        /// The tool's Python name.
        tool: String,
        /// Characters of the arguments as the request would show them.
        chars: usize,
        /// The most a request shows.
        limit: usize,
    },
    /// A person declined or dismissed the approval request (README "Governance").
    #[error("declined by the user")]
    Declined,
    /// The call needs approval and a person declined or cancelled an earlier question of
    /// the same run: nobody is asked again in that run (README "Governance").
    #[error(
        "{tool} refused: it needs a person's approval, and the user declined a call earlier in this run, so nobody is asked again in it; the call was not sent"
    )]
    DeclinedEarlier {
        /// The tool's Python name.
        tool: String,
    },
    /// The call needs approval and nobody could be asked (no elicitation capability, no
    /// client, the request failed). The text names the function the code called (and its
    /// server's entry when the bridge has several), the settings that ask for approval, why
    /// nobody could, and what would let a later call be asked about.
    #[error(
        "{tool}{} refused: it needs a person's approval ({set_by}), and {why}",
        of_server(.server)
    )]
    NotApproved {
        /// The tool's Python name.
        tool: String,
        /// Its server's name (`ServerEntry::shown_name`) when the bridge has several.
        server: Option<String>,
        /// The settings that ask for approval (`ApprovalSources::describe` of
        /// `governance::policy`).
        set_by: String,
        /// Why nobody could approve it.
        why: Unavailable,
    },
    /// The audit log cannot be written and `--audit-required` is set.
    #[error("{tool} refused: {why}")]
    AuditFailed {
        /// The tool's Python name.
        tool: String,
        /// The log's error.
        why: String,
    },
    /// The connection to the server broke during the call.
    #[error("{tool} failed: {why}")]
    Broken {
        /// The tool's Python name.
        tool: String,
        /// What broke, as the transport says it.
        why: String,
    },
}

/// Why a call did not produce a result.
#[derive(Debug, Clone, PartialEq)]
pub enum CallError {
    /// The bridge refused the call; its text is the bridge's own and is shown in full
    /// (capped).
    Refused(Refusal),
    /// The wrapped server answered with `isError`; its text is shown (capped).
    ToolFailed(String),
    /// Something failed on the host; only this type name reaches the code.
    HostFault(&'static str),
}

impl Refusal {
    /// The variant as a short snake_case word (`no_such_tool`, `outside_schema`,
    /// `private_only`, ...): the `reason` label of the refusals counter in `/metrics`.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoSuchTool { .. } => "no_such_tool",
            Self::NotADict { .. } => "not_a_dict",
            Self::ArgumentsTooLarge { .. } => "arguments_too_large",
            Self::OutsideSchema { .. } => "outside_schema",
            Self::TooCostlyToCheck { .. } => "too_costly_to_check",
            Self::BudgetSpent { .. } => "budget_spent",
            Self::PrivateOnly { .. } => "private_only",
            Self::ServerDown { .. } => "server_down",
            Self::ResultTooLarge { .. } => "result_too_large",
            Self::TimedOut { .. } => "timed_out",
            Self::TooLongToApprove { .. } => "too_long_to_approve",
            Self::Declined => "declined",
            Self::DeclinedEarlier { .. } => "declined_earlier",
            Self::NotApproved { .. } => "not_approved",
            Self::AuditFailed { .. } => "audit_failed",
            Self::Broken { .. } => "broken",
        }
    }
}

impl CallError {
    /// The `ToolError` message for the code, at most [`MAX_ERROR_CHARS`] characters.
    pub fn message(&self) -> String {
        match self {
            Self::Refused(refusal) => cap(&refusal.to_string(), MAX_ERROR_CHARS),
            Self::ToolFailed(text) => cap(text, MAX_ERROR_CHARS),
            Self::HostFault(kind) => cap(kind, MAX_ERROR_CHARS),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_given_after_the_command_line_is_shown_by_its_command_name() {
        let mut entry = crate::bridge::ServerEntry::stdio("server", "/usr/bin/python3", ["s.py"]);
        assert_eq!(entry.shown_name(), "server");
        entry.from_command_line = true;
        assert_eq!(entry.shown_name(), "python3");
        entry.spec.name = "math".into();
        entry.from_command_line = false;
        assert_eq!(entry.shown_name(), "math");
    }

    #[test]
    fn each_refusal_reads_as_the_tool_error_the_code_sees() {
        let tool = || "add".to_owned();
        for (refusal, text) in [
            (
                Refusal::NoSuchTool {
                    name: "x".repeat(100),
                },
                format!(
                    "there is no tool called {}…; TOOLS lists the tools as they were when this run started, and a server may have removed this one since",
                    "x".repeat(63)
                ),
            ),
            (
                Refusal::NotADict { tool: tool() },
                "add refused: the arguments must be a dict".into(),
            ),
            (
                Refusal::ArgumentsTooLarge {
                    tool: tool(),
                    bytes: 20_000,
                },
                "add refused: the arguments are 20000 bytes, over the 16 KiB limit".into(),
            ),
            (
                Refusal::BudgetSpent {
                    tool: tool(),
                    max: 3,
                },
                "add refused: this run's budget of 3 tool calls is spent".into(),
            ),
            (
                Refusal::ServerDown {
                    tool: tool(),
                    server: "math".into(),
                },
                "add failed: the server \"math\" is not running; a later run starts it again".into(),
            ),
            (
                Refusal::TimedOut {
                    tool: tool(),
                    timeout: Duration::from_millis(1500),
                },
                "add did not answer within 1.5 s; the call was cancelled".into(),
            ),
            (
                Refusal::ResultTooLarge {
                    tool: tool(),
                    bytes: 100_000,
                    limit: 65_536,
                    config_entry: Some("math".into()),
                },
                "add's result is 100000 bytes, over the limit of 65536 bytes; it was refused, not cut. \
The limit is raised with --max-result-bytes, or \"maxResultBytes\" in the config entry of \"math\""
                    .into(),
            ),
            (
                Refusal::NotApproved {
                    tool: "json_".into(),
                    server: None,
                    set_by: "--approve".into(),
                    why: Unavailable::NoElicitation,
                },
                "json_ refused: it needs a person's approval (--approve), and this MCP client did not declare the elicitation capability, so nobody can be asked; the call was not sent. Only a client that supports elicitation (form mode) can approve it".into(),
            ),
            (
                Refusal::NotApproved {
                    tool: "notes__add".into(),
                    server: Some("notes".into()),
                    set_by: "\"approve\" in the config entry \"notes\"".into(),
                    why: Unavailable::NoClient,
                },
                "notes__add (server \"notes\") refused: it needs a person's approval (\"approve\" in the config entry \"notes\"), and this run has no MCP client to ask (exec, or a run without an approver); the call was not sent. Run the code through serve, whose MCP client is asked".into(),
            ),
            (
                Refusal::ResultTooLarge {
                    tool: tool(),
                    bytes: 100_000,
                    limit: 65_536,
                    config_entry: None,
                },
                "add's result is 100000 bytes, over the limit of 65536 bytes; it was refused, not cut. \
The limit is raised with --max-result-bytes"
                    .into(),
            ),
        ] {
            assert_eq!(CallError::Refused(refusal).message(), text);
        }
    }

    #[test]
    fn messages_are_capped_at_500_characters() {
        let e = CallError::Refused(Refusal::Broken {
            tool: "t".into(),
            why: "x".repeat(10_000),
        });
        assert_eq!(e.message().chars().count(), MAX_ERROR_CHARS);
        let e = CallError::ToolFailed("é".repeat(501));
        assert_eq!(e.message().chars().count(), MAX_ERROR_CHARS);
        assert_eq!(
            CallError::HostFault("TransportClosed").message(),
            "TransportClosed"
        );
    }
}
