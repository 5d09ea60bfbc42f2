//! MCP 2025-11-25 tasks (specification basic/utilities/tasks) in both directions, with the
//! TypeScript SDK 1.x on the other end, the one SDK here that implements them
//! (`tests/clients/ts/tasks.mjs`; the Python SDK 2.x leaves 2025-11-25 tasks out on
//! purpose and checks every `tools/call` answer as a CallToolResult, so it cannot create
//! one):
//! - a client calls run_python as a task, polls `tasks/get`, fetches `tasks/result`, and
//!   `tasks/cancel` kills the run like a request cancel does;
//! - a wrapped tool whose `taskSupport` is `"required"` (`tests/clients/ts/task_server.mjs`,
//!   served by the SDK's own task store) is called as a task, and the task is cancelled
//!   when the run is cancelled, the call times out or the run's deadline passes;
//!   `"optional"` stays a plain call; a wrapped task that asks for input fails its call and
//!   is cancelled;
//! - a task run sends progress under its call's token and `notifications/tasks/status`;
//! - over `serve --http` the same: a task is polled, fetched and cancelled, its notifications
//!   come on the session's stream, an ended session cancels its task runs, and a task
//!   request passes rmcp's Origin and session checks;
//! - a remote (Streamable HTTP) wrapped server's task-required tool is called as a task too,
//!   whether the server answers with JSON bodies or SSE streams (task_server.mjs `--http`),
//!   and its task is cancelled when the run is cancelled or its deadline passes.

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Stdio};

use serde_json::Value;

use super::common::{bin, example, last_json_line};
use super::http_serving::{Served, session_id};
use super::ts_client::{client_dir, ready};

/// Which server `serve` wraps.
enum Wrapped {
    /// The toy server, with its journal.
    Toy,
    /// tests/clients/ts/task_server.mjs, with its journal.
    TaskServer,
    /// A running remote server named `tasks` in the config file `config`, whose journal is
    /// `journal`; the code calls its tools as `tasks__NAME`.
    Remote { config: PathBuf, journal: PathBuf },
}

/// What `tasks.mjs SCENARIO` printed against `serve SERVE_ARGS -- WRAPPED`, and the
/// wrapped server's journal.
fn scenario(name: &str, serve_args: &[&str], wrapped: Wrapped) -> (Value, String) {
    let dir = client_dir().expect("the TypeScript client");
    let temp = tempfile::tempdir().unwrap();
    let journal = match &wrapped {
        Wrapped::Remote { journal, .. } => journal.clone(),
        _ => temp.path().join("journal"),
    };
    let mut command = std::process::Command::new("node");
    command
        .arg(dir.join("tasks.mjs"))
        .arg(name)
        .arg(&journal)
        .arg("--")
        .arg(bin())
        .arg("serve")
        .args(serve_args);
    match &wrapped {
        Wrapped::Toy => command
            .arg("--")
            .arg(example("toy_server"))
            .arg("--journal")
            .arg(&journal),
        Wrapped::TaskServer => command
            .arg("--")
            .arg("node")
            .arg(dir.join("task_server.mjs"))
            .arg(&journal),
        Wrapped::Remote { config, .. } => command
            .arg("--config")
            .arg(config)
            .env("TOOL_PREFIX", "tasks__"),
    };
    let out = command.output().expect("run node");
    let parsed = last_json_line(&out, &format!("tasks.mjs {name}"));
    (
        parsed,
        std::fs::read_to_string(&journal).unwrap_or_default(),
    )
}

#[test]
fn run_python_called_as_a_task_is_polled_and_its_result_fetched() {
    if !ready() {
        return;
    }
    let (out, _) = scenario("run-as-task", &[], Wrapped::Toy);
    assert_eq!(
        out["task_capability"]["requests"]["tools"]["call"],
        serde_json::json!({}),
        "{out}"
    );
    assert_eq!(out["execution"]["taskSupport"], "optional", "{out}");
    let messages: Vec<&str> = out["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(messages.first(), Some(&"taskCreated"), "{out}");
    assert!(messages.contains(&"taskStatus"), "polled: {out}");
    assert_eq!(messages.last(), Some(&"result"), "{out}");
    assert_eq!(out["stdout"], "task done\n", "{out}");
    assert_eq!(out["related_task"], true, "{out}");
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["ttl"], 60000, "{out}");
    assert_eq!(out["listed"], serde_json::json!(["completed"]), "{out}");
}

#[test]
fn tasks_cancel_kills_the_run_like_a_request_cancel() {
    if !ready() {
        return;
    }
    let (out, journal) = scenario("cancel-task", &[], Wrapped::Toy);
    assert_eq!(out["first"], "taskCreated", "{out}");
    assert_eq!(out["cancel_status"], "cancelled", "{out}");
    let after = out["stream_after"].to_string();
    assert!(after.contains("was cancelled"), "{out}");
    assert!(journal.contains("call slow"), "{journal}");
    assert!(
        journal.contains("cancelled "),
        "the wrapped call in flight was cancelled upstream: {journal}"
    );
    assert!(
        !journal.contains("after-cancel"),
        "the sandbox was killed, not only its call: {journal}"
    );
    for refused in ["result_error", "cancel_again", "unknown"] {
        assert_eq!(out[refused]["code"], -32602, "{refused}: {out}");
    }
    assert_eq!(out["next_stdout"], "next\n", "the slot is free: {out}");
}

#[test]
fn a_wrapped_tool_that_requires_tasks_is_called_as_a_task() {
    if !ready() {
        return;
    }
    required_tool_is_called_as_a_task(Wrapped::TaskServer);
}

/// The `required-tool` scenario against `wrapped`: the task-required tool goes through
/// tasks/get and tasks/result, the optional one gets a plain call, nothing is cancelled.
fn required_tool_is_called_as_a_task(wrapped: Wrapped) {
    let (out, journal) = scenario("required-tool", &[], wrapped);
    assert_eq!(out["stdout"], "researched: tides\nquick: moon\n", "{out}");
    let lines: Vec<&str> = journal.lines().collect();
    for expected in [
        "tools/call research task",
        "tasks/get",
        "tasks/result",
        "tools/call quick",
    ] {
        assert!(lines.contains(&expected), "{expected}: {journal}");
    }
    assert!(
        !lines.contains(&"tools/call quick task"),
        "an optional tool gets a plain call: {journal}"
    );
    assert!(!lines.contains(&"tasks/cancel"), "{journal}");
}

#[test]
fn a_cancelled_run_cancels_the_task_of_its_wrapped_call() {
    if !ready() {
        return;
    }
    aborted_call_cancels_its_task(Wrapped::TaskServer);
}

/// The `abort-required` scenario against `wrapped`: the client aborts the run while its
/// task-required call runs; the task is cancelled on the server and never finishes.
fn aborted_call_cancels_its_task(wrapped: Wrapped) {
    let (out, journal) = scenario("abort-required", &[], wrapped);
    assert_eq!(out["outcome"], "rejected: McpError", "{out}");
    assert!(journal.contains("tasks/cancel"), "{journal}");
    assert!(
        journal.contains("cancelled "),
        "the server's task store holds it cancelled: {journal}"
    );
    assert!(!journal.contains("finished"), "{journal}");
}

/// The `gives-up` scenario under serve's `serve_args`: checks the task was cancelled and
/// returns the run's error and the wrapped server's journal.
fn given_up(serve_args: &[&str]) -> (String, String) {
    let (out, journal) = scenario("gives-up", serve_args, Wrapped::TaskServer);
    assert!(journal.contains("tasks/cancel"), "{out}\n{journal}");
    (
        out["error"].as_str().unwrap_or_default().to_owned(),
        journal,
    )
}

#[test]
fn a_call_timeout_cancels_the_task_of_its_wrapped_call() {
    if !ready() {
        return;
    }
    let (error, journal) = given_up(&["--call-timeout", "2"]);
    assert!(error.contains("did not answer within 2 s"), "{error}");
    assert!(journal.contains("tasks/get"), "polled first: {journal}");
}

#[test]
fn the_run_deadline_cancels_the_task_of_its_wrapped_call() {
    if !ready() {
        return;
    }
    let (error, _) = given_up(&["--deadline", "3"]);
    assert!(error.contains("deadline"), "{error}");
}

#[test]
fn a_task_run_sends_progress_under_the_calls_token_and_its_terminal_status() {
    if !ready() {
        return;
    }
    let (out, _) = scenario("task-notes", &[], Wrapped::Toy);
    assert_eq!(out["stdout"], "hi\n", "{out}");
    let progress = out["progress"].as_array().expect("progress");
    let messages: Vec<&str> = progress.iter().filter_map(|p| p[1].as_str()).collect();
    assert_eq!(messages.first(), Some(&"the sandbox started"), "{out}");
    assert!(messages.contains(&"echo"), "after each call: {out}");
    assert!(
        messages.iter().any(|m| m.starts_with("running for")),
        "a heartbeat while it sleeps: {out}"
    );
    let values: Vec<f64> = progress.iter().filter_map(|p| p[0].as_f64()).collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "increasing: {out}");
    assert_eq!(out["statuses"], serde_json::json!(["completed"]), "{out}");
}

#[test]
fn a_wrapped_task_that_asks_for_input_fails_the_call_and_is_cancelled() {
    if !ready() {
        return;
    }
    let (out, journal) = scenario("asks-input", &[], Wrapped::TaskServer);
    let error = out["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("asked for input") && error.contains("ask"),
        "{out}"
    );
    assert!(journal.contains("asking which one?"), "{journal}");
    assert!(journal.contains("tasks/cancel"), "{journal}");
    assert!(
        journal.contains("cancelled "),
        "the server's task store holds it cancelled: {journal}"
    );
}

/// What `tasks.mjs SCENARIO` printed against `serve --http` wrapping the toy server, and
/// the toy server's journal.
fn over_http(name: &str) -> (Value, String) {
    let served = Served::start(&[], None);
    let dir = client_dir().expect("the TypeScript client");
    let out = std::process::Command::new("node")
        .arg(dir.join("tasks.mjs"))
        .arg(name)
        .arg(&served.journal)
        .arg("--")
        .arg(served.url())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let parsed = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "tasks.mjs {name} printed no JSON ({e}): {stdout}\nstderr: {}\nserve: {}",
            String::from_utf8_lossy(&out.stderr),
            served.log()
        )
    });
    (
        parsed,
        std::fs::read_to_string(&served.journal).unwrap_or_default(),
    )
}

#[test]
fn run_python_called_as_a_task_over_http_is_polled_and_its_result_fetched() {
    if !ready() {
        return;
    }
    let (out, _) = over_http("run-as-task");
    assert_eq!(
        out["task_capability"]["requests"]["tools"]["call"],
        serde_json::json!({}),
        "{out}"
    );
    assert_eq!(out["execution"]["taskSupport"], "optional", "{out}");
    assert_eq!(out["messages"][0], "taskCreated", "{out}");
    assert_eq!(out["stdout"], "task done\n", "{out}");
    assert_eq!(out["related_task"], true, "{out}");
    assert_eq!(out["status"], "completed", "{out}");
    assert_eq!(out["listed"], serde_json::json!(["completed"]), "{out}");
}

#[test]
fn tasks_cancel_over_http_kills_the_run_and_frees_the_slot() {
    if !ready() {
        return;
    }
    let (out, journal) = over_http("cancel-task");
    assert_eq!(out["cancel_status"], "cancelled", "{out}");
    assert!(journal.contains("cancelled "), "{journal}");
    assert!(!journal.contains("after-cancel"), "{journal}");
    for refused in ["result_error", "cancel_again", "unknown"] {
        assert_eq!(out[refused]["code"], -32602, "{refused}: {out}");
    }
    assert_eq!(out["next_stdout"], "next\n", "{out}");
}

#[test]
fn a_task_run_over_http_sends_progress_and_its_status_on_the_sessions_stream() {
    if !ready() {
        return;
    }
    let (out, _) = over_http("task-notes");
    let messages: Vec<&str> = out["progress"]
        .as_array()
        .expect("progress")
        .iter()
        .filter_map(|p| p[1].as_str())
        .collect();
    assert_eq!(messages.first(), Some(&"the sandbox started"), "{out}");
    assert!(messages.contains(&"echo"), "{out}");
    assert_eq!(out["statuses"], serde_json::json!(["completed"]), "{out}");
}

#[test]
fn an_http_session_that_ends_cancels_its_task_runs() {
    if !ready() {
        return;
    }
    let (out, journal) = over_http("end-session");
    assert!(out["upstream_cancelled_s"].as_f64().is_some(), "{out}");
    assert!(
        !journal.contains("after-cancel"),
        "the sandbox was killed, not only its call: {journal}"
    );
}

#[test]
fn a_task_request_over_http_passes_the_same_origin_and_session_checks() {
    let served = Served::start(&[], None);
    let (status, text) = served.initialize(&[]);
    assert_eq!(status, 200, "{text}");
    let session = session_id(&text).expect("a session id");
    let list = r#"{"jsonrpc":"2.0","id":7,"method":"tasks/list"}"#;
    let headers = |extra: &[(&'static str, &'static str)]| {
        let mut h = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("MCP-Protocol-Version", "2025-11-25"),
        ];
        h.extend_from_slice(extra);
        h
    };
    let mut with_session = headers(&[]);
    with_session.push(("Mcp-Session-Id", &session));
    let (status, text) = served.request("POST", "/mcp", &with_session, list);
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""tasks":[]"#), "{text}");
    let mut foreign = with_session.clone();
    foreign.push(("Origin", "http://evil.example"));
    let (status, text) = served.request("POST", "/mcp", &foreign, list);
    assert_eq!(status, 403, "{text}");
    let mut unknown = headers(&[]);
    unknown.push(("Mcp-Session-Id", "no-such-session"));
    let (status, text) = served.request("POST", "/mcp", &unknown, list);
    assert_eq!(status, 404, "{text}");
}

/// task_server.mjs serving Streamable HTTP, with the config file that names it `tasks`;
/// killed on drop.
struct RemoteTaskServer {
    child: Child,
    dir: tempfile::TempDir,
}

impl RemoteTaskServer {
    /// Start it answering each POST in `mode` (`json` or `sse`).
    fn start(mode: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let clients = client_dir().expect("the TypeScript client");
        let mut child = std::process::Command::new("node")
            .arg(clients.join("task_server.mjs"))
            .arg(dir.path().join("journal"))
            .args(["--http", mode])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start task_server.mjs");
        let mut port = String::new();
        let stdout = child.stdout.take().expect("its stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut port)
            .expect("its port");
        let config = format!(
            r#"{{"servers": {{"tasks": {{"type": "http", "url": "http://127.0.0.1:{}/mcp"}}}}}}"#,
            port.trim()
        );
        std::fs::write(dir.path().join("servers.json"), config).unwrap();
        Self { child, dir }
    }

    fn wrapped(&self) -> Wrapped {
        Wrapped::Remote {
            config: self.dir.path().join("servers.json"),
            journal: self.dir.path().join("journal"),
        }
    }
}

impl Drop for RemoteTaskServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `required-tool` scenario against a remote task server answering in `mode`.
fn remote_required_tool(mode: &str) {
    let server = RemoteTaskServer::start(mode);
    required_tool_is_called_as_a_task(server.wrapped());
}

#[test]
fn a_remote_tool_that_requires_tasks_is_called_as_a_task_with_json_answers() {
    if !ready() {
        return;
    }
    remote_required_tool("json");
}

#[test]
fn a_remote_tool_that_requires_tasks_is_called_as_a_task_with_sse_answers() {
    if !ready() {
        return;
    }
    remote_required_tool("sse");
}

#[test]
fn a_cancelled_run_cancels_the_task_of_its_remote_wrapped_call() {
    if !ready() {
        return;
    }
    let server = RemoteTaskServer::start("sse");
    aborted_call_cancels_its_task(server.wrapped());
}

#[test]
fn the_run_deadline_cancels_the_task_of_its_remote_wrapped_call() {
    if !ready() {
        return;
    }
    let server = RemoteTaskServer::start("json");
    let (out, journal) = scenario("gives-up", &["--deadline", "3"], server.wrapped());
    let error = out["error"].as_str().unwrap_or_default();
    assert!(error.contains("deadline"), "{out}");
    assert!(journal.contains("tasks/get"), "polled first: {journal}");
    assert!(journal.contains("tasks/cancel"), "{journal}");
    assert!(journal.contains("cancelled "), "{journal}");
}
