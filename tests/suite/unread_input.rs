//! Wrapped servers that stop reading their stdin (busy in a handler, stuck, hostile): only
//! a pipe's worth of what `serve` writes reaches them, the rest waits in `serve`'s bounded
//! write queue (README "What wrapped servers send"). A call given up while its request
//! still waits there is never written, and a server that floods requests without reading
//! cannot grow `serve`.
//!
//! The server is a small Python program (below) driven through `Bridge` directly; the
//! memory case runs in a test process of its own, whose peak (`VmHWM`) is its own.

use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, CallBudget, CallError, ServerSpec};
use serde_json::json;

use super::misbehaving_servers::{entry, in_own_process_of, peak_rss_kib, report};

/// Seconds the server stops reading its stdin when `block` is called.
pub(super) const PAUSE_SECS: u64 = 5;

/// The server: logs every line it reads to the file `argv[1]`; `block` stops it reading
/// for [`PAUSE_SECS`]; `flood` sends `n` `roots/list` requests without reading its stdin
/// meanwhile; every call then answers `done`. `tsink` must be called as a task
/// (`taskSupport: "required"`): its task is completed at once and its result is `done`.
const DEAF_SERVER: &str = r#"
import json, sys, time
log = open(sys.argv[1], "a", buffering=1)
out = sys.stdout.buffer
def send(msg):
    out.write(json.dumps(msg).encode() + b"\n")
    out.flush()
tools = [{"name": n, "inputSchema": {"type": "object"}} for n in ("block", "sink", "flood")]
tools.append({"name": "tsink", "inputSchema": {"type": "object"}, "execution": {"taskSupport": "required"}})
def task(status):
    return {"taskId": "t1", "status": status, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": 60000, "pollInterval": 50}
for line in sys.stdin.buffer:
    log.write(line.decode("utf-8", "replace"))
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if method is None or rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "deaf", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call" and "task" in msg["params"]:
        result = {"task": task("working")}
    elif method == "tasks/get":
        result = task("completed")
    elif method == "tasks/result":
        result = {"content": [{"type": "text", "text": "done"}]}
    elif method == "tools/call":
        name = msg["params"]["name"]
        if name == "block":
            time.sleep(PAUSE)
        elif name == "flood":
            for i in range(msg["params"]["arguments"]["n"]):
                out.write(b'{"jsonrpc":"2.0","id":"r%d","method":"roots/list"}\n' % i)
            out.flush()
        result = {"content": [{"type": "text", "text": "done"}]}
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
        continue
    send({"jsonrpc": "2.0", "id": rid, "result": result})
"#;

/// The deaf server, logging to `log`.
fn spec(log: &std::path::Path) -> ServerSpec {
    let program = DEAF_SERVER.replace("PAUSE", &PAUSE_SECS.to_string());
    ServerSpec {
        name: "deaf".into(),
        command: "/usr/bin/python3".into(),
        args: vec!["-c".into(), program, log.display().to_string()],
        env: Vec::new(),
        cwd: None,
        remote: None,
        startup_timeout: None,
    }
}

/// A bridge wrapping the deaf server (logging what it reads to `log`), each call given
/// `call_timeout`.
pub(super) async fn open(log: &std::path::Path, call_timeout: Duration) -> Bridge {
    Bridge::open(vec![entry(spec(log))], false)
        .await
        .unwrap_or_else(|e| panic!("the bridge did not open: {e}"))
        .with_call_timeout(call_timeout)
}

/// A `sink` call with `tag` and about 15 KiB of padding (arguments may be 16 KiB).
pub(super) async fn sink(bridge: &Bridge, tag: String) -> Result<String, CallError> {
    let args = json!({"tag": tag, "pad": "p".repeat(15_000)});
    bridge.call(&CallBudget::new(200), "sink", &args).await
}

/// The tags of the `sink` and `tsink` calls the server read.
pub(super) fn sinks_read(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| {
            m["method"] == "tools/call"
                && (m["params"]["name"] == "sink" || m["params"]["name"] == "tsink")
        })
        .map(|m| {
            m["params"]["arguments"]["tag"]
                .as_str()
                .unwrap_or("")
                .to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_call_timed_out_while_the_server_does_not_read_never_reaches_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("read.log");
    let bridge = open(&log, Duration::from_secs(1)).await;
    let started = Instant::now();
    // `block` is read, and the server stops reading for PAUSE_SECS.
    let (budget, no_args) = (CallBudget::new(200), json!({}));
    let block = bridge.call(&budget, "block", &no_args);
    let fills = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        // 120 KiB of calls: the pipe (64 KiB) takes some, the rest waits in serve.
        let fills = (0..8).map(|i| sink(&bridge, format!("fill{i}")));
        let late = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            sink(&bridge, "late".into()).await
        };
        tokio::join!(futures::future::join_all(fills), late)
    };
    let (block, (fills, late)) = tokio::join!(block, fills);
    for outcome in fills.into_iter().chain([block, late]) {
        let text = match outcome {
            Err(CallError::Refused(refusal)) => refusal.to_string(),
            other => panic!("expected a timeout, got {other:?}"),
        };
        assert!(text.contains("did not answer within 1 s"), "{text}");
    }
    // The server reads again after its pause; what was queued would reach it then.
    let resumed = Duration::from_secs(PAUSE_SECS + 2);
    tokio::time::sleep(resumed.saturating_sub(started.elapsed())).await;
    let read = std::fs::read_to_string(&log).unwrap_or_default();
    let tags = sinks_read(&read);
    assert!(
        tags.iter().any(|t| t.starts_with("fill")),
        "the server read nothing after its pause: {tags:?}"
    );
    assert!(
        !tags.contains(&"late".to_owned()),
        "a call the code was told was cancelled reached the server: {tags:?}"
    );
    assert!(
        tags.len() < 8,
        "every fill reached the server, none was withdrawn: {tags:?}"
    );
    bridge.close().await;
}

/// Peak memory growth allowed while the server floods requests without reading: the write
/// queue's and the unanswered requests' bounds (about 2 MiB measured), far below the
/// ~135 MB its answers took when they were all kept, and the 67 MB rmcp's answering tasks
/// took with only the write queue bounded.
const FLOOD_GROWTH_LIMIT_KIB: u64 = 16 * 1024;

#[test]
fn a_server_flooding_requests_without_reading_keeps_serves_memory_bounded() {
    let (output, growth) = in_own_process_of("unread_input", "probe_request_flood");
    report(&output);
    eprintln!("50,000 unread requests: peak memory grew {growth} KiB");
    assert!(growth < FLOOD_GROWTH_LIMIT_KIB, "grew {growth} KiB");
}

#[tokio::test]
#[ignore = "run by a_server_flooding_requests_without_reading_keeps_serves_memory_bounded in a process of its own"]
async fn probe_request_flood() {
    let dir = tempfile::tempdir().expect("temp dir");
    let log = dir.path().join("read.log");
    let bridge = open(&log, Duration::from_secs(120)).await;
    let before = peak_rss_kib();
    let outcome = bridge
        .call(&CallBudget::new(200), "flood", &json!({"n": 50_000}))
        .await;
    eprintln!("probe: flood answered {outcome:?}");
    assert_eq!(outcome.expect("the flood call is answered"), "done");
    eprintln!("peak-growth-kib {}", peak_rss_kib().saturating_sub(before));
    bridge.close().await;
}
