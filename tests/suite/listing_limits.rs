//! A wrapped server's tool list is bounded as a whole: all its pages (and, at a start, the
//! handshake) within one startup timeout, at most `MAX_LISTED_TOOLS` tools and
//! `MAX_LISTED_BYTES` bytes of tools. A server past a bound at its start is unavailable with
//! a reason naming the bound; on a re-list its old tools stay.

use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, MAX_LISTED_BYTES, MAX_LISTED_TOOLS, OpenOptions, ServerSpec};
use serde_json::{Value, json};

use super::misbehaving_servers::{Scenario, entry};
use super::relisting::{open_and_call, relist_steps, relisted};

/// Far longer than any bound here takes to trip on a loaded 2-core host, far shorter than
/// what the unbounded listing took (1000 pages, each with its own timeout).
const GIVE_UP: Duration = Duration::from_secs(60);

/// A server whose `tools/list` answers every request with `page` plus a new `nextCursor`:
/// it never stops paging.
fn endless_pages(name: &str, page: Value, before: &[Value]) -> Scenario {
    let mut steps = before.to_vec();
    let mut result = json!({"tools": page});
    result["nextCursor"] = json!("$CURSOR");
    steps.push(json!({"reply": result}));
    Scenario::from_value(name, json!({"on": {"tools/list": steps}}))
}

fn named(scenario: &Scenario, name: &str, startup: Option<Duration>) -> ServerSpec {
    let mut spec = scenario.spec();
    spec.name = name.into();
    spec.startup_timeout = startup;
    spec
}

/// Open `spec` beside a good server; the catalog's reason why `spec` is unavailable.
async fn unavailable_reason(spec: ServerSpec) -> String {
    let good = Scenario::load("env");
    let entries = vec![entry(spec), entry(named(&good, "good", None))];
    let options = OpenOptions {
        prefixed: true,
        strict: false,
    };
    let bridge = tokio::time::timeout(GIVE_UP, Bridge::open_with(entries, options))
        .await
        .expect("the listing ends at a bound, not after every page the server sends")
        .expect("opens with the good server");
    let catalog = bridge.catalog();
    assert_eq!(catalog.tools().len(), 1, "only the good server's tool");
    let reason = catalog
        .unavailable()
        .iter()
        .find(|(name, _)| name == "pager")
        .map(|(_, why)| why.clone())
        .unwrap_or_else(|| panic!("pager is not unavailable: {:?}", catalog.unavailable()));
    bridge.close().await;
    reason
}

#[tokio::test]
async fn a_server_paging_slowly_fails_when_its_startup_timeout_ends_for_the_whole_listing() {
    // Each page comes well within the timeout; all of them together never end.
    let scenario = endless_pages("slow", json!("$tools*1"), &[json!({"sleep_ms": 300})]);
    let started = std::time::Instant::now();
    let reason = unavailable_reason(named(&scenario, "pager", Some(Duration::from_secs(2)))).await;
    assert!(reason.contains("startup timeout of 2 s"), "{reason}");
    assert!(started.elapsed() < GIVE_UP, "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_server_listing_more_tools_than_the_cap_is_unavailable_naming_the_cap() {
    let scenario = endless_pages("many", json!("$tools*1000"), &[]);
    let reason = unavailable_reason(named(&scenario, "pager", None)).await;
    assert!(
        reason.contains(&format!("more than {MAX_LISTED_TOOLS} tools")),
        "{reason}"
    );
}

#[tokio::test]
async fn a_server_listing_more_bytes_than_the_cap_is_unavailable_naming_the_cap() {
    let tool =
        json!({"name": "big", "description": "$x*1000000", "inputSchema": {"type": "object"}});
    let scenario = endless_pages("large", json!([tool]), &[]);
    let reason = unavailable_reason(named(&scenario, "pager", None)).await;
    assert!(
        reason.contains(&format!("more than {} MiB", MAX_LISTED_BYTES >> 20)),
        "{reason}"
    );
}

/// After `bridge`'s call of a tool that sent `list_changed`: lets the notification arrive,
/// refreshes as the next run does, and asserts the server was listed again and the catalog
/// generation is still `before` (no new catalog).
async fn relisted_without_a_new_catalog(bridge: &Bridge, scenario: &Scenario, before: u64) {
    relisted(bridge).await;
    assert!(
        scenario.received().matches("\"tools/list\"").count() >= 2,
        "the server was listed again"
    );
    assert_eq!(bridge.generation(), before, "no new catalog");
}

#[tokio::test]
async fn a_relist_over_the_cap_keeps_the_old_tools() {
    // One page (about 1 MB) just over the tool cap.
    let too_many = format!("$tools*{}", MAX_LISTED_TOOLS + 1);
    let scenario = Scenario::from_value(
        "grows",
        json!({
            "tools": [{"name": "grow", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:grow": relist_steps(json!(too_many), 100, "grown")}
        }),
    );
    let (bridge, before) = open_and_call(&scenario, "grow", "grown").await;
    relisted_without_a_new_catalog(&bridge, &scenario, before.generation).await;
    let catalog = bridge.catalog();
    assert_eq!(catalog.tools().len(), 1);
    assert!(catalog.get("grow").is_some());
    bridge.close().await;
}

#[tokio::test]
async fn a_list_changed_with_the_same_tools_changes_nothing() {
    // The catalog generation is what the warm pool (stale sandboxes) and serve's
    // `notifications/tools/list_changed` to its client follow: unchanged, neither acts.
    let tools = json!([{"name": "same", "inputSchema": {"type": "object"}}]);
    let scenario = Scenario::from_value(
        "same",
        json!({
            "tools": tools,
            "on": {"tools/call:same": relist_steps(tools, 100, "same")}
        }),
    );
    let (bridge, before) = open_and_call(&scenario, "same", "same").await;
    relisted_without_a_new_catalog(&bridge, &scenario, before.generation).await;
    assert_eq!(
        bridge.catalog_version(),
        before.catalog_version,
        "the pool's sandboxes stay"
    );
    bridge.close().await;
}

#[tokio::test]
async fn a_list_changed_with_the_same_tools_in_another_order_keeps_the_pool() {
    // The server answers each re-list with its tools reversed (a hash map's order): the
    // same tools, so no new catalog and the pool's sandboxes (catalog_version) stay.
    let tools = json!([
        {"name": "first", "description": "one", "inputSchema": {"type": "object"}},
        {"name": "second", "description": "two", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    ]);
    let reversed: Vec<Value> = tools.as_array().unwrap().iter().rev().cloned().collect();
    let scenario = Scenario::from_value(
        "shuffled",
        json!({
            "tools": tools,
            "on": {"tools/call:first": relist_steps(json!(reversed), 100, "first")}
        }),
    );
    let (bridge, before) = open_and_call(&scenario, "first", "first").await;
    relisted_without_a_new_catalog(&bridge, &scenario, before.generation).await;
    assert_eq!(
        bridge.catalog_version(),
        before.catalog_version,
        "the pool's sandboxes stay"
    );
    let names: Vec<String> = bridge
        .catalog()
        .tools()
        .iter()
        .map(|t| t.mcp_name.clone())
        .collect();
    assert_eq!(names, ["first", "second"], "the catalog keeps its order");
    bridge.close().await;
}
