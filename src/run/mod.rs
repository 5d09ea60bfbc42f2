//! One run: a sandbox, the code, its calls, the deadline, the result.
//!
//! The host sends `start` and one `cell`, then reads the runner's lines until `done`, a
//! protocol violation, the sandbox's exit, or the deadline. A cell that does not end in `done`
//! returns the output the runner streamed until then. Calls are served concurrently
//! (at most [`MAX_CALLS_IN_FLIGHT`] at once; past that the host stops reading until one
//! finishes). The deadline covers everything, calls included: at the deadline the sandbox is
//! killed and calls still in flight are cancelled.

mod audit;
mod ending;
pub mod protocol;

pub use audit::process_session;
mod stop;

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use std::panic::AssertUnwindSafe;

use futures::FutureExt;

use self::ending::{STDERR_LOG_CHARS, ended_early, tail};
use self::protocol::{
    HostMessage, ProtocolViolation, RunnerLimits, RunnerMessage, StreamedOutput, parse_runner_line,
};
use self::stop::{Gone, NotReady, Stop};
use crate::bridge::refusal::CallError;
use crate::bridge::{Bridge, CallBudget, Taint};
use crate::governance::approval::Approver;
use crate::limits::MAX_PROTOCOL_LINE_BYTES;
use crate::lines::{LineRead, read_line};
use crate::sandbox::{Backend, HeldLimits, Sandbox, SandboxError};

pub mod pool;

/// Tool calls of one run served at the same time.
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
    /// Wall-clock deadline of the whole run.
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
    /// the calls it has in flight are dropped (rmcp then sends `notifications/cancelled`
    /// to their servers), and nothing it sends later reaches a server.
    pub cancel: CancellationToken,
    /// Where [`RunEvent`]s go, if anyone listens.
    pub events: Option<mpsc::UnboundedSender<RunEvent>>,
    /// The private-data taint of the client session the run belongs to (the default: a
    /// session of its own, as for `exec`).
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
/// `steering.events`. A run cancelled while its sandbox starts or runs returns a stopped
/// result with the error [`CANCELLED`] at once, and a run stopped by its deadline (or a
/// protocol violation) returns its result at once too: killing the sandbox and clearing its
/// remains (its exit, cgroup or container) happen in the background.
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
/// container whose `docker run` has not noticed yet). When it ends having sent nothing at
/// all for the cell (no output, no call, no result), nothing of the code reached anyone,
/// so with `cold` the cell runs again in a fresh sandbox from that backend, under the same
/// deadline.
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
    // Servers that changed their tools are read again, failed ones retried (bounded).
    tokio::select! {
        biased;
        () = steering.cancel.cancelled() => return Ok(cancelled()),
        () = bridge.refresh() => {}
    }
    let budget = steering.budget(options.max_calls);
    let audit = match audit::RunAudit::begin(bridge, &budget, code) {
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
        audit.end(&mut report);
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
    let deadline = Instant::now() + options.deadline;
    // A sandbox taken or started when the run is cancelled is dropped, which kills it.
    let started = tokio::select! {
        biased;
        () = steering.cancel.cancelled() => return Ok(cancelled()),
        started = start => started,
    };
    let mut held = started?;
    steering.tell(RunEvent::Started);
    // At most twice: a cold sandbox is not pooled, so it is never thrown away here.
    let report = loop {
        held.quick_stop = true;
        let report = held
            .cell_until(code, budget.clone(), deadline, options.deadline, steering)
            .await;
        let Some(side) = pool.filter(|_| held.pooled && held.died_unheard) else {
            break report;
        };
        tracing::info!(
            "pooled sandbox thrown away: it died before it began the run; the run starts cold"
        );
        held.discard_into(Some(side.endings));
        let started = tokio::select! {
            biased;
            () = steering.cancel.cancelled() => return Ok(cancelled()),
            started = HeldSandbox::start(side.bridge.clone(), side.backend) => started,
        };
        held = started?;
    };
    match (held.abandoned, pool) {
        (true, _) => held.discard_into(pool.map(|side| side.endings)),
        // The result does not wait for the sandbox's exit, its cgroup's removal or
        // `docker rm`; the pool's owner waits for these endings ([`pool::Pool::close`]).
        (false, Some(side)) => {
            side.endings.spawn(held.close());
        }
        (false, None) => held.close().await,
    }
    report
}

/// What a run taken from a pool uses besides the pool's sandbox: where to start a cold one
/// (see [`run_in`]), and the tracker of the endings it leaves to the background.
#[derive(Clone, Copy)]
struct PoolSide<'a> {
    bridge: &'a Arc<Bridge>,
    backend: &'a dyn Backend,
    endings: &'a TaskTracker,
}

/// One sandbox held across several cells, with the code's variables kept between them, for a
/// caller's own agent loop. Each cell has its own
/// call budget and deadline. After a cell is stopped (deadline, protocol violation, crash)
/// the sandbox is gone, and later cells are stopped at once.
pub struct HeldSandbox {
    bridge: Arc<Bridge>,
    to_runner: Option<mpsc::Sender<Vec<u8>>>,
    writer: tokio::task::JoinHandle<()>,
    reader: BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    control: Box<dyn crate::sandbox::SandboxControl>,
    limits: HeldLimits,
    dead: Option<Gone>,
    /// A stopped or cancelled cell leaves killing the sandbox to [`Self::discard`] instead
    /// of killing it and waiting for its end (set for one-cell runs, whose result must not
    /// wait on `docker kill`, `docker rm` and the like).
    quick_stop: bool,
    /// The last cell was stopped or cancelled and the sandbox not killed yet.
    abandoned: bool,
    /// Taken from the warm pool.
    pub(crate) pooled: bool,
    /// The last cell ended because the sandbox's output ended before it sent a single line
    /// for that cell.
    died_unheard: bool,
}

impl HeldSandbox {
    /// Start a sandbox from `backend` and send it the bridge's catalog.
    ///
    /// # Errors
    /// [`SandboxError`] when the backend cannot start one.
    pub async fn start(bridge: Arc<Bridge>, backend: &dyn Backend) -> Result<Self, SandboxError> {
        let sandbox = backend.spawn().await?;
        Ok(Self::begin(bridge, sandbox, false).await)
    }

    /// Hold `sandbox` and send it the bridge's catalog; with `ready`, the `start` asks the
    /// runner to say `ready` once it waits for its first cell (see [`Self::wait_ready`]).
    pub(crate) async fn begin(bridge: Arc<Bridge>, sandbox: Sandbox, ready: bool) -> Self {
        let Sandbox {
            stdin,
            stdout,
            control,
        } = sandbox;
        let (to_runner, writer_rx) = mpsc::channel::<Vec<u8>>(MAX_CALLS_IN_FLIGHT * 2);
        let writer = tokio::spawn(write_loop(stdin, writer_rx));
        let start = HostMessage::Start {
            tools: bridge.catalog().entries(),
            limits: RunnerLimits::default(),
            ready,
        };
        let _ = to_runner.send(start.to_line()).await;
        Self {
            bridge,
            to_runner: Some(to_runner),
            writer,
            reader: BufReader::with_capacity(64 * 1024, stdout),
            limits: control.limits(),
            control,
            dead: None,
            quick_stop: false,
            abandoned: false,
            pooled: false,
            died_unheard: false,
        }
    }

    /// Wait at most `limit` for the runner's `ready` (asked for by [`Self::begin`]).
    ///
    /// # Errors
    /// Why the sandbox is of no use (it ended, with its stderr; it sent something else; the
    /// time ran out); the sandbox is killed then.
    pub(crate) async fn wait_ready(&mut self, limit: Duration) -> Result<(), NotReady> {
        let mut line = Vec::new();
        let read = read_line(&mut self.reader, MAX_PROTOCOL_LINE_BYTES, &mut line);
        let why = match tokio::time::timeout(limit, read).await {
            Err(_) => NotReady::Timeout(limit),
            Ok(Ok(LineRead::TooLong)) => NotReady::TooLong,
            Ok(Err(_) | Ok(LineRead::Eof { .. })) => {
                let ending = match tokio::time::timeout(EXIT_GRACE, self.control.wait()).await {
                    Ok(ending) => ending,
                    Err(_) => {
                        self.control.kill().await;
                        self.control.wait().await
                    }
                };
                let why = NotReady::Ended {
                    status: ending.status,
                    stderr_tail: tail(&ending.stderr, STDERR_LOG_CHARS).to_owned(),
                };
                self.dead = Some(Gone::NotReady(why.clone()));
                return Err(why);
            }
            Ok(Ok(LineRead::Line)) => match parse_runner_line(&line) {
                Ok(RunnerMessage::Ready) => return Ok(()),
                _ => NotReady::Other,
            },
        };
        self.control.kill().await;
        self.control.wait().await;
        self.dead = Some(Gone::NotReady(why.clone()));
        Err(why)
    }

    /// Whether a sandbox that waits for a cell still does: its output neither ended nor holds
    /// anything (a waiting runner writes nothing). Does not wait.
    pub(crate) fn still_waiting(&mut self) -> bool {
        self.dead.is_none()
            && self.to_runner.is_some()
            && self.reader.buffer().is_empty()
            && self.reader.fill_buf().now_or_never().is_none()
    }

    /// Resolves when a sandbox that waits for a cell stops waiting: its output ends (it
    /// died: out of memory, a signal) or carries anything at all.
    pub(crate) async fn stops_waiting(&mut self) {
        let _ = self.reader.fill_buf().await;
    }

    /// Run one cell with a budget of `max_calls` and a deadline of `deadline` from now.
    ///
    /// # Errors
    /// [`SandboxError`] when the sandbox failed to start (the launcher's own error).
    pub async fn cell(
        &mut self,
        code: &str,
        max_calls: u32,
        deadline: Duration,
    ) -> Result<RunReport, SandboxError> {
        let steering = Steering::default();
        let budget = steering.budget(max_calls);
        let audit = match audit::RunAudit::begin(&self.bridge, &budget, code) {
            Ok(audit) => audit,
            Err(why) => {
                return Ok(RunReport {
                    result: RunResult::stopped(StreamedOutput::default(), &why),
                    limits: Some(self.limits.clone()),
                    calls: 0,
                    pooled: self.pooled,
                });
            }
        };
        let start = Instant::now();
        let mut report = self
            .cell_until(code, budget, start + deadline, deadline, &steering)
            .await;
        if let Some(audit) = audit {
            audit.end(&mut report);
        }
        report
    }

    async fn cell_until(
        &mut self,
        code: &str,
        budget: Arc<CallBudget>,
        deadline: Instant,
        length: Duration,
        steering: &Steering,
    ) -> Result<RunReport, SandboxError> {
        let result = match (&self.dead, &self.to_runner) {
            (Some(gone), _) => RunResult::stopped(
                StreamedOutput::default(),
                &format_args!("the sandbox is gone: {gone}"),
            ),
            (None, None) => {
                RunResult::stopped(StreamedOutput::default(), &"the sandbox is gone: closed")
            }
            (None, Some(to_runner)) => {
                let to_runner = to_runner.clone();
                let mut output = StreamedOutput::default();
                let _ = to_runner
                    .send(
                        HostMessage::Cell {
                            code: code.to_owned(),
                        }
                        .to_line(),
                    )
                    .await;
                match serve_cell(
                    &self.bridge,
                    &mut self.reader,
                    &to_runner,
                    deadline,
                    length,
                    budget.clone(),
                    &mut output,
                    steering,
                )
                .await
                {
                    Ok(result) => result,
                    Err(Stop::Cancelled) => {
                        // Nothing it sends is read any more; `discard` kills it in the
                        // background, so the run ends now (`docker kill` alone can take
                        // a second under load).
                        tracing::info!("a run was cancelled; its sandbox is killed");
                        self.abandon().await;
                        let result = RunResult::stopped(output, &Stop::Cancelled);
                        self.dead = Some(Gone::Stopped(Stop::Cancelled));
                        result
                    }
                    Err(Stop::Eof { heard }) => {
                        self.died_unheard = !heard;
                        // It closed its pipe: let it exit, so its own status is reported.
                        let ending =
                            match tokio::time::timeout(EXIT_GRACE, self.control.wait()).await {
                                Ok(ending) => ending,
                                Err(_) => {
                                    self.control.kill().await;
                                    self.control.wait().await
                                }
                            };
                        self.dead = Some(Gone::Stopped(Stop::Eof { heard }));
                        ended_early(ending, output)?
                    }
                    Err(stop) => {
                        self.abandon().await;
                        let result = RunResult::stopped(output, &stop);
                        self.dead = Some(Gone::Stopped(stop));
                        result
                    }
                }
            }
        };
        if result.stopped && self.dead.is_none() {
            // The runner exits after a stop of its own (output flood).
            self.dead = Some(Gone::RunnerStopped);
        }
        Ok(RunReport {
            result,
            limits: Some(self.limits.clone()),
            calls: budget.used(),
            pooled: self.pooled,
        })
    }

    /// End the sandbox: close its input, give it a moment to exit, then kill what is left.
    pub async fn close(mut self) {
        self.to_runner = None;
        if tokio::time::timeout(EXIT_GRACE, self.control.wait())
            .await
            .is_err()
        {
            self.control.kill().await;
        }
        self.writer.abort();
        self.control.kill().await;
    }

    /// A cell was stopped or cancelled: kill the sandbox now and wait for its end, or, with
    /// `quick_stop`, leave both to [`Self::discard`].
    async fn abandon(&mut self) {
        if self.quick_stop {
            self.abandoned = true;
        } else {
            self.control.kill().await;
            self.control.wait().await;
        }
    }

    /// End the sandbox without waiting: kill it now, and leave reaping it (and removing its
    /// cgroup or container) to a background task.
    pub fn discard(self) {
        self.discard_into(None);
    }

    /// [`Self::discard`], its background task tracked by `endings` when given.
    fn discard_into(self, endings: Option<&TaskTracker>) {
        let Self {
            mut control,
            writer,
            ..
        } = self;
        writer.abort();
        let end = async move {
            control.kill().await;
            control.wait().await;
        };
        match endings {
            Some(endings) => endings.spawn(end),
            None => tokio::spawn(end),
        };
    }
}

/// Serve one cell's calls until `done`, gathering its streamed `output`; how it ended
/// otherwise (never [`Stop::Crashed`]: the caller learns that from the sandbox's end). Calls still in flight when it ends are dropped.
#[allow(clippy::too_many_arguments)]
async fn serve_cell(
    bridge: &Arc<Bridge>,
    reader: &mut BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    to_runner: &mpsc::Sender<Vec<u8>>,
    deadline: Instant,
    length: Duration,
    budget: Arc<CallBudget>,
    output: &mut StreamedOutput,
    steering: &Steering,
) -> Result<RunResult, Stop> {
    let slots = Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT));
    let finished = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let mut calls = JoinSet::new();
    let mut line = Vec::new();
    let late = || Stop::Deadline(length);
    let cancel = &steering.cancel;
    let mut heard = false;
    let outcome = loop {
        let read = tokio::select! {
            biased;
            () = cancel.cancelled() => break Err(Stop::Cancelled),
            read = tokio::time::timeout_at(
                deadline,
                read_line(reader, MAX_PROTOCOL_LINE_BYTES, &mut line),
            ) => read,
        };
        let message = match read {
            Err(_) => break Err(late()),
            // A read error is the sandbox's pipe gone: the same as its end.
            Ok(Ok(LineRead::Eof { .. }) | Err(_)) => break Err(Stop::Eof { heard }),
            Ok(Ok(LineRead::TooLong)) => break Err(Stop::Violation(ProtocolViolation::TooLong)),
            Ok(Ok(LineRead::Line)) => {
                heard = true;
                parse_runner_line(&line)
            }
        };
        match message {
            Err(violation) => break Err(Stop::Violation(violation)),
            Ok(RunnerMessage::Output { text, truncated }) => {
                if let Err(violation) = output.add(&text, truncated) {
                    break Err(Stop::Violation(violation));
                }
            }
            Ok(RunnerMessage::Done(done)) => {
                break Ok(RunResult {
                    stdout: done.stdout,
                    error: done.error,
                    truncated: done.truncated,
                    stopped: done.stopped,
                });
            }
            Ok(RunnerMessage::Ready) => {
                break Err(Stop::Violation(ProtocolViolation::ReadyDuringCell));
            }
            Ok(RunnerMessage::Call { id, tool, args }) => {
                let waited = tokio::select! {
                    biased;
                    () = cancel.cancelled() => break Err(Stop::Cancelled),
                    waited = tokio::time::timeout_at(deadline, slots.clone().acquire_owned()) => waited,
                };
                let Ok(Ok(permit)) = waited else {
                    break Err(late());
                };
                let bridge = bridge.clone();
                let budget = budget.clone();
                let to_runner = to_runner.clone();
                let finished = finished.clone();
                let steering = steering.clone();
                calls.spawn(async move {
                    // A bug on the host side must still answer the call: the code sees only
                    // the fault's type name, never its details (see bridge::refusal).
                    let outcome = AssertUnwindSafe(bridge.call(&budget, &tool, &args))
                        .catch_unwind()
                        .await
                        .unwrap_or(Err(CallError::HostFault("InternalError")));
                    let end = CallEnd::of(&outcome);
                    let reply = match outcome {
                        Ok(value) => HostMessage::Result {
                            id,
                            ok: true,
                            value: Some(value),
                            error: None,
                        },
                        Err(e) => HostMessage::Result {
                            id,
                            ok: false,
                            value: None,
                            error: Some(e.message()),
                        },
                    };
                    let _ = to_runner.send(reply.to_line()).await;
                    let calls = finished.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    steering.tell(RunEvent::CallFinished { calls, tool, end });
                    drop(permit);
                });
            }
        }
    };
    calls.abort_all();
    outcome
}

async fn write_loop(
    mut stdin: Box<dyn AsyncWrite + Send + Unpin>,
    mut rx: mpsc::Receiver<Vec<u8>>,
) {
    while let Some(line) = rx.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            break;
        }
    }
    let _ = stdin.shutdown().await;
}
