//! serve's client on stdio, taken before serve starts its wrapped servers, so that a client
//! that goes away while they start is seen at once (README, "Runs the client can steer":
//! when the client goes away, serve exits at once).
//!
//! While startup runs, what the client sends is read aside (kept whole and in order for the
//! service, which reads it first), and the end of its input (or a read error) ends the
//! startup, as does a stdout nobody reads any more ([`OutputWatch`]). Past [`EARLY_BYTES`] read aside, reading waits for the service: a client sends
//! its `initialize` line and waits for the answer, so only a flooding client gets there, and
//! its end of input is then seen once the service reads on.

use std::future::Future;

use rmcp::transport::StdioWriter;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::client_input::ClientInput;
use super::client_output::OutputWatch;
use super::stdio::INSPECT_LINE_BYTES;

/// Most bytes read aside while serve starts: one line at its cap, and some more.
const EARLY_BYTES: usize = INSPECT_LINE_BYTES + 64 * 1024;
/// Bytes asked for per read while serve starts.
const READ_BYTES: usize = 64 * 1024;

/// This process's stdin ([`ClientInput`]: a pending read never delays serve's exit) and
/// stdout (rmcp's `stdio_pipes`), with what the client sent while serve started.
pub struct StdioClient {
    input: ClientInput,
    output: StdioWriter,
    /// Whether stdout still has a reader.
    watch: OutputWatch,
    /// What the client sent while serve started, not served yet.
    early: Vec<u8>,
}

impl StdioClient {
    /// Take this process's stdin and stdout. Call it inside the tokio runtime (a pipe is
    /// registered with it).
    #[must_use]
    pub fn take() -> Self {
        // rmcp's reader would read a stdin that is not a pipe on tokio's blocking pool,
        // where a pending read holds the runtime's shutdown: only its writer is used.
        let (_, output) = rmcp::transport::stdio_pipes();
        let input = ClientInput::take();
        Self {
            input,
            output,
            watch: OutputWatch::stdout(),
            early: Vec::new(),
        }
    }

    /// Run `startup` until it ends (`Some` with its output), reading the client's input
    /// aside meanwhile; `None` as soon as that input ends or fails, or stdout loses its
    /// reader, first: `startup` is then dropped unfinished (whatever it started must end on
    /// drop).
    pub async fn unless_gone<F: Future>(&mut self, startup: F) -> Option<F::Output> {
        tokio::pin!(startup);
        loop {
            let watching = self.early.len() < EARLY_BYTES;
            if watching {
                self.early.reserve(READ_BYTES);
            }
            tokio::select! {
                // A startup that ended is served, also when the input ended meanwhile: the
                // service reads that end next.
                biased;
                out = &mut startup => return Some(out),
                () = self.watch.closed() => {
                    tracing::info!(
                        "the client's end of serve's stdout closed while the wrapped servers started; ending"
                    );
                    return None;
                }
                // `read_buf` is cancel safe: when startup wins, no byte was taken.
                read = self.input.read_buf(&mut self.early), if watching => match read {
                    Ok(0) => {
                        tracing::info!(
                            "the client closed its input while the wrapped servers started; ending"
                        );
                        return None;
                    }
                    Err(e) => {
                        tracing::info!(
                            "reading the client's input failed while the wrapped servers started ({e}); ending"
                        );
                        return None;
                    }
                    Ok(_) => {}
                },
            }
        }
    }

    /// The client's input (what was read aside first, then the rest of stdin), stdout, and
    /// the watch on stdout's reader.
    pub(super) fn into_pipes(
        self,
    ) -> (
        impl AsyncRead + Unpin + Send + 'static,
        StdioWriter,
        OutputWatch,
    ) {
        let input = std::io::Cursor::new(self.early).chain(self.input);
        (input, self.output, self.watch)
    }
}
