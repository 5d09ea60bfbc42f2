//! A call's JSON Schema check against a hostile inputSchema (a "billion laughs" DAG of
//! `$ref`s, a diamond inside a recursive cycle) never stalls the host: it runs off the async
//! runtime, one at a time per run, never past the run's deadline, in bounded memory and
//! bounded work (src/bridge/check.rs, src/bridge/catalog/schema.rs).
//!
//! Index: off the runtime (another run is served meanwhile); the deadline (a call still
//! being checked is never sent); the work budget (a check too costly to run is refused
//! unchecked, ordinary recursive schemas pass). Bounded memory for a refused argument:
//! `misbehaving_servers::schemas::an_argument_with_a_quarter_million_schema_errors_is_refused_in_bounded_memory`.
//!
//! Regular expressions are weighed by their strings: many lookaround patterns on a long
//! string are refused as too costly, a plain pattern on the longest string is checked.
//! `unevaluatedProperties` over a chain of `anyOf`s, anchors named per resource and an
//! `enum` compared value by value are weighed by what the validator does: refused at once
//! when deep or large, checked and sent when shallow or small.
//!
//! The scenario `costly_schemas` lists `laughsN` (each level `allOf` two `$ref`s to the
//! level below: 2^N evaluations for one string), `tree25`, `cycle_diamond`, `node_tree`,
//! `lookarounds` (`allOf` of 20 patterns of three lookaheads each, quadratic in the string
//! on the backtracking engine), `plain_pattern` (`^[a-z0-9 ]*$`) and `echo`.

use std::sync::Arc;
use std::time::Instant;

use mcp_code_mode::bridge::{CallBudget, CallError, Refusal};
use serde_json::{Value, json};
use testkit::schemas::{anchor_chain, unevaluated_chain};

use super::common::{ExecOptions, exec_with, native_available, require};
use super::misbehaving_servers::{Scenario, open_spec};

/// Gathered calls of one run whose checks are each costly but within the work budget.
const GATHERED: usize = 200;

#[tokio::test]
async fn a_costly_argument_check_never_delays_another_run() {
    // A one-thread runtime: a check run on it would hold every other task until it ends.
    let scenario = Scenario::load("costly_schemas");
    let bridge = Arc::new(open_spec(scenario.spec()).await);
    let started = Instant::now();
    let costly = {
        let bridge = bridge.clone();
        tokio::spawn(async move {
            let budget = CallBudget::new(200);
            let args = json!({"x": "s"});
            let calls = (0..GATHERED).map(|_| bridge.call(&budget, "laughs17", &args));
            let outcomes = futures::future::join_all(calls).await;
            (started.elapsed(), outcomes)
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let echoed = bridge.call(&CallBudget::new(200), "echo", &json!({})).await;
    let echo_waited = started.elapsed();
    let (costly_took, outcomes) = costly.await.expect("the costly run");
    assert_eq!(echoed.expect("echo"), "ok");
    for outcome in outcomes {
        assert_eq!(outcome.expect("a valid argument passes"), "ok");
    }
    // Another run's call is answered long before the costly run's checks are through
    // (they run one at a time, so that run takes GATHERED checks' time).
    assert!(
        echo_waited < costly_took / 4,
        "echo waited {echo_waited:?}; the costly run took {costly_took:?}"
    );
    bridge.close().await;
}

#[test]
fn a_call_still_being_checked_at_the_deadline_is_never_sent() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("costly_schemas");
    // Far more checks than the deadline has time for on a fast idle machine (about 10 ms
    // each), and a call budget that cannot end the run first: at 600 calls and the default
    // budget of 200 the budget ran out before the deadline there.
    let calls = 3000;
    let code = format!(
        "import asyncio\nawait asyncio.gather(*(laughs17({{'x': 's'}}) for _ in range({calls})))\n"
    );
    let started = Instant::now();
    let run = exec_with(
        &code,
        ExecOptions {
            args: vec![
                "--deadline".into(),
                "2".into(),
                "--max-calls".into(),
                calls.to_string(),
            ],
            server: scenario.command(),
            ..Default::default()
        },
    );
    let took = started.elapsed();
    assert!(
        run.error().contains("deadline"),
        "the run was not stopped at its deadline: {run:?}"
    );
    let sent: usize = run
        .stderr
        .lines()
        .find_map(|l| l.split("calls sent: ").nth(1))
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no calls-sent line: {run:?}"));
    // The checks still queued or running at the deadline sent nothing, then or later.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let received = scenario
        .received()
        .lines()
        .filter(|l| l.contains("\"tools/call\""))
        .count();
    // A call counted as sent at the deadline may not have reached the server; none more did.
    assert!(
        received <= sent,
        "the server got {received} calls, exec sent {sent}"
    );
    assert!(
        sent < calls,
        "every call was sent, the deadline did not stop the checks ({took:?})"
    );
}

#[tokio::test]
async fn a_check_over_the_work_budget_is_refused_unchecked_and_never_sent() {
    let scenario = Scenario::load("costly_schemas");
    let bridge = open_spec(scenario.spec()).await;
    let budget = CallBudget::new(200);
    let mut diamond = json!(1);
    for _ in 0..40 {
        diamond = json!({"x": diamond});
    }
    // 2^31 evaluations for a valid string, 2^21 for an invalid one (878 MB of errors once),
    // a diamond in a cycle doubling per level of the argument (2^40).
    for (tool, args) in [
        ("laughs30", json!({"x": "s"})),
        ("laughs20", json!({"x": 1})),
        ("cycle_diamond", json!({"x": diamond})),
    ] {
        // Without the budget these checks would run for minutes (or hours).
        let outcome = tokio::time::timeout(
            std::time::Duration::from_secs(60),
            bridge.call(&budget, tool, &args),
        )
        .await
        .unwrap_or_else(|_| panic!("{tool}: the check ran on past a minute"));
        match outcome {
            Err(CallError::Refused(refusal @ Refusal::TooCostlyToCheck { .. })) => {
                let text = refusal.to_string();
                assert!(text.contains("1000000 evaluations"), "{text}");
            }
            other => panic!("{tool}: expected a too-costly refusal, got {other:?}"),
        }
    }
    assert!(
        !scenario.received().contains("\"tools/call\""),
        "a call went out: {}",
        scenario.received()
    );
    // Ordinary recursive schemas are not caught: a tree as deep as serde allows, and a DAG
    // of properties (each level's `l` and `r` refer to the level below) walked by a real
    // argument.
    let mut node = json!({"v": 1});
    let mut tree = json!({"v": "leaf"});
    for _ in 0..25 {
        node = json!({"v": 1, "left": node, "children": [{"v": 2}, {"v": 3}]});
        tree = json!({"l": tree, "r": {}});
    }
    assert_eq!(
        bridge
            .call(&budget, "node_tree", &json!({"root": node}))
            .await
            .expect("node_tree"),
        "ok"
    );
    assert_eq!(
        bridge
            .call(&budget, "tree25", &json!({"t": tree}))
            .await
            .expect("tree25"),
        "ok"
    );
    bridge.close().await;
}

#[test]
fn lookaround_patterns_on_a_long_string_are_refused_as_too_costly_and_a_plain_pattern_is_checked() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("costly_schemas");
    // Nearly 16 KiB, the most one call's arguments may be.
    let code = "s = 'a' * 15000 + 'b'\n\
        try:\n    await lookarounds({'s': s})\n    print('sent')\n\
        except ToolError as e:\n    print('refused', str(e))\n\
        print(await plain_pattern({'s': 'a' * 16000}))\n\
        try:\n    await plain_pattern({'s': 'A'})\nexcept ToolError:\n    print('outside')\n\
        print(await lookarounds({'s': 'aab'}))\n";
    let run = exec_with(
        code,
        ExecOptions {
            server: scenario.command(),
            ..Default::default()
        },
    );
    let printed = run.printed();
    let mut lines = printed.lines();
    let refused = lines.next().unwrap_or_default();
    assert!(
        refused.starts_with("refused") && refused.contains("1000000 evaluations"),
        "{run:?}"
    );
    assert_eq!(
        lines.collect::<Vec<_>>(),
        ["ok", "outside", "ok"],
        "{run:?}"
    );
    // Two calls reached the server: the plain pattern's and the short string's.
    let received = scenario
        .received()
        .lines()
        .filter(|l| l.contains("\"tools/call\""))
        .count();
    assert_eq!(received, 2, "{}", scenario.received());
}

#[tokio::test]
async fn unevaluated_chains_cross_resource_anchors_and_large_enums_are_refused_unchecked() {
    let tool = |name: &str, schema: Value| json!({"name": name, "inputSchema": schema});
    let arrays: Vec<Value> = (0..1_000).map(|i| json!([i])).collect();
    let scenario = Scenario::from_value(
        "weighed_schemas",
        json!({
            "tools": [
                tool("uneval26", unevaluated_chain(26)),
                tool("uneval4", unevaluated_chain(4)),
                tool("anchor26", anchor_chain(26)),
                tool("anchor4", anchor_chain(4)),
                tool("enum_arrays", json!({"type": "object", "properties": {"s": {"type": "array", "items": {"enum": arrays}}}})),
            ],
            "on": {"tools/call": [{"reply": {"content": [{"type": "text", "text": "ok"}]}}]},
        }),
    );
    let bridge = open_spec(scenario.spec()).await;
    let budget = CallBudget::new(200);
    // Checked, these take days (2^26 walks) or 4 billion comparisons: they must be refused
    // before the check starts.
    for (tool, args) in [
        ("uneval26", json!({"a": 1})),
        ("anchor26", json!({"x": 1})),
        ("enum_arrays", json!({"s": vec![json!([1]); 4_000]})),
    ] {
        match bridge.call(&budget, tool, &args).await {
            Err(CallError::Refused(refusal @ Refusal::TooCostlyToCheck { .. })) => {
                let text = refusal.to_string();
                assert!(text.contains("1000000 evaluations"), "{tool}: {text}");
            }
            other => panic!("{tool}: expected a too-costly refusal, got {other:?}"),
        }
    }
    assert!(
        !scenario.received().contains("\"tools/call\""),
        "a call went out: {}",
        scenario.received()
    );
    // The same shapes, shallow or small, are checked: valid calls sent, invalid refused.
    for (tool, args) in [
        ("uneval4", json!({"a": 1})),
        ("anchor4", json!({"x": "s"})),
        ("enum_arrays", json!({"s": [[1], [999]]})),
    ] {
        assert_eq!(
            bridge.call(&budget, tool, &args).await.expect(tool),
            "ok",
            "{tool}"
        );
    }
    for (tool, args) in [
        ("uneval4", json!({"a": 1, "zz": 2})),
        ("anchor4", json!({"x": 1})),
        ("enum_arrays", json!({"s": [[1000]]})),
    ] {
        match bridge.call(&budget, tool, &args).await {
            Err(CallError::Refused(Refusal::OutsideSchema { .. })) => {}
            other => panic!("{tool}: expected an outside-schema refusal, got {other:?}"),
        }
    }
    bridge.close().await;
}
