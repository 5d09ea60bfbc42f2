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
//!   runs; each request goes to rmcp under an id of its own, its answer back under the
//!   client's, so a cancelled run's late answer never goes out as a new request's; and a line
//!   that gets an answer waits for one of [`super::in_flight::MAX_UNANSWERED`] seats first,
//!   given back when its answer is written, so a client that does not read its answers
//!   stops being read (backpressure) instead of growing `serve` ([`super::in_flight`]).
//!
//! Every other line passes unchanged. The end of the client's input (or a read error)
//! cancels every run at once, so the service ends without waiting for them; so does a
//! signal (`cli`: the runs cancelled, the client is read no more, their answers still
//! written to it); so does a
//! stdout that has no reader any more (a write to it failed, or the pipe's read end closed:
//! [`super::client_output`]), since no answer reaches the client then.

use std::time::Duration;

use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio_util::sync::CancellationToken;

use super::CodeModeServer;
use super::in_flight::{FromRmcp, InFlight, Ticket, client_id, is_request};
use super::stdio_client::StdioClient;
use super::tasks::{Tasks, is_task_message, patch_answer};
use super::unreadable::{INVALID_REQUEST, Refusal, error_answer, invalid, parse};
use crate::lines::{LineRead, read_line};

/// Longest client line, in bytes (rmcp's own cap on a line); a longer one is answered with
/// an error and skipped.
pub(super) const INSPECT_LINE_BYTES: usize = 16 * 1024 * 1024;
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
    // rmcp knows each request by an id of this layer's ([`InFlight::to_rmcp`]).
    let server = CodeModeServer {
        client_id,
        ..server
    };
    let (to_rmcp, rmcp_in) = tokio::io::duplex(PIPE_BYTES);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(PIPE_BYTES);
    let (replies, replied) = mpsc::unbounded_channel();
    let tasks = Tasks::new(&server);
    let in_flight = InFlight::new();
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

/// An answer for the client from this layer.
enum Reply {
    /// The refusal of a line that was never passed on (it may carry the id of a request
    /// in flight): its JSON text, with the line's seat, held until it is written.
    Refusal(String, OwnedSemaphorePermit),
    /// The tasks layer's answer to the request of the ticket.
    Answer(Value, Ticket),
}

/// Pass the client's lines on until its input ends, `output_gone` is cancelled or serve
/// ends the session (`disconnected`: a signal); then cancel every run (`disconnected`) and
/// end rmcp's input, which ends the service once it has answered the runs.
async fn read_client<R: AsyncRead + Unpin>(
    input: R,
    to_rmcp: DuplexStream,
    tasks: Tasks,
    replies: mpsc::UnboundedSender<Reply>,
    in_flight: InFlight,
    disconnected: CancellationToken,
    output_gone: CancellationToken,
) {
    let mut routes = Routes {
        to_rmcp,
        tasks,
        replies,
        in_flight,
    };
    let why = tokio::select! {
        biased;
        () = output_gone.cancelled() => "the client's end of serve's stdout is closed",
        () = disconnected.cancelled() => "serve is ending",
        () = read_lines(input, &mut routes) => "the client closed its input",
    };
    tracing::info!("{why}; cancelling every run");
    disconnected.cancel();
    let _ = routes.to_rmcp.shutdown().await;
}

/// Pass the lines of `input` on (to rmcp, the tasks layer, or answered here) until it ends,
/// fails, or rmcp's input or the client's output closes.
async fn read_lines<R: AsyncRead + Unpin>(input: R, routes: &mut Routes) {
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
                if !routes.line(&mut line).await {
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
                let Some(seat) = routes.in_flight.seat().await else {
                    break;
                };
                let _ = routes.replies.send(Reply::Refusal(answer.line(), seat));
            }
            Ok(LineRead::Eof { .. }) | Err(_) => break,
        }
    }
}

/// Where the client's lines go: rmcp, the tasks layer, or an answer from here.
struct Routes {
    to_rmcp: DuplexStream,
    tasks: Tasks,
    replies: mpsc::UnboundedSender<Reply>,
    in_flight: InFlight,
}

impl Routes {
    /// Pass on or answer one whole client line (no `\n`); `false` when the session is
    /// over (rmcp's input or the client's output closed).
    async fn line(&mut self, line: &mut Vec<u8>) -> bool {
        let mut message = match parse(line) {
            Ok(message) => message,
            Err(refusal) => return self.refuse(*refusal, None).await,
        };
        // A request waits for its seat here; a notification (a cancel among them) or the
        // client's answer to a request of ours is read on at once.
        let seat = if is_request(&message) {
            let Some(seat) = self.in_flight.seat().await else {
                return false;
            };
            Some(seat)
        } else {
            None
        };
        if let Some(seat) = seat {
            if let Some(answer) = self.in_flight.refusal(&message) {
                tracing::warn!(
                    "a client request reuses the id {} of a request in flight; answered -32600",
                    answer["id"]
                );
                let _ = self.replies.send(Reply::Refusal(answer.to_string(), seat));
                return true;
            }
            if is_task_message(&message) && self.tasks.claims(&message) {
                let ticket = self.in_flight.to_tasks(&message, seat);
                let replies = self.replies.clone();
                self.tasks.handle(&message, move |answer| {
                    let _ = replies.send(Reply::Answer(answer, ticket));
                });
                return true;
            }
            if let Some(refusal) = invalid(&message, line) {
                return self.refuse(refusal, Some(seat)).await;
            }
            self.in_flight.to_rmcp(&mut message, seat);
            rewrite(line, &message);
        } else if let Some(refusal) = invalid(&message, line) {
            return self.refuse(refusal, None).await;
        } else if is_cancel(&message) {
            if !self.in_flight.cancel(&mut message) {
                tracing::debug!("a client cancel names a request of the tasks layer; ignored");
                return true;
            }
            rewrite(line, &message);
        }
        line.push(b'\n');
        self.to_rmcp.write_all(line).await.is_ok()
    }

    /// Answer a refused client line (a notification gets none, JSON-RPC 2.0 section 4.1),
    /// holding `seat`, or one taken now, until the answer is written; `false` when no seat
    /// is handed out any more.
    async fn refuse(&self, refusal: Refusal, seat: Option<OwnedSemaphorePermit>) -> bool {
        let code = refusal.answer.code();
        if refusal.notification {
            tracing::warn!(
                "a client notification is invalid ({}); not answered",
                refusal.why
            );
            return true;
        }
        tracing::warn!(
            "a client line is no JSON-RPC message serve reads ({}); answered {code}",
            refusal.why
        );
        let seat = match seat {
            Some(seat) => seat,
            None => match self.in_flight.seat().await {
                Some(seat) => seat,
                None => return false,
            },
        };
        let _ = self
            .replies
            .send(Reply::Refusal(refusal.answer.line(), seat));
        true
    }
}

/// Whether a client message is a `notifications/cancelled`.
fn is_cancel(message: &Value) -> bool {
    message.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
}

/// `line` becomes `message`, written again (its id or the id it cancels renamed).
fn rewrite(line: &mut Vec<u8>, message: &Value) {
    line.clear();
    // Writing a JSON value to memory cannot fail.
    let _ = serde_json::to_writer(&mut *line, message);
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
        let (out, seat) = tokio::select! {
            read = rmcp.read_until(b'\n', &mut line) => match read {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    let line = std::mem::take(&mut line);
                    match in_flight.rmcp_line(&line) {
                        FromRmcp::Other => (patch(line), None),
                        FromRmcp::Renamed(out) => (out, None),
                        FromRmcp::Answer(out, seat) => (patch(out), Some(seat)),
                        FromRmcp::Stale => {
                            tracing::debug!("dropped the late answer of a cancelled request");
                            continue;
                        }
                    }
                }
            },
            Some(reply) = replies.recv() => {
                let (mut out, seat) = match reply {
                    Reply::Refusal(text, seat) => (text.into_bytes(), seat),
                    Reply::Answer(answer, ticket) => match in_flight.answered(&ticket) {
                        Some(seat) => (serde_json::to_vec(&answer).unwrap_or_default(), seat),
                        None => continue,
                    },
                };
                out.push(b'\n');
                (out, Some(seat))
            }
        };
        let written = match output.write_all(&out).await {
            Ok(()) => output.flush().await,
            Err(e) => Err(e),
        };
        if let Err(e) = written {
            tracing::info!("writing to the client failed ({e})");
            output_gone.cancel();
            in_flight.close();
            return;
        }
        // The answer is in the client's pipe: its seat is free.
        drop(seat);
    }
    // No answer reaches the client any more: a reader waiting for a seat ends.
    in_flight.close();
    let _ = output.flush().await;
}

/// rmcp's line with the tasks capability or run_python's task support added, when it is
/// the answer to `initialize` or `tools/list`.
fn patch(line: Vec<u8>) -> Vec<u8> {
    let maybe = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
    if !(maybe(b"\"serverInfo\"") || maybe(b"\"tools\"")) {
        return line;
    }
    let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
        return line;
    };
    if !patch_answer(&mut message) {
        return line;
    }
    let Ok(mut out) = serde_json::to_vec(&message) else {
        return line;
    };
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
        let out: Value = serde_json::from_slice(&patch(init.to_vec())).unwrap();
        assert_eq!(
            out["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            serde_json::json!({})
        );
        let list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"run_python","inputSchema":{}}]}}
"#;
        let out: Value = serde_json::from_slice(&patch(list.to_vec())).unwrap();
        assert_eq!(
            out["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        // A run's output that merely mentions the words is left as it is.
        let call = br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"\"tools\" \"serverInfo\""}]}}
"#;
        assert_eq!(patch(call.to_vec()), call.to_vec());
    }
}
