//! A plain `tools/call` to a local (stdio) server, written straight onto the server's write
//! queue, its answer taken out of the reader by id: the call path of every ordinary tool call
//! skips rmcp's service loop.
//!
//! rmcp sends a request by handing it over a channel to the task that runs its service,
//! which spawns a task per message to await the write and hands the answer back over
//! another channel; with its typed serialization that was about a fifth of `serve`'s CPU
//! per call. Here the call serializes its own request line (the arguments are borrowed, not
//! copied), queues it on the same bounded [`WriteQueue`] rmcp's messages go through, and
//! waits on a oneshot channel that the transport's reader fills. The answer is read exactly
//! as rmcp's answers are: the reader decodes and repairs it (`repair::decode`, with the
//! request recorded in the same pending map, so a line that is not valid JSON still fails
//! the call at once), and [`outcome_of`] maps what it reads the way rmcp's `call_tool` does.
//!
//! What stays the same for the server: a request still queued when the call is given up (a
//! timeout, a cancelled run, the deadline) is withdrawn unwritten; one already written gets
//! `notifications/cancelled` with rmcp's reason. Server requests, notifications and
//! `list_changed` still reach rmcp. The ids are numbers from [`FIRST_ID`] up, above every id
//! rmcp's 32-bit counter gives, and below 2^53, so servers that read ids as JavaScript
//! numbers keep them exact.
//!
//! Only sessions whose protocol has `initialize` use it: under a protocol without one, rmcp
//! puts the client's metadata in every request's `_meta`, which a call written here would lack.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use rmcp::model::{CallToolResult, JsonRpcMessage, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::Serialize;
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use super::CallOutcome;
use super::repair::{PendingMap, expect_request};
use super::ticket::WriteTicket;
use super::write_queue::{Line, WriteQueue};

/// The first id of a raw call: rmcp numbers its requests with a 32-bit counter from 0.
pub(super) const FIRST_ID: i64 = 1 << 32;
/// The reason a given-up call's `notifications/cancelled` carries (rmcp's own).
const ABANDONED: &str = "request abandoned by the caller";

/// The raw calls of one connection; clones share them.
#[derive(Clone)]
pub(super) struct RawCalls(Arc<Inner>);

struct Inner {
    queue: WriteQueue,
    /// What each request in flight was, shared with the reader (repair.rs).
    pending: PendingMap,
    waiting: Mutex<HashMap<i64, oneshot::Sender<ServerJsonRpcMessage>>>,
    next: AtomicI64,
}

/// A `tools/call` request line, serialized from borrowed parts.
#[derive(Serialize)]
struct Request<'a> {
    jsonrpc: &'static str,
    id: i64,
    method: &'static str,
    params: Params<'a>,
}

#[derive(Serialize)]
struct Params<'a> {
    name: &'a str,
    arguments: &'a Map<String, Value>,
}

impl RawCalls {
    /// Calls written on `queue`, their answers read against `pending`.
    pub(super) fn new(queue: WriteQueue, pending: PendingMap) -> Self {
        Self(Arc::new(Inner {
            queue,
            pending,
            waiting: Mutex::default(),
            next: AtomicI64::new(FIRST_ID),
        }))
    }

    /// `message` back unless it answers a raw call; an answer to one is handed to its
    /// waiter, or dropped when the call was given up (it is ours all the same).
    pub(super) fn take(&self, message: ServerJsonRpcMessage) -> Option<ServerJsonRpcMessage> {
        let id = match &message {
            JsonRpcMessage::Response(r) => &r.id,
            JsonRpcMessage::Error(e) => match &e.id {
                Some(id) => id,
                None => return Some(message),
            },
            _ => return Some(message),
        };
        let RequestId::Number(n) = id else {
            return Some(message);
        };
        if *n < FIRST_ID {
            return Some(message);
        }
        let waiter = self.lock().remove(n);
        if let Some(waiter) = waiter {
            let _ = waiter.send(message);
        }
        None
    }

    /// The connection ended: every call waiting fails.
    pub(super) fn close(&self) {
        self.lock().clear();
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<i64, oneshot::Sender<ServerJsonRpcMessage>>> {
        self.0.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Call `tool` with `args` and wait for the answer. The caller bounds the time; dropping
    /// this future gives the call up (see the module docs). `Broken` carries no text: the
    /// caller explains it from how the connection ended.
    ///
    /// `ticket`, when given, goes with the queued line: the writer marks it as it takes the
    /// line, and skips the line once the call's audit record settled it ([`WriteTicket`]).
    pub(super) async fn call(
        &self,
        tool: &str,
        args: &Map<String, Value>,
        ticket: Option<&WriteTicket>,
    ) -> CallOutcome {
        let id = self.0.next.fetch_add(1, Ordering::SeqCst);
        let request = Request {
            jsonrpc: "2.0",
            id,
            method: "tools/call",
            params: Params {
                name: tool,
                arguments: args,
            },
        };
        let Ok(mut line) = serde_json::to_vec(&request) else {
            return CallOutcome::Broken(String::new());
        };
        line.push(b'\n');
        let request_id = RequestId::Number(id);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id, tx);
        expect_request(&self.0.pending, &request_id, "tools/call");
        let mut given_up = GivenUp {
            calls: self,
            id: request_id.clone(),
            armed: true,
        };
        // Withdrawn (or cancelled) by `given_up` alone, which knows whether it was written.
        let kind = match ticket {
            Some(ticket) => Line::Call(request_id, ticket.clone()),
            None => Line::Request(Some(request_id)),
        };
        let sent = self.0.queue.send(line, kind).kept();
        if sent.await.is_err() {
            // The connection stopped (a failed write, a queue past its bound): nothing
            // reaches the server any more.
            given_up.forget();
            return CallOutcome::Broken(String::new());
        }
        let answer = rx.await;
        given_up.armed = false;
        match answer {
            Ok(message) => outcome_of(message),
            // The reader went: the connection ended.
            Err(_) => CallOutcome::Broken(String::new()),
        }
    }
}

/// Gives a call up when dropped armed: its waiter and pending record go, and its request is
/// withdrawn if still queued, else the server is sent `notifications/cancelled` for it.
struct GivenUp<'a> {
    calls: &'a RawCalls,
    id: RequestId,
    armed: bool,
}

impl GivenUp<'_> {
    /// Forget the call without telling the server.
    fn forget(&mut self) {
        self.armed = false;
        self.drop_records();
    }

    fn drop_records(&self) {
        if let RequestId::Number(n) = &self.id {
            self.calls.lock().remove(n);
        }
        if let (RequestId::Number(n), Ok(mut pending)) = (&self.id, self.calls.0.pending.lock()) {
            // The key `expect_request` recorded it under.
            pending.remove(&n.to_string());
        }
    }
}

impl Drop for GivenUp<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.drop_records();
        let queue = &self.calls.0.queue;
        if queue.withdraw_request(&self.id) {
            tracing::debug!(id = %self.id, "withdrew a call never written to the server");
            return;
        }
        let cancel = serde_json::json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": self.id, "reason": ABANDONED},
        });
        let mut line = cancel.to_string().into_bytes();
        line.push(b'\n');
        // Queued, not awaited: nothing can wait in a drop.
        queue.send(line, Line::Other).detach();
    }
}

/// What a call's answer (decoded and repaired by the reader) comes to, as rmcp's
/// `call_tool` reads it: a tool result, a result that holds no content but its metadata
/// (an empty one, a task acknowledgement, one with only `_meta`), or a JSON-RPC error;
/// any other result (`null`, an array, another kind of result) is not the answer asked
/// for: [`CallOutcome::NotAToolResult`], since the connection itself is fine.
pub(super) fn outcome_of(message: ServerJsonRpcMessage) -> CallOutcome {
    match message {
        JsonRpcMessage::Response(response) => match response.result {
            ServerResult::CallToolResult(result) => CallOutcome::Result(result),
            other => {
                let what = match &other {
                    ServerResult::CustomResult(custom) => Some(json_kind(&custom.0)),
                    _ => None,
                };
                contentless(other).map_or_else(|| not_a_tool_result(what), CallOutcome::Result)
            }
        },
        JsonRpcMessage::Error(error) => CallOutcome::Rejected(error.error.message.to_string()),
        _ => CallOutcome::Broken(String::new()),
    }
}

/// What a call through rmcp's `call_tool` that failed comes to: the server's JSON-RPC error,
/// an answer that is no tool result (rmcp's `UnexpectedResponse`, as [`outcome_of`] reads
/// it), or else a broken connection (the caller explains it).
pub(super) fn outcome_of_error(error: rmcp::ServiceError) -> CallOutcome {
    match error {
        rmcp::ServiceError::McpError(e) => CallOutcome::Rejected(e.message.to_string()),
        rmcp::ServiceError::UnexpectedResponse => not_a_tool_result(None),
        _ => CallOutcome::Broken(String::new()),
    }
}

/// [`CallOutcome::NotAToolResult`] for an answer whose `result` was `what` (a JSON type,
/// when known).
fn not_a_tool_result(what: Option<&str>) -> CallOutcome {
    let said = "the server's answer to the call is not a tool result";
    CallOutcome::NotAToolResult(match what {
        Some(what) => format!("{said} (its result is {what})"),
        None => said.to_owned(),
    })
}

/// `value`'s JSON type, as [`not_a_tool_result`] names it: an object here is one of
/// another shape than a tool result.
fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Object(_) => "an object of another shape",
        other => super::lenient::kind(other),
    }
}

/// A result with no content, read as an empty tool result with its `resultType` and
/// `_meta`, as rmcp reads it.
fn contentless(result: ServerResult) -> Option<CallToolResult> {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct MetaOnly {
        #[serde(rename = "_meta")]
        meta: rmcp::model::MetaObject,
    }
    let (result_type, meta) = match result {
        ServerResult::EmptyResult(_) => (None, None),
        ServerResult::TaskAckResult(ack) => (Some(ack.result_type), ack.meta),
        ServerResult::CustomResult(custom) => {
            let MetaOnly { meta } = crate::exact_json::typed(custom.0).ok()?;
            (None, Some(meta))
        }
        _ => return None,
    };
    let mut empty = CallToolResult::default();
    empty.result_type = result_type;
    empty.meta = meta;
    Some(empty)
}

#[cfg(test)]
#[path = "raw_call_tests.rs"]
mod tests;
