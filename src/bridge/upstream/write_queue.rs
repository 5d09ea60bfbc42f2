//! What `serve` writes to one stdio server: a bounded queue, drained into the server's stdin
//! by one task, whose entries die with their call (README "What wrapped servers send").
//!
//! A line sent while nothing is queued or being written is written at once by the task that
//! sends it, as far as the pipe takes it without waiting (the usual case: the server reads
//! its stdin), so an ordinary call wakes no other task to write its request. What the pipe
//! does not take at once is left to the writing task, and everything sent after it queues
//! behind it: lines reach the server whole and in the order they were sent.
//!
//! A server that stops reading its stdin (busy in a handler, stuck, hostile) takes only a
//! pipe's worth (64 KiB on Linux); everything else waits here. So that nothing waits here
//! for good, and nothing reaches the server after its caller gave up:
//! - a request still queued when its call ends (the call timeout, a cancelled run, the
//!   deadline) is withdrawn: the `notifications/cancelled` rmcp sends for it takes it out
//!   of the queue and is itself not written, so the server sees neither (a plain call
//!   written beside rmcp, `raw_call.rs`, withdraws its request itself, the same way). Only a request
//!   already handed to the pipe gets the notification. A line whose sender stops waiting
//!   (its [`Sent`] is dropped) is withdrawn the same way. A call's request carries its
//!   [`WriteTicket`] (`ticket.rs`): whoever writes the line marks it first, and skips the
//!   line when the call's audit record already settled it as withdrawn (the record may come
//!   before the notification);
//! - the queue holds at most [`MAX_QUEUED_MESSAGES`] messages and [`MAX_QUEUED_BYTES`]
//!   bytes (a message of any size is let into an empty queue). Past that, an answer or
//!   notification is dropped (one warning until the queue empties again: a server that
//!   floods requests without reading gets no more answers), and a request of ours fails and
//!   marks the server failed, so the calls waiting on it fail within about a second and the
//!   next call restarts it, as when it dies.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use rmcp::model::RequestId;
use tokio::io::AsyncWrite;
use tokio::sync::{Notify, oneshot};

use super::ticket::WriteTicket;
use super::transport::CloseReason;

/// Most messages waiting to be written to one server.
pub(super) const MAX_QUEUED_MESSAGES: usize = 1024;
/// Most bytes waiting to be written to one server (a run's 200 calls of 16 KiB of arguments
/// each, four runs at once, fit).
pub(super) const MAX_QUEUED_BYTES: usize = 16 * 1024 * 1024;

/// Ids of requests skipped because their call gave them up remembered at most, so that
/// their `notifications/cancelled` is not written either.
const MAX_SKIPPED: usize = MAX_QUEUED_MESSAGES;

/// What a line is, which decides what happens to it past the bound.
#[derive(Debug, Clone)]
pub(super) enum Line {
    /// A request of ours, with its id when a later `notifications/cancelled` may withdraw
    /// it. Past the bound it fails and the server is marked failed.
    Request(Option<RequestId>),
    /// A call's request with its ticket: a [`Line::Request`] that is marked when the writer
    /// takes it, and never written once its call settled the ticket as withdrawn.
    Call(RequestId, WriteTicket),
    /// An answer to the server's request or a notification: dropped past the bound.
    Other,
}

/// The sending side of one server's queue; clones share it.
#[derive(Clone)]
pub(super) struct WriteQueue {
    shared: Arc<Shared>,
}

struct Shared {
    server: String,
    state: Mutex<State>,
    /// Woken (with a stored permit) when an entry is queued or writing stops.
    wake: Notify,
    reason: CloseReason,
}

struct State {
    /// The server's stdin; written under the lock, never waited on while it is held.
    writer: Writer,
    /// The line handed to the pipe and not yet written whole (and flushed), with its
    /// bytes written so far: no longer withdrawn, and written before anything queued.
    current: Option<(Entry, usize)>,
    entries: VecDeque<Entry>,
    bytes: usize,
    next_seq: u64,
    /// Set once writing has stopped (the transport closed, or a write failed).
    stopped: bool,
    /// Whether dropping an answer was logged since the queue was last empty.
    overflow_logged: bool,
    /// Requests skipped unwritten because their call gave them up (oldest first, at most
    /// [`MAX_SKIPPED`]): their `notifications/cancelled` is withdrawn too.
    skipped: VecDeque<RequestId>,
}

type Writer = Box<dyn AsyncWrite + Send + Unpin>;

struct Entry {
    seq: u64,
    request: Option<RequestId>,
    /// The call's ticket, marked when the writer takes the line.
    ticket: Option<WriteTicket>,
    line: Vec<u8>,
    /// Told how the write went; dropped unanswered when the entry is withdrawn. `None` for
    /// a line whose sender already returned (written at once as far as the pipe took it).
    done: Option<oneshot::Sender<io::Result<()>>>,
}

impl WriteQueue {
    /// Start the task that writes the queue's lines to `writer`, in order, one at a time;
    /// it ends (shutting `writer` down) once [`WriteQueue::stop`] was called and the line
    /// being written is done. Returns the queue and that task.
    pub(super) fn start<W>(
        server: &str,
        writer: W,
        reason: CloseReason,
    ) -> (Self, tokio::task::JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let state = State {
            writer: Box::new(writer),
            current: None,
            entries: VecDeque::new(),
            bytes: 0,
            next_seq: 0,
            stopped: false,
            overflow_logged: false,
            skipped: VecDeque::new(),
        };
        let shared = Arc::new(Shared {
            server: server.to_owned(),
            state: Mutex::new(state),
            wake: Notify::new(),
            reason,
        });
        let task = tokio::spawn(drain(shared.clone()));
        (Self { shared }, task)
    }

    /// Queue `line` (one whole line, its newline included), or write it at once when nothing
    /// is queued or being written (see the module docs). The returned [`Sent`] resolves once
    /// the line is written, or at once when it is dropped; dropping it first withdraws the
    /// line if it is still queued.
    pub(super) fn send(&self, line: Vec<u8>, kind: Line) -> Sent {
        let mut state = self.shared.lock();
        if state.stopped {
            return Sent::ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection to the server has closed",
            )));
        }
        let full = !state.entries.is_empty()
            && (state.entries.len() >= MAX_QUEUED_MESSAGES
                || state.bytes + line.len() > MAX_QUEUED_BYTES);
        if full {
            let (count, kib) = (state.entries.len(), state.bytes >> 10);
            let server = &self.shared.server;
            return match kind {
                Line::Other => {
                    if !std::mem::replace(&mut state.overflow_logged, true) {
                        tracing::warn!(
                            server = %server,
                            "it does not read its input ({count} messages, {kib} KiB wait); answers and notifications to it are dropped until it does"
                        );
                    }
                    Sent::ready(Ok(()))
                }
                Line::Request(_) | Line::Call(..) => {
                    drop(state);
                    let why = format!(
                        "the server {server:?} does not read its input ({count} messages, {kib} KiB wait to be written to it)"
                    );
                    tracing::warn!(server = %server, "{why}; it is taken as failed");
                    self.shared.reason.set(why.clone());
                    Sent::ready(Err(io::Error::other(why)))
                }
            };
        }
        let (request, ticket) = match kind {
            Line::Request(id) => (id, None),
            Line::Call(id, ticket) => {
                if ticket.is_withdrawn() {
                    // Its call is already over and recorded as withdrawn.
                    state.skip(id);
                    return Sent::ready(Ok(()));
                }
                (Some(id), Some(ticket))
            }
            Line::Other => (None, None),
        };
        let seq = state.next_seq;
        state.next_seq += 1;
        let mut entry = Entry {
            seq,
            request,
            ticket,
            line,
            done: None,
        };
        if state.current.is_none() && state.entries.is_empty() {
            return self.write_now(state, entry);
        }
        state.bytes += entry.line.len();
        let (done, rx) = oneshot::channel();
        entry.done = Some(done);
        state.entries.push_back(entry);
        drop(state);
        self.shared.wake.notify_one();
        Sent {
            state: SentState::Waiting(rx),
            withdraw: Some((self.shared.clone(), seq)),
        }
    }

    /// Write `entry` from the sending task, nothing being queued or written: its call's
    /// ticket is marked first (a call given up meanwhile is skipped). What the pipe does not
    /// take without waiting is left to the writing task, as the line being written.
    fn write_now(&self, mut state: MutexGuard<'_, State>, mut entry: Entry) -> Sent {
        if let Some(ticket) = &entry.ticket
            && !ticket.mark_written()
        {
            if let Some(id) = entry.request {
                state.skip(id);
            }
            return Sent::ready(Ok(()));
        }
        let mut cx = Context::from_waker(Waker::noop());
        let mut written = 0;
        match poll_entry(&mut state.writer, &entry.line, &mut written, &mut cx) {
            Poll::Ready(Ok(())) => Sent::ready(Ok(())),
            Poll::Ready(Err(e)) => {
                drop(state);
                self.shared.stop();
                Sent::ready(Err(e))
            }
            Poll::Pending => {
                // Written in part (or not at all): the writing task goes on with it, and the
                // sender waits for it as for a queued line that was taken.
                let (done, rx) = oneshot::channel();
                entry.done = Some(done);
                state.current = Some((entry, written));
                drop(state);
                self.shared.wake.notify_one();
                Sent {
                    state: SentState::Waiting(rx),
                    withdraw: None,
                }
            }
        }
    }

    /// Whether the queue is at its bound (a further answer would be dropped).
    pub(super) fn is_full(&self) -> bool {
        let state = self.shared.lock();
        state.entries.len() >= MAX_QUEUED_MESSAGES || state.bytes >= MAX_QUEUED_BYTES
    }

    /// Take the request `id` out of the queue if it was not handed to the server yet;
    /// whether it was not (then it is never written). A request the writer skipped because
    /// its call gave it up counts as taken out.
    pub(super) fn withdraw_request(&self, id: &RequestId) -> bool {
        let mut state = self.shared.lock();
        if let Some(at) = state
            .entries
            .iter()
            .position(|e| e.request.as_ref() == Some(id))
        {
            state.remove(at);
            return true;
        }
        match state.skipped.iter().position(|s| s == id) {
            Some(at) => {
                state.skipped.remove(at);
                true
            }
            None => false,
        }
    }

    /// Stop writing: queued lines are dropped unwritten (their senders learn the connection
    /// closed), and the writing task ends after the line it is writing.
    pub(super) fn stop(&self) {
        self.shared.stop();
    }

    /// Messages and bytes waiting (tests).
    #[cfg(test)]
    fn queued(&self) -> (usize, usize) {
        let state = self.shared.lock();
        (state.entries.len(), state.bytes)
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn stop(&self) {
        let entries = {
            let mut state = self.lock();
            state.stopped = true;
            state.bytes = 0;
            std::mem::take(&mut state.entries)
        };
        for done in entries.into_iter().filter_map(|e| e.done) {
            let _ = done.send(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the connection to the server closed before this was written",
            )));
        }
        self.wake.notify_one();
    }
}

impl State {
    fn remove(&mut self, at: usize) {
        if let Some(entry) = self.entries.remove(at) {
            self.bytes -= entry.line.len();
        }
        if self.entries.is_empty() {
            self.overflow_logged = false;
        }
    }

    /// Remember that the request `id` was skipped unwritten.
    fn skip(&mut self, id: RequestId) {
        if self.skipped.len() >= MAX_SKIPPED {
            self.skipped.pop_front();
        }
        self.skipped.push_back(id);
    }

    /// The next line to write, its call's ticket marked as written (a line whose call gave
    /// it up is skipped), or `None` once writing has stopped.
    fn pop(&mut self) -> Option<Option<Entry>> {
        while let Some(entry) = self.entries.pop_front() {
            self.bytes -= entry.line.len();
            if self.entries.is_empty() {
                self.overflow_logged = false;
            }
            if let Some(ticket) = &entry.ticket
                && !ticket.mark_written()
            {
                if let Some(id) = entry.request {
                    self.skip(id);
                }
                continue;
            }
            return Some(Some(entry));
        }
        if self.stopped { None } else { Some(None) }
    }
}

/// Write `line` from byte `written` on, then flush: `Ready(Ok)` once all of it is written
/// and flushed, `Pending` (with `written` moved on) when the pipe takes no more now.
fn poll_entry(
    writer: &mut Writer,
    line: &[u8],
    written: &mut usize,
    cx: &mut Context<'_>,
) -> Poll<io::Result<()>> {
    while *written < line.len() {
        match Pin::new(&mut *writer).poll_write(cx, &line[*written..]) {
            Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
            Poll::Ready(Ok(n)) => *written += n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        }
    }
    Pin::new(writer).poll_flush(cx)
}

/// Write the queue's lines (after the line being written, if any) until the queue stops or
/// a write fails; then shut the writer down (the server sees the end of its input).
async fn drain(shared: Arc<Shared>) {
    loop {
        let wake = shared.wake.notified();
        let go_on = std::future::poll_fn(|cx| {
            let mut state = shared.lock();
            loop {
                if state.current.is_none() {
                    match state.pop() {
                        None => return Poll::Ready(false),
                        Some(None) => return Poll::Ready(true),
                        // Handed to the pipe from here on: no longer withdrawn.
                        Some(Some(entry)) => state.current = Some((entry, 0)),
                    }
                }
                let State {
                    writer, current, ..
                } = &mut *state;
                let Some((entry, written)) = current.as_mut() else {
                    continue;
                };
                let result = std::task::ready!(poll_entry(writer, &entry.line, written, cx));
                let failed = result.is_err();
                if let Some((entry, _)) = state.current.take()
                    && let Some(done) = entry.done
                {
                    let _ = done.send(result);
                }
                if failed {
                    drop(state);
                    shared.stop();
                    return Poll::Ready(false);
                }
            }
        })
        .await;
        if !go_on {
            break;
        }
        wake.await;
    }
    let _ = std::future::poll_fn(|cx| Pin::new(&mut shared.lock().writer).poll_shutdown(cx)).await;
}

/// A queued line's write: resolves with how it went (`Ok` too for a withdrawn line, which
/// is never written). Dropped before then, it withdraws the line if still queued.
pub(super) struct Sent {
    state: SentState,
    withdraw: Option<(Arc<Shared>, u64)>,
}

enum SentState {
    Ready(Option<io::Result<()>>),
    Waiting(oneshot::Receiver<io::Result<()>>),
}

impl Sent {
    /// A write that is already over (or never happens), with `result`.
    pub(super) fn ready(result: io::Result<()>) -> Self {
        Self {
            state: SentState::Ready(Some(result)),
            withdraw: None,
        }
    }

    /// Keep the line queued whatever becomes of this (a fire-and-forget answer).
    pub(super) fn detach(mut self) {
        self.withdraw = None;
    }

    /// This write, still awaitable, but never withdrawn by being dropped: its sender
    /// withdraws it by its request id ([`WriteQueue::withdraw_request`]) when it gives up,
    /// which also tells whether it was written.
    pub(super) fn kept(mut self) -> Self {
        self.withdraw = None;
        self
    }
}

impl Future for Sent {
    type Output = io::Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let result = match &mut self.state {
            SentState::Ready(result) => result.take().unwrap_or(Ok(())),
            // A dropped sender: the line was withdrawn, never written.
            SentState::Waiting(rx) => match Pin::new(rx).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(result) => result.unwrap_or(Ok(())),
            },
        };
        self.withdraw = None;
        Poll::Ready(result)
    }
}

impl Drop for Sent {
    fn drop(&mut self) {
        if let Some((shared, seq)) = self.withdraw.take() {
            let mut state = shared.lock();
            if let Some(at) = state.entries.iter().position(|e| e.seq == seq) {
                state.remove(at);
            }
        }
    }
}

#[cfg(test)]
#[path = "write_queue_tests.rs"]
mod tests;
