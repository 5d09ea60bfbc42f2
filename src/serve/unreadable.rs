//! Answers to client messages that are not JSON-RPC messages `serve` reads, on both
//! transports.
//!
//! rmcp 3.11 drops a stdio line it cannot parse (a debug log, no answer), answers a line of
//! valid JSON that is no message it knows `-32600` without an `id`, and answers such a POST
//! body `415 Unsupported Media Type`; so a client waited for ever on its request, or was
//! told its media type was wrong. JSON-RPC 2.0 section 5 asks for an error response that
//! carries the request's id, `null` only when the id cannot be detected:
//! - `-32700 Parse error` ([`parse`]) for a text serde_json cannot read into a JSON value:
//!   bad syntax, invalid UTF-8 anywhere (RFC 8259 section 8.1), a lone UTF-16 surrogate
//!   escape (`"\ud800"`, section 8.2), nesting deeper than serde_json's 128 levels, or a
//!   number out of range (`1e400`). The id is read by the byte scanner of the wrapped-server
//!   side ([`top_level_id`]), which needs no valid text;
//! - `-32600 Invalid Request` ([`invalid`]) for a JSON value that is no JSON-RPC 2.0 message
//!   (not an object, `jsonrpc` other than `"2.0"`, an id that is neither a string nor an
//!   integer, a `method` that is no string, a batch: MCP has none since 2025-06-18);
//! - `-32602 Invalid params` for a request of a method rmcp knows whose `params` are missing
//!   or of the wrong shape (rmcp would take it for an unknown method and say `-32601`).
//!
//! A refused notification (`jsonrpc` `"2.0"`, a string `method`, no `id`) gets no answer on stdio (section 4.1:
//! a notification is never answered); over HTTP its POST gets `400` with the error.

use serde::Deserialize;
use serde_json::{Value, json};

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};

use crate::bridge::upstream::json_scan::top_level_id;

/// JSON-RPC 2.0 `Parse error`: invalid JSON was received.
pub(super) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 `Invalid Request`: the JSON sent is not a valid request object.
pub(super) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0 `Invalid params`: invalid method parameters.
pub(super) const INVALID_PARAMS: i64 = -32602;

/// The methods of the client requests rmcp reads into a typed variant of its
/// `ClientRequest` (`tools/call`, `initialize`, ...); a request of one of these that rmcp
/// reads as its custom variant had params the typed variant refused.
///
/// Read from rmcp itself, so an upgrade that adds or drops a typed request changes it too:
/// `ClientRequest` is an untagged union whose typed variants each fix `method` to a
/// constant string, and the JSON Schema rmcp derives for it (schemars, which rmcp's
/// `server` feature turns on) gives each variant's `method` as a `const`; the custom
/// variant's `method` is any string, so it adds none. Worked out once, on first use.
fn typed_methods() -> &'static [String] {
    static METHODS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
        let schema = rmcp::schemars::schema_for!(ClientRequest);
        method_constants(&serde_json::to_value(schema).unwrap_or_default())
    });
    &METHODS
}

/// The `const` of the `method` property of each variant (`anyOf`, else `oneOf`) of the
/// union `schema`, following local `$ref`s (`#/$defs/...`).
fn method_constants(schema: &Value) -> Vec<String> {
    let variants = schema
        .get("anyOf")
        .or_else(|| schema.get("oneOf"))
        .and_then(Value::as_array);
    let mut methods: Vec<String> = variants
        .into_iter()
        .flatten()
        .filter_map(|variant| {
            let method = resolve_ref(schema, variant)?
                .get("properties")?
                .get("method")?;
            Some(
                resolve_ref(schema, method)?
                    .get("const")?
                    .as_str()?
                    .to_owned(),
            )
        })
        .collect();
    methods.sort();
    methods.dedup();
    methods
}

/// `node`, or the node of `schema` its local `$ref` (`#/...`) leads to, following at most 16
/// references (`None` past that, or for a reference that leads nowhere).
fn resolve_ref<'a>(schema: &'a Value, mut node: &'a Value) -> Option<&'a Value> {
    for _ in 0..16 {
        let Some(pointer) = node
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix('#'))
        else {
            return Some(node);
        };
        node = schema.pointer(pointer)?;
    }
    None
}

/// Whether `method` is one rmcp reads into a typed request ([`typed_methods`]).
fn is_typed(method: &str) -> bool {
    typed_methods().iter().any(|m| m == method)
}

/// A client message refused: the error response and why (for the log).
#[derive(Debug)]
pub(super) struct Refusal {
    /// The whole JSON-RPC error response.
    pub(super) answer: Value,
    /// Whether the message was a notification (`jsonrpc` `"2.0"`, a string `method`, no
    /// `id`), which stdio does not answer.
    pub(super) notification: bool,
    /// serde_json's or this module's reason.
    pub(super) why: String,
}

/// The JSON value of the message `text` (a UTF-8 byte order mark at its start is allowed,
/// as rmcp allows it), or its `-32700 Parse error` refusal.
pub(super) fn parse(text: &[u8]) -> Result<Value, Refusal> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    serde_json::from_slice::<Value>(text).map_err(|e| {
        let why = e.to_string();
        Refusal {
            answer: error_answer(text, PARSE_ERROR, &format!("Parse error: {why}")),
            notification: false,
            why,
        }
    })
}

/// The `-32600 Invalid Request` or `-32602 Invalid params` refusal of `message` when it is no
/// JSON-RPC message rmcp reads (see the module documentation), else `None`.
pub(super) fn invalid(message: &Value) -> Option<Refusal> {
    let error = match ClientJsonRpcMessage::deserialize(message) {
        Ok(JsonRpcMessage::Request(request)) => match &request.request {
            ClientRequest::CustomRequest(custom) if is_typed(&custom.method) => {
                format!("{} needs params of its own shape", custom.method)
            }
            _ => return None,
        },
        Ok(_) => return None,
        Err(e) => e.to_string(),
    };
    let method = message.get("method").and_then(Value::as_str);
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_number());
    let envelope_ok = message.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && method.is_some()
        && message
            .get("id")
            .is_none_or(|id| id.is_string() || id.is_i64() || id.is_u64());
    let (code, text) = match method {
        Some(method) if envelope_ok && is_typed(method) => {
            (INVALID_PARAMS, format!("Invalid params: {method}: {error}"))
        }
        _ => (INVALID_REQUEST, format!("Invalid Request: {error}")),
    };
    Some(Refusal {
        answer: json!({
            "jsonrpc": "2.0",
            "id": id.cloned().unwrap_or(Value::Null),
            "error": {"code": code, "message": text},
        }),
        notification: envelope_ok && message.get("id").is_none(),
        why: error,
    })
}

/// The JSON-RPC error response to the message `text` (or its first part, when it was too
/// long to keep): `code` and `message`, with the message's id when the scanner reads a
/// string or number id from `text`, else `null`.
pub(super) fn error_answer(text: &[u8], code: i64, message: &str) -> Value {
    let id = top_level_id(text)
        .filter(|id| id.is_string() || id.is_number())
        .unwrap_or(Value::Null);
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_refusal(text: &[u8]) -> Value {
        parse(text).expect_err("should be refused").answer
    }

    #[test]
    fn every_text_serde_cannot_read_is_a_parse_error_with_the_id_when_it_can_be_read() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":5,"method":"ping","params":{{"a":{}{}}}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let cases: &[(&[u8], Value)] = &[
            (b"{not json", Value::Null),
            (
                br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"\ud800"}}"#,
                1.into(),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":{\"x\":\"\xFF\"}}",
                2.into(),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\",\"params\":{\"\xC3\":1}}",
                3.into(),
            ),
            (
                br#"{"jsonrpc":"2.0","id":4,"method":"ping","params":{"n":1e400}}"#,
                4.into(),
            ),
            (deep.as_bytes(), 5.into()),
            (
                br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
                Value::Null,
            ),
            (
                b"\xFF\xFE{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}",
                6.into(),
            ),
        ];
        for (text, id) in cases {
            let answer = parse_refusal(text);
            assert_eq!(answer["error"]["code"], PARSE_ERROR, "{answer}");
            assert_eq!(&answer["id"], id, "{}", String::from_utf8_lossy(text));
        }
        assert!(parse(b"\xEF\xBB\xBF{\"a\":\"\\ud83d\\ude00\"}").is_ok());
    }

    #[test]
    fn a_value_that_is_no_json_rpc_message_is_an_invalid_request_with_its_readable_id() {
        let cases = [
            (
                json!({"jsonrpc": "2.0", "id": [1, 2], "method": "ping"}),
                Value::Null,
            ),
            (
                json!([{"jsonrpc": "2.0", "id": 85, "method": "ping"}]),
                Value::Null,
            ),
            (
                json!({"jsonrpc": "1.0", "id": 4, "method": "ping"}),
                4.into(),
            ),
            (json!({"jsonrpc": "2.0", "id": 3, "method": 5}), 3.into()),
            (
                json!({"jsonrpc": "2.0", "id": "s", "result": 5, "error": 1}),
                "s".into(),
            ),
            (json!("just a string"), Value::Null),
        ];
        for (message, id) in cases {
            let refusal = invalid(&message).unwrap_or_else(|| panic!("{message} passed"));
            assert_eq!(
                refusal.answer["error"]["code"], INVALID_REQUEST,
                "{message}"
            );
            assert_eq!(refusal.answer["id"], id, "{message}");
            assert!(!refusal.notification, "{message}");
        }
    }

    #[test]
    fn a_known_method_with_missing_or_malformed_params_is_invalid_params() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": [1, 2]}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {}}),
        ] {
            let refusal = invalid(&message).unwrap_or_else(|| panic!("{message} passed"));
            assert_eq!(refusal.answer["error"]["code"], INVALID_PARAMS, "{message}");
            assert_eq!(refusal.answer["id"], 2, "{message}");
        }
    }

    #[test]
    fn valid_messages_and_unknown_methods_pass_and_a_bad_notification_is_marked() {
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "vendor/thing", "params": {"a": 1}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 1, "result": {}}),
        ] {
            assert!(invalid(&message).is_none(), "{message}");
        }
        let bad = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5});
        if let Some(refusal) = invalid(&bad) {
            assert!(refusal.notification, "{bad}");
        }
    }

    #[test]
    fn the_typed_methods_are_read_from_rmcp_and_exclude_the_custom_variant() {
        let methods = typed_methods();
        for method in [
            "initialize",
            "ping",
            "tools/call",
            "tools/list",
            "resources/read",
            "prompts/get",
            "completion/complete",
            "logging/setLevel",
            "tasks/get",
        ] {
            assert!(methods.iter().any(|m| m == method), "{method}: {methods:?}");
        }
        assert!(!is_typed("vendor/thing") && !is_typed("notifications/initialized"));
        // Each one that rmcp does not read into its typed variant (params that variant
        // refuses) is answered `-32602`, never passed on to be told `-32601`.
        let mut refused = Vec::new();
        for method in methods {
            let message = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": 5});
            let typed = matches!(
                ClientJsonRpcMessage::deserialize(&message),
                Ok(JsonRpcMessage::Request(request))
                    if !matches!(request.request, ClientRequest::CustomRequest(_))
            );
            if !typed {
                let refusal = invalid(&message).unwrap_or_else(|| panic!("{message} passed"));
                assert_eq!(refusal.answer["error"]["code"], INVALID_PARAMS, "{message}");
                refused.push(method.as_str());
            }
        }
        assert!(refused.contains(&"tools/call"), "{refused:?}");
    }

    #[test]
    fn method_constants_follow_references_and_skip_variants_without_one() {
        let schema = json!({
            "anyOf": [
                {"$ref": "#/$defs/Ping"},
                {"type": "object", "properties": {"method": {"type": "string", "const": "tools/list"}}},
                {"$ref": "#/$defs/Custom"},
                {"$ref": "#/$defs/Loop"},
                {"$ref": "#/$defs/Missing"}
            ],
            "$defs": {
                "Ping": {"type": "object", "properties": {"method": {"$ref": "#/$defs/PingMethod"}}},
                "PingMethod": {"type": "string", "const": "ping"},
                "Custom": {"type": "object", "properties": {"method": {"type": "string"}}},
                "Loop": {"$ref": "#/$defs/Loop"}
            }
        });
        assert_eq!(method_constants(&schema), ["ping", "tools/list"]);
    }

    #[test]
    fn the_answer_carries_the_id_when_it_can_be_read() {
        let answer = error_answer(br#"{"id":7,"method":"x","params":{"a":"\ud800"}}"#, -1, "m");
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -1);
        assert_eq!(error_answer(b"{oops", -1, "m")["id"], Value::Null);
        assert_eq!(
            error_answer(br#"{"id":{"x":1}}"#, -1, "m")["id"],
            Value::Null
        );
    }
}
