//! Whether serve's stdout still has a reader.
//!
//! A client that closed its end of serve's stdout (or died while something else holds the
//! stdin pipe open) reads no answer any more: serve then ends as it does at the end of its
//! stdin, its runs cancelled, its sandboxes and wrapped servers ended. A failed write says so
//! (`stdio.rs`); when stdout is a pipe it is also watched, so that an idle serve, which writes
//! nothing, sees it too: the kernel flags a pipe's write end with an error (`EPOLLERR`) once
//! no reader is left.

use std::os::fd::RawFd;
use std::os::unix::fs::FileTypeExt;

use tokio::io::Interest;
use tokio::net::unix::pipe;

/// A watch on serve's stdout for its reader going away.
pub(super) struct OutputWatch {
    watched: Watched,
}

enum Watched {
    /// A second write end of the stdout pipe (its own open file description, so its
    /// `O_NONBLOCK` stays off the process's stdout), never written to.
    Pipe(pipe::Sender),
    /// The pipe had no reader already.
    Gone,
    /// Not a pipe (a file, a socket, a terminal): only a failed write tells.
    Unwatched,
}

impl OutputWatch {
    /// Watch this process's stdout. Call it inside the tokio runtime.
    pub(super) fn stdout() -> Self {
        Self::of_fd(1)
    }

    /// Watch descriptor `fd` of this process, through `/proc/self/fd`.
    fn of_fd(fd: RawFd) -> Self {
        let path = format!("/proc/self/fd/{fd}");
        let is_pipe = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo());
        let watched = if is_pipe {
            match pipe::OpenOptions::new().open_sender(&path) {
                Ok(sender) => Watched::Pipe(sender),
                // A FIFO opened for writing without blocking fails so when nobody reads it.
                Err(e) if e.raw_os_error() == Some(libc::ENXIO) => Watched::Gone,
                Err(e) => {
                    tracing::debug!("serve's stdout is not watched for its reader ({e})");
                    Watched::Unwatched
                }
            }
        } else {
            Watched::Unwatched
        };
        Self { watched }
    }

    /// Resolves once the pipe has no reader any more; never when stdout is no pipe.
    pub(super) async fn closed(&self) {
        match &self.watched {
            // Only an error readiness ends the wait (a pipe's only error is its lost reader);
            // a failed wait is taken as the same.
            Watched::Pipe(sender) => drop(sender.ready(Interest::ERROR).await),
            Watched::Gone => {}
            Watched::Unwatched => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    use super::*;

    /// A pipe no child another test starts inherits.
    fn pipe() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe")
    }

    #[tokio::test]
    async fn a_pipe_whose_reader_closes_is_seen_closed_and_not_before() {
        let (read, write) = pipe();
        let watch = OutputWatch::of_fd(write.as_raw_fd());
        assert!(matches!(watch.watched, Watched::Pipe(_)));
        let waited = tokio::time::timeout(Duration::from_millis(200), watch.closed()).await;
        assert!(waited.is_err(), "a pipe with a reader is not closed");
        drop(read);
        tokio::time::timeout(Duration::from_secs(5), watch.closed())
            .await
            .expect("the reader's end is seen");
    }

    #[tokio::test]
    async fn a_pipe_without_a_reader_is_closed_from_the_start() {
        let (read, write) = pipe();
        drop(read);
        let watch = OutputWatch::of_fd(write.as_raw_fd());
        // Gone, unless a child another test forks still held the read end for a moment.
        assert!(!matches!(watch.watched, Watched::Unwatched));
        tokio::time::timeout(Duration::from_secs(1), watch.closed())
            .await
            .expect("closed at once");
    }

    #[tokio::test]
    async fn a_file_is_not_watched() {
        let file = tempfile::tempfile().expect("temp file");
        let watch = OutputWatch::of_fd(file.as_raw_fd());
        assert!(matches!(watch.watched, Watched::Unwatched));
    }
}
