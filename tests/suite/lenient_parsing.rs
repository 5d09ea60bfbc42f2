//! Lenient about what wrapped servers send, strict about what they may do (issue 11): a
//! malformed optional field never costs a tool, a server or a text.
//!
//! `scripted_server` on `tests/scenarios/lenient.json` answers `initialize` with fields of
//! the wrong type, lists tools with string hints and wrong-typed optional fields, and
//! answers calls with content blocks whose annotations, names or extra fields are off. The
//! bridge must start, keep every tool, and hand each text over. The repairs themselves are
//! unit-tested in src/bridge/upstream/lenient.rs; the schema rules in
//! src/bridge/catalog/schema.rs.

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError};
use serde_json::json;

use super::misbehaving_servers::{Scenario, entry};

async fn open() -> (Scenario, Bridge) {
    let scenario = Scenario::load("lenient");
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .unwrap_or_else(|e| panic!("a server with odd optional fields did not start: {e}"));
    (scenario, bridge)
}

#[tokio::test]
async fn odd_optional_fields_cost_no_tool_and_no_server() {
    let (_scenario, bridge) = open().await;
    let catalog = bridge.catalog();
    for name in [
        "hinted",
        "odd_fields",
        "priority_text",
        "audience_text",
        "nameless_link",
        "extra_fields",
        "odd_result",
        "any_object",
        "external_ref",
    ] {
        assert!(catalog.get(name).is_some(), "{name} was left out");
    }
    // What could be read is kept: the description of a tool with odd fields.
    let stub = &catalog.get("odd_fields").unwrap().stub;
    assert!(stub.contains("Fields of the wrong type."), "{stub}");
    bridge.close().await;
}

#[tokio::test]
async fn texts_with_odd_annotations_or_fields_reach_the_code() {
    let (_scenario, bridge) = open().await;
    let budget = CallBudget::new(20);
    let call = |tool: &'static str| {
        let (bridge, budget) = (&bridge, &budget);
        async move { bridge.call(budget, tool, &json!({})).await }
    };
    assert_eq!(call("priority_text").await.unwrap(), "important\nhalf");
    assert_eq!(call("audience_text").await.unwrap(), "for the system");
    assert_eq!(
        call("nameless_link").await.unwrap(),
        "[resource link: file:///data/report.csv (file:///data/report.csv)]"
    );
    assert_eq!(
        call("extra_fields").await.unwrap(),
        "kept\n7\n[image: image/png, 4 bytes of base64]"
    );
    // `isError: "true"` is an error, not a success.
    assert_eq!(
        call("odd_result").await,
        Err(CallError::ToolFailed("failed politely".into()))
    );
    bridge.close().await;
}

#[tokio::test]
async fn an_object_schema_without_properties_accepts_any_object() {
    let (_scenario, bridge) = open().await;
    let budget = CallBudget::new(20);
    let args = json!({"anything": [1, 2], "at": {"all": true}});
    assert_eq!(
        bridge.call(&budget, "any_object", &args).await.unwrap(),
        "any"
    );
    assert!(
        bridge
            .call(&budget, "any_object", &json!([1]))
            .await
            .is_err()
    );
    bridge.close().await;
}

#[tokio::test]
async fn an_external_ref_keeps_its_tool_and_the_rest_of_the_schema_is_checked() {
    let (_scenario, bridge) = open().await;
    let budget = CallBudget::new(20);
    let ok = json!({"n": 1, "cfg": {"whatever": "the remote schema says"}});
    assert_eq!(
        bridge.call(&budget, "external_ref", &ok).await.unwrap(),
        "configured"
    );
    for bad in [
        json!({"cfg": 1}),
        json!({"n": "x"}),
        json!({"n": 1, "zzz": 2}),
    ] {
        let outcome = bridge.call(&budget, "external_ref", &bad).await;
        assert!(
            matches!(outcome, Err(CallError::Refused(_))),
            "{bad}: {outcome:?}"
        );
    }
    bridge.close().await;
}
