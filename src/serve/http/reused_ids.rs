//! `serve --http`: a request whose id is already in use by a request in flight in the same
//! session is refused at once (`400` with a JSON-RPC `-32600`) and never runs, as on stdio:
//! the rule is [`crate::serve::ids_in_use`]'s. Each session has its own ids.
//!
//! rmcp 3.11 keeps one entry per request id in a session: the POST whose response stream
//! gets the answer, and the cancellation token a `notifications/cancelled` reaches.
//!
//! A request is in flight from its POST until both of these are over: its response (the
//! answer went out, or the client closed that response before it came, which does not end
//! the request: the answer can still be fetched by resuming the stream) and rmcp's handling
//! of it. The second is followed by an [`IdHold`] in the request's extensions: rmcp hands
//! the HTTP request's parts to the request's handler (its `RequestContext` extensions) and
//! drops them when the handler returns. A `notifications/cancelled` ends both.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use crate::serve::ids_in_use;

/// The ids of the requests in flight, by session (`Mcp-Session-Id`); a session with none
/// has no entry.
#[derive(Default)]
pub(crate) struct SessionIds(Mutex<HashMap<String, HashSet<String>>>);

/// One request's id held in flight; the id is free again once every clone is dropped.
#[derive(Clone)]
pub(crate) struct IdHold {
    _held: Arc<Held>,
}

struct Held {
    ids: Arc<SessionIds>,
    session: String,
    key: String,
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut sessions = self.ids.lock();
        if let Some(ids) = sessions.get_mut(&self.session) {
            ids.remove(&self.key);
            if ids.is_empty() {
                sessions.remove(&self.session);
            }
        }
    }
}

impl SessionIds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashSet<String>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hold the id of `message`, a POSTed message of session `session`, while it is in
    /// flight. `Ok(None)`: no request (a notification, an answer), or an id rmcp cannot
    /// hold (refused as an invalid request). `Err`: the `400` answer refusing a request
    /// whose id is in flight in the session already (boxed: it is far larger than a hold).
    pub(crate) fn hold(
        self: &Arc<Self>,
        session: &str,
        message: &Value,
    ) -> Result<Option<IdHold>, Box<Response>> {
        let admitted = ids_in_use::admit(message, |key| {
            !self
                .lock()
                .entry(session.to_owned())
                .or_default()
                .insert(key.to_owned())
        });
        let key = match admitted {
            Ok(Some(key)) => key,
            Ok(None) => return Ok(None),
            Err(answer) => {
                tracing::warn!(
                    "a client request reuses the id {} of a request in flight in its session; answered 400 with -32600",
                    answer["id"]
                );
                return Err(Box::new(
                    (
                        StatusCode::BAD_REQUEST,
                        [(header::CONTENT_TYPE, "application/json")],
                        answer.to_string(),
                    )
                        .into_response(),
                ));
            }
        };
        Ok(Some(IdHold {
            _held: Arc::new(Held {
                ids: self.clone(),
                session: session.to_owned(),
                key,
            }),
        }))
    }
}

/// `response`, whose body keeps `hold` until it has been sent or is dropped (the client
/// closed the connection).
pub(crate) fn holding(response: Response, hold: IdHold) -> Response {
    let (parts, body) = response.into_parts();
    let body = body.into_data_stream().map(move |chunk| {
        let _ = &hold;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(body))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {}})
    }

    #[test]
    fn an_id_is_refused_while_held_in_its_session_and_free_once_every_hold_is_dropped() {
        let ids = Arc::new(SessionIds::default());
        let first = ids.hold("a", &request(json!(6))).ok().flatten().unwrap();
        let refused = ids.hold("a", &request(json!(6.0))).err().expect("refused");
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST);
        // Another session, or the same digits as a string, is another id.
        assert!(ids.hold("b", &request(json!(6))).unwrap().is_some());
        let text = ids.hold("a", &request(json!("6"))).unwrap();
        assert!(text.is_some());
        // A notification and an answer hold nothing.
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}});
        assert!(ids.hold("a", &cancel).unwrap().is_none());
        assert!(
            ids.hold("a", &json!({"jsonrpc": "2.0", "id": 6, "result": {}}))
                .unwrap()
                .is_none()
        );
        let second = first.clone();
        drop(first);
        assert!(ids.hold("a", &request(json!(6))).is_err(), "a clone holds");
        drop(second);
        let again = ids.hold("a", &request(json!(6))).unwrap();
        assert!(again.is_some(), "free once every hold is dropped");
        drop((again, text));
        assert!(
            !ids.lock().contains_key("a"),
            "an empty session is forgotten"
        );
    }
}
