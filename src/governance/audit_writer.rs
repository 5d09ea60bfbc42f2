//! The audit log's writer: a thread of its own owns the file and writes each record with
//! one `write_all`, in order. A log that stops taking records (a FIFO nobody reads once its
//! 64 KiB buffer is full, a hung network file system) then blocks only this thread, never
//! the async runtime that serves runs, pings, cancels and signals.
//!
//! A record waits for its write at most [`WRITE_WAIT`]; past that the log counts as failed
//! (stderr, [`Health::failure`], so `--audit-required` fails closed) and is *stalled*: later
//! records are queued without waiting, at most [`MAX_QUEUED_BYTES`] in all (more are
//! dropped, each counted as failed), until a write completes again.

use std::fs::File;
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

    fn written(&self) {
        self.stalled.store(false, Ordering::SeqCst);
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if failure.take().is_some() {
            tracing::warn!(path = %self.path.display(), "the audit log is written again");
        }
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
    /// Start the thread writing to `file` (the log at `path`).
    ///
    /// # Errors
    /// The system's error when the thread cannot be started.
    pub(super) fn start(file: File, path: PathBuf) -> std::io::Result<Self> {
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
                let mut file = file;
                for job in queue {
                    let written = file.write_all(&job.line);
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
