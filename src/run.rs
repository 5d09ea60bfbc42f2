//! One run: a sandbox, the code, its calls, the deadline, the result.
//!
//! The host sends `start` and one `cell`, then reads the runner's lines until `done`, a
//! protocol violation, the sandbox's exit, or the deadline. Calls are served concurrently
//! (at most [`MAX_CALLS_IN_FLIGHT`] at once; past that the host stops reading until one
//! finishes). The deadline covers everything, calls included: at the deadline the sandbox is
//! killed and calls still in flight are cancelled.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::bridge::{Bridge, CallBudget};
use crate::limits::MAX_PROTOCOL_LINE_BYTES;
use crate::protocol::{HostMessage, RunnerLimits, RunnerMessage, parse_runner_line};
use crate::sandbox::{Backend, Ending, Sandbox, SandboxError};

/// Tool calls of one run served at the same time.
pub const MAX_CALLS_IN_FLIGHT: usize = 16;
/// Time a runner has to exit after `done` before it is killed.
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

    fn stopped(stdout: String, error: String) -> Self {
        Self {
            stdout,
            error: Some(error),
            truncated: false,
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

/// What a run reports besides its result.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The result object.
    pub result: RunResult,
    /// Which resource limits held in the sandbox.
    pub limits: String,
    /// Calls sent to wrapped servers.
    pub calls: u32,
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
    let deadline = Instant::now() + options.deadline;
    let sandbox = backend.spawn().await?;
    let limits = sandbox.control.limits();
    let budget = Arc::new(CallBudget::new(options.max_calls));
    let outcome = drive(bridge, sandbox, code, deadline, options, budget.clone()).await;
    let result = outcome?;
    Ok(RunReport {
        result,
        limits,
        calls: budget.used(),
    })
}

async fn drive(
    bridge: &Arc<Bridge>,
    mut sandbox: Sandbox,
    code: &str,
    deadline: Instant,
    options: &RunOptions,
    budget: Arc<CallBudget>,
) -> Result<RunResult, SandboxError> {
    let (to_runner, writer_rx) = mpsc::channel::<Vec<u8>>(MAX_CALLS_IN_FLIGHT * 2);
    let writer = tokio::spawn(write_loop(sandbox.stdin, writer_rx));
    let start = HostMessage::Start {
        tools: bridge.catalog().entries(),
        limits: RunnerLimits::default(),
    };
    let _ = to_runner.send(start.to_line()).await;
    let _ = to_runner
        .send(
            HostMessage::Cell {
                code: code.to_owned(),
            }
            .to_line(),
        )
        .await;

    let mut reader = BufReader::with_capacity(64 * 1024, sandbox.stdout);
    let slots = Arc::new(Semaphore::new(MAX_CALLS_IN_FLIGHT));
    let mut calls = JoinSet::new();
    let mut line = Vec::new();
    let outcome: Result<RunResult, String> = loop {
        line.clear();
        let read = tokio::time::timeout_at(deadline, read_line(&mut reader, &mut line)).await;
        let message = match read {
            Err(_) => {
                break Err(format!(
                    "deadline of {} s exceeded; the sandbox was killed",
                    options.deadline.as_secs_f64()
                ));
            }
            Ok(Err(LineError::Eof)) => break Err(String::new()),
            Ok(Err(LineError::TooLong)) => {
                break Err(format!(
                    "protocol violation: a line of more than {MAX_PROTOCOL_LINE_BYTES} bytes"
                ));
            }
            Ok(Ok(())) => parse_runner_line(&line),
        };
        match message {
            Err(violation) => break Err(format!("protocol violation: {violation}")),
            Ok(RunnerMessage::Done(done)) => {
                break Ok(RunResult {
                    stdout: done.stdout,
                    error: done.error,
                    truncated: done.truncated,
                    stopped: done.stopped,
                });
            }
            Ok(RunnerMessage::Call { id, tool, args }) => {
                let permit =
                    match tokio::time::timeout_at(deadline, slots.clone().acquire_owned()).await {
                        Ok(Ok(permit)) => permit,
                        _ => {
                            break Err(format!(
                                "deadline of {} s exceeded; the sandbox was killed",
                                options.deadline.as_secs_f64()
                            ));
                        }
                    };
                let bridge = bridge.clone();
                let budget = budget.clone();
                let to_runner = to_runner.clone();
                calls.spawn(async move {
                    let reply = match bridge.call(&budget, &tool, &args).await {
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
                    drop(permit);
                });
            }
        }
    };
    calls.abort_all();
    drop(to_runner);
    let result = match outcome {
        Ok(result) => {
            // The runner exits on EOF; give it a moment, then make sure.
            writer.abort();
            if tokio::time::timeout(EXIT_GRACE, sandbox.control.wait())
                .await
                .is_err()
            {
                sandbox.control.kill().await;
            }
            result
        }
        Err(reason) => {
            writer.abort();
            sandbox.control.kill().await;
            let ending = sandbox.control.wait().await;
            if reason.is_empty() {
                return ended_early(ending);
            }
            RunResult::stopped(String::new(), reason)
        }
    };
    sandbox.control.kill().await;
    Ok(result)
}

/// The sandbox closed its pipe without `done`.
fn ended_early(ending: Ending) -> Result<RunResult, SandboxError> {
    if ending.status == Some(125) && ending.stderr.starts_with("launcher:") {
        return Err(SandboxError::Spawn(ending.stderr));
    }
    let why = if ending.memory_limit_hit {
        format!(
            "the sandbox ran out of memory (limit {} MiB) and was killed",
            crate::limits::MEMORY_BYTES >> 20
        )
    } else {
        match ending.status {
            Some(0) => "the sandbox exited without a result".to_owned(),
            Some(s) if s > 128 => format!(
                "the sandbox was killed by signal {} without a result",
                s - 128
            ),
            Some(s) => format!("the sandbox exited with status {s} without a result"),
            None => "the sandbox ended without a result".to_owned(),
        }
    };
    Ok(RunResult::stopped(String::new(), why))
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

enum LineError {
    Eof,
    TooLong,
}

/// Read one line (without `\n`) of at most [`MAX_PROTOCOL_LINE_BYTES`].
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> Result<(), LineError> {
    let mut limited = reader.take(MAX_PROTOCOL_LINE_BYTES as u64 + 1);
    match limited.read_until(b'\n', line).await {
        Ok(0) | Err(_) => Err(LineError::Eof),
        Ok(_) if line.last() == Some(&b'\n') => {
            line.pop();
            Ok(())
        }
        Ok(_) if line.len() > MAX_PROTOCOL_LINE_BYTES => Err(LineError::TooLong),
        Ok(_) => Err(LineError::Eof),
    }
}
