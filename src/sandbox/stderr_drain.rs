//! A sandbox's stderr, drained by the host: the first [`STDERR_KEEP_BYTES`] are kept for
//! diagnostics, the rest is read and dropped, so that a sandbox writing without end never
//! blocks on a full pipe (tests/probes/res/diag_pipe_flood.py writes 256 MiB).
//!
//! The drain is cheap per byte: reads of [`READ_BYTES`] at a time, and once the kept part
//! is full no lock is taken any more; bytes past it are only counted off.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::watch;

use super::{STDERR_KEEP_BYTES, escape_controls};

/// Bytes read from a stderr pipe at a time: a Linux pipe's default capacity, so one wake-up
/// can empty a full pipe.
const READ_BYTES: usize = 64 * 1024;

/// How long [`StderrDrain::text`] waits for the end of a sandbox's stderr after the sandbox
/// exited. The pipe normally ends with the last process of the sandbox, at once; the bound
/// is for a descendant that still holds it open.
const STDERR_END_GRACE: Duration = Duration::from_millis(250);

/// A sandbox's stderr, drained in the background; the first [`STDERR_KEEP_BYTES`] are kept.
pub struct StderrDrain {
    kept: Arc<Mutex<Vec<u8>>>,
    /// Closed when the drain reached the end of the stream.
    ended: watch::Receiver<()>,
}

/// The writing side of a [`StderrDrain`]: the sandbox's stderr bytes are pushed into it as
/// they come; dropping it ends the stream (what the drain's `text` waits for).
pub struct StderrFeed {
    kept: Arc<Mutex<Vec<u8>>>,
    /// Bytes still to keep: the feed is the only writer, so it knows when the kept part is
    /// full without the lock.
    room: usize,
    /// Dropped with the feed: the end of the stream.
    _end: watch::Sender<()>,
}

impl StderrFeed {
    /// Keep what of `bytes` fits in the kept part ([`STDERR_KEEP_BYTES`] in all); the rest
    /// is dropped. Takes the lock only while the kept part has room.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.room == 0 {
            return;
        }
        let take = bytes.len().min(self.room);
        match self.kept.lock() {
            Ok(mut kept) => kept.extend_from_slice(&bytes[..take]),
            // A reader panicked holding the lock: nothing more can be kept.
            Err(_) => {
                self.room = 0;
                return;
            }
        }
        self.room -= take;
    }
}

impl StderrDrain {
    /// A drain fed by hand: the sandbox's stderr comes as chunks of another stream (Docker's
    /// attach stream), pushed into the returned [`StderrFeed`].
    pub fn feed() -> (Self, StderrFeed) {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let (end, ended) = watch::channel(());
        let feed = StderrFeed {
            kept: kept.clone(),
            room: STDERR_KEEP_BYTES,
            _end: end,
        };
        (Self { kept, ended }, feed)
    }

    /// Start draining `stderr`, [`READ_BYTES`] at a time: a child's stderr pipe, or any
    /// byte stream that ends when the sandbox's stderr does (nothing to drain: an empty,
    /// ended drain). A read error ends the drain as the end of the stream does.
    pub fn start<R>(stderr: Option<R>) -> Self
    where
        R: AsyncRead + Send + Unpin + 'static,
    {
        let (drain, mut feed) = Self::feed();
        if let Some(mut stderr) = stderr {
            tokio::spawn(async move {
                // On the heap: a buffer in the task's future would make the future this big.
                let mut buf = vec![0u8; READ_BYTES];
                while let Ok(n) = stderr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    feed.push(&buf[..n]);
                }
            });
        }
        drain
    }

    /// The kept stderr as text, control characters escaped ([`escape_controls`]), once the
    /// stream has ended (or `STDERR_END_GRACE` has passed): call it after the sandbox
    /// exited, so that what it wrote last is read.
    pub async fn text(&mut self) -> String {
        // `changed` fails exactly when the feed has dropped its end of the channel.
        let _ = tokio::time::timeout(STDERR_END_GRACE, self.ended.changed()).await;
        self.kept
            .lock()
            .map(|k| escape_controls(String::from_utf8_lossy(&k).trim()))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::process::Stdio;
    use std::time::Instant;
    use tokio::process::Command;

    async fn drained(script: &str) -> (String, Duration) {
        let mut child = Command::new("/bin/sh")
            .args(["-c", script])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut drain = StderrDrain::start(child.stderr.take());
        child.wait().await.unwrap();
        let since_exit = Instant::now();
        (drain.text().await, since_exit.elapsed())
    }

    #[tokio::test]
    async fn what_a_sandbox_writes_just_before_it_exits_is_kept() {
        for _ in 0..20 {
            let script = "i=0; while [ $i -lt 200 ]; do echo line $i >&2; i=$((i+1)); done; \
                          echo last words >&2";
            let (text, _) = drained(script).await;
            assert!(text.ends_with("last words"), "{text:?}");
        }
    }

    #[tokio::test]
    async fn a_descendant_holding_stderr_open_delays_the_text_by_the_grace_only() {
        let (text, waited) = drained("sleep 5 & echo early >&2").await;
        assert_eq!(text, "early");
        assert!(waited < Duration::from_secs(3), "{waited:?}");
    }

    #[tokio::test]
    async fn a_flood_is_drained_to_its_end_and_only_the_first_bytes_are_kept() {
        // 8 MiB, 128 times a pipe's capacity: the shell exits only once nearly all of it
        // was read, and the drain then reaches the end of the stream.
        let mut child = Command::new("/bin/sh")
            .args([
                "-c",
                "printf 'first\\033[2J' >&2; head -c 8388608 /dev/zero | tr '\\0' x >&2",
            ])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut drain = StderrDrain::start(child.stderr.take());
        let exited = tokio::time::timeout(Duration::from_secs(60), child.wait()).await;
        assert!(
            exited.is_ok(),
            "the writer blocked: the drain stopped reading"
        );
        let ended = tokio::time::timeout(Duration::from_secs(10), drain.ended.changed()).await;
        assert!(
            matches!(ended, Ok(Err(_))),
            "the drain did not reach the end"
        );
        let text = drain.text().await;
        // ESC (one byte) shows as its six-character escape.
        assert_eq!(text.len(), STDERR_KEEP_BYTES - 1 + "\\u{1b}".len());
        assert!(text.starts_with("first\\u{1b}[2Jxxx"), "{:?}", &text[..20]);
        assert!(text.ends_with('x'));
    }

    #[tokio::test]
    async fn pushed_chunks_are_kept_up_to_the_bound_and_the_feed_ends_the_stream() {
        let (mut drain, mut feed) = StderrDrain::feed();
        feed.push(b"ab\x07");
        feed.push(&vec![b'c'; STDERR_KEEP_BYTES]);
        feed.push(b"never kept");
        drop(feed);
        let text = drain.text().await;
        assert!(
            drain.ended.has_changed().is_err(),
            "the stream has not ended"
        );
        let kept_c = STDERR_KEEP_BYTES - 3;
        assert_eq!(text, format!("ab\\u{{7}}{}", "c".repeat(kept_c)));
    }
}
