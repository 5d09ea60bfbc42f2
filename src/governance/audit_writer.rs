//! The audit log's writer: a thread of its own owns the file and writes each record whole,
//! in order ([`RecordSink`]: one `write` when the sink takes it all, counting the bytes each
//! `write` took). A record cut short (a full disk takes part of it, then says `ENOSPC`)
//! leaves its first part in the file with no `\n`; the next record written starts with that
//! `\n`, so the fragment is one line of its own that readers skip, and the record after it
//! is whole on its own line. A log that stops taking records (a FIFO nobody reads once its
//! 64 KiB buffer is full, a hung network file system) then blocks only this thread, never
//! the async runtime that serves runs, pings, cancels and signals.
//!
//! A record waits for its write at most [`WRITE_WAIT`]; past that the log counts as failed
//! (stderr, [`Health::failure`], so `--audit-required` fails closed) and is *stalled*: later
//! records are queued without waiting, at most [`MAX_QUEUED_BYTES`] in all (more are
//! dropped, each counted as failed), until a write completes again.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// Longest a record waits for its write before the log counts as stalled.
pub(crate) const WRITE_WAIT: Duration = Duration::from_secs(2);

/// Most bytes of records waiting for a stalled log; more are dropped.
pub(crate) const MAX_QUEUED_BYTES: usize = 16 << 20;

/// Whether the log's writes succeed: shared by the log and its writer thread.
#[derive(Debug)]
pub(super) struct Health {
    path: PathBuf,
    /// The last write failure, until a later write succeeds.
    failure: Mutex<Option<String>>,
    /// Records that could not be written (or not in time, or were dropped) since the open.
    failed_writes: AtomicU64,
    /// A record waited [`WRITE_WAIT`] unwritten and no write completed since.
    stalled: AtomicBool,
}

impl Health {
    /// Why the last record could not be written, while no later one was.
    pub(super) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Records that could not be written since the log was opened.
    pub(super) fn failed_writes(&self) -> u64 {
        self.failed_writes.load(Ordering::SeqCst)
    }

    /// Remember a record that could not be written, saying so on stderr once per failure.
    pub(super) fn failed(&self, why: String) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.is_none() {
            tracing::error!("{why}");
        }
        self.failed_writes.fetch_add(1, Ordering::SeqCst);
        *failure = Some(why);
    }

    /// A whole record was written: the log is healthy again (said once on stderr).
    fn written(&self) {
        self.stalled.store(false, Ordering::SeqCst);
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.take().is_some() {
            tracing::warn!(path = %self.path.display(), "the audit log is written again");
        }
    }
}

/// The log's sink, and whether the last record written to it was cut short: its first part
/// is in the sink without the `\n` that ends its line.
struct RecordSink<W> {
    sink: W,
    /// A record was cut short after some of its bytes were taken; the next write owes `\n`.
    torn: bool,
}

impl<W: Write> RecordSink<W> {
    /// Write `line` (a record with its `\n`), preceded by the `\n` that ends a record cut
    /// short before it, as one buffer; `write` is called again for what a short write left.
    /// `Ok` only when the whole record was taken.
    ///
    /// # Errors
    /// The sink's error (`WriteZero` when it takes nothing): the record is not written
    /// whole; any part of it the sink took is remembered, so the next record ends its line.
    fn write_record(&mut self, line: &[u8]) -> std::io::Result<()> {
        let owed = usize::from(self.torn);
        let joined;
        let buf = if self.torn {
            joined = [b"\n".as_slice(), line].concat();
            joined.as_slice()
        } else {
            line
        };
        let mut taken = 0;
        let outcome = loop {
            if taken == buf.len() {
                break Ok(());
            }
            match self.sink.write(&buf[taken..]) {
                Ok(0) => {
                    break Err(std::io::Error::new(
                        std::io::ErrorKind::WriteZero,
                        "the file took none of the record",
                    ));
                }
                Ok(n) => taken += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        // Torn: nothing was taken while a `\n` was owed, or only part of this record was.
        self.torn = (taken == 0 && self.torn) || (taken > owed && taken < buf.len());
        outcome
    }
}

/// One record's line, and who waits for its write.
struct Job {
    line: Vec<u8>,
    done: Option<tokio::sync::oneshot::Sender<std::io::Result<()>>>,
}

/// The writer thread's end of the log.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once dropped: the thread ends when the queue is empty.
    jobs: Option<mpsc::Sender<Job>>,
    queued_bytes: Arc<AtomicUsize>,
    /// Told by the thread when it ends (a `Mutex` only to make the log `Sync`).
    ended: Mutex<mpsc::Receiver<()>>,
    pub(super) health: Arc<Health>,
}

impl Writer {
    /// Start the thread writing to `file` (the log at `path`; a file opened unbuffered, so
    /// each `write` reaches the kernel).
    ///
    /// # Errors
    /// The system's error when the thread cannot be started.
    pub(super) fn start<W: Write + Send + 'static>(
        file: W,
        path: PathBuf,
    ) -> std::io::Result<Self> {
        let health = Arc::new(Health {
            path,
            failure: Mutex::new(None),
            failed_writes: AtomicU64::new(0),
            stalled: AtomicBool::new(false),
        });
        let (jobs, queue) = mpsc::channel::<Job>();
        let (end, ended) = mpsc::channel();
        let queued_bytes = Arc::new(AtomicUsize::new(0));
        let (thread_health, thread_queued) = (health.clone(), queued_bytes.clone());
        std::thread::Builder::new()
            .name("audit-log".into())
            .spawn(move || {
                let mut file = RecordSink {
                    sink: file,
                    torn: false,
                };
                for job in queue {
                    let written = file.write_record(&job.line);
                    thread_queued.fetch_sub(job.line.len(), Ordering::SeqCst);
                    match &written {
                        Ok(()) => thread_health.written(),
                        Err(e) => thread_health.failed(cannot_write(&thread_health.path, e)),
                    }
                    if let Some(done) = job.done {
                        let _ = done.send(written);
                    }
                }
                let _ = end.send(());
            })?;
        Ok(Self {
            jobs: Some(jobs),
            queued_bytes,
            ended: Mutex::new(ended),
            health,
        })
    }

    /// Remember `error` as a failed write of the log, and give it back.
    fn failed(&self, error: std::io::Error) -> std::io::Error {
        self.health.failed(cannot_write(&self.health.path, &error));
        error
    }

    /// Queue `line`; its write's outcome goes to `done`. `Err` (remembered as a failed
    /// write): the queue is full, or the thread is gone.
    fn queue(
        &self,
        line: Vec<u8>,
        done: Option<tokio::sync::oneshot::Sender<std::io::Result<()>>>,
    ) -> std::io::Result<()> {
        let len = line.len();
        let before = self.queued_bytes.fetch_add(len, Ordering::SeqCst);
        let sent = if before > 0 && before + len > MAX_QUEUED_BYTES {
            Err(std::io::Error::other(format!(
                "it is stalled with {} MiB of records waiting; this one is dropped",
                MAX_QUEUED_BYTES >> 20
            )))
        } else {
            let job = Job { line, done };
            self.jobs
                .as_ref()
                .and_then(|jobs| jobs.send(job).ok())
                .ok_or_else(|| std::io::Error::other("its writer thread is gone"))
        };
        sent.map_err(|e| {
            self.queued_bytes.fetch_sub(len, Ordering::SeqCst);
            self.failed(e)
        })
    }

    /// Write `line` and wait for it, at most [`WRITE_WAIT`]; while the log is stalled,
    /// queue it and fail at once. `Err` says why it was not written in time (remembered).
    pub(super) async fn write(&self, line: Vec<u8>) -> std::io::Result<()> {
        let (done, written) = tokio::sync::oneshot::channel();
        self.queue(line, Some(done))?;
        if self.health.stalled.load(Ordering::SeqCst) {
            return Err(self.failed(stalled()));
        }
        match tokio::time::timeout(WRITE_WAIT, written).await {
            Ok(Ok(written)) => written, // a failure is remembered by the thread
            Ok(Err(_)) => Err(self.failed(std::io::Error::other("its writer thread is gone"))),
            Err(_) => {
                self.health.stalled.store(true, Ordering::SeqCst);
                Err(self.failed(stalled()))
            }
        }
    }

    /// Queue `line` without waiting (a failure is remembered).
    pub(super) fn write_unwaited(&self, line: Vec<u8>) {
        let _ = self.queue(line, None);
    }
}

/// Why a record of a stalled log was not written.
fn stalled() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "it took no record for {} s (a FIFO nobody reads, a stalled file system); records \
wait for it, at most {} MiB",
            WRITE_WAIT.as_secs(),
            MAX_QUEUED_BYTES >> 20
        ),
    )
}

impl Drop for Writer {
    /// Let the thread write what is queued, waiting at most [`WRITE_WAIT`] (a stalled log
    /// keeps the rest).
    fn drop(&mut self) {
        self.jobs = None;
        let ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        let _ = ended.recv_timeout(WRITE_WAIT);
    }
}

/// What a failed write says (as [`super::audit::AuditError::Io`] does).
fn cannot_write(path: &std::path::Path, error: &std::io::Error) -> String {
    format!(
        "the audit log {} cannot be written: {error}",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that takes every byte while `room` is `None`, else at most `room` more bytes
    /// and then fails `ENOSPC`, as a full disk does.
    #[derive(Clone, Default)]
    struct FullDisk {
        taken: Arc<Mutex<Vec<u8>>>,
        room: Arc<Mutex<Option<usize>>>,
    }

    impl Write for FullDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let mut room = self.room.lock().unwrap();
            let n = room.map_or(buf.len(), |room| room.min(buf.len()));
            if n == 0 {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            if let Some(room) = room.as_mut() {
                *room -= n;
            }
            self.taken.lock().unwrap().extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn record(n: u32) -> Vec<u8> {
        format!("{{\"record\":{n},\"pad\":\"{}\"}}\n", "x".repeat(40)).into_bytes()
    }

    #[tokio::test]
    async fn a_record_cut_short_by_a_full_disk_is_a_line_of_its_own_and_the_next_whole_record_is_readable()
     {
        let disk = FullDisk::default();
        let writer = Writer::start(disk.clone(), "audit.jsonl".into()).unwrap();
        let room = |room| *disk.room.lock().unwrap() = room;
        writer.write(record(1)).await.unwrap();
        room(Some(10));
        assert!(
            writer.write(record(2)).await.is_err(),
            "record 2 was cut short"
        );
        assert!(
            writer.write(record(3)).await.is_err(),
            "no room for record 3"
        );
        // Room for the `\n` the fragment is owed and no more: still not healthy.
        room(Some(1));
        assert!(
            writer.write(record(4)).await.is_err(),
            "no room for record 4"
        );
        assert!(writer.health.failure().is_some());
        room(None);
        writer.write(record(5)).await.unwrap();
        assert_eq!(writer.health.failure(), None, "a whole record was written");
        assert_eq!(writer.health.failed_writes(), 3);
        drop(writer);
        let taken = String::from_utf8(disk.taken.lock().unwrap().clone()).unwrap();
        let lines: Vec<&str> = taken.lines().collect();
        let fragment = String::from_utf8(record(2)[..10].to_vec()).unwrap();
        assert_eq!(lines.len(), 3, "{taken}");
        assert_eq!(lines[1], fragment, "{taken}");
        for (line, n) in [(lines[0], 1), (lines[2], 5)] {
            let value: serde_json::Value = serde_json::from_str(line).expect(line);
            assert_eq!(value["record"], n, "{taken}");
        }
        assert!(serde_json::from_str::<serde_json::Value>(lines[1]).is_err());
    }
}
