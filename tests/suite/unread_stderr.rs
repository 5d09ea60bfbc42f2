//! A client that gives `serve` a stderr pipe and never reads it (MCP lets a client capture,
//! forward or ignore a server's stderr): once the pipe's 64 KiB are full, `serve` goes on
//! answering and a signal still ends it, killing its sandboxes and servers. Its log lines
//! are written by a thread of their own (README "Logs"), dropped past 1 MiB waiting.
//!
//! Index: serve whose stderr pipe is never read still answers runs and ends on SIGTERM
//! after a wrapped server wrote megabytes to its stderr.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{
    RAW_INITIALIZE, assert_none_named, bin, example, exits_within, native_available, require,
    run_request, send_signal, until_named,
};

/// How long an answer may take here (a loaded machine); a frozen serve gives none at all.
const ANSWER_BOUND: Duration = Duration::from_secs(60);

/// The wrapped server: `noisy` writes 4 MB of stderr in 100-byte lines (40,000 lines, each
/// one a line of serve's log), then answers `still here`.
const SCENARIO: &str = r#"{
  "tools": [{"name": "noisy", "inputSchema": {"type": "object"}}],
  "on": {"tools/call:noisy": [
    {"stderr": 4000000},
    {"reply": {"content": [{"type": "text", "text": "still here"}]}}
  ]}
}"#;

/// The next message serve writes, within [`ANSWER_BOUND`]; the test fails naming `what`
/// when none comes.
fn next_message(lines: &Receiver<String>, what: &str) -> Value {
    let line = lines
        .recv_timeout(ANSWER_BOUND)
        .unwrap_or_else(|e| panic!("no answer to {what} within {ANSWER_BOUND:?}: {e}"));
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// The pids of `pid`'s children named `name` (`/proc/PID/comm`).
fn children_named(pid: u32, name: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let stat = std::fs::read_to_string(format!("/proc/{child}/stat")).unwrap_or_default();
            let parent = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .nth(1);
            parent == Some(pid.to_string().as_str())
                && std::fs::read_to_string(format!("/proc/{child}/comm"))
                    .is_ok_and(|c| c.trim_end() == name)
        })
        .collect()
}

/// A child killed and reaped when dropped, so a frozen serve does not outlive a failed test.
struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether `pid` runs (exists and is no zombie).
fn runs(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[test]
fn serve_whose_stderr_pipe_is_never_read_still_answers_runs_and_ends_on_sigterm_after_a_wrapped_server_wrote_megabytes_to_its_stderr()
 {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = dir.path().join("noisy.json");
    std::fs::write(&scenario, SCENARIO).expect("write the scenario");
    let mut serve = KilledOnDrop(
        Command::new(bin())
            .args(["serve", "--pool", "0", "--"])
            .arg(example("scripted_server"))
            .arg(&scenario)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start serve"),
    );
    let child = &mut serve.0;
    // Held open and never read: serve's writes to it wait once its 64 KiB are full.
    let unread_stderr = child.stderr.take().expect("stderr");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let (tx, lines) = channel();
    std::thread::spawn(move || {
        for line in stdout.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut send = |line: &str| writeln!(stdin, "{line}").expect("write to serve");
    send(RAW_INITIALIZE);
    next_message(&lines, "initialize");
    send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);

    // 40,000 log lines, about 6 MB: far past the pipe's 64 KiB and the 1 MiB queue.
    send(&run_request(1, "print(await noisy())"));
    let first = next_message(&lines, "the noisy run");
    let text = first["result"]["content"][0]["text"].as_str().unwrap_or("");
    assert!(text.contains(r#""stdout": "still here\n""#), "{first}");
    send(&run_request(2, "print('after the flood')"));
    let second = next_message(&lines, "the run after the flood");
    let text = second["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains(r#""stdout": "after the flood\n""#),
        "{second}"
    );
    send(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    assert_eq!(next_message(&lines, "ping")["id"], 3);

    // A run whose sandbox sleeps, named so the test sees it, when SIGTERM comes.
    let marker = format!("unerr{}", std::process::id() % 1_000_000);
    let code = format!(
        "import ctypes, time\nctypes.CDLL(None).prctl(15, {marker:?}.encode(), 0, 0, 0)\ntime.sleep(60)"
    );
    send(&run_request(4, &code));
    until_named(&marker, 1, ANSWER_BOUND, "the sleeping run");
    let servers = children_named(child.id(), "scripted_server");
    assert_eq!(servers.len(), 1, "serve's wrapped server: {servers:?}");
    let signalled = Instant::now();
    send_signal("TERM", child.id());
    let code = exits_within(child, Duration::from_secs(30), "serve (SIGTERM)");
    assert_eq!(code, Some(143), "after {:?}", signalled.elapsed());
    assert_none_named(&marker, "the sleeping run's sandbox");
    let start = Instant::now();
    while runs(servers[0]) {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the wrapped server {} outlived serve",
            servers[0]
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(unread_stderr);
}
