//! Client messages `serve` cannot read get a JSON-RPC error answer, and the session goes on:
//!
//! - over stdio, a line that is not JSON gets `-32700 Parse error` with `id: null`, a
//!   request with a lone surrogate escape gets `-32700` for its own id, and a line over the
//!   16 MiB cap gets `-32600 Invalid Request` for its id; a request sent after them is
//!   answered;
//! - over HTTP, the same bodies get `400` with the JSON-RPC error response (not `415`);
//! - a list of hostile lines (invalid UTF-8 in a string or key, nesting over 128 levels,
//!   `1e400`, batches, a wrong `jsonrpc`, known methods with bad `params`, a `task` that is
//!   no object) each get exactly one answer with their id (or `null`) on stdio, or `400`
//!   with it over HTTP, and the next ping is answered;
//! - a request whose id is a number outside i64 (plain or task call) gets `-32600` with
//!   the id written as the client wrote it, on both transports.

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

use super::common::{RAW_INITIALIZE, initialize, next_line, next_message, send_line, serve_toy};
use super::http_serving::Served;

#[tokio::test]
async fn unreadable_stdio_lines_get_json_rpc_errors_and_the_session_goes_on() {
    let (_serve, mut stdin, mut stdout) = serve_toy();
    let too_long = format!(
        r#"{{"jsonrpc":"2.0","id":8,"method":"ping","params":{{"x":"{}"}}}}"#,
        "a".repeat(16 * 1024 * 1024 + 1)
    );
    let lines = [
        "this is not json".to_owned(),
        r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":{"x":"\ud800"}}"#.to_owned(),
        too_long,
        RAW_INITIALIZE.to_owned(),
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
    let init = by_id("init".into()).unwrap_or_else(|| panic!("no answer for id init: {answers:?}"));
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

/// One hostile client line and what it must get: the error code and the id of its one
/// answer, or no answer at all (`None`: an invalid notification).
struct Hostile {
    line: Vec<u8>,
    answer: Option<(i64, Value)>,
}

fn hostile_lines() -> Vec<Hostile> {
    let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let text = |line: &str, answer: Option<(i64, Value)>| Hostile {
        line: line.as_bytes().to_vec(),
        answer,
    };
    vec![
        Hostile {
            line: b"{\"jsonrpc\":\"2.0\",\"id\":78,\"method\":\"ping\",\"params\":{\"x\":\"\xFF\"}}".to_vec(),
            answer: Some((-32700, 78.into())),
        },
        Hostile {
            line: b"{\"jsonrpc\":\"2.0\",\"id\":79,\"method\":\"tools/call\",\"params\":{\"name\":\"run_python\",\"arguments\":{\"code\":\"print(1) # \xFF\"}}}".to_vec(),
            answer: Some((-32700, 79.into())),
        },
        Hostile {
            line: b"{\"jsonrpc\":\"2.0\",\"id\":80,\"method\":\"ping\",\"params\":{\"\xC3\":1}}".to_vec(),
            answer: Some((-32700, 80.into())),
        },
        Hostile {
            line: b"\xFF\xFE{\"jsonrpc\":\"2.0\",\"id\":77,\"method\":\"ping\"}".to_vec(),
            answer: Some((-32700, 77.into())),
        },
        text(
            &format!(
                r#"{{"jsonrpc":"2.0","id":86,"method":"ping","params":{{"a":{}}}}}"#,
                nested(200)
            ),
            Some((-32700, 86.into())),
        ),
        text(
            &format!(
                r#"{{"jsonrpc":"2.0","id":87,"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":"print(1)","x":{}}}}}}}"#,
                nested(1000)
            ),
            Some((-32700, 87.into())),
        ),
        text(
            &format!(
                r#"{{"jsonrpc":"2.0","id":88,"method":"ping","params":{{"a":{}}}}}"#,
                nested(100_000)
            ),
            Some((-32700, 88.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            Some((-32700, Value::Null)),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":89,"method":"ping","params":{"n":1e400}}"#,
            Some((-32700, 89.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":[1,2],"method":"ping"}"#,
            Some((-32600, Value::Null)),
        ),
        text(
            r#"[{"jsonrpc":"2.0","id":85,"method":"ping"}]"#,
            Some((-32600, Value::Null)),
        ),
        text(
            r#"{"jsonrpc":"1.0","id":4,"method":"ping"}"#,
            Some((-32600, 4.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":3,"method":5}"#,
            Some((-32600, 3.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1,2]}"#,
            Some((-32602, 1.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call"}"#,
            Some((-32602, 2.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"run_python","arguments":{"code":"print(1)"},"task":"bogus"}}"#,
            Some((-32602, 6.into())),
        ),
        text(
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#,
            None,
        ),
    ]
}

#[tokio::test]
async fn every_hostile_stdio_line_gets_exactly_one_answer_with_its_id_and_the_next_ping_is_answered()
 {
    let (_serve, mut stdin, mut stdout) = serve_toy();
    initialize(&mut stdin, &mut stdout).await;
    for (n, hostile) in hostile_lines().into_iter().enumerate() {
        let ping = format!("\n{{\"jsonrpc\":\"2.0\",\"id\":\"ping-{n}\",\"method\":\"ping\"}}\n");
        stdin.write_all(&hostile.line).await.unwrap();
        stdin.write_all(ping.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
        let shown =
            String::from_utf8_lossy(&hostile.line[..hostile.line.len().min(120)]).into_owned();
        // The line's answer and the ping's may come in either order; no other may come.
        let mut answers = vec![next_message(&mut stdout).await];
        if hostile.answer.is_some() {
            answers.push(next_message(&mut stdout).await);
        }
        let ping_id = Value::from(format!("ping-{n}"));
        let (pongs, errors): (Vec<Value>, Vec<Value>) =
            answers.into_iter().partition(|a| a["id"] == ping_id);
        assert_eq!(pongs.len(), 1, "{shown}: {errors:?}");
        if let Some((code, id)) = hostile.answer {
            let answer = &errors[0];
            assert_eq!(answer["error"]["code"], code, "{shown}: {answer}");
            assert_eq!(answer["id"], id, "{shown}: {answer}");
        }
        let pong = &pongs[0];
        assert!(pong["result"].is_object(), "{shown}: {pong}");
    }
}

#[test]
fn every_hostile_http_body_gets_400_with_the_json_rpc_error_and_its_id() {
    let served = Served::start(&[], None);
    let session = served.open_session();
    for hostile in hostile_lines() {
        // The request helper sends text; the invalid UTF-8 lines are the stdio test's.
        let Ok(body) = std::str::from_utf8(&hostile.line) else {
            continue;
        };
        // An invalid notification is refused with the id-less error (stdio says nothing).
        let (code, id) = hostile.answer.unwrap_or((-32600, Value::Null));
        let (status, text) = served.post_in(&session, body);
        let shown = &body[..body.len().min(120)];
        // A task request is answered by its handler: a JSON-RPC error in a `200` answer.
        let handled = body.contains(r#""task":"#);
        assert_eq!(status, if handled { 200 } else { 400 }, "{shown}: {text}");
        assert!(
            text.contains(&format!(r#""code":{code}"#)) && text.contains(&format!(r#""id":{id}"#)),
            "{shown}: {text}"
        );
    }
    let ping = r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#;
    let (status, text) = served.post_in(&session, ping);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""id":"after""#), "{text}");
}

/// Requests whose id is a number outside i64, as plain calls and as task calls, and the id
/// text each answer must carry.
const BIG_IDS: [&str; 4] = [
    "18446744073709551616",
    "-9999999999999999999",
    "1e20",
    "9223372036854775808",
];

fn big_id_call(id: &str, task: bool) -> String {
    let task = if task { r#","task":{}"# } else { "" };
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"run_python","arguments":{{"code":"print(1)"}}{task}}}}}"#
    )
}

#[tokio::test]
async fn a_request_id_outside_i64_is_refused_with_the_id_as_the_client_wrote_it() {
    let (_serve, mut stdin, mut stdout) = serve_toy();
    initialize(&mut stdin, &mut stdout).await;
    for id in BIG_IDS {
        for task in [false, true] {
            let request = big_id_call(id, task);
            send_line(&mut stdin, &request).await;
            let line = next_line(&mut stdout).await;
            let answer: Value = serde_json::from_str(&line).unwrap();
            assert_eq!(answer["error"]["code"], -32600, "{request}: {line}");
            assert!(
                line.contains(&format!(r#""id":{id},"#)),
                "{request}: {line}"
            );
        }
    }
    send_line(&mut stdin, r#"{"jsonrpc":"2.0","id":1.0,"method":"ping"}"#).await;
    let pong = next_line(&mut stdout).await;
    assert!(
        pong.contains(r#""id":1,"#) && pong.contains("result"),
        "{pong}"
    );
}

#[test]
fn an_http_request_id_outside_i64_is_refused_with_the_id_as_the_client_wrote_it() {
    let served = Served::start(&[], None);
    let session = served.open_session();
    for id in BIG_IDS {
        for task in [false, true] {
            let request = big_id_call(id, task);
            let (status, text) = served.post_in(&session, &request);
            assert_eq!(status, 400, "{request}: {text}");
            assert!(
                text.contains(r#""code":-32600"#) && text.contains(&format!(r#""id":{id},"#)),
                "{request}: {text}"
            );
        }
    }
}
