//! `/metrics` counters move after a run; `/healthz` tells live from ready, and names a wrapped
//! server that is down (to a token holder only).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{Served, TOKEN, sample};
use crate::suite::common::{example, native_client_ready};

#[test]
fn metrics_counters_move_after_a_run() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--private", "secret"], Some(TOKEN));
    let before = served.metrics();
    assert_eq!(
        sample(&before, "mcp_code_mode_run_duration_seconds_count"),
        Some(0.0),
        "{before}"
    );
    let out = served.client(
        "calls",
        &["print(await add({'a': 1, 'b': 1}))\nprint(await secret({}))\ntry:\n    await add({'a': 1, 'b': 1})\nexcept ToolError:\n    print('refused')"],
    );
    assert_eq!(
        out["calls"][0]["stdout"], "{\"sum\": 2}\ns3cr3t\nrefused\n",
        "{out}"
    );
    let after = served.metrics();
    let get = |name: &str| sample(&after, name);
    assert_eq!(
        get("mcp_code_mode_runs_total{outcome=\"ok\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_run_duration_seconds_count"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_tool_calls_total{server=\"server\",outcome=\"ok\"}"),
        Some(2.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_tool_calls_total{server=\"server\",outcome=\"refused\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        get("mcp_code_mode_refusals_total{reason=\"private_only\"}"),
        Some(1.0),
        "{after}"
    );
    assert_eq!(get("mcp_code_mode_sandboxes_running"), Some(0.0), "{after}");
    assert!(
        after.contains("mcp_code_mode_server_restarts_total{server=\"server\"} 0"),
        "{after}"
    );
    assert!(after.contains("mcp_code_mode_sandboxes_pooled "), "{after}");
}

#[test]
fn healthz_tells_live_from_ready() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&[], None);
    let (status, _) = served.request("GET", "/healthz/live", &[], "");
    assert_eq!(status, 200);
    let end = Instant::now() + Duration::from_secs(60);
    let (status, text) = loop {
        let (status, text) = served.request("GET", "/healthz", &[], "");
        if status == 200 || Instant::now() > end {
            break (status, text);
        }
        assert_eq!(status, 503, "not ready must be 503: {text}");
        assert!(text.contains("\"live\":true"), "{text}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{text}\n{}", served.log());
    assert!(
        text.contains("\"ready\":true") && text.contains("\"sandbox_started\":true"),
        "{text}"
    );
}

#[test]
fn healthz_is_not_ready_while_a_wrapped_server_is_down_and_names_it_only_with_the_token() {
    if !native_client_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("servers.json");
    let toy = example("toy_server");
    std::fs::write(
        &config,
        json!({"mcpServers": {
            "toy": {"command": toy.display().to_string()},
            "broken": {"command": "/bin/false"},
        }})
        .to_string(),
    )
    .unwrap();
    let config = config.display().to_string();
    let served = Served::launch(&["--config", &config], Some(TOKEN), |_, _| {});
    let bearer = format!("Bearer {TOKEN}");
    let with_token = [("Authorization", bearer.as_str())];
    // The sandbox starts; the broken server keeps the replica out of rotation, named.
    let end = Instant::now() + Duration::from_secs(60);
    let text = loop {
        let (status, text) = served.request("GET", "/healthz", &with_token, "");
        assert_eq!(
            status, 503,
            "a replica with a server down is not ready: {text}"
        );
        if text.contains("\"sandbox_started\":true") || Instant::now() > end {
            break text;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let json = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    let body: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["ready"], false, "{text}\n{}", served.log());
    assert_eq!(body["sandbox_started"], true, "{text}\n{}", served.log());
    assert_eq!(body["servers_started"], false, "{text}");
    assert_eq!(body["servers_unavailable"][0]["name"], "broken", "{text}");
    assert_eq!(body["runs_in_flight"], 0, "{text}");
    // Without the token (a load balancer's probe): the overall status, no names or reasons.
    let (status, text) = served.request("GET", "/healthz", &[], "");
    assert_eq!(status, 503, "{text}");
    let json = text.split("\r\n\r\n").nth(1).unwrap_or("").trim();
    let body: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(body["servers_started"], false, "{text}");
    assert!(!json.contains("broken"), "{text}");
    assert!(body.get("servers_unavailable").is_none(), "{text}");
    assert!(body.get("runs_in_flight").is_none(), "{text}");
    // The check starts it again (it fails again), at most every 5 s.
    let logged = |log: &str| log.matches("broken").count();
    let before = logged(&served.log());
    std::thread::sleep(Duration::from_secs(6));
    let _ = served.request("GET", "/healthz", &[], "");
    let end = Instant::now() + Duration::from_secs(10);
    while logged(&served.log()) == before && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        logged(&served.log()) > before,
        "the health check did not retry the broken server: {}",
        served.log()
    );
}
