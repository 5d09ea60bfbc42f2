//! [`HeldSandbox`]: one sandbox held for one or more cells, and the loop that serves a cell's
//! tool calls ([`serve_cell`]); its host → runner lines go through [`RunnerInput`].

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use super::audit;
use super::cell_rules::{CellRules, Step};
use super::ending::{STDERR_LOG_CHARS, ended_early, tail};
use super::input::RunnerInput;
use super::protocol::{
    HostMessage, ProtocolViolation, RunnerLimits, RunnerMessage, StreamedOutput, parse_runner_line,
};
use super::stop::{Gone, NotReady, Stop};
use super::{CallEnd, EXIT_GRACE, MAX_CALLS_IN_FLIGHT, RunEvent, RunReport, RunResult, Steering};
use crate::bridge::refusal::CallError;
use crate::bridge::{Bridge, CallBudget, Taint};
use crate::limits::{MAX_PROTOCOL_LINE_BYTES, MAX_REFUSED_CALLS};
use crate::lines::{LineRead, continue_line, read_line};
use crate::sandbox::{Backend, CpuPriority, HeldLimits, Sandbox, SandboxError};

/// One sandbox held across several cells, with the code's variables kept between them, for a
/// caller's own agent loop. Each cell has its own
/// call budget and deadline. After a cell is stopped (deadline, protocol violation, crash)
/// the sandbox is gone, and later cells are stopped at once.
///
/// The private-data rule (README, "Private data") holds across the sandbox's cells: the
/// sandbox owns one [`Taint`], which every cell shares, since what a private tool answered
/// in one cell can wait in a variable for the next. From the first call to a private tool
/// sent in any cell, that cell and every later one can call only private tools (any other
/// call raises `ToolError` and never reaches its server). A new `HeldSandbox` (its
/// variables empty) starts untainted, unless started with [`Self::start_in_session`].
///
/// Nothing the sandbox writes while no cell runs counts toward the next cell: the host reads
/// nothing after a cell's `done`, and a line written after it (by a thread or a forked child
/// the code left running) is a protocol violation that ends the held sandbox. When such lines
/// are already waiting as the next cell is to be sent, that cell is not run at all; otherwise
/// they arrive before the cell's `began` and stop it before any of its calls is served
/// ([`super::cell_rules`]). Either way the cell's result is stopped and says so, no call of it
/// reaches a server, and later cells are stopped at once: start a new `HeldSandbox` (its
/// variables start empty).
pub struct HeldSandbox {
    bridge: Arc<Bridge>,
    to_runner: Option<RunnerInput>,
    writer: tokio::task::JoinHandle<()>,
    reader: BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    control: Box<dyn crate::sandbox::SandboxControl>,
    limits: HeldLimits,
    dead: Option<Gone>,
    /// The private-data taint every cell of this sandbox shares ([`Self::cell`]).
    taint: Taint,
    /// A stopped or cancelled cell leaves killing the sandbox to [`Self::discard`] instead
    /// of killing it and waiting for its end (set for one-cell runs, whose result must not
    /// wait on `docker kill`, `docker rm` and the like).
    pub(super) quick_stop: bool,
    /// The last cell was stopped or cancelled and the sandbox not killed yet.
    pub(super) abandoned: bool,
    /// Taken from the warm pool.
    pub(crate) pooled: bool,
    /// The last cell ended before the runner acknowledged it (`began`): the sandbox's output
    /// ended, or nothing came within [`Self::ack_limit`]. None of the cell's code ran where
    /// the host could hear it, and nothing the sandbox sends is read any more.
    pub(super) unheard: bool,
    /// How long after a cell is sent its `began` (or any line) may take before the sandbox
    /// is given up as stopped, frozen or too slow ([`Stop::Unacknowledged`]); `None`: no
    /// bound but the deadline. Set for sandboxes taken from the warm pool, whose runner
    /// waits in a read of its input and answers at once.
    pub(super) ack_limit: Option<Duration>,
    /// Dropped once the sandbox has been ended (closed, or discarded and reaped): the warm
    /// pool's slot whose sandbox this was waits for it before starting the next one.
    pub(super) ended: Option<tokio::sync::oneshot::Sender<()>>,
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

    /// [`Self::start`], its cells sharing `taint`, the private-data taint of the session
    /// the sandbox belongs to: a private call sent by an earlier run of that session (one
    /// run with [`super::run_steered`] and a [`Steering`] holding a clone of `taint`, or a
    /// cell of another sandbox) refuses the cells' non-private calls, and a private call
    /// sent by a cell refuses theirs.
    ///
    /// # Errors
    /// As [`Self::start`].
    pub async fn start_in_session(
        bridge: Arc<Bridge>,
        backend: &dyn Backend,
        taint: Taint,
    ) -> Result<Self, SandboxError> {
        let mut held = Self::start(bridge, backend).await?;
        held.taint = taint;
        Ok(held)
    }

    /// The private-data taint this sandbox's cells share (a clone shares its state): set
    /// once a cell sent a call to a private tool, never cleared. Give a clone to the
    /// [`Steering`] of other runs that may see this sandbox's data (such as runs whose code a
    /// model writes after reading this sandbox's output), so the rule holds for them too.
    pub fn taint(&self) -> Taint {
        self.taint.clone()
    }

    /// Hold `sandbox` and send it the bridge's catalog; with `ready`, the `start` asks the
    /// runner to say `ready` once it waits for its first cell (see [`Self::wait_ready`]).
    pub(crate) async fn begin(bridge: Arc<Bridge>, sandbox: Sandbox, ready: bool) -> Self {
        let Sandbox {
            stdin,
            stdout,
            control,
        } = sandbox;
        let (to_runner, writer) = RunnerInput::start(stdin);
        let start = HostMessage::Start {
            tools: bridge.catalog().entries(),
            limits: RunnerLimits::default(),
            ready,
        };
        to_runner.send(start.to_line()).await;
        Self {
            bridge,
            to_runner: Some(to_runner),
            writer,
            reader: BufReader::with_capacity(64 * 1024, stdout),
            limits: control.limits(),
            control,
            dead: None,
            taint: Taint::default(),
            quick_stop: false,
            abandoned: false,
            pooled: false,
            unheard: false,
            ack_limit: None,
            ended: None,
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
                    start_failure: ending.start_failure,
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

    /// Whether anything waits unread on the sandbox's output between cells (the runner
    /// writes nothing then). Does not wait; an end of output is not counted (the cell then
    /// reports how the sandbox ended).
    fn holds_unread_output(&mut self) -> bool {
        !self.reader.buffer().is_empty()
            || matches!(self.reader.fill_buf().now_or_never(), Some(Ok(data)) if !data.is_empty())
    }

    /// Resolves when a sandbox that waits for a cell stops waiting: its output ends (it
    /// died: out of memory, a signal) or carries anything at all.
    pub(crate) async fn stops_waiting(&mut self) {
        let _ = self.reader.fill_buf().await;
    }

    /// Run one cell with a budget of `max_calls` and a deadline of `deadline` from now (a
    /// deadline too long for a clock to count to, such as `Duration::MAX`, is taken as
    /// [`super::FAR_DEADLINE`]), under the sandbox's private-data taint ([`Self::taint`]):
    /// after a private call in this or an earlier cell, a call to a tool that is not private
    /// raises `ToolError` in the code and never reaches its server.
    ///
    /// # Errors
    /// [`SandboxError`] when the sandbox failed to start (the launcher's own error).
    pub async fn cell(
        &mut self,
        code: &str,
        max_calls: u32,
        deadline: Duration,
    ) -> Result<RunReport, SandboxError> {
        let steering = Steering {
            taint: self.taint.clone(),
            ..Steering::default()
        };
        let budget = steering.budget(max_calls);
        let audit = match audit::RunAudit::begin(&self.bridge, &budget, code).await {
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
            .cell_until(
                code,
                budget,
                super::deadline_after(start, deadline),
                deadline,
                &steering,
            )
            .await;
        if let Some(audit) = audit {
            audit.end(&mut report).await;
        }
        report
    }

    pub(super) async fn cell_until(
        &mut self,
        code: &str,
        budget: Arc<CallBudget>,
        deadline: Instant,
        length: Duration,
        steering: &Steering,
    ) -> Result<RunReport, SandboxError> {
        let written_between_cells =
            self.dead.is_none() && self.to_runner.is_some() && self.holds_unread_output();
        let result = match (&self.dead, &self.to_runner) {
            (Some(gone), _) => RunResult::stopped(
                StreamedOutput::default(),
                &format_args!("the sandbox is gone: {gone}"),
            ),
            (None, None) => {
                RunResult::stopped(StreamedOutput::default(), &"the sandbox is gone: closed")
            }
            (None, Some(_)) if written_between_cells => {
                tracing::info!("a held sandbox wrote lines while no cell ran; it is discarded");
                self.abandon().await;
                let stop = Stop::Violation(ProtocolViolation::BetweenCells);
                let result = RunResult::stopped(
                    StreamedOutput::default(),
                    &format_args!("{stop}; this cell was not run and the sandbox is discarded"),
                );
                self.dead = Some(Gone::Stopped(stop));
                result
            }
            (None, Some(to_runner)) => {
                let to_runner = to_runner.clone();
                let nonce = uuid::Uuid::new_v4().simple().to_string();
                let mut rules = CellRules::new(nonce.clone());
                to_runner
                    .send(
                        HostMessage::Cell {
                            code: code.to_owned(),
                            nonce,
                        }
                        .to_line(),
                    )
                    .await;
                let ack_by = self.ack_limit.map(|limit| (Instant::now() + limit, limit));
                let served = serve_cell(
                    &self.bridge,
                    &mut self.reader,
                    &to_runner,
                    deadline,
                    ack_by,
                    length,
                    budget.clone(),
                    &mut rules,
                    steering,
                )
                .await;
                let output = rules.output;
                match served {
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
                    Err(stop @ Stop::Unacknowledged(_)) => {
                        // Nothing it sends is read any more: killed (in the background with
                        // `quick_stop`), however late it wakes up.
                        tracing::info!("a sandbox did not acknowledge its cell: {stop}");
                        self.unheard = true;
                        self.abandon().await;
                        let result = RunResult::stopped(output, &stop);
                        self.dead = Some(Gone::Stopped(stop));
                        result
                    }
                    Err(Stop::Eof { heard }) => {
                        self.unheard = !heard;
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

    /// Whether the last cell went unacknowledged because nothing came within
    /// [`Self::ack_limit`] (the sandbox is stopped, frozen, paused or too slow), not because
    /// its output ended.
    pub(super) fn stalled(&self) -> bool {
        matches!(self.dead, Some(Gone::Stopped(Stop::Unacknowledged(_))))
    }

    /// Put the sandbox at `priority` ([`SandboxControl::set_priority`]): `false` when the
    /// change failed.
    ///
    /// [`SandboxControl::set_priority`]: crate::sandbox::SandboxControl::set_priority
    pub(crate) async fn set_priority(&mut self, priority: CpuPriority) -> bool {
        self.control.set_priority(priority).await
    }

    /// End the sandbox: close its input, give it a moment to exit, then kill what is left.
    pub async fn close(mut self) {
        if let Some(input) = self.to_runner.take() {
            input.close();
        }
        if tokio::time::timeout(EXIT_GRACE, self.control.wait())
            .await
            .is_err()
        {
            self.control.kill().await;
        }
        self.writer.abort();
        self.control.kill().await;
        self.control.release().await;
    }

    /// End the sandbox at once: kill it without the grace [`Self::close`] gives its runner
    /// to exit on its own. For a sandbox that runs no cell and whose end nothing waits to
    /// read (a pooled one when the pool closes, one still booting then): at background
    /// priority on a loaded machine, its runner may take longer than that grace to exit.
    pub(crate) async fn end_now(mut self) {
        if let Some(input) = self.to_runner.take() {
            input.close();
        }
        self.writer.abort();
        self.control.kill().await;
        self.control.release().await;
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
    pub(super) fn discard_into(self, endings: Option<&TaskTracker>) {
        let Self {
            mut control,
            writer,
            ended,
            ..
        } = self;
        writer.abort();
        let end = async move {
            control.kill().await;
            control.wait().await;
            control.release().await;
            drop(ended);
        };
        match endings {
            Some(endings) => endings.spawn(end),
            None => tokio::spawn(end),
        };
    }
}

/// Serve one cell's calls until `done`, its lines held to `rules` (which gather its streamed
/// `output`); how it ended otherwise (never [`Stop::Crashed`]: the caller learns that from the
/// sandbox's end). Calls still in flight when it ends are dropped, and nothing after `done`
/// is read. With `ack_by` (an instant and the bound it came from), a sandbox that has sent
/// nothing at all by that instant ends the cell with [`Stop::Unacknowledged`]: the wait costs
/// nothing on the way (lines are read as they come; only the read's timer is earlier), and
/// no call can have been served then, since a call counts only after `began`. A cell may send the calls its budget lets through plus
/// [`MAX_REFUSED_CALLS`] refused ones; the call line after that stops it
/// ([`Stop::TooManyCalls`]). Lines are read whatever calls are in flight; a call that cannot
/// be served yet (at [`MAX_CALLS_IN_FLIGHT`], or with `OWED_BYTES` owed) is held, and only
/// then does reading stop, until it is served. At the deadline the `output` lines already
/// written are read without waiting ([`take_written_output`]).
#[allow(clippy::too_many_arguments)]
async fn serve_cell(
    bridge: &Arc<Bridge>,
    reader: &mut BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    to_runner: &RunnerInput,
    deadline: Instant,
    mut ack_by: Option<(Instant, Duration)>,
    length: Duration,
    budget: Arc<CallBudget>,
    rules: &mut CellRules,
    steering: &Steering,
) -> Result<RunResult, Stop> {
    let finished = Arc::new(AtomicU32::new(0));
    // The calls in flight run inside this task rather than as tasks of their own: a call's
    // answer reaches the runner without a hop to another task or worker thread, and no
    // task is spawned per call (each spawn copies the call's whole future into a new task).
    let mut calls = FuturesUnordered::new();
    let mut line = Vec::new();
    let late = || Stop::Deadline(length);
    let cancel = &steering.cancel;
    // Every call line counts, answered or refused: past this the cell is stopped.
    let most_calls = u64::from(budget.max()) + u64::from(MAX_REFUSED_CALLS);
    let mut calls_read: u64 = 0;
    // One cancel future and one timer serve the whole cell rather than one of each per
    // line: each new one would register with the token and the timer wheel again.
    let mut cancelled = std::pin::pin!(cancel.cancelled());
    let mut timer_at = ack_by.map_or(deadline, |(by, _)| by);
    let mut timer = std::pin::pin!(tokio::time::sleep_until(timer_at));
    // A call read while it could not be served (MAX_CALLS_IN_FLIGHT calls in flight, or
    // OWED_BYTES of results held for a runner that does not read them: input.rs). The
    // runner writes no call beyond its window (protocol.rs), so only a line the code forged,
    // a forked child's call, or one written while results the runner has not read yet come
    // to OWED_BYTES waits here; nothing more is read until it is served, which
    // bounds what a sandbox can make the host hold to one line.
    let mut parked: Option<(u64, String, Value)> = None;
    let outcome = loop {
        let taking = to_runner.takes_calls();
        let serves = taking && calls.len() < MAX_CALLS_IN_FLIGHT;
        if serves && let Some((id, tool, args)) = parked.take() {
            calls.push(serve_call(
                bridge, &budget, to_runner, &finished, steering, id, tool, args,
            ));
        }
        // Output and `done` are read whatever calls are in flight; only a parked call stops
        // the reading.
        let room = parked.is_none();
        // Anything heard (a line or part of one) is the acknowledgement the bound waits for;
        // a bound past the deadline is no bound.
        if !line.is_empty() || rules.began() || ack_by.is_some_and(|(by, _)| by >= deadline) {
            ack_by = None;
        }
        // Reading waits until the acknowledgement's bound, else the deadline; with no room
        // nothing is read and only the deadline counts.
        let read_until = match ack_by {
            Some((by, _)) if room => by,
            _ => deadline,
        };
        if read_until != timer_at {
            timer_at = read_until;
            timer.as_mut().reset(timer_at);
        }
        let read = tokio::select! {
            biased;
            () = &mut cancelled => break Err(Stop::Cancelled),
            Some(()) = calls.next(), if !calls.is_empty() => continue,
            () = to_runner.until_it_takes_calls(), if !taking && !room => continue,
            // Cancel-safe: a line cut short by another branch goes on in the next round.
            read = continue_line(reader, MAX_PROTOCOL_LINE_BYTES, &mut line), if room => Ok(read),
            () = &mut timer => if room { Err(()) } else { break Err(late()) },
        };
        let message = match read {
            Err(()) => match ack_by.take() {
                None => break Err(late()),
                Some((_, limit)) => {
                    // Written just as the timer fired: heard in time after all.
                    let arrived = !reader.buffer().is_empty()
                        || matches!(reader.fill_buf().now_or_never(), Some(Ok(data)) if !data.is_empty());
                    if arrived || !line.is_empty() {
                        continue;
                    }
                    break Err(Stop::Unacknowledged(limit));
                }
            },
            // A read error is the sandbox's pipe gone: the same as its end.
            Ok(Ok(LineRead::Eof { .. }) | Err(_)) => {
                break Err(Stop::Eof {
                    heard: rules.began(),
                });
            }
            Ok(Ok(LineRead::TooLong)) => break Err(Stop::Violation(ProtocolViolation::TooLong)),
            Ok(Ok(LineRead::Line)) => {
                let message = parse_runner_line(&line);
                line.clear();
                message
            }
        };
        match rules.take(message) {
            Err(violation) => break Err(Stop::Violation(violation)),
            Ok(Step::Read) => {}
            Ok(Step::Done(result)) => break Ok(result),
            Ok(Step::Call { id, tool, args }) => {
                calls_read += 1;
                if calls_read > most_calls {
                    break Err(Stop::TooManyCalls(most_calls));
                }
                parked = Some((id, tool, args));
            }
        }
    };
    let outcome = match outcome {
        // What the runner wrote before the deadline and the host had not read yet (behind a
        // parked call, or written as the time ran out) still counts.
        Err(Stop::Deadline(length)) => {
            take_written_output(reader, &mut line, rules);
            Err(Stop::Deadline(length))
        }
        other => other,
    };
    // A parked call was never served: nothing of it reached the bridge, as with the lines
    // after it that were never read.
    drop(parked);
    // The calls still in flight are dropped here, before the run ends, so the audit records
    // of calls cut short come before its run_end (bridge::governed).
    drop(calls);
    outcome
}

/// The future that serves one call of the code through the bridge and sends its result to
/// the runner; `finished` counts the calls over, and `steering` hears of each.
#[allow(clippy::too_many_arguments)]
fn serve_call(
    bridge: &Arc<Bridge>,
    budget: &Arc<CallBudget>,
    to_runner: &RunnerInput,
    finished: &Arc<AtomicU32>,
    steering: &Steering,
    id: u64,
    tool: String,
    args: Value,
) -> BoxFuture<'static, ()> {
    let bridge = bridge.clone();
    let budget = budget.clone();
    let to_runner = to_runner.clone();
    let finished = finished.clone();
    let steering = steering.clone();
    let call = async move {
        // A bug on the host side must still answer the call: the code sees only the fault's
        // type name, never its details (see bridge::refusal).
        let outcome = AssertUnwindSafe(bridge.call(&budget, &tool, &args))
            .catch_unwind()
            .await
            .unwrap_or(Err(CallError::HostFault("InternalError")));
        let end = CallEnd::of(&outcome);
        // Only the line is kept while it waits to be written (the result's own string is
        // dropped here).
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
        }
        .to_line();
        to_runner.send(reply).await;
        let calls = finished.fetch_add(1, Ordering::SeqCst) + 1;
        steering.tell(RunEvent::CallFinished { calls, tool, end });
    };
    // Whatever else panics in a call ends that call only, as it did in a task.
    Box::pin(AssertUnwindSafe(call).catch_unwind().map(|_| ()))
}

/// Bytes of lines the host reads, at most, at a cell's deadline for the output written before
/// it (a few of the longest lines: the output itself is at most 8 KiB).
const LATE_READ_BYTES: usize = 4 * MAX_PROTOCOL_LINE_BYTES;

/// At a cell's deadline: take the `output` lines the runner had written and the host had not
/// read (in the reader's buffer or the pipe), without waiting for any, up to
/// [`LATE_READ_BYTES`] and no further than a line the rules refuse or a `done`. Calls among
/// them are not served.
fn take_written_output(
    reader: &mut BufReader<Box<dyn AsyncRead + Send + Unpin>>,
    line: &mut Vec<u8>,
    rules: &mut CellRules,
) {
    let mut read = 0;
    while read < LATE_READ_BYTES && rules.began() {
        // Cancel-safe: a line not all there yet is left as it is.
        let Some(Ok(LineRead::Line)) =
            continue_line(reader, MAX_PROTOCOL_LINE_BYTES, line).now_or_never()
        else {
            return;
        };
        read += line.len();
        let message = parse_runner_line(line);
        line.clear();
        if !matches!(message, Ok(RunnerMessage::Output { .. })) {
            if matches!(message, Ok(RunnerMessage::Call { .. })) {
                continue;
            }
            return;
        }
        if rules.take(message).is_err() {
            return;
        }
    }
}
