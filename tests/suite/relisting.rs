//! A scripted server whose tool call changes its tool list and says so with
//! `notifications/tools/list_changed`, and a bridge on it after that call: the setup the
//! re-listing tests (listing_limits, catalog_rebuilds, relisted_labels, server_startup) share.

use mcp_code_mode::bridge::{Bridge, CallBudget};
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

/// The catalog's generation and version (what the warm pool follows) before a call.
pub(super) struct Before {
    pub(super) generation: u64,
    pub(super) catalog_version: u64,
}

/// Opens a bridge on `scenario`'s server alone and calls its tool `tool` with `{}`, which
/// must answer `answer`. Returns the bridge and what its catalog was before the call.
pub(super) async fn open_and_call(
    scenario: &Scenario,
    tool: &str,
    answer: &str,
) -> (Bridge, Before) {
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let before = Before {
        generation: bridge.generation(),
        catalog_version: bridge.catalog_version(),
    };
    let budget = CallBudget::new(10);
    assert_eq!(
        bridge.call(&budget, tool, &json!({})).await.unwrap(),
        answer
    );
    (bridge, before)
}
