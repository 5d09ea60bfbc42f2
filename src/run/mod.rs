//! One run: a sandbox, the code, its calls, the deadline, the result.
//!
//! The host sends `start` and one `cell`, then reads the runner's lines until `done`, a
//! protocol violation, the sandbox's exit, or the deadline. A cell that does not end in `done`
//! returns the output the runner streamed until then. Calls are served concurrently, at most
//! [`MAX_CALLS_IN_FLIGHT`] at once: the runner writes no more calls than that before their
//! results come (the rest wait in the runner, and are never written if the code ends first),
//! and the host reads output and `done` whatever calls are in flight; a call line past the
//! cap (only a forged one) stops its reading until a call finishes. The deadline covers
//! everything, calls included: at the deadline the output already written is read (without
//! waiting, at most 4 MiB of lines), the sandbox is killed and calls still in flight are
//! cancelled.

mod audit;
mod cell_rules;
mod ending;
mod held;
mod input;
pub(crate) mod protocol;

pub use audit::process_session;
mod stop;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use self::protocol::StreamedOutput;
use self::stop::Stop;
use crate::bridge::refusal::CallError;
use crate::bridge::{Bridge, CallBudget, Taint};
use crate::governance::approval::Approver;
use crate::sandbox::{Backend, CpuPriority, HeldLimits, SandboxError};

pub mod pool;

/// Tool calls of one run served at the same time; the runner is told it (`start`'s
/// `limits.calls_in_flight`) and writes no more before their results come.
pub const MAX_CALLS_IN_FLIGHT: usize = 16;
/// Time a runner has to exit after `done`, or after closing its pipe, before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// The result of one run: `{"stdout", "error", "truncated", "stopped"}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunResult {
    /// What the code printed, at most 8 KiB.
    pub stdout: String,
    /// `None` on success; a traceback tail or the reason the run was stopped.
    pub error: Option<String>,
    /// More was printed than was kept.
    pub truncated: bool,
    /// The run did not end on its own: deadline, output flood, protocol violation, a crash.
    pub stopped: bool,
}

impl RunResult {
    /// The result object as one line of JSON, written like Python's `json.dumps`.
    pub fn to_json(&self) -> String {
        crate::pyjson::to_string(&json!({
            "stdout": self.stdout,
            "error": self.error,
            "truncated": self.truncated,
            "stopped": self.stopped,
        }))
    }

    /// Whether the code finished without an error.
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && !self.stopped
    }

    /// A stopped result with what the cell streamed; `why` becomes its `error`.
    fn stopped(output: StreamedOutput, why: &dyn std::fmt::Display) -> Self {
        Self {
            stdout: output.text,
            error: Some(why.to_string()),
            truncated: output.truncated,
            stopped: true,
        }
    }
}

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Wall-clock deadline of the whole run, from the call of [`run_code`] (sandbox start,
    /// code and calls included). `serve` and `exec` hold it to 1..=3600 s; the library
    /// takes any length, and one too long for a clock to count to (`Duration::MAX` for "no
    /// deadline") is taken as [`FAR_DEADLINE`].
    pub deadline: Duration,
    /// Calls the run may send.
    pub max_calls: u32,
}

impl Default for RunOptions {
    /// 90 s and 200 calls ([`crate::limits::DEFAULT_DEADLINE_SECS`],
    /// [`crate::limits::DEFAULT_MAX_CALLS`]).
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(crate::limits::DEFAULT_DEADLINE_SECS),
            max_calls: crate::limits::DEFAULT_MAX_CALLS,
        }
    }
}

/// The error of a run that was cancelled: by the client's `notifications/cancelled` for its
/// request, or because the client went away.
pub const CANCELLED: &str = "the run was cancelled by the client; the sandbox was killed";

/// How a caller steers one run while it lasts: it may cancel the run, and it hears what
/// the run does ([`RunEvent`]).
#[derive(Debug, Clone, Default)]
pub struct Steering {
    /// Cancelled: a run not started yet never starts; a running sandbox is killed at once,
    /// the calls it has in flight are dropped (their servers are then sent
    /// `notifications/cancelled`), and nothing it sends later reaches a server.
    pub cancel: CancellationToken,
    /// Where [`RunEvent`]s go, if anyone listens.
    pub events: Option<mpsc::UnboundedSender<RunEvent>>,
    /// The private-data taint of the client session the run belongs to (the default: a
    /// fresh one, a session of its own, as for `exec`). Runs that share one (clones of a
    /// [`Taint`] share its state) share the private-data rule: after a private call in any
    /// of them, only private tools can be called in all of them. `serve` gives every run of
    /// an MCP session the session's taint.
    pub taint: Taint,
    /// Who approves the calls that need it (`serve`: the request's MCP client); `None`
    /// refuses them.
    pub approver: Option<Arc<dyn Approver>>,
    /// The MCP session of the run, for the audit log (default: [`process_session`]).
    pub session: Option<String>,
}

impl Steering {
    /// The budget of one run under this steering: `max_calls`, the session's taint, a
    /// fresh run id in the session, and the approver.
    fn budget(&self, max_calls: u32) -> Arc<CallBudget> {
        let budget = CallBudget::in_session(max_calls, self.taint.clone())
            .approved_by(self.approver.clone());
        Arc::new(match &self.session {
            Some(session) => budget.in_audit_session(session.clone()),
            None => budget,
        })
    }

    fn tell(&self, event: RunEvent) {
        if let Some(events) = &self.events {
            let _ = events.send(event);
        }
    }
}

/// What happens in a run, as it happens (for progress notifications).
#[derive(Debug, Clone, PartialEq)]
pub enum RunEvent {
    /// The sandbox started and was sent the code.
    Started,
    /// A tool call finished (answered, refused or failed); `calls` is how many calls of
    /// this run have finished so far, `tool` the Python name of this one.
    CallFinished {
        /// Calls finished so far in this run, this one included.
        calls: u32,
        /// The tool's Python name.
        tool: String,
        /// How it ended.
        end: CallEnd,
    },
}

/// How one tool call ended (for counting; the code sees the result or the `ToolError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallEnd {
    /// The server answered with a result.
    Answered,
    /// The server answered with `isError` or an error: [`CallError::ToolFailed`].
    Failed,
    /// The bridge refused it: [`CallError::Refused`], `reason` its
    /// [`crate::bridge::refusal::Refusal::reason`].
    Refused {
        /// The refusal's kind, as a snake_case word.
        reason: &'static str,
    },
    /// A fault on the host: [`CallError::HostFault`].
    HostFault,
}

impl CallEnd {
    fn of<T>(outcome: &Result<T, CallError>) -> Self {
        match outcome {
            Ok(_) => Self::Answered,
            Err(CallError::ToolFailed(_)) => Self::Failed,
            Err(CallError::Refused(refusal)) => Self::Refused {
                reason: refusal.reason(),
            },
            Err(CallError::HostFault(_)) => Self::HostFault,
        }
    }
}

/// What a run reports besides its result.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The result object.
    pub result: RunResult,
    /// Which resource limits held in the sandbox; `None` when none was started (the run
    /// was cancelled first).
    pub limits: Option<HeldLimits>,
    /// Calls sent to wrapped servers.
    pub calls: u32,
    /// The sandbox came from the warm pool ([`pool`]) rather than a cold start.
    pub pooled: bool,
}

impl RunReport {
    /// Which limits held, as text ([`HeldLimits`]'s); empty when no sandbox was started.
    pub fn limits_text(&self) -> String {
        self.limits
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default()
    }
}

/// Run `code` in a fresh sandbox from `backend`, its calls checked by `bridge`.
///
/// Each run starts untainted (the private-data rule: README, "Private data"): its sandbox
/// is fresh, so no variable holds what an earlier run read. What a run prints leaves it,
/// though: when a model that saw one run's output writes the next run's code (an agent
/// loop), the data goes on in the model, and the runs of that loop must share one taint,
/// as `serve` does for an MCP session: run them with [`run_steered`] and a [`Steering`]
/// whose `taint` is a clone of one [`Taint`] kept for the loop (or of
/// [`HeldSandbox::taint`] when the loop also holds a sandbox).
///
/// # Errors
/// [`SandboxError`] when the sandbox could not be started at all (the launcher failed before
/// runner.py began); everything after that is a [`RunResult`].
pub async fn run_code(
    bridge: &Arc<Bridge>,
    backend: &dyn Backend,
    code: &str,
    options: &RunOptions,
) -> Result<RunReport, SandboxError> {
    run_steered(bridge, backend, code, options, &Steering::default()).await
}

/// [`run_code`], steered: cancelled by `steering.cancel`, its events sent to
/// `steering.events`, under the private-data taint `steering.taint`. A run cancelled while
/// its sandbox starts or runs returns a stopped result with the error [`CANCELLED`] at once,
/// and a run stopped by its deadline (or a protocol violation) returns its result at once
/// too: killing the sandbox and clearing its remains (its exit, cgroup or container) happen
/// in the background.
///
/// # Errors
/// As [`run_code`].
pub async fn run_steered(
    bridge: &Arc<Bridge>,
    backend: &dyn Backend,
    code: &str,
    options: &RunOptions,
    steering: &Steering,
) -> Result<RunReport, SandboxError> {
    run_in(
        bridge,
        HeldSandbox::start(bridge.clone(), backend),
        code,
        options,
        steering,
        None,
    )
    .await
}

/// Run `code` as the one cell of the sandbox `start` gives (a cold start or a take from the
/// pool), then end it. The deadline and the call budget start when `start` is called.
///
/// A pooled sandbox can die between its take and the cell (killed from outside while idle:
/// the take's liveness check cannot see a death that is still on its way, such as a
/// container whose attach connection has not ended yet), or be unable to answer (stopped,
/// frozen, paused, too slow). When it ends, or sends nothing within
/// [`pool::ACK_LIMIT`], before the runner acknowledged the cell (`began`, sent after it read
/// the cell and before any of the code runs: [`protocol`]), it is killed and nothing it
/// sends is read any more, so none of its code is heard and none of its calls reaches a
/// server; with `pool` the cell then runs in another sandbox under the same deadline: after
/// a death, the pool's next one (an idle one, or one started for it); after a silence, one
/// the run starts itself (a cold start, never held to [`pool::ACK_LIMIT`]), while the pool
/// replaces those that were idle beside the silent one ([`pool::Pool::suspect_idle`]), so a
/// run waits for an acknowledgement at most once. A sandbox that dies after `began` (the
/// code crashed, ran out of memory) reports that end: the code never runs twice.
///
/// The run's audit records (`run_start`, `run_end`) are written around all of it
/// ([`audit`]).
async fn run_in(
    bridge: &Arc<Bridge>,
    start: impl std::future::Future<Output = Result<HeldSandbox, SandboxError>>,
    code: &str,
    options: &RunOptions,
    steering: &Steering,
    pool: Option<PoolSide<'_>>,
) -> Result<RunReport, SandboxError> {
    if steering.cancel.is_cancelled() {
        return Ok(cancelled());
    }
    // Servers that changed their tools are read again (bounded); failed ones are retried in
    // the background.
    tokio::select! {
        biased;
        () = steering.cancel.cancelled() => return Ok(cancelled()),
        () = bridge.refresh() => {}
    }
    let budget = steering.budget(options.max_calls);
    let audit = match audit::RunAudit::begin(bridge, &budget, code).await {
        Ok(audit) => audit,
        Err(why) => {
            return Ok(RunReport {
                result: RunResult::stopped(StreamedOutput::default(), &why),
                limits: None,
                calls: 0,
                pooled: false,
            });
        }
    };
    let mut report = run_budgeted(start, code, options, steering, pool, &budget).await;
    if let Some(audit) = audit {
        audit.end(&mut report).await;
    }
    report
}

/// The report of a run cancelled before its sandbox ran anything.
fn cancelled() -> RunReport {
    RunReport {
        result: RunResult::stopped(StreamedOutput::default(), &Stop::Cancelled),
        limits: None,
        calls: 0,
        pooled: false,
    }
}

/// [`run_in`] after its `run_start`.
async fn run_budgeted(
    start: impl std::future::Future<Output = Result<HeldSandbox, SandboxError>>,
    code: &str,
    options: &RunOptions,
    steering: &Steering,
    pool: Option<PoolSide<'_>>,
    budget: &Arc<CallBudget>,
) -> Result<RunReport, SandboxError> {
    let deadline = deadline_after(Instant::now(), options.deadline);
    let mut held = match start_within(start, deadline, options.deadline, steering).await {
        Ok(started) => started?,
        Err(stopped) => return Ok(stopped),
    };
    steering.tell(RunEvent::Started);
    // Until a sandbox acknowledges the cell: each pooled one thrown away here is gone from
    // the pool, and a cold one is never thrown away here; the deadline bounds it all. A
    // pooled one that died unheard costs the run next to nothing, so the run takes the next;
    // one that stalled cost it `ACK_LIMIT`, so the run starts a sandbox of its own, held to
    // no such bound, and pays that wait once whatever else in the pool stalls.
    let report = loop {
        held.quick_stop = true;
        let sent = std::time::Instant::now();
        let report = held
            .cell_until(code, budget.clone(), deadline, options.deadline, steering)
            .await;
        let Some(side) = pool.filter(|_| held.pooled && held.unheard) else {
            break report;
        };
        let stalled = held.stalled();
        held.discard_into(Some(side.endings));
        let start = async {
            if stalled {
                tracing::info!(
                    "pooled sandbox thrown away: it did not acknowledge the cell within {} s; the run starts cold",
                    pool::ACK_LIMIT.as_secs_f64()
                );
                side.pool.suspect_idle(sent);
                side.pool.start_cold().await
            } else {
                tracing::info!(
                    "pooled sandbox thrown away: it ended before it acknowledged the cell; the run takes another"
                );
                side.pool.take().await.map(|(held, _)| held)
            }
        };
        held = match start_within(start, deadline, options.deadline, steering).await {
            Ok(started) => started?,
            Err(stopped) => return Ok(stopped),
        };
    };
    match (held.abandoned, pool) {
        (true, _) => held.discard_into(pool.map(|side| side.endings)),
        // The result does not wait for the sandbox's exit, its cgroup's removal or
        // `docker rm`; the pool's owner waits for these endings ([`pool::Pool::close`]).
        // The runner's exit and the rest of the ending run at background priority, so they
        // yield the CPU to the reply on its way and to the next run.
        (false, Some(side)) => {
            side.endings.spawn(async move {
                held.set_priority(CpuPriority::Background).await;
                held.close().await;
            });
        }
        (false, None) => held.close().await,
    }
    report
}

/// Wait for a sandbox's start (a cold start or a take from the pool) within the run's
/// `deadline` (its length `length`, for the error) and its cancel. When either comes first,
/// the start is dropped, which kills whatever it had started, and the run's report is the
/// error: the same stopped result as a deadline or a cancel while the code runs.
async fn start_within(
    start: impl std::future::Future<Output = Result<HeldSandbox, SandboxError>>,
    deadline: Instant,
    length: Duration,
    steering: &Steering,
) -> Result<Result<HeldSandbox, SandboxError>, RunReport> {
    tokio::select! {
        biased;
        () = steering.cancel.cancelled() => Err(cancelled()),
        () = tokio::time::sleep_until(deadline) => Err(RunReport {
            result: RunResult::stopped(StreamedOutput::default(), &Stop::Deadline(length)),
            limits: None,
            calls: 0,
            pooled: false,
        }),
        started = start => Ok(started),
    }
}

/// What a run taken from a pool uses besides the pool's sandbox: the pool, for another
/// sandbox (see [`run_in`]), and the tracker of the endings it leaves to the background.
#[derive(Clone, Copy)]
struct PoolSide<'a> {
    pool: &'a pool::Pool,
    endings: &'a TaskTracker,
}

pub use held::HeldSandbox;

/// The length a deadline too long for [`Instant`] to hold is cut to: 30 years, past any run
/// and within every clock's range.
pub const FAR_DEADLINE: Duration = Duration::from_secs(30 * 365 * 86_400);

/// The instant `length` after `start`, a length over [`FAR_DEADLINE`] cut to it (the plain
/// `start + length` panics when it overflows `Instant`).
fn deadline_after(start: Instant, length: Duration) -> Instant {
    start + length.min(FAR_DEADLINE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_too_long_for_the_clock_is_cut_to_the_far_deadline() {
        let now = Instant::now();
        assert_eq!(deadline_after(now, Duration::MAX), now + FAR_DEADLINE);
        assert_eq!(
            deadline_after(now, Duration::from_secs(90)),
            now + Duration::from_secs(90)
        );
    }
}
