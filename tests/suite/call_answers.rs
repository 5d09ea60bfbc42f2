//! Answers to a `tools/call` that hold no tool result, or whose `isError` is no boolean:
//! each such call fails with a message that says what was wrong with the answer, and the
//! connection, which is fine, stays (no claim that it failed, nothing restarted, a call in
//! flight beside it answered). Local (stdio) servers, whose calls are written beside rmcp
//! (`upstream::raw_call`), and remote ones, whose calls go through rmcp's `call_tool`.

use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError};
use serde_json::{Value, json};

use super::lenient_parsing::{Server, http_spec};
use super::misbehaving_servers::{Scenario, open_spec};

/// A server whose tools answer in the ways under test, and `fine` and `later` (after
/// 300 ms) with ordinary results.
fn scenario() -> Scenario {
    let answers = [
        ("null_result", json!(null)),
        ("array_result", json!([1, 2])),
        ("string_result", json!("done")),
        (
            "fine",
            json!({"content": [{"type": "text", "text": "fine"}]}),
        ),
        (
            "error_yes",
            json!({"content": [{"type": "text", "text": "all good"}], "isError": "yes"}),
        ),
        (
            "error_two",
            json!({"structuredContent": {"why": "quota"}, "isError": 2}),
        ),
    ];
    let object = json!({"type": "object"});
    let mut tools: Vec<Value> = answers
        .iter()
        .map(|(name, _)| json!({"name": name, "inputSchema": object}))
        .collect();
    tools.push(json!({"name": "later", "inputSchema": object}));
    let mut on: serde_json::Map<String, Value> = answers
        .into_iter()
        .map(|(name, result)| (format!("tools/call:{name}"), json!([{"reply": result}])))
        .collect();
    on.insert(
        "tools/call:later".into(),
        json!([{"sleep_ms": 300}, {"reply": {"content": [{"type": "text", "text": "later"}]}}]),
    );
    Scenario::from_value("call_answers", json!({"tools": tools, "on": on}))
}

/// The bridge on [`scenario`], over stdio or, with `mode` (`json`, `sse`), Streamable HTTP.
async fn open(mode: Option<&str>) -> (Server, Bridge) {
    let mut server = Server {
        scenario: scenario(),
        http: None,
    };
    let spec = match mode {
        None => server.scenario.spec(),
        Some(mode) => http_spec(&mut server, mode),
    };
    (server, open_spec(spec).await)
}

const TRANSPORTS: [Option<&str>; 3] = [None, Some("json"), Some("sse")];

/// The `ToolError` text of a call to `tool`, which must fail as the server's failure.
async fn failure(bridge: &Bridge, tool: &str, via: Option<&str>) -> String {
    match bridge.call(&CallBudget::new(50), tool, &json!({})).await {
        Err(CallError::ToolFailed(text)) => text,
        other => panic!("{via:?}: {tool}: expected a failed call, got {other:?}"),
    }
}

#[tokio::test]
async fn a_call_answered_with_a_null_or_array_result_fails_as_no_tool_result_and_the_connection_stays()
 {
    for via in TRANSPORTS {
        let (_server, bridge) = open(via).await;
        let bridge = std::sync::Arc::new(bridge);
        // A call in flight on the same connection while the bad answers come.
        let in_flight = {
            let bridge = bridge.clone();
            tokio::spawn(async move { bridge.call(&CallBudget::new(1), "later", &json!({})).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        for (tool, what) in [
            ("null_result", "null"),
            ("array_result", "an array"),
            ("string_result", "a string"),
        ] {
            let text = failure(&bridge, tool, via).await;
            let said =
                format!("{tool} failed: the server's answer to the call is not a tool result");
            assert!(text.starts_with(&said), "{via:?}: {text}");
            // A local server's answer is read here, so its result's type is named; rmcp
            // reads a remote one and says only that it is no tool result.
            if via.is_none() {
                assert_eq!(text, format!("{said} (its result is {what})"));
            }
        }
        assert_eq!(in_flight.await.unwrap().unwrap(), "later", "{via:?}");
        assert_eq!(
            bridge
                .call(&CallBudget::new(1), "fine", &json!({}))
                .await
                .unwrap(),
            "fine",
            "{via:?}"
        );
        assert_eq!(
            bridge.restarts(),
            [("scripted".to_owned(), 0)],
            "{via:?}: nothing restarts"
        );
        bridge.close().await;
    }
}

#[tokio::test]
async fn a_result_whose_is_error_is_no_boolean_fails_the_call_saying_why() {
    for via in TRANSPORTS {
        let (_server, bridge) = open(via).await;
        assert_eq!(
            failure(&bridge, "error_yes", via).await,
            "[the server's isError is a string, not a boolean: the result is read as an error]\nall good",
            "{via:?}"
        );
        assert_eq!(
            failure(&bridge, "error_two", via).await,
            "[the server's isError is a number, not a boolean: the result is read as an error]\n{\"why\": \"quota\"}",
            "{via:?}"
        );
        bridge.close().await;
    }
}
