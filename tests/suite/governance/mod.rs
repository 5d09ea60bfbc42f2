//! Governance end to end: approval through MCP elicitation, read-only mode on annotated
//! tools, and the audit log. Here: the fixture every module of it uses ([`Fixture`]).
//!
//! The wrapped server is `scripted_server` on `tests/scenarios/annotated.json`, whose `log`
//! records every message it receives: a call that was never sent is absent from it.
//!
//! Index: `approvals` (a Python SDK client that accepts, declines, cancels, never answers
//! before the deadline, or declares no elicitation capability; the stubs of tools that ask
//! first); `task_approvals` (run_python called as a task, asked with the related task while
//! the task is `input_required`); `read_only`; `audit_log` (sent, refused and approved calls,
//! `--audit-args` and `--audit-code`, a replay, a SIGKILLed `serve`, `--audit-required` on a
//! full disk); `config_file`; `withdrawn_calls` (a call whose request never left `serve`'s
//! write queue is recorded `withdrawn`, one the server read `sent`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::{
    ExecOptions, bin, exec_with, last_json_line, native_client_ready, venv_python,
};
use super::misbehaving_servers::Scenario;

mod approvals;
mod audit_log;
mod config_file;
mod read_only;
mod task_approvals;
mod withdrawn_calls;

/// The annotated scenario (its `log` in a temp dir of its own), and a fresh temp dir with an
/// audit log path there.
struct Fixture {
    scenario: Scenario,
    audit: PathBuf,
    dir: tempfile::TempDir,
}

impl Fixture {
    /// A fresh fixture when the native backend and the Python SDK client can run here
    /// (else the test is skipped).
    fn ready() -> Option<Self> {
        native_client_ready().then(Self::new)
    }

    /// A fresh fixture when the TypeScript SDK client (the one with 2025-11-25 tasks) can
    /// run here (else the test is skipped).
    fn ready_for_tasks() -> Option<Self> {
        super::ts_client::ready().then(Self::new)
    }

    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        Self {
            scenario: Scenario::load("annotated"),
            audit: dir.path().join("audit.jsonl"),
            dir,
        }
    }

    fn server(&self) -> Vec<String> {
        self.scenario.command()
    }

    /// The tools/call requests the wrapped server received, by tool name.
    fn calls_received(&self) -> Vec<String> {
        self.scenario
            .received()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|m| m["method"] == "tools/call")
            .map(|m| m["params"]["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// `serve ARGS… -- scripted_server annotated.json`.
    fn serve(&self, args: &[&str]) -> Vec<String> {
        let mut command = vec![
            bin().display().to_string(),
            "serve".into(),
            "--pool".into(),
            "0".into(),
        ];
        command.extend(args.iter().map(|a| a.to_string()));
        command.push("--".into());
        command.extend(self.server());
        command
    }

    /// Every complete record of the audit log (a line that does not parse is skipped, as
    /// the schema tells readers to).
    fn records(&self) -> Vec<Value> {
        records(&self.audit)
    }

    /// The approval decision of each call record, in order (`null` for a call that needed
    /// none).
    fn decisions(&self) -> Vec<Value> {
        of_kind(&self.records(), "call")
            .iter()
            .map(|c| c["approval"]["decision"].clone())
            .collect()
    }

    /// The approving client in `mode` runs `code` once through
    /// `serve ARGS… --audit AUDIT -- scripted_server annotated.json`.
    fn run_approved(&self, mode: &str, code: &str, args: &[&str]) -> Value {
        let audit = self.audit.display().to_string();
        let mut args = args.to_vec();
        args.extend(["--audit", &audit]);
        approving_client(mode, code, &self.serve(&args))
    }

    /// `exec ARGS… CODE -- scripted_server annotated.json`.
    fn exec(&self, code: &str, args: &[&str]) -> super::common::Exec {
        exec_with(
            code,
            ExecOptions {
                args: args.iter().map(|a| a.to_string()).collect(),
                server: self.server(),
                ..Default::default()
            },
        )
    }
}

fn records(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn of_kind<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["kind"] == kind).collect()
}

/// Run the approving client in `mode` against `serve`, running `code` once.
fn approving_client(mode: &str, code: &str, serve: &[String]) -> Value {
    let python = venv_python().expect("venv python");
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/approving_client.py");
    let out = Command::new(python)
        .arg(script)
        .arg(mode)
        .arg(code)
        .arg("--")
        .args(serve)
        .output()
        .expect("run the approving client");
    last_json_line(&out, "approving_client.py")
}

/// Code that calls write_note and prints what came back or the ToolError.
const WRITE: &str = "try:\n    print(await write_note({'id': 1, 'text': 'hi'}))\nexcept ToolError as e:\n    print('ToolError:', e)";

fn printed(reply: &Value) -> String {
    reply["structured"]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
