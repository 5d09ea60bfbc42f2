//! A wrapped server that announces `list_changed` in a loop and answers each re-list slowly
//! holds runs once, at most `RELIST_TIMEOUT` (README "Wrapped servers"): after its re-list
//! goes unanswered that long, runs no longer wait for its re-lists, runs that use only
//! another server included, and its late answer still comes into force.
//!
//! Index: a server that keeps announcing list_changed and answers re-lists slowly does not
//! make runs wait beyond the bound.

use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, CallBudget, OpenOptions, RELIST_TIMEOUT, ServerSpec};
use serde_json::json;

use super::common::toy;
use super::misbehaving_servers::entry;

/// How long the nagging server takes to answer each `tools/list` after its first.
const SLOW: Duration = Duration::from_secs(RELIST_TIMEOUT.as_secs() + 2);

/// Timer and scheduling slack on a loaded 2-core host.
const SLACK: Duration = Duration::from_secs(1);

/// A raw stdio server: its first `tools/list` is answered at once (tool `nag_tool`), then it
/// sends `notifications/tools/list_changed` every 0.5 s, forever, and answers each later
/// `tools/list` after `SLOW` seconds (tool `nag_tool_N` for the N-th), reading its input
/// meanwhile.
const NAGGING_SERVER: &str = r#"
import json, sys, threading, time
SLOW = float(sys.argv[1])
lock = threading.Lock()
def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
def nag():
    while True:
        time.sleep(0.5)
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
def answer_list(id, n):
    if n > 1:
        time.sleep(SLOW)
    name = "nag_tool" if n == 1 else "nag_tool_%d" % n
    tools = [{"name": name, "inputSchema": {"type": "object"}}]
    send({"jsonrpc": "2.0", "id": id, "result": {"tools": tools}})
lists = 0
for line in sys.stdin:
    message = json.loads(line)
    method, id = message.get("method"), message.get("id")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "nag", "version": "1"}}})
    elif method == "tools/list":
        lists += 1
        threading.Thread(target=answer_list, args=(id, lists), daemon=True).start()
        if lists == 1:
            threading.Thread(target=nag, daemon=True).start()
    elif id is not None:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "no"}})
"#;

/// A run's start: the bridge's refresh, then a call to the other server. How long the
/// refresh took.
async fn run_on_toy(bridge: &Bridge) -> Duration {
    let started = Instant::now();
    bridge.refresh().await;
    let waited = started.elapsed();
    let echo = bridge
        .call(&CallBudget::new(5), "toy__echo", &json!({"text": "hi"}))
        .await;
    assert_eq!(echo.expect("toy__echo answers"), "hi");
    waited
}

#[tokio::test]
async fn a_server_that_keeps_announcing_list_changed_and_answers_relists_slowly_does_not_make_runs_wait_beyond_the_bound()
 {
    let nag = ServerSpec {
        name: "nag".into(),
        command: "/usr/bin/python3".into(),
        args: vec![
            "-c".into(),
            NAGGING_SERVER.into(),
            SLOW.as_secs().to_string(),
        ],
        ..ServerSpec::default()
    };
    let toy = toy();
    let toy = ServerSpec {
        name: "toy".into(),
        command: toy[0].clone(),
        args: toy[1..].to_vec(),
        ..ServerSpec::default()
    };
    let options = OpenOptions {
        prefixed: true,
        strict: false,
    };
    let bridge = Bridge::open_with(vec![entry(nag), entry(toy)], options)
        .await
        .expect("opens");
    let opened = Instant::now();
    assert!(bridge.catalog().get("nag__nag_tool").is_some());
    // By now the first list_changed came and its re-list is under way.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let first = run_on_toy(&bridge).await;
    assert!(
        first <= RELIST_TIMEOUT + SLACK,
        "the first run waited {first:?} for re-lists (bound {RELIST_TIMEOUT:?})"
    );
    // Its re-list went unanswered for RELIST_TIMEOUT: runs no longer wait for the next ones,
    // though list_changed keeps coming.
    let second = run_on_toy(&bridge).await;
    assert!(second < 2 * SLACK, "the second run waited {second:?}");
    // The late answer (SLOW after the first re-list began) still comes into force.
    while bridge.catalog().get("nag__nag_tool_2").is_none() {
        assert!(
            opened.elapsed() < SLOW + RELIST_TIMEOUT,
            "the late answer never came into force: {:?}",
            bridge
                .catalog()
                .tools()
                .iter()
                .map(|t| &t.py_name)
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The next re-list, slow again, holds no run either.
    let third = run_on_toy(&bridge).await;
    assert!(third < 2 * SLACK, "the third run waited {third:?}");
    // A re-list under way holds no lock of the server's: closing it does not wait for it.
    let closing = Instant::now();
    bridge.close().await;
    assert!(
        closing.elapsed() < SLOW / 2,
        "close took {:?}",
        closing.elapsed()
    );
}
