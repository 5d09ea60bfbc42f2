//! The HTTP client of remote servers: rmcp's reqwest client for Streamable HTTP, with every
//! message the server sends repaired the way a local server's line is (`repair.rs`,
//! `lenient.rs`) before rmcp's session reads it. A string hint, a `priority` word, a
//! nameless resource link or a text that is a number then cost no tool, server or text over
//! HTTP either (README "What wrapped servers send").
//!
//! rmcp's client reads a JSON body or an SSE event into `ServerJsonRpcMessage`. A result of
//! a shape its typed model refuses is still read, as an untyped result that keeps the whole
//! value (rmcp's typed results refuse what they do not know so that they never shadow it).
//! So this client records what each outgoing request is ([`expect_answer`]), turns each
//! answer back into JSON and hands it to the same repair as a stdio line; an SSE event's
//! `data` is repaired the same way, and one that is not valid JSON fails the request it
//! answers at once. Everything else is rmcp's: headers, sessions, status codes, redirects
//! (same origin, 307/308 only, as rmcp's own client), and the body and event size bounds
//! ([`super::remote::MAX_RESPONSE_BYTES`]), which hold before anything is parsed.
//!
//! A call's request is marked sent (its [`WriteTicket`]) as its POST starts; one whose call
//! already ended, recorded as withdrawn, is not POSTed.

use std::collections::HashMap;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, GetExtensions, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use serde_json::Value;
use sse_stream::Sse;

use super::raw_http::{RawHttp, SessionEndpoint};
use super::repair::{Decoded, PendingMap, decode, expect_answer, unparsable_line};
use super::ticket::WriteTicket;

/// Redirects followed for one request at most.
const MAX_REDIRECTS: usize = 10;

/// rmcp's reqwest client, with what the server sends repaired before rmcp reads it.
#[derive(Clone)]
pub(super) struct LenientHttpClient {
    http: reqwest::Client,
    /// What each request in flight is, by id, so its answer can be repaired.
    pending: PendingMap,
    /// Where rmcp's session POSTs, for the requests sent beside it.
    endpoint: SessionEndpoint,
}

type Events = BoxStream<'static, Result<Sse, SseError>>;
type HttpResult<T> = Result<T, StreamableHttpError<reqwest::Error>>;

impl LenientHttpClient {
    /// A client with rmcp's connection rules: no idle connections kept, and only
    /// same-origin 307/308 redirects followed (they keep the method and body; any other
    /// would turn the POST into a GET or replay the headers to another host).
    ///
    /// # Errors
    /// reqwest's, when its TLS backend cannot be set up.
    pub(super) fn new() -> Result<Self, reqwest::Error> {
        let redirects = reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .redirect(redirects)
            .build()?;
        Ok(Self {
            http,
            pending: PendingMap::default(),
            endpoint: SessionEndpoint::default(),
        })
    }

    /// Requests sent on the session of this client beside rmcp's, with the entry's
    /// `headers` (`raw_http.rs`).
    pub(super) fn raw(&self, headers: HashMap<HeaderName, HeaderValue>) -> RawHttp {
        RawHttp::new(self.http.clone(), self.endpoint.clone(), headers)
    }

    fn repaired(&self, response: StreamableHttpPostResponse) -> StreamableHttpPostResponse {
        match response {
            StreamableHttpPostResponse::Json(message, session) => {
                let refuse = self.refuser();
                StreamableHttpPostResponse::Json(
                    repair_message(message, &self.pending, &refuse),
                    session,
                )
            }
            StreamableHttpPostResponse::Sse(events, session) => {
                StreamableHttpPostResponse::Sse(self.repaired_events(events), session)
            }
            other => other,
        }
    }

    fn repaired_events(&self, events: Events) -> Events {
        let pending = self.pending.clone();
        let refuse = self.refuser();
        events
            .map(move |event| event.map(|sse| repair_event(sse, &pending, &refuse)))
            .boxed()
    }

    /// What answers a request of the server that rmcp cannot read (so rmcp would never
    /// answer it, and the server would wait for the answer until its own timeout): an error
    /// response POSTed on the session, as the stdio transport writes one.
    fn refuser(&self) -> impl Fn(Value, &str) + Send + Sync + 'static {
        let (http, endpoint) = (self.http.clone(), self.endpoint.clone());
        move |id, why| {
            tracing::warn!("refused a request of a remote server: {why}");
            endpoint.post_answer(&http, refusal(id, why));
        }
    }
}

/// The error response to a request of the server that rmcp cannot read (-32602, invalid
/// params, as the stdio transport answers it).
fn refusal(id: Value, why: &str) -> Value {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": why}})
}

/// A message rmcp has read, repaired as a stdio line would be; unchanged when the repair
/// cannot turn it into a message (a request that cannot be read is answered by `refuse`).
fn repair_message(
    message: ServerJsonRpcMessage,
    pending: &PendingMap,
    refuse: &impl Fn(Value, &str),
) -> ServerJsonRpcMessage {
    let Ok(value) = serde_json::to_value(&message) else {
        return message;
    };
    match decode(value, pending) {
        Decoded::Message(repaired) => *repaired,
        Decoded::Refuse(id, why) => {
            refuse(id, &why);
            message
        }
        Decoded::Junk => message,
    }
}

/// An SSE event whose `data` is a JSON-RPC message, with that message repaired; data that
/// is not JSON but names a request in flight becomes an error answer to it, and a request
/// of the server that cannot be read is answered by `refuse` (the event is left as it was:
/// rmcp skips it).
fn repair_event(mut sse: Sse, pending: &PendingMap, refuse: &impl Fn(Value, &str)) -> Sse {
    let Some(data) = sse.data.as_deref().filter(|d| !d.trim().is_empty()) else {
        return sse;
    };
    let decoded = match crate::exact_json::from_slice(data.as_bytes()) {
        Ok(value) => decode(value, pending),
        Err(e) => unparsable_line(data.trim().as_bytes(), &e, pending),
    };
    match decoded {
        Decoded::Message(message) => {
            if let Ok(text) = serde_json::to_string(&message) {
                sse.data = Some(text);
            }
        }
        Decoded::Refuse(id, why) => refuse(id, &why),
        Decoded::Junk => {}
    }
    sse
}

impl StreamableHttpClient for LenientHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<StreamableHttpPostResponse> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> HttpResult<StreamableHttpPostResponse> {
        if let ClientJsonRpcMessage::Request(request) = &message
            && let Some(ticket) = request.request.extensions().get::<WriteTicket>()
            && !ticket.mark_written()
        {
            // Its call is over and recorded as withdrawn: it must not reach the server.
            return Err(StreamableHttpError::Io(std::io::Error::other(
                "the call ended before its request was sent",
            )));
        }
        if let Ok(value) = serde_json::to_value(&message) {
            expect_answer(&self.pending, &value);
        }
        self.endpoint.record(
            &uri,
            session_id.as_ref(),
            auth_header.as_ref(),
            &custom_headers,
        );
        let response = self
            .http
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(self.repaired(response))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<()> {
        self.http
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> HttpResult<Events> {
        let events = self
            .http
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await?;
        Ok(self.repaired_events(events))
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> HttpResult<Events> {
        let events = self
            .http
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await?;
        Ok(self.repaired_events(events))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pending_call(id: u64, method: &str) -> PendingMap {
        let pending = PendingMap::default();
        expect_answer(
            &pending,
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}}),
        );
        pending
    }

    #[test]
    fn an_answer_rmcp_read_as_untyped_is_repaired_into_its_type() {
        let pending = pending_call(3, "tools/list");
        let body = json!({"jsonrpc": "2.0", "id": 3, "result": {"tools": [
            {"name": "t", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "true"}}]}});
        let read: ServerJsonRpcMessage = serde_json::from_value(body).unwrap();
        let text = serde_json::to_string(&repair_message(read, &pending, &|_, _| {})).unwrap();
        assert!(text.contains(r#""readOnlyHint":true"#), "{text}");
        assert!(
            pending.lock().unwrap().is_empty(),
            "the answer is no longer awaited"
        );
    }

    #[test]
    fn an_sse_event_is_repaired_and_one_that_is_not_json_fails_its_request() {
        let event = |data: &str| Sse {
            data: Some(data.into()),
            ..Sse::default()
        };
        let pending = pending_call(4, "tools/call");
        let sse = event(
            r#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"resource_link","uri":"file:///a"}]}}"#,
        );
        let data = repair_event(sse, &pending, &|_, _| {}).data.unwrap();
        assert!(data.contains(r#""name":"file:///a""#), "{data}");
        let pending = pending_call(5, "tools/call");
        let sse = event(r#"{"jsonrpc":"2.0","id":5,"result":{"x":NaN}}"#);
        let data = repair_event(sse, &pending, &|_, _| {}).data.unwrap();
        assert!(data.contains(r#""error""#), "{data}");
    }

    #[test]
    fn a_request_of_the_server_rmcp_cannot_read_is_refused_with_its_id() {
        let refused = std::sync::Mutex::new(Vec::new());
        let refuse = |id: Value, why: &str| refused.lock().unwrap().push((id, why.to_owned()));
        let sse = Sse {
            data: Some(
                r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":"x"}"#
                    .into(),
            ),
            ..Sse::default()
        };
        repair_event(sse, &PendingMap::default(), &refuse);
        let refused = refused.into_inner().unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].0, json!("s1"));
        assert_eq!(refusal(json!("s1"), "bad")["error"]["code"], -32602);
    }
}
