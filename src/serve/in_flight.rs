//! The ids of the client's requests in flight on one stdio session, so that a request whose
//! id is already in use is refused at once instead of run.
//!
//! JSON-RPC 2.0 asks a client to keep its ids unique among its requests in flight, and
//! rmcp 3.11 keeps one entry per id: a second request with the same id replaces the first
//! one's, so the first run would go on (calling wrapped tools) with no answer ever sent and
//! no `notifications/cancelled` reaching it. Here a request is in flight from the line that
//! passes it on (to rmcp or to [`super::tasks::Tasks`]) until the answer with its id goes
//! out, or until the client cancels it (rmcp sends no answer to a cancelled request, so
//! its id is free again at once, as the client sees it).

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::unreadable::INVALID_REQUEST;

/// The ids in flight on one session, shared by its reading and its writing half.
#[derive(Clone, Default)]
pub(super) struct InFlight(Arc<Mutex<HashSet<String>>>);

/// An id as a set key: its JSON text, so `6` and `"6"` stay two ids.
fn key(id: &Value) -> String {
    id.to_string()
}

impl InFlight {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The `-32600` answer refusing `message` when it is a request whose id is in flight.
    pub(super) fn refusal(&self, message: &Value) -> Option<Value> {
        message.get("method")?;
        let id = message.get("id")?;
        if !self.ids().contains(&key(id)) {
            return None;
        }
        Some(json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": INVALID_REQUEST,
                "message": format!("Invalid Request: the id {id} is already in use by a request in flight"),
            },
        }))
    }

    /// Note a client message that is passed on: a request's id is in flight from now; a
    /// `notifications/cancelled` frees the id it names.
    pub(super) fn passed_on(&self, message: &Value) {
        let Some(method) = message.get("method").and_then(Value::as_str) else {
            return;
        };
        match message.get("id") {
            Some(id) => {
                self.ids().insert(key(id));
            }
            None if method == "notifications/cancelled" => {
                if let Some(id) = message.pointer("/params/requestId") {
                    self.ids().remove(&key(id));
                }
            }
            None => {}
        }
    }

    /// Note an answer that goes out: the request with its id is no longer in flight.
    pub(super) fn answered(&self, message: &Value) {
        if message.get("method").is_none()
            && let Some(id) = message.get("id")
        {
            self.ids().remove(&key(id));
        }
    }

    /// [`Self::answered`] for a line rmcp wrote.
    pub(super) fn answered_line(&self, line: &[u8]) {
        if let Some(id) = answer_id(line) {
            self.ids().remove(&key(&id));
        }
    }
}

/// The id of the answer (a response or an error response) `line` holds, `None` for a
/// request, a notification or an error without an id. rmcp writes `jsonrpc`, then `id`,
/// then `result` or `error`, so the id is read from the start of the line and the rest (a
/// run's whole result) is not parsed; a line in any other layout is read whole.
fn answer_id(line: &[u8]) -> Option<Value> {
    if let Some(rest) = line.strip_prefix(br#"{"jsonrpc":"2.0","id":"#) {
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
        if let Some(Ok(id)) = values.next() {
            let after = &rest[values.byte_offset()..];
            if after.starts_with(br#","result":"#) || after.starts_with(br#","error":"#) {
                return Some(id);
            }
            if after.starts_with(br#","method":"#) {
                return None;
            }
        }
    }
    #[derive(Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    head.method.is_none().then_some(head.id).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_in_use_from_its_request_until_its_answer_or_cancel() {
        let in_flight = InFlight::default();
        let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {}});
        assert!(in_flight.refusal(&call).is_none());
        in_flight.passed_on(&call);
        let refusal = in_flight.refusal(&call).expect("the id is in use");
        assert_eq!(refusal["id"], 6);
        assert_eq!(refusal["error"]["code"], INVALID_REQUEST);
        // The string "6" is another id; a response from the client is no request.
        assert!(
            in_flight
                .refusal(&json!({"jsonrpc": "2.0", "id": "6", "method": "ping"}))
                .is_none()
        );
        in_flight.answered_line(br#"{"jsonrpc":"2.0","id":6,"result":{"content":[]}}"#);
        assert!(in_flight.refusal(&call).is_none());
        in_flight.passed_on(&call);
        in_flight.passed_on(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}}),
        );
        assert!(in_flight.refusal(&call).is_none());
    }

    #[test]
    fn only_answers_free_an_id() {
        // rmcp's own request to the client, in its own id space.
        assert_eq!(
            answer_id(br#"{"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}"#),
            None
        );
        assert_eq!(
            answer_id(br#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":"x"}}"#),
            Some(json!("a\"b"))
        );
        // Another layout is read whole.
        assert_eq!(
            answer_id(br#"{"result":{},"id":3,"jsonrpc":"2.0"}"#),
            Some(json!(3))
        );
        assert_eq!(answer_id(br#"{"jsonrpc":"2.0","method":"x"}"#), None);
    }
}
