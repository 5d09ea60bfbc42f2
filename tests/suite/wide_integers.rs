//! Integers no 64 bits hold (2^64 to 2^128, -2^127 to -2^63-1, longer ones) anywhere in
//! a message pass through rmcp's message types as written, from a wrapped server and from
//! the client alike. serde buffers rmcp's untagged and flattened types in a form with no
//! 128-bit integers, so such a number once broke the whole message (src/exact_json.rs):
//! a server whose schema bounded a uint64 by 2^64 could not be wrapped.
//!
//! - wrapped servers (`scripted_server` on stdio, `tests/clients/scripted_http_server.py`
//!   over Streamable HTTP, JSON bodies and SSE): a tool whose inputSchema has
//!   `exclusiveMaximum: 2^64` is listed and checks values against it exactly; an
//!   `initialize` result holding such integers starts the server; an error answer whose
//!   `data` holds one keeps the server's message; a server's `ping` holding one in `_meta`
//!   is answered (stdio, SSE); a `notifications/tools/list_changed` holding one is heard
//!   (stdio);
//! - the client of `serve` (stdio and HTTP): `initialize`, `ping` and `tools/call` with such
//!   an integer in `_meta` are answered, not refused `-32602`.

use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError, Refusal};
use serde_json::{Value, json};

use super::common::{initialize, native_available, next_message, send_line, serve_toy};
use super::http_serving::Served;
use super::lenient_parsing::{Server, Via, open_with};
use super::misbehaving_servers::{Scenario, kept_tool_names};

/// 2^64, the bound the Python SDK writes for a uint64 (`Field(ge=0, lt=2**64)`).
const TWO_TO_64: &str = "18446744073709551616";
/// Integers each in another band serde_json reads in its own way: i128, beyond 128 bits.
const OTHERS: &str = r#"[-170141183460469231731687303715884105728, -9223372036854775809, 10000000000000000000000000000000000000000]"#;

const EVERY_WAY: [Via; 3] = [Via::Stdio, Via::HttpJson, Via::HttpSse];

/// `text` (JSON with `TWO_TO_64` and `OTHERS` spelled out) as a value.
fn wide(text: &str) -> Value {
    let text = text
        .replace("TWO_TO_64", TWO_TO_64)
        .replace("OTHERS", OTHERS);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The bridge on the scripted server playing `scenario`, reached `via`.
async fn open(scenario: Value, via: Via) -> (Server, Bridge) {
    let (server, bridge) = open_with(Scenario::from_value("wide", scenario), via).await;
    (server, bridge.with_call_timeout(Duration::from_secs(20)))
}

#[tokio::test]
async fn a_server_whose_input_schema_bounds_an_integer_by_2_to_the_64_is_wrapped_and_checks_values_against_the_bound()
 {
    let scenario = wide(
        r#"{"tools": [{"name": "store", "_meta": {"n": TWO_TO_64, "others": OTHERS},
            "inputSchema": {"type": "object", "required": ["key"], "properties": {
                "key": {"type": "integer", "minimum": 0, "exclusiveMaximum": TWO_TO_64}}}}],
            "on": {"tools/call:store": [{"reply": {"content": [{"type": "text", "text": "stored"}]}}]}}"#,
    );
    for via in EVERY_WAY {
        let (_server, bridge) = open(scenario.clone(), via).await;
        assert_eq!(kept_tool_names(&bridge), ["store"], "{via:?}");
        let budget = CallBudget::new(5);
        let largest = wide(r#"{"key": 18446744073709551615}"#);
        let stored = bridge.call(&budget, "store", &largest).await;
        assert_eq!(stored.unwrap(), "stored", "{via:?}");
        let refused = bridge
            .call(&budget, "store", &wide(r#"{"key": TWO_TO_64}"#))
            .await;
        assert!(
            matches!(
                refused,
                Err(CallError::Refused(Refusal::OutsideSchema { .. }))
            ),
            "{via:?}: {refused:?}"
        );
        bridge.close().await;
    }
}

#[tokio::test]
async fn an_initialize_result_holding_integers_beyond_64_bits_starts_the_server() {
    let scenario = wide(
        r#"{"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "on": {"initialize": [{"reply": {"protocolVersion": "2025-06-18",
                "capabilities": {"tools": {}, "experimental": {"x": {"n": TWO_TO_64, "others": OTHERS}}},
                "serverInfo": {"name": "wide", "version": "1"}, "_meta": {"n": TWO_TO_64}}}]}}"#,
    );
    for via in EVERY_WAY {
        let (_server, bridge) = open(scenario.clone(), via).await;
        assert_eq!(kept_tool_names(&bridge), ["t"], "{via:?}");
        bridge.close().await;
    }
}

#[tokio::test]
async fn an_error_answer_whose_data_holds_an_integer_beyond_64_bits_fails_the_call_with_the_servers_message()
 {
    let scenario = wide(
        r#"{"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:t": [{"error": {"code": -32000, "message": "the key is taken",
                "data": {"n": TWO_TO_64, "others": OTHERS}}}]}}"#,
    );
    for via in EVERY_WAY {
        let (_server, bridge) = open(scenario.clone(), via).await;
        let failed = bridge.call(&CallBudget::new(5), "t", &json!({})).await;
        let text = format!("{failed:?}");
        assert!(
            failed.is_err() && text.contains("the key is taken") && !text.contains("u128"),
            "{via:?}: {text}"
        );
        bridge.close().await;
    }
}

#[tokio::test]
async fn a_servers_ping_holding_an_integer_beyond_64_bits_in_its_meta_is_answered() {
    let scenario = wide(
        r#"{"tools": [{"name": "t", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:t": [
                {"ask": {"method": "ping", "params": {"_meta": {"n": TWO_TO_64, "others": OTHERS}}}},
                {"reply": {"content": [], "structuredContent": {"answers": "$ANSWERS"}}}]}}"#,
    );
    // A server's request comes over HTTP only in an SSE stream.
    for via in [Via::Stdio, Via::HttpSse] {
        let (_server, bridge) = open(scenario.clone(), via).await;
        let text = bridge.call(&CallBudget::new(5), "t", &json!({})).await;
        let answers: Value = serde_json::from_str(&text.unwrap()).unwrap();
        let answer = &answers["answers"][0];
        assert_eq!(answer["result"], json!({}), "{via:?}: {answers}");
        bridge.close().await;
    }
}

#[tokio::test]
async fn a_list_changed_notification_holding_an_integer_beyond_64_bits_is_heard() {
    let notice = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{{"_meta":{{"n":{TWO_TO_64},"others":{OTHERS}}}}}}}"#
    );
    let scenario = json!({
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
        "on": {"tools/call:t": [
            {"set_tools": [{"name": "t", "inputSchema": {"type": "object"}},
                           {"name": "added", "inputSchema": {"type": "object"}}]},
            {"raw": format!("{notice}\n{{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{{\"content\":[]}}}}\n")}]},
    });
    let (_server, bridge) = open(scenario, Via::Stdio).await;
    bridge
        .call(&CallBudget::new(5), "t", &json!({}))
        .await
        .unwrap();
    let mut changed = bridge.watch_catalog();
    let heard = tokio::time::timeout(Duration::from_secs(20), async {
        while kept_tool_names(&bridge) != ["t", "added"] {
            changed.changed().await.unwrap();
        }
    });
    assert!(heard.await.is_ok(), "{:?}", kept_tool_names(&bridge));
    bridge.close().await;
}

/// Client requests with such integers in `_meta` (and `experimental`): `initialize`,
/// `ping`, and a `tools/call` when the native sandbox can run it.
fn client_requests() -> Vec<(Value, bool)> {
    let mut requests = vec![
        (
            wide(
                r#"{"jsonrpc":"2.0","id":"i2","method":"initialize","params":{"protocolVersion":"2025-11-25",
                "capabilities":{"experimental":{"x":{"n":TWO_TO_64}}},"clientInfo":{"name":"wide","version":"0"},
                "_meta":{"n":TWO_TO_64,"others":OTHERS}}}"#,
            ),
            false,
        ),
        (
            wide(
                r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{"n":TWO_TO_64,"others":OTHERS}}}"#,
            ),
            false,
        ),
    ];
    if native_available() {
        requests.push((
            wide(
                r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python",
                "arguments":{"code":"print(6 * 7)"},"_meta":{"n":TWO_TO_64,"others":OTHERS}}}"#,
            ),
            true,
        ));
    }
    requests
}

#[tokio::test]
async fn a_clients_requests_holding_integers_beyond_64_bits_in_their_meta_are_answered_over_stdio()
{
    for (request, runs) in client_requests() {
        let (_serve, mut stdin, mut stdout) = serve_toy();
        if request["method"] != "initialize" {
            initialize(&mut stdin, &mut stdout).await;
        }
        send_line(&mut stdin, &request.to_string()).await;
        // Notifications may come first; the answer names the request's id.
        let mut answer = next_message(&mut stdout).await;
        while answer.get("id").is_none() {
            answer = next_message(&mut stdout).await;
        }
        assert_eq!(answer["id"], request["id"], "{request}: {answer}");
        assert!(answer["result"].is_object(), "{request}: {answer}");
        if runs {
            assert!(answer.to_string().contains("42"), "{answer}");
        }
    }
}

#[test]
fn a_clients_requests_holding_integers_beyond_64_bits_in_their_meta_are_answered_over_http() {
    let served = Served::start(&[], None);
    let session = served.open_session();
    let new_session = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    for (request, runs) in client_requests() {
        let body = request.to_string();
        let (status, text) = if request["method"] == "initialize" {
            served.request("POST", "/mcp", &new_session, &body)
        } else {
            served.post_in(&session, &body)
        };
        assert_eq!(status, 200, "{request}: {text}");
        assert!(
            text.contains(r#""result":"#) && !text.contains(r#""error":{"code""#),
            "{request}: {text}"
        );
        if runs {
            assert!(text.contains("42"), "{text}");
        }
    }
}
