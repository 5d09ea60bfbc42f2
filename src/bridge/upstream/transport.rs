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
//!   a `tools/list` answer nested deeper than serde_json reads is read with its deep values
//!   cut to `null` (their tools are then too deep to check and left out, not the list);
//! - answers a request of the server's that rmcp cannot read with an error, so the server
//!   never waits on us;
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

/// Why the connection to a wrapped server ended, readable by the bridge, and a signal for
/// whoever waits on it (a call in flight races its answer against this).
#[derive(Clone, Default)]
pub struct CloseReason(Arc<CloseState>);

#[derive(Default)]
struct CloseState {
    /// What the transport saw: end of stdout, a line too long, a read error.
    reason: Mutex<Option<String>>,
    /// How the process ended, once it has.
    exit: Mutex<Option<String>>,
    /// Whether the reason is the plain end of stdout (an exit status then says more).
    eof: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl CloseReason {
    fn set(&self, reason: String) {
        if let Ok(mut slot) = self.0.reason.lock() {
            slot.get_or_insert(reason);
        }
        self.0.notify.notify_waiters();
    }

    fn set_eof(&self, reason: String) {
        let first = self.0.reason.lock().is_ok_and(|slot| slot.is_none());
        if first {
            self.0.eof.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        self.set(reason);
    }

    /// Record how the server process ended (`exited (exit status: 1)`, `was killed by
    /// signal 9`); this also ends the connection.
    pub fn set_exit(&self, how: String) {
        if let Ok(mut slot) = self.0.exit.lock() {
            slot.get_or_insert(how);
        }
        self.0.notify.notify_waiters();
    }

    /// The reason, once the connection has ended: what the transport saw, unless that was
    /// only the end of stdout and the exit status is known.
    pub fn get(&self) -> Option<String> {
        let reason = self.0.reason.lock().ok().and_then(|slot| slot.clone());
        let exit = self.0.exit.lock().ok().and_then(|slot| slot.clone());
        match (reason, exit) {
            (Some(_), Some(exit)) if self.0.eof.load(std::sync::atomic::Ordering::SeqCst) => {
                Some(exit)
            }
            (Some(reason), _) => Some(reason),
            (None, exit) => exit,
        }
    }

    /// The reason, once the connection has ended; when only the end of stdout is known so
    /// far, waits up to `grace` for the exit status, which says more.
    pub async fn explain(&self, grace: std::time::Duration) -> Option<String> {
        let waited = tokio::time::timeout(grace, async {
            loop {
                let notified = self.0.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                let exit_known = self.0.exit.lock().is_ok_and(|slot| slot.is_some());
                let eof_only = self.0.eof.load(std::sync::atomic::Ordering::SeqCst);
                if exit_known || !eof_only {
                    return;
                }
                notified.await;
            }
        });
        let _ = waited.await;
        self.get()
    }

    /// Wait until the connection has ended (at once if it has).
    pub async fn closed(&self) {
        loop {
            let notified = self.0.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.get().is_some() {
                return;
            }
            notified.await;
        }
    }
}

/// An rmcp client transport over a child's stdin/stdout.
pub struct LineTransport<W> {
    writer: SharedWriter<W>,
    incoming: mpsc::Receiver<ServerJsonRpcMessage>,
    pending: PendingMap,
}

type SharedWriter<W> = Arc<tokio::sync::Mutex<W>>;

/// Messages decoded ahead of rmcp; with lines up to [`MAX_SERVER_LINE_BYTES`], this bounds
/// what waits in memory.
const INCOMING_QUEUE: usize = 16;

/// The reader task of a transport; dropping this ends it (a server whose stdout stays open,
/// held by a child of its own, must not leave a reader behind).
pub struct ReaderTask(tokio::task::JoinHandle<()>);

impl Drop for ReaderTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Build the transport, spawning the reader task on the current runtime.
pub fn line_transport<R, W>(
    server: &str,
    reader: R,
    writer: W,
) -> (LineTransport<W>, CloseReason, ReaderTask)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(INCOMING_QUEUE);
    let pending: PendingMap = Arc::default();
    let reason = CloseReason::default();
    let writer = Arc::new(tokio::sync::Mutex::new(writer));
    let task = tokio::spawn(read_loop(
        server.to_owned(),
        reader,
        tx,
        Replier(writer.clone()),
        pending.clone(),
        reason.clone(),
    ));
    (
        LineTransport {
            writer,
            incoming: rx,
            pending,
        },
        reason,
        ReaderTask(task),
    )
}

/// Answers, from the reader, a request of the server's that rmcp could not read, so the
/// server is never left waiting (JSON-RPC: every request gets a response).
struct Replier<W>(SharedWriter<W>);

impl<W: AsyncWrite + Unpin + Send + 'static> Replier<W> {
    fn refuse(&self, id: Value, message: &str) {
        let line = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": -32602, "message": message}
        });
        let writer = self.0.clone();
        // Spawned: a server that does not read its stdin must not stall our reader.
        tokio::spawn(async move {
            let mut bytes = line.to_string().into_bytes();
            bytes.push(b'\n');
            let mut w = writer.lock().await;
            let _ = w.write_all(&bytes).await;
            let _ = w.flush().await;
        });
    }
}

fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

async fn read_loop<R: AsyncRead + Unpin, W: AsyncWrite + Unpin + Send + 'static>(
    server: String,
    reader: R,
    tx: mpsc::Sender<ServerJsonRpcMessage>,
    replier: Replier<W>,
    pending: PendingMap,
    reason: CloseReason,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut junk = 0usize;
    loop {
        line.clear();
        if line.capacity() > 1 << 20 {
            // One big line must not pin its buffer for the life of the connection.
            line.shrink_to(64 * 1024);
        }
        match read_bounded_line(&mut reader, &mut line).await {
            Ok(LineRead::Eof) => {
                reason.set_eof(format!("the server {server:?} closed its stdout"));
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
        // A BOM may open any write of a server (some runtimes add one per stream or write).
        let bytes = line.strip_prefix(b"\xef\xbb\xbf").unwrap_or(&line);
        let bytes = bytes.trim_ascii();
        if bytes.is_empty() {
            continue;
        }
        let decoded = match serde_json::from_slice::<Value>(bytes) {
            Ok(value) => decode(value, &pending),
            Err(e) => unparsable_line(bytes, &e, &pending),
        };
        match decoded {
            Decoded::Message(message) => {
                if tx.send(*message).await.is_err() {
                    break;
                }
            }
            Decoded::Refuse(id, why) => {
                tracing::warn!(server = %server, "refused a request of the server: {why}");
                replier.refuse(id, &why);
            }
            Decoded::Junk => {
                junk += 1;
                if junk <= MAX_JUNK_LOGGED {
                    let sample = String::from_utf8_lossy(&bytes[..bytes.len().min(120)]);
                    tracing::warn!(server = %server, "skipped a line that is not JSON-RPC: {sample:?}");
                } else if junk.is_power_of_two() {
                    tracing::warn!(server = %server, "skipped {junk} lines that are not JSON-RPC so far");
                }
            }
        }
    }
}

/// What one line from the server comes to.
enum Decoded {
    /// A message for rmcp.
    Message(Box<ServerJsonRpcMessage>),
    /// A request rmcp cannot read: answer it with this error.
    Refuse(Value, String),
    /// Not JSON-RPC: skipped.
    Junk,
}

impl From<Option<ServerJsonRpcMessage>> for Decoded {
    fn from(message: Option<ServerJsonRpcMessage>) -> Self {
        message.map_or(Self::Junk, |m| Self::Message(Box::new(m)))
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
fn decode(mut value: Value, pending: &PendingMap) -> Decoded {
    let Some(obj) = value.as_object() else {
        return Decoded::Junk;
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Decoded::Junk;
    }
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    let is_request = !is_response && obj.contains_key("method");
    let id = obj.get("id").cloned();
    let key = id.as_ref().and_then(id_key);
    let kind = if is_response {
        key.as_ref()
            .and_then(|k| pending.lock().ok().and_then(|mut p| p.remove(k)))
    } else {
        None
    };
    if let (Some(kind), Some(result)) = (kind, value.get_mut("result")) {
        repair_result(kind, result);
    }
    match serde_json::from_value::<ServerJsonRpcMessage>(value) {
        Ok(message) => Decoded::Message(Box::new(message)),
        Err(e) => match id {
            Some(id) if is_response => error_reply(
                id,
                &format!("the server sent a response of unknown shape: {e}"),
            )
            .into(),
            Some(id) if is_request && key.is_some() => Decoded::Refuse(
                id,
                crate::bridge::refusal::cap(&format!("invalid request: {e}"), 300),
            ),
            _ => Decoded::Junk,
        },
    }
}

fn error_reply(id: Value, message: &str) -> Option<ServerJsonRpcMessage> {
    let message = crate::bridge::refusal::cap(message, 300);
    serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message}
    }))
    .ok()
}

/// Nesting kept when a `tools/list` answer is deeper than serde_json reads (128): deeper
/// values become `null`, so only the tools that hold them are left out (as too deep to
/// check, schema.rs), not the whole list.
const MAX_LIST_DEPTH: usize = 100;

/// A line that does not parse as JSON. When it answers a request we wait on, that request
/// fails at once (or, for a `tools/list` too deep to read, is read with its deep parts cut).
fn unparsable_line(bytes: &[u8], error: &serde_json::Error, pending: &PendingMap) -> Decoded {
    let Some(id) = top_level_id(bytes) else {
        return Decoded::Junk;
    };
    let Some(key) = id_key(&id) else {
        return Decoded::Junk;
    };
    let too_deep = error.to_string().starts_with("recursion limit exceeded");
    let kind = pending.lock().ok().and_then(|p| p.get(&key).copied());
    match kind {
        Some(Pending::ListTools) if too_deep => {
            match serde_json::from_slice::<Value>(&cap_depth(bytes, MAX_LIST_DEPTH)) {
                Ok(value) => decode(value, pending),
                Err(_) => Decoded::Junk,
            }
        }
        Some(_) => {
            if let Ok(mut p) = pending.lock() {
                p.remove(&key);
            }
            let why = if too_deep {
                "nested more than 128 levels deep".to_owned()
            } else {
                format!("not valid JSON ({error}; NaN, Infinity or a lone surrogate?)")
            };
            error_reply(id, &format!("the server sent a response that is {why}")).into()
        }
        None => Decoded::Junk,
    }
}

/// The value of the top-level `"id"` member of a JSON object's text, read without parsing
/// the rest (which may be invalid or too deep).
fn top_level_id(bytes: &[u8]) -> Option<Value> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i)?;
                if depth == 1 && &bytes[i..=end] == b"\"id\"" {
                    let rest = bytes[end + 1..].trim_ascii_start();
                    let rest = rest.strip_prefix(b":")?.trim_ascii_start();
                    let len = if rest.first() == Some(&b'"') {
                        string_end(rest, 0)? + 1
                    } else {
                        rest.iter()
                            .position(|b| b",}] \t\r\n".contains(b))
                            .unwrap_or(rest.len())
                    };
                    return serde_json::from_slice(&rest[..len]).ok();
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// Index of the quote that closes the string opening at `start`.
fn string_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// `bytes` with every array or object nested deeper than `max` replaced by `null`.
fn cap_depth(bytes: &[u8], max: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' if depth == max => {
                // Skip the whole deep value.
                let mut inner = 0usize;
                while i < bytes.len() {
                    match bytes[i] {
                        b'{' | b'[' => inner += 1,
                        b'}' | b']' => inner -= 1,
                        b'"' => i = string_end(bytes, i).unwrap_or(bytes.len()),
                        _ => {}
                    }
                    i += 1;
                    if inner == 0 {
                        break;
                    }
                }
                out.extend_from_slice(b"null");
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            b'"' => {
                let end = string_end(bytes, i).unwrap_or(bytes.len() - 1);
                out.extend_from_slice(&bytes[i..=end]);
                i = end + 1;
                continue;
            }
            _ => {}
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
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
                        // JSON Schema's boolean forms keep their meaning: `false` accepts no
                        // arguments at all, `true` any; a missing or other value means an
                        // object with no named arguments.
                        let schema = match obj.get("inputSchema") {
                            Some(Value::Object(_)) => None,
                            Some(Value::Bool(false)) => Some(json!({"not": {}})),
                            Some(Value::Bool(true)) => {
                                Some(json!({"type": "object", "additionalProperties": true}))
                            }
                            _ => Some(json!({"type": "object"})),
                        };
                        if let Some(schema) = schema {
                            obj.insert("inputSchema".into(), schema);
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
                        let kind = crate::bridge::refusal::cap(kind, 40);
                        *block = json!({"type": "text", "text": format!("[a content block of type {kind:?} that this bridge cannot read]")});
                    }
                }
            } else if let Some(content) = result.get("content").cloned() {
                // A bare string is read as one text block; any other shape is named.
                let text = match content {
                    Value::String(s) => s,
                    other => format!(
                        "[content of type {} that this bridge cannot read]",
                        json_kind(&other)
                    ),
                };
                result
                    .as_object_mut()
                    .map(|o| o.insert("content".into(), json!([{"type": "text", "text": text}])));
            }
        }
        Pending::Other => {}
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
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
            if value.get("method").and_then(Value::as_str) == Some("notifications/cancelled")
                && let Some(key) = value.pointer("/params/requestId").and_then(id_key)
                && let Ok(mut p) = pending.lock()
            {
                // No answer is awaited any more; a late one passes unrepaired.
                p.remove(&key);
            }
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

    fn message(decoded: Decoded) -> Option<ServerJsonRpcMessage> {
        match decoded {
            Decoded::Message(m) => Some(*m),
            _ => None,
        }
    }

    fn pending_with(id: &str, kind: Pending) -> PendingMap {
        let p: PendingMap = Arc::default();
        p.lock().unwrap().insert(id.into(), kind);
        p
    }

    #[test]
    fn junk_is_not_a_message() {
        let p: PendingMap = Arc::default();
        assert!(message(decode(json!({"hello": 1}), &p)).is_none());
        assert!(message(decode(json!([1, 2]), &p)).is_none());
        assert!(message(decode(json!({"jsonrpc": "1.0", "id": 1, "result": {}}), &p)).is_none());
    }

    #[test]
    fn a_tool_without_an_input_schema_is_repaired() {
        let p = pending_with("1", Pending::ListTools);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"noname": 1}, {"name": "b", "inputSchema": {"type": "object"}}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("\"a\""), "{text}");
        assert!(text.contains("\"b\""), "{text}");
        assert!(!text.contains("noname"), "{text}");
    }

    #[test]
    fn boolean_input_schemas_keep_their_meaning() {
        let p = pending_with("1", Pending::ListTools);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "none", "inputSchema": false}, {"name": "any", "inputSchema": true}, {"name": "null", "inputSchema": null}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains(r#""inputSchema":{"not":{}}"#), "{text}");
        assert!(text.contains(r#""additionalProperties":true"#), "{text}");
        assert!(
            text.contains(r#""inputSchema":{"type":"object"}"#),
            "{text}"
        );
    }

    #[test]
    fn a_bare_string_content_is_one_text_block() {
        let p = pending_with("2", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": "hello"}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains(r#""text":"hello""#), "{text}");
    }

    #[test]
    fn unknown_content_blocks_become_text_that_names_them() {
        let p = pending_with("2", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "hologram", "data": 1}, {"type": "text", "text": "hi"}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("hologram"), "{text}");
        assert!(text.contains("\"hi\""), "{text}");
    }

    #[test]
    fn an_empty_result_object_is_an_empty_result() {
        let p = pending_with("3", Pending::CallTool);
        let m = message(decode(json!({"jsonrpc": "2.0", "id": 3, "result": {}}), &p));
        assert!(
            matches!(m, Some(ServerJsonRpcMessage::Response(_))),
            "{m:?}"
        );
    }

    fn unparsable(bytes: &[u8], p: &PendingMap) -> Decoded {
        let e = serde_json::from_slice::<Value>(bytes).unwrap_err();
        unparsable_line(bytes, &e, p)
    }

    #[test]
    fn an_invalid_json_answer_fails_its_request_at_once() {
        let p = pending_with("7", Pending::CallTool);
        let line = br#"{"jsonrpc":"2.0","result":{"content":[{"id":5}],"x":NaN},"id":7}"#;
        let m = message(unparsable(line, &p));
        assert!(matches!(m, Some(ServerJsonRpcMessage::Error(_))), "{m:?}");
        assert!(p.lock().unwrap().is_empty());
        let p: PendingMap = Arc::default();
        assert!(message(unparsable(br#"{"id":7,"x":NaN}"#, &p)).is_none());
    }

    #[test]
    fn the_top_level_id_is_found_wherever_it_is() {
        assert_eq!(
            top_level_id(br#"{"a":{"id":1},"id":"x\"y"}"#),
            Some(json!("x\"y"))
        );
        assert_eq!(top_level_id(br#"{"id" : 12 ,"b":NaN}"#), Some(json!(12)));
        assert_eq!(top_level_id(br#"{"b":[{"id":1}]}"#), None);
    }

    #[test]
    fn a_tool_list_too_deep_to_parse_is_read_with_its_deep_parts_cut() {
        let mut deep = "1".to_owned();
        for _ in 0..200 {
            deep = format!(r#"{{"x":{deep},"s":"[{{"}}"#);
        }
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":4,"result":{{"tools":[{{"name":"deep","inputSchema":{deep}}},{{"name":"ok"}}]}}}}"#
        );
        let p = pending_with("4", Pending::ListTools);
        let m = message(unparsable(line.as_bytes(), &p)).expect("a message");
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"ok\""), "{}", &text[..200]);
        assert!(cap_depth(b"[[[1]],[2]]", 2) == b"[[null],[2]]");
    }

    #[test]
    fn a_server_request_rmcp_cannot_read_is_refused_not_skipped() {
        let p: PendingMap = Arc::default();
        let d = decode(
            json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": "not an object"}),
            &p,
        );
        assert!(matches!(d, Decoded::Refuse(Value::String(ref id), _) if id == "s1"));
    }

    #[tokio::test]
    async fn an_endless_line_ends_the_connection_with_bounded_memory() {
        let (mut w, r) = tokio::io::duplex(1 << 16);
        let (_sink, _) = tokio::io::duplex(16);
        let (mut t, reason, _task) = line_transport("flood", r, _sink);
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
