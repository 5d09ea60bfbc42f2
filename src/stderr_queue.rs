//! The thread that writes this program's stderr, so that a stderr nobody reads holds up no
//! one else. A client may give `serve` a stderr pipe and read it only at the end, or never;
//! once the pipe's 64 KiB are full a write to it waits, and a log line written on the
//! runtime thread would freeze `serve` whole: no answer, no deadline, no signal handled.
//!
//! Once [`start`] has run, every line for stderr (tracing's log lines, the last-resort error
//! line, `exec`'s limits line, the rootfs build's progress) is queued here and written, in
//! order, by one thread of its own. The queue holds at most [`MAX_QUEUED_BYTES`]; a log line
//! that does not fit is dropped and counted, and once stderr takes lines again the writer
//! says how many were dropped, where they were: `… WARN 1234 log lines were dropped: …`.
//! A line that must not be lost (`Keep::Always`: the last-resort error, `exec`'s limits) is
//! queued whatever the queue holds; these are a few lines per process. Before [`start`] (the
//! launcher, a library user, the first lines of the command line) lines are written directly.
//!
//! Why not tracing-appender's `non_blocking` writer: its bound counts lines, not bytes (a
//! relayed server line can be long, so the memory it holds has no fixed bound), its lossy
//! mode only counts what it drops where the log reader never sees it, and it has no line
//! that is never dropped; the lines that end `serve` and `exec` must not be lost.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

/// The most bytes of lines waiting for stderr (1 MiB): past it, log lines are dropped.
pub(crate) const MAX_QUEUED_BYTES: usize = 1 << 20;

/// How long [`finish`] waits for the queued lines to reach stderr before the process exits
/// without them (1 s): a stderr nobody reads must not keep an ended `serve` alive.
pub(crate) const FINAL_WAIT: Duration = Duration::from_secs(1);

/// Whether a line may be dropped when the queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Keep {
    /// A log line: dropped (and counted) when the queue holds [`MAX_QUEUED_BYTES`].
    IfRoom,
    /// A line the process ends with or reports its result by: always queued.
    Always,
}

/// The program's stderr queue; lines go to it once [`start`] has run.
static STDERR: Queue = Queue::new();
/// Whether the writer thread of [`STDERR`] runs.
static STARTED: AtomicBool = AtomicBool::new(false);

/// Start the thread that writes queued lines to stderr; lines written after this are queued.
/// Call it once the process will not re-execute itself (a queued line would be lost by
/// exec); later calls do nothing. When the thread cannot start, lines go on being written
/// directly.
pub(crate) fn start() {
    if STARTED.load(Ordering::Acquire) {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("stderr".into())
        .spawn(|| STDERR.write_all_to(&mut io::stderr()));
    if spawned.is_ok() {
        STARTED.store(true, Ordering::Release);
    }
}

/// Write `text` (whole lines) to stderr: queued once [`start`] has run, else written now.
pub(crate) fn write(text: &[u8], keep: Keep) {
    if STARTED.load(Ordering::Acquire) {
        STDERR.push(text, keep);
    } else {
        let _ = io::stderr().write_all(text);
    }
}

/// Wait at most `bound` until every queued line has been written to stderr (at exit).
pub(crate) fn finish(bound: Duration) {
    if STARTED.load(Ordering::Acquire) {
        STDERR.wait_written(bound);
    }
}

/// Lines waiting for a writer, within [`MAX_QUEUED_BYTES`].
pub(crate) struct Queue {
    state: Mutex<State>,
    /// Signalled when a line is queued.
    queued: Condvar,
    /// Signalled when the writer has written everything queued.
    written: Condvar,
}

struct State {
    lines: VecDeque<Line>,
    /// Bytes of `lines`.
    bytes: usize,
    /// Lines dropped since the last one queued.
    dropped: u64,
    /// Whether the writer is writing a line it took.
    writing: bool,
}

struct Line {
    text: Vec<u8>,
    /// Lines dropped just before this one: the writer says so before writing it.
    dropped_before: u64,
}

impl Queue {
    /// An empty queue.
    pub(crate) const fn new() -> Self {
        Self {
            state: Mutex::new(State {
                lines: VecDeque::new(),
                bytes: 0,
                dropped: 0,
                writing: false,
            }),
            queued: Condvar::new(),
            written: Condvar::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queue `text` for the writer; never waits for it. A [`Keep::IfRoom`] line that would
    /// take the queue past [`MAX_QUEUED_BYTES`] is dropped and counted (one longer than
    /// that is taken only into an empty queue).
    pub(crate) fn push(&self, text: &[u8], keep: Keep) {
        let mut state = self.state();
        let fits =
            state.lines.is_empty() || state.bytes.saturating_add(text.len()) <= MAX_QUEUED_BYTES;
        if !fits && keep == Keep::IfRoom {
            state.dropped += 1;
            return;
        }
        let dropped_before = std::mem::take(&mut state.dropped);
        state.bytes += text.len();
        state.lines.push_back(Line {
            text: text.to_vec(),
            dropped_before,
        });
        drop(state);
        self.queued.notify_one();
    }

    /// Write queued lines to `sink` as they come, forever; a line `sink` refuses is lost.
    /// Before a line that followed dropped ones, and when the queue runs empty after
    /// dropped ones, a line says how many were dropped.
    pub(crate) fn write_all_to(&self, sink: &mut impl Write) {
        loop {
            let mut state = self.state();
            state.writing = false;
            while state.lines.is_empty() && state.dropped == 0 {
                self.written.notify_all();
                state = self.queued.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            let (line, dropped) = match state.lines.pop_front() {
                Some(line) => {
                    state.bytes -= line.text.len();
                    (Some(line.text), line.dropped_before)
                }
                None => (None, std::mem::take(&mut state.dropped)),
            };
            state.writing = true;
            drop(state);
            if dropped > 0 {
                let _ = sink.write_all(dropped_note(dropped).as_bytes());
            }
            if let Some(line) = line {
                let _ = sink.write_all(&line);
            }
            let _ = sink.flush();
        }
    }

    /// Wait at most `bound` until the writer has written every queued line.
    pub(crate) fn wait_written(&self, bound: Duration) {
        let until = Instant::now() + bound;
        let mut state = self.state();
        while state.writing || !state.lines.is_empty() || state.dropped > 0 {
            let Some(left) = until.checked_duration_since(Instant::now()) else {
                return;
            };
            state = match self.written.wait_timeout(state, left) {
                Ok((state, _)) => state,
                Err(p) => p.into_inner().0,
            };
        }
    }
}

/// The log line saying `dropped` lines were dropped, in the form of tracing's own lines.
fn dropped_note(dropped: u64) -> String {
    let mut time = String::new();
    let _ = SystemTime.format_time(&mut Writer::new(&mut time));
    let lines = if dropped == 1 {
        "line was"
    } else {
        "lines were"
    };
    format!(
        "{time}  WARN {dropped} log {lines} dropped: stderr took no more while {MAX_QUEUED_BYTES} bytes of log waited for it (nothing read it, or too slowly)\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::mpsc::{Receiver, sync_channel};

    /// A sink that takes a write only when the test lets it (one `()` per write), as a pipe
    /// nobody reads takes none; what it took is in the shared buffer.
    struct Gate(Receiver<()>, Arc<Mutex<Vec<u8>>>);

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0
                .recv()
                .map_err(|_| io::Error::from(io::ErrorKind::BrokenPipe))?;
            self.1.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// A queue of its own, whose writer thread writes to a [`Gate`]: the queue, the sender
    /// that opens the gate for one write, and what went through.
    fn gated() -> (
        &'static Queue,
        std::sync::mpsc::SyncSender<()>,
        Arc<Mutex<Vec<u8>>>,
    ) {
        let queue: &'static Queue = Box::leak(Box::new(Queue::new()));
        let (open, gate) = sync_channel(0);
        let out = Arc::new(Mutex::new(Vec::new()));
        let sink = out.clone();
        std::thread::spawn(move || queue.write_all_to(&mut Gate(gate, sink)));
        (queue, open, out)
    }

    /// Let every write through from now on, and wait until all queued lines are written.
    fn read_again(queue: &Queue, open: std::sync::mpsc::SyncSender<()>) {
        std::thread::spawn(move || while open.send(()).is_ok() {});
        queue.wait_written(Duration::from_secs(30));
    }

    #[test]
    fn lines_past_the_bound_are_dropped_counted_and_reported_where_they_were() {
        let (queue, open, out) = gated();
        // The writer takes the first line and waits in its write, as on a full pipe.
        queue.push(b"first\n", Keep::IfRoom);
        while !queue.state().writing {
            std::thread::yield_now();
        }
        // 1 KiB lines: the queue takes 1024 of them, the next 10 are dropped; a kept line
        // is queued anyway, and carries their count.
        let line = [b"x".repeat(1023), b"\n".to_vec()].concat();
        for _ in 0..1034 {
            queue.push(&line, Keep::IfRoom);
        }
        queue.push(b"kept\n", Keep::Always);
        assert_eq!(queue.state().lines.len(), 1025);
        assert_eq!(queue.state().bytes, MAX_QUEUED_BYTES + 5);
        read_again(queue, open);
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1 + 1024 + 2, "{}", &text[text.len() - 300..]);
        assert_eq!(lines[0], "first");
        assert!(lines[1..1025].iter().all(|l| l.len() == 1023));
        assert!(
            lines[1025].contains(" WARN 10 log lines were dropped: "),
            "{}",
            lines[1025]
        );
        assert_eq!(lines[1026], "kept");
    }

    #[test]
    fn drops_at_the_end_are_reported_once_stderr_takes_lines_again() {
        let (queue, open, out) = gated();
        queue.push(&vec![b'y'; MAX_QUEUED_BYTES], Keep::IfRoom);
        while !queue.state().writing {
            std::thread::yield_now();
        }
        queue.push(&vec![b'z'; MAX_QUEUED_BYTES], Keep::IfRoom);
        queue.push(b"lost\n", Keep::IfRoom);
        queue.push(b"lost\n", Keep::IfRoom);
        read_again(queue, open);
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("lost"), "{}", &text[2 * MAX_QUEUED_BYTES..]);
        assert!(
            text.ends_with(" WARN 2 log lines were dropped: stderr took no more while 1048576 bytes of log waited for it (nothing read it, or too slowly)\n"),
            "{}",
            &text[2 * MAX_QUEUED_BYTES..]
        );
    }
}
