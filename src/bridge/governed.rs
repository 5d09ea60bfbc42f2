//! The governance hooks of the call path: each call's audit record, and the approval step.
//!
//! [`Bridge::call`] wraps the checks of `mod.rs` ([`Bridge::check_and_send`]): it numbers
//! the call, times it, and writes one `call` record with its verdict when it is over
//! (`docs/audit-log.md`). The approval step ([`Bridge::ask_approval`]) runs after the
//! budget and the private-data rule were checked (without spending anything) and before the
//! call is sent; those two are checked again when it is sent, since other calls may have
//! spent the budget or tainted the process while a person decided.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::Instant;

use serde_json::Value;

use super::refusal::{CallError, Refusal};
use super::upstream::ticket::WriteTicket;
use super::{Bridge, CallBudget};
use crate::governance::approval::{
    Answer, ApprovalRequest, Approver, MAX_SHOWN_ARGS_CHARS, Unavailable,
};
use crate::governance::audit::{
    Approval, AuditLog, CallRecord, Decision, RUN_ENDED, Record, Verdict,
};

/// The governance side of one run's [`CallBudget`]: the run's identity in the audit log
/// and who approves the calls that need it.
#[derive(Debug)]
pub(super) struct RunTag {
    /// The run's id in the audit log (a UUID v4).
    pub(super) run: String,
    /// The MCP session the run belongs to.
    pub(super) session: String,
    /// Who is asked before a call that needs approval; `None` refuses those calls.
    pub(super) approver: Option<Arc<dyn Approver>>,
    /// Calls taken up so far.
    pub(super) seq: AtomicU32,
    /// Held while a person is asked about one of the run's calls: one question at a time.
    pub(super) asking: tokio::sync::Mutex<()>,
    /// A person declined or cancelled a question of this run: nobody is asked again in it.
    pub(super) declined: AtomicBool,
}

impl Default for RunTag {
    /// A fresh run id in this process's session ([`crate::run::process_session`]), nobody
    /// to approve calls.
    fn default() -> Self {
        Self {
            run: uuid::Uuid::new_v4().to_string(),
            session: crate::run::process_session().to_owned(),
            approver: None,
            seq: AtomicU32::new(0),
            asking: tokio::sync::Mutex::new(()),
            declined: AtomicBool::new(false),
        }
    }
}

impl CallBudget {
    /// The run belongs to this MCP session (for the audit log).
    pub fn in_audit_session(mut self, session: impl Into<String>) -> Self {
        self.tag.session = session.into();
        self
    }

    /// Calls that need approval are asked of `approver` (none: they are refused).
    pub fn approved_by(mut self, approver: Option<Arc<dyn Approver>>) -> Self {
        self.tag.approver = approver;
        self
    }

    /// The run's id in the audit log (a UUID v4).
    pub fn run_id(&self) -> &str {
        &self.tag.run
    }

    /// The run's session in the audit log.
    pub fn session_id(&self) -> &str {
        &self.tag.session
    }
}

/// The call a person is asked about, and what its refusal names.
pub(super) struct Asked<'a> {
    /// The name the code called.
    pub(super) py_name: &'a str,
    /// The server's name as its user knows it (`ServerEntry::shown_name`).
    pub(super) server: &'a str,
    /// The tool's MCP name.
    pub(super) tool: &'a str,
    /// The settings that ask for approval (`ApprovalSources::describe`).
    pub(super) set_by: String,
    /// The bridge wraps more than one server: a refusal names this one.
    pub(super) several_servers: bool,
}

/// What one call's checks found, for its audit record.
#[derive(Debug, Default)]
pub(super) struct CallTrace {
    /// The server and the MCP name of a known tool.
    pub(super) target: Option<(String, String)>,
    /// The call passed every check and was handed to its server's connection.
    pub(super) sent: bool,
    /// Whether the request was then written to the server (with `--audit` only): settled
    /// when the record is made, so a request not written by then never is.
    pub(super) ticket: Option<WriteTicket>,
    /// The approval step, when there was one.
    pub(super) approval: Option<Approval>,
    /// Bytes of the result's text and its `isError`, when the server answered.
    pub(super) result: Option<(usize, bool)>,
    /// When a person was asked, while no answer has come.
    pub(super) asking: Option<Instant>,
}

/// One call's audit record in the making. [`Bridge::call`] writes it when the call is over;
/// when the run ends first and the call's future is dropped, `Drop` writes it: `reason`
/// [`RUN_ENDED`], and an approval still waiting for its answer as [`Decision::Unanswered`].
struct PendingRecord<'a> {
    /// The log, until the record is written.
    log: Option<Arc<AuditLog>>,
    budget: &'a CallBudget,
    py_name: &'a str,
    args: &'a Value,
    seq: u32,
    started: Instant,
    trace: CallTrace,
}

impl PendingRecord<'_> {
    fn record(&self, log: &AuditLog, reason: Option<String>) -> Record {
        let (server, tool) = match &self.trace.target {
            Some((server, tool)) => (Some(server.clone()), tool.clone()),
            None => (
                None,
                crate::governance::audit::recorded_tool_name(self.py_name),
            ),
        };
        let approval = match (self.trace.asking, &self.trace.approval) {
            (Some(asked), _) => Some(Approval {
                decision: Decision::Unanswered,
                wait_ms: millis(asked),
            }),
            (None, approval) => approval.clone(),
        };
        Record::Call(CallRecord {
            run: self.budget.tag.run.clone(),
            session: self.budget.tag.session.clone(),
            seq: self.seq,
            server,
            tool,
            args: log.args_field(self.args),
            verdict: match (self.trace.sent, &self.trace.ticket) {
                (false, _) => Verdict::Refused,
                (true, Some(ticket)) if !ticket.settle() => Verdict::Withdrawn,
                (true, _) => Verdict::Sent,
            },
            reason,
            approval,
            duration_ms: millis(self.started),
            result_bytes: self.trace.result.map(|(bytes, _)| bytes),
            is_error: self.trace.result.map(|(_, is_error)| is_error),
        })
    }
}

impl Drop for PendingRecord<'_> {
    fn drop(&mut self) {
        if let Some(log) = self.log.take() {
            let record = self.record(&log, Some(RUN_ENDED.to_owned()));
            // Nothing can wait in a drop: the record is queued. A failure is remembered by
            // the log and fails the run when it is required.
            log.write_unwaited(&record);
        }
    }
}

impl Bridge {
    /// Check one call from the code and, if it passes, send it; write its audit record.
    /// Returns the string for the code, or the `ToolError` to raise.
    ///
    /// With `--audit-required`, a call whose record cannot be written raises a `ToolError`
    /// saying so (its result is not handed on), and later calls are refused before they go
    /// out.
    pub async fn call(
        &self,
        budget: &CallBudget,
        py_name: &str,
        args: &Value,
    ) -> Result<String, CallError> {
        let seq = budget.tag.seq.fetch_add(1, Ordering::SeqCst) + 1;
        // Written when the call is over, or, when the run ends first (its deadline, a
        // cancel) and this future is dropped, by the guard's `Drop`.
        let mut pending = PendingRecord {
            log: self.audit().cloned(),
            budget,
            py_name,
            args,
            seq,
            started: Instant::now(),
            trace: CallTrace::default(),
        };
        let outcome = self
            .check_and_send(budget, py_name, args, &mut pending.trace)
            .await;
        let Some(log) = pending.log.take() else {
            return outcome;
        };
        let reason = match &outcome {
            Err(e @ CallError::Refused(_)) => Some(e.message()),
            Err(e @ CallError::HostFault(_)) => Some(e.message()),
            Ok(_) | Err(CallError::ToolFailed(_)) => None,
        };
        let record = pending.record(&log, reason);
        match log.write(&record).await {
            Err(e) if log.required() => Err(CallError::Refused(Refusal::AuditFailed {
                tool: py_name.to_owned(),
                why: format!("{e}; --audit-required keeps its result from the code"),
            })),
            _ => outcome,
        }
    }

    /// Ask a person about a call to `call.server`'s `call.tool` (`call.py_name` to the
    /// code); `Ok` to send it. Refuses with [`Refusal::Declined`] on decline or cancel, with
    /// [`Refusal::NotApproved`] when nobody can be asked, and without asking with
    /// [`Refusal::TooLongToApprove`] when the arguments are too long to show whole, or with
    /// [`Refusal::DeclinedEarlier`] once a person declined or cancelled a question of this
    /// run. A run asks one question at a time: its other calls that need approval wait
    /// their turn (the deadline still runs).
    pub(super) async fn ask_approval(
        &self,
        budget: &CallBudget,
        call: Asked<'_>,
        args: &Value,
        trace: &mut CallTrace,
    ) -> Result<(), CallError> {
        let py_name = call.py_name;
        let request = ApprovalRequest {
            server: call.server.to_owned(),
            tool: call.tool.to_owned(),
            args: args.clone(),
        };
        if let Err(chars) = request.shown_args() {
            // Nobody is asked about what they could not see whole.
            trace.approval = Some(Approval {
                decision: Decision::Unavailable,
                wait_ms: 0,
            });
            return Err(CallError::Refused(Refusal::TooLongToApprove {
                tool: py_name.to_owned(),
                chars,
                limit: MAX_SHOWN_ARGS_CHARS,
            }));
        }
        // One question at a time, so a person is never faced with a pile of them; after a
        // decline nobody is asked again in this run.
        let _turn = budget.tag.asking.lock().await;
        if budget.tag.declined.load(Ordering::SeqCst) {
            return Err(CallError::Refused(Refusal::DeclinedEarlier {
                tool: py_name.to_owned(),
            }));
        }
        let asked = Instant::now();
        trace.asking = Some(asked);
        let answer = match &budget.tag.approver {
            Some(approver) => approver.approve(request).await,
            None => Answer::Unavailable(Unavailable::NoClient),
        };
        let (decision, result) = match answer {
            Answer::Accept => (Decision::Accepted, Ok(())),
            Answer::Decline => (
                Decision::Declined,
                Err(CallError::Refused(Refusal::Declined)),
            ),
            Answer::Cancel => (
                Decision::Cancelled,
                Err(CallError::Refused(Refusal::Declined)),
            ),
            Answer::Unavailable(why) => (
                Decision::Unavailable,
                Err(CallError::Refused(Refusal::NotApproved {
                    tool: py_name.to_owned(),
                    server: call.several_servers.then(|| call.server.to_owned()),
                    set_by: call.set_by,
                    why,
                })),
            ),
        };
        if matches!(decision, Decision::Declined | Decision::Cancelled) {
            budget.tag.declined.store(true, Ordering::SeqCst);
        }
        trace.asking = None;
        trace.approval = Some(Approval {
            decision,
            wait_ms: millis(asked),
        });
        result
    }

    /// The audit log, when `--audit` is set.
    pub fn audit(&self) -> Option<&Arc<AuditLog>> {
        self.audit.as_ref()
    }

    /// Write an audit record for every run and call to `log`.
    pub fn with_audit(mut self, log: Arc<AuditLog>) -> Self {
        self.audit = Some(log);
        self
    }
}

/// Milliseconds since `since`.
pub(crate) fn millis(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}
