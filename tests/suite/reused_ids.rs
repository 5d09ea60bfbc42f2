//! A client request whose id is already in use by a request in flight on its stdio session
//! is refused at once with `-32600` and never runs: the run already going on under that id
//! is still answered, and a `notifications/cancelled` for the id still stops it. A cancel
//! frees the id at once: a new request under it runs and gets its own answer, never the
//! one the cancelled run still gives while it winds down.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, ChildStdout};

use super::common::{example, spawn_serve};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// A `run_python` request with id `id` running `code`.
fn run(id: u64, code: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "run_python", "arguments": {"code": code}}})
    .to_string()
}

async fn send(stdin: &mut ChildStdin, line: &str) {
    stdin.write_all(line.as_bytes()).await.unwrap();
    stdin.write_all(b"\n").await.unwrap();
    stdin.flush().await.unwrap();
}

/// The next message from serve, within 60 s.
async fn next(stdout: &mut BufReader<ChildStdout>) -> Value {
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(60), stdout.read_line(&mut line)).await;
    assert!(matches!(read, Ok(Ok(n)) if n > 0), "no message from serve");
    serde_json::from_str(&line).unwrap()
}

#[tokio::test]
async fn a_request_reusing_an_id_in_flight_is_refused_and_the_first_run_is_answered_and_cancellable()
 {
    let audit = tempfile::tempdir().unwrap();
    let log = audit.path().join("audit.jsonl");
    let toy = example("toy_server");
    let mut serve = spawn_serve([
        "serve".as_ref(),
        "--pool".as_ref(),
        "0".as_ref(),
        "--audit".as_ref(),
        log.as_os_str(),
        "--audit-args".as_ref(),
        "full".as_ref(),
        toy.as_os_str(),
    ]);
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = BufReader::new(serve.stdout.take().unwrap());
    send(&mut stdin, INITIALIZE).await;
    assert!(next(&mut stdout).await["result"].is_object());
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;

    // The second id 6 is refused before the first run ends, and that run is answered.
    let sleepy = "import asyncio\nawait asyncio.sleep(2)\nprint('first')";
    send(&mut stdin, &run(6, sleepy)).await;
    send(&mut stdin, &run(6, "print('second')")).await;
    let refused = next(&mut stdout).await;
    assert_eq!(refused["id"], 6, "{refused}");
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already in use"),
        "{refused}"
    );
    let answered = next(&mut stdout).await;
    assert_eq!(answered["id"], 6, "{answered}");
    let result: Value = serde_json::from_str(
        answered["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("{answered}")),
    )
    .unwrap();
    assert_eq!(result["stdout"], "first\n", "{answered}");

    // Answered, the id is free again; a cancel for a reused id stops the run under it,
    // so its later call never reaches the server.
    let late_call = "import asyncio\nawait asyncio.sleep(3)\nawait echo(text='after-cancel')";
    send(&mut stdin, &run(6, late_call)).await;
    send(&mut stdin, &run(6, "print('second')")).await;
    assert_eq!(next(&mut stdout).await["error"]["code"], -32600);
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}"#,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    send(&mut stdin, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await;
    assert_eq!(
        next(&mut stdout).await["id"],
        7,
        "the cancelled run got an answer"
    );
    let records = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        records.contains("after-cancel"),
        "the last run never started: {records}"
    );
    assert!(
        !records.contains(r#""kind":"call""#),
        "a cancelled run called a tool: {records}"
    );
}

#[tokio::test]
async fn a_request_reusing_a_cancelled_id_gets_its_own_answer_never_the_cancelled_runs() {
    let toy = example("toy_server");
    let mut serve = spawn_serve([
        "serve".as_ref(),
        "--pool".as_ref(),
        "0".as_ref(),
        toy.as_os_str(),
    ]);
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = BufReader::new(serve.stdout.take().unwrap());
    send(&mut stdin, INITIALIZE).await;
    assert!(next(&mut stdout).await["result"].is_object());
    send(
        &mut stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
    send(
        &mut stdin,
        &run(6, "import asyncio\nawait asyncio.sleep(30)"),
    )
    .await;
    // The run is going: its sandbox takes a moment to end once cancelled, and the new
    // request under its id arrives right behind the cancel, well within that moment.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let cancel = r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":6}}"#;
    let reuse = run(6, "import asyncio\nawait asyncio.sleep(1)\nprint('new')");
    send(&mut stdin, &format!("{cancel}\n{reuse}")).await;
    let answered = next(&mut stdout).await;
    assert_eq!(answered["id"], 6, "{answered}");
    let text = answered["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answered}"));
    let result: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        result["stdout"], "new\n",
        "the new request got another answer: {answered}"
    );
    // No second answer under id 6 follows.
    send(&mut stdin, r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#).await;
    let ping = next(&mut stdout).await;
    assert_eq!(ping["id"], 7, "{ping}");
}
