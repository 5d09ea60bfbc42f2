//! serve's stdio transport: rmcp reads and writes the JSON-RPC lines, with two things in
//! between that rmcp 3.11 cannot do (its tasks are a later draft's, [`crate::mcp_tasks`]):
//! - each line from the client that is a task request (`tasks/*`, or `tools/call` with
//!   `task`) goes to [`Tasks`] instead of rmcp, and their answers join rmcp's output;
//! - rmcp's `initialize` answer gets the `tasks` capability and its `tools/list` answer
//!   marks run_python `execution.taskSupport: "optional"`.
//!
//! - every line is read into a JSON value first: one serde_json cannot read gets `-32700
//!   Parse error`, one that is no JSON-RPC message rmcp reads `-32600 Invalid Request` or
//!   `-32602 Invalid params`, and a line over [`INSPECT_LINE_BYTES`] (rmcp's own line cap)
//!   `-32600`, each with the line's id when it can be read, else `null`
//!   ([`super::unreadable`]); rmcp would drop most of them without an answer and leave the
//!   client waiting, or answer without the id. A too long line is skipped as it arrives,
//!   never held whole. A blank line is skipped, as rmcp skips it.
//!
//! - a request whose id is already in use by a request in flight gets `-32600` and never
//!   runs ([`super::in_flight`]).
//!
//! Every other line passes unchanged. The end of the client's input (or a read error)
//! cancels every run at once, so the service ends without waiting for them; so does a
//! stdout that has no reader any more (a write to it failed, or the pipe's read end closed:
//! [`super::client_output`]), since no answer reaches the client then.

use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::CodeModeServer;
use super::in_flight::InFlight;
use super::stdio_client::StdioClient;
use super::tasks::{Tasks, is_task_message, patch_answer};
use super::unreadable::{INVALID_REQUEST, Refusal, error_answer, invalid, parse};
use crate::lines::{LineRead, read_line};

/// Longest client line, in bytes (rmcp's own cap on a line); a longer one is answered with
/// an error and skipped.
pub(super) const INSPECT_LINE_BYTES: usize = crate::limits::MAX_CLIENT_LINE_BYTES;
/// Buffer of the pipes between this layer and rmcp.
const PIPE_BYTES: usize = 64 * 1024;

/// Serve `server` to `client` (this process's stdin and stdout) until it disconnects.
pub(super) async fn serve(server: CodeModeServer, client: StdioClient) -> anyhow::Result<()> {
    let (stdin, stdout, watch) = client.into_pipes();
    let output_gone = CancellationToken::new();
    let _watching = AbortOnDrop(tokio::spawn({
        let output_gone = output_gone.clone();
        async move {
            watch.closed().await;
            output_gone.cancel();
        }
    }));
    serve_on(server, stdin, stdout, output_gone).await
}

/// Serve `server` over `input`/`output` (the client's lines in, ours out) until `input`
/// ends, or `output_gone` is cancelled (also by a failed write to `output`).
pub(super) async fn serve_on<R, W>(
    server: CodeModeServer,
    input: R,
    output: W,
    output_gone: CancellationToken,
) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (to_rmcp, rmcp_in) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (replies, replied) = mpsc::unbounded_channel();
    let tasks = Tasks::new(&server);
    let in_flight = InFlight::default();
    let disconnected = server.disconnected.clone();
    // Both end with this future, also when it is dropped (a signal ends the service).
    let _reader = AbortOnDrop(tokio::spawn(read_client(
        input,
        to_rmcp,
        tasks,
        replies,
        in_flight.clone(),
        disconnected.clone(),
        output_gone.clone(),
    )));
    let mut writer = AbortOnDrop(tokio::spawn(write_client(
        output,
        from_rmcp,
        replied,
        in_flight,
        output_gone,
    )));
    let outcome = async {
        let service = server.serve((rmcp_in, rmcp_out)).await?;
        service.waiting().await?;
        anyhow::Ok(())
    }
    .await;
    disconnected.cancel();
    // rmcp has closed its output: what it wrote last reaches the client.
    let _ = tokio::time::timeout(Duration::from_secs(1), &mut writer.0).await;
    outcome
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A line for the client from this layer.
enum Reply {
    /// The answer to a request in flight (from the tasks layer).
    Answer(Value),
    /// A refusal of a request that never ran, though it may carry the id of one that is in
    /// flight: its JSON text.
    Refusal(String),
}

/// Answer a refused client line (a notification gets none, JSON-RPC 2.0 section 4.1).
fn refuse(replies: &mpsc::UnboundedSender<Reply>, refusal: Refusal) {
    let code = refusal.answer.code();
    if refusal.notification {
        tracing::warn!(
            "a client notification is invalid ({}); not answered",
            refusal.why
        );
        return;
    }
    tracing::warn!(
        "a client line is no JSON-RPC message serve reads ({}); answered {code}",
        refusal.why
    );
    let _ = replies.send(Reply::Refusal(refusal.answer.line()));
}

/// Pass the client's lines on until its input ends or `output_gone` is cancelled; then
/// cancel every run (`disconnected`) and end rmcp's input, which ends the service.
async fn read_client<R: AsyncRead + Unpin>(
    input: R,
    mut to_rmcp: DuplexStream,
    tasks: Tasks,
    replies: mpsc::UnboundedSender<Reply>,
    in_flight: InFlight,
    disconnected: CancellationToken,
    output_gone: CancellationToken,
) {
    let why = tokio::select! {
        biased;
        () = output_gone.cancelled() => "the client's end of serve's stdout is closed",
        () = read_lines(input, &mut to_rmcp, tasks, replies, in_flight) => "the client closed its input",
    };
    tracing::info!("{why}; cancelling every run");
    disconnected.cancel();
    let _ = to_rmcp.shutdown().await;
}

/// Pass the lines of `input` on (to rmcp, the tasks layer, or answered here) until it ends,
/// fails, or rmcp's input closes.
async fn read_lines<R: AsyncRead + Unpin>(
    input: R,
    to_rmcp: &mut DuplexStream,
    tasks: Tasks,
    replies: mpsc::UnboundedSender<Reply>,
    in_flight: InFlight,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    loop {
        if line.capacity() > 1 << 20 {
            line = Vec::new();
        }
        match read_line(&mut reader, INSPECT_LINE_BYTES, &mut line).await {
            Ok(LineRead::Line) => {
                if line.trim_ascii().is_empty() {
                    continue;
                }
                let message = match parse(&line) {
                    Ok(message) => message,
                    Err(refusal) => {
                        refuse(&replies, *refusal);
                        continue;
                    }
                };
                if let Some(answer) = in_flight.refusal(&message) {
                    tracing::warn!(
                        "a client request reuses the id {} of a request in flight; answered -32600",
                        answer["id"]
                    );
                    let _ = replies.send(Reply::Refusal(answer.to_string()));
                    continue;
                }
                if is_task_message(&message) && tasks.claims(&message) {
                    in_flight.passed_on(&message);
                    let replies = replies.clone();
                    tasks.handle(&message, move |answer| {
                        let _ = replies.send(Reply::Answer(answer));
                    });
                    continue;
                }
                if let Some(refusal) = invalid(&message, &line) {
                    refuse(&replies, refusal);
                    continue;
                }
                in_flight.passed_on(&message);
                line.push(b'\n');
                if to_rmcp.write_all(&line).await.is_err() {
                    break;
                }
            }
            Ok(LineRead::TooLong) => {
                let why = format!(
                    "Invalid Request: the line is over {} MiB, the cap on one message",
                    INSPECT_LINE_BYTES >> 20
                );
                tracing::warn!("a client line is over the cap; answered -32600 and skipped it");
                let answer = error_answer(&line, INVALID_REQUEST, &why);
                if skip_rest_of_line(&mut reader).await.is_err() {
                    break;
                }
                let _ = replies.send(Reply::Refusal(answer.line()));
            }
            Ok(LineRead::Eof { .. }) | Err(_) => break,
        }
    }
}

/// Read past what is left of the current line, its `\n` included.
async fn skip_rest_of_line<R: AsyncRead + Unpin>(reader: &mut BufReader<R>) -> std::io::Result<()> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(());
        }
        let (len, ended) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (available.len(), false),
        };
        reader.consume(len);
        if ended {
            return Ok(());
        }
    }
}

/// Write rmcp's lines and this layer's replies to `output` until rmcp's output ends; a
/// failed write (`EPIPE`: nobody reads) cancels `output_gone` and ends the writing.
async fn write_client<W: AsyncWrite + Unpin>(
    mut output: W,
    from_rmcp: DuplexStream,
    mut replies: mpsc::UnboundedReceiver<Reply>,
    in_flight: InFlight,
    output_gone: CancellationToken,
) {
    let mut rmcp = BufReader::new(from_rmcp);
    let mut line = Vec::new();
    loop {
        // `read_until` keeps what it read in `line` when the other branch wins; the next
        // turn goes on from there.
        let out = tokio::select! {
            read = rmcp.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    in_flight.answered_line(&line);
                    let out = patch(&line);
                    line.clear();
                    out
                }
            },
            Some(reply) = replies.recv() => {
                let mut out = match reply {
                    Reply::Answer(answer) => {
                        in_flight.answered(&answer);
                        serde_json::to_vec(&answer).unwrap_or_default()
                    }
                    Reply::Refusal(text) => text.into_bytes(),
                };
                out.push(b'\n');
                out
            }
        };
        let written = match output.write_all(&out).await {
            Ok(()) => output.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::info!("writing to the client failed ({e})");
            output_gone.cancel();
            return;
        }
    }
    let _ = output.flush().await;
}

/// rmcp's line with the tasks capability or run_python's task support added, when it is
/// the answer to `initialize` or `tools/list`.
fn patch(line: &[u8]) -> Vec<u8> {
    let maybe = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
    if !(maybe(b"\"serverInfo\"") || maybe(b"\"tools\"")) {
        return line.to_vec();
    }
    let Ok(mut message) = serde_json::from_slice::<Value>(line) else {
        return line.to_vec();
    };
    if !patch_answer(&mut message) {
        return line.to_vec();
    }
    let mut out = serde_json::to_vec(&message).unwrap_or_else(|_| line.to_vec());
    if !out.ends_with(b"\n") {
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_initialize_and_tools_list_answers_are_changed() {
        let init = br#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}}
"#;
        let out: Value = serde_json::from_slice(&patch(init)).unwrap();
        assert_eq!(
            out["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            serde_json::json!({})
        );
        let list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"run_python","inputSchema":{}}]}}
"#;
        let out: Value = serde_json::from_slice(&patch(list)).unwrap();
        assert_eq!(
            out["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        // A run's output that merely mentions the words is left as it is.
        let call = br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"\"tools\" \"serverInfo\""}]}}
"#;
        assert_eq!(patch(call), call.to_vec());
    }
}
