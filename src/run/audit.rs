//! A run's own audit records: `run_start` before the code reaches a sandbox, `run_end` with
//! its outcome after its last call (`docs/audit-log.md`).
//!
//! With `--audit-required` a run fails closed: one whose `run_start` cannot be written never
//! starts, and one that lost any record while it ran (or whose `run_end` cannot be written)
//! is reported stopped, with the log's error, whatever the code did.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crate::bridge::{Bridge, CallBudget};
use crate::governance::audit::{AuditLog, Outcome, Record, RunEnd, RunStart, sha256_hex};
use crate::sandbox::SandboxError;

use super::RunReport;

/// The session of runs whose caller names none (`serve` over stdio, `exec`, a library
/// caller): one id per process.
pub fn process_session() -> &'static str {
    static SESSION: OnceLock<String> = OnceLock::new();
    SESSION.get_or_init(|| uuid::Uuid::new_v4().to_string())
}

/// The audit of one run, from `run_start` to `run_end`.
pub(super) struct RunAudit {
    log: Arc<AuditLog>,
    budget: Arc<CallBudget>,
    code_sha256: String,
    started: Instant,
    failed_before: u64,
}

impl RunAudit {
    /// Write the run's `run_start`; `None` when there is no audit log.
    ///
    /// # Errors
    /// The reason the run must not start: its record could not be written and the log is
    /// required.
    pub(super) async fn begin(
        bridge: &Bridge,
        budget: &Arc<CallBudget>,
        code: &str,
    ) -> Result<Option<Self>, String> {
        let Some(log) = bridge.audit() else {
            return Ok(None);
        };
        let failed_before = log.failed_writes();
        let code_sha256 = sha256_hex(code.as_bytes());
        let written = log
            .write(&Record::RunStart(RunStart {
                run: budget.run_id().to_owned(),
                session: budget.session_id().to_owned(),
                code_sha256: code_sha256.clone(),
                code: log.code_field(code),
            }))
            .await;
        match written {
            Err(e) if log.required() => Err(format!(
                "{e}; --audit-required refuses to run code without the audit log"
            )),
            _ => Ok(Some(Self {
                log: log.clone(),
                budget: budget.clone(),
                code_sha256,
                started: Instant::now(),
                failed_before,
            })),
        }
    }

    /// Write the run's `run_end` for `report`; with a required log that lost a record of
    /// this run, turn the result into a stop that says so.
    pub(super) async fn end(self, report: &mut Result<RunReport, SandboxError>) {
        let (outcome, stopped_reason) = match report {
            Ok(report) if report.result.stopped => (Outcome::Stopped, report.result.error.clone()),
            Ok(report) if report.result.error.is_some() => (Outcome::Error, None),
            Ok(_) => (Outcome::Ok, None),
            Err(e) => (Outcome::Failed, Some(e.to_string())),
        };
        let written = self
            .log
            .write(&Record::RunEnd(RunEnd {
                run: self.budget.run_id().to_owned(),
                session: self.budget.session_id().to_owned(),
                code_sha256: self.code_sha256.clone(),
                outcome,
                stopped_reason,
                calls: self.budget.used(),
                duration_ms: crate::bridge::millis(self.started),
            }))
            .await;
        let lost = self.log.failed_writes() != self.failed_before || written.is_err();
        if let (true, true, Ok(report)) = (self.log.required(), lost, report) {
            let why = self
                .log
                .failure()
                .unwrap_or_else(|| "a record of this run could not be written".into());
            report.result.stopped = true;
            report.result.error = Some(format!(
                "the audit log failed during this run ({why}); --audit-required: the run counts as failed"
            ));
        }
    }
}
