//! run_python as a task of the tasks extension of protocol 2026-07-28 (SEP-2663,
//! `io.modelcontextprotocol/tasks`), driven by rmcp 3.11's own client over stdio with protocol
//! 2026-07-28, the one client here that speaks it: a client that declares the extension gets
//! a task for its `tools/call`,
//! polls `tasks/get` to the inlined result, and `tasks/cancel` kills the run; a client that
//! does not declare it gets the plain result.

use std::ffi::OsStr;
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TaskPayload, TaskStatus,
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
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let toy = example("toy_server");
    let mut serve = spawn_serve([
        OsStr::new("serve"),
        OsStr::new("--"),
        toy.as_os_str(),
        OsStr::new("--journal"),
        journal.as_os_str(),
    ]);
    let (stdin, stdout) = (serve.stdin.take().unwrap(), serve.stdout.take().unwrap());
    let capabilities = if extension {
        ClientCapabilities::builder().enable_tasks().build()
    } else {
        ClientCapabilities::default()
    };
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
