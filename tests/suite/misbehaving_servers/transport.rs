//! Framing and floods: junk lines, CRLF and BOMs skipped; an endless line, heavy stderr and
//! many large responses handled with bounded memory.

use std::time::{Duration, Instant};

use mcp_code_mode::bridge::CallBudget;
use serde_json::json;

use super::{
    FLOOD_GROWTH_LIMIT_KIB, Scenario, assert_memory_bounded, call, measure_flood, open, refusal,
    timed,
};

#[tokio::test]
async fn junk_lines_crlf_and_byte_order_marks_are_skipped_around_real_messages() {
    let scenario = Scenario::load("transport");
    let bridge = open(&scenario).await;
    for _ in 0..3 {
        assert_eq!(call(&bridge, "echo").await.unwrap(), "echoed");
    }
    bridge.close().await;
}

#[tokio::test]
async fn a_line_of_hundreds_of_megabytes_fails_the_call_with_bounded_memory() {
    assert_memory_bounded(
        "transport::probe_endless_line",
        "endless line (400 MB sent)",
        FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by a_line_of_hundreds_of_megabytes_fails_the_call_with_bounded_memory"]
async fn probe_endless_line() {
    measure_flood(|bridge| async move {
        let (outcome, took) = timed(&bridge, "endless_line").await;
        let why = refusal(outcome);
        assert!(why.contains("over 16 MiB"), "{why}");
        assert!(took < Duration::from_secs(10), "took {took:?}");
        eprintln!("probe: the call failed after {took:?}: {why}");
    })
    .await;
}

#[tokio::test]
async fn heavy_stderr_is_drained_without_blocking_the_server_or_growing_memory() {
    assert_memory_bounded(
        "transport::probe_heavy_stderr",
        "heavy stderr (100 MB)",
        FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by heavy_stderr_is_drained_without_blocking_the_server_or_growing_memory"]
async fn probe_heavy_stderr() {
    measure_flood(|bridge| async move {
        let (outcome, took) = timed(&bridge, "noisy").await;
        assert_eq!(outcome.unwrap(), "still here");
        eprintln!("probe: 100 MB of stderr, answered after {took:?}");
    })
    .await;
}

#[tokio::test]
async fn many_concurrent_large_responses_are_each_refused_with_bounded_memory() {
    assert_memory_bounded(
        "transport::probe_concurrent_large_responses",
        "16 concurrent 4 MB responses",
        2 * FLOOD_GROWTH_LIMIT_KIB,
    );
}

#[tokio::test]
#[ignore = "a probe: run alone in its own process by many_concurrent_large_responses_are_each_refused_with_bounded_memory"]
async fn probe_concurrent_large_responses() {
    measure_flood(|bridge| async move {
        let budget = CallBudget::new(200);
        let started = Instant::now();
        let args = json!({});
        for _ in 0..3 {
            let calls = (0..16).map(|_| bridge.call(&budget, "big", &args));
            for outcome in futures::future::join_all(calls).await {
                let why = refusal(outcome);
                assert!(why.contains("refused, not cut"), "{why}");
            }
        }
        assert_eq!(call(&bridge, "after").await.unwrap(), "after");
        eprintln!(
            "probe: 48 responses of 4 MB, 16 at a time, refused in {:?}",
            started.elapsed()
        );
    })
    .await;
}
