//! Approval of a call from run_python called as a 2025-11-25 task (the TypeScript SDK's task
//! client): asked with the related task while the task is `input_required`, over stdio and
//! over HTTP; a decline, and a client without elicitation.

use std::process::Command;

use serde_json::Value;

use super::{Fixture, WRITE, of_kind};
use crate::suite::common::last_json_line;

/// What `approve_task.mjs ANSWER CODE` (the TypeScript SDK, which has 2025-11-25 tasks)
/// printed after running `code` as a task against `target`: a serve command, or the URL of
/// a `serve --http`.
fn approve_as_task(answer: &str, code: &str, target: &[String]) -> Value {
    let dir = crate::suite::ts_client::client_dir().expect("the TypeScript client");
    let out = Command::new("node")
        .arg(dir.join("approve_task.mjs"))
        .args([answer, code, "--"])
        .args(target)
        .output()
        .expect("run node");
    last_json_line(&out, "approve_task.mjs")
}

impl Fixture {
    /// `serve --approve write_note --audit AUDIT -- scripted_server annotated.json`.
    fn serve_approving(&self) -> Vec<String> {
        let audit = self.audit.display().to_string();
        self.serve(&["--approve", "write_note", "--audit", &audit])
    }
}

/// What the task client saw of an accepted approval: asked once about write_note, with the
/// run's task as the related task, while the task was `input_required`; the statuses went
/// input_required, working, completed; the call was sent and its record says accepted.
fn assert_accepted_as_task(f: &Fixture, out: &Value) {
    assert_eq!(out["stdout"], "done\n", "{out}");
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{out}");
    assert!(
        asked[0]["message"]
            .as_str()
            .unwrap()
            .contains("\"write_note\""),
        "{out}"
    );
    assert_eq!(asked[0]["related_task"], true, "{out}");
    assert_eq!(asked[0]["status"], "input_required", "{out}");
    let statuses: Vec<&str> = out["statuses"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(
        statuses,
        ["input_required", "working", "completed"],
        "{out}"
    );
    assert_eq!(f.calls_received(), ["write_note"]);
    assert_eq!(f.decisions(), ["accepted"]);
    let records = f.records();
    assert_eq!(
        of_kind(&records, "call")[0]["approval"]["decision"],
        "accepted"
    );
}

#[test]
fn approval_of_a_call_from_a_task_run_asks_with_the_related_task_while_it_is_input_required() {
    let Some(f) = Fixture::ready_for_tasks() else {
        return;
    };
    let out = approve_as_task("accept", WRITE, &f.serve_approving());
    assert_accepted_as_task(&f, &out);
}

#[test]
fn approval_of_a_call_from_a_task_run_over_http_asks_on_the_sessions_stream() {
    let Some(f) = Fixture::ready_for_tasks() else {
        return;
    };
    let audit = f.audit.display().to_string();
    let served = crate::suite::http_serving::Served::launch(
        &["--approve", "write_note", "--audit", &audit],
        None,
        |command, _journal| {
            command.arg("--").args(f.server());
        },
    );
    let out = approve_as_task("accept", WRITE, &[served.url()]);
    assert_accepted_as_task(&f, &out);
}

#[test]
fn approval_declined_from_a_task_run_raises_declined_and_a_client_without_elicitation_is_refused() {
    let Some(f) = Fixture::ready_for_tasks() else {
        return;
    };
    let declined = approve_as_task("decline", WRITE, &f.serve_approving());
    assert_eq!(
        declined["stdout"], "ToolError: declined by the user\n",
        "{declined}"
    );
    assert_eq!(
        declined["asked"][0]["status"], "input_required",
        "{declined}"
    );
    let unable = approve_as_task("none", WRITE, &f.serve_approving());
    let out = unable["stdout"].as_str().unwrap_or_default();
    assert!(
        out.contains("did not declare the elicitation capability"),
        "{unable}"
    );
    assert!(unable["asked"].as_array().unwrap().is_empty(), "{unable}");
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    assert_eq!(f.decisions(), ["declined", "unavailable"]);
}
