//! Repair of what a wrapped server answers, before rmcp's typed model reads it.
//!
//! rmcp rejects a whole message whose shape it does not know, so each line is first read as
//! JSON and repaired here:
//! - tools in a `tools/list` answer with no `inputSchema` get `{"type": "object"}` (a boolean
//!   schema keeps its meaning), tools that are not objects with a string name are dropped
//!   with a warning, optional fields of the wrong type are repaired or dropped (lenient.rs);
//! - content blocks with fields of the wrong type are repaired (lenient.rs); blocks of
//!   unknown type in a `tools/call` result become a text block that names the type, a bare
//!   string is one text block, so nothing is dropped silently;
//! - an `initialize` answer with fields of the wrong type is repaired (lenient.rs);
//! - when a line that is not valid JSON (NaN, a lone surrogate) still names a request id we
//!   are waiting on, that request is answered with an error at once instead of hanging;
//!   a `tools/list` answer nested deeper than serde_json reads is read with its deep values
//!   cut to `null` (their tools are then too deep to check and left out, not the list).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{RequestId, ServerJsonRpcMessage};
use serde_json::{Value, json};

use super::json_scan::{cap_depth, top_level_id};
use super::lenient::{self, Hints};

/// What an outgoing request was, so its response can be repaired.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pending {
    Initialize,
    ListTools,
    CallTool,
    Other,
}

pub(super) type PendingMap = Arc<Mutex<HashMap<String, Pending>>>;

pub(super) fn id_key(id: &Value) -> Option<String> {
    match id {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(format!("s:{s}")),
        _ => None,
    }
}

/// Record what the outgoing message `value` is, so its answer can be repaired: a request
/// by its id and method; `notifications/cancelled` forgets the request it cancels (no answer
/// is awaited any more, and a late one passes unrepaired).
pub(super) fn expect_answer(pending: &PendingMap, value: &Value) {
    let method = value.get("method").and_then(Value::as_str);
    if method == Some("notifications/cancelled")
        && let Some(key) = value.pointer("/params/requestId").and_then(id_key)
        && let Ok(mut p) = pending.lock()
    {
        p.remove(&key);
    }
    if let (Some(method), Some(key)) = (method, value.get("id").and_then(id_key)) {
        expect(pending, key, method);
    }
}

/// [`expect_answer`] for a request known by its type: the same record as its JSON value
/// gives (`id_key` of the id as JSON), without making that value.
pub(super) fn expect_request(pending: &PendingMap, id: &RequestId, method: &str) {
    let key = match id {
        RequestId::Number(n) => n.to_string(),
        RequestId::String(s) => format!("s:{s}"),
    };
    expect(pending, key, method);
}

fn expect(pending: &PendingMap, key: String, method: &str) {
    let kind = match method {
        "initialize" => Pending::Initialize,
        "tools/list" => Pending::ListTools,
        "tools/call" => Pending::CallTool,
        _ => Pending::Other,
    };
    if let Ok(mut p) = pending.lock() {
        p.insert(key, kind);
    }
}

/// What one line from the server comes to.
pub(super) enum Decoded {
    /// A message for rmcp.
    Message(Box<ServerJsonRpcMessage>),
    /// A request rmcp cannot read: answer it with this error.
    Refuse(Value, String),
    /// Not JSON-RPC: skipped.
    Junk,
}

impl From<Option<ServerJsonRpcMessage>> for Decoded {
    fn from(message: Option<ServerJsonRpcMessage>) -> Self {
        message.map_or(Self::Junk, |m| Self::Message(Box::new(m)))
    }
}

/// Turn one JSON value into a message rmcp accepts, repairing known bad shapes.
pub(super) fn decode(mut value: Value, pending: &PendingMap) -> Decoded {
    let Some(obj) = value.as_object() else {
        return Decoded::Junk;
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Decoded::Junk;
    }
    let is_response = obj.contains_key("result") || obj.contains_key("error");
    let is_request = !is_response && obj.contains_key("method");
    let id = obj.get("id").cloned();
    let key = id.as_ref().and_then(id_key);
    let kind = if is_response {
        key.as_ref()
            .and_then(|k| pending.lock().ok().and_then(|mut p| p.remove(k)))
    } else {
        None
    };
    if let (Some(kind), Some(result)) = (kind, value.get_mut("result")) {
        repair_result(kind, result);
    }
    if kind == Some(Pending::CallTool)
        && let Some(message) = super::call_answer::read(&value)
    {
        return Decoded::Message(Box::new(message));
    }
    match crate::exact_json::typed::<ServerJsonRpcMessage>(value) {
        Ok(message) => Decoded::Message(Box::new(message)),
        Err(e) => match id {
            Some(id) if is_response => error_reply(
                id,
                &format!("the server sent a response of unknown shape: {e}"),
            )
            .into(),
            Some(id) if is_request && key.is_some() => Decoded::Refuse(
                id,
                crate::bridge::refusal::cap(&format!("invalid request: {e}"), 300),
            ),
            _ => Decoded::Junk,
        },
    }
}

fn error_reply(id: Value, message: &str) -> Option<ServerJsonRpcMessage> {
    let message = crate::bridge::refusal::cap(message, 300);
    serde_json::from_value(json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message}
    }))
    .ok()
}

/// Nesting kept when a `tools/list` answer is deeper than serde_json reads (128): deeper
/// values become `null`, so only the tools that hold them are left out (as too deep to
/// check, schema.rs), not the whole list.
const MAX_LIST_DEPTH: usize = 100;

/// A line that does not parse as JSON. When it answers a request we wait on, that request
/// fails at once (or, for a `tools/list` too deep to read, is read with its deep parts cut).
pub(super) fn unparsable_line(
    bytes: &[u8],
    error: &serde_json::Error,
    pending: &PendingMap,
) -> Decoded {
    let Some(id) = top_level_id(bytes) else {
        return Decoded::Junk;
    };
    let Some(key) = id_key(&id) else {
        return Decoded::Junk;
    };
    let too_deep = error.to_string().starts_with("recursion limit exceeded");
    let kind = pending.lock().ok().and_then(|p| p.get(&key).copied());
    match kind {
        Some(Pending::ListTools) if too_deep => {
            match serde_json::from_slice::<Value>(&cap_depth(bytes, MAX_LIST_DEPTH)) {
                Ok(value) => decode(value, pending),
                Err(_) => Decoded::Junk,
            }
        }
        Some(_) => {
            if let Ok(mut p) = pending.lock() {
                p.remove(&key);
            }
            let why = if too_deep {
                "nested more than 128 levels deep".to_owned()
            } else {
                format!("not valid JSON ({error}; NaN, Infinity or a lone surrogate?)")
            };
            error_reply(id, &format!("the server sent a response that is {why}")).into()
        }
        None => Decoded::Junk,
    }
}

/// Repair the `result` of a response to a request of `kind` in place (see the module docs).
pub(super) fn repair_result(kind: Pending, result: &mut Value) {
    match kind {
        Pending::ListTools => {
            if let Some(Value::Array(tools)) = result.get_mut("tools") {
                tools.retain(|t| match t.get("name").and_then(Value::as_str) {
                    // An empty name is no name: no stub could call it by one.
                    Some("") => {
                        tracing::warn!("left out a tool whose name is the empty string");
                        false
                    }
                    Some(_) => true,
                    None => {
                        tracing::warn!("left out a tool with no string name");
                        false
                    }
                });
                let mut hints = Hints::default();
                tools.retain_mut(|tool| {
                    if let Some(obj) = tool.as_object_mut() {
                        // JSON Schema's boolean forms keep their meaning: `false` accepts no
                        // arguments at all, `true` any; a missing one means an object with
                        // no named arguments (any object). Any other value (a string, a
                        // number, null, an array) is no schema: the tool is left out, since
                        // what its arguments may be is unknown.
                        let schema = match obj.get("inputSchema") {
                            Some(Value::Object(_)) => None,
                            Some(Value::Bool(false)) => Some(json!({"not": {}})),
                            Some(Value::Bool(true)) => {
                                Some(json!({"type": "object", "additionalProperties": true}))
                            }
                            None => Some(json!({"type": "object"})),
                            Some(other) => {
                                let name = obj.get("name").and_then(Value::as_str).unwrap_or("");
                                tracing::warn!(
                                    "left out the tool {:?}: its inputSchema is {}, not a JSON Schema object",
                                    crate::bridge::refusal::cap(name, 80),
                                    json_kind(other)
                                );
                                return false;
                            }
                        };
                        if let Some(schema) = schema {
                            obj.insert("inputSchema".into(), schema);
                        }
                    }
                    let kept = lenient::tool(tool, &mut hints);
                    if !kept {
                        let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
                        tracing::warn!(
                            "left out the tool {:?}: its fields cannot be read even after repair",
                            crate::bridge::refusal::cap(name, 80)
                        );
                    }
                    kept
                });
                hints.log("the tool list");
            }
            if let Some(obj) = result.as_object_mut()
                && obj
                    .get("nextCursor")
                    .is_some_and(|c| !c.is_string() && !c.is_null())
            {
                tracing::debug!("dropped a nextCursor that is not a string: the list ends here");
                obj.remove("nextCursor");
            }
        }
        Pending::Initialize => {
            let mut hints = Hints::default();
            lenient::initialize(result, &mut hints);
            hints.log("the initialize answer");
        }
        Pending::CallTool => {
            let mut hints = Hints::default();
            if let Some(obj) = result.as_object_mut() {
                lenient::call_result(obj, &mut hints);
                // An empty result object is a valid, empty result (rmcp's model wants a field).
                if !["content", "structuredContent", "isError"]
                    .iter()
                    .any(|k| obj.contains_key(*k))
                {
                    obj.insert("content".into(), json!([]));
                }
            }
            if let Some(Value::Array(blocks)) = result.get_mut("content") {
                for block in blocks.iter_mut() {
                    if !lenient::content_block(block, &mut hints) {
                        let kind = block
                            .get("type")
                            .and_then(Value::as_str)
                            .unwrap_or("unknown");
                        let kind = crate::bridge::refusal::cap(kind, 40);
                        *block = json!({"type": "text", "text": format!("[a content block of type {kind:?} that this bridge cannot read]")});
                    }
                }
                hints.log("a tool result");
            } else if let Some(content) = result.get("content").cloned() {
                // A bare string is read as one text block; any other shape is named.
                let text = match content {
                    Value::String(s) => s,
                    other => format!(
                        "[content of type {} that this bridge cannot read]",
                        json_kind(&other)
                    ),
                };
                result
                    .as_object_mut()
                    .map(|o| o.insert("content".into(), json!([{"type": "text", "text": text}])));
            }
        }
        Pending::Other => {}
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(decoded: Decoded) -> Option<ServerJsonRpcMessage> {
        match decoded {
            Decoded::Message(m) => Some(*m),
            _ => None,
        }
    }

    fn pending_with(id: &str, kind: Pending) -> PendingMap {
        let p: PendingMap = Arc::default();
        p.lock().unwrap().insert(id.into(), kind);
        p
    }

    #[test]
    fn junk_is_not_a_message() {
        let p: PendingMap = Arc::default();
        assert!(message(decode(json!({"hello": 1}), &p)).is_none());
        assert!(message(decode(json!([1, 2]), &p)).is_none());
        assert!(message(decode(json!({"jsonrpc": "1.0", "id": 1, "result": {}}), &p)).is_none());
    }

    #[test]
    fn a_tool_without_an_input_schema_is_repaired() {
        let p = pending_with("1", Pending::ListTools);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"noname": 1}, {"name": "b", "inputSchema": {"type": "object"}}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("\"a\""), "{text}");
        assert!(text.contains("\"b\""), "{text}");
        assert!(!text.contains("noname"), "{text}");
    }

    #[test]
    fn boolean_input_schemas_keep_their_meaning_and_a_missing_one_is_any_object() {
        let p = pending_with("1", Pending::ListTools);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "none", "inputSchema": false}, {"name": "any", "inputSchema": true}, {"name": "absent"}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains(r#""inputSchema":{"not":{}}"#), "{text}");
        assert!(text.contains(r#""additionalProperties":true"#), "{text}");
        assert!(
            text.contains(r#""inputSchema":{"type":"object"}"#),
            "{text}"
        );
    }

    /// The names of the tools kept when a `tools/list` answer lists `tools`.
    fn kept_names(tools: Value) -> Vec<String> {
        let p = pending_with("1", Pending::ListTools);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}),
            &p,
        ));
        let m = serde_json::to_value(m.unwrap()).unwrap();
        m["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_tool_whose_input_schema_is_no_object_or_boolean_is_left_out() {
        let names = kept_names(
            json!([{"name": "s", "inputSchema": "lol"}, {"name": "n", "inputSchema": 42}, {"name": "z", "inputSchema": null}, {"name": "a", "inputSchema": [{}]}, {"name": "kept", "inputSchema": {"type": "object"}}]),
        );
        assert_eq!(names, ["kept"]);
    }

    #[test]
    fn a_tool_named_the_empty_string_is_left_out() {
        let names = kept_names(
            json!([{"name": "", "inputSchema": {"type": "object"}}, {"name": "kept", "inputSchema": {"type": "object"}}]),
        );
        assert_eq!(names, ["kept"]);
    }

    #[test]
    fn null_optional_fields_of_a_tool_result_are_dropped_and_its_text_kept() {
        let p = pending_with("2", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "hi"}], "structuredContent": null, "isError": null, "_meta": null}}),
            &p,
        ));
        let m = serde_json::to_value(m.unwrap()).unwrap();
        assert_eq!(
            m["result"],
            json!({"content": [{"type": "text", "text": "hi"}]}),
            "{m}"
        );
        let p = pending_with("3", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 3, "result": {"content": null}}),
            &p,
        ));
        let m = serde_json::to_value(m.unwrap()).unwrap();
        assert_eq!(m["result"], json!({"content": []}), "{m}");
    }

    #[test]
    fn a_bare_string_content_is_one_text_block() {
        let p = pending_with("2", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": "hello"}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains(r#""text":"hello""#), "{text}");
    }

    #[test]
    fn unknown_content_blocks_become_text_that_names_them() {
        let p = pending_with("2", Pending::CallTool);
        let m = message(decode(
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "hologram", "data": 1}, {"type": "text", "text": "hi"}]}}),
            &p,
        ));
        let text = serde_json::to_string(&m.unwrap()).unwrap();
        assert!(text.contains("hologram"), "{text}");
        assert!(text.contains("\"hi\""), "{text}");
    }

    #[test]
    fn an_empty_result_object_is_an_empty_result() {
        let p = pending_with("3", Pending::CallTool);
        let m = message(decode(json!({"jsonrpc": "2.0", "id": 3, "result": {}}), &p));
        assert!(
            matches!(m, Some(ServerJsonRpcMessage::Response(_))),
            "{m:?}"
        );
    }

    fn unparsable(bytes: &[u8], p: &PendingMap) -> Decoded {
        let e = serde_json::from_slice::<Value>(bytes).unwrap_err();
        unparsable_line(bytes, &e, p)
    }

    #[test]
    fn an_invalid_json_answer_fails_its_request_at_once() {
        let p = pending_with("7", Pending::CallTool);
        let line = br#"{"jsonrpc":"2.0","result":{"content":[{"id":5}],"x":NaN},"id":7}"#;
        let m = message(unparsable(line, &p));
        assert!(matches!(m, Some(ServerJsonRpcMessage::Error(_))), "{m:?}");
        assert!(p.lock().unwrap().is_empty());
        let p: PendingMap = Arc::default();
        assert!(message(unparsable(br#"{"id":7,"x":NaN}"#, &p)).is_none());
    }

    #[test]
    fn a_tool_list_too_deep_to_parse_is_read_with_its_deep_parts_cut() {
        let mut deep = "1".to_owned();
        for _ in 0..200 {
            deep = format!(r#"{{"x":{deep},"s":"[{{"}}"#);
        }
        let line = format!(
            r#"{{"jsonrpc":"2.0","id":4,"result":{{"tools":[{{"name":"deep","inputSchema":{deep}}},{{"name":"ok"}}]}}}}"#
        );
        let p = pending_with("4", Pending::ListTools);
        let m = message(unparsable(line.as_bytes(), &p)).expect("a message");
        let text = serde_json::to_string(&m).unwrap();
        assert!(text.contains("\"ok\""), "{}", &text[..200]);
    }

    #[test]
    fn a_server_request_rmcp_cannot_read_is_refused_not_skipped() {
        let p: PendingMap = Arc::default();
        let d = decode(
            json!({"jsonrpc": "2.0", "id": "s1", "method": "sampling/createMessage", "params": "not an object"}),
            &p,
        );
        assert!(matches!(d, Decoded::Refuse(Value::String(ref id), _) if id == "s1"));
    }
}
