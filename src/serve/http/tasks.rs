//! run_python as a task over Streamable HTTP: the same 2025-11-25 tasks as on stdio
//! ([`crate::serve::tasks`]), routed by an axum layer in front of rmcp's
//! `StreamableHttpService`.
//!
//! rmcp 3.11 parses every POST body into its own message types, and those are a later
//! draft's tasks (SEP-2663, see [`crate::mcp_tasks`]): a 2025-11-25 `tasks/get` would reach
//! its SEP-2663 handler, `tasks/result` and `tasks/list` do not exist there, its
//! `tools/call` parameters drop `task`, and its `ServerCapabilities` and `Tool` cannot carry
//! `tasks` or `execution`. So this layer, like the stdio transport's, sits before rmcp:
//! - a POST to the MCP path whose body is a task request (`tasks/*`, or `tools/call` with
//!   `task`) and that names a session (`Mcp-Session-Id`) is first sent on to rmcp as a
//!   `ping` with the same headers ([`as_ping`]), so rmcp's checks of a request hold for it
//!   (`Host`, `Origin`, the session, the protocol version header); when rmcp refuses the
//!   ping, its refusal is the answer. Then it is answered here, from that session's
//!   [`Tasks`], as one `application/json` JSON-RPC response (which the transport allows for
//!   any POSTed request). A task request without a session goes on to rmcp, which refuses
//!   it (`400`);
//! - the answers to `initialize` and `tools/list` (a JSON body or an SSE stream that ends
//!   with the answer) get the `tasks` capability and run_python's
//!   `execution.taskSupport: "optional"`;
//! - a JSON body that is no JSON-RPC message serve reads gets `400` with a JSON-RPC
//!   `-32700`, `-32600` or `-32602` error response ([`bad_request`]), where rmcp would answer
//!   `415`; so does a request whose id is in flight in its session ([`super::reused_ids`]);
//! - everything else goes to rmcp unchanged (the body is read, up to the body cap, and
//!   handed on whole).
//!
//! A session's [`Tasks`] are made when its `initialize` is answered: the service factory
//! hands the session's server to [`note_created`] through a task-local set around that
//! request. Task runs take the session's run slots and taint like its plain runs. When the
//! session ends (`DELETE`, idle expiry, shutdown), rmcp drops its server and every task run
//! of the session is cancelled ([`CodeModeServer::for_http_session`]); its tasks are
//! forgotten. Notifications of task runs (progress, `notifications/tasks/status`) go to
//! the session's standalone stream (`GET`), since the request that created the task has
//! been answered. The ping of each task request counts as activity for the session's idle
//! timer (`--session-idle`), so a client polling its task keeps its session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;

use super::MCP_PATH;
use super::reused_ids::{SessionIds, holding};
use crate::serve::CodeModeServer;
use crate::serve::tasks::{Tasks, is_task_message, patch_answer};
use crate::serve::unreadable;

/// Longest time an `initialize` or `tools/list` answer may take to arrive whole before it
/// is passed on unpatched.
const ANSWER_WAIT: Duration = Duration::from_secs(60);
/// Largest `initialize` or `tools/list` answer patched, in bytes.
const ANSWER_BYTES: usize = 64 * 1024 * 1024;

tokio::task_local! {
    /// Where the service factory leaves the server of the session an `initialize` opens.
    static CREATED: Arc<Mutex<Option<CodeModeServer>>>;
}

/// Called by the service factory with the server of a new session: inside an `initialize`
/// request routed by [`route`], that session's tasks are made from it.
pub(crate) fn note_created(server: &CodeModeServer) {
    let _ = CREATED.try_with(|slot| {
        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(server.detached());
    });
}

/// The tasks of every live session, by `Mcp-Session-Id`.
pub(crate) struct SessionTasks {
    manager: Arc<LocalSessionManager>,
    by_session: Mutex<HashMap<String, Tasks>>,
    max_body_bytes: usize,
    /// The ids of the requests in flight in each session.
    ids: Arc<SessionIds>,
}

impl SessionTasks {
    /// Tasks of the sessions `manager` holds; request bodies over `max_body_bytes` get `413`.
    pub(crate) fn new(manager: Arc<LocalSessionManager>, max_body_bytes: usize) -> Self {
        Self {
            manager,
            by_session: Mutex::default(),
            max_body_bytes,
            ids: Arc::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Tasks>> {
        self.by_session
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The tasks of session `id`, when rmcp still holds it and it has not ended.
    async fn of(&self, id: &str) -> Option<Tasks> {
        let alive = self
            .manager
            .has_session(&id.to_owned().into())
            .await
            .unwrap_or(false);
        let mut sessions = self.lock();
        sessions.retain(|_, tasks| !tasks.ended());
        if alive {
            sessions.get(id).cloned()
        } else {
            None
        }
    }

    /// Whether a request of session `id` is a task request answered here
    /// ([`Tasks::claims`]).
    fn claims(&self, id: &str, message: &Value) -> bool {
        is_task_message(message)
            && self
                .lock()
                .get(id)
                .is_none_or(|tasks| tasks.claims(message))
    }

    fn add(&self, id: String, server: &CodeModeServer) {
        let mut sessions = self.lock();
        sessions.retain(|_, tasks| !tasks.ended());
        sessions.insert(id, Tasks::new(server));
    }
}

/// The layer (see the module documentation).
pub(crate) async fn route(
    State(tasks): State<Arc<SessionTasks>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST || request.uri().path() != MCP_PATH {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, tasks.max_body_bytes).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "Payload Too Large: the body is over {} bytes\n",
                tasks.max_body_bytes
            ),
        )
            .into_response();
    };
    let message = match unreadable::parse(&bytes) {
        Ok(message) => Some(message),
        Err(refusal) if is_json(&parts.headers) => return bad_request(*refusal),
        Err(_) => None,
    };
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let method = message
        .as_ref()
        .and_then(|m| m.get("method"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut request = Request::from_parts(parts, Body::from(bytes.clone()));
    let claimed = matches!((&message, &session), (Some(m), Some(s)) if tasks.claims(s, m));
    if !claimed
        && let Some(refusal) = message
            .as_ref()
            .and_then(|message| unreadable::invalid(message, &bytes))
    {
        return bad_request(refusal);
    }
    let hold = match (&message, &session) {
        (Some(message), Some(session)) => match tasks.ids.hold(session, message) {
            Ok(hold) => hold,
            Err(refused) => return *refused,
        },
        _ => None,
    };
    if let Some(hold) = &hold {
        // rmcp hands these extensions to the request's handler, so the id stays held
        // while the request runs, even once the client closed its response.
        request.extensions_mut().insert(hold.clone());
    }
    let response = match (message, session, method.as_deref()) {
        (Some(message), Some(session), _) if claimed => {
            let checked = next.run(as_ping(&request)).await;
            if !checked.status().is_success() {
                return checked;
            }
            answer(&tasks, &session, &message).await
        }
        (Some(_), None, Some("initialize")) => {
            let created = Arc::new(Mutex::new(None));
            let response = CREATED.scope(created.clone(), next.run(request)).await;
            let server = created
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let id = response
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok());
            if let (Some(server), Some(id)) = (server, id) {
                tasks.add(id.to_owned(), &server);
            }
            patched(response).await
        }
        (Some(_), Some(_), Some("tools/list")) => patched(next.run(request).await).await,
        _ => next.run(request).await,
    };
    match hold {
        Some(hold) => holding(response, hold),
        None => response,
    }
}

/// Whether the request says its body is JSON (`Content-Type: application/json`, parameters
/// allowed); other media types are left to rmcp, which answers `415`.
fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// `400 Bad Request` with the JSON-RPC error response to a JSON body that is no JSON-RPC
/// message serve reads: `-32700 Parse error` for one serde_json cannot read, `-32600` or
/// `-32602` for a value of the wrong shape, carrying the body's id when it can be read
/// ([`crate::serve::unreadable`]); rmcp would answer `415`.
fn bad_request(refusal: unreadable::Refusal) -> Response {
    tracing::warn!(
        "a request body is no JSON-RPC message serve reads ({}); answered 400 with {}",
        refusal.why,
        refusal.answer.code()
    );
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        refusal.answer.line(),
    )
        .into_response()
}

/// A `ping` with the headers of `request` (a task request), for rmcp to check first: the
/// token was checked already, and rmcp checks the `Host` and `Origin` headers, the session
/// and the protocol version header as it does for any request, and counts it as the
/// session's activity. The headers that name the body's method or tool (`Mcp-Method`,
/// `Mcp-Name`, SEP-2243) are left out, since the body is another one.
fn as_ping(request: &Request) -> Request {
    static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = IDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let body = serde_json::json!({"jsonrpc": "2.0", "id": format!("mcp-code-mode-task-check-{n}"), "method": "ping"});
    let mut ping = Request::new(Body::from(body.to_string()));
    *ping.method_mut() = Method::POST;
    *ping.uri_mut() = request.uri().clone();
    for (name, value) in request.headers() {
        let name_text = name.as_str();
        if name_text != "content-length" && name_text != "mcp-method" && name_text != "mcp-name" {
            ping.headers_mut().append(name.clone(), value.clone());
        }
    }
    ping
}

/// Answer a task request of session `session` here.
async fn answer(tasks: &SessionTasks, session: &str, message: &Value) -> Response {
    let Some(tasks) = tasks.of(session).await else {
        return (StatusCode::NOT_FOUND, "Not Found: Session not found\n").into_response();
    };
    let (reply, replied) = tokio::sync::oneshot::channel();
    tasks.handle(message, move |answer| {
        let _ = reply.send(answer);
    });
    match replied.await {
        Ok(answer) => (
            [(header::CONTENT_TYPE, "application/json")],
            answer.to_string(),
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "the task layer ended\n").into_response(),
    }
}

/// rmcp's answer to `initialize` or `tools/list` with run_python's task support added
/// ([`patch_answer`]), read whole first: a JSON body, or an SSE stream (which ends after
/// the answer). An error status, or a body that does not arrive whole within
/// [`ANSWER_WAIT`], is passed on as it is (or as far as it came).
async fn patched(response: Response) -> Response {
    if !response.status().is_success() {
        return response;
    }
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let (mut parts, body) = response.into_parts();
    let bytes = match tokio::time::timeout(ANSWER_WAIT, axum::body::to_bytes(body, ANSWER_BYTES))
        .await
    {
        Ok(Ok(bytes)) => bytes,
        _ => {
            tracing::warn!("an initialize or tools/list answer did not arrive whole; not patched");
            return (StatusCode::BAD_GATEWAY, "the answer did not arrive whole\n").into_response();
        }
    };
    let out = if sse {
        patch_events(&bytes)
    } else {
        patch_json(&bytes).unwrap_or_else(|| bytes.to_vec())
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(Bytes::from(out)))
}

fn patch_json(data: &[u8]) -> Option<Vec<u8>> {
    let mut message = serde_json::from_slice::<Value>(data).ok()?;
    patch_answer(&mut message).then(|| serde_json::to_vec(&message).ok())?
}

/// An SSE stream whose events' data, when it is an answer [`patch_answer`] changes, is
/// written again as one `data:` line; every other line is kept as it is.
fn patch_events(stream: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stream);
    let mut out = String::with_capacity(text.len() + 128);
    for event in text.split_inclusive("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        let patched = (!data.is_empty())
            .then(|| patch_json(data.join("\n").as_bytes()))
            .flatten()
            .and_then(|p| String::from_utf8(p).ok());
        let Some(patched) = patched else {
            out.push_str(event);
            continue;
        };
        let mut wrote = false;
        for line in event.split_inclusive('\n') {
            if line.starts_with("data:") {
                if !wrote {
                    out.push_str("data: ");
                    out.push_str(&patched);
                    out.push('\n');
                    wrote = true;
                }
            } else {
                out.push_str(line);
            }
        }
    }
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_sse_answer_to_initialize_gets_the_tasks_capability_and_other_events_stay() {
        let stream = b"id: 0\nretry: 3000\ndata: \n\n\
id: 1\ndata: {\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"serverInfo\":{\"name\":\"x\",\"version\":\"1\"}}}\n\n";
        let out = String::from_utf8(patch_events(stream)).unwrap();
        assert!(
            out.starts_with("id: 0\nretry: 3000\ndata: \n\nid: 1\ndata: {"),
            "{out}"
        );
        let data = out.lines().nth(5).unwrap().strip_prefix("data: ").unwrap();
        let message: Value = serde_json::from_str(data).unwrap();
        assert_eq!(
            message["result"]["capabilities"]["tasks"]["requests"]["tools"]["call"],
            serde_json::json!({})
        );
        assert!(out.ends_with("}\n\n"), "{out}");
    }

    #[test]
    fn a_json_answer_to_tools_list_marks_run_python_and_others_pass() {
        let list = br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"run_python","inputSchema":{}}]}}"#;
        let out: Value = serde_json::from_slice(&patch_json(list).unwrap()).unwrap();
        assert_eq!(
            out["result"]["tools"][0]["execution"]["taskSupport"],
            "optional"
        );
        assert!(patch_json(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#).is_none());
    }
}
