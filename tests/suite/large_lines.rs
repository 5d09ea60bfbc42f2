//! A wrapped server's large lines, and a remote server's large bodies and events, are read
//! off the thread that serves everything else.
//!
//! `serve` runs on one thread; rmcp reads a message through serde's buffered content, which
//! costs about a microsecond per byte of tiny JSON objects. A line of many small content
//! blocks must not stall every other run, session, ping, cancel and deadline while it is read
//! (README "What wrapped servers send"). A remote server's answer is read by rmcp's HTTP
//! client, which runs on a thread of its own. The tests run the bridge on the test's own
//! current-thread runtime, as `serve` does, beside a ticker that records the longest time it
//! was kept from running.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError};
use serde_json::json;

use super::lenient_parsing::{Server, http_spec};
use super::misbehaving_servers::{Scenario, entry, open_spec};

/// A task on the current runtime that wakes every 5 ms; `stop` returns the longest gap
/// between two of its wake-ups.
struct Ticker {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Duration>,
}

impl Ticker {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut worst = Duration::ZERO;
            let mut last = Instant::now();
            while !flag.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(5)).await;
                let now = Instant::now();
                worst = worst.max(now - last);
                last = now;
            }
            worst
        });
        Self { stop, task }
    }

    async fn stop(self) -> Duration {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the ticker ran")
    }
}

/// A scenario whose tool `huge` answers one line of `blocks` empty image blocks.
fn tiny_blocks(blocks: usize) -> Scenario {
    let block = r#"{"type":"image","data":"","mimeType":"a"}"#;
    let raw = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":$ID,\"result\":{{\"content\":[{}]}}}}\n",
        vec![block; blocks].join(",")
    );
    Scenario::from_value(
        "tiny_blocks",
        json!({
            "tools": [{"name": "huge", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:huge": [{"raw": raw}]}
        }),
    )
}

/// Calls `huge` on `bridge` beside a [`Ticker`]: the call's outcome, how long the call took,
/// and the longest the ticker was kept from running meanwhile.
async fn call_huge_beside_ticker(
    bridge: &Bridge,
) -> (Result<String, CallError>, Duration, Duration) {
    let ticker = Ticker::start();
    let started = Instant::now();
    let outcome = bridge.call(&CallBudget::new(200), "huge", &json!({})).await;
    let took = started.elapsed();
    (outcome, took, ticker.stop().await)
}

/// Fails unless the ticker was kept from running less than a quarter of the call's time;
/// `label` starts the message.
fn assert_work_went_on(label: &str, took: Duration, stalled: Duration) {
    assert!(
        stalled < took / 4,
        "{label}other work was held up {stalled:?} of the call's {took:?}"
    );
}

#[tokio::test]
async fn a_huge_line_of_tiny_blocks_is_read_while_other_work_goes_on() {
    const BLOCKS: usize = 20_000;
    let scenario = tiny_blocks(BLOCKS);
    let bridge = open_spec(scenario.spec())
        .await
        .with_max_result_bytes(16 << 20);
    let (outcome, took, stalled) = call_huge_beside_ticker(&bridge).await;
    let text = outcome.expect("the huge result");
    assert_eq!(text.lines().count(), BLOCKS, "one line per block");
    eprintln!("the call took {took:?}; other work was held up at most {stalled:?}");
    assert_work_went_on("", took, stalled);
    bridge.close().await;
}

#[tokio::test]
async fn a_huge_result_over_the_default_limit_is_refused_while_other_work_goes_on() {
    // A line of about 4 MB: the refusal takes a few hundred milliseconds, so that a loaded
    // machine's scheduling gap of 10 ms or more is far from a quarter of it (a line of 20,000
    // blocks was refused in 50 ms, and such a gap failed the test).
    const BLOCKS: usize = 100_000;
    let scenario = tiny_blocks(BLOCKS);
    let bridge = open_spec(scenario.spec()).await;
    let (outcome, took, stalled) = call_huge_beside_ticker(&bridge).await;
    match outcome {
        Err(CallError::Refused(refusal)) => {
            assert!(refusal.to_string().contains("bytes"), "{refusal}");
        }
        other => panic!("expected the result refused as too large, got {other:?}"),
    }
    eprintln!("refused in {took:?}; other work held up {stalled:?} at most");
    assert_work_went_on("", took, stalled);
    bridge.close().await;
}

#[tokio::test]
async fn a_huge_answer_from_a_remote_server_is_read_while_other_work_goes_on() {
    // `tests/clients/scripted_http_server.py` sends the same answer as a JSON body, then as
    // one event of an SSE stream.
    const BLOCKS: usize = 20_000;
    for mode in ["json", "sse"] {
        let mut server = Server {
            scenario: tiny_blocks(BLOCKS),
            http: None,
        };
        let spec = http_spec(&mut server, mode);
        let bridge = Bridge::open(vec![entry(spec)], false)
            .await
            .unwrap_or_else(|e| panic!("{mode}: the server did not start: {e}"))
            .with_max_result_bytes(16 << 20);
        let (outcome, took, stalled) = call_huge_beside_ticker(&bridge).await;
        let text = outcome.unwrap_or_else(|e| panic!("{mode}: the huge result: {e:?}"));
        assert_eq!(text.lines().count(), BLOCKS, "{mode}: one line per block");
        eprintln!("{mode}: the call took {took:?}; other work was held up at most {stalled:?}");
        assert_work_went_on(&format!("{mode}: "), took, stalled);
        bridge.close().await;
    }
}
