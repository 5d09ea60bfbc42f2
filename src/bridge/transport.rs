//! The stdio transport to a wrapped server, hardened against what sloppy servers send.
//!
//! MCP's stdio transport (spec "Transports § stdio") is newline-delimited JSON-RPC on the
//! server's stdout. Wrapped servers are third-party programs, so this reader:
//! - bounds every line at [`MAX_SERVER_LINE_BYTES`]; a longer line ends the connection with a
//!   clear reason instead of growing memory;
//! - strips a UTF-8 BOM and a trailing `\r`, skips blank lines and lines that are not JSON-RPC
//!   (junk printed by the server before or after the handshake), logging a bounded sample;
//! - when a line that is not valid JSON (NaN, a lone surrogate) still names a request id we
//!   are waiting on, answers that request with an error at once instead of letting it hang;
//! - repairs the shapes rmcp's typed model would reject as a whole: tools in `tools/list`
//!   with no `inputSchema` get `{"type": "object"}`, tools that are not objects with a string
//!   name are dropped with a warning; content blocks of unknown type in a `tools/call` result
//!   become a text block that names the type, so nothing is dropped silently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleClient;
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// Longest line accepted from a wrapped server, in bytes.
pub const MAX_SERVER_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Junk lines logged per connection before further ones are only counted.
const MAX_JUNK_LOGGED: usize = 5;

/// What an outgoing request was, so its response can be repaired.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pending {
    ListTools,
    CallTool,
    Other,
}

type PendingMap = Arc<Mutex<HashMap<String, Pending>>>;

/// Why the connection to a wrapped server ended, readable by the bridge.
#[derive(Clone, Default)]
pub struct CloseReason(Arc<Mutex<Option<String>>>);

impl CloseReason {
    fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.lock() {
            slot.get_or_insert(reason);
        }
    }

    /// The reason, once the connection has ended.
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }
}

/// An rmcp client transport over a child's stdin/stdout.
pub struct LineTransport<W> {
    writer: Arc<tokio::sync::Mutex<W>>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    pending: PendingMap,
}

/// Build the transport, spawning the reader task on the current runtime.
pub fn line_transport<R, W>(server: &str, reader: R, writer: W) -> (LineTransport<W>, CloseReason)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    let pending: PendingMap = Arc::default();
    let reason = CloseReason::default();
    tokio::spawn(read_loop(
        server.to_owned(),
        reader,
        tx,
        pending.clone(),
        reason.clone(),
    ));
    (
        LineTransport {
            writer: Arc::new(tokio::sync::Mutex::new(writer)),
            incoming: rx,
            pending,
        },
        reason,
    )
}

fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    server: String,
    reader: R,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    pending: PendingMap,
    reason: CloseReason,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut first = true;
    let mut junk = 0usize;
    loop {
        line.clear();
        match read_bounded_line(&mut reader, &mut line).await {
            Ok(LineRead::Eof) => {
                reason.set(format!("the server {server:?} closed its stdout"));
                break;
            }
            Ok(LineRead::TooLong) => {
                reason.set(format!(
                    "the server {server:?} sent a line over {} MiB; the connection was closed",
                    MAX_SERVER_LINE_BYTES >> 20
                ));
                break;
            }
            Ok(LineRead::Line) => {}
            Err(e) => {
                reason.set(format!("failed to read from the server {server:?}: {e}"));
                break;
            }
        }
        let mut bytes = &line[..];
        if first {
            bytes = bytes.strip_prefix(b"\xef\xbb\xbf").unwrap_or(bytes);
            first = false;
        }
        while let Some(rest) = bytes
            .strip_suffix(b"\n")
            .or_else(|| bytes.strip_suffix(b"\r"))
        {
            bytes = rest;
        }
        let bytes = bytes.trim_ascii();
        if bytes.is_empty() {
            continue;
        }
        let message = match serde_json::from_slice::<Value>(bytes) {
            Ok(value) => decode(value, &pending),
            Err(_) => invalid_json_reply(bytes, &pending),
        };
        match message {
            Some(message) => {
                if tx.send(message).await.is_err() {
                    break;
                }
            }
            None => {
                junk += 1;
                if junk <= MAX_JUNK_LOGGED {
                    let sample = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
                    tracing::warn!(server = %server, "skipped a line that is not JSON-RPC: {sample:?}");
                }
            }
        }
    }
}

enum LineRead {
    Line,
    Eof,
    TooLong,
}

async fn read_bounded_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() {
                LineRead::Eof
            } else {
                LineRead::Line
            });
        }
        let (take, done) = match available.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        if line.len() + take > MAX_SERVER_LINE_BYTES {
            return Ok(LineRead::TooLong);
        }
        line.extend_from_slice(&available[..take]);
        reader.consume(take);
        if done {
            return Ok(LineRead::Line);
        }
    }
}

/// Turn one JSON value into a message rmcp accepts, repairing known bad shapes.
fn decode(mut value: Value, pending: &PendingMap) -> Option<ServerJsonRpcMessage> {
    let obj = value.as_object()?;
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return None;
    }
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    let key = obj.get("id").and_then(id_key);
    let kind = if is_response {
        key.as_ref()
            .and_then(|k| pending.lock().ok().and_then(|mut p| p.remove(k)))
    } else {
        None
    };
    if let (Some(kind), Some(result)) = (kind, value.get_mut("result")) {
        repair_result(kind, result);
    }
    match serde_json::from_value::<ServerJsonRpcMessage>(value.clone()) {
        Ok(message) => Some(message),
        Err(e) => {
            let id = value.get("id")?.clone();
            if !is_response {
                return None;
            }
            error_reply(
                id,
                &format!("the server sent a response of unknown shape: {e}"),
            )
        }
    }
}

fn error_reply(id: Value, message: &str) -> Option<ServerJsonRpcMessage> {
    let message = super::refusal::cap(message, 300);
    serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message}
    }))
    .ok()
}

/// A line that is not valid JSON but answers a request we wait on: fail that request now.
fn invalid_json_reply(bytes: &[u8], pending: &PendingMap) -> Option<ServerJsonRpcMessage> {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(4096)]);
    let at = text.find("\"id\"")?;
    let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    if digits.is_empty() {
        return None;
    }
    pending.lock().ok()?.remove(&digits)?;
    let id: u64 = digits.parse().ok()?;
    error_reply(
        json!(id),
        "the server sent a response that is not valid JSON (NaN, Infinity or a lone surrogate?)",
    )
}

fn repair_result(kind: Pending, result: &mut Value) {
    match kind {
        Pending::ListTools => {
            if let Some(Value::Array(tools)) = result.get_mut("tools") {
                tools.retain(|t| {
                    let ok = t.get("name").is_some_and(Value::is_string);
                    if !ok {
                        tracing::warn!("left out a tool with no string name");
                    }
                    ok
                });
                for tool in tools.iter_mut() {
                    if let Some(obj) = tool.as_object_mut() {
                        if !obj.get("inputSchema").is_some_and(Value::is_object) {
                            obj.insert("inputSchema".into(), json!({"type": "object"}));
                        }
                        if obj.get("description").is_some_and(|d| !d.is_string()) {
                            obj.remove("description");
                        }
                        if obj.get("outputSchema").is_some_and(|d| !d.is_object()) {
                            obj.remove("outputSchema");
                        }
                        for key in ["annotations", "icons", "title", "_meta"] {
                            let keep = match key {
                                "title" => obj.get(key).is_none_or(Value::is_string),
                                "icons" => obj.get(key).is_none_or(Value::is_array),
                                _ => obj.get(key).is_none_or(Value::is_object),
                            };
                            if !keep {
                                obj.remove(key);
                            }
                        }
                    }
                }
            }
        }
        Pending::CallTool => {
            if let Some(obj) = result.as_object_mut() {
                // An empty result object is a valid, empty result (rmcp's model wants a field).
                if !["content", "structuredContent", "isError"]
                    .iter()
                    .any(|k| obj.contains_key(*k))
                {
                    obj.insert("content".into(), json!([]));
                }
            }
            if let Some(Value::Array(blocks)) = result.get_mut("content") {
                for block in blocks.iter_mut() {
                    if serde_json::from_value::<rmcp::model::ContentBlock>(block.clone()).is_err() {
                        let kind = block
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown");
                        let kind = super::refusal::cap(kind, 40);
                        *block = json!({"type": "text", "text": format!("[a content block of type {kind:?} that this bridge cannot read]")});
                    }
                }
            } else if result.get("content").is_some() {
                result
                    .as_object_mut()
                    .map(|o| o.insert("content".into(), json!([])));
            }
        }
        Pending::Other => {}
    }
}

impl<W> Transport<RoleClient> for LineTransport<W>
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ClientJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = self.writer.clone();
        let pending = self.pending.clone();
        async move {
            let value = serde_json::to_value(&item).map_err(std::io::Error::other)?;
            if let (Some(method), Some(key)) = (
                value.get("method").and_then(Value::as_str),
                value.get("id").and_then(id_key),
            ) {
                let kind = match method {
                    "tools/list" => Pending::ListTools,
                    "tools/call" => Pending::CallTool,
                    _ => Pending::Other,
                };
                if let Ok(mut p) = pending.lock() {
                    p.insert(key, kind);
                }
            }
            let mut line = serde_json::to_vec(&value).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let mut w = writer.lock().await;
            w.write_all(&line).await?;
            w.flush().await
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<ServerJsonRpcMessage>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.incoming.close();
        let mut w = self.writer.lock().await;
        w.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending_with(id: &str, kind: Pending) -> PendingMap {
        let p: PendingMap = Arc::default();
        p.lock().unwrap().insert(id.into(), kind);
        p
    }

    #[test]
    fn junk_is_not_a_message() {
        let p: PendingMap = Arc::default();
        assert!(decode(json!({"hello": 1}), &p).is_none());
        assert!(decode(json!([1, 2]), &p).is_none());
        assert!(decode(json!({"jsonrpc": "1.0", "id": 1, "result": {}}), &p).is_none());
    }

    #[test]
    fn a_tool_without_an_input_schema_is_repaired() {
        let p = pending_with("1", Pending::ListTools);
        let m = decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"noname": 1}, {"name": "b", "inputSchema": {"type": "object"}}]}}),
            &p,
        );
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("\"a\""), "{text}");
        assert!(text.contains("\"b\""), "{text}");
        assert!(!text.contains("noname"), "{text}");
    }

    #[test]
    fn unknown_content_blocks_become_text_that_names_them() {
        let p = pending_with("2", Pending::CallTool);
        let m = decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "hologram", "data": 1}, {"type": "text", "text": "hi"}]}}),
            &p,
        );
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("hologram"), "{text}");
        assert!(text.contains("\"hi\""), "{text}");
    }

    #[test]
    fn an_empty_result_object_is_an_empty_result() {
        let p = pending_with("3", Pending::CallTool);
        let m = decode(json!({"jsonrpc": "2.0", "id": 3, "result": {}}), &p);
        assert!(
            matches!(m, Some(ServerJsonRpcMessage::Response(_))),
            "{m:?}"
        );
    }

    #[test]
    fn an_invalid_json_answer_fails_its_request_at_once() {
        let p = pending_with("7", Pending::CallTool);
        let m = invalid_json_reply(br#"{"jsonrpc":"2.0","id":7,"result":{"x":NaN}}"#, &p);
        assert!(matches!(m, Some(ServerJsonRpcMessage::Error(_))));
        let p: PendingMap = Arc::default();
        assert!(invalid_json_reply(br#"{"id":7,"x":NaN}"#, &p).is_none());
    }

    #[tokio::test]
    async fn an_endless_line_ends_the_connection_with_bounded_memory() {
        let (mut w, r) = tokio::io::duplex(1 << 16);
        let (_sink, _) = tokio::io::duplex(16);
        let (mut t, reason) = line_transport("flood", r, _sink);
        tokio::spawn(async move {
            let chunk = vec![b'x'; 1 << 20];
            for _ in 0..40 {
                if w.write_all(&chunk).await.is_err() {
                    break;
                }
            }
        });
        assert!(t.receive().await.is_none());
        assert!(reason.get().unwrap().contains("over 16 MiB"));
    }
}
