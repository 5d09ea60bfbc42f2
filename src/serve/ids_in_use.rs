//! The one rule both transports keep for the ids of the client's requests: a request whose
//! id is already in use by a request in flight (in its session) is refused at once with
//! `-32600` and never runs; the request in flight goes on.
//!
//! JSON-RPC 2.0 asks a client to keep its ids unique among its requests in flight, and
//! rmcp 3.11 keeps one entry per id (on stdio its cancellation token, over HTTP also the
//! POST whose response gets the answer): a second request with the same id would take the
//! first one's over, so the first run would go on calling wrapped tools with no answer ever
//! sent and out of a `notifications/cancelled`'s reach.
//!
//! Each transport keeps its own requests in flight and says when one ends
//! ([`super::in_flight`] on stdio, `http::reused_ids` over HTTP); which ids are one id and
//! the refusal are here.

use rmcp::model::NumberOrString;
use serde::Deserialize;
use serde_json::{Value, json};

use super::unreadable::INVALID_REQUEST;

/// An id as rmcp tells ids apart, as a map key: its JSON text, so `6` and `"6"` stay two
/// ids, with an integer written in float form (`6.0`) as the integer (rmcp reads it so and
/// answers it as `6`). `None` for an id rmcp cannot hold (not a string, or a number
/// outside i64), which is refused as an invalid request anyway.
pub(super) fn key(id: &Value) -> Option<String> {
    NumberOrString::deserialize(id)
        .ok()
        .map(|id| id.into_json_value().to_string())
}

/// The rule for `message`, a client message about to be passed on: `Ok(Some(key))` for a
/// request whose id (as its [`key`]) `in_use` says is free, `Ok(None)` for no request (a
/// notification, the client's answer) or an id rmcp cannot hold, and `Err` with the
/// `-32600` answer (carrying the id as the client wrote it) for a request whose id
/// `in_use` says is in flight. `in_use` may also take the id for the request, under the
/// same lock, when the transport holds ids from here on.
pub(super) fn admit(
    message: &Value,
    in_use: impl FnOnce(&str) -> bool,
) -> Result<Option<String>, Value> {
    if message.get("method").is_none() {
        return Ok(None);
    }
    let Some(id) = message.get("id") else {
        return Ok(None);
    };
    let Some(key) = key(id) else {
        return Ok(None);
    };
    if !in_use(&key) {
        return Ok(Some(key));
    }
    Err(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": INVALID_REQUEST,
            "message": format!("Invalid Request: the id {id} is already in use by a request in flight"),
        },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_whose_id_is_in_use_is_refused_with_its_id_as_the_client_wrote_it() {
        let in_use = |key: &str| key == "6";
        let refused = admit(
            &json!({"jsonrpc": "2.0", "id": 6.0, "method": "ping"}),
            in_use,
        )
        .expect_err("6.0 is the id 6");
        assert_eq!(refused["id"], json!(6.0));
        assert_eq!(refused["error"]["code"], INVALID_REQUEST);
        assert!(
            refused["error"]["message"]
                .as_str()
                .unwrap()
                .contains("the id 6.0 is already in use")
        );
        // The string "6" is another id.
        let text = json!({"jsonrpc": "2.0", "id": "6", "method": "ping"});
        assert_eq!(admit(&text, in_use), Ok(Some(r#""6""#.to_owned())));
    }

    #[test]
    fn notifications_answers_and_ids_rmcp_cannot_hold_are_left_alone() {
        let never = |_: &str| panic!("asked about an id that is no request's");
        for message in [
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}}),
            json!({"jsonrpc": "2.0", "id": 6, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 18_446_744_073_709_551_615_u64, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": null, "method": "ping"}),
        ] {
            assert_eq!(admit(&message, never), Ok(None), "{message}");
        }
    }
}
