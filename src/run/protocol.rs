//! The runner ⇄ host line protocol.
//!
//! Newline-delimited UTF-8 JSON, one object per line, on the sandbox's stdin (host → runner)
//! and stdout (runner → host). The runner moves both to private descriptors before the code
//! starts and points 0, 1 and 2 at `/dev/null`, but the code shares runner.py's process and
//! can write lines itself, so every line the host reads is hostile: [`parse_runner_line`]
//! refuses a line that is too long, not JSON, or not exactly one of the shapes below, and
//! [`super::cell_rules::CellRules`] holds each cell's lines to the order and amounts the
//! runner keeps; the run then ends as a protocol violation (README "What it does not
//! protect" says what a well-formed forged line can still do).
//!
//! Host → runner ([`HostMessage`]):
//! ```text
//! {"type":"start","tools":[{"name":"add","stub":"…","summary":"…","private":false}],
//!  "limits":{"stdout_keep":8192,"stdout_stop":1048576,"error_chars":2000,"max_line":1048576,
//!            "calls_in_flight":16},
//!  "ready":true}
//! {"type":"cell","code":"…","nonce":"5f0c…"}
//! {"type":"result","id":7,"ok":true,"value":"{\"sum\": 5}"}
//! {"type":"result","id":8,"ok":false,"error":"…"}
//! ```
//! Runner → host ([`RunnerMessage`]):
//! ```text
//! {"type":"ready"}
//! {"type":"began","nonce":"5f0c…"}
//! {"type":"call","id":7,"tool":"add","args":{"a":2,"b":3}}
//! {"type":"output","text":"…","truncated":false}
//! {"type":"done","stdout":"…","error":null,"truncated":false,"stopped":false}
//! ```
//!
//! `output` streams the output the runner keeps, as the code writes it (line-buffered), so a
//! cell the host has to stop (deadline, memory, protocol violation, crash) still returns what
//! it printed. Its texts add up to at most [`STDOUT_KEEP_BYTES`] per cell ([`StreamedOutput`]
//! holds the runner to that); `truncated` says output was dropped, and is sent true once, after
//! which no `output` follows. On `done`, `done.stdout` is the whole kept output and the
//! streamed texts are discarded; the result is truncated when either said so.
//!
//! `ready` is sent once, only when `start` asked for it (a pooled sandbox,
//! [`crate::run::pool`]): the runner has done its imports and loaded the catalog and now
//! blocks reading its first cell. Anywhere else it is a violation.
//!
//! `began` is the first line of every cell and echoes the cell's `nonce`, a random value the
//! host makes for each cell: the runner has read the cell and runs none of its code before
//! sending it. Only the cell message carries the nonce, so a line the sandbox wrote before it
//! read the cell (while no cell ran) can never pass for this cell's: any line before the
//! matching `began` is a violation. A sandbox that dies before `began` never ran the code, so a
//! pooled one is thrown away and the cell runs again cold ([`crate::run`]); one that dies
//! after it reports its own end (crash, memory, deadline) and the code never runs twice.
//!
//! The runner writes at most `limits.calls_in_flight` (the host's [`super::MAX_CALLS_IN_FLIGHT`])
//! `call`s of a cell whose `result` it has not read; later calls wait in the runner until a
//! result comes, and those still waiting when the cell ends are never written. The host serves
//! no more than that many at once whatever is written, but it reads `output` and `done` past
//! them: a call line beyond the window stops its reading until a call is over
//! ([`super::held`]), so only lines the code forged can hold output back.
//!
//! The runner sends only what the host can read as sent: no lone surrogates, and it refuses
//! in the code (`ToolError`) a call holding NaN or an infinity, or a line over
//! `limits.max_line`. The host parses strictly all the same: such a line is a violation (a
//! float beyond f64's range too, [`crate::exact_json`]). Integers of any length are read
//! exactly as written and reach the wrapped server so.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::{MAX_PROTOCOL_LINE_BYTES, STDOUT_KEEP_BYTES};

/// Longest `error` text the runner may send in `done`, in characters (a traceback tail).
pub(crate) const MAX_DONE_ERROR_CHARS: usize = 2000;

/// One tool as the runner sees it: its Python name, stub, summary line and private label.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolEntry {
    /// The Python name the code calls (`add`, `notes__search`).
    pub name: String,
    /// The stub text: `async def add(params: dict) -> str:` and its docstring.
    pub stub: String,
    /// The one-line summary (`add(a, b): Add two integers.`).
    pub summary: String,
    /// Whether the tool is labelled private.
    pub private: bool,
    /// Its parameter names as the server spells them (at most 50, and `params` whenever
    /// the schema names it), for the hint of a call of the wrong shape; a call whose only
    /// keyword is `params=` holding a dict is the dict form unless `params` is listed.
    pub params: Vec<String>,
}

/// The runner's output limits, sent in `start` so the numbers live in one place (`limits.rs`).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct RunnerLimits {
    /// Bytes of output kept.
    pub stdout_keep: usize,
    /// Bytes of output after which the run is stopped.
    pub stdout_stop: usize,
    /// Characters of traceback tail kept in `error`.
    pub error_chars: usize,
    /// Longest line the host reads; the runner refuses a longer `call` in the code.
    pub max_line: usize,
    /// Calls of a cell the runner writes before it has read their results: the calls the
    /// host serves at once ([`super::MAX_CALLS_IN_FLIGHT`]).
    pub calls_in_flight: usize,
}

impl Default for RunnerLimits {
    fn default() -> Self {
        Self {
            stdout_keep: STDOUT_KEEP_BYTES,
            stdout_stop: crate::limits::STDOUT_STOP_BYTES,
            error_chars: MAX_DONE_ERROR_CHARS,
            max_line: MAX_PROTOCOL_LINE_BYTES,
            calls_in_flight: super::MAX_CALLS_IN_FLIGHT,
        }
    }
}

/// A message from the host to the runner.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "type", rename_all = "lowercase")]
pub(crate) enum HostMessage {
    /// The catalog and limits; sent once, first.
    Start {
        /// Every tool the code may call, in catalog order.
        tools: Vec<ToolEntry>,
        /// Output limits.
        limits: RunnerLimits,
        /// Ask for `ready` once the runner waits for its first cell (omitted when false).
        #[serde(skip_serializing_if = "std::ops::Not::not")]
        ready: bool,
    },
    /// Code to run; several in a row for a held sandbox.
    Cell {
        /// Python source, compiled with top-level `await` allowed.
        code: String,
        /// A random value made for this cell, echoed by its `began`.
        nonce: String,
    },
    /// The answer to one `call`.
    Result {
        /// The call's id.
        id: u64,
        /// Whether `value` (true) or `error` (false) is present.
        ok: bool,
        /// The result string handed to the code.
        #[serde(skip_serializing_if = "Option::is_none")]
        value: Option<String>,
        /// The refusal or failure, at most 500 characters, raised as `ToolError`.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

impl HostMessage {
    /// The line to write (JSON plus `\n`).
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).unwrap_or_default();
        line.push(b'\n');
        line
    }
}

/// The final state of one cell, as the runner reports it.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub(crate) struct Done {
    /// What the code printed, at most 8 KiB.
    pub stdout: String,
    /// `None` on success; the traceback tail or a stop reason otherwise.
    pub error: Option<String>,
    /// More was printed than was kept.
    pub truncated: bool,
    /// The runner stopped the cell (output flood).
    pub stopped: bool,
}

/// A message from the runner to the host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RunnerMessage {
    /// The code called a tool. `args` is any JSON value: a non-object is refused by the
    /// bridge as a call, not treated as a protocol violation.
    Call {
        /// Call id, unique among calls in flight.
        id: u64,
        /// The Python name the code used.
        tool: String,
        /// The arguments as sent.
        args: Value,
    },
    /// Output the runner kept, as it was written.
    Output {
        /// The text kept since the last `output`.
        text: String,
        /// Output was dropped: the cap was reached.
        truncated: bool,
    },
    /// The cell finished.
    Done(Done),
    /// The runner waits for its first cell (only when `start` asked for it).
    Ready,
    /// The runner read the cell and is about to run its code (the first line of a cell).
    Began {
        /// The nonce of the cell it read.
        nonce: String,
    },
}

/// Why a runner line was refused; the run ends as a protocol violation with this reason.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum ProtocolViolation {
    /// The line is longer than [`MAX_PROTOCOL_LINE_BYTES`].
    #[error("a line of more than {MAX_PROTOCOL_LINE_BYTES} bytes")]
    TooLong,
    /// The line is not UTF-8 JSON.
    #[error("a line that is not JSON")]
    NotJson,
    /// The line is JSON but not one of the known shapes.
    #[error("a message of unknown shape ({0})")]
    Shape(&'static str),
    /// Output past the cap, which the runner never sends.
    #[error("more than {STDOUT_KEEP_BYTES} bytes of output in one message")]
    OutputTooLong,
    /// `output` messages past the cap, added up over one cell.
    #[error("more than {STDOUT_KEEP_BYTES} bytes of output in one cell")]
    OutputOverCap,
    /// `ready` while a cell runs (the runner says it only before its first cell).
    #[error("a ready message during a cell")]
    ReadyDuringCell,
    /// A line before the cell's `began` (with its nonce): the sandbox wrote it while no
    /// cell ran, or it forged a `began`.
    #[error("a line before the runner began the cell (written while no cell ran)")]
    BeforeBegan,
    /// A second `began` in one cell.
    #[error("a second began in one cell")]
    BeganTwice,
    /// An `output` that adds no text and does not newly say the output was truncated.
    #[error("an output message that carries nothing")]
    EmptyOutput,
    /// An `output` after one that said the output was truncated.
    #[error("output after the output was truncated")]
    OutputAfterTruncated,
    /// Lines waiting on a held sandbox's output when its next cell was to be sent: it wrote
    /// them while no cell ran. The cell is not sent.
    #[error("lines written while no cell ran")]
    BetweenCells,
}

impl ProtocolViolation {
    /// Whether the refused line carried output the host therefore dropped (the result is then
    /// `truncated`, whatever the runner said).
    pub(crate) fn drops_output(&self) -> bool {
        matches!(self, Self::OutputTooLong | Self::OutputOverCap)
    }
}

/// The `output` a cell streamed so far: what a stopped cell returns as its `stdout`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StreamedOutput {
    /// The texts, joined.
    pub text: String,
    /// The runner said it dropped output.
    pub truncated: bool,
}

impl StreamedOutput {
    /// Add one `output` message. The runner sends each piece of kept text once, and says
    /// `truncated` once, on its last message of the cell; so each message adds text or newly
    /// says `truncated`, none follows that one, and the texts add up to at most
    /// [`STDOUT_KEEP_BYTES`]. At most `STDOUT_KEEP_BYTES + 1` messages pass per cell.
    ///
    /// # Errors
    /// [`ProtocolViolation::OutputAfterTruncated`] after a message that said `truncated`;
    /// [`ProtocolViolation::EmptyOutput`] for an empty text with `truncated` false;
    /// [`ProtocolViolation::OutputOverCap`] when the texts add up to more than
    /// [`STDOUT_KEEP_BYTES`] (the output is then `truncated`: the host dropped some). Nothing
    /// is added on an error.
    pub(crate) fn add(&mut self, text: &str, truncated: bool) -> Result<(), ProtocolViolation> {
        if self.truncated {
            return Err(ProtocolViolation::OutputAfterTruncated);
        }
        if text.is_empty() && !truncated {
            return Err(ProtocolViolation::EmptyOutput);
        }
        if self.text.len() + text.len() > STDOUT_KEEP_BYTES {
            self.truncated = true;
            return Err(ProtocolViolation::OutputOverCap);
        }
        self.text.push_str(text);
        self.truncated = truncated;
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireCall {
    id: u64,
    tool: String,
    args: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireBegan {
    nonce: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct WireOutput {
    text: String,
    truncated: bool,
}

/// Parse one line (without its `\n`) from the runner, strictly.
///
/// # Errors
/// A [`ProtocolViolation`] for a line over [`MAX_PROTOCOL_LINE_BYTES`], invalid JSON, a
/// `type` other than `call`, `output`, `done`, `ready` or `began`, missing or extra fields, wrong field types,
/// an `output` text or `done` stdout over the kept-output cap, a `done` whose `error`
/// exceeds [`MAX_DONE_ERROR_CHARS`], or a `done` that says `stopped` without an `error` (a
/// stopped result always says why). The cap over a cell's `output` messages together is
/// [`StreamedOutput::add`]'s; the order of a cell's lines is
/// [`super::cell_rules::CellRules`]'s.
pub(crate) fn parse_runner_line(line: &[u8]) -> Result<RunnerMessage, ProtocolViolation> {
    if line.len() > MAX_PROTOCOL_LINE_BYTES {
        return Err(ProtocolViolation::TooLong);
    }
    // The line a cell sends most, read straight into its fields; whatever this does not
    // accept is read the general way, which gives the same message for every line this
    // accepts and the reason for every other.
    if let Ok(call) = serde_json::from_slice::<DirectCall>(line)
        && crate::exact_json::check_range(&call.args).is_ok()
    {
        return Ok(RunnerMessage::Call {
            id: call.id,
            tool: call.tool,
            args: call.args,
        });
    }
    parse_by_value(line)
}

/// A `call` line read without a [`Value`] for the whole line: exactly the keys `type` (the
/// string `call`), `id`, `tool` and `args`, each once (a repeated key fails here, and
/// [`parse_by_value`] decides it).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DirectCall {
    #[serde(rename = "type")]
    _kind: CallTag,
    id: u64,
    tool: String,
    args: Value,
}

/// The `type` of a `call` line, and no other.
#[derive(Deserialize)]
enum CallTag {
    #[serde(rename = "call")]
    Call,
}

/// [`parse_runner_line`] after the length check, for any line: the line read as a [`Value`],
/// then by its `type`.
fn parse_by_value(line: &[u8]) -> Result<RunnerMessage, ProtocolViolation> {
    let value = crate::exact_json::from_slice(line).map_err(|_| ProtocolViolation::NotJson)?;
    let Value::Object(mut map) = value else {
        return Err(ProtocolViolation::Shape("not an object"));
    };
    let kind = match map.remove("type") {
        Some(Value::String(kind)) => kind,
        _ => return Err(ProtocolViolation::Shape("no type")),
    };
    match kind.as_str() {
        "call" => {
            let call: WireCall = crate::exact_json::typed(Value::Object(map))
                .map_err(|_| ProtocolViolation::Shape("bad call"))?;
            Ok(RunnerMessage::Call {
                id: call.id,
                tool: call.tool,
                args: call.args,
            })
        }
        "output" => {
            let output: WireOutput = serde_json::from_value(Value::Object(map))
                .map_err(|_| ProtocolViolation::Shape("bad output"))?;
            if output.text.len() > STDOUT_KEEP_BYTES {
                return Err(ProtocolViolation::OutputTooLong);
            }
            Ok(RunnerMessage::Output {
                text: output.text,
                truncated: output.truncated,
            })
        }
        "done" => {
            let done: Done = serde_json::from_value(Value::Object(map))
                .map_err(|_| ProtocolViolation::Shape("bad done"))?;
            if done.stdout.len() > STDOUT_KEEP_BYTES {
                return Err(ProtocolViolation::OutputTooLong);
            }
            if done
                .error
                .as_ref()
                .is_some_and(|e| e.chars().count() > MAX_DONE_ERROR_CHARS)
            {
                return Err(ProtocolViolation::Shape("error too long"));
            }
            if done.stopped && done.error.is_none() {
                return Err(ProtocolViolation::Shape("stopped without an error"));
            }
            Ok(RunnerMessage::Done(done))
        }
        "ready" if map.is_empty() => Ok(RunnerMessage::Ready),
        "ready" => Err(ProtocolViolation::Shape("bad ready")),
        "began" => {
            let began: WireBegan = serde_json::from_value(Value::Object(map))
                .map_err(|_| ProtocolViolation::Shape("bad began"))?;
            Ok(RunnerMessage::Began { nonce: began.nonce })
        }
        _ => Err(ProtocolViolation::Shape("unknown type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_call_is_accepted() {
        let m = parse_runner_line(br#"{"type":"call","id":7,"tool":"add","args":{"a":2}}"#);
        assert_eq!(
            m,
            Ok(RunnerMessage::Call {
                id: 7,
                tool: "add".into(),
                args: serde_json::json!({"a": 2})
            })
        );
    }

    #[test]
    fn a_call_line_read_straight_gives_what_the_general_reading_gives() {
        for line in [
            &br#"{"type":"call","id":7,"tool":"add","args":{"a":2,"b":[1,{"c":null}]}}"#[..],
            br#"{"args":{"z":1,"a":2},"tool":"add","id":0,"type":"call"}"#,
            br#" {"type" : "\u0063all", "id":18446744073709551615, "tool":"a\u00e9", "args":[]} "#,
            br#"{"type":"call","id":1,"id":2,"tool":"add","args":{}}"#,
            br#"{"type":"call","type":"call","id":1,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{},"args":{"a":1}}"#,
            br#"{"type":"call","id":18446744073709551616,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1.0,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1e2,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1,"tool":"add"}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{},"x":null}"#,
            br#"{"type":"Call","id":1,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{"a":1e400}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{"a":[1E-400,-2e308]}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{"a":-18446744073709551617}}"#,
            br#"{"type":"call","id":1,"tool":"\ud800","args":{}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{}} x"#,
            br#"{"type":"output","text":"hi","truncated":false}"#,
            br#"{"type":"began","nonce":"n"}"#,
        ] {
            assert_eq!(
                parse_runner_line(line),
                parse_by_value(line),
                "{}",
                String::from_utf8_lossy(line)
            );
        }
        // The straight reading takes the keys in any order and keeps the order of `args`.
        let Ok(RunnerMessage::Call { args, .. }) =
            parse_runner_line(br#"{"args":{"z":1,"a":2},"tool":"t","id":3,"type":"call"}"#)
        else {
            panic!("not a call");
        };
        assert_eq!(args.to_string(), r#"{"z":1,"a":2}"#);
    }

    #[test]
    fn a_call_holding_integers_beyond_64_bits_is_read_digit_for_digit() {
        let args = r#"{"a":18446744073709551617,"b":[-1000000000000000000000000000000],"c":1.5}"#;
        let line = format!(r#"{{"type":"call","id":1,"tool":"echo","args":{args}}}"#);
        for read in [parse_runner_line, parse_by_value] {
            let Ok(RunnerMessage::Call { args: read, .. }) = read(line.as_bytes()) else {
                panic!("not a call: {line}");
            };
            assert_eq!(read.to_string(), args);
        }
    }

    #[test]
    fn a_call_with_non_object_args_is_still_a_call() {
        let m = parse_runner_line(br#"{"type":"call","id":1,"tool":"add","args":[1,2]}"#);
        assert!(matches!(m, Ok(RunnerMessage::Call { .. })));
    }

    #[test]
    fn garbage_and_odd_shapes_are_violations() {
        for line in [
            &b"not json"[..],
            b"[]",
            b"{}",
            br#"{"type":"hello"}"#,
            br#"{"type":"call","id":-1,"tool":"add","args":{}}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{},"extra":1}"#,
            br#"{"type":"call","id":1,"tool":5,"args":{}}"#,
            br#"{"type":"done","stdout":"","error":null,"truncated":false}"#,
            br#"{"type":"done","stdout":1,"error":null,"truncated":false,"stopped":false}"#,
            br#"{"type":"output","text":"x"}"#,
            br#"{"type":"output","text":"x","truncated":false,"more":1}"#,
            br#"{"type":"output","text":null,"truncated":false}"#,
            br#"{"type":"done","stdout":"","error":"\ud800","truncated":false,"stopped":false}"#,
            br#"{"type":"call","id":1,"tool":"add","args":{"a":1e400}}"#,
            b"\xff\xfe",
        ] {
            assert!(parse_runner_line(line).is_err(), "{line:?}");
        }
    }

    #[test]
    fn an_over_long_line_or_output_is_a_violation() {
        let long = vec![b' '; MAX_PROTOCOL_LINE_BYTES + 1];
        assert_eq!(parse_runner_line(&long), Err(ProtocolViolation::TooLong));
        let out = "x".repeat(STDOUT_KEEP_BYTES + 1);
        let line = format!(
            r#"{{"type":"done","stdout":"{out}","error":null,"truncated":true,"stopped":false}}"#
        );
        assert_eq!(
            parse_runner_line(line.as_bytes()),
            Err(ProtocolViolation::OutputTooLong)
        );
    }

    #[test]
    fn output_messages_add_up_to_the_cap_and_no_further() {
        let m = parse_runner_line(br#"{"type":"output","text":"hi\n","truncated":false}"#);
        assert_eq!(
            m,
            Ok(RunnerMessage::Output {
                text: "hi\n".into(),
                truncated: false
            })
        );
        let mut so_far = StreamedOutput::default();
        let half = "x".repeat(STDOUT_KEEP_BYTES / 2);
        assert_eq!(so_far.add(&half, false), Ok(()));
        assert_eq!(so_far.add(&half, false), Ok(()));
        assert_eq!(so_far.add("", true), Ok(()));
        assert_eq!(
            so_far.add("y", false),
            Err(ProtocolViolation::OutputAfterTruncated)
        );
        assert_eq!(so_far.text.len(), STDOUT_KEEP_BYTES);
        assert!(so_far.truncated);

        let line = format!(
            r#"{{"type":"output","text":"{}","truncated":true}}"#,
            "x".repeat(STDOUT_KEEP_BYTES + 1)
        );
        assert_eq!(
            parse_runner_line(line.as_bytes()),
            Err(ProtocolViolation::OutputTooLong)
        );
    }

    #[test]
    fn the_start_limits_carry_the_line_cap_and_the_call_window() {
        let start = HostMessage::Start {
            tools: Vec::new(),
            limits: RunnerLimits::default(),
            ready: false,
        };
        let line = String::from_utf8(start.to_line()).unwrap();
        assert!(line.contains(r#""max_line":1048576"#), "{line}");
        assert!(line.contains(r#""calls_in_flight":16"#), "{line}");
        assert!(!line.contains("ready"), "{line}");
    }

    #[test]
    fn ready_is_asked_for_only_by_a_pooled_start_and_has_no_fields() {
        let start = HostMessage::Start {
            tools: Vec::new(),
            limits: RunnerLimits::default(),
            ready: true,
        };
        let line = String::from_utf8(start.to_line()).unwrap();
        assert!(line.ends_with(",\"ready\":true}\n"), "{line}");
        assert_eq!(
            parse_runner_line(br#"{"type":"ready"}"#),
            Ok(RunnerMessage::Ready)
        );
        assert!(parse_runner_line(br#"{"type":"ready","x":1}"#).is_err());
    }

    #[test]
    fn began_carries_the_nonce_and_nothing_else() {
        assert_eq!(
            parse_runner_line(br#"{"type":"began","nonce":"n1"}"#),
            Ok(RunnerMessage::Began { nonce: "n1".into() })
        );
        for line in [
            &br#"{"type":"began"}"#[..],
            br#"{"type":"began","nonce":1}"#,
            br#"{"type":"began","nonce":"n1","x":1}"#,
        ] {
            assert_eq!(
                parse_runner_line(line),
                Err(ProtocolViolation::Shape("bad began")),
                "{line:?}"
            );
        }
    }

    #[test]
    fn a_stopped_done_must_say_why() {
        assert_eq!(
            parse_runner_line(
                br#"{"type":"done","stdout":"","error":null,"truncated":false,"stopped":true}"#
            ),
            Err(ProtocolViolation::Shape("stopped without an error"))
        );
        assert!(matches!(
            parse_runner_line(
                br#"{"type":"done","stdout":"","error":"flood","truncated":true,"stopped":true}"#
            ),
            Ok(RunnerMessage::Done(Done { stopped: true, .. }))
        ));
    }

    #[test]
    fn each_output_message_adds_text_or_newly_says_truncated_and_none_follows_that() {
        let mut output = StreamedOutput::default();
        assert_eq!(output.add("", false), Err(ProtocolViolation::EmptyOutput));
        assert_eq!(output.add("a", false), Ok(()));
        assert_eq!(output.add("", true), Ok(()));
        for (text, truncated) in [("", true), ("", false), ("b", false), ("b", true)] {
            assert_eq!(
                output.add(text, truncated),
                Err(ProtocolViolation::OutputAfterTruncated)
            );
        }
        assert_eq!(output.text, "a");
    }

    #[test]
    fn output_over_the_cap_is_dropped_and_the_output_then_says_truncated() {
        let mut output = StreamedOutput::default();
        assert_eq!(output.add(&"x".repeat(STDOUT_KEEP_BYTES), false), Ok(()));
        assert!(!output.truncated);
        assert_eq!(
            output.add("y", false),
            Err(ProtocolViolation::OutputOverCap)
        );
        assert!(output.truncated, "the host dropped output");
        assert_eq!(output.text.len(), STDOUT_KEEP_BYTES);
        assert!(ProtocolViolation::OutputTooLong.drops_output());
        assert!(!ProtocolViolation::NotJson.drops_output());
    }

    #[test]
    fn host_messages_serialise_as_tagged_lines() {
        let line = HostMessage::Result {
            id: 3,
            ok: true,
            value: Some("x".into()),
            error: None,
        }
        .to_line();
        assert_eq!(
            line,
            b"{\"type\":\"result\",\"id\":3,\"ok\":true,\"value\":\"x\"}\n"
        );
    }
}
