//! Sessions: each has its own private-data taint, run slots and session id in the audit log;
//! the session cap answers 503 past it, and a closed or expired session frees its seat.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{INITIALIZE, Served, sample, session_id};
use crate::suite::common::native_client_ready;

#[test]
fn two_sessions_in_one_process_each_have_their_own_taint() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--private", "secret"], None);
    let out = served.client("taint", &[]);
    assert_eq!(out["a_secret"], "s3cr3t\n", "{out}");
    let a_add = out["a_add"].as_str().unwrap_or("");
    assert!(
        a_add.starts_with("refused:") && a_add.contains("private"),
        "{out}"
    );
    assert_eq!(out["b_add"], "{\"sum\": 3}\n", "{out}");
}

#[test]
fn each_http_session_has_its_own_session_id_in_the_audit_log() {
    if !native_client_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let audit_arg = audit.display().to_string();
    let served = Served::start(&["--private", "secret", "--audit", &audit_arg], None);
    // Session A runs `secret` then `add`; session B runs `add`.
    let out = served.client("taint", &[]);
    assert_eq!(out["a_secret"], "s3cr3t\n", "{out}");
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let starts: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "run_start")
        .collect();
    let session_of = |code: &str| {
        starts
            .iter()
            .filter(|r| r["code"].as_str().unwrap_or_default().contains(code))
            .map(|r| r["session"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    let secret = session_of("secret");
    let add = session_of("add(");
    assert_eq!(secret.len(), 1, "{records:?}");
    assert_eq!(add.len(), 2, "{records:?}");
    // A's two runs share its session; B's run has another.
    assert!(add.contains(&secret[0]), "{records:?}");
    assert!(add.iter().any(|s| *s != secret[0]), "{records:?}");
    // Every record of a run carries the session of its run_start.
    for record in &records {
        let start = starts.iter().find(|s| s["run"] == record["run"]).unwrap();
        assert_eq!(record["session"], start["session"], "{record}");
    }
}

#[test]
fn a_session_waits_for_its_own_run_slots_and_never_holds_another_sessions() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--session-runs", "1"], None);
    let out = served.client("slots", &[]);
    let ends: Vec<f64> = out["a"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    // A's second run waited for A's first (each sleeps 3 s); B's run did not wait for A's.
    assert!(ends[1] - ends[0] >= 2.5, "{out}");
    assert!(out["b"].as_f64().unwrap() < ends[1], "{out}");
}

#[test]
fn the_session_cap_answers_503_past_it_and_a_session_closed_with_204_frees_its_seat() {
    let served = Served::start(&["--max-sessions", "2"], None);
    let (status, first) = served.initialize(&[]);
    assert_eq!(status, 200, "{first}");
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("session cap (2)"), "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(
            &metrics,
            "mcp_code_mode_refusals_total{reason=\"session_cap\"}"
        ),
        Some(1.0),
        "{metrics}"
    );
    let id = session_id(&first).expect("a session id");
    let (status, text) = served.request("DELETE", "/mcp", &[("Mcp-Session-Id", &id)], "");
    // 204, not rmcp's 202: the Python SDK logs "Session termination failed: 202" otherwise.
    assert_eq!(status, 204, "{text}");
    // The seat is freed once the session's handler has ended (a moment after the DELETE).
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        let (status, _) = served.initialize(&[]);
        if status == 200 || Instant::now() > end {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status, 200, "{}", served.log());
    let metrics = served.metrics();
    assert_eq!(
        sample(&metrics, "mcp_code_mode_sessions"),
        Some(2.0),
        "{metrics}"
    );
}

/// Sessions opened at once past the cap: each gets the documented 503, and the log says each
/// refusal as a warning, with no ERROR line. Every request's headers are sent before any
/// body, so all of them pass the guard before rmcp, which reads the body first, asks for a
/// session: a guard that only checked for a free seat let them all through, and rmcp's
/// factory refused the last ones as a 500, logged at ERROR.
#[test]
fn sessions_opened_at_once_past_the_cap_get_503_and_the_log_warns_without_an_error() {
    let served = Served::start(&["--max-sessions", "2"], None);
    let mut streams: Vec<TcpStream> = (0..12)
        .map(|_| {
            let mut stream = TcpStream::connect(served.addr()).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let head = format!(
                "POST /mcp HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
                served.addr(),
                INITIALIZE.len()
            );
            stream.write_all(head.as_bytes()).unwrap();
            stream
        })
        .collect();
    // Every request is past the guard and waits for its body.
    std::thread::sleep(Duration::from_millis(500));
    for stream in &mut streams {
        stream.write_all(INITIALIZE.as_bytes()).unwrap();
    }
    let statuses: Vec<u16> = streams
        .iter_mut()
        .map(|stream| {
            let mut response = String::new();
            let _ = stream.read_to_string(&mut response);
            response
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0)
        })
        .collect();
    let log = served.log();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        2,
        "{statuses:?}\n{log}"
    );
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 503),
        "{statuses:?}\n{log}"
    );
    let refusal = "a new session was refused: the session cap (2) is reached";
    let warned = log
        .lines()
        .filter(|line| line.contains("WARN") && line.contains(refusal))
        .count();
    assert_eq!(warned, 10, "{log}");
    assert!(!log.contains("ERROR"), "{log}");
}

#[test]
fn an_idle_session_expires_and_frees_its_seat() {
    let served = Served::start(&["--session-idle", "1", "--max-sessions", "1"], None);
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    let id = session_id(&text).expect("a session id");
    let ping = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", id.as_str()),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ];
    let (status, text) = served.request("POST", "/mcp", &headers, ping);
    assert_eq!(status, 200, "the session answers while it is used: {text}");
    std::thread::sleep(Duration::from_millis(2500));
    let (status, text) = served.request("POST", "/mcp", &headers, ping);
    assert_eq!(status, 404, "{text}");
    let metrics = served.metrics();
    assert_eq!(
        sample(&metrics, "mcp_code_mode_sessions"),
        Some(0.0),
        "{metrics}"
    );
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
}

#[test]
fn a_session_whose_run_outlasts_the_idle_time_is_kept_until_the_run_ends() {
    if !native_client_ready() {
        return;
    }
    // The SDK's call sends no progress token, so nothing flows while the run sleeps: the
    // run in flight alone keeps the session, and the next call finds it open.
    let served = Served::start(&["--session-idle", "2", "--pool", "0"], None);
    let out = served.client(
        "calls",
        &[
            "import time\ntime.sleep(5)\nprint('slept')",
            "print('next')",
        ],
    );
    assert_eq!(out["calls"][0]["stdout"], "slept\n", "{out}");
    assert_eq!(out["calls"][1]["stdout"], "next\n", "{out}");
    let log = served.log();
    assert!(!log.contains("cancelled"), "{log}");
}

/// `DELETE` closes a session at once (README "Sessions"): its run in flight is cancelled
/// then, its sandbox killed, and no further call reaches a wrapped server. rmcp alone ends
/// the closed session's service only after up to 5 s spent draining its answers in flight,
/// and the run went on calling tools all that time.
#[test]
fn a_run_calling_tools_in_a_loop_makes_no_call_after_its_session_is_deleted() {
    if !native_client_ready() {
        return;
    }
    let served = Served::start(&["--pool", "0"], None);
    let session = served.open_session();
    let code = "import asyncio\ni = 0\nwhile True:\n    await echo(text=f'loop {i}')\n    i += 1\n    await asyncio.sleep(0.02)\n";
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"code": code}}})
    .to_string();
    let calls = || {
        std::fs::read_to_string(&served.journal)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("call echo"))
            .count()
    };
    std::thread::scope(|scope| {
        let running = scope.spawn(|| served.post_in(&session, &call));
        let end = Instant::now() + Duration::from_secs(60);
        while calls() < 5 {
            assert!(
                Instant::now() < end,
                "the run never called echo: {}",
                served.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        let (status, text) = served.request("DELETE", "/mcp", &[("Mcp-Session-Id", &session)], "");
        assert_eq!(status, 204, "{text}");
        let at_delete = calls();
        std::thread::sleep(Duration::from_secs(2));
        let after = calls();
        assert!(
            after <= at_delete + 1,
            "{} calls reached the server after the DELETE was answered: {}",
            after - at_delete,
            served.log()
        );
        let metrics = served.metrics();
        assert_eq!(
            sample(&metrics, "mcp_code_mode_sandboxes_running"),
            Some(0.0),
            "{metrics}"
        );
        let _ = running.join();
    });
}
