//! The audit log: one JSON object per line (JSON Lines), one line per record, for every run
//! and every tool call the code asked for (`--audit FILE`). The schema is in
//! `docs/audit-log.md`; every record carries [`SCHEMA_VERSION`] as `v`.
//!
//! Durability: each record is serialised first and then written whole on an unbuffered
//! `O_APPEND` descriptor, by one thread in order (audit_writer.rs), so records never
//! interleave; a record a full disk cut short is ended with a `\n` before the next one; a run or call waits for its record's write (at most
//! 2 s, `WRITE_WAIT`), so a crash or SIGKILL of `serve` loses at most the records being
//! written. A torn last line (no `\n`) is closed with a `\n` when the log is opened again, so
//! the next record starts on a line of its own; readers skip a line that does not parse.
//! Records are not fsync'ed: a crash of the whole machine can lose what the kernel had not
//! written yet.
//!
//! Failures: a record that cannot be written (a full disk, a file gone read-only), or not
//! within 2 s (`WRITE_WAIT`: a FIFO nobody reads, a hung file system: the writer thread is
//! stuck, serve's runtime is not), is logged on stderr and remembered
//! ([`AuditLog::failure`]). With `--audit-required` the bridge then refuses every call and
//! the run fails closed; without it runs go on unaudited.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::audit_writer::Writer;

/// The version of the record schema, written as `v` in every record. It changes when a field
/// changes meaning or goes away; new optional fields keep it.
pub(crate) const SCHEMA_VERSION: u32 = 1;

/// Mode of a log file `serve` creates or appends to: read and write for its owner only
/// (arguments and code can hold secrets).
pub(crate) const FILE_MODE: u32 = 0o600;

/// The `reason` of a call record whose call the run's end cut short (its deadline, a
/// cancel): written when the call's future is dropped, after an approval left unanswered
/// or while the server had not answered.
pub(crate) const RUN_ENDED: &str =
    "the run ended (its deadline, a cancel or a stop) before this call was over";

/// How a call's arguments are recorded (`--audit-args`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArgsMode {
    /// The arguments object as the code sent it.
    Full,
    /// `{"sha256": hex, "bytes": n}` of the arguments' compact JSON (the default): enough to
    /// tell two calls apart and to match a replay, without the values.
    #[default]
    Digest,
    /// No `args` field.
    Off,
}

/// Where the log goes and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditOptions {
    /// The log file (created 0600 when missing).
    pub path: PathBuf,
    /// How arguments are recorded (`--audit-args`, default [`ArgsMode::Digest`]).
    pub args: ArgsMode,
    /// Whether a run's record holds its code (`--audit-code on|off`, default on); its
    /// sha256 is always there.
    pub code: bool,
    /// Fail closed when a record cannot be written (`--audit-required`).
    pub required: bool,
}

impl AuditOptions {
    /// Log to `path` with the defaults: digests of arguments, the code, not required.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            args: ArgsMode::Digest,
            code: true,
            required: false,
        }
    }
}

/// Why the log could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Opening, preparing or writing the file failed.
    #[error("the audit log {path} {action}: {error}")]
    Io {
        /// The log file.
        path: PathBuf,
        /// What was being done (`cannot be opened`, `cannot be written`, …).
        action: &'static str,
        /// The system's error, shown in this error's text (not also a `source()`, so an
        /// error chain printed with `{:#}` does not say it twice).
        error: std::io::Error,
    },
    /// The path names a file another user could have planted or shares: a symbolic link, a
    /// regular file or FIFO owned by another user, or a regular file with more than one hard
    /// link. Nothing was written to it and its mode was left alone.
    #[error("the audit log {path} is refused: {why}")]
    Refused {
        /// The log file.
        path: PathBuf,
        /// What is wrong with it and what to do instead.
        why: String,
    },
    /// An earlier record could not be written and `--audit-required` is set.
    #[error("{0}; --audit-required refuses to go on without the audit log")]
    Broken(String),
}

/// The audit log of one `serve` or `exec` process.
#[derive(Debug)]
pub struct AuditLog {
    options: AuditOptions,
    writer: Writer,
}

impl AuditLog {
    /// Open (or create) the log for appending, without following a symbolic link as the
    /// last component (`O_NOFOLLOW`, open(2)): a link another user planted in a shared
    /// directory (`/tmp`) must not make us chmod and append to its target. A regular file or
    /// FIFO must be ours (owner = effective uid), and a regular file must have one hard link,
    /// for the same reason; a device (only root makes those) is used as it is. A regular
    /// file gets mode [`FILE_MODE`] (set on an existing one too). A regular file whose last
    /// byte is not `\n` (a record torn by a crash) gets a `\n` first.
    ///
    /// # Errors
    /// [`AuditError::Refused`] for a symbolic link, another user's file, or a hard-linked
    /// file; [`AuditError::Io`] when the file cannot be opened, its mode set, or the newline
    /// written.
    pub fn open(options: AuditOptions) -> Result<Self, AuditError> {
        let io = |action, error| AuditError::Io {
            path: options.path.clone(),
            action,
            error,
        };
        let refused = |why: String| AuditError::Refused {
            path: options.path.clone(),
            why,
        };
        let flags = libc::O_CLOEXEC | libc::O_NOFOLLOW;
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .mode(FILE_MODE)
            .custom_flags(flags)
            .open(&options.path)
            .or_else(|e| {
                // A FIFO or a device can be opened for writing only.
                if e.raw_os_error() == Some(libc::EACCES) || e.raw_os_error() == Some(libc::EINVAL)
                {
                    OpenOptions::new()
                        .append(true)
                        .custom_flags(flags)
                        .open(&options.path)
                } else {
                    Err(e)
                }
            })
            .map_err(|e| {
                if e.raw_os_error() == Some(libc::ELOOP) {
                    refused(
                        "it is a symbolic link, which is never followed (another user could \
have planted it); name the file itself"
                            .into(),
                    )
                } else {
                    io("cannot be opened", e)
                }
            })?;
        let meta = file.metadata().map_err(|e| io("cannot be read", e))?;
        if let Some(why) = foreign(&meta, nix::unistd::geteuid().as_raw()) {
            return Err(refused(why));
        }
        if meta.file_type().is_file() {
            if meta.mode() & 0o7777 != FILE_MODE {
                file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
                    .map_err(|e| io("cannot be made mode 0600", e))?;
            }
            if meta.len() > 0
                && !ends_with_newline(&mut file).map_err(|e| io("cannot be read", e))?
            {
                file.write_all(b"\n")
                    .map_err(|e| io("cannot be written", e))?;
            }
        }
        let writer = Writer::start(file, options.path.clone())
            .map_err(|e| io("cannot get its writer thread", e))?;
        Ok(Self { options, writer })
    }

    /// The log file.
    pub fn path(&self) -> &Path {
        &self.options.path
    }

    /// Whether runs fail closed when the log cannot be written (`--audit-required`).
    pub fn required(&self) -> bool {
        self.options.required
    }

    /// Why the last record could not be written, while no later one was.
    pub fn failure(&self) -> Option<String> {
        self.writer.health.failure()
    }

    /// [`AuditError::Broken`] when the log is required and its last write failed; what the
    /// bridge checks before a call goes out.
    ///
    /// # Errors
    /// As said.
    pub fn check_required(&self) -> Result<(), AuditError> {
        match self.failure() {
            Some(why) if self.required() => Err(AuditError::Broken(why)),
            _ => Ok(()),
        }
    }

    /// Append one record, stamped with `v` and `time`, as one line, and wait for its
    /// write, at most 2 s, `WRITE_WAIT` (not at all while the log is stalled: the record is
    /// queued and this fails at once).
    ///
    /// # Errors
    /// [`AuditError::Io`] when it could not be written whole, or not in time (also
    /// remembered, see [`Self::failure`], and logged on stderr). A record not written in
    /// time stays queued and may still be written later.
    pub async fn write(&self, record: &Record) -> Result<(), AuditError> {
        self.writer
            .write(self.line(record))
            .await
            .map_err(|error| AuditError::Io {
                path: self.options.path.clone(),
                action: "cannot be written",
                error,
            })
    }

    /// Append one record without waiting for its write (where nothing can wait: a call's
    /// record written as its future is dropped). A failure is remembered as by
    /// [`Self::write`].
    pub fn write_unwaited(&self, record: &Record) {
        self.writer.write_unwaited(self.line(record));
    }

    /// `record` stamped with `v` and `time`, as one line with its `\n`.
    fn line(&self, record: &Record) -> Vec<u8> {
        let stamped = Stamped {
            v: SCHEMA_VERSION,
            time: now_rfc3339(),
            record,
        };
        let mut line = escape_line_breaks(serde_json::to_vec(&stamped).unwrap_or_default());
        line.push(b'\n');
        line
    }

    /// Records that could not be written since the log was opened (a run compares the
    /// count at its start and end to know whether all of its records were written).
    pub fn failed_writes(&self) -> u64 {
        self.writer.health.failed_writes()
    }

    /// The `args` field of a call record for these arguments, as `--audit-args` says.
    pub fn args_field(&self, args: &Value) -> Option<Value> {
        let digest = || {
            let bytes = serde_json::to_vec(args).unwrap_or_default();
            serde_json::json!({"sha256": sha256_hex(&bytes), "bytes": bytes.len()})
        };
        match self.options.args {
            // Arguments over the size the bridge takes (refused for it) are the code's to
            // make as large as a protocol line: their digest keeps the record small.
            ArgsMode::Full if args_size(args) > crate::limits::MAX_ARGS_BYTES => Some(digest()),
            ArgsMode::Full => Some(args.clone()),
            ArgsMode::Digest => Some(digest()),
            ArgsMode::Off => None,
        }
    }

    /// The `code` field of a run record, as `--audit-code` says.
    pub fn code_field(&self, code: &str) -> Option<String> {
        self.options.code.then(|| code.to_owned())
    }
}

/// `json` (serialized JSON) with U+0085, U+2028 and U+2029 written as `\u0085`,
/// `\u2028` and `\u2029`: readers that split lines at them (Python's `str.splitlines`)
/// then see one line per record. JSON already escapes the control characters they also
/// split at; outside strings JSON has no non-ASCII bytes, so the result parses to the same
/// value.
fn escape_line_breaks(json: Vec<u8>) -> Vec<u8> {
    let text = match String::from_utf8(json) {
        Ok(text) => text,
        Err(e) => return e.into_bytes(),
    };
    if !text.contains(['\u{85}', '\u{2028}', '\u{2029}']) {
        return text.into_bytes();
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\u{85}' | '\u{2028}' | '\u{2029}' => {
                escaped.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => escaped.push(c),
        }
    }
    escaped.into_bytes()
}

/// Bytes of `args` as compact JSON.
fn args_size(args: &Value) -> usize {
    serde_json::to_vec(args).map_or(usize::MAX, |bytes| bytes.len())
}

/// Longest tool name a call record keeps, in characters: a name the code made up (no known
/// tool) can be as long as a protocol line.
pub(crate) const MAX_RECORDED_TOOL_CHARS: usize = 200;

/// `name` cut to [`MAX_RECORDED_TOOL_CHARS`] characters, `…` marking a cut.
pub(crate) fn recorded_tool_name(name: &str) -> String {
    match name.char_indices().nth(MAX_RECORDED_TOOL_CHARS) {
        Some((at, _)) => format!("{}…", &name[..at]),
        None => name.to_owned(),
    }
}

/// Why an opened log file (`meta`, from `fstat`) is not one `euid` may treat as its own:
/// a regular file or FIFO owned by another user (it could have been planted, and its owner
/// would read every record), or a regular file with more than one hard link (a link to
/// another file, `/etc/passwd` say, made where `fs.protected_hardlinks` is off). `None`:
/// it may be used.
fn foreign(meta: &std::fs::Metadata, euid: u32) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if (kind.is_file() || kind.is_fifo()) && meta.uid() != euid {
        return Some(format!(
            "it is owned by uid {}, not by this process's uid {euid}; an audit log must be \
its writer's own file (remove it or name another path)",
            meta.uid()
        ));
    }
    if kind.is_file() && meta.nlink() > 1 {
        return Some(format!(
            "it has {} hard links, so it may be another file under a second name; name a file \
with one link",
            meta.nlink()
        ));
    }
    None
}

/// Whether the file's last byte is `\n`.
fn ends_with_newline(file: &mut File) -> std::io::Result<bool> {
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8; 1];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The lowercase hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Now, as RFC 3339 in UTC with milliseconds (`2026-11-30T15:04:05.123Z`).
fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A record with the fields every record has.
#[derive(Serialize)]
struct Stamped<'a> {
    v: u32,
    time: String,
    #[serde(flatten)]
    record: &'a Record,
}

/// One line of the log; `kind` names the variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Record {
    /// A run began: written before the code reaches the sandbox, so a killed `serve` still
    /// shows which code ran.
    RunStart(RunStart),
    /// A tool call the code asked for, sent or refused, once it is over.
    Call(CallRecord),
    /// A run ended (written after its last call record).
    RunEnd(RunEnd),
}

/// `kind: "run_start"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunStart {
    /// The run's id (a UUID v4), shared by its call records and its `run_end`.
    pub run: String,
    /// The MCP session the run belongs to (one per `serve` over stdio; `exec`: its own).
    pub session: String,
    /// Lowercase hex sha256 of the code's UTF-8 bytes.
    pub code_sha256: String,
    /// The code, unless `--audit-code off`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// What became of a call: `sent` to its server, `withdrawn` before it reached it, or
/// `refused` by the bridge (with `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The call went out to its wrapped server: its request was written to the server's
    /// stdin (or its HTTP POST started).
    Sent,
    /// The call passed every check, but its request never reached the server: the call
    /// ended (its timeout, the run's end) while the request still waited in `serve`'s write
    /// queue, or the connection failed first; `reason` says how the call ended.
    Withdrawn,
    /// The bridge refused it before it went out.
    Refused,
}

/// How a person answered an approval request (`elicitation/create`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// `action: "accept"`: the call is sent.
    Accepted,
    /// `action: "decline"`.
    Declined,
    /// `action: "cancel"` (dismissed without a choice).
    Cancelled,
    /// Nobody could be asked: the client did not declare the elicitation capability, or
    /// there is no client (`exec`), or the request failed, or the arguments were too long
    /// to show whole (then nobody was asked); the reason is the call's.
    Unavailable,
    /// The run ended (its deadline, a cancel) while the person had not answered; the
    /// request was withdrawn and the call never sent.
    Unanswered,
}

/// The approval step of a call that needed one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Approval {
    /// The answer.
    pub decision: Decision,
    /// Time spent waiting for it, in milliseconds.
    pub wait_ms: u64,
}

/// `kind: "call"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallRecord {
    /// The run's id.
    pub run: String,
    /// The run's session.
    pub session: String,
    /// 1 for the run's first call, numbered as the bridge takes each call up.
    pub seq: u32,
    /// The wrapped server's name (absent when the code named no known tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// The tool's MCP name, or the name the code used when it is no known tool.
    pub tool: String,
    /// The arguments, as `--audit-args` says (absent with `off`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Value>,
    /// `sent`, `withdrawn` or `refused`.
    pub verdict: Verdict,
    /// Why it was refused, or why a sent call failed (the `ToolError` the code saw;
    /// absent for a result, and for an `isError` result, whose text is the server's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The approval step, for a tool that needs one and got as far as asking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Approval>,
    /// From the host reading the call to its answer to the code, in milliseconds.
    pub duration_ms: u64,
    /// Bytes of the result's text (sent calls the server answered).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<usize>,
    /// The result's `isError` (sent calls the server answered).
    #[serde(rename = "isError", skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The code finished without an error.
    Ok,
    /// The code raised (or exited with a non-zero status).
    Error,
    /// The run was stopped: deadline, cancel, output flood, protocol violation, audit
    /// failure; `stopped_reason` says which.
    Stopped,
    /// No sandbox could be started.
    Failed,
}

/// `kind: "run_end"`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEnd {
    /// The run's id.
    pub run: String,
    /// The run's session.
    pub session: String,
    /// Lowercase hex sha256 of the code (as in `run_start`).
    pub code_sha256: String,
    /// How it ended.
    pub outcome: Outcome,
    /// Why it was stopped or failed (the host's message; absent otherwise). The code's own
    /// traceback is not recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_reason: Option<String>,
    /// Calls that passed every check and were handed to their servers' connections (`sent`
    /// and `withdrawn`).
    pub calls: u32,
    /// From `run_start` to the result, in milliseconds.
    pub duration_ms: u64,
}

#[cfg(test)]
#[path = "audit_tests.rs"]
mod tests;
