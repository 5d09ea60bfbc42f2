//! A stdio client that writes lines and does not read `serve`'s stdout: `serve` stops
//! reading it once 1,024 answers wait (README, Limits), whether they are rmcp's answers,
//! the tasks layer's or refusals `serve` writes itself, so its memory stays bounded, and
//! every answer arrives once the client reads.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use super::common::{RawServe, initialize, serve_toy};

/// Pings written without reading: unbounded, `serve` held about 3 KiB for each (120 MiB).
const PINGS: usize = 40_000;
/// Lines of each other kind written without reading: twice what fills the pipes and seats.
const LINES: usize = 10_000;
/// The RSS `serve` must stay under while its answers are not read.
const RSS_BOUND_MIB: u64 = 100;

fn rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

/// `serve` on the toy server, initialized: the child, its stdin, its stdout. The answer to
/// initialize comes once the servers are up: what a client sends while they start is read
/// aside (at most 16 MiB), which is not the case this test is about.
async fn initialized() -> RawServe {
    let (serve, mut stdin, mut stdout) = serve_toy();
    initialize(&mut stdin, &mut stdout).await;
    (serve, stdin, stdout)
}

/// Write `lines` to serve without reading anything, until they are all written or the
/// writing has made no progress for 3 s; then read until `answers` answers (lines without
/// a `method`) came, each checked by `check`. Returns serve's peak RSS in MiB while nothing
/// was read, how many lines it had taken when it stopped reading, and the stdin back.
async fn unread(
    pid: u32,
    mut stdin: ChildStdin,
    stdout: &mut BufReader<ChildStdout>,
    lines: Vec<String>,
    answers: usize,
    check: impl Fn(&Value),
) -> (u64, usize, ChildStdin) {
    let total = lines.len();
    let written = Arc::new(AtomicUsize::new(0));
    let counter = written.clone();
    let writer = tokio::spawn(async move {
        for (n, line) in lines.iter().enumerate() {
            stdin.write_all(line.as_bytes()).await?;
            stdin.write_all(b"\n").await?;
            counter.store(n + 1, Ordering::Relaxed);
        }
        stdin.flush().await?;
        std::io::Result::Ok(stdin)
    });
    let mut peak = 0;
    let (mut last, mut since) = (0, Instant::now());
    while !writer.is_finished() && since.elapsed() < Duration::from_secs(3) {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = peak.max(rss_mib(pid));
        let now = written.load(Ordering::Relaxed);
        if now != last {
            (last, since) = (now, Instant::now());
        }
    }
    let stalled_at = written.load(Ordering::Relaxed);
    if writer.is_finished() && stalled_at < total {
        panic!("serve's stdin failed: {:?}", writer.await.unwrap().err());
    }
    // Now the client reads: every line gets its answer, and the writer gets through.
    let mut got = 0;
    let read = async {
        let mut line = String::new();
        while got < answers {
            line.clear();
            if stdout.read_line(&mut line).await.unwrap() == 0 {
                break;
            }
            let answer: Value = serde_json::from_str(&line).unwrap();
            if answer.get("method").is_none() {
                check(&answer);
                got += 1;
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(300), read).await;
    assert_eq!(got, answers, "lines got no answer");
    let stdin = writer
        .await
        .unwrap()
        .expect("every line is written once the client reads");
    (peak, stalled_at, stdin)
}

#[tokio::test]
async fn a_client_that_does_not_read_its_answers_stops_being_read_and_gets_every_answer_later() {
    let (serve, stdin, mut stdout) = initialized().await;
    let pid = serve.id().unwrap();
    let pings = (0..PINGS)
        .map(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#))
        .collect();
    let unanswered = Mutex::new((0..PINGS).map(Value::from).collect::<HashSet<_>>());
    let (peak, stalled_at, _stdin) = unread(pid, stdin, &mut stdout, pings, PINGS, |answer| {
        assert!(answer.get("result").is_some(), "{answer}");
        let ping = unanswered.lock().unwrap().remove(&answer["id"]);
        assert!(ping, "an answer to no ping, or a second one: {answer}");
    })
    .await;
    assert!(
        peak < RSS_BOUND_MIB,
        "serve grew to {peak} MiB with its answers unread ({stalled_at} of {PINGS} pings read)"
    );
    assert!(
        stalled_at < PINGS,
        "serve read all {PINGS} pings while none of its answers was read"
    );
}

#[tokio::test]
async fn a_client_that_does_not_read_refusals_or_task_answers_stops_being_read_too() {
    let (serve, mut stdin, mut stdout) = initialized().await;
    let pid = serve.id().unwrap();
    // A run in flight under the id "run" (within the 90 s default deadline, past this
    // test's end), for requests reusing it.
    let sleepy = json!({"jsonrpc": "2.0", "id": "run", "method": "tools/call",
        "params": {"name": "run_python", "arguments": {"code": "import asyncio\nawait asyncio.sleep(85)"}}});
    stdin
        .write_all(format!("{sleepy}\n").as_bytes())
        .await
        .unwrap();
    type Kind = (&'static str, fn(usize) -> String, fn(&Value));
    let kinds: [Kind; 4] = [
        (
            "unreadable lines",
            |id| {
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"ping","params":{{"x":"\ud800"}}}}"#
                )
            },
            |answer| assert_eq!(answer["error"]["code"], -32700, "{answer}"),
        ),
        (
            "requests reusing an id in flight",
            |_| r#"{"jsonrpc":"2.0","id":"run","method":"ping"}"#.to_owned(),
            |answer| assert_eq!(answer["error"]["code"], -32600, "{answer}"),
        ),
        (
            "requests with invalid params",
            |id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call"}}"#),
            |answer| assert_eq!(answer["error"]["code"], -32602, "{answer}"),
        ),
        (
            "tasks/list requests, answered by the tasks layer",
            |id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tasks/list"}}"#),
            |answer| assert!(answer["result"]["tasks"].is_array(), "{answer}"),
        ),
    ];
    for (kind, line, check) in kinds {
        let lines = (0..LINES).map(line).collect();
        let (peak, stalled_at, back) = unread(pid, stdin, &mut stdout, lines, LINES, check).await;
        stdin = back;
        assert!(
            stalled_at < LINES,
            "serve read all {LINES} {kind} while none of their answers was read (peak {peak} MiB)"
        );
    }
}
