//! The command-line options of governance, shared by `serve` and `exec` (README
//! "Governance").

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use super::audit::{ArgsMode, AuditOptions};
use super::policy::ApprovalRule;
use crate::bridge::ServerEntry;

/// `on` or `off`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Switch {
    /// Yes.
    On,
    /// No.
    Off,
}

/// `--audit*`, `--read-only`, `--approve*`.
#[derive(Args, Debug, Clone)]
pub(crate) struct GovernanceArgs {
    /// Append an audit record of every run and every tool call to FILE (JSON Lines, mode
    /// 0600; schema in docs/audit-log.md).
    #[arg(long, value_name = "FILE")]
    pub audit: Option<PathBuf>,
    /// How a call's arguments are recorded: full, digest (sha256 and size) or off.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        default_value = "digest",
        requires = "audit"
    )]
    pub audit_args: ArgsMode,
    /// Whether a run's record holds its code (its sha256 is always recorded).
    #[arg(
        long,
        value_enum,
        value_name = "WHEN",
        default_value = "on",
        requires = "audit"
    )]
    pub audit_code: Switch,
    /// Fail closed: refuse calls and fail runs when a record cannot be written.
    #[arg(long, requires = "audit")]
    pub audit_required: bool,
    /// Keep only tools annotated readOnlyHint: true, and none annotated destructiveHint:
    /// true (annotations are the server's own hints), on every server.
    #[arg(long)]
    pub read_only: bool,
    /// Ask the MCP client's user (elicitation) before each call to this tool goes out
    /// (repeatable; the names --allow takes).
    #[arg(long = "approve", value_name = "TOOL")]
    pub approve: Vec<String>,
    /// Ask before each call to a tool not annotated readOnlyHint: true, on every server.
    #[arg(long)]
    pub approve_destructive: bool,
}

impl GovernanceArgs {
    /// The audit log's options, when `--audit` is given.
    pub(crate) fn audit_options(&self) -> Option<AuditOptions> {
        self.audit.as_ref().map(|path| AuditOptions {
            path: path.clone(),
            args: self.audit_args,
            code: self.audit_code == Switch::On,
            required: self.audit_required,
        })
    }

    /// Put `--read-only`, `--approve` and `--approve-destructive` into the servers'
    /// selections, on top of what each entry says itself.
    pub(crate) fn apply(&self, entries: &mut [ServerEntry]) {
        for entry in entries {
            let selection = &mut entry.selection;
            selection.read_only |= self.read_only;
            let mut rule = std::mem::take(&mut selection.approve);
            if !self.approve.is_empty() {
                rule = rule.union(ApprovalRule::Tools(self.approve.iter().cloned().collect()));
                selection.approve_sources.approve_flag = true;
            }
            if self.approve_destructive {
                rule = ApprovalRule::Destructive;
                selection.approve_sources.destructive_flag = true;
            }
            selection.approve = rule;
        }
    }
}
