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
//!   integer rmcp can hold, a `method` that is no string, a batch: MCP has none since
//!   2025-06-18). rmcp holds a number id as an i64, so a request whose id is a number
//!   outside -2^63..2^63-1 (`18446744073709551616`, `1e20`) is refused here, never run; so
//!   is an integer in float form from 2^53 on (`1e16`), which rmcp reads through an f64:
//!   past 2^53 an f64 holds only every second integer, so the float cannot say which was sent;
//! - `-32602 Invalid params` for a request of a method rmcp knows whose `params` are missing
//!   or of the wrong shape (rmcp would take it for an unknown method and say `-32601`).
//!
//! An answer's id is the request's id as the client wrote it: serde_json keeps a number's
//! digits ([`crate::exact_json`]) but writes one in float form with its exponent made
//! plain (`1E20` as `1e+20`), so such an id is copied from the request's text
//! ([`ErrorAnswer::line`]).
//!
//! A refused notification (`jsonrpc` `"2.0"`, a string `method`, no `id`) gets no answer on stdio (section 4.1:
//! a notification is never answered); over HTTP its POST gets `400` with the error.

use serde::Deserialize;
use serde_json::{Value, json};

use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, NumberOrString};

use crate::bridge::upstream::json_scan::{top_level_id, top_level_id_text};

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

/// serve's own JSON-RPC error response to a client message, with the message's id as the
/// client wrote it.
#[derive(Debug)]
pub(super) struct ErrorAnswer {
    /// The response: `jsonrpc`, `id` (a string, a number or `null`) and `error` (`code`,
    /// `message`). A number id in float form is written from `id_text`.
    pub(super) value: Value,
    /// The id's text in the message, for a number id in float form.
    id_text: Option<String>,
}

impl ErrorAnswer {
    /// The response to the message `text`, whose `id` member is `id` (a string or number,
    /// else the response says `null`).
    fn new(id: Option<&Value>, text: &[u8], code: i64, message: &str) -> Self {
        let id = id.filter(|id| id.is_string() || id.is_number());
        // Only a number token that reads back as this very id is copied into the answer.
        let id_text = id
            .filter(|id| id.is_f64())
            .and_then(|id| {
                top_level_id_text(text)
                    .filter(|raw| serde_json::from_slice::<Value>(raw).is_ok_and(|v| v == *id))
            })
            .and_then(|raw| std::str::from_utf8(raw).ok())
            .map(str::to_owned);
        Self {
            value: json!({
                "jsonrpc": "2.0",
                "id": id.cloned().unwrap_or(Value::Null),
                "error": {"code": code, "message": message},
            }),
            id_text,
        }
    }

    /// The response's JSON-RPC error code.
    pub(super) fn code(&self) -> &Value {
        &self.value["error"]["code"]
    }

    /// The response as JSON text (no `\n`), its id as the client wrote it.
    pub(super) fn line(&self) -> String {
        match &self.id_text {
            Some(id) => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"error":{}}}"#,
                self.value["error"]
            ),
            None => self.value.to_string(),
        }
    }
}

/// A client message refused: the error response and why (for the log).
#[derive(Debug)]
pub(super) struct Refusal {
    /// The whole JSON-RPC error response.
    pub(super) answer: ErrorAnswer,
    /// Whether the message was a notification (`jsonrpc` `"2.0"`, a string `method`, no
    /// `id`), which stdio does not answer.
    pub(super) notification: bool,
    /// serde_json's or this module's reason.
    pub(super) why: String,
}

/// The JSON value of the message `text` (a UTF-8 byte order mark at its start is allowed,
/// as rmcp allows it), or its `-32700 Parse error` refusal (boxed: it is far larger than
/// the value).
pub(super) fn parse(text: &[u8]) -> Result<Value, Box<Refusal>> {
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    crate::exact_json::from_slice(text).map_err(|e| {
        let why = e.to_string();
        Box::new(Refusal {
            answer: error_answer(text, PARSE_ERROR, &format!("Parse error: {why}")),
            notification: false,
            why,
        })
    })
}

/// The `-32600 Invalid Request` or `-32602 Invalid params` refusal of `message` (read from
/// `text`) when it is no JSON-RPC message rmcp reads (see the module documentation), else
/// `None`.
pub(super) fn invalid(message: &Value, text: &[u8]) -> Option<Refusal> {
    let id = message.get("id");
    // rmcp cannot hold such an id, so it could never answer the request with it.
    let unusable_id = id.filter(|id| id.is_number() && NumberOrString::deserialize(*id).is_err());
    let error = if let Some(id) = unusable_id {
        format!(
            "the id {} is neither an integer from -2^63 to 2^63-1 nor one below 2^53 in float form (1.0, 1e2), the ids serve takes",
            answer_id_text(id, text)
        )
    } else if let Some(why) = (message.get("method").and_then(Value::as_str) == Some("tools/call"))
        .then(|| message.get("params").and_then(progress_token_error))
        .flatten()
    {
        why
    } else {
        match crate::exact_json::typed_ref::<ClientJsonRpcMessage>(message) {
            Ok(JsonRpcMessage::Request(request)) => match &request.request {
                ClientRequest::CustomRequest(custom) if is_typed(&custom.method) => {
                    format!("{} needs params of its own shape", custom.method)
                }
                _ => return None,
            },
            Ok(_) => return None,
            Err(e) => e.to_string(),
        }
    };
    let method = message.get("method").and_then(Value::as_str);
    let envelope_ok = message.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
        && method.is_some()
        && message
            .get("id")
            .is_none_or(|id| NumberOrString::deserialize(id).is_ok());
    let (code, message_text) = match method {
        Some(method) if envelope_ok && is_typed(method) => {
            (INVALID_PARAMS, format!("Invalid params: {method}: {error}"))
        }
        _ => (INVALID_REQUEST, format!("Invalid Request: {error}")),
    };
    Some(Refusal {
        answer: ErrorAnswer::new(id, text, code, &message_text),
        notification: envelope_ok && message.get("id").is_none(),
        why: error,
    })
}

/// Why the `progressToken` in `params._meta` cannot be taken, when there is one that is not
/// a string or an integer rmcp holds (-2^63..2^63-1, or below 2^53 in float form). MCP
/// (basic/utilities/progress) says a progress token MUST be a string or an integer; a run
/// whose token could not be echoed would get no progress without anyone saying so, so such
/// a `tools/call` is refused (`-32602`) instead.
pub(super) fn progress_token_error(params: &Value) -> Option<String> {
    let token = params.pointer("/_meta/progressToken")?;
    NumberOrString::deserialize(token).err()?;
    // The token is shown cut: an object or array may fill a whole line (16 MiB), which the
    // answer and the log line would otherwise carry back in full.
    let token = crate::bridge::refusal::cap(&token.to_string(), 100);
    Some(format!(
        "the progressToken {token} is neither a string nor an integer from -2^63 to 2^63-1 (below 2^53 in float form), the tokens serve can send progress under (MCP: a progress token is a string or an integer)"
    ))
}

/// The JSON-RPC error response to the message `text` (or its first part, when it was too
/// long to keep): `code` and `message`, with the message's id when the scanner reads a
/// string or number id from `text`, else `null`.
pub(super) fn error_answer(text: &[u8], code: i64, message: &str) -> ErrorAnswer {
    ErrorAnswer::new(top_level_id(text).as_ref(), text, code, message)
}

/// `id` as the message `text` wrote it, for a log line or an error message.
fn answer_id_text(id: &Value, text: &[u8]) -> String {
    let answer = ErrorAnswer::new(Some(id), text, 0, "");
    answer.id_text.unwrap_or_else(|| id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`invalid`] on `message` as serde_json writes it.
    fn refuse(message: &Value) -> Option<Refusal> {
        invalid(message, message.to_string().as_bytes())
    }

    fn parse_refusal(text: &[u8]) -> Value {
        parse(text).expect_err("should be refused").answer.value
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
            let refusal = refuse(&message).unwrap_or_else(|| panic!("{message} passed"));
            assert_eq!(
                refusal.answer.value["error"]["code"], INVALID_REQUEST,
                "{message}"
            );
            assert_eq!(refusal.answer.value["id"], id, "{message}");
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
            let refusal = refuse(&message).unwrap_or_else(|| panic!("{message} passed"));
            assert_eq!(
                refusal.answer.value["error"]["code"], INVALID_PARAMS,
                "{message}"
            );
            assert_eq!(refusal.answer.value["id"], 2, "{message}");
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
            assert!(refuse(&message).is_none(), "{message}");
        }
        let bad = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 5});
        if let Some(refusal) = refuse(&bad) {
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
                let refusal = refuse(&message).unwrap_or_else(|| panic!("{message} passed"));
                assert_eq!(
                    refusal.answer.value["error"]["code"], INVALID_PARAMS,
                    "{message}"
                );
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
    fn a_run_whose_progress_token_is_no_string_or_integer_is_invalid_params() {
        for token in [
            "1.5",
            "true",
            "null",
            r#"{"a":1}"#,
            "[1]",
            "18446744073709551616",
            "1e16",
        ] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":"1"}},"_meta":{{"progressToken":{token}}}}}}}"#
            );
            let message = parse(text.as_bytes()).unwrap();
            let refusal = invalid(&message, text.as_bytes()).expect(&text);
            assert_eq!(*refusal.answer.code(), INVALID_PARAMS, "{text}");
            assert_eq!(refusal.answer.value["id"], 3);
            let said = refusal.answer.value["error"]["message"].as_str().unwrap();
            // The token as serde_json writes it: an exponent in its plain form.
            let shown = token.replace("e16", "e+16");
            assert!(
                said.starts_with(&format!("Invalid params: tools/call: the progressToken {shown} is neither a string nor an integer")),
                "{said}"
            );
        }
        for token in [r#""abc""#, "7", "-9223372036854775808", "1e3", "1.0"] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":"1"}},"_meta":{{"progressToken":{token}}}}}}}"#
            );
            let message = parse(text.as_bytes()).unwrap();
            assert!(invalid(&message, text.as_bytes()).is_none(), "{text}");
        }
        // Only a run's token is checked: serve sends progress for nothing else.
        let ping = json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": {"progressToken": 1.5}}});
        assert!(refuse(&ping).is_none());
    }

    #[test]
    fn a_huge_progress_token_is_shown_cut_in_the_refusal() {
        let token = format!("[{}]", vec!["1"; 100_000].join(","));
        let params =
            json!({"_meta": {"progressToken": serde_json::from_str::<Value>(&token).unwrap()}});
        let why = progress_token_error(&params).unwrap();
        assert!(why.len() < 1_000, "{} bytes", why.len());
        assert!(why.contains("the progressToken [1,1,"), "{why}");
    }

    #[test]
    fn the_answer_carries_the_id_when_it_can_be_read() {
        let answer =
            error_answer(br#"{"id":7,"method":"x","params":{"a":"\ud800"}}"#, -1, "m").value;
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -1);
        assert_eq!(error_answer(b"{oops", -1, "m").value["id"], Value::Null);
        assert_eq!(
            error_answer(br#"{"id":{"x":1}}"#, -1, "m").value["id"],
            Value::Null
        );
    }

    #[test]
    fn an_id_outside_i64_is_refused_and_answered_as_the_client_wrote_it() {
        for id in [
            "18446744073709551616",
            "9223372036854775808",
            "-9999999999999999999",
            "1e20",
            "1.5",
            "1e16",
            "9007199254740992.0",
            "-12345678901234567.0",
            "-1E+400",
        ] {
            let text = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":"1"}}}}}}"#
            );
            let answer = match parse(text.as_bytes()) {
                // `-1E+400` is out of any float's range: serde_json reads no value.
                Err(refusal) => refusal.answer,
                Ok(message) => {
                    let refusal = invalid(&message, text.as_bytes()).expect(&text);
                    assert_eq!(*refusal.answer.code(), INVALID_REQUEST, "{text}");
                    assert!(refusal.why.contains(id), "{}", refusal.why);
                    assert!(
                        refusal.why.contains("below 2^53 in float form"),
                        "{}",
                        refusal.why
                    );
                    refusal.answer
                }
            };
            let line = answer.line();
            let wanted = if id == "-1E+400" { "null" } else { id };
            assert!(line.contains(&format!(r#""id":{wanted},"#)), "{line}");
            let back: Value = serde_json::from_str(&line).expect(&line);
            assert_eq!(back["error"], answer.value["error"], "{line}");
        }
        // Integers rmcp holds, and strings, are answered as before; a fraction-free float
        // is one rmcp reads as an integer (and answers as one).
        let text = br#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"ping"}"#;
        let message = parse(text).unwrap();
        assert!(invalid(&message, text).is_none(), "{message}");
        let answer = error_answer(br#"{"id":"1e20","x":"\ud800"}"#, PARSE_ERROR, "m");
        assert!(
            answer.line().contains(r#""id":"1e20""#),
            "{}",
            answer.line()
        );
        let message = json!({"jsonrpc": "2.0", "id": 1.0, "method": "ping"});
        assert!(refuse(&message).is_none());
        for id in ["1e15", "9007199254740991.0", "-9007199254740991.0"] {
            let text = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            let message = parse(text.as_bytes()).unwrap();
            assert!(invalid(&message, text.as_bytes()).is_none(), "{text}");
        }
    }
}
