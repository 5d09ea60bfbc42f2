//! Shutdown: SIGTERM lets a run in flight finish, or cancels it after the grace period;
//! SIGTERM, SIGINT and SIGHUP end serve with 128 + the signal's number.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Served, sample};
use crate::suite::common::{native_client_ready, send_signal};

/// Start `slow SECONDS` in the Python client and wait until its run was sent.
fn slow_client(served: &Served, seconds: &str) -> std::process::Child {
    let mut child = served
        .client_command("slow", &[seconds])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap_or(0) > 0 && !line.contains("started") {
        line.clear();
    }
    assert!(line.contains("started"), "the client never started its run");
    // The run is in its sandbox once serve counts it.
    let end = Instant::now() + Duration::from_secs(30);
    while sample(&served.metrics(), "mcp_code_mode_sandboxes_running") != Some(1.0) {
        assert!(
            Instant::now() < end,
            "the run never started: {}",
            served.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

fn output_json(child: std::process::Child) -> Value {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or(Value::Null)
}

#[test]
fn sigterm_lets_a_run_in_flight_finish_then_exits() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "30"], None);
    let client = slow_client(&served, "3");
    served.terminate();
    std::thread::sleep(Duration::from_millis(300));
    // No new sessions once shutting down.
    let (status, _) = served.initialize(&[]);
    assert!(
        status == 503 || status == 0,
        "a new session during shutdown got {status}"
    );
    let out = output_json(client);
    assert_eq!(out["stdout"], "slept\n", "{out}\n{}", served.log());
    let status = served.wait_exit(Duration::from_secs(20));
    // 128 + SIGTERM's 15, as a shell reports a process SIGTERM ended.
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{}", served.log());
}

#[test]
fn a_run_cancelled_at_the_end_of_the_shutdown_grace_says_serve_is_shutting_down() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "1"], None);
    let client = slow_client(&served, "60");
    served.terminate();
    assert!(served.wait_exit(Duration::from_secs(20)).is_some());
    let out = output_json(client);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("shutting down") && !error.contains("by the client"),
        "{out}\n{}",
        served.log()
    );
}

#[test]
fn sigterm_cancels_a_run_still_going_after_the_grace_period() {
    if !native_client_ready() {
        return;
    }
    let mut served = Served::start(&["--shutdown-grace", "1"], None);
    let client = slow_client(&served, "60");
    let began = Instant::now();
    served.terminate();
    let status = served.wait_exit(Duration::from_secs(20));
    // 128 + SIGTERM's 15, as a shell reports a process SIGTERM ended.
    assert_eq!(status.and_then(|s| s.code()), Some(143), "{}", served.log());
    assert!(
        began.elapsed() < Duration::from_secs(15),
        "{:?}",
        began.elapsed()
    );
    let out = output_json(client);
    assert_ne!(out["stdout"], "slept\n", "{out}");
    assert!(
        served.log().contains("cancelling 1 run"),
        "{}",
        served.log()
    );
}

#[test]
fn a_signal_ends_serve_over_http_with_128_plus_its_number() {
    if !native_client_ready() {
        return;
    }
    for (name, expected) in [("INT", 130), ("HUP", 129), ("TERM", 143)] {
        let mut served = Served::start(&["--pool", "0"], None);
        send_signal(name, served.child.id());
        let status = served.wait_exit(Duration::from_secs(20));
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(expected),
            "SIG{name}: {}",
            served.log()
        );
    }
}
