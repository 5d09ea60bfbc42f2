//! Reading one line of a wrapped server into what it means, on a blocking thread when the
//! line is large.
//!
//! rmcp's typed messages are read through serde's buffered content (untagged and flattened
//! enums), which costs about a microsecond per byte of small JSON objects in a release
//! build: a 16 MiB result of tiny content blocks takes seconds. `serve` runs on one thread,
//! so a line longer than [`INLINE_DECODE_BYTES`] is read on tokio's blocking pool while
//! the runtime goes on serving every other run, session, ping, cancel and deadline. The
//! reader waits for that line before it reads the next one, so a server's messages reach
//! rmcp in the order it sent them (a result never overtakes an earlier notification).
//!
//! A notification longer than [`MAX_NOTIFICATION_BYTES`] is dropped before rmcp's typed
//! read: the only notification `serve` acts on is `notifications/tools/list_changed`,
//! which is a few dozen bytes, so a flood of large `notifications/message` lines costs one
//! JSON parse each, off the runtime thread.

use tokio::task::JoinHandle;

use super::repair::{Decoded, Pending, PendingMap, decode, id_key, unparsable_line};
use super::tasks::{RawRequests, TaskTools, record_task_support};

/// Longest line read where it is received, in bytes; a longer one is read on a blocking
/// thread. At about 1 µs per byte of the costliest JSON (many tiny objects, release build),
/// a line this long holds the runtime for at most about 8 ms, while the hop to a thread
/// costs tens of microseconds, which ordinary small answers are spared.
pub(super) const INLINE_DECODE_BYTES: usize = 8 * 1024;

/// Longest notification (a message with a `method` and no `id`) handed to rmcp, in bytes;
/// a longer one is dropped with a warning.
pub(super) const MAX_NOTIFICATION_BYTES: usize = 64 * 1024;

/// What one line of a server comes to.
pub(super) enum LineOutcome {
    /// Nothing but whitespace (and a BOM): skipped.
    Blank,
    /// Read (a message for rmcp, a request to refuse, or junk).
    Read(Decoded),
    /// The answer to a request sent beside rmcp, handed to its waiter.
    Delivered,
    /// A notification over [`MAX_NOTIFICATION_BYTES`], dropped unread.
    OversizeNotification,
}

/// What a line is read against: the requests waiting for answers. Cheap to clone, and
/// `Send`, so a large line can be read on another thread.
#[derive(Clone)]
pub(super) struct LineReader {
    pub(super) pending: PendingMap,
    pub(super) raw: RawRequests,
    pub(super) task_tools: TaskTools,
}

impl LineReader {
    /// Read one line (BOM and surrounding whitespace already stripped). The caller
    /// picks the thread: see [`InFlight`].
    pub(super) fn read(&self, bytes: &[u8]) -> LineOutcome {
        if bytes.is_empty() {
            return LineOutcome::Blank;
        }
        let pending = &self.pending;
        // The usual line, a call's answer, is read once into its typed result.
        if let Some(message) = super::call_answer::read_line(bytes, pending) {
            return LineOutcome::Read(Decoded::Message(Box::new(message)));
        }
        let decoded = match crate::exact_json::from_slice(bytes) {
            Ok(value) if self.raw.deliver(&value) => return LineOutcome::Delivered,
            Ok(value) => {
                if bytes.len() > MAX_NOTIFICATION_BYTES
                    && value
                        .as_object()
                        .is_some_and(|o| o.contains_key("method") && !o.contains_key("id"))
                {
                    return LineOutcome::OversizeNotification;
                }
                if let Some(result) = value.get("result")
                    && value.get("id").and_then(id_key).is_some_and(|key| {
                        pending
                            .lock()
                            .is_ok_and(|p| p.get(&key) == Some(&Pending::ListTools))
                    })
                {
                    record_task_support(&self.task_tools, result);
                }
                decode(value, pending)
            }
            Err(e) => unparsable_line(bytes, &e, pending),
        };
        LineOutcome::Read(decoded)
    }
}

/// A large line being read on a blocking thread: the line comes back with what it means,
/// so its buffer is reused. Awaiting it is cancel-safe (the reader keeps the handle, and
/// the next call goes on waiting for the same line).
pub(super) type InFlight = JoinHandle<(Vec<u8>, LineOutcome)>;

/// Start reading `line` (the raw line, BOM and whitespace included) on a blocking thread.
pub(super) fn read_off_thread(reader: &LineReader, line: Vec<u8>) -> InFlight {
    let reader = reader.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = reader.read(trimmed(&line));
        (line, outcome)
    })
}

/// A line without a leading UTF-8 BOM (some runtimes add one per stream or write) and
/// surrounding ASCII whitespace (a `\r` before the newline).
pub(super) fn trimmed(line: &[u8]) -> &[u8] {
    line.strip_prefix(b"\xef\xbb\xbf")
        .unwrap_or(line)
        .trim_ascii()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader() -> LineReader {
        LineReader {
            pending: PendingMap::default(),
            raw: RawRequests::new(NoWriter),
            task_tools: TaskTools::default(),
        }
    }

    struct NoWriter;

    impl super::super::tasks::LineWriter for NoWriter {
        fn write_line(
            &self,
            _line: Vec<u8>,
            _kind: super::super::write_queue::Line,
        ) -> futures::future::BoxFuture<'static, std::io::Result<()>> {
            Box::pin(async { Ok(()) })
        }
    }

    fn notification(data_bytes: usize) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "x".repeat(data_bytes)}
        }))
        .unwrap()
    }

    #[test]
    fn a_notification_over_the_limit_is_dropped_unread_and_a_small_one_is_read() {
        let big = notification(MAX_NOTIFICATION_BYTES);
        assert!(matches!(
            reader().read(&big),
            LineOutcome::OversizeNotification
        ));
        let small = notification(100);
        assert!(matches!(
            reader().read(&small),
            LineOutcome::Read(Decoded::Message(_))
        ));
        // A response that large is read: only notifications are dropped.
        let response = format!(
            r#"{{"jsonrpc":"2.0","id":1,"result":{{"x":"{}"}}}}"#,
            "x".repeat(MAX_NOTIFICATION_BYTES)
        );
        assert!(matches!(
            reader().read(response.as_bytes()),
            LineOutcome::Read(Decoded::Message(_))
        ));
    }

    #[test]
    fn a_blank_line_is_skipped_and_a_bom_and_crlf_are_stripped() {
        assert!(matches!(
            reader().read(trimmed(b" \r\n")),
            LineOutcome::Blank
        ));
        assert_eq!(trimmed(b"\xef\xbb\xbf{}\r\n"), b"{}");
    }
}
