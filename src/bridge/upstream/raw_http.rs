//! JSON-RPC requests sent beside rmcp's on a remote server's Streamable HTTP session (spec
//! "Transports § Streamable HTTP"), for what rmcp 3.11 cannot send or read: the 2025-11-25
//! task requests (`tasks.rs`) and the `tools/list` pages whose `execution.taskSupport`
//! rmcp's `Tool` drops.
//!
//! Each request is one POST to the session's endpoint with what rmcp's own POSTs carry: the
//! session id (`Mcp-Session-Id`), the negotiated `MCP-Protocol-Version`, the bearer token and
//! the entry's headers, all recorded from rmcp's latest POST ([`SessionEndpoint::record`]).
//! The answer is read from the POST's response as JSON text, never through rmcp's typed
//! model (which would drop the fields these requests are for): an `application/json` body
//! (one message, or a batch), or a `text/event-stream` whose events are read until the one
//! that answers the request (notifications before it are skipped). The body, or the whole
//! stream, is read up to [`MAX_RAW_RESPONSE_BYTES`]; more fails the request.
//!
//! A failed POST, an HTTP error status or a response without the answer come back as an
//! error answer naming the failure, so the call that needed it fails with that reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use http::{HeaderName, HeaderValue};
use serde_json::Value;

use super::remote::MAX_RESPONSE_BYTES;

/// Most bytes read from one response: its JSON body, or its event stream up to the answer
/// (the answer itself may be as large as one of rmcp's, plus notifications before it).
pub(super) const MAX_RAW_RESPONSE_BYTES: usize = 2 * MAX_RESPONSE_BYTES;
/// Most bytes of an HTTP error body read to find a JSON-RPC error in it.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Where and how rmcp's session POSTs: recorded from each of its POSTs.
#[derive(Clone, Default)]
pub(super) struct SessionEndpoint(Arc<Mutex<Option<Endpoint>>>);

#[derive(Clone)]
struct Endpoint {
    uri: Arc<str>,
    session_id: Option<Arc<str>>,
    auth_header: Option<String>,
    protocol_version: Option<HeaderValue>,
    /// Every header rmcp added (the entry's and the protocol version).
    headers: HashMap<HeaderName, HeaderValue>,
}

impl SessionEndpoint {
    /// Record the endpoint, session, token and protocol version of one of rmcp's POSTs.
    pub(super) fn record(
        &self,
        uri: &Arc<str>,
        session_id: Option<&Arc<str>>,
        auth_header: Option<&String>,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) {
        let endpoint = Endpoint {
            uri: uri.clone(),
            session_id: session_id.cloned(),
            auth_header: auth_header.cloned(),
            protocol_version: headers.get("mcp-protocol-version").cloned(),
            headers: headers.clone(),
        };
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(endpoint);
        }
    }

    fn get(&self) -> Option<Endpoint> {
        self.0.lock().ok().and_then(|slot| slot.clone())
    }

    /// POST `answer` (a JSON-RPC response to a request of the server) on the session, as
    /// rmcp POSTs its own answers, in the background: the stream that carried the request
    /// is not held up, and the server's reply (202 Accepted) is read and dropped. Nothing is
    /// sent before rmcp's first POST opened the session.
    pub(super) fn post_answer(&self, http: &reqwest::Client, answer: Value) {
        let Some(endpoint) = self.get() else {
            return;
        };
        let mut request = http
            .post(endpoint.uri.as_ref())
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in &endpoint.headers {
            request = request.header(name, value);
        }
        if let Some(session) = &endpoint.session_id {
            request = request.header("mcp-session-id", session.as_ref());
        }
        if let Some(token) = endpoint.auth_header {
            request = request.bearer_auth(token);
        }
        let request = request.body(answer.to_string());
        tokio::spawn(async move {
            match request.send().await {
                Ok(response) if !response.status().is_success() => tracing::warn!(
                    "the server did not take our answer to its request: HTTP {}",
                    response.status()
                ),
                Ok(response) => drop(read_bounded(response, MAX_ERROR_BODY_BYTES).await),
                Err(e) => tracing::warn!("failed to answer a request of the server: {e}"),
            }
        });
    }
}

/// Sends requests on a remote server's session beside rmcp (see the module docs).
#[derive(Clone)]
pub(super) struct RawHttp {
    http: reqwest::Client,
    endpoint: SessionEndpoint,
    /// The entry's headers (sent with every request, as rmcp sends them).
    headers: HashMap<HeaderName, HeaderValue>,
}

impl RawHttp {
    pub(super) fn new(
        http: reqwest::Client,
        endpoint: SessionEndpoint,
        headers: HashMap<HeaderName, HeaderValue>,
    ) -> Self {
        Self {
            http,
            endpoint,
            headers,
        }
    }

    /// POST the request `message` (whose id is `id`) and return the JSON-RPC response that
    /// answers it; an error response naming the failure when there is none.
    pub(super) async fn request(&self, id: &str, message: &Value) -> Value {
        match self.exchange(id, message).await {
            Ok(answer) => answer,
            Err(why) => serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32603, "message": why},
            }),
        }
    }

    async fn exchange(&self, id: &str, message: &Value) -> Result<Value, String> {
        let endpoint = self
            .endpoint
            .get()
            .ok_or("the server's session is not open")?;
        let mut request = self
            .http
            .post(endpoint.uri.as_ref())
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in &self.headers {
            request = request.header(name, value);
        }
        if let Some(version) = endpoint.protocol_version {
            request = request.header("mcp-protocol-version", version);
        }
        if let Some(session) = &endpoint.session_id {
            request = request.header("mcp-session-id", session.as_ref());
        }
        if let Some(token) = endpoint.auth_header {
            request = request.bearer_auth(token);
        }
        let body = serde_json::to_vec(message).map_err(|e| e.to_string())?;
        let response = request
            .body(body)
            .send()
            .await
            // reqwest's text names the whole URL (its query may hold a key).
            .map_err(|e| format!("the request to the server failed: {}", e.without_url()))?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if !status.is_success() {
            // A JSON-RPC error may come with an error status; anything else is the status.
            let body = read_bounded(response, MAX_ERROR_BODY_BYTES).await.ok();
            return body
                .and_then(|b| crate::exact_json::from_slice(&b).ok())
                .and_then(|v| answer_in(v, id))
                .ok_or_else(|| format!("the server answered HTTP {status}"));
        }
        if content_type.starts_with("text/event-stream") {
            return answer_in_events(response, id).await;
        }
        if content_type.starts_with("application/json") {
            let body = read_bounded(response, MAX_RAW_RESPONSE_BYTES).await?;
            let value = crate::exact_json::from_slice(&body)
                .map_err(|e| format!("the server's answer is not JSON: {e}"))?;
            return answer_in(value, id)
                .ok_or_else(|| "the server's answer has no response to the request".to_owned());
        }
        Err(format!(
            "the server answered HTTP {status} with content type {content_type:?}, not JSON or an event stream"
        ))
    }
}

/// The response to request `id` in `value`: the message itself, or one of a batch.
fn answer_in(value: Value, id: &str) -> Option<Value> {
    let answers = |m: &Value| {
        m.get("id").and_then(Value::as_str) == Some(id)
            && m.get("method").is_none()
            && (m.get("result").is_some() || m.get("error").is_some())
    };
    match value {
        Value::Array(batch) => batch.into_iter().find(answers),
        message => answers(&message).then_some(message),
    }
}

/// Read a whole body, failing past `limit` bytes.
async fn read_bounded(mut response: reqwest::Response, limit: usize) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading the server's answer failed: {}", e.without_url()))?
    {
        if body.len() + chunk.len() > limit {
            return Err(format!("the server's answer is over {} MiB", limit >> 20));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Read the events of an SSE response until the one that answers request `id`.
async fn answer_in_events(response: reqwest::Response, id: &str) -> Result<Value, String> {
    let mut seen = 0usize;
    let bytes = response.bytes_stream().map(move |chunk| {
        let chunk = chunk.map_err(std::io::Error::other)?;
        seen += chunk.len();
        if seen > MAX_RAW_RESPONSE_BYTES {
            return Err(std::io::Error::other("over the size bound"));
        }
        Ok(chunk)
    });
    let mut events = sse_stream::SseStream::from_bytes_stream(bytes);
    while let Some(event) = events.next().await {
        let event = event.map_err(|e| {
            format!(
                "reading the server's event stream failed ({e}; at most {} MiB is read)",
                MAX_RAW_RESPONSE_BYTES >> 20
            )
        })?;
        let Some(data) = event.data.as_deref().filter(|d| !d.trim().is_empty()) else {
            continue;
        };
        if let Some(answer) = crate::exact_json::from_slice(data.as_bytes())
            .ok()
            .and_then(|v| answer_in(v, id))
        {
            return Ok(answer);
        }
    }
    Err("the server's event stream ended before the answer".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_response_to_the_request_is_its_answer() {
        let answer = json!({"jsonrpc": "2.0", "id": "r1", "result": {"x": 1}});
        assert_eq!(answer_in(answer.clone(), "r1"), Some(answer.clone()));
        assert_eq!(answer_in(answer.clone(), "r2"), None);
        let request = json!({"jsonrpc": "2.0", "id": "r1", "method": "ping"});
        assert_eq!(answer_in(request.clone(), "r1"), None);
        let batch =
            json!([request, {"jsonrpc": "2.0", "method": "notifications/progress"}, answer]);
        assert_eq!(answer_in(batch, "r1"), Some(answer));
    }
}
