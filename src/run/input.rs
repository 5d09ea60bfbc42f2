//! [`RunnerInput`]: the host → runner lines of one sandbox, written by the task that has them
//! when the runner's input takes them at once, else queued, in order, for a writer task.
//!
//! A tool call's result is written from the task that served the call, without waking
//! another task (or another runtime thread) to write it: the usual case, as the runner
//! always reads its input. When the input is full (a runner that does not read), lines wait
//! in the queue, at most [`QUEUE_LINES`] of them, and senders beyond that wait for room, so a
//! runner that stops reading holds the host back (its calls stop being read) instead of
//! growing memory. A line is never interleaved with another: what is queued is written in
//! order, and nothing is written at once while anything is queued.
//!
//! The bytes of lines held for the runner, queued or waiting for room, are counted
//! ([`RunnerInput::takes_calls`]): past [`OWED_BYTES`] the cell's loop reads no further call
//! of the runner until it has read some of its input, so a runner that does not read its
//! results holds at most that much on the host, plus one result of each call already in
//! flight, however many calls its budget allows and however large each result may be.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::Notify;

use super::MAX_CALLS_IN_FLIGHT;

/// Lines that may wait for the runner to read its input before senders wait.
pub(super) const QUEUE_LINES: usize = MAX_CALLS_IN_FLIGHT * 2;

/// Bytes of lines held for a runner (queued, or waiting for room in the queue) at and past
/// which the runner's next calls are not read until it reads its input. Results of the
/// default size (64 KiB) for every call in flight fit well below it.
pub(crate) const OWED_BYTES: usize = 8 * 1024 * 1024;

type Stdin = Box<dyn AsyncWrite + Send + Unpin>;

/// A handle that sends lines to the runner (cheap to clone). When the last handle is
/// dropped, or [`Self::close`] is called, the queued lines are written and the runner's
/// input is shut down (the runner then reads the end of its input).
#[derive(Clone)]
pub(super) struct RunnerInput {
    shared: Arc<Shared>,
    _senders: Arc<Senders>,
}

struct Shared {
    state: Mutex<State>,
    /// Wakes the writer task: something was queued, or the input is closed.
    queued: Notify,
    /// Wakes senders waiting for room in the queue, and a cell's loop waiting for
    /// [`Self::owed`] to fall below [`OWED_BYTES`].
    room: Notify,
    /// Bytes of the lines queued (each counted whole until it is written whole) and of the
    /// lines of senders waiting for room.
    owed: AtomicUsize,
}

struct State {
    stdin: Stdin,
    /// Lines not yet written in full, in order; `written` bytes of the first are written.
    queue: VecDeque<Vec<u8>>,
    written: usize,
    /// No line follows: once the queue is written, the input is shut down.
    closed: bool,
    /// A write failed (the runner is gone): lines are dropped from now on.
    broken: bool,
}

/// Closes the input when the last [`RunnerInput`] handle is dropped.
struct Senders(Arc<Shared>);

impl Drop for Senders {
    fn drop(&mut self) {
        self.0.close();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn close(&self) {
        self.lock().closed = true;
        self.queued.notify_one();
    }

    /// `bytes` are no longer held for the runner: a cell's loop waiting for room looks again.
    fn paid(&self, bytes: usize) {
        self.owed.fetch_sub(bytes, Ordering::SeqCst);
        self.room.notify_waiters();
    }
}

/// The bytes of one line a sender holds while it waits for room in the queue, counted in
/// [`Shared::owed`] until the line is queued ([`Self::queued`]) or the sender gives up
/// (dropped: the line is gone).
struct Waiting<'a> {
    shared: &'a Shared,
    bytes: usize,
}

impl<'a> Waiting<'a> {
    fn new(shared: &'a Shared, bytes: usize) -> Self {
        shared.owed.fetch_add(bytes, Ordering::SeqCst);
        Self { shared, bytes }
    }

    /// The line is queued: its bytes stay counted until the writer has written it.
    fn queued(mut self) {
        self.bytes = 0;
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.shared.paid(self.bytes);
        }
    }
}

impl RunnerInput {
    /// The input over `stdin`, and its writer task (aborting it drops what is queued).
    pub(super) fn start(stdin: Stdin) -> (Self, tokio::task::JoinHandle<()>) {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                stdin,
                queue: VecDeque::new(),
                written: 0,
                closed: false,
                broken: false,
            }),
            queued: Notify::new(),
            room: Notify::new(),
            owed: AtomicUsize::new(0),
        });
        let writer = tokio::spawn(write_queued(shared.clone()));
        let input = Self {
            _senders: Arc::new(Senders(shared.clone())),
            shared,
        };
        (input, writer)
    }

    /// Send one line (ending in `\n`): written now when nothing is queued and the input takes
    /// it, else queued; waits while [`QUEUE_LINES`] lines are queued. Dropped after the line
    /// is queued or partly written, the rest is still written. A line sent after the input
    /// broke or was closed is dropped.
    pub(super) async fn send(&self, line: Vec<u8>) {
        // Counted in `owed` from the first wait for room; dropped with the line otherwise.
        let mut waiting: Option<Waiting<'_>> = None;
        loop {
            let room = self.shared.room.notified();
            {
                let mut state = self.shared.lock();
                if state.broken || state.closed {
                    return;
                }
                if state.queue.is_empty() {
                    let written = write_now(&mut state, &line);
                    if state.broken || written == line.len() {
                        return;
                    }
                    state.written = written;
                }
                if state.queue.len() < QUEUE_LINES {
                    match waiting.take() {
                        Some(waiting) => waiting.queued(),
                        None => {
                            self.shared.owed.fetch_add(line.len(), Ordering::SeqCst);
                        }
                    }
                    state.queue.push_back(line);
                    self.shared.queued.notify_one();
                    return;
                }
            }
            if waiting.is_none() {
                waiting = Some(Waiting::new(&self.shared, line.len()));
            }
            room.await;
        }
    }

    /// Whether the runner's next call may be read: the lines held for it (queued, or
    /// waiting for room) come to less than [`OWED_BYTES`].
    pub(super) fn takes_calls(&self) -> bool {
        self.shared.owed.load(Ordering::SeqCst) < OWED_BYTES
    }

    /// Resolves once [`Self::takes_calls`] holds: the runner has read enough of its input,
    /// or senders waiting for room gave up.
    pub(super) async fn until_it_takes_calls(&self) {
        loop {
            let room = self.shared.room.notified();
            let mut room = std::pin::pin!(room);
            room.as_mut().enable();
            if self.takes_calls() {
                return;
            }
            room.await;
        }
    }

    /// Send no more lines: what is queued is written, then the input is shut down.
    pub(super) fn close(&self) {
        self.shared.close();
    }
}

/// Write as much of `line` as the input takes without waiting; the bytes written.
fn write_now(state: &mut State, line: &[u8]) -> usize {
    let mut cx = Context::from_waker(Waker::noop());
    let mut written = 0;
    while written < line.len() {
        match Pin::new(&mut state.stdin).poll_write(&mut cx, &line[written..]) {
            Poll::Ready(Ok(n)) if n > 0 => written += n,
            Poll::Ready(_) => {
                state.broken = true;
                break;
            }
            Poll::Pending => break,
        }
    }
    written
}

/// The writer task: writes what is queued, in order, and shuts the input down once it is
/// closed and written (or broken).
async fn write_queued(shared: Arc<Shared>) {
    loop {
        let queued = shared.queued.notified();
        let finished = std::future::poll_fn(|cx| {
            let mut state = shared.lock();
            let State {
                stdin,
                queue,
                written,
                closed,
                broken,
            } = &mut *state;
            while let Some(line) = queue.front() {
                if *broken {
                    let dropped = queue.drain(..).map(|line| line.len()).sum();
                    shared.paid(dropped);
                    break;
                }
                match Pin::new(&mut *stdin).poll_write(cx, &line[*written..]) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        *written += n;
                        if *written == line.len() {
                            let bytes = line.len();
                            queue.pop_front();
                            *written = 0;
                            shared.paid(bytes);
                        }
                    }
                    Poll::Ready(_) => *broken = true,
                    Poll::Pending => return Poll::Pending,
                }
            }
            shared.room.notify_waiters();
            Poll::Ready(*closed || *broken)
        })
        .await;
        if finished {
            let _ = std::future::poll_fn(|cx| Pin::new(&mut shared.lock().stdin).poll_shutdown(cx))
                .await;
            return;
        }
        queued.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn lines_arrive_whole_and_in_order_when_the_reader_is_slow_and_end_with_eof() {
        // A pipe that holds far less than what is sent: most lines wait in the queue, and
        // senders wait for room.
        let (ours, mut theirs) = tokio::io::duplex(256);
        let (input, writer) = RunnerInput::start(Box::new(ours));
        let lines: Vec<Vec<u8>> = (0..200)
            .map(|i| format!("{{\"line\":{i},\"pad\":\"{}\"}}\n", "x".repeat(i % 97)).into_bytes())
            .collect();
        let expected: Vec<u8> = lines.concat();
        let sender = {
            let input = input.clone();
            tokio::spawn(async move {
                for line in lines {
                    input.send(line).await;
                }
            })
        };
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            let mut chunk = [0u8; 7];
            loop {
                tokio::time::sleep(std::time::Duration::from_micros(50)).await;
                match theirs.read(&mut chunk).await {
                    Ok(0) | Err(_) => return got,
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                }
            }
        });
        sender.await.unwrap();
        assert!(input.shared.lock().queue.len() <= QUEUE_LINES);
        drop(input); // the last handle: what is queued is written, then the end
        assert_eq!(reader.await.unwrap(), expected);
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn results_a_runner_does_not_read_stop_its_calls_being_read_past_the_owed_bytes() {
        // Nobody reads: each line of 1 MiB waits in the queue, counted whole.
        let (ours, mut theirs) = tokio::io::duplex(4096);
        let (input, _writer) = RunnerInput::start(Box::new(ours));
        let line = |fill: u8, len: usize| {
            let mut line = vec![fill; len - 1];
            line.push(b'\n');
            line
        };
        let mib = 1024 * 1024;
        let count = OWED_BYTES / mib;
        for i in 0..count {
            assert!(input.takes_calls(), "refused after {i} MiB");
            input.send(line(b'a', mib)).await;
        }
        assert!(!input.takes_calls(), "{} bytes held", OWED_BYTES);
        // A sender that waits for room holds its line too, and gives it up when dropped.
        for _ in count..QUEUE_LINES {
            input.send(line(b'b', 10)).await;
        }
        let owed = input.shared.owed.load(Ordering::SeqCst);
        let waiting = {
            let input = input.clone();
            tokio::spawn(async move { input.send(line(b'c', mib)).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(input.shared.owed.load(Ordering::SeqCst), owed + mib);
        waiting.abort();
        let _ = waiting.await;
        assert_eq!(input.shared.owed.load(Ordering::SeqCst), owed);
        // Once the runner reads what waits, its calls are read again.
        let wait = {
            let input = input.clone();
            tokio::spawn(async move { input.until_it_takes_calls().await })
        };
        let mut got = 0;
        let mut chunk = vec![0u8; 64 * 1024];
        while got < owed - 4096 {
            got += theirs.read(&mut chunk).await.unwrap();
        }
        tokio::time::timeout(std::time::Duration::from_secs(5), wait)
            .await
            .expect("woken once the runner read its input")
            .unwrap();
        assert!(input.takes_calls());
    }
}
