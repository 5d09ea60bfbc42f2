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
//! - reads a line over [`INLINE_DECODE_BYTES`] on a blocking thread (`line_decode.rs`), one
//!   line at a time, so a large answer never stalls the runtime and order is kept;
//! - hands every other line to [`super::repair`], which turns what it can into a message
//!   rmcp accepts and fails at once a request whose answer cannot be read.
//!
//! What is written to the server goes through its bounded [`WriteQueue`], where a request
//! still waiting when its `notifications/cancelled` comes is withdrawn unsent (a call's
//! request takes its [`WriteTicket`] along, for the audit log's verdict); the server's
//! own requests reach rmcp only while few wait for an answer ([`Unanswered`]). An answer to a
//! plain call written beside rmcp ([`RawCalls`]) is read and repaired like any other and
//! handed to its caller instead of to rmcp.

use std::sync::{Arc, Mutex};

use rmcp::ErrorData;
use rmcp::model::{
    ClientJsonRpcMessage, ClientNotification, CreateMessageRequestMethod, GetExtensions,
    JsonRpcMessage, ServerJsonRpcMessage, ServerNotification, ServerRequest,
};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use super::line_decode::{
    INLINE_DECODE_BYTES, InFlight, LineOutcome, LineReader, MAX_NOTIFICATION_BYTES,
    read_off_thread, trimmed,
};
use super::raw_call::RawCalls;
use super::refusals::Refusals;
use super::repair::{Decoded, PendingMap, expect_answer, expect_request};
use super::tasks::{LineWriter, RawRequests, TaskTools};
use super::ticket::WriteTicket;
use super::unanswered::Unanswered;
use super::write_queue::{Line, Sent, WriteQueue};
use crate::lines::{LineRead, continue_line};

/// Longest line accepted from a wrapped server, in bytes.
pub(super) const MAX_SERVER_LINE_BYTES: usize = crate::limits::MAX_SERVER_MESSAGE_BYTES;
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
    /// Record why the connection ended (the first reason stays), which also ends it for
    /// the calls waiting on it.
    pub(super) fn set(&self, reason: String) {
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

/// An rmcp client transport over a child's stdin/stdout. The server's lines are read in
/// [`Transport::receive`] itself, by the task that runs rmcp's service, so an answer
/// reaches rmcp without a hop through another task.
pub(super) struct LineTransport<R> {
    queue: WriteQueue,
    /// The task writing the queue to the server's stdin, until [`Transport::close`].
    writing: Option<tokio::task::JoinHandle<()>>,
    /// `None` once the server's output has ended (or was refused).
    incoming: Option<Incoming<R>>,
    pending: PendingMap,
    unanswered: Arc<Unanswered>,
}

impl<R> Drop for LineTransport<R> {
    fn drop(&mut self) {
        // Nothing queued is written once the session is gone.
        self.queue.stop();
    }
}

/// Build the transport: also the [`RawRequests`] and [`RawCalls`] of the connection
/// (answered beside rmcp), with the task support of the tools its `tools/list` answers name
/// recorded in `task_tools`.
pub(super) fn line_transport<R, W>(
    server: &str,
    reader: R,
    writer: W,
    task_tools: TaskTools,
) -> (LineTransport<R>, CloseReason, RawRequests, RawCalls)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let pending: PendingMap = Arc::default();
    let reason = CloseReason::default();
    let (queue, writing) = WriteQueue::start(server, writer, reason.clone());
    let unanswered = Arc::new(Unanswered::default());
    let raw = RawRequests::new(Replier(queue.clone()));
    let calls = RawCalls::new(queue.clone(), pending.clone());
    let incoming = Incoming {
        server: server.to_owned(),
        reader: BufReader::with_capacity(64 * 1024, reader),
        line: Vec::new(),
        junk: 0,
        replier: Replier(queue.clone()),
        lines: LineReader {
            pending: pending.clone(),
            raw: raw.clone(),
            task_tools,
        },
        _raw: CloseRaw(raw.clone()),
        calls: CloseCalls(calls.clone()),
        in_flight: None,
        reason: reason.clone(),
        unanswered: unanswered.clone(),
        refusals: Refusals::new(server),
    };
    (
        LineTransport {
            queue,
            writing: Some(writing),
            incoming: Some(incoming),
            pending,
            unanswered,
        },
        reason,
        raw,
        calls,
    )
}

/// Requests waiting beside rmcp's learn that the connection ended when this is dropped.
struct CloseRaw(RawRequests);

impl Drop for CloseRaw {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Raw calls waiting for answers fail when this is dropped (with the reader).
struct CloseCalls(RawCalls);

impl Drop for CloseCalls {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// The reading side of a transport: the server's stdout and what its lines are checked
/// against.
struct Incoming<R> {
    server: String,
    reader: BufReader<R>,
    /// The line read so far (a read cut short by rmcp's `select!` goes on from here).
    line: Vec<u8>,
    junk: usize,
    replier: Replier,
    /// What each line is read against.
    lines: LineReader,
    /// Tells the requests waiting beside rmcp when the reader goes.
    _raw: CloseRaw,
    /// The plain calls sent beside rmcp, whose answers are taken here; told when the
    /// reader goes.
    calls: CloseCalls,
    /// A large line being read on a blocking thread (`line_decode.rs`); the next line is
    /// read only once it is done, so messages keep their order.
    in_flight: Option<InFlight>,
    reason: CloseReason,
    /// The server's requests rmcp is answering.
    unanswered: Arc<Unanswered>,
    /// The server's requests refused here, for the log.
    refusals: Refusals,
}

impl LineWriter for Replier {
    /// A raw request (tasks): dropping its future before the line is written withdraws it.
    fn write_line(
        &self,
        line: Vec<u8>,
        kind: Line,
    ) -> futures::future::BoxFuture<'static, std::io::Result<()>> {
        Box::pin(self.0.send(line, kind))
    }
}

/// Answers, from the reader, a request of the server's that rmcp could not read, so the
/// server is never left waiting (JSON-RPC: every request gets a response); also writes the
/// raw requests beside rmcp's.
struct Replier(WriteQueue);

impl Replier {
    fn refuse(&self, id: Value, message: &str) {
        self.answer_error(id, json!({"code": -32602, "message": message}));
    }

    /// Answer the request `id` with the JSON-RPC error object `error`.
    fn answer_error(&self, id: Value, error: Value) {
        let line = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": error
        });
        let mut bytes = line.to_string().into_bytes();
        bytes.push(b'\n');
        // Queued, not awaited: a server that does not read its stdin must not stall our
        // reader.
        self.0.send(bytes, Line::Other).detach();
    }
}

impl<R: AsyncRead + Unpin> Incoming<R> {
    /// The next message for rmcp; `None` when the connection ended (its reason is set).
    /// Cancel-safe: dropped before it returns, the line read so far stays in `self.line`
    /// (or a large line being read stays in `self.in_flight`) and the next call goes on
    /// with it.
    async fn next(&mut self) -> Option<ServerJsonRpcMessage> {
        loop {
            if let Some(in_flight) = self.in_flight.as_mut() {
                let joined = in_flight.await;
                self.in_flight = None;
                match joined {
                    Ok((line, outcome)) => {
                        self.line = line;
                        let message = self.handle(outcome);
                        self.line.clear();
                        if message.is_some() {
                            return message;
                        }
                    }
                    Err(e) => {
                        tracing::warn!(server = %self.server, "skipped a line that could not be read: {e}");
                    }
                }
                continue;
            }
            if self.line.is_empty() && self.line.capacity() > 1 << 20 {
                // One big line must not pin its buffer for the life of the connection.
                self.line.shrink_to(64 * 1024);
            }
            let server = &self.server;
            match continue_line(&mut self.reader, MAX_SERVER_LINE_BYTES, &mut self.line).await {
                Ok(LineRead::Eof { dropped }) => {
                    if dropped > 0 {
                        tracing::warn!(
                            server = %server,
                            "dropped the last {dropped} bytes of stdout: no newline ended them"
                        );
                    }
                    self.reason
                        .set_eof(format!("the server {server:?} closed its stdout"));
                    return None;
                }
                Ok(LineRead::TooLong) => {
                    self.reason.set(format!(
                        "the server {server:?} sent a line over {} MiB; the connection was closed",
                        MAX_SERVER_LINE_BYTES >> 20
                    ));
                    return None;
                }
                Ok(LineRead::Line) => {}
                Err(e) => {
                    self.reason
                        .set(format!("failed to read from the server {server:?}: {e}"));
                    return None;
                }
            }
            if self.line.len() > INLINE_DECODE_BYTES {
                let line = std::mem::take(&mut self.line);
                self.in_flight = Some(read_off_thread(&self.lines, line));
                continue;
            }
            let outcome = self.lines.read(trimmed(&self.line));
            let message = self.handle(outcome);
            self.line.clear();
            if let Some(message) = message {
                return Some(message);
            }
        }
    }

    /// `message` for rmcp, unless it is a request of the server's that serve refuses
    /// (answered "method not found" here, counted in [`Refusals`], rather than by rmcp,
    /// which logs a warning for each) or one past the bound of [`Unanswered`] (then it is
    /// dropped unanswered).
    fn admit(&self, message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        match &message {
            JsonRpcMessage::Request(request) => {
                if let Some(error) = refused(&request.request) {
                    let method = &error.message;
                    self.refusals.refused(&format!(
                        "{method:?} is no method serve offers; answered -32601"
                    ));
                    let id = serde_json::to_value(&request.id).unwrap_or(Value::Null);
                    let error = serde_json::to_value(&error).unwrap_or(Value::Null);
                    self.replier.answer_error(id, error);
                    return None;
                }
                let full = self.replier.0.is_full();
                if !self.unanswered.admit(&self.server, &request.id, full) {
                    return None;
                }
            }
            JsonRpcMessage::Notification(n) => {
                if let ServerNotification::CancelledNotification(c) = &n.notification
                    && let Some(id) = &c.params.request_id
                {
                    self.unanswered.done(id);
                }
            }
            _ => {}
        }
        Some(message)
    }

    /// The message the line just read (still in `self.line`) carries for rmcp, if any: a
    /// request rmcp could not read is refused, junk and dropped notifications are logged.
    fn handle(&mut self, outcome: LineOutcome) -> Option<ServerJsonRpcMessage> {
        let decoded = match outcome {
            LineOutcome::Read(decoded) => decoded,
            LineOutcome::Blank | LineOutcome::Delivered => return None,
            LineOutcome::OversizeNotification => {
                tracing::warn!(
                    server = %self.server,
                    "dropped a notification of {} bytes (over {} KiB) unread",
                    self.line.len(),
                    MAX_NOTIFICATION_BYTES >> 10
                );
                return None;
            }
        };
        let server = &self.server;
        match decoded {
            Decoded::Message(message) => {
                // An answer to a raw call goes to its caller, not to rmcp.
                let message = self.calls.0.take(*message)?;
                return self.admit(message);
            }
            Decoded::Refuse(id, why) => {
                self.refusals.refused(&format!("{why}; answered -32602"));
                self.replier.refuse(id, &why);
            }
            Decoded::Junk => {
                self.junk += 1;
                let junk = self.junk;
                if junk <= MAX_JUNK_LOGGED {
                    let bytes = trimmed(&self.line);
                    let sample = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
                    tracing::warn!(server = %server, "skipped a line that is not JSON-RPC: {sample:?}");
                } else if junk.is_power_of_two() {
                    tracing::warn!(server = %server, "skipped {junk} lines that are not JSON-RPC so far");
                }
            }
        }
        None
    }
}

/// The error serve answers a request of the server's with when it offers no such method:
/// sampling (serve declares no `sampling` capability) and any method MCP does not define,
/// as rmcp's client would answer it; `None` for ping, `roots/list` and elicitation, which
/// rmcp answers.
fn refused(request: &ServerRequest) -> Option<ErrorData> {
    match request {
        ServerRequest::CreateMessageRequest(_) => {
            Some(ErrorData::method_not_found::<CreateMessageRequestMethod>())
        }
        ServerRequest::CustomRequest(custom) => Some(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            custom.method.clone(),
            None,
        )),
        _ => None,
    }
}

impl<R> Transport<RoleClient> for LineTransport<R>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        // Queued here, in the order rmcp sends, so a cancel always finds its request
        // queued (or already written).
        if let Some(id) = cancelled_request(&item)
            && self.queue.withdraw_request(id)
        {
            tracing::debug!(%id, "withdrew a request never written to the server, and its cancel");
            // No answer is awaited for it any more.
            if let Ok(value) = serde_json::to_value(&item) {
                expect_answer(&self.pending, &value);
            }
            return Sent::ready(Ok(()));
        }
        match &item {
            JsonRpcMessage::Response(r) => self.unanswered.done(&r.id),
            JsonRpcMessage::Error(e) => {
                if let Some(id) = &e.id {
                    self.unanswered.done(id);
                }
            }
            _ => {}
        }
        match queued_line(&self.pending, &item) {
            Ok((line, kind)) => self.queue.send(line, kind),
            Err(e) => Sent::ready(Err(std::io::Error::other(e))),
        }
    }

    async fn receive(&mut self) -> Option<ServerJsonRpcMessage> {
        let message = self.incoming.as_mut()?.next().await;
        if message.is_none() {
            // The end: requests waiting beside rmcp's learn it now.
            self.incoming = None;
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming = None;
        self.queue.stop();
        if let Some(writing) = self.writing.take() {
            // The line being written finishes first; a server that does not read holds it
            // until it is killed, which follows the close.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writing).await;
        }
        Ok(())
    }
}

/// The request a `notifications/cancelled` names, if `item` is one.
fn cancelled_request(item: &ClientJsonRpcMessage) -> Option<&rmcp::model::RequestId> {
    match item {
        JsonRpcMessage::Notification(n) => match &n.notification {
            ClientNotification::CancelledNotification(c) => c.params.request_id.as_ref(),
            _ => None,
        },
        _ => None,
    }
}

/// `item` as one line for the server, and what it is to the write queue.
fn queued_line(
    pending: &PendingMap,
    item: &ClientJsonRpcMessage,
) -> serde_json::Result<(Vec<u8>, Line)> {
    // A request is written once, straight from its type (its id and method are at hand);
    // anything else goes through a JSON value, which expect_answer reads.
    let (mut line, kind) = if let JsonRpcMessage::Request(request) = item {
        expect_request(pending, &request.id, request.request.method());
        let line = serde_json::to_vec(item)?;
        let id = request.id.clone();
        match request.request.extensions().get::<WriteTicket>() {
            Some(ticket) => (line, Line::Call(id, ticket.clone())),
            None => (line, Line::Request(Some(id))),
        }
    } else {
        let value = serde_json::to_value(item)?;
        expect_answer(pending, &value);
        (serde_json::to_vec(&value)?, Line::Other)
    };
    line.push(b'\n');
    Ok((line, kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn an_endless_line_ends_the_connection_with_bounded_memory() {
        let (mut w, r) = tokio::io::duplex(1 << 16);
        let (_sink, _) = tokio::io::duplex(16);
        let (mut t, reason, _raw, _calls) = line_transport("flood", r, _sink, TaskTools::default());
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
