//! Catalog builds never hold up the runtime: a wrapped server listing thousands of tools
//! with real schemas makes a build take seconds, and the build runs off the runtime thread
//! (docs/architecture.md, "The catalog"), so everything else goes on meanwhile; a storm of
//! `list_changed` during a build costs at most one more re-list, which reads the last list.
//!
//! The builds are made slow with `scripted_server`'s `$heavy_tools*N`, and every time bound
//! here is relative to the build's own duration, measured in the same test.
//!
//! Index: the runtime keeps answering while a re-listed catalog builds; a storm of
//! list_changed during a build costs at most two re-lists, the last with the final list.

use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError};
use serde_json::{Value, json};

use super::misbehaving_servers::{Scenario, entry};
use super::relisting::{open_and_call, relist_steps};

/// Tools per heavy list: a build of seconds in a debug build (each tool's eight patterns
/// are weighed and compiled), far under the listing caps.
const HEAVY: usize = 150;
/// Far longer than any build here takes, even on a loaded 2-core host.
const GIVE_UP: Duration = Duration::from_secs(180);

/// Valid arguments for `heavy_0` (examples/scripted_server.rs: `p0`, `p1` required, each
/// matching `^[a-z]{1,16}(-[0-9]+)?-N$`).
fn heavy_args() -> Value {
    json!({"p0": "a-0", "p1": "b-1"})
}

/// Wait, ticking every 2 ms, until the bridge's catalog generation passes `before`: how
/// long that took and the longest a 2 ms tick waited (the runtime's longest stall).
async fn until_new_catalog(bridge: &Bridge, before: u64) -> (Duration, Duration) {
    let started = Instant::now();
    let mut longest = Duration::ZERO;
    while bridge.generation() == before {
        assert!(started.elapsed() < GIVE_UP, "no new catalog in {GIVE_UP:?}");
        let tick = Instant::now();
        tokio::time::sleep(Duration::from_millis(2)).await;
        longest = longest.max(tick.elapsed());
    }
    (started.elapsed(), longest)
}

// A current-thread runtime, as serve's: a build on it would stall every other task.
#[tokio::test]
async fn the_runtime_keeps_answering_while_a_relisted_catalog_builds() {
    let heavy = json!(format!("$heavy_tools*{HEAVY}"));
    let scenario = Scenario::from_value(
        "grows",
        json!({
            "tools": [{"name": "grow", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:grow": relist_steps(heavy, 0, "grown")}
        }),
    );
    let (bridge, before) = open_and_call(&scenario, "grow", "grown").await;
    let (took, longest) = until_new_catalog(&bridge, before.generation).await;
    let catalog = bridge.catalog();
    assert_eq!(catalog.tools().len(), HEAVY, "the heavy list is in force");
    eprintln!("re-list and build: {took:?}; the runtime's longest stall: {longest:?}");
    // Without the build off the runtime, one stall is nearly all of it.
    assert!(
        longest * 2 < took,
        "the runtime stalled for {longest:?} of the {took:?} the re-list and build took"
    );
    // The new catalog's tool passes its checks and reaches the server (which has no answer
    // scripted for it).
    let outcome = bridge
        .call(&CallBudget::new(10), "heavy_0", &heavy_args())
        .await;
    assert!(
        matches!(&outcome, Err(CallError::ToolFailed(why)) if why.contains("answered with an error")),
        "{outcome:?}"
    );
    bridge.close().await;
}

#[tokio::test]
async fn a_storm_of_list_changed_during_a_build_costs_at_most_two_relists_the_last_with_the_final_list()
 {
    // Each call of `heavy_K` makes the server list one tool fewer and say so: while the
    // first re-list's build runs, the test calls them one after another (the runtime is
    // free), a storm as long as the build.
    let storm = 40;
    let on: serde_json::Map<String, Value> = (0..storm)
        .map(|k| {
            let fewer = json!(format!("$heavy_tools*{}", HEAVY - 1 - k));
            let steps = relist_steps(fewer, 0, &k.to_string());
            (format!("tools/call:heavy_{k}"), steps)
        })
        .collect();
    let scenario = Scenario::from_value(
        "storm",
        json!({"tools": format!("$heavy_tools*{HEAVY}"), "on": on}),
    );
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let before = bridge.generation();
    let budget = CallBudget::new(100);
    let mut sent = 0;
    let started = Instant::now();
    while sent == 0 || (bridge.generation() == before && sent < storm) {
        let answer = bridge
            .call(&budget, &format!("heavy_{sent}"), &heavy_args())
            .await;
        assert_eq!(answer.unwrap(), sent.to_string());
        sent += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let first = started.elapsed();
    let final_tools = HEAVY - sent;
    while bridge.catalog().tools().len() != final_tools {
        assert!(
            started.elapsed() < GIVE_UP,
            "the final list never came in force"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // Whatever would still come after the storm: one more build's time and the re-list
    // interval.
    tokio::time::sleep(first + mcp_code_mode::bridge::RELIST_INTERVAL).await;
    let relists = scenario.received().matches("\"tools/list\"").count() - 1;
    let catalogs = bridge.generation() - before;
    eprintln!(
        "{sent} list_changed in the {first:?} of the first re-list; {relists} re-lists, {catalogs} new catalogs"
    );
    assert!(
        sent >= 3,
        "only {sent} list_changed could be sent while the first re-list built"
    );
    assert!(relists <= 2, "{relists} re-lists for one storm");
    assert!(catalogs <= 2, "{catalogs} new catalogs for one storm");
    assert_eq!(bridge.catalog().tools().len(), final_tools);
    bridge.close().await;
}
