//! The audit log tells a call whose request reached its server (`sent`) from one whose
//! request still waited in `serve`'s write queue when the call ended (`withdrawn`:
//! docs/audit-log.md, README "What wrapped servers send").
//!
//! The server is `unread_input`'s deaf server, driven through `Bridge` with an audit log:
//! `block` stops it reading its stdin for a few seconds, so of the calls that follow only
//! a pipe's worth (64 KiB) is written; the rest waits in the queue until its call ends.
//! Once the server reads again, what it read must be exactly the calls recorded `sent`.
//! `tsink` calls are made as tasks: their task-augmented `tools/call` is what is sent or
//! withdrawn.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{ArgsMode, AuditLog, AuditOptions, Bridge, CallBudget, CallError};
use serde_json::{Value, json};

use super::super::unread_input::{PAUSE_SECS, open, sink, sinks_read};
use super::{of_kind, records};

/// The deaf server, its calls timed out after `call_timeout`, behind a bridge that logs
/// every call with its arguments: the bridge, the server's read log and the audit log
/// (both files in `dir`).
async fn audited(dir: &Path, call_timeout: Duration) -> (Bridge, PathBuf, PathBuf) {
    let (read_log, audit) = (dir.join("read.log"), dir.join("audit.jsonl"));
    let mut options = AuditOptions::new(&audit);
    options.args = ArgsMode::Full;
    let log = AuditLog::open(options).expect("the audit log opens");
    let bridge = open(&read_log, call_timeout)
        .await
        .with_audit(Arc::new(log));
    (bridge, read_log, audit)
}

/// A `tsink` call (made as a task) with `tag`.
async fn task_sink(bridge: &Bridge, tag: &str) -> Result<String, CallError> {
    bridge
        .call(&CallBudget::new(200), "tsink", &json!({"tag": tag}))
        .await
}

/// `block` (the server stops reading), then eight `sink` calls of 15 KiB each (the pipe
/// takes some, the rest wait in the write queue), then `late` (a `tsink` call when
/// `late_as_task`), which waits behind them.
async fn calls_behind_a_deaf_server(
    bridge: &Bridge,
    late_as_task: bool,
) -> Vec<Result<String, CallError>> {
    let (budget, no_args) = (CallBudget::new(200), json!({}));
    let block = bridge.call(&budget, "block", &no_args);
    let fills = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let fills = (0..8).map(|i| sink(bridge, format!("fill{i}")));
        let late = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if late_as_task {
                task_sink(bridge, "late").await
            } else {
                sink(bridge, "late".into()).await
            }
        };
        tokio::join!(futures::future::join_all(fills), late)
    };
    let (block, (fills, late)) = tokio::join!(block, fills);
    fills.into_iter().chain([block, late]).collect()
}

/// Each call record as (the `sink` tag, or `block`; its verdict; its reason).
fn call_records(audit: &Path) -> Vec<(String, String, String)> {
    of_kind(&records(audit), "call")
        .iter()
        .map(|c| {
            let name = match c["tool"].as_str() {
                Some("sink" | "tsink") => c["args"]["tag"].as_str().unwrap_or_default(),
                other => other.unwrap_or_default(),
            };
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (name.to_owned(), text(&c["verdict"]), text(&c["reason"]))
        })
        .collect()
}

/// Wait until the server has been reading again for two seconds, then check that the
/// calls recorded `sent` are exactly those the server read (`block` and the fills in the
/// pipe), that `late` and some fills are `withdrawn`, and that every reason holds `why`.
async fn the_server_read_exactly_the_sent_calls(
    started: Instant,
    read_log: &Path,
    audit: &Path,
    why: &str,
) {
    let resumed = Duration::from_secs(PAUSE_SECS + 2);
    tokio::time::sleep(resumed.saturating_sub(started.elapsed())).await;
    let calls = call_records(audit);
    assert_eq!(calls.len(), 10, "one record per call: {calls:?}");
    for (name, verdict, reason) in &calls {
        assert!(reason.contains(why), "{name}: {reason}");
        assert!(
            ["sent", "withdrawn"].contains(&verdict.as_str()),
            "{name}: {verdict}"
        );
    }
    let with = |wanted: &str| -> BTreeSet<String> {
        calls
            .iter()
            .filter(|(_, verdict, _)| verdict == wanted)
            .map(|(name, _, _)| name.clone())
            .collect()
    };
    let (sent, withdrawn) = (with("sent"), with("withdrawn"));
    assert!(sent.contains("block"), "the call being read: {calls:?}");
    assert!(withdrawn.contains("late"), "{calls:?}");
    assert!(
        withdrawn.iter().any(|t| t.starts_with("fill"))
            && sent.iter().any(|t| t.starts_with("fill")),
        "the pipe takes some fills, not all: {calls:?}"
    );
    let read: BTreeSet<String> = sinks_read(&std::fs::read_to_string(read_log).unwrap_or_default())
        .into_iter()
        .collect();
    let sent_sinks: BTreeSet<String> = sent.into_iter().filter(|t| t != "block").collect();
    assert_eq!(
        read, sent_sinks,
        "the server read exactly the calls recorded sent"
    );
}

/// Every call behind the deaf server (`late` a task call when `late_as_task`) times out
/// after the bridge's 1 s call timeout, and the audit log records `sent` exactly the calls
/// the server read; `late` and the fills still queued are `withdrawn`.
async fn calls_timed_out_behind_a_deaf_server_are_recorded_as_read(late_as_task: bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (bridge, read_log, audit) = audited(dir.path(), Duration::from_secs(1)).await;
    let started = Instant::now();
    for outcome in calls_behind_a_deaf_server(&bridge, late_as_task).await {
        assert!(
            matches!(&outcome, Err(CallError::Refused(r)) if r.to_string().contains("did not answer within 1 s")),
            "expected a timeout, got {outcome:?}"
        );
    }
    the_server_read_exactly_the_sent_calls(started, &read_log, &audit, "did not answer within 1 s")
        .await;
    bridge.close().await;
}

#[tokio::test]
async fn a_call_timed_out_while_its_request_waits_to_be_written_is_recorded_withdrawn() {
    calls_timed_out_behind_a_deaf_server_are_recorded_as_read(false).await;
}

#[tokio::test]
async fn a_task_call_timed_out_while_its_request_waits_to_be_written_is_recorded_withdrawn() {
    calls_timed_out_behind_a_deaf_server_are_recorded_as_read(true).await;
}

#[tokio::test]
async fn a_call_whose_run_ends_while_its_request_waits_to_be_written_is_recorded_withdrawn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (bridge, read_log, audit) = audited(dir.path(), Duration::from_secs(60)).await;
    let started = Instant::now();
    // The run ends (its deadline, a cancel) while every call waits: their futures go.
    let ended = tokio::time::timeout(
        Duration::from_millis(1500),
        calls_behind_a_deaf_server(&bridge, false),
    )
    .await;
    assert!(ended.is_err(), "a call was over before the run: {ended:?}");
    the_server_read_exactly_the_sent_calls(started, &read_log, &audit, "the run ended").await;
    bridge.close().await;
}

#[tokio::test]
async fn a_call_the_server_answers_is_recorded_sent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (bridge, read_log, audit) = audited(dir.path(), Duration::from_secs(30)).await;
    assert_eq!(
        sink(&bridge, "answered".into()).await.expect("answered"),
        "done"
    );
    assert_eq!(task_sink(&bridge, "task").await.expect("answered"), "done");
    let calls = call_records(&audit);
    let sent = |tag: &str| (tag.to_owned(), "sent".to_owned(), String::new());
    assert_eq!(calls, [sent("answered"), sent("task")]);
    let read = sinks_read(&std::fs::read_to_string(&read_log).unwrap_or_default());
    assert_eq!(read, ["answered", "task"]);
    bridge.close().await;
}
