//! The regular expressions of a wrapped server's tools are bounded in memory when the catalog
//! compiles them: one pattern's automaton at most `MAX_PATTERN_AUTOMATON_BYTES`, all of one
//! server's distinct patterns at most `MAX_SERVER_PATTERN_BYTES`. A tool past a bound is left
//! out with a warning naming it; the server's other tools are kept and served.
//!
//! Index: a tool whose pattern compiles to a huge automaton is left out and the rest served;
//! a server whose distinct patterns pass its budget keeps the tools before the budget ran
//! out; the warning naming the limit reaches serve's log and the other tools run.

use mcp_code_mode::bridge::{
    Bridge, CallBudget, MAX_PATTERN_AUTOMATON_BYTES, MAX_SERVER_PATTERN_BYTES,
};
use serde_json::{Value, json};

use super::common::{ExecOptions, exec_with, native_available, require};
use super::misbehaving_servers::{Scenario, entry, kept_tool_names};

/// A pattern some 20 bytes long whose automaton takes several MiB (each of the 50,000
/// repeats of the class is a few automaton states): under the validator's default limit of
/// 10 MiB, over the per-pattern limit.
const HUGE: &str = "^[a-z]{1,50000}$";

/// A pattern whose automaton takes about 0.4 MiB (within the per-pattern limit), so about 0.8
/// MiB as weighed; `n` makes each one distinct.
fn large(n: usize) -> String {
    format!("^[a-z]{{1,8000}}-{n}$")
}

fn tool(name: &str, pattern: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}})
}

fn ok_tool() -> Value {
    json!({"name": "ok", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}})
}

#[tokio::test]
async fn a_tool_whose_pattern_compiles_to_a_huge_automaton_is_left_out_and_the_rest_served() {
    let scenario = Scenario::from_value(
        "huge_pattern",
        json!({
            "tools": [tool("huge", HUGE), ok_tool()],
            "on": {"tools/call:ok": [{"reply": {"content": [{"type": "text", "text": "served"}]}}]}
        }),
    );
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    assert_eq!(
        kept_tool_names(&bridge),
        ["ok"],
        "the huge pattern's tool is left out"
    );
    let budget = CallBudget::new(10);
    assert_eq!(
        bridge.call(&budget, "ok", &json!({"n": 1})).await.unwrap(),
        "served"
    );
    bridge.close().await;
}

#[tokio::test]
async fn a_server_whose_distinct_patterns_pass_its_budget_keeps_the_tools_before_it_ran_out() {
    // Enough distinct large patterns to pass the budget at least once and a half, and one
    // pattern that every tool repeats, paid for once.
    let listed = usize::try_from(MAX_SERVER_PATTERN_BYTES * 3 / 2 / 780_000).unwrap();
    let mut tools: Vec<Value> = (0..listed)
        .map(|i| {
            let mut t = tool(&format!("large_{i}"), &large(i));
            t["inputSchema"]["properties"]["shared"] = json!({"pattern": large(usize::MAX)});
            t
        })
        .collect();
    tools.push(ok_tool());
    let scenario = Scenario::from_value("many_patterns", json!({ "tools": tools }));
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let kept = kept_tool_names(&bridge);
    let large_kept = kept.iter().filter(|n| n.starts_with("large_")).count();
    assert!(
        large_kept > 10 && large_kept < listed,
        "{large_kept} of {listed} kept"
    );
    // The first tools are kept, in order; the ones after the budget ran out are not.
    let expected: Vec<String> = (0..large_kept).map(|i| format!("large_{i}")).collect();
    assert_eq!(kept[..large_kept], expected);
    assert_eq!(
        kept.last().map(String::as_str),
        Some("ok"),
        "a tool without patterns is kept"
    );
    bridge.close().await;
}

#[test]
fn the_warning_naming_the_pattern_limit_reaches_the_log_and_the_other_tools_run() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::from_value(
        "huge_pattern_exec",
        json!({
            "tools": [tool("huge", HUGE), ok_tool()],
            "on": {"tools/call:ok": [{"reply": {"content": [{"type": "text", "text": "served"}]}}]}
        }),
    );
    let run = exec_with(
        "print(await ok(n=1))",
        ExecOptions {
            server: scenario.command(),
            ..Default::default()
        },
    );
    assert_eq!(run.printed().trim(), "served", "{}", run.stderr);
    let limit = format!(
        "would compile to an automaton of more than {} KiB",
        MAX_PATTERN_AUTOMATON_BYTES >> 10
    );
    assert!(
        run.stderr.contains(&limit) && run.stderr.contains("huge"),
        "{}",
        run.stderr
    );
}
