//! The stdio transport to a wrapped server, hardened against what sloppy servers send.
//!
//! MCP's stdio transport (spec "Transports § stdio") is newline-delimited JSON-RPC on the
//! server's stdout. Wrapped servers are third-party programs, so this reader:
//! - bounds every line at [`MAX_SERVER_LINE_BYTES`]; a longer line ends the connection with a
//!   clear reason instead of growing memory; bytes after the last newline at the end of
//!   stdout are not a message (`crate::lines`) and are dropped with a warning;
//! - strips a UTF-8 BOM and a trailing `\r`, skips blank lines and lines that are not JSON-RPC
//!   (junk printed by the server before or after the handshake), logging a bounded sample;
//! - answers a request of the server's that rmcp cannot read with an error, so the server
//!   never waits on us;
//! - hands every other line to [`super::repair`], which turns what it can into a message
//!   rmcp accepts and fails at once a request whose answer cannot be read.

use std::sync::{Arc, Mutex};

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::repair::{Decoded, Pending, PendingMap, decode, expect_answer, id_key, unparsable_line};
use super::tasks::{LineWriter, RawRequests, TaskTools, record_task_support};
use crate::lines::{LineRead, read_line};

/// Longest line accepted from a wrapped server, in bytes.
pub(super) const MAX_SERVER_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Junk lines logged per connection before further ones are only counted.
const MAX_JUNK_LOGGED: usize = 5;

/// Why the connection to a wrapped server ended, readable by the bridge, and a signal for
/// whoever waits on it (a call in flight races its answer against this).
#[derive(Clone, Default)]
pub(super) struct CloseReason(Arc<CloseState>);

#[derive(Default)]
struct CloseState {
    /// What the transport saw: end of stdout, a line too long, a read error.
    reason: Mutex<Option<String>>,
    /// How the process ended, once it has.
    exit: Mutex<Option<String>>,
    /// Whether the reason is the plain end of stdout (an exit status then says more).
    eof: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl CloseReason {
    fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.reason.lock() {
            slot.get_or_insert(reason);
        }
        self.0.notify.notify_waiters();
    }

    fn set_eof(&self, reason: String) {
        let first = self.0.reason.lock().is_ok_and(|slot| slot.is_none());
        if first {
            self.0.eof.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.set(reason);
    }

    /// Record how the server process ended (`exited (exit status: 1)`, `was killed by
    /// signal 9`); this also ends the connection.
    pub(super) fn set_exit(&self, how: String) {
        if let Ok(mut slot) = self.0.exit.lock() {
            slot.get_or_insert(how);
        }
        self.0.notify.notify_waiters();
    }

    /// The reason, once the connection has ended: what the transport saw, unless that was
    /// only the end of stdout and the exit status is known.
    pub(super) fn get(&self) -> Option<String> {
        let reason = self.0.reason.lock().ok().and_then(|slot| slot.clone());
        let exit = self.0.exit.lock().ok().and_then(|slot| slot.clone());
        match (reason, exit) {
            (Some(_), Some(exit)) if self.0.eof.load(std::sync::atomic::Ordering::SeqCst) => {
                Some(exit)
            }
            (Some(reason), _) => Some(reason),
            (None, exit) => exit,
        }
    }

    /// The reason, once the connection has ended; when only the end of stdout is known so
    /// far, waits up to `grace` for the exit status, which says more.
    pub(super) async fn explain(&self, grace: std::time::Duration) -> Option<String> {
        let waited = tokio::time::timeout(grace, async {
            loop {
                let notified = self.0.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let exit_known = self.0.exit.lock().is_ok_and(|slot| slot.is_some());
                let eof_only = self.0.eof.load(std::sync::atomic::Ordering::SeqCst);
                if exit_known || !eof_only {
                    return;
                }
                notified.await;
            }
        });
        let _ = waited.await;
        self.get()
    }

    /// Wait until the connection has ended (at once if it has).
    pub(super) async fn closed(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.get().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// An rmcp client transport over a child's stdin/stdout.
pub(super) struct LineTransport<W> {
    writer: SharedWriter<W>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    pending: PendingMap,
}

type SharedWriter<W> = Arc<tokio::sync::Mutex<W>>;

/// Messages decoded ahead of rmcp; with lines up to [`MAX_SERVER_LINE_BYTES`], this bounds
/// what waits in memory.
const INCOMING_QUEUE: usize = 16;

/// The reader task of a transport; dropping this ends it (a server whose stdout stays open,
/// held by a child of its own, must not leave a reader behind).
pub(super) struct ReaderTask(tokio::task::JoinHandle<()>);

impl Drop for ReaderTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Build the transport, spawning the reader task on the current runtime: also the
/// [`RawRequests`] of the connection (answered beside rmcp), with the task support of the
/// tools its `tools/list` answers name recorded in `task_tools`.
pub(super) fn line_transport<R, W>(
    server: &str,
    reader: R,
    writer: W,
    task_tools: TaskTools,
) -> (LineTransport<W>, CloseReason, ReaderTask, RawRequests)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(INCOMING_QUEUE);
    let pending: PendingMap = Arc::default();
    let reason = CloseReason::default();
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    let raw = RawRequests::new(Replier(writer.clone()));
    let task = tokio::spawn(read_loop(
        server.to_owned(),
        reader,
        tx,
        Replier(writer.clone()),
        Side {
            pending: pending.clone(),
            raw: raw.clone(),
            task_tools,
        },
        reason.clone(),
    ));
    (
        LineTransport {
            writer,
            incoming: rx,
            pending,
        },
        reason,
        ReaderTask(task),
        raw,
    )
}

/// What the reader shares beyond rmcp's messages.
struct Side {
    pending: PendingMap,
    raw: RawRequests,
    task_tools: TaskTools,
}

impl<W: AsyncWrite + Unpin + Send + 'static> LineWriter for Replier<W> {
    fn write_line(
        &self,
        line: Vec<u8>,
    ) -> futures::future::BoxFuture<'static, std::io::Result<()>> {
        let writer = self.0.clone();
        Box::pin(async move {
            let mut w = writer.lock().await;
            w.write_all(&line).await?;
            w.flush().await
        })
    }
}

/// Answers, from the reader, a request of the server's that rmcp could not read, so the
/// server is never left waiting (JSON-RPC: every request gets a response).
struct Replier<W>(SharedWriter<W>);

impl<W: AsyncWrite + Unpin + Send + 'static> Replier<W> {
    fn refuse(&self, id: Value, message: &str) {
        let line = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32602, "message": message}
        });
        let writer = self.0.clone();
        // Spawned: a server that does not read its stdin must not stall our reader.
        tokio::spawn(async move {
            let mut bytes = line.to_string().into_bytes();
            bytes.push(b'\n');
            let mut w = writer.lock().await;
            let _ = w.write_all(&bytes).await;
            let _ = w.flush().await;
        });
    }
}

async fn read_loop<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static>(
    server: String,
    reader: R,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    replier: Replier<W>,
    side: Side,
    reason: CloseReason,
) {
    let Side {
        pending,
        raw,
        task_tools,
    } = side;
    // Requests waiting beside rmcp's learn that the connection ended.
    struct CloseRaw(RawRequests);
    impl Drop for CloseRaw {
        fn drop(&mut self) {
            self.0.close();
        }
    }
    let _close_raw = CloseRaw(raw.clone());
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut junk = 0usize;
    loop {
        if line.capacity() > 1 << 20 {
            // One big line must not pin its buffer for the life of the connection.
            line.clear();
            line.shrink_to(64 * 1024);
        }
        match read_line(&mut reader, MAX_SERVER_LINE_BYTES, &mut line).await {
            Ok(LineRead::Eof { dropped }) => {
                if dropped > 0 {
                    tracing::warn!(
                        server = %server,
                        "dropped the last {dropped} bytes of stdout: no newline ended them"
                    );
                }
                reason.set_eof(format!("the server {server:?} closed its stdout"));
                break;
            }
            Ok(LineRead::TooLong) => {
                reason.set(format!(
                    "the server {server:?} sent a line over {} MiB; the connection was closed",
                    MAX_SERVER_LINE_BYTES >> 20
                ));
                break;
            }
            Ok(LineRead::Line) => {}
            Err(e) => {
                reason.set(format!("failed to read from the server {server:?}: {e}"));
                break;
            }
        }
        // A BOM may open any write of a server (some runtimes add one per stream or write).
        let bytes = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&line);
        let bytes = bytes.trim_ascii();
        if bytes.is_empty() {
            continue;
        }
        let decoded = match serde_json::from_slice::<Value>(bytes) {
            Ok(value) if raw.deliver(&value) => continue,
            Ok(value) => {
                if let Some(result) = value.get("result")
                    && value.get("id").and_then(id_key).is_some_and(|key| {
                        pending
                            .lock()
                            .is_ok_and(|p| p.get(&key) == Some(&Pending::ListTools))
                    })
                {
                    record_task_support(&task_tools, result);
                }
                decode(value, &pending)
            }
            Err(e) => unparsable_line(bytes, &e, &pending),
        };
        match decoded {
            Decoded::Message(message) => {
                if tx.send(*message).await.is_err() {
                    break;
                }
            }
            Decoded::Refuse(id, why) => {
                tracing::warn!(server = %server, "refused a request of the server: {why}");
                replier.refuse(id, &why);
            }
            Decoded::Junk => {
                junk += 1;
                if junk <= MAX_JUNK_LOGGED {
                    let sample = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
                    tracing::warn!(server = %server, "skipped a line that is not JSON-RPC: {sample:?}");
                } else if junk.is_power_of_two() {
                    tracing::warn!(server = %server, "skipped {junk} lines that are not JSON-RPC so far");
                }
            }
        }
    }
}

impl<W> Transport<RoleClient> for LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let pending = self.pending.clone();
        async move {
            let value = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            expect_answer(&pending, &value);
            let mut line = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut w = writer.lock().await;
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        let mut w = self.writer.lock().await;
        w.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_endless_line_ends_the_connection_with_bounded_memory() {
        let (mut w, r) = tokio::io::duplex(1 << 16);
        let (_sink, _) = tokio::io::duplex(16);
        let (mut t, reason, _task, _raw) = line_transport("flood", r, _sink, TaskTools::default());
        tokio::spawn(async move {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..40 {
                if w.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        assert!(t.receive().await.is_none());
        assert!(reason.get().unwrap().contains("over 16 MiB"));
    }
}
