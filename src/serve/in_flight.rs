//! The client's requests in flight on one stdio session, and the one lifetime three rules
//! hang on: a request is in flight from the line that passes it on (to rmcp or to
//! [`super::tasks::Tasks`]) until its answer is written to the client's pipe, or until the
//! client's `notifications/cancelled` for it is passed on (rmcp sends no answer to a
//! cancelled request).
//!
//! - Ids in use. A request whose id is in flight is refused with `-32600` and never runs
//!   ([`super::ids_in_use`], the rule HTTP keeps too).
//! - Late answers. A cancel frees the client's id at once (MCP: the client ignores any
//!   answer that still comes), so a new request may reuse it while the old run winds down.
//!   rmcp gets each request under an id of its own, `"N ID"` (`N` counts the session's
//!   requests, `ID` is the client's id as JSON text), and its answer goes out under the
//!   client's id again; the old run answers under its own `N`, which is no longer in
//!   flight, so that answer is dropped and never reaches the client as the new request's.
//! - Backpressure. Every line that gets an answer (a request, or a line refused with an
//!   error) takes one of [`MAX_UNANSWERED`] seats before it is passed on, and gives it back
//!   once its answer is written to the client's pipe or its request is cancelled. While
//!   every seat is taken the client's input is not read, so what waits for a client that
//!   does not read `serve`'s stdout (rmcp's tasks holding answers, this layer's refusals)
//!   stays bounded however many lines it writes. Notifications owe no answer and take no
//!   seat; neither does the client's answer to a request of `serve`'s.
//!
//! Why rmcp cannot get the client's id itself, with the generation kept here only: rmcp
//! 3.11's service loop (`serve_inner` in its `service.rs`) keeps one cancellation token per
//! request id, and it is the wire id that names the request everywhere in it. A cancel
//! removes and fires the token under its `requestId`; a handler's answer removes the token
//! under the answer's id and fires it, and is sent only when a token was there (else it is
//! dropped silently). With the client's id passed through, a request B reusing the id of a
//! cancelled request A that still winds down (a run's sandbox takes a moment to end)
//! registers B's token under that id, and A's late answer then takes B's token, cancels B
//! and goes out as if it were B's answer, with nothing on the wire to tell the two apart.
//! Holding B back until A has ended is no way out either: A's handler ends unseen (rmcp
//! drops its answer), and the answer it sends travels through rmcp's own channel, so B
//! could still be registered before rmcp handles it. So each request needs an id of its
//! own on rmcp's side, and what rmcp names by it comes back here: the answers (their id),
//! the notifications of a `subscriptions/listen` stream (their `_meta` subscriptionId,
//! [`subscription_notice`]), and the log line of a cancelled run ([`client_id`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rmcp::model::RequestId;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::ids_in_use;

/// Lines of a stdio client that may wait for their answer at once (runs still going, and
/// answers not yet written to the client's pipe); past it `serve` stops reading the
/// client's input until an answer is written. Far above what a client needs: runs past
/// `--max-queued-runs` (default 64) are answered at once.
pub(super) const MAX_UNANSWERED: usize = 1024;

/// The requests in flight on one session and its seats, shared by its reading and its
/// writing half.
#[derive(Clone)]
pub(super) struct InFlight {
    requests: Arc<Mutex<Requests>>,
    seats: Arc<Semaphore>,
}

#[derive(Default)]
struct Requests {
    /// By the client's id as its [`key`].
    by_id: HashMap<String, Request>,
    /// Requests passed on so far: the next one's number.
    passed: u64,
}

struct Request {
    /// Which request under its id this is: rmcp's id for it starts with it.
    number: u64,
    /// Whether it went to rmcp (and so may be cancelled there).
    to_rmcp: bool,
    seat: OwnedSemaphorePermit,
}

/// One request passed to the tasks layer, as its answer names it.
pub(super) struct Ticket {
    id: String,
    number: u64,
}

/// What the writer does with a line rmcp wrote.
pub(super) enum FromRmcp {
    /// No answer to a client request (a notification, a request of `serve`'s): write it as
    /// it is.
    Other,
    /// The answer to a request in flight, now under the client's id: write it, then drop
    /// the seat.
    Answer(Vec<u8>, OwnedSemaphorePermit),
    /// The answer to a request no longer in flight (the client cancelled it): drop it.
    Stale,
    /// A notification of a `subscriptions/listen` stream, now naming the client's id for
    /// the listen request: write it.
    Renamed(Vec<u8>),
}

/// An id as a map key ([`ids_in_use::key`]); an id rmcp cannot hold (refused before it is
/// passed on) as its JSON text.
fn key(id: &Value) -> String {
    ids_in_use::key(id).unwrap_or_else(|| id.to_string())
}

/// The client's id (as JSON text) of the request rmcp knows as `id`: on stdio, rmcp's
/// `"N ID"` ([`InFlight::to_rmcp`]) less its `N`; for what the client cannot see in a log
/// line, such as rmcp's id for a cancelled run.
pub(super) fn client_id(id: &RequestId) -> String {
    match id {
        RequestId::String(rmcp_id) => match rmcp_id.split_once(' ') {
            Some((number, id)) if number.parse::<u64>().is_ok() => id.to_owned(),
            _ => Value::from(rmcp_id.as_ref()).to_string(),
        },
        RequestId::Number(id) => id.to_string(),
    }
}

/// Whether a client message is a request (a `method` and an `id`), which gets an answer.
pub(super) fn is_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some()
}

impl InFlight {
    /// No request in flight, [`MAX_UNANSWERED`] seats free.
    pub(super) fn new() -> Self {
        Self {
            requests: Arc::default(),
            seats: Arc::new(Semaphore::new(MAX_UNANSWERED)),
        }
    }

    fn requests(&self) -> MutexGuard<'_, Requests> {
        self.requests.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wait for a free seat; `None` once [`Self::close`] was called (the client's output is
    /// gone, so no answer will give a seat back).
    pub(super) async fn seat(&self) -> Option<OwnedSemaphorePermit> {
        self.seats.clone().acquire_owned().await.ok()
    }

    /// No seat is handed out any more: waiting and later [`Self::seat`] calls get `None`.
    pub(super) fn close(&self) {
        self.seats.close();
    }

    /// The `-32600` answer refusing `message` when it is a request whose id is in flight
    /// ([`ids_in_use::admit`]; the id is taken when the request is passed on).
    pub(super) fn refusal(&self, message: &Value) -> Option<Value> {
        ids_in_use::admit(message, |key| self.requests().by_id.contains_key(key)).err()
    }

    fn insert(&self, id: String, to_rmcp: bool, seat: OwnedSemaphorePermit) -> u64 {
        let mut requests = self.requests();
        let number = requests.passed;
        requests.passed += 1;
        let request = Request {
            number,
            to_rmcp,
            seat,
        };
        requests.by_id.insert(id, request);
        number
    }

    /// `request` (one [`Self::refusal`] passed), holding `seat`, goes to the tasks layer:
    /// in flight until the answer carrying the ticket is written.
    pub(super) fn to_tasks(&self, request: &Value, seat: OwnedSemaphorePermit) -> Ticket {
        let id = key(&request["id"]);
        let number = self.insert(id.clone(), false, seat);
        Ticket { id, number }
    }

    /// `request` (one [`Self::refusal`] passed), holding `seat`, goes to rmcp: in flight
    /// from now, and its id becomes rmcp's own for it.
    pub(super) fn to_rmcp(&self, request: &mut Value, seat: OwnedSemaphorePermit) {
        let id = key(&request["id"]);
        let number = self.insert(id.clone(), true, seat);
        let rmcp_id = format!("{number} {id}");
        request["id"] = Value::String(rmcp_id);
    }

    /// `cancel`, the client's `notifications/cancelled`, is about to go to rmcp: the request
    /// it names is no longer in flight (its seat and id are free) and it now names rmcp's
    /// id for it. `false` when it must not go on: it names a request of the tasks layer,
    /// which is not cancelled so (its answer still comes; `tasks/cancel` stops a task).
    pub(super) fn cancel(&self, cancel: &mut Value) -> bool {
        let Some(id) = cancel.pointer("/params/requestId").map(key) else {
            return true;
        };
        let mut requests = self.requests();
        if requests
            .by_id
            .get(&id)
            .is_some_and(|request| !request.to_rmcp)
        {
            return false;
        }
        if let Some(request) = requests.by_id.remove(&id) {
            cancel["params"]["requestId"] = Value::String(format!("{} {id}", request.number));
        }
        true
    }

    /// The tasks layer's answer with `ticket` is about to be written: its request's seat, or
    /// `None` when that request is no longer in flight.
    pub(super) fn answered(&self, ticket: &Ticket) -> Option<OwnedSemaphorePermit> {
        self.take(&ticket.id, ticket.number)
    }

    fn take(&self, id: &str, number: u64) -> Option<OwnedSemaphorePermit> {
        let mut requests = self.requests();
        if requests.by_id.get(id)?.number != number {
            return None;
        }
        requests.by_id.remove(id).map(|request| request.seat)
    }

    /// What to do with `line`, a line rmcp wrote for the client.
    pub(super) fn rmcp_line(&self, line: &[u8]) -> FromRmcp {
        let Some((rmcp_id, rest)) = answer_id(line) else {
            return subscription_notice(line).map_or(FromRmcp::Other, FromRmcp::Renamed);
        };
        let Some((number, id)) = rmcp_id
            .as_str()
            .and_then(|s| s.split_once(' '))
            .and_then(|(n, id)| Some((n.parse::<u64>().ok()?, id)))
        else {
            return FromRmcp::Other;
        };
        let Some(seat) = self.take(id, number) else {
            return FromRmcp::Stale;
        };
        let out = match rest {
            Some(rest) => [ANSWER_HEAD, id.as_bytes(), rest].concat(),
            // Another layout: the whole answer, read and written again.
            None => {
                let mut answer: Value = serde_json::from_slice(line).unwrap_or_default();
                answer["id"] = serde_json::from_str(id).unwrap_or_default();
                let mut out = serde_json::to_vec(&answer).unwrap_or_default();
                out.push(b'\n');
                out
            }
        };
        FromRmcp::Answer(out, seat)
    }
}

/// The `_meta` key by which rmcp's notifications of a `subscriptions/listen` stream name
/// the listen request (protocol 2026-07-28).
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// `line`, a notification naming its `subscriptions/listen` request by rmcp's id for it
/// (`"N ID"`, see [`InFlight::to_rmcp`]), written again naming the client's id, so the
/// client can tell which of its subscriptions it belongs to; `None` for any other line.
fn subscription_notice(line: &[u8]) -> Option<Vec<u8>> {
    memchr::memmem::find(line, SUBSCRIPTION_ID.as_bytes())?;
    let mut message: Value = serde_json::from_slice(line).ok()?;
    let named = message
        .get_mut("params")?
        .get_mut("_meta")?
        .get_mut(SUBSCRIPTION_ID)?;
    let (number, id) = named.as_str()?.split_once(' ')?;
    number.parse::<u64>().ok()?;
    *named = serde_json::from_str(id).ok()?;
    let mut out = serde_json::to_vec(&message).ok()?;
    out.push(b'\n');
    Some(out)
}

/// The head rmcp writes an answer with, up to its id.
const ANSWER_HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":"#;

/// The id of the answer (a response or an error response) `line` holds, `None` for a
/// request, a notification or an error without an id. rmcp writes `jsonrpc`, then `id`,
/// then `result` or `error` ([`ANSWER_HEAD`], the id, the rest): in that layout the id is
/// read from the start of the line, the rest (a run's whole result) is not parsed and comes
/// along; a line in any other layout is read whole, and no rest comes.
fn answer_id(line: &[u8]) -> Option<(Value, Option<&[u8]>)> {
    if let Some(rest) = line.strip_prefix(ANSWER_HEAD) {
        let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Value>();
        if let Some(Ok(id)) = values.next() {
            let after = &rest[values.byte_offset()..];
            if after.starts_with(br#","result":"#) || after.starts_with(br#","error":"#) {
                return Some((id, Some(after)));
            }
            if after.starts_with(br#","method":"#) {
                return None;
            }
        }
    }
    if line.starts_with(br#"{"jsonrpc":"2.0","method":"#) {
        return None;
    }
    #[derive(Deserialize)]
    struct Head {
        id: Option<Value>,
        method: Option<IgnoredAny>,
    }
    let head: Head = serde_json::from_slice(line).ok()?;
    let id = head.method.is_none().then_some(head.id).flatten()?;
    Some((id, None))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::serve::unreadable::INVALID_REQUEST;

    fn answer(in_flight: &InFlight, line: &str) -> Option<String> {
        match in_flight.rmcp_line(line.as_bytes()) {
            FromRmcp::Answer(out, _) => Some(String::from_utf8(out).unwrap()),
            FromRmcp::Stale => None,
            FromRmcp::Other => Some("other".into()),
            FromRmcp::Renamed(out) => Some(format!("renamed {}", String::from_utf8(out).unwrap())),
        }
    }

    #[tokio::test]
    async fn an_id_is_in_use_from_its_request_until_its_answer_or_cancel_and_a_late_answer_is_dropped()
     {
        let in_flight = InFlight::new();
        let call = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {}});
        assert!(in_flight.refusal(&call).is_none());
        let mut first = call.clone();
        in_flight.to_rmcp(&mut first, in_flight.seat().await.unwrap());
        assert_eq!(first["id"], "0 6");
        let refusal = in_flight.refusal(&call).expect("the id is in use");
        assert_eq!(refusal["id"], 6);
        assert_eq!(refusal["error"]["code"], INVALID_REQUEST);
        // The string "6" is another id.
        assert!(
            in_flight
                .refusal(&json!({"jsonrpc": "2.0", "id": "6", "method": "ping"}))
                .is_none()
        );
        // Answered under the client's id, the id is free again.
        assert_eq!(
            answer(
                &in_flight,
                r#"{"jsonrpc":"2.0","id":"0 6","result":{"content":[]}}"#
            )
            .as_deref(),
            Some(r#"{"jsonrpc":"2.0","id":6,"result":{"content":[]}}"#)
        );
        assert!(in_flight.refusal(&call).is_none());

        // Cancelled, the id is free at once; the cancel names rmcp's id.
        let mut second = call.clone();
        in_flight.to_rmcp(&mut second, in_flight.seat().await.unwrap());
        let mut cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 6}});
        assert!(in_flight.cancel(&mut cancel));
        assert_eq!(cancel["params"]["requestId"], "1 6");
        assert!(in_flight.refusal(&call).is_none());
        // A new request under the id; the cancelled one's late answer is dropped, its own
        // answer goes out.
        let mut third = call.clone();
        in_flight.to_rmcp(&mut third, in_flight.seat().await.unwrap());
        assert_eq!(
            answer(&in_flight, r#"{"jsonrpc":"2.0","id":"1 6","result":{}}"#),
            None
        );
        assert!(in_flight.refusal(&call).is_some());
        assert_eq!(
            answer(
                &in_flight,
                r#"{"jsonrpc":"2.0","id":"2 6","error":{"code":1,"message":"x"}}"#
            )
            .as_deref(),
            Some(r#"{"jsonrpc":"2.0","id":6,"error":{"code":1,"message":"x"}}"#)
        );
        assert_eq!(in_flight.seats.available_permits(), MAX_UNANSWERED);
    }

    #[tokio::test]
    async fn a_request_of_the_tasks_layer_keeps_its_seat_until_answered_and_ignores_a_cancel() {
        let in_flight = InFlight::new();
        let get = json!({"jsonrpc": "2.0", "id": "g", "method": "tasks/result", "params": {}});
        let ticket = in_flight.to_tasks(&get, in_flight.seat().await.unwrap());
        let mut cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "g"}});
        assert!(!in_flight.cancel(&mut cancel));
        assert!(in_flight.refusal(&get).is_some());
        assert_eq!(in_flight.seats.available_permits(), MAX_UNANSWERED - 1);
        let seat = in_flight.answered(&ticket).expect("in flight");
        drop(seat);
        assert_eq!(in_flight.seats.available_permits(), MAX_UNANSWERED);
        assert!(in_flight.answered(&ticket).is_none());
        // A cancel of an id not in flight goes on as it is.
        assert!(in_flight.cancel(&mut cancel));
        assert_eq!(cancel["params"]["requestId"], "g");
    }

    #[tokio::test]
    async fn every_seat_taken_the_next_waits_and_closing_ends_the_wait() {
        let in_flight = InFlight::new();
        let mut held = Vec::new();
        for _ in 0..MAX_UNANSWERED {
            held.push(in_flight.seat().await.unwrap());
        }
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), in_flight.seat());
        assert!(
            waiting.await.is_err(),
            "a seat past the bound was handed out"
        );
        held.pop();
        assert!(in_flight.seat().await.is_some());
        in_flight.close();
        assert!(in_flight.seat().await.is_none());
    }

    #[tokio::test]
    async fn an_integer_id_in_float_form_is_the_integer_and_is_answered_as_it() {
        let in_flight = InFlight::new();
        let mut ping = json!({"jsonrpc": "2.0", "id": 1.0, "method": "ping"});
        in_flight.to_rmcp(&mut ping, in_flight.seat().await.unwrap());
        assert_eq!(ping["id"], "0 1");
        assert!(
            in_flight
                .refusal(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
                .is_some()
        );
        assert_eq!(
            answer(&in_flight, r#"{"jsonrpc":"2.0","id":"0 1","result":{}}"#).as_deref(),
            Some(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
        );
    }

    #[tokio::test]
    async fn a_subscription_notification_names_the_clients_listen_request() {
        let in_flight = InFlight::new();
        let mut listen =
            serde_json::json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen"});
        in_flight.to_rmcp(&mut listen, in_flight.seat().await.unwrap());
        let rmcp_id = listen["id"].clone();
        let notice = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID: rmcp_id}}});
        let FromRmcp::Renamed(out) = in_flight.rmcp_line(notice.to_string().as_bytes()) else {
            panic!("the notification was not renamed");
        };
        let out: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["params"]["_meta"][SUBSCRIPTION_ID], "sub-1");
        let other =
            br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}"#;
        assert!(matches!(in_flight.rmcp_line(other), FromRmcp::Other));
    }

    #[tokio::test]
    async fn a_log_line_names_a_request_by_the_clients_id() {
        let in_flight = InFlight::new();
        for (id, shown) in [(json!(6), "6"), (json!("a b"), r#""a b""#)] {
            let mut call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call"});
            in_flight.to_rmcp(&mut call, in_flight.seat().await.unwrap());
            let rmcp_id: RequestId = serde_json::from_value(call["id"].clone()).unwrap();
            assert_ne!(rmcp_id.to_string(), shown);
            assert_eq!(client_id(&rmcp_id), shown);
        }
    }

    #[test]
    fn only_answers_to_client_requests_are_matched() {
        let in_flight = InFlight::new();
        // rmcp's own request to the client, in its own id space, and its notifications.
        for line in [
            r#"{"jsonrpc":"2.0","id":6,"method":"elicitation/create","params":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        ] {
            assert_eq!(answer(&in_flight, line).as_deref(), Some("other"), "{line}");
        }
        assert_eq!(
            answer_id(br#"{"jsonrpc":"2.0","id":"a\"b","error":{"code":1,"message":"x"}}"#)
                .map(|(id, _)| id),
            Some(json!("a\"b"))
        );
        // Another layout is read whole.
        assert_eq!(
            answer_id(br#"{"result":{},"id":3,"jsonrpc":"2.0"}"#)
                .map(|(id, rest)| (id, rest.is_some())),
            Some((json!(3), false))
        );
    }

    #[tokio::test]
    async fn an_answer_in_another_layout_is_written_again_under_the_clients_id() {
        let in_flight = InFlight::new();
        let mut ping = json!({"jsonrpc": "2.0", "id": "a b", "method": "ping"});
        in_flight.to_rmcp(&mut ping, in_flight.seat().await.unwrap());
        let line = format!(r#"{{"result":{{}},"id":{},"jsonrpc":"2.0"}}"#, ping["id"]);
        let out: Value = serde_json::from_str(&answer(&in_flight, &line).unwrap()).unwrap();
        assert_eq!(out["id"], "a b");
        assert_eq!(out["result"], json!({}));
    }
}
