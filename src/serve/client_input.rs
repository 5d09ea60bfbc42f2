//! serve's stdin, read in a way that never holds the process's exit.
//!
//! A read of tokio's own stdin runs on the runtime's blocking pool and cannot be cancelled:
//! while the client keeps stdin open, the runtime's shutdown waits for that read until its
//! timeout, so a signal-ended `serve` lingered 2 s after its work was done. Here a pipe (the
//! usual stdin of an MCP server) is read through tokio's pipe driver, which reads only when
//! data is there; anything else (a socket, a terminal, a file) is read on a thread of its
//! own, which the runtime does not wait for and which ends with the process.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::os::unix::fs::OpenOptionsExt;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;

/// Bytes read per read by the reading thread.
const CHUNK_BYTES: usize = 64 * 1024;

/// This process's stdin as an [`AsyncRead`] whose pending read never delays the exit.
pub(super) enum ClientInput {
    /// A pipe, reopened non-blocking on its own open file description (so that fd 0 itself,
    /// and any child that inherits it, keeps its blocking flag) and read by the runtime.
    Pipe(pipe::Receiver),
    /// Anything else: chunks read by a dedicated thread, then the rest of the chunk taken.
    Thread {
        /// Chunks in order; an error ends the input after it; the sender dropped is its end.
        chunks: mpsc::Receiver<io::Result<Vec<u8>>>,
        /// The chunk being handed out, and how much of it was.
        pending: Vec<u8>,
        taken: usize,
    },
}

impl ClientInput {
    /// Take this process's stdin. Call it inside the tokio runtime (a pipe is registered
    /// with its reactor). When stdin cannot be read at all (it is closed), the first read
    /// returns that error.
    pub(super) fn take() -> Self {
        if let Some(pipe) = reopen_pipe() {
            tracing::debug!("reading stdin through the runtime's pipe driver");
            return Self::Pipe(pipe);
        }
        // One chunk waits while the next is read: a client that floods gets back-pressure.
        let (sender, chunks) = mpsc::channel(1);
        let reading = io::stdin()
            .as_fd()
            .try_clone_to_owned()
            .map(File::from)
            .and_then(|stdin| {
                let sender = sender.clone();
                std::thread::Builder::new()
                    .name("stdin-reader".into())
                    .spawn(move || read_chunks(stdin, &sender))
            });
        match reading {
            Ok(_) => tracing::debug!("reading stdin on a thread of its own"),
            Err(e) => {
                let _ = sender.try_send(Err(e));
            }
        }
        Self::Thread {
            chunks,
            pending: Vec::new(),
            taken: 0,
        }
    }
}

/// Send what `stdin` holds to `sender` in chunks, until its end, a read error (sent too),
/// or the receiver is gone.
fn read_chunks(mut stdin: File, sender: &mpsc::Sender<io::Result<Vec<u8>>>) {
    loop {
        let mut chunk = vec![0; CHUNK_BYTES];
        let read = match stdin.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                chunk.truncate(n);
                Ok(chunk)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => Err(e),
        };
        let failed = read.is_err();
        if sender.blocking_send(read).is_err() || failed {
            return;
        }
    }
}

/// fd 0 reopened through `/proc/self/fd` with `O_NONBLOCK`, when it is a pipe.
fn reopen_pipe() -> Option<pipe::Receiver> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open("/proc/self/fd/0")
        .ok()?;
    // Fails for anything but a pipe open for reading.
    pipe::Receiver::from_file(file).ok()
}

impl AsyncRead for ClientInput {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            Self::Thread {
                chunks,
                pending,
                taken,
            } => {
                if *taken == pending.len() {
                    match chunks.poll_recv(cx) {
                        Poll::Pending => return Poll::Pending,
                        // The end of stdin: a read of nothing.
                        Poll::Ready(None) => return Poll::Ready(Ok(())),
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Err(e)),
                        Poll::Ready(Some(Ok(chunk))) => {
                            *pending = chunk;
                            *taken = 0;
                        }
                    }
                }
                let n = buf.remaining().min(pending.len() - *taken);
                buf.put_slice(&pending[*taken..*taken + n]);
                *taken += n;
                Poll::Ready(Ok(()))
            }
        }
    }
}
