//! A scripted server whose tool call changes its tool list and says so with
//! `notifications/tools/list_changed`, and a bridge on it after that call: the setup the
//! re-listing tests (listing_limits, catalog_rebuilds, relisted_labels, server_startup) share.

use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, CallBudget, ServerEntry};
use serde_json::{Value, json};

use super::misbehaving_servers::{Scenario, entry};

/// A server's `notifications/tools/list_changed`, as the scripted server writes it.
pub(super) const LIST_CHANGED: &str =
    "{\"jsonrpc\": \"2.0\", \"method\": \"notifications/tools/list_changed\"}\n";

/// The scripted steps of a tool call that changes the server's tools: later `tools/list`
/// answers send `tools` (a list, or a `$tools*N`-style string), then the server sends
/// `list_changed`, waits `pause_ms` and answers with the text `answer`.
pub(super) fn relist_steps(tools: Value, pause_ms: u64, answer: &str) -> Value {
    json!([
        {"set_tools": tools},
        {"raw": LIST_CHANGED},
        {"sleep_ms": pause_ms},
        {"reply": {"content": [{"type": "text", "text": answer}]}}
    ])
}

/// The catalog before a call: its generation and version (what the warm pool follows)
/// and its tools' names.
pub(super) struct Before {
    pub(super) generation: u64,
    pub(super) catalog_version: u64,
    pub(super) tools: Vec<String>,
}

/// Opens a bridge on `scenario`'s server alone and calls its tool `tool` with `{}`, which
/// must answer `answer`. Returns the bridge and what its catalog was before the call.
pub(super) async fn open_and_call(
    scenario: &Scenario,
    tool: &str,
    answer: &str,
) -> (Bridge, Before) {
    open_entry_and_call(entry(scenario.spec()), tool, answer).await
}

/// [`open_and_call`] on a server entry of the test's own (labels, a selection).
pub(super) async fn open_entry_and_call(
    server: ServerEntry,
    tool: &str,
    answer: &str,
) -> (Bridge, Before) {
    let bridge = Bridge::open(vec![server], false).await.expect("opens");
    let before = Before {
        generation: bridge.generation(),
        catalog_version: bridge.catalog_version(),
        tools: bridge
            .catalog()
            .tools()
            .iter()
            .map(|t| t.mcp_name.clone())
            .collect(),
    };
    let budget = CallBudget::new(10);
    assert_eq!(
        bridge.call(&budget, tool, &json!({})).await.unwrap(),
        answer
    );
    (bridge, before)
}

/// After a call whose answer came with the server's `list_changed`: waits 200 ms for the
/// re-list, then refreshes as the next run does.
pub(super) async fn relisted(bridge: &Bridge) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    bridge.refresh().await;
}
