//! Client messages `serve` cannot read get a JSON-RPC error answer, and the session goes on:
//!
//! - over stdio, a line that is not JSON gets `-32700 Parse error` with `id: null`, a
//!   request with a lone surrogate escape gets `-32700` for its own id, and a line over the
//!   16 MiB cap gets `-32600 Invalid Request` for its id; a request sent after them is
//!   answered;
//! - over HTTP, the same bodies get `400` with the JSON-RPC error response (not `415`).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::common::{example, spawn_serve};
use super::http_serving::Served;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

#[tokio::test]
async fn unreadable_stdio_lines_get_json_rpc_errors_and_the_session_goes_on() {
    let toy = example("toy_server");
    let mut serve = spawn_serve([
        "serve".as_ref(),
        "--pool".as_ref(),
        "0".as_ref(),
        toy.as_os_str(),
    ]);
    let mut stdin = serve.stdin.take().unwrap();
    let mut stdout = BufReader::new(serve.stdout.take().unwrap());
    let too_long = format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(16 * 1024 * 1024 + 1)
    );
    let lines = [
        "this is not json".to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\ud800"}}"#.to_owned(),
        too_long,
        INITIALIZE.to_owned(),
    ];
    let writer = tokio::spawn(async move {
        for line in lines {
            stdin.write_all(line.as_bytes()).await.unwrap();
            stdin.write_all(b"\n").await.unwrap();
        }
        stdin.flush().await.unwrap();
        stdin
    });
    let mut answers = Vec::new();
    let read = async {
        let mut line = String::new();
        while answers.len() < 4 {
            line.clear();
            if stdout.read_line(&mut line).await.unwrap() == 0 {
                break;
            }
            answers.push(serde_json::from_str::<Value>(&line).unwrap());
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(60), read).await;
    let _stdin = writer.await.unwrap();
    let by_id = |id: Value| answers.iter().find(|a| a["id"] == id).cloned();
    let not_json =
        by_id(Value::Null).unwrap_or_else(|| panic!("no answer with id null: {answers:?}"));
    assert_eq!(not_json["error"]["code"], -32700, "{not_json}");
    let surrogate = by_id(7.into()).unwrap_or_else(|| panic!("no answer for id 7: {answers:?}"));
    assert_eq!(surrogate["error"]["code"], -32700, "{surrogate}");
    let long = by_id(8.into()).unwrap_or_else(|| panic!("no answer for id 8: {answers:?}"));
    assert_eq!(long["error"]["code"], -32600, "{long}");
    let init = by_id(9.into()).unwrap_or_else(|| panic!("no answer for id 9: {answers:?}"));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
}

#[test]
fn unreadable_http_bodies_get_400_with_a_json_rpc_error() {
    let served = Served::start(&[], None);
    let headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
    ];
    let (status, text) = served.request("POST", "/mcp", &headers, "this is not json");
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains(r#""code":-32700"#) && text.contains(r#""id":null"#),
        "{text}"
    );
    let surrogate = r#"{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"\ud800","version":"0"}}}"#;
    let (status, text) = served.request("POST", "/mcp", &headers, surrogate);
    assert_eq!(status, 400, "{text}");
    assert!(
        text.contains(r#""code":-32700"#) && text.contains(r#""id":3"#),
        "{text}"
    );
}
