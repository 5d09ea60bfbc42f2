//! A re-list that no longer has a tool the operator's labels name (`allow`, `private`) is
//! put in force all the same: the tool that is gone leaves the catalog and the rest of the
//! server's new list (a new description here) comes in; a startup list with such a label
//! still stops startup (`catalog::label_check` unit tests).

use mcp_code_mode::bridge::{CallBudget, CallError, Refusal};
use serde_json::json;

use super::misbehaving_servers::{Scenario, entry};
use super::relisting::{open_entry_and_call, relist_steps, relisted};

#[tokio::test]
async fn a_relist_that_drops_a_labelled_tool_leaves_it_out_and_puts_the_rest_of_the_new_list_in_force()
 {
    let object = json!({"type": "object"});
    let new_list = json!([
        {"name": "change", "inputSchema": object},
        {"name": "keep", "description": "Described anew.", "inputSchema": object},
        {"name": "Add", "inputSchema": object},
        {"name": "secret2", "inputSchema": object}
    ]);
    let scenario = Scenario::from_value(
        "renames",
        json!({
            "tools": [
                {"name": "change", "inputSchema": object},
                {"name": "keep", "description": "Described first.", "inputSchema": object},
                {"name": "add", "inputSchema": object},
                {"name": "secret", "inputSchema": object}
            ],
            "on": {"tools/call:change": relist_steps(new_list, 100, "changed")}
        }),
    );
    let server = entry(scenario.spec())
        .allow(["change", "keep", "add", "secret"])
        .private(["secret"]);
    let (bridge, before) = open_entry_and_call(server, "change", "changed").await;
    assert_eq!(before.tools, ["change", "keep", "add", "secret"]);
    relisted(&bridge).await;
    assert!(
        bridge.generation() > before.generation,
        "the new list was refused"
    );
    let catalog = bridge.catalog();
    let kept: Vec<&str> = catalog
        .tools()
        .iter()
        .map(|t| t.mcp_name.as_str())
        .collect();
    // `Add` and `secret2` are tools the allowlist does not name: left out as at a start.
    assert_eq!(kept, ["change", "keep"]);
    let keep = catalog.get("keep").unwrap();
    assert!(keep.stub.contains("Described anew."), "{}", keep.stub);
    drop(catalog);
    let gone = bridge.call(&CallBudget::new(10), "add", &json!({})).await;
    assert!(
        matches!(gone, Err(CallError::Refused(Refusal::NoSuchTool { .. }))),
        "{gone:?}"
    );
    bridge.close().await;
}
