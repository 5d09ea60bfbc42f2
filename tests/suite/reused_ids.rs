//! A client request whose id is already in use by a request in flight on its stdio session
//! is refused at once with `-32600` and never runs: the run already going on under that id
//! is still answered, and a `notifications/cancelled` for the id still stops it. A cancel
//! frees the id at once: a new request under it runs and gets its own answer, never the
//! one the cancelled run still gives while it winds down.

use std::time::Duration;

use serde_json::Value;

use super::common::{
    initialize, next_message as next, run_request as run, send_line as send, serve_toy,
    serve_toy_with,
};

#[tokio::test]
async fn a_request_reusing_an_id_in_flight_is_refused_and_the_first_run_is_answered_and_cancellable()
 {
    let audit = tempfile::tempdir().unwrap();
    let log = audit.path().join("audit.jsonl");
    let (_serve, mut stdin, mut stdout) = serve_toy_with(&[
        "--audit".as_ref(),
        log.as_os_str(),
        "--audit-args".as_ref(),
        "full".as_ref(),
    ]);
    initialize(&mut stdin, &mut stdout).await;

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
    let (_serve, mut stdin, mut stdout) = serve_toy();
    initialize(&mut stdin, &mut stdout).await;
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
