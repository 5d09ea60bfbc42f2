use std::time::Duration;

use rmcp::transport::Transport;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::super::tasks::TaskTools;
use super::super::transport::line_transport;
use super::*;

/// The server's side of a connection: what it reads and where it writes.
struct Server {
    requests: tokio::io::Lines<BufReader<DuplexStream>>,
    answers: DuplexStream,
}

impl Server {
    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), self.requests.next_line())
            .await
            .expect("a line in time")
            .expect("readable")
            .expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    async fn send(&mut self, line: &str) {
        self.answers.write_all(line.as_bytes()).await.unwrap();
        self.answers.write_all(b"\n").await.unwrap();
    }
}

/// Raw calls over a transport whose reader runs (what reaches rmcp goes to the returned
/// channel), and the server's end.
fn connect(
    pipe: usize,
) -> (
    RawCalls,
    Server,
    tokio::sync::mpsc::UnboundedReceiver<Value>,
) {
    let (to_server, from_us) = tokio::io::duplex(pipe);
    let (to_us, from_server) = tokio::io::duplex(1 << 16);
    let (mut transport, _reason, _raw, calls) =
        line_transport("test", from_server, to_server, TaskTools::default());
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(message) = transport.receive().await {
            let _ = tx.send(serde_json::to_value(&message).unwrap());
        }
    });
    let server = Server {
        requests: BufReader::new(from_us).lines(),
        answers: to_us,
    };
    (calls, server, rx)
}

fn args() -> Map<String, Value> {
    json!({"text": "x"}).as_object().cloned().unwrap()
}

#[tokio::test]
async fn a_raw_call_is_answered_by_its_id_and_other_messages_still_reach_rmcp() {
    let (calls, mut server, mut to_rmcp) = connect(1 << 16);
    let call = tokio::spawn(async move { calls.call("echo", &args(), None).await });
    let request = server.next().await;
    assert_eq!(request["method"], "tools/call");
    assert_eq!(
        request["params"],
        json!({"name": "echo", "arguments": {"text": "x"}})
    );
    let id = request["id"].as_i64().unwrap();
    assert!(id >= FIRST_ID, "{request}");
    // An answer to one of rmcp's requests, then a notification: both are rmcp's.
    server.send(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#).await;
    server
        .send(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#)
        .await;
    server
        .send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"hi"}}]}}}}"#
        ))
        .await;
    let CallOutcome::Result(result) = call.await.unwrap() else {
        panic!("no result");
    };
    assert_eq!(super::super::result::content_text(&result), "hi");
    assert_eq!(to_rmcp.recv().await.unwrap()["id"], 3);
    assert_eq!(
        to_rmcp.recv().await.unwrap()["method"],
        "notifications/tools/list_changed"
    );
}

#[tokio::test]
async fn a_call_given_up_after_it_was_written_is_cancelled_and_one_still_queued_is_never_written() {
    // A pipe too small for the first request: it is being written while the second waits.
    let (calls, mut server, _to_rmcp) = connect(64);
    let mut big = args();
    big.insert("pad".into(), json!("p".repeat(4096)));
    let first = tokio::time::timeout(Duration::from_millis(100), calls.call("echo", &big, None));
    let small = args();
    let second = tokio::time::timeout(
        Duration::from_millis(100),
        calls.call("second", &small, None),
    );
    let (first, second) = tokio::join!(first, second);
    assert!(first.is_err() && second.is_err(), "both timed out");
    let request = server.next().await;
    assert_eq!(request["params"]["name"], "echo");
    let cancel = server.next().await;
    assert_eq!(cancel["method"], "notifications/cancelled", "{cancel}");
    assert_eq!(cancel["params"]["requestId"], request["id"]);
    assert_eq!(cancel["params"]["reason"], ABANDONED);
    // Nothing else was written: the second request was withdrawn, and it needs no cancel.
    let more = tokio::time::timeout(Duration::from_millis(200), server.requests.next_line()).await;
    assert!(more.is_err(), "more was written: {more:?}");
}

#[tokio::test]
async fn an_answer_that_is_not_valid_json_fails_its_call_at_once() {
    let (calls, mut server, _to_rmcp) = connect(1 << 16);
    let call = tokio::spawn(async move { calls.call("echo", &args(), None).await });
    let id = server.next().await["id"].clone();
    server
        .send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"x":NaN}}}}"#
        ))
        .await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), call).await;
    match outcome.expect("answered at once").unwrap() {
        CallOutcome::Rejected(text) => assert!(text.contains("not valid JSON"), "{text}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_error_answer_is_the_servers_rejection_and_the_end_of_its_output_fails_a_call() {
    let (calls, mut server, _to_rmcp) = connect(1 << 16);
    let calling = calls.clone();
    let call = tokio::spawn(async move { calling.call("echo", &args(), None).await });
    let id = server.next().await["id"].clone();
    server
        .send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":-32602,"message":"bad text"}}}}"#
        ))
        .await;
    assert!(matches!(call.await.unwrap(), CallOutcome::Rejected(t) if t == "bad text"));
    let call = tokio::spawn(async move { calls.call("echo", &args(), None).await });
    server.next().await;
    drop(server);
    let outcome = tokio::time::timeout(Duration::from_secs(5), call).await;
    assert!(matches!(
        outcome.expect("failed at once").unwrap(),
        CallOutcome::Broken(_)
    ));
}
