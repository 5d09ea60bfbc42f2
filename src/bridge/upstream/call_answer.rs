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

use rmcp::model::{CallToolResult, RequestId, ServerJsonRpcMessage, ServerResult};
use serde::Deserialize;
use serde_json::Value;

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
    let result = CallToolResult::deserialize(result).ok()?;
    Some(ServerJsonRpcMessage::response(
        ServerResult::CallToolResult(result),
        id,
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
            "resultType" => vec![json!("complete"), json!("input_required"), json!(7)],
            "content" => vec![
                json!([{"type": "text", "text": "x"}]),
                json!([]),
                json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]),
                json!("not a list"),
            ],
            "structuredContent" => vec![json!({"a": 1}), json!(null), json!([1]), json!("s")],
            "isError" => vec![json!(true), json!(false), json!("yes")],
            _ => vec![json!({"k": "v"}), json!(3)],
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
