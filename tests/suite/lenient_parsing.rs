//! Lenient about what wrapped servers send, strict about what they may do: a malformed
//! optional field never costs a tool, a server or a text, whether the server is local or
//! remote.
//!
//! `scripted_server` on `tests/scenarios/lenient.json` answers `initialize` with fields of
//! the wrong type, lists tools with string hints and wrong-typed optional fields, and
//! answers calls with content blocks whose annotations, names or extra fields are off. The
//! bridge must start, keep every tool, and hand each text over. Each case runs on stdio and
//! over Streamable HTTP, where `tests/clients/scripted_http_server.py` replays the same
//! scenario with every answer as a JSON body, then as an SSE event. The repairs themselves
//! are unit-tested in src/bridge/upstream/lenient.rs (lenient_http.rs for HTTP); the schema
//! rules in src/bridge/catalog/schema.rs.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use mcp_code_mode::bridge::{
    Bridge, CallBudget, CallError, RemoteSpec, RemoteTransport, ServerSpec,
};
use serde_json::json;

use super::common::{ExecOptions, exec_with, native_available, require};
use super::misbehaving_servers::{Scenario, entry, kept_tool_names};

/// How the scripted server is reached.
#[derive(Clone, Copy, Debug)]
pub(super) enum Via {
    Stdio,
    /// Streamable HTTP, each answer an `application/json` body.
    HttpJson,
    /// Streamable HTTP, each answer one event of a `text/event-stream` body.
    HttpSse,
}

const REMOTE: [Via; 2] = [Via::HttpJson, Via::HttpSse];

/// The scripted server and, over HTTP, its process (killed on drop).
pub(super) struct Server {
    pub(super) scenario: Scenario,
    pub(super) http: Option<Child>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.http {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Start the HTTP replay of `scenario` (kept in `server`, so a failed test leaves no
/// process behind); the spec returned reaches it at its port.
pub(super) fn http_spec(server: &mut Server, mode: &str) -> ServerSpec {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/clients/scripted_http_server.py");
    let python = ["/usr/bin/python3", "python3"]
        .into_iter()
        .find(|p| !p.starts_with('/') || std::path::Path::new(p).exists())
        .unwrap_or("python3");
    let child = server.http.insert(
        Command::new(python)
            .arg(script)
            .arg(&server.scenario.spec().args[0])
            .arg(mode)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3 for the scripted HTTP server"),
    );
    let mut port = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut port)
        .expect("read the port");
    ServerSpec {
        name: "scripted".into(),
        remote: Some(RemoteSpec {
            url: format!("http://127.0.0.1:{}/mcp", port.trim()),
            headers: Vec::new(),
            transport: RemoteTransport::StreamableHttp,
        }),
        ..ServerSpec::default()
    }
}

async fn open(via: Via) -> (Server, Bridge) {
    open_scenario("lenient", via).await
}

/// The bridge on `tests/scenarios/NAME.json`, reached `via`.
async fn open_scenario(name: &str, via: Via) -> (Server, Bridge) {
    open_with(Scenario::load(name), via).await
}

/// The bridge on the scripted server playing `scenario`, reached `via`; panics when the
/// server is not wrapped.
pub(super) async fn open_with(scenario: Scenario, via: Via) -> (Server, Bridge) {
    let mut server = Server {
        scenario,
        http: None,
    };
    let spec = match via {
        Via::Stdio => server.scenario.spec(),
        Via::HttpJson => http_spec(&mut server, "json"),
        Via::HttpSse => http_spec(&mut server, "sse"),
    };
    let bridge = Bridge::open(vec![entry(spec)], false)
        .await
        .unwrap_or_else(|e| panic!("{via:?}: the server was not wrapped: {e}"));
    (server, bridge)
}

async fn every_tool_is_kept(via: Via) {
    let (_server, bridge) = open(via).await;
    let catalog = bridge.catalog();
    for name in [
        "hinted",
        "odd_fields",
        "priority_text",
        "audience_text",
        "nameless_link",
        "extra_fields",
        "odd_result",
        "any_object",
        "not_json",
        "external_ref",
        "null_fields",
        "schema_absent",
    ] {
        assert!(catalog.get(name).is_some(), "{via:?}: {name} was left out");
    }
    // What could be read is kept: the description of a tool with odd fields.
    let stub = &catalog.get("odd_fields").unwrap().stub;
    assert!(
        stub.contains("Fields of the wrong type."),
        "{via:?}: {stub}"
    );
    bridge.close().await;
}

#[tokio::test]
async fn odd_optional_fields_cost_no_tool_and_no_server() {
    every_tool_is_kept(Via::Stdio).await;
}

#[tokio::test]
async fn a_remote_server_with_odd_optional_fields_keeps_every_tool() {
    for via in REMOTE {
        every_tool_is_kept(via).await;
    }
}

async fn every_text_arrives(via: Via) {
    let (_server, bridge) = open(via).await;
    let budget = CallBudget::new(20);
    let call = |tool: &'static str| {
        let (bridge, budget) = (&bridge, &budget);
        async move { bridge.call(budget, tool, &json!({})).await }
    };
    assert_eq!(
        call("priority_text").await.unwrap(),
        "important\nhalf",
        "{via:?}"
    );
    assert_eq!(
        call("audience_text").await.unwrap(),
        "for the system",
        "{via:?}"
    );
    assert_eq!(
        call("nameless_link").await.unwrap(),
        "[resource link: file:///data/report.csv (file:///data/report.csv)]",
        "{via:?}"
    );
    assert_eq!(
        call("extra_fields").await.unwrap(),
        "kept\n7\n[image: image/png, 4 bytes of base64]",
        "{via:?}"
    );
    // `isError: "true"` is an error, not a success.
    assert_eq!(
        call("odd_result").await,
        Err(CallError::ToolFailed("failed politely".into())),
        "{via:?}"
    );
    // An answer that is not JSON (NaN) fails its call at once; the server stays usable.
    let started = std::time::Instant::now();
    assert!(call("not_json").await.is_err(), "{via:?}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{via:?}: the call waited for its timeout"
    );
    assert_eq!(call("any_object").await.unwrap(), "any", "{via:?}");
    bridge.close().await;
}

async fn null_or_odd_result_fields_keep_the_text(via: Via) {
    let (_server, bridge) = open(via).await;
    let budget = CallBudget::new(20);
    let call = |tool: &'static str| {
        let (bridge, budget) = (&bridge, &budget);
        async move { bridge.call(budget, tool, &json!({})).await }
    };
    // `structuredContent`, `isError` and `_meta` all null: dropped, the text is the result.
    assert_eq!(call("null_fields").await.unwrap(), "the text", "{via:?}");
    // `content: null` is no blocks; the structured result stands.
    assert_eq!(call("null_content").await.unwrap(), "{\"n\": 1}", "{via:?}");
    // A structuredContent that is no object, next to text blocks: the text wins.
    assert_eq!(
        call("scalar_structured").await.unwrap(),
        "the text",
        "{via:?}"
    );
    bridge.close().await;
}

#[tokio::test]
async fn a_result_whose_optional_fields_are_null_keeps_its_text() {
    null_or_odd_result_fields_keep_the_text(Via::Stdio).await;
}

#[tokio::test]
async fn a_remote_result_whose_optional_fields_are_null_keeps_its_text() {
    for via in REMOTE {
        null_or_odd_result_fields_keep_the_text(via).await;
    }
}

#[tokio::test]
async fn integers_beyond_64_bits_from_a_remote_server_reach_the_code_as_it_wrote_them() {
    for via in REMOTE {
        let (_server, bridge) = open_scenario("results", via).await;
        let text = bridge
            .call(&CallBudget::new(5), "beyond_64_bits", &json!({}))
            .await
            .unwrap();
        assert_eq!(
            text,
            r#"{"zeta": 18446744073709551616, "alpha": [-123456789012345678901234567890, 340282366920938463463374607431768211457], "f": 100.0, "g": 0.30000000000000004}"#,
            "{via:?}"
        );
        bridge.close().await;
    }
}

#[tokio::test]
async fn a_tool_whose_input_schema_is_not_an_object_is_left_out_and_the_rest_kept() {
    for via in [Via::Stdio, Via::HttpJson] {
        let (_server, bridge) = open(via).await;
        let catalog = bridge.catalog();
        for name in [
            "schema_string",
            "schema_number",
            "schema_null",
            "schema_array",
        ] {
            assert!(catalog.get(name).is_none(), "{via:?}: {name} was kept");
        }
        // No inputSchema at all is an object schema naming no arguments: kept.
        assert!(catalog.get("schema_absent").is_some(), "{via:?}");
        assert!(catalog.get("any_object").is_some(), "{via:?}");
        bridge.close().await;
    }
}

#[tokio::test]
async fn texts_with_odd_annotations_or_fields_reach_the_code() {
    every_text_arrives(Via::Stdio).await;
}

#[tokio::test]
async fn texts_from_a_remote_server_with_odd_annotations_or_fields_reach_the_code() {
    for via in REMOTE {
        every_text_arrives(via).await;
    }
}

#[tokio::test]
async fn an_object_schema_without_properties_accepts_any_object() {
    let (_server, bridge) = open(Via::Stdio).await;
    let budget = CallBudget::new(20);
    let args = json!({"anything": [1, 2], "at": {"all": true}});
    assert_eq!(
        bridge.call(&budget, "any_object", &args).await.unwrap(),
        "any"
    );
    assert!(
        bridge
            .call(&budget, "any_object", &json!([1]))
            .await
            .is_err()
    );
    bridge.close().await;
}

#[tokio::test]
async fn an_external_ref_keeps_its_tool_and_the_rest_of_the_schema_is_checked() {
    let (_server, bridge) = open(Via::Stdio).await;
    let budget = CallBudget::new(20);
    let ok = json!({"n": 1, "cfg": {"whatever": "the remote schema says"}});
    assert_eq!(
        bridge.call(&budget, "external_ref", &ok).await.unwrap(),
        "configured"
    );
    for bad in [
        json!({"cfg": 1}),
        json!({"n": "x"}),
        json!({"n": 1, "zzz": 2}),
    ] {
        let outcome = bridge.call(&budget, "external_ref", &bad).await;
        assert!(
            matches!(outcome, Err(CallError::Refused(_))),
            "{bad}: {outcome:?}"
        );
    }
    bridge.close().await;
}

/// The server asks the client three things during a call: a ping (answered), a sampling
/// request whose params are not an object (one rmcp cannot read: it must be answered with an
/// error, not left unanswered) and an unknown method (refused). Each is answered, and the
/// call then returns what the server made of the answers.
async fn the_servers_requests_during_a_call_are_each_answered(via: Via) {
    let (_server, bridge) = open_scenario("asks", via).await;
    let budget = CallBudget::new(5);
    let text = bridge
        .call(&budget, "asks", &json!({}))
        .await
        .unwrap_or_else(|e| panic!("{via:?}: {e:?}"));
    let result: serde_json::Value = serde_json::from_str(&text).expect("structured answers");
    let answers = result["answers"].as_array().expect("answers").clone();
    assert_eq!(answers.len(), 3, "{via:?}: {answers:?}");
    assert_eq!(
        answers[0]["result"],
        json!({}),
        "{via:?}: ping: {}",
        answers[0]
    );
    for (i, what) in [
        (1, "the unreadable sampling request"),
        (2, "the unknown method"),
    ] {
        assert!(
            answers[i]["error"]["message"].is_string(),
            "{via:?}: {what} got no error answer: {}",
            answers[i]
        );
    }
    bridge.close().await;
}

#[tokio::test]
async fn requests_from_a_local_server_during_a_call_are_each_answered() {
    the_servers_requests_during_a_call_are_each_answered(Via::Stdio).await;
}

#[tokio::test]
async fn requests_from_a_remote_server_during_a_call_are_each_answered() {
    the_servers_requests_during_a_call_are_each_answered(Via::HttpSse).await;
}

#[tokio::test]
async fn a_tool_named_the_empty_string_is_left_out_and_the_rest_kept() {
    let scenario = Scenario::from_value(
        "empty_name",
        json!({"tools": [
            {"name": "", "inputSchema": {"type": "object"}},
            {"name": "kept", "inputSchema": {"type": "object"}},
        ]}),
    );
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    assert_eq!(
        kept_tool_names(&bridge),
        ["kept"],
        "an empty name is no usable name"
    );
    assert!(bridge.catalog().get("__").is_none());
    bridge.close().await;
}

#[test]
fn a_server_answering_an_unknown_protocol_version_is_used_with_a_warning_naming_it() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("unknown_protocol");
    let run = exec_with(
        "print(await echo())",
        ExecOptions {
            server: scenario.command(),
            ..Default::default()
        },
    );
    assert_eq!(run.printed().trim(), "odd ok", "{}", run.stderr);
    assert!(
        run.stderr.contains("protocol version \"1999-01-01\""),
        "no warning naming the version: {}",
        run.stderr
    );
}

#[tokio::test]
async fn a_server_error_message_reaches_the_code_verbatim_escapes_and_bidi_controls_included() {
    // README "How a call works": the code gets a server's text as the server sent it;
    // escaping is for what mcp-code-mode prints or logs.
    let message = "E\u{1b}[31m\u{202e}mmm\u{7}";
    let scenario = Scenario::from_value(
        "error_text",
        json!({
            "tools": [{"name": "errobj", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:errobj": [{"error": {"code": -32000, "message": message}}]}
        }),
    );
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let outcome = bridge
        .call(&CallBudget::new(10), "errobj", &json!({}))
        .await;
    let Err(CallError::ToolFailed(text)) = &outcome else {
        panic!("not a failed call: {outcome:?}");
    };
    assert!(text.ends_with(message), "{text:?}");
    bridge.close().await;
}

#[tokio::test]
async fn a_task_with_a_malformed_poll_interval_is_polled_and_a_task_the_call_cannot_read_is_cancelled()
 {
    // README "Wrapped tools that require tasks": pollInterval -5 or "fast" is read as none
    // (500 ms); an answer that is not a task fails the call and its task id is cancelled.
    let task = |id: &str, status: &str, poll: serde_json::Value| {
        json!({"taskId": id, "status": status, "createdAt": "2026-01-01T00:00:00Z",
            "lastUpdatedAt": "2026-01-01T00:00:00Z", "ttl": "forever", "pollInterval": poll})
    };
    let required = |name: &str| {
        json!({"name": name, "inputSchema": {"type": "object"},
            "execution": {"taskSupport": "required"}})
    };
    let scenario = Scenario::from_value(
        "task_fields",
        json!({
            "tools": [required("odd_poll"), required("not_a_task")],
            "on": {
                "tools/call:odd_poll": [{"reply": {"task": task("t1", "working", json!(-5))}}],
                "tasks/get": [{"reply": task("t1", "completed", json!("fast"))}],
                "tasks/result": [{"reply": {"content": [{"type": "text", "text": "done"}]}}],
                "tools/call:not_a_task": [{"reply": {"task": {"taskId": "t2", "status": "bogus"}}}]
            }
        }),
    );
    let bridge = Bridge::open(vec![entry(scenario.spec())], false)
        .await
        .expect("opens");
    let budget = CallBudget::new(10);
    assert_eq!(
        bridge.call(&budget, "odd_poll", &json!({})).await,
        Ok("done".to_owned())
    );
    let outcome = bridge.call(&budget, "not_a_task", &json!({})).await;
    assert!(
        matches!(&outcome, Err(CallError::ToolFailed(t)) if t.contains("is not a task")),
        "{outcome:?}"
    );
    let cancelled = |log: &str| {
        log.lines()
            .any(|l| l.contains("\"tasks/cancel\"") && l.contains("\"t2\""))
    };
    let started = std::time::Instant::now();
    while !cancelled(&scenario.received()) && started.elapsed().as_secs() < 10 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let received = scenario.received();
    assert!(cancelled(&received), "no tasks/cancel for t2: {received}");
    assert!(
        !received
            .lines()
            .any(|l| l.contains("\"tasks/cancel\"") && l.contains("\"t1\"")),
        "the finished task is not cancelled: {received}"
    );
    bridge.close().await;
}
