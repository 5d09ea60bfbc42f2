//! The Python SDK's and the TypeScript SDK's Streamable HTTP clients each initialize, list,
//! call, and cancel a run.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Served, TOKEN, sample};
use crate::suite::common::native_client_ready;

#[test]
fn a_python_sdk_client_initializes_lists_and_calls_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], Some(TOKEN));
    let out = served.client(
        "calls",
        &[
            "print(await add({'a': 2, 'b': 3}))",
            "raise ValueError('boom')",
        ],
    );
    assert_eq!(out["tools"], serde_json::json!(["run_python"]), "{out}");
    assert_eq!(out["calls"][0]["stdout"], "{\"sum\": 5}\n", "{out}");
    assert_eq!(out["calls"][0]["is_error"], false, "{out}");
    assert_eq!(out["calls"][1]["is_error"], true, "{out}");
    assert!(
        out["calls"][1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("boom"),
        "{out}"
    );
}

#[test]
fn a_python_sdk_client_cancels_a_run_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let out = served.client("cancel", &[]);
    assert_eq!(out["next_stdout"], "next\n", "{out}");
    assert!(out["cancel_returned_s"].as_f64().unwrap() < 5.0, "{out}");
    // The server saw the cancel: the run ended as cancelled, and its next call never left.
    let deadline = Instant::now() + Duration::from_secs(10);
    let metrics = loop {
        let metrics = served.metrics();
        if sample(&metrics, "mcp_code_mode_runs_total{outcome=\"cancelled\"}") == Some(1.0)
            || Instant::now() > deadline
        {
            break metrics;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        sample(&metrics, "mcp_code_mode_runs_total{outcome=\"cancelled\"}"),
        Some(1.0),
        "{metrics}\n{}",
        served.log()
    );
    let journal = std::fs::read_to_string(&served.journal).unwrap_or_default();
    assert!(!journal.contains("after-cancel"), "{journal}");
}

/// What `tests/clients/ts/http.mjs SCENARIO` printed against `served`.
fn ts_client(served: &Served, scenario: &str) -> Option<Value> {
    let ready = crate::suite::common::require(
        crate::suite::ts_client::client_dir().is_some(),
        "node and npm could not install the TypeScript MCP SDK (tests/clients/ts)",
    );
    if !ready {
        return None;
    }
    let dir = crate::suite::ts_client::client_dir()?;
    let mut command = Command::new("node");
    command
        .arg(dir.join("http.mjs"))
        .arg(scenario)
        .arg(served.url())
        .arg(&served.journal);
    match &served.token {
        Some(token) => command.env("MCP_TOKEN", token),
        None => command.env_remove("MCP_TOKEN"),
    };
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    Some(
        serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
            panic!(
                "http.mjs {scenario} printed no JSON ({e}): {stdout}\nstderr: {}\nserve: {}",
                String::from_utf8_lossy(&out.stderr),
                served.log()
            )
        }),
    )
}

#[test]
fn a_typescript_sdk_client_initializes_lists_and_calls_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], Some(TOKEN));
    let Some(out) = ts_client(&served, "calls") else {
        return;
    };
    assert_eq!(out["tools"], serde_json::json!(["run_python"]), "{out}");
    assert_eq!(out["stdout"], "{\"sum\": 42}\n", "{out}");
    assert_eq!(out["isError"], false, "{out}");
}

#[test]
fn a_typescript_sdk_client_cancels_a_run_over_http() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let Some(out) = ts_client(&served, "cancel") else {
        return;
    };
    assert!(
        out["outcome"]
            .as_str()
            .unwrap_or("")
            .starts_with("rejected"),
        "{out}"
    );
    assert_eq!(out["next_stdout"], "next\n", "{out}");
    let end = Instant::now() + Duration::from_secs(10);
    while sample(
        &served.metrics(),
        "mcp_code_mode_runs_total{outcome=\"cancelled\"}",
    ) != Some(1.0)
    {
        assert!(
            Instant::now() < end,
            "the run was not cancelled: {}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let journal = std::fs::read_to_string(&served.journal).unwrap_or_default();
    assert!(!journal.contains("after-cancel"), "{journal}");
}
