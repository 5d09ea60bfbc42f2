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

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use tokio::io::AsyncWrite;
use tokio::sync::Notify;

use super::MAX_CALLS_IN_FLIGHT;

/// Lines that may wait for the runner to read its input before senders wait.
pub(super) const QUEUE_LINES: usize = MAX_CALLS_IN_FLIGHT * 2;

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
    /// Wakes senders waiting for room in the queue.
    room: Notify,
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
                    state.queue.push_back(line);
                    self.shared.queued.notify_one();
                    return;
                }
                if state.queue.len() < QUEUE_LINES {
                    state.queue.push_back(line);
                    self.shared.queued.notify_one();
                    return;
                }
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
                    queue.clear();
                    break;
                }
                match Pin::new(&mut *stdin).poll_write(cx, &line[*written..]) {
                    Poll::Ready(Ok(n)) if n > 0 => {
                        *written += n;
                        if *written == line.len() {
                            queue.pop_front();
                            *written = 0;
                            shared.room.notify_waiters();
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
}
