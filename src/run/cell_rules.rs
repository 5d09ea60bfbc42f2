//! The host's own rules over the lines of one cell: every line from the sandbox is hostile
//! (the code shares runner.py's process and can write lines itself), so the host holds a
//! cell's lines to the order and amounts the runner keeps, and builds the result's flags
//! from what it saw itself rather than from what a `done` claims.
//!
//! A cell's lines, as [`CellRules::take`] accepts them:
//! - first `began`, with the nonce the host sent in that cell; any other line before it is
//!   [`ProtocolViolation::BeforeBegan`] (it was written while no cell ran: after the last
//!   cell's `done`, or before this cell reached the runner), a second `began` is
//!   [`ProtocolViolation::BeganTwice`], and `ready` is [`ProtocolViolation::ReadyDuringCell`];
//! - then `call` and `output` lines in any order: each `output` adds text or newly says
//!   `truncated`, none follows that, and their texts add up to at most 8 KiB
//!   ([`StreamedOutput::add`]); calls are the run loop's to serve (it bounds those in flight,
//!   the bridge counts them against the budget, the deadline covers them);
//! - then `done`, after which the host reads nothing more of the cell.
//!
//! The result of a `done` is its `stdout` and `error` (each within the caps
//! [`super::protocol::parse_runner_line`] enforces) with `truncated` true when the `done` or
//! any `output` of the cell said so, or the host dropped output itself.

use serde_json::Value;

use super::RunResult;
use super::protocol::{ProtocolViolation, RunnerMessage, StreamedOutput};

/// What the run loop does with a line [`CellRules`] accepted.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Nothing more: the line was `began` or `output`.
    Read,
    /// Serve this call.
    Call {
        /// The call's id, echoed in its result.
        id: u64,
        /// The Python name the code used.
        tool: String,
        /// The arguments as sent.
        args: Value,
    },
    /// The cell ended with this result.
    Done(RunResult),
}

/// The state of one cell's lines: whether it began, and the output it streamed.
#[derive(Debug)]
pub(super) struct CellRules {
    nonce: String,
    began: bool,
    /// What the cell streamed so far (a stopped cell's `stdout`).
    pub(super) output: StreamedOutput,
}

impl CellRules {
    /// The rules of a cell sent with `nonce`.
    pub(super) fn new(nonce: String) -> Self {
        Self {
            nonce,
            began: false,
            output: StreamedOutput::default(),
        }
    }

    /// Whether the runner acknowledged the cell (its `began` arrived): from then on the code
    /// may have run, and a death is the cell's own end.
    pub(super) fn began(&self) -> bool {
        self.began
    }

    /// Take one parsed line (or the reason it could not be parsed).
    ///
    /// # Errors
    /// The [`ProtocolViolation`] that ends the cell: the parser's, or one of the rules above.
    /// A refused line that carried output marks the output truncated.
    pub(super) fn take(
        &mut self,
        line: Result<RunnerMessage, ProtocolViolation>,
    ) -> Result<Step, ProtocolViolation> {
        let message = line.inspect_err(|violation| {
            if violation.drops_output() {
                self.output.truncated = true;
            }
        })?;
        if !self.began {
            return match message {
                RunnerMessage::Began { nonce } if nonce == self.nonce => {
                    self.began = true;
                    Ok(Step::Read)
                }
                _ => Err(ProtocolViolation::BeforeBegan),
            };
        }
        match message {
            RunnerMessage::Began { .. } => Err(ProtocolViolation::BeganTwice),
            RunnerMessage::Ready => Err(ProtocolViolation::ReadyDuringCell),
            RunnerMessage::Output { text, truncated } => {
                self.output.add(&text, truncated).map(|()| Step::Read)
            }
            RunnerMessage::Call { id, tool, args } => Ok(Step::Call { id, tool, args }),
            RunnerMessage::Done(done) => Ok(Step::Done(RunResult {
                stdout: done.stdout,
                error: done.error,
                truncated: done.truncated || self.output.truncated,
                stopped: done.stopped,
            })),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::STDOUT_KEEP_BYTES;
    use crate::run::protocol::parse_runner_line;

    fn take(rules: &mut CellRules, line: &str) -> Result<Step, ProtocolViolation> {
        rules.take(parse_runner_line(line.as_bytes()))
    }

    fn begun() -> CellRules {
        let mut rules = CellRules::new("n1".into());
        assert_eq!(
            take(&mut rules, r#"{"type":"began","nonce":"n1"}"#),
            Ok(Step::Read)
        );
        rules
    }

    const DONE_SHORT: &str =
        r#"{"type":"done","stdout":"short","error":null,"truncated":false,"stopped":false}"#;

    #[test]
    fn no_line_counts_before_the_began_that_names_this_cell() {
        for line in [
            r#"{"type":"call","id":1,"tool":"add","args":{}}"#,
            r#"{"type":"output","text":"x","truncated":false}"#,
            DONE_SHORT,
            r#"{"type":"ready"}"#,
            r#"{"type":"began","nonce":"an earlier cell's"}"#,
        ] {
            let mut rules = CellRules::new("n1".into());
            assert_eq!(
                take(&mut rules, line),
                Err(ProtocolViolation::BeforeBegan),
                "{line}"
            );
            assert!(!rules.began());
        }
        let rules = begun();
        assert!(rules.began());
    }

    #[test]
    fn began_comes_once_and_ready_never_during_a_cell() {
        let mut rules = begun();
        assert_eq!(
            take(&mut rules, r#"{"type":"began","nonce":"n1"}"#),
            Err(ProtocolViolation::BeganTwice)
        );
        assert_eq!(
            take(&mut begun(), r#"{"type":"ready"}"#),
            Err(ProtocolViolation::ReadyDuringCell)
        );
    }

    #[test]
    fn calls_are_handed_to_the_run_loop() {
        assert_eq!(
            take(
                &mut begun(),
                r#"{"type":"call","id":7,"tool":"add","args":{"a":1}}"#
            ),
            Ok(Step::Call {
                id: 7,
                tool: "add".into(),
                args: serde_json::json!({"a": 1})
            })
        );
    }

    #[test]
    fn a_done_that_denies_truncation_the_cell_streamed_is_still_truncated() {
        let mut rules = begun();
        let full = format!(
            r#"{{"type":"output","text":"{}","truncated":true}}"#,
            "x".repeat(STDOUT_KEEP_BYTES)
        );
        assert_eq!(take(&mut rules, &full), Ok(Step::Read));
        let Ok(Step::Done(result)) = take(&mut rules, DONE_SHORT) else {
            panic!("a done");
        };
        assert_eq!(result.stdout, "short");
        assert!(result.truncated && !result.stopped);
        // A cell that streamed nothing dropped takes the done's word.
        let Ok(Step::Done(result)) = take(&mut begun(), DONE_SHORT) else {
            panic!("a done");
        };
        assert!(!result.truncated);
    }

    #[test]
    fn a_done_over_the_output_cap_ends_the_cell_truncated() {
        let mut rules = begun();
        assert_eq!(
            take(
                &mut rules,
                r#"{"type":"output","text":"kept\n","truncated":false}"#
            ),
            Ok(Step::Read)
        );
        let forged = format!(
            r#"{{"type":"done","stdout":"{}","error":null,"truncated":false,"stopped":false}}"#,
            "F".repeat(100_000)
        );
        assert_eq!(
            take(&mut rules, &forged),
            Err(ProtocolViolation::OutputTooLong)
        );
        assert_eq!(rules.output.text, "kept\n");
        assert!(rules.output.truncated);
    }
}
