//! Why a cell ended without `done`, and why a held sandbox takes no more cells: typed values
//! the run loop steers by. They become text only where a result is made (their `Display`),
//! and those texts are what the code's caller reads in the result's `error`.

use std::fmt;
use std::time::Duration;

use super::CANCELLED;
use super::ending::Crash;
use super::protocol::ProtocolViolation;

/// Why a cell ended without the runner's `done`.
#[derive(Debug)]
pub(super) enum Stop {
    /// The runner's output ended: it closed its pipe, or the pipe is gone. `heard` says
    /// whether the cell's `began` arrived first.
    Eof {
        /// The runner acknowledged the cell (`began`): its code may have run.
        heard: bool,
    },
    /// The run's deadline passed; the value is the deadline's length.
    Deadline(Duration),
    /// A sandbox held to an acknowledgement bound (a pooled one: [`super::pool::ACK_LIMIT`])
    /// sent nothing, not even `began`, within that bound after the cell was sent: it is
    /// stopped, frozen or too slow, and none of the cell's code ran where the host can hear
    /// it. The value is the bound.
    Unacknowledged(Duration),
    /// The runner sent a line the host refuses.
    Violation(ProtocolViolation),
    /// The sandbox ended without `done`; how it ended.
    Crashed(Crash),
    /// The caller cancelled the run.
    Cancelled,
    /// The cell sent more calls than its budget lets through plus
    /// [`crate::limits::MAX_REFUSED_CALLS`]; the value is that sum.
    TooManyCalls(u64),
}

impl fmt::Display for Stop {
    /// The result's `error` for this stop (`deadline of 90 s exceeded; the sandbox was
    /// killed`, `protocol violation: a line that is not JSON`); an end of output, which a
    /// result reports as the [`Crash`] it turned out to be, reads `it ended`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Eof { .. } => f.write_str("it ended"),
            Self::Deadline(length) => write!(
                f,
                "deadline of {} s exceeded; the sandbox was killed",
                length.as_secs_f64()
            ),
            Self::Unacknowledged(limit) => write!(
                f,
                "the sandbox did not acknowledge the cell within {} s; it was killed",
                limit.as_secs_f64()
            ),
            Self::Violation(violation) => write!(f, "protocol violation: {violation}"),
            Self::Crashed(crash) => crash.fmt(f),
            Self::Cancelled => f.write_str(CANCELLED),
            Self::TooManyCalls(most) => write!(
                f,
                "more than {most} calls (the budget plus {} refused); the sandbox was killed",
                crate::limits::MAX_REFUSED_CALLS
            ),
        }
    }
}

/// Why a sandbox waiting for its first cell never said `ready`.
#[derive(Debug, Clone)]
pub(crate) enum NotReady {
    /// Nothing came within this time.
    Timeout(Duration),
    /// It sent a line over [`crate::limits::MAX_PROTOCOL_LINE_BYTES`].
    TooLong,
    /// Its output ended: its exit status (if it has one), the tail of its stderr, and the
    /// backend's own report of a failed start.
    Ended {
        /// The exit status, `None` when the backend could not tell.
        status: Option<i32>,
        /// The last characters of its stderr (untrusted: the code can write there).
        stderr_tail: String,
        /// The start failure the backend reported (the launcher's report socket, Docker),
        /// which says why better than the stderr, where a launcher says nothing then.
        start_failure: Option<crate::sandbox::SandboxError>,
    },
    /// It sent a line other than `ready`.
    Other,
}

impl fmt::Display for NotReady {
    /// Why, for the log: `no ready within 10 s`, `it ended before it was ready (exit status
    /// 1): ...`; never an empty reason: the backend's report of a failed start when it made
    /// one, else the stderr's tail, else that there was none.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout(limit) => write!(f, "no ready within {} s", limit.as_secs_f64()),
            Self::TooLong => f.write_str("it sent a line that is too long"),
            Self::Ended {
                status,
                stderr_tail,
                start_failure,
            } => {
                let status = match status {
                    Some(launcher::failure::FAILURE_STATUS) => format!(
                        "exit status {}, the launcher's failure before the runner ran",
                        launcher::failure::FAILURE_STATUS
                    ),
                    Some(code) => format!("exit status {code}"),
                    None => "no exit status known".to_owned(),
                };
                match start_failure {
                    Some(failure) => {
                        write!(f, "it ended before it was ready ({status}): {failure}")
                    }
                    None if stderr_tail.trim().is_empty() => write!(
                        f,
                        "it ended before it was ready ({status}); it gave no reason (nothing on stderr)"
                    ),
                    None => write!(f, "it ended before it was ready ({status}): {stderr_tail}"),
                }
            }
            Self::Other => f.write_str("it sent something other than ready"),
        }
    }
}

/// Why a held sandbox takes no more cells; a later cell is stopped with
/// `the sandbox is gone: {this}`.
#[derive(Debug)]
pub(super) enum Gone {
    /// A cell was stopped for this reason, and the sandbox killed or left to end.
    Stopped(Stop),
    /// The runner stopped a cell itself (an output flood), and it exits after that.
    RunnerStopped,
    /// It never said `ready` for its first cell.
    NotReady(NotReady),
}

impl fmt::Display for Gone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stopped(stop) => stop.fmt(f),
            Self::RunnerStopped => f.write_str("the previous cell was stopped"),
            Self::NotReady(NotReady::Ended { .. }) => f.write_str("it ended before it was ready"),
            Self::NotReady(why) => why.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stop_reads_as_the_error_the_caller_sees() {
        assert_eq!(
            Stop::Deadline(Duration::from_secs(3)).to_string(),
            "deadline of 3 s exceeded; the sandbox was killed"
        );
        assert_eq!(
            Stop::Deadline(Duration::from_millis(2500)).to_string(),
            "deadline of 2.5 s exceeded; the sandbox was killed"
        );
        assert_eq!(
            Stop::Violation(ProtocolViolation::NotJson).to_string(),
            "protocol violation: a line that is not JSON"
        );
        assert_eq!(
            Stop::Violation(ProtocolViolation::ReadyDuringCell).to_string(),
            "protocol violation: a ready message during a cell"
        );
        assert_eq!(Stop::Cancelled.to_string(), CANCELLED);
        assert_eq!(
            Stop::Unacknowledged(Duration::from_secs(1)).to_string(),
            "the sandbox did not acknowledge the cell within 1 s; it was killed"
        );
        assert_eq!(
            Stop::TooManyCalls(1200).to_string(),
            "more than 1200 calls (the budget plus 1000 refused); the sandbox was killed"
        );
        assert_eq!(
            Stop::Crashed(Crash::Signal(9)).to_string(),
            "the sandbox was killed by signal 9 without a result"
        );
    }

    #[test]
    fn a_gone_sandbox_says_why_in_short() {
        assert_eq!(
            Gone::Stopped(Stop::Eof { heard: true }).to_string(),
            "it ended"
        );
        assert_eq!(
            Gone::RunnerStopped.to_string(),
            "the previous cell was stopped"
        );
        let ended = NotReady::Ended {
            status: Some(1),
            stderr_tail: "Traceback".into(),
            start_failure: None,
        };
        assert_eq!(
            ended.to_string(),
            "it ended before it was ready (exit status 1): Traceback"
        );
        assert_eq!(
            Gone::NotReady(ended).to_string(),
            "it ended before it was ready"
        );
        assert_eq!(
            Gone::NotReady(NotReady::Timeout(Duration::from_secs(10))).to_string(),
            "no ready within 10 s"
        );
    }

    #[test]
    fn a_sandbox_that_ended_before_ready_never_gives_an_empty_reason() {
        let silent = NotReady::Ended {
            status: Some(125),
            stderr_tail: String::new(),
            start_failure: None,
        };
        assert_eq!(
            silent.to_string(),
            "it ended before it was ready (exit status 125, the launcher's failure before the runner ran); it gave no reason (nothing on stderr)"
        );
        let unknown = NotReady::Ended {
            status: None,
            stderr_tail: " \n".into(),
            start_failure: None,
        };
        assert_eq!(
            unknown.to_string(),
            "it ended before it was ready (no exit status known); it gave no reason (nothing on stderr)"
        );
        // The launcher's own report says why, though its stderr is empty.
        let reported = NotReady::Ended {
            status: Some(125),
            stderr_tail: String::new(),
            start_failure: Some(crate::sandbox::SandboxError::Spawn(
                "the rootfs /x is gone".into(),
            )),
        };
        assert_eq!(
            reported.to_string(),
            "it ended before it was ready (exit status 125, the launcher's failure before the runner ran): failed to start the sandbox: the rootfs /x is gone"
        );
    }
}
