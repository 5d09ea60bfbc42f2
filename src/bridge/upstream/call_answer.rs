//! The answer to a `tools/call`, read straight into rmcp's `CallToolResult`.
//!
//! rmcp reads a server's message as an untagged enum of untagged enums: a result is tried
//! as each of `ServerResult`'s variants in turn, and `CallToolResult` comes sixteenth, so
//! every answer to a call first fails fifteen other shapes (each failure a formatted error
//! message) and is buffered and copied on the way. Most of what the bridge spends reading
//! a call's answer went there. [`read`] takes the answer to a request that was a
//! `tools/call` (the transport knows which requests were) and reads its `result` as a
//! `CallToolResult` alone, when the message holds nothing but what such an answer holds;
//! that is the message rmcp's own reading makes of it (the tests hold the two the same
//! over every combination of those fields). Anything else (another field, a result that
//! is not a `CallToolResult`) returns `None`, and the caller reads it rmcp's way.
//!
//! [`read_line`] goes further for the usual answer: it reads the line's bytes straight into
//! a `CallToolResult`, once, skipping the JSON value, its repair and the typed read of that
//! value, when the answer is one the repair would leave as it is (every field of a known
//! shape and none `null`, a `structuredContent` object or no content blocks beside it).
//! Anything else returns `None` and is read, repaired and typed as before; the tests hold
//! the two readings the same.

use rmcp::model::{
    CallToolResult, ContentBlock, JsonRpcVersion2_0, MetaObject, RequestId, ResultType,
    ServerJsonRpcMessage, ServerResult,
};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use super::repair::{Pending, PendingMap};

/// The fields of a JSON-RPC response.
const RESPONSE_FIELDS: [&str; 3] = ["jsonrpc", "id", "result"];
/// The fields of a `CallToolResult` (MCP 2025-11-25 and 2026-07-28: `resultType`).
const RESULT_FIELDS: [&str; 5] = [
    "resultType",
    "content",
    "structuredContent",
    "isError",
    "_meta",
];

/// `message` (already repaired) as rmcp reads an answer to a `tools/call`, when it is a
/// JSON-RPC 2.0 response whose fields are only `jsonrpc`, `id` and `result`, with a
/// `result` that has only `CallToolResult`'s fields and reads as one; otherwise `None`.
pub(super) fn read(message: &Value) -> Option<ServerJsonRpcMessage> {
    let fields = message.as_object()?;
    if fields.get("jsonrpc")?.as_str()? != "2.0"
        || !fields.keys().all(|k| RESPONSE_FIELDS.contains(&k.as_str()))
    {
        return None;
    }
    let id = RequestId::deserialize(fields.get("id")?).ok()?;
    let result = fields.get("result")?;
    if !result
        .as_object()?
        .keys()
        .all(|k| RESULT_FIELDS.contains(&k.as_str()))
    {
        return None;
    }
    let result = crate::exact_json::typed_ref::<CallToolResult>(result).ok()?;
    Some(ServerJsonRpcMessage::response(
        ServerResult::CallToolResult(result),
        id,
    ))
}

/// A whole answer line as [`read_line`] reads it: no field but these.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Answer {
    #[serde(rename = "jsonrpc")]
    _jsonrpc: JsonRpcVersion2_0,
    /// Numbers only: string ids may be the raw requests of `tasks.rs`, read elsewhere.
    id: i64,
    result: Fields,
}

/// A `CallToolResult`'s fields, each absent or of its type (a `null` fails the read: the
/// repair drops it, which is left to the slow path).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fields {
    #[serde(default, deserialize_with = "present")]
    result_type: Option<ResultType>,
    #[serde(default, deserialize_with = "present")]
    content: Option<Vec<ContentBlock>>,
    #[serde(default, deserialize_with = "present")]
    structured_content: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    is_error: Option<bool>,
    #[serde(rename = "_meta", default, deserialize_with = "present")]
    meta: Option<MetaObject>,
}

/// A field that is there and not `null`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<T>::deserialize(d)? {
        Some(value) => Ok(Some(value)),
        None => Err(serde::de::Error::custom("null")),
    }
}

/// The line `bytes` (trimmed) as the message that reading it as JSON, repairing it and
/// [`read`] make of it, when it answers a `tools/call` in `pending` and is read whole here
/// (see the module docs); its `pending` record is then taken out, as that reading does.
/// `None` leaves the line, and `pending`, to that reading.
pub(super) fn read_line(bytes: &[u8], pending: &PendingMap) -> Option<ServerJsonRpcMessage> {
    let Answer { id, result, .. } = serde_json::from_slice(bytes).ok()?;
    let Fields {
        result_type,
        content,
        structured_content,
        is_error,
        meta,
    } = result;
    if result_type.as_ref().is_some_and(|t| !t.is_complete())
        // An empty result gets an empty content list from the repair.
        || (content.is_none() && structured_content.is_none() && is_error.is_none())
        // Content blocks beside a structuredContent that is not an object: the repair
        // drops it.
        || (content.as_ref().is_some_and(|c| !c.is_empty())
            && structured_content.as_ref().is_some_and(|s| !s.is_object()))
        // A float beyond f64 (`1e400`): the full reading refuses the line as not JSON.
        || structured_content
            .as_ref()
            .is_some_and(|s| crate::exact_json::check_range(s).is_err())
    {
        return None;
    }
    {
        let mut pending = pending.lock().ok()?;
        let key = id.to_string();
        if pending.get(&key) != Some(&Pending::CallTool) {
            return None;
        }
        pending.remove(&key);
    }
    let mut call = CallToolResult::default();
    call.result_type = result_type;
    call.content = content.unwrap_or_default();
    call.structured_content = structured_content;
    call.is_error = is_error;
    call.meta = meta;
    Some(ServerJsonRpcMessage::response(
        ServerResult::CallToolResult(call),
        RequestId::Number(id),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::JsonRpcMessage;
    use serde_json::json;

    /// rmcp's own reading: what the transport did for every message before [`read`].
    fn rmcp_reads(message: &Value) -> Option<ServerJsonRpcMessage> {
        serde_json::from_value(message.clone()).ok()
    }

    fn values_of(field: &str) -> Vec<Value> {
        match field {
            "resultType" => vec![
                json!("complete"),
                json!("input_required"),
                json!(7),
                json!(null),
            ],
            "content" => vec![
                json!([{"type": "text", "text": "x"}]),
                json!([]),
                json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]),
                json!("not a list"),
                json!(null),
                // Blocks the repair changes: a priority word, a block of unknown type.
                json!([{"type": "text", "text": "x", "annotations": {"priority": "high"}}]),
                json!([{"type": "video", "url": "u"}, {"type": "text", "text": "y"}]),
            ],
            "structuredContent" => vec![json!({"a": 1}), json!(null), json!([1]), json!("s")],
            "isError" => vec![json!(true), json!(false), json!("yes"), json!(null)],
            _ => vec![json!({"k": "v"}), json!(3), json!(null)],
        }
    }

    /// Every result made of a subset of CallToolResult's fields, each with each of its
    /// sample values (right and wrong types).
    fn every_result() -> Vec<Value> {
        let mut results = vec![serde_json::Map::new()];
        for field in RESULT_FIELDS {
            let mut more = Vec::new();
            for result in &results {
                for value in values_of(field) {
                    let mut with = result.clone();
                    with.insert(field.to_owned(), value);
                    more.push(with);
                }
            }
            results.extend(more);
        }
        results.into_iter().map(Value::Object).collect()
    }

    #[test]
    fn a_call_answer_reads_as_rmcp_reads_it_over_every_combination_of_its_fields() {
        let mut read_here = 0;
        for result in every_result() {
            for id in [json!(7), json!("s-7")] {
                let message = json!({"jsonrpc": "2.0", "id": id, "result": result});
                let Some(fast) = read(&message) else {
                    continue;
                };
                read_here += 1;
                let slow = rmcp_reads(&message)
                    .unwrap_or_else(|| panic!("rmcp refuses what was read here: {message}"));
                assert!(
                    matches!(
                        &slow,
                        JsonRpcMessage::Response(r)
                            if matches!(r.result, ServerResult::CallToolResult(_))
                    ),
                    "rmcp reads {message} as another shape: {slow:?}"
                );
                assert_eq!(
                    serde_json::to_value(&fast).unwrap(),
                    serde_json::to_value(&slow).unwrap(),
                    "{message}"
                );
            }
        }
        // The usual answers are read here, not left to rmcp.
        assert!(read_here > 100, "only {read_here} read here");
        let usual = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x"}], "isError": false}});
        assert!(read(&usual).is_some());
    }

    /// The reading `read_line` stands in for: JSON value, repair, then [`read`] or rmcp's.
    fn slow_read(line: &[u8], pending: &PendingMap) -> Option<ServerJsonRpcMessage> {
        let value: Value = serde_json::from_slice(line).ok()?;
        match super::super::repair::decode(value, pending) {
            super::super::repair::Decoded::Message(message) => Some(*message),
            _ => None,
        }
    }

    fn pending_call(id: &str) -> PendingMap {
        let pending = PendingMap::default();
        pending
            .lock()
            .unwrap()
            .insert(id.to_owned(), Pending::CallTool);
        pending
    }

    #[test]
    fn a_call_answer_read_straight_from_its_line_reads_as_the_repaired_value_does() {
        let mut read_here = 0;
        for result in every_result() {
            for id in [json!(7), json!("s-7"), json!(7.5)] {
                let line = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
                let key = super::super::repair::id_key(&id).unwrap_or_default();
                let fast_pending = pending_call(&key);
                let Some(fast) = read_line(line.as_bytes(), &fast_pending) else {
                    assert!(
                        fast_pending.lock().unwrap().contains_key(&key),
                        "a line left to the slow path keeps its record: {line}"
                    );
                    continue;
                };
                read_here += 1;
                assert!(fast_pending.lock().unwrap().is_empty(), "{line}");
                let slow = slow_read(line.as_bytes(), &pending_call(&key))
                    .unwrap_or_else(|| panic!("the slow path reads no message from {line}"));
                assert_eq!(
                    serde_json::to_value(&fast).unwrap(),
                    serde_json::to_value(&slow).unwrap(),
                    "{line}"
                );
            }
        }
        assert!(read_here > 100, "only {read_here} read here");
    }

    #[test]
    fn a_line_is_read_straight_only_when_it_answers_a_pending_call() {
        let line = br#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"x"}]}}"#;
        assert!(read_line(line, &PendingMap::default()).is_none());
        let listing = PendingMap::default();
        listing
            .lock()
            .unwrap()
            .insert("7".to_owned(), Pending::ListTools);
        assert!(read_line(line, &listing).is_none());
        assert!(read_line(line, &pending_call("7")).is_some());
        for other in [
            &br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]},"extra":1}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[],"task":{}}}"#,
            br#"{"jsonrpc":"1.0","id":7,"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]},"result":{"content":[]}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{"content":[], "isError": null}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{}}"#,
        ] {
            assert!(
                read_line(other, &pending_call("7")).is_none(),
                "{}",
                String::from_utf8_lossy(other)
            );
        }
    }

    #[test]
    fn anything_but_a_plain_call_answer_is_left_to_rmcp() {
        let result = json!({"content": [{"type": "text", "text": "x"}]});
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "result": result, "error": {"code": 1, "message": "m"}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": result, "method": "x"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": result, "extra": 1}),
            json!({"jsonrpc": "1.0", "id": 1, "result": result}),
            json!({"id": 1, "result": result}),
            json!({"jsonrpc": "2.0", "result": result}),
            json!({"jsonrpc": "2.0", "id": 1.5, "result": result}),
            json!({"jsonrpc": "2.0", "id": null, "result": result}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "task": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"_meta": {}}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
            json!({"jsonrpc": "2.0", "id": 1, "result": [1]}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required"}}),
        ] {
            assert!(read(&message).is_none(), "{message}");
        }
    }
}
