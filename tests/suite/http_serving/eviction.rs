//! Eviction at the session cap: a new session closes the session idle longest when that one
//! has no run in flight and has gone `--session-evict-idle` without a request, so clients
//! that vanished without `DELETE` do not hold their seats for `--session-idle`.

use std::time::Duration;

use super::{Served, session_id};
use crate::suite::common::native_available;

const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;

/// The headers of a request in session `id`.
fn in_session(id: &str) -> [(&str, &str); 4] {
    [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("Mcp-Session-Id", id),
        ("Mcp-Protocol-Version", "2025-11-25"),
    ]
}

/// Open a session and return its `Mcp-Session-Id`.
fn open(served: &Served) -> String {
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}\n{}", served.log());
    session_id(&text).expect("a session id")
}

#[test]
fn at_the_cap_a_new_session_closes_the_session_idle_longest_once_it_is_idle_long_enough() {
    let served = Served::start(
        &[
            "--max-sessions",
            "2",
            "--session-evict-idle",
            "1",
            "--pool",
            "0",
        ],
        None,
    );
    let first = open(&served);
    let second = open(&served);
    // Both were used just now: neither is closed for a newcomer.
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 503, "{text}");
    std::thread::sleep(Duration::from_millis(1300));
    // The second is used again, so the first is the one idle longest (and past the minimum).
    let (status, text) = served.request("POST", "/mcp", &in_session(&second), PING);
    assert_eq!(status, 200, "{text}");
    let third = open(&served);
    let (status, text) = served.request("POST", "/mcp", &in_session(&first), PING);
    assert_eq!(status, 404, "the first session was closed: {text}");
    let (status, text) = served.request("POST", "/mcp", &in_session(&second), PING);
    assert_eq!(status, 200, "the second session stays: {text}");
    let (status, text) = served.request("POST", "/mcp", &in_session(&third), PING);
    assert_eq!(status, 200, "{text}");
    let log = served.log();
    let closed: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARN") && line.contains("to make room for a new session"))
        .collect();
    assert_eq!(closed.len(), 1, "{log}");
    assert!(closed[0].contains("session cap (2)"), "{log}");
    assert!(
        !closed[0].contains(&first),
        "the credential is never logged: {log}"
    );
}

#[test]
fn a_session_with_a_run_in_flight_is_never_closed_to_make_room() {
    if !native_available() {
        return;
    }
    let served = Served::start(
        &[
            "--max-sessions",
            "1",
            "--session-evict-idle",
            "1",
            "--pool",
            "0",
        ],
        None,
    );
    let busy = open(&served);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    let (status, text) = served.request("POST", "/mcp", &in_session(&busy), initialized);
    assert_eq!(status, 202, "{text}");
    let call = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"import time\ntime.sleep(4)\nprint('slept')"}}}"#;
    let run = std::thread::scope(|scope| {
        let run = scope.spawn(|| served.request("POST", "/mcp", &in_session(&busy), call));
        // Past the minimum while the run sleeps: the busy session is not closed.
        std::thread::sleep(Duration::from_millis(2000));
        let (status, text) = served.initialize(&[]);
        assert_eq!(status, 503, "{text}\n{}", served.log());
        run.join().unwrap()
    });
    assert_eq!(run.0, 200, "{}", run.1);
    assert!(
        run.1.contains("slept"),
        "the run was not cancelled: {}",
        run.1
    );
    // Once its run has ended and the minimum has passed, the session makes room.
    std::thread::sleep(Duration::from_millis(1300));
    open(&served);
    let (status, text) = served.request("POST", "/mcp", &in_session(&busy), PING);
    assert_eq!(status, 404, "{text}");
}
