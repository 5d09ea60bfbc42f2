//! run_python as a task of the tasks extension of protocol 2026-07-28 (SEP-2663,
//! `io.modelcontextprotocol/tasks`), driven by rmcp 3.11's own client over stdio with protocol
//! 2026-07-28, the one client here that speaks it: a client that declares the extension gets
//! a task for its `tools/call`,
//! polls `tasks/get` to the inlined result, and `tasks/cancel` kills the run; a client that
//! does not declare it gets the plain result. How the run goes is the task's
//! `statusMessage`; a call that needs approval turns the task `input_required` with the
//! question in `inputRequests`, and `tasks/update` answers it.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, InputRequests, ProtocolVersion, TaskPayload, TaskStatus,
    UpdateTaskParams,
};
use rmcp::service::{RoleClient, RunningService};
use serde_json::{Value, json};

use super::common::{example, spawn_serve};

struct Connected {
    client: RunningService<RoleClient, ClientConfig>,
    journal: std::path::PathBuf,
    _serve: tokio::process::Child,
    _dir: tempfile::TempDir,
}

/// `serve` over the toy server (with its journal), and rmcp's client on it, declaring the
/// tasks extension when `extension`.
async fn connect(extension: bool) -> Connected {
    let capabilities = if extension {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
    connect_with(&[], capabilities).await
}

/// `serve SERVE_ARGS` over the toy server, and rmcp's client on it with `capabilities`.
async fn connect_with(serve_args: &[&str], capabilities: ClientCapabilities) -> Connected {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let toy = example("toy_server");
    let mut args: Vec<&OsStr> = vec![OsStr::new("serve")];
    args.extend(serve_args.iter().map(OsStr::new));
    args.extend([
        OsStr::new("--"),
        toy.as_os_str(),
        OsStr::new("--journal"),
        journal.as_os_str(),
    ]);
    let mut serve = spawn_serve(args);
    let (stdin, stdout) = (serve.stdin.take().unwrap(), serve.stdout.take().unwrap());
    let info = ClientConfig::new(capabilities, Implementation::new("extension-tasks", "1"))
        .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let client = info.serve((stdout, stdin)).await.expect("initialize");
    Connected {
        client,
        journal,
        _serve: serve,
        _dir: dir,
    }
}

fn run_python(code: &str) -> CallToolRequestParams {
    let arguments = json!({ "code": code });
    CallToolRequestParams::new("run_python").with_arguments(arguments.as_object().unwrap().clone())
}

/// Poll `tasks/get` until the task is terminal (60 s at most).
async fn settle(c: &Connected, task_id: &str) -> TaskPayload {
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let got = c
            .client
            .get_task(GetTaskParams::new(task_id))
            .await
            .expect("tasks/get");
        if got.task.task.status.is_terminal() || Instant::now() > end {
            return got.task.payload;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn journal_shows(c: &Connected, text: &str) -> bool {
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end {
        if std::fs::read_to_string(&c.journal).is_ok_and(|j| j.contains(text)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn a_client_of_the_tasks_extension_gets_a_task_and_polls_it_to_the_result() {
    let c = connect(true).await;
    let response = c
        .client
        .call_tool_once(run_python("print(await echo({'text': 'polled'}))"))
        .await
        .expect("tools/call");
    let CallToolResponse::Task(created) = response else {
        panic!("not a task: {response:?}");
    };
    assert_eq!(created.task.status, TaskStatus::Working);
    let payload = settle(&c, &created.task.task_id).await;
    let TaskPayload::Completed { result } = payload else {
        panic!("not completed: {payload:?}");
    };
    let result = Value::Object(result);
    assert_eq!(
        result["structuredContent"]["stdout"], "polled\n",
        "{result}"
    );
}

#[tokio::test]
async fn tasks_cancel_of_the_extension_kills_the_run() {
    let c = connect(true).await;
    let code =
        "try:\n    await slow({'seconds': 30})\nfinally:\n    await echo({'text': 'after-cancel'})";
    let CallToolResponse::Task(created) = c.client.call_tool_once(run_python(code)).await.unwrap()
    else {
        panic!("not a task");
    };
    assert!(journal_shows(&c, "call slow").await);
    c.client
        .cancel_task(CancelTaskParams::new(created.task.task_id.clone()))
        .await
        .expect("tasks/cancel");
    let payload = settle(&c, &created.task.task_id).await;
    assert!(matches!(payload, TaskPayload::Cancelled), "{payload:?}");
    assert!(
        journal_shows(&c, "cancelled ").await,
        "the call in flight was cancelled upstream"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let journal = std::fs::read_to_string(&c.journal).unwrap_or_default();
    assert!(!journal.contains("after-cancel"), "{journal}");
}

#[tokio::test]
async fn a_client_without_the_extension_gets_the_plain_result() {
    let c = connect(false).await;
    let response = c
        .client
        .call_tool_once(run_python("print('plain')"))
        .await
        .unwrap();
    let CallToolResponse::Complete(result) = response else {
        panic!("a task for a client that did not declare the extension: {response:?}");
    };
    let stdout = result.structured_content.unwrap_or_default()["stdout"].clone();
    assert_eq!(stdout, "plain\n");
}

/// Start `code` as an extension task of `c`; its id.
async fn start(c: &Connected, code: &str) -> String {
    let response = c.client.call_tool_once(run_python(code)).await.unwrap();
    let CallToolResponse::Task(created) = response else {
        panic!("not a task: {response:?}");
    };
    created.task.task_id
}

/// The completed result of the task `task_id`.
async fn completed(c: &Connected, task_id: &str) -> Value {
    let payload = settle(c, task_id).await;
    let TaskPayload::Completed { result } = payload else {
        panic!("not completed: {payload:?}");
    };
    Value::Object(result)
}

#[tokio::test]
async fn an_extension_task_reports_how_its_run_goes_in_its_status_message() {
    let c = connect(true).await;
    let task_id = start(
        &c,
        "print(await echo({'text': 'hi'}))\nimport time\ntime.sleep(6)",
    )
    .await;
    let mut messages: Vec<String> = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    loop {
        let got = c
            .client
            .get_task(GetTaskParams::new(&task_id))
            .await
            .unwrap();
        if let Some(message) = got.task.task.status_message
            && messages.last() != Some(&message)
        {
            messages.push(message);
        }
        if got.task.task.status.is_terminal() || Instant::now() > end {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        messages.iter().any(|m| m == "echo"),
        "after the call: {messages:?}"
    );
    assert!(
        messages.iter().any(|m| m.starts_with("running for")),
        "a heartbeat while it sleeps: {messages:?}"
    );
    let result = completed(&c, &task_id).await;
    assert_eq!(result["structuredContent"]["stdout"], "hi\n", "{result}");
}

/// The open questions of the task `task_id`, once it is `input_required` (30 s at most).
async fn questions(c: &Connected, task_id: &str) -> InputRequests {
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let got = c
            .client
            .get_task(GetTaskParams::new(task_id))
            .await
            .unwrap();
        match got.task.payload {
            TaskPayload::InputRequired { input_requests } => return input_requests,
            payload if Instant::now() > end || got.task.task.status.is_terminal() => {
                panic!("never input_required: {payload:?}")
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Answer the one open question of `task_id` with the elicitation `action`.
async fn answer(c: &Connected, task_id: &str, action: &str) {
    let asked = questions(c, task_id).await;
    assert_eq!(asked.len(), 1, "{asked:?}");
    let (key, question) = asked.into_iter().next().unwrap();
    let question = serde_json::to_value(question).unwrap();
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let message = question["params"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("\"echo\""), "names the tool: {question}");
    assert!(message.contains("asked"), "shows the arguments: {question}");
    assert!(
        !std::fs::read_to_string(&c.journal)
            .unwrap_or_default()
            .contains("call echo"),
        "nothing is sent before the answer"
    );
    let responses = [(key, json!({"action": action, "content": {}}))].into();
    c.client
        .update_task(UpdateTaskParams::new(task_id, responses))
        .await
        .expect("tasks/update");
}

fn asking_client() -> ClientCapabilities {
    ClientCapabilities::builder()
        .enable_elicitation()
        .enable_tasks()
        .build()
}

#[tokio::test]
async fn approval_in_an_extension_task_asks_through_input_required_and_an_accept_sends_the_call() {
    let c = connect_with(&["--approve", "echo"], asking_client()).await;
    let task_id = start(&c, "print(await echo({'text': 'asked'}))").await;
    answer(&c, &task_id, "accept").await;
    let result = completed(&c, &task_id).await;
    assert_eq!(result["structuredContent"]["stdout"], "asked\n", "{result}");
    assert!(journal_shows(&c, "call echo").await);
}

#[tokio::test]
async fn a_declined_question_of_an_extension_task_refuses_the_call_and_a_client_without_elicitation_is_not_asked()
 {
    let c = connect_with(&["--approve", "echo"], asking_client()).await;
    let code = "try:\n    await echo({'text': 'asked'})\nexcept ToolError as e:\n    print(e)";
    let task_id = start(&c, code).await;
    answer(&c, &task_id, "decline").await;
    let result = completed(&c, &task_id).await;
    let stdout = result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default();
    assert!(stdout.contains("declined by the user"), "{result}");
    let c = connect_with(
        &["--approve", "echo"],
        ClientCapabilities::builder().enable_tasks().build(),
    )
    .await;
    let task_id = start(&c, code).await;
    let result = completed(&c, &task_id).await;
    let stdout = result["structuredContent"]["stdout"]
        .as_str()
        .unwrap_or_default();
    assert!(
        stdout.contains("did not declare the elicitation capability"),
        "{result}"
    );
    let journal = std::fs::read_to_string(&c.journal).unwrap_or_default();
    assert!(!journal.contains("call echo"), "{journal}");
}

#[tokio::test]
async fn a_question_of_an_extension_task_still_open_at_the_deadline_ends_the_run_unsent() {
    let c = connect_with(&["--approve", "echo", "--deadline", "3"], asking_client()).await;
    let task_id = start(&c, "print(await echo({'text': 'asked'}))").await;
    assert_eq!(questions(&c, &task_id).await.len(), 1);
    let result = completed(&c, &task_id).await;
    let error = result["structuredContent"]["error"].to_string();
    assert!(error.contains("deadline"), "{result}");
    let journal = std::fs::read_to_string(&c.journal).unwrap_or_default();
    assert!(!journal.contains("call echo"), "{journal}");
}
