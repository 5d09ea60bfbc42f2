//! The host's end of a native sandbox's input socket, written without a standing epoll
//! registration.
//!
//! The runner reads its input from a socket (see `rootfs/.../channel.py`). Every time it
//! reads, the kernel tells the writing end it has room again: with the socket registered in
//! the runtime's epoll set (as a `tokio::net::UnixStream` is, for as long as it lives), each
//! result the runner reads woke a runtime thread for nothing, once per tool call. This end
//! is a plain non-blocking socket instead; only a write that would block registers it, until
//! the socket takes bytes again.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use tokio::io::AsyncWrite;

/// The writing end of a sandbox's input: [`AsyncWrite`] over a non-blocking [`UnixStream`],
/// registered with the runtime only while a write waits for room.
pub(super) struct QuietInput {
    /// The socket while no write waits (exactly one of the two is set, until an error).
    idle: Option<UnixStream>,
    /// The socket, registered with the runtime, while a write waits for room.
    waiting: Option<tokio::net::UnixStream>,
}

impl QuietInput {
    /// Wrap `socket`, which must be non-blocking.
    pub(super) fn new(socket: UnixStream) -> Self {
        Self {
            idle: Some(socket),
            waiting: None,
        }
    }
}

impl AsyncWrite for QuietInput {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        if let Some(waiting) = &mut this.waiting {
            let written = ready!(Pin::new(waiting).poll_write(cx, buf));
            // It took bytes (or failed): leave the epoll set until a write would block again.
            if let Some(waiting) = this.waiting.take() {
                this.idle = waiting.into_std().ok();
            }
            return Poll::Ready(written);
        }
        let Some(socket) = &mut this.idle else {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        };
        match socket.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if let Some(socket) = this.idle.take() {
                    this.waiting = Some(tokio::net::UnixStream::from_std(socket)?);
                }
                // Registered: the write goes on when the runner has read some.
                self.poll_write(cx, buf)
            }
            written => Poll::Ready(written),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let socket = match (&this.idle, &mut this.waiting) {
            (Some(socket), _) => socket,
            (None, Some(waiting)) => return Pin::new(waiting).poll_shutdown(cx),
            (None, None) => return Poll::Ready(Ok(())),
        };
        Poll::Ready(socket.shutdown(std::net::Shutdown::Write))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn a_write_past_the_sockets_room_waits_for_the_reader_and_loses_nothing() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        ours.set_nonblocking(true).unwrap();
        let mut input = QuietInput::new(ours);
        // Far more than the socket buffers: the write waits until the reader drains it.
        let sent: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
        let reader = std::thread::spawn(move || {
            let mut got = Vec::new();
            theirs.read_to_end(&mut got).unwrap();
            got
        });
        input.write_all(&sent).await.unwrap();
        assert!(input.idle.is_some(), "registered only while a write waits");
        input.shutdown().await.unwrap();
        assert_eq!(reader.join().unwrap(), sent);
    }
}
