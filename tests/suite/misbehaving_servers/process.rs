//! Servers that die or hang: a death mid-call or during initialize, a kill, a child holding
//! stdout open, a hanging call timed out and cancelled, requests during a call, older protocol
//! versions; a server that ignores EOF and SIGTERM dies with a SIGKILLed `serve`; a server
//! given up at startup is ended with the children it started.

use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, BridgeError, RESTART_COOLDOWN};
use serde_json::{Value, json};

use super::{PROMPTLY, Scenario, call, entry, open, open_spec, refusal, timed};
use crate::suite::common::{processes_named, send_signal};

fn pid_of(text: &str, field: &str) -> u32 {
    let v: Value = serde_json::from_str(text).expect("pid result");
    v[field].as_u64().expect("a pid") as u32
}

#[tokio::test]
async fn a_server_that_dies_mid_call_fails_the_call_promptly_and_restarts_later() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let first = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    let (outcome, took) = timed(&bridge, "die").await;
    let why = refusal(outcome);
    assert!(why.contains("exited with status 9"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    // Within the cooldown: a clear error, at once.
    let (outcome, took) = timed(&bridge, "pid").await;
    let why = refusal(outcome);
    assert!(why.contains("restarted by a call"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    // After it: a fresh server answers.
    tokio::time::sleep(RESTART_COOLDOWN).await;
    let second = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    assert_ne!(first, second, "the server was restarted");
    bridge.close().await;
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_the_call_promptly() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let pid = pid_of(&call(&bridge, "pid").await.unwrap(), "pid");
    assert_a_hanging_call_fails_promptly_when_killed(&bridge, pid).await;
    bridge.close().await;
}

/// Call `hang`, SIGKILL `pid` 300 ms later, and check the call fails with the server's death
/// within [`PROMPTLY`] of the kill.
async fn assert_a_hanging_call_fails_promptly_when_killed(bridge: &Bridge, pid: u32) {
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        send_signal("KILL", pid);
        Instant::now()
    });
    let why = refusal(call(bridge, "hang").await);
    let late = killer.await.unwrap().elapsed();
    assert!(why.contains("killed by signal 9"), "{why}");
    assert!(late < PROMPTLY, "failed {late:?} after the kill");
}

#[tokio::test]
async fn a_server_whose_child_keeps_its_stdout_open_still_fails_the_call_when_it_dies() {
    // `sh` is the server we started; the scripted server, its child, inherits the pipes and
    // lives on after sh is killed, so stdout never reaches end of file.
    let scenario = Scenario::load("process");
    let mut spec = scenario.spec();
    spec.args = vec![
        "-c".into(),
        // A background job's stdin is /dev/null; fd 3 carries the real one across. setsid
        // takes the server out of sh's process group, which is killed when sh dies.
        "exec 3<&0; setsid \"$0\" \"$1\" <&3 3<&- & wait".into(),
        spec.command.clone(),
        scenario.path.display().to_string(),
    ];
    spec.command = "sh".into();
    let bridge = open_spec(spec).await;
    let reply = call(&bridge, "pid").await.unwrap();
    let (server, shell) = (pid_of(&reply, "pid"), pid_of(&reply, "ppid"));
    assert_a_hanging_call_fails_promptly_when_killed(&bridge, shell).await;
    bridge.close().await;
    send_signal("KILL", server);
}

#[tokio::test]
async fn a_server_that_dies_during_initialize_is_a_clear_startup_error() {
    let scenario = Scenario::load("dies_during_initialize");
    let started = Instant::now();
    let Err(e) = Bridge::open(vec![entry(scenario.spec())], false).await else {
        panic!("the bridge opened");
    };
    let text = e.to_string();
    assert!(matches!(e, BridgeError::Upstream(_)), "{text}");
    assert!(
        text.contains("failed to initialize the server \"scripted\""),
        "{text}"
    );
    assert!(
        text.contains("fatal: missing API_KEY"),
        "stderr tail in {text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_server_given_up_at_startup_is_ended_with_the_children_it_started() {
    // A shell that starts a child (a background job: its process group, no setsid), as `npx`
    // starts `node`, writes the child's pid, and never answers `initialize`.
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = format!("mute{}", std::process::id() % 1_000_000);
    let child = dir.path().join(&marker);
    std::os::unix::fs::symlink("/bin/sleep", &child).expect("link sleep");
    let pid_file = dir.path().join("child.pid");
    let mut spec = Scenario::load("process").spec();
    spec.command = "sh".into();
    spec.args = vec![
        "-c".into(),
        "\"$0\" 1000 & echo $! > \"$1\"; exec sleep 1000".into(),
        child.display().to_string(),
        pid_file.display().to_string(),
    ];
    spec.startup_timeout = Some(Duration::from_secs(1));
    let Err(e) = Bridge::open(vec![entry(spec)], false).await else {
        panic!("the bridge opened");
    };
    assert!(e.to_string().contains("no answer within 1 s"), "{e}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .expect("the server started its child")
        .trim()
        .parse()
        .expect("a pid");
    let given_up = Instant::now();
    while processes_named(&marker).contains(&pid) && given_up.elapsed() < PROMPTLY {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let left = processes_named(&marker);
    for pid in &left {
        send_signal("KILL", *pid);
    }
    assert!(
        left.is_empty(),
        "the child {left:?} outlived its server by {PROMPTLY:?}"
    );
}

#[tokio::test]
async fn a_hanging_call_times_out_and_the_server_is_sent_notifications_cancelled() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario)
        .await
        .with_call_timeout(Duration::from_millis(500));
    let (outcome, took) = timed(&bridge, "hang").await;
    let why = refusal(outcome);
    assert!(why.contains("did not answer within 0.5 s"), "{why}");
    assert!(took < PROMPTLY, "took {took:?}");
    let mut received = String::new();
    for _ in 0..50 {
        received = scenario.received();
        if received.contains("notifications/cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let call_id = received
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["method"] == "tools/call")
        .map(|m| m["id"].clone())
        .expect("the call was received");
    let cancelled = received
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["method"] == "notifications/cancelled")
        .unwrap_or_else(|| panic!("no notifications/cancelled in:\n{received}"));
    assert_eq!(cancelled["params"]["requestId"], call_id, "{cancelled}");
    // The server is still usable.
    assert!(call(&bridge, "pid").await.is_ok());
    bridge.close().await;
}

#[tokio::test]
async fn notifications_and_server_requests_during_a_call_are_answered_never_hung() {
    let scenario = Scenario::load("process");
    let bridge = open(&scenario).await;
    let (outcome, took) = timed(&bridge, "chatty").await;
    let text = outcome.unwrap();
    assert!(took < PROMPTLY, "took {took:?}: {text}");
    let answers: Value = serde_json::from_str(&text).unwrap();
    let answers = answers["answers"].as_array().expect("answers").clone();
    assert_eq!(answers.len(), 6, "{answers:?}");
    let ok = |i: usize| answers[i].get("result").cloned();
    let refused = |i: usize| answers[i].get("error").is_some();
    assert_eq!(ok(0), Some(json!({})), "ping: {}", answers[0]);
    assert_eq!(
        ok(1),
        Some(json!({"roots": []})),
        "roots/list: {}",
        answers[1]
    );
    assert!(refused(2), "sampling is refused: {}", answers[2]);
    assert!(
        refused(3) || ok(3).is_some_and(|r| r["action"] == "decline"),
        "elicitation is refused or declined: {}",
        answers[3]
    );
    assert!(refused(4), "an unknown method is refused: {}", answers[4]);
    assert!(refused(5), "a malformed request is refused: {}", answers[5]);
    bridge.close().await;
}

#[tokio::test]
async fn a_server_answering_an_older_or_unknown_protocol_version_still_works() {
    let old = Scenario::load("old_protocol");
    let bridge = open(&old).await;
    assert_eq!(call(&bridge, "echo").await.unwrap(), "old ok");
    bridge.close().await;

    // Decided: an unknown version is accepted (rmcp keeps speaking its own); the spec's
    // SHOULD-disconnect would turn a cosmetic mismatch into a dead server.
    let odd = Scenario::load("unknown_protocol");
    let bridge = open(&odd).await;
    assert_eq!(call(&bridge, "echo").await.unwrap(), "odd ok");
    bridge.close().await;
}

/// A wrapped server that ignores the end of its input, SIGTERM and SIGHUP: started through
/// `serve`, it must end with a `serve` that was SIGKILLed (no destructor runs). The server
/// names itself with a marker (`PR_SET_NAME`) so the host can find it; it never answers, so
/// `serve` is still waiting for its handshake when it is killed.
#[test]
fn a_wrapped_server_that_ignores_eof_and_sigterm_dies_with_a_killed_serve() {
    use std::process::{Command, Stdio};
    let marker = format!("tied-{}", std::process::id() % 100_000);
    let server = format!(
        "import ctypes, signal, time\n\
         signal.signal(signal.SIGTERM, signal.SIG_IGN)\n\
         signal.signal(signal.SIGHUP, signal.SIG_IGN)\n\
         ctypes.CDLL(None).prctl(15, b'{marker}', 0, 0, 0)\n\
         while True:\n    time.sleep(1)\n"
    );
    let mut serve = Command::new(crate::suite::common::bin())
        .args(["serve", "--pool", "0", "--startup-timeout", "120", "--"])
        .args(["/usr/bin/python3", "-c", &server])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start serve");
    let start = Instant::now();
    let pids = loop {
        let pids = processes_named(&marker);
        if !pids.is_empty() {
            break pids;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = serve.kill();
            panic!("the wrapped server never started");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    serve.kill().expect("SIGKILL serve");
    serve.wait().expect("reap serve");
    let killed = Instant::now();
    while !processes_named(&marker).is_empty() && killed.elapsed() < PROMPTLY {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = processes_named(&marker);
    for pid in &left {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(
        left.is_empty(),
        "the wrapped server {pids:?} outlived its SIGKILLed serve by {PROMPTLY:?}"
    );
}
