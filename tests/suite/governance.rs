//! Governance end to end: approval through MCP elicitation (a Python SDK client that
//! accepts, declines, cancels, never answers before the deadline, or declares no elicitation
//! capability; the TypeScript SDK's task client for run_python called as a task, asked with
//! the related task while the task is `input_required`), the stubs of tools that ask first, read-only mode on annotated tools, the
//! audit log of a run (sent, refused and approved calls), `--audit-args` and `--audit-code`,
//! a run replayed from its log, a log that survives a SIGKILLed `serve`, and
//! `--audit-required` failing closed on a full disk.
//!
//! The wrapped server is `scripted_server` on `tests/scenarios/annotated.json`, whose `log`
//! records every message it receives: a call that was never sent is absent from it.
//!
//! Index: `approval_*`; `read_only_*`; `audit_*`.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{
    ExecOptions, bin, example, exec_with, last_json_line, native_client_ready, venv_python,
};

/// The annotated scenario with its `log` in a fresh temp dir, and an audit log path there.
struct Fixture {
    scenario: PathBuf,
    received: PathBuf,
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
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/annotated.json");
        let mut scenario: Value =
            serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let received = dir.path().join("received.log");
        scenario["log"] = json!(received);
        let path = dir.path().join("annotated.json");
        std::fs::write(&path, scenario.to_string()).unwrap();
        Self {
            scenario: path,
            received,
            audit: dir.path().join("audit.jsonl"),
            dir,
        }
    }

    fn server(&self) -> Vec<String> {
        vec![
            example("scripted_server").display().to_string(),
            self.scenario.display().to_string(),
        ]
    }

    /// The tools/call requests the wrapped server received, by tool name.
    fn calls_received(&self) -> Vec<String> {
        std::fs::read_to_string(&self.received)
            .unwrap_or_default()
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

#[test]
fn approval_accepted_sends_the_call_after_asking_with_server_tool_and_arguments() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("accept", WRITE, &["--approve", "write_note"]);
    assert_eq!(printed(&reply), "done\n", "{reply}");
    let asked = reply["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{reply}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        // The server given after `--` is named by its command, not the internal "server".
        message.contains("\"write_note\"")
            && message.contains("of the server \"scripted_server\"")
            && message.contains(r#"{"id":1,"text":"hi"}"#),
        "{message}"
    );
    assert_eq!(f.calls_received(), ["write_note"]);
    let description = reply["description"].as_str().unwrap();
    assert!(
        description.contains("Calls to write_note wait for a person's approval"),
        "{description}"
    );
    let calls = f.records();
    let call = of_kind(&calls, "call")[0];
    assert_eq!(call["verdict"], "sent", "{call}");
    assert_eq!(call["approval"]["decision"], "accepted", "{call}");
}

fn refused_after_asking(mode: &str, decision: &str) {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved(mode, WRITE, &["--approve", "write_note"]);
    assert_eq!(
        printed(&reply),
        "ToolError: declined by the user\n",
        "{reply}"
    );
    assert_eq!(reply["asked"].as_array().unwrap().len(), 1, "{reply}");
    assert!(
        f.calls_received().is_empty(),
        "the call went out: {:?}",
        f.calls_received()
    );
    let calls = f.records();
    let call = of_kind(&calls, "call")[0];
    assert_eq!(call["verdict"], "refused", "{call}");
    assert_eq!(call["reason"], "declined by the user", "{call}");
    assert_eq!(call["approval"]["decision"], decision, "{call}");
}

#[test]
fn approval_declined_raises_declined_by_the_user_and_sends_nothing() {
    refused_after_asking("decline", "declined");
}

#[test]
fn approval_cancelled_raises_declined_by_the_user_and_sends_nothing() {
    refused_after_asking("cancel", "cancelled");
}

#[test]
fn approval_without_the_elicitation_capability_is_refused_saying_so_and_never_sent() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("none", WRITE, &["--approve", "write_note"]);
    let out = printed(&reply);
    assert!(
        out.starts_with(
            "ToolError: write_note refused: it needs a person's approval (--approve), and this MCP client did not declare the elicitation capability"
        ) && out.contains("Only a client that supports elicitation"),
        "{reply}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    assert_eq!(f.decisions(), ["unavailable"]);
}

/// `read_note`, then `write_note` (which needs approval) under `rule_args`: the second call
/// is refused with a message holding `refusal` before anyone is asked, and never sent; its
/// record has no approval step.
fn refused_before_asking(rule_args: &[&str], refusal: &str) {
    let Some(f) = Fixture::ready() else { return };
    let code = "await read_note({'id': 1})\ntry:\n    await write_note({'id': 1})\nexcept ToolError as e:\n    print('ToolError:', e)";
    let mut args = vec!["--approve", "write_note"];
    args.extend(rule_args);
    let reply = f.run_approved("accept", code, &args);
    let out = printed(&reply);
    assert!(
        out.starts_with("ToolError:") && out.contains(refusal),
        "{reply}"
    );
    assert!(reply["asked"].as_array().unwrap().is_empty(), "{reply}");
    assert_eq!(f.calls_received(), ["read_note"]);
    let records = f.records();
    let refused = of_kind(&records, "call")[1];
    assert_eq!(refused["verdict"], "refused", "{refused}");
    assert!(refused.get("approval").is_none(), "{refused}");
}

#[test]
fn approval_is_not_asked_for_a_call_the_budget_refuses() {
    refused_before_asking(&["--max-calls", "1"], "budget of 1 tool calls is spent");
}

#[test]
fn approval_is_not_asked_for_a_call_the_private_data_rule_refuses() {
    refused_before_asking(&["--private", "read_note"], "private");
}

#[test]
fn approval_of_arguments_too_long_to_show_whole_is_refused_without_asking_and_audited() {
    let Some(f) = Fixture::ready() else { return };
    // A padded early value would push the part that matters past a cut prompt.
    let code = "try:\n    await write_note({'id': 1, 'text': '/harmless/tmp/file' + ' ' * 2000 + '/../../../../etc'})\nexcept ToolError as e:\n    print('ToolError:', e)\nprint(await write_note({'id': 2, 'text': 'y' * 1900 + '/tail'}))";
    let reply = f.run_approved("accept", code, &["--approve", "write_note"]);
    let out = printed(&reply);
    assert!(
        out.starts_with(
            "ToolError: write_note refused: arguments too long to show for approval: 2052 characters, limit 2000\n"
        ) && out.ends_with("done\n"),
        "{reply}"
    );
    // Only the call that fits was asked about, and shown whole.
    let asked = reply["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 1, "{reply}");
    let message = asked[0]["message"].as_str().unwrap();
    assert!(
        message.contains("/tail\"}") && !message.contains('…'),
        "{message}"
    );
    assert_eq!(f.calls_received(), ["write_note"]);
    let records = f.records();
    let refused = of_kind(&records, "call")[0];
    assert_eq!(refused["verdict"], "refused", "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("too long to show for approval"),
        "{refused}"
    );
    assert_eq!(f.decisions(), ["unavailable", "accepted"]);
}

#[test]
fn approval_of_destructive_tools_asks_for_every_tool_not_annotated_read_only() {
    let Some(f) = Fixture::ready() else { return };
    let code = "print(await read_note({'id': 1}))\nprint(await delete_note({'id': 1}))\nprint(await unannotated({}))";
    let reply = f.run_approved("accept", code, &["--approve-destructive"]);
    assert_eq!(printed(&reply), "done\ndone\ndone\n", "{reply}");
    let asked: Vec<&str> = reply["asked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["message"].as_str().unwrap())
        .collect();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("\"delete_note\"") && asked[1].contains("\"unannotated\""));
}

#[test]
fn approval_still_pending_at_the_deadline_ends_the_run_withdraws_the_question_and_is_audited() {
    let Some(f) = Fixture::ready() else { return };
    let code = format!("print('asking')\n{WRITE}");
    let reply = f.run_approved(
        "wait",
        &code,
        &["--approve", "write_note", "--deadline", "3"],
    );
    let result = &reply["structured"];
    assert_eq!(result["stopped"], true, "{reply}");
    assert!(
        result["error"]
            .as_str()
            .unwrap_or_default()
            .contains("deadline"),
        "{reply}"
    );
    assert_eq!(printed(&reply), "asking\n", "{reply}");
    assert_eq!(reply["asked"].as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(
        reply["withdrawn"], true,
        "the question was left open: {reply}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    let records = f.records();
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["run_start", "call", "run_end"], "{records:?}");
    let call = &records[1];
    assert_eq!(call["verdict"], "refused", "{call}");
    assert_eq!(
        call["reason"],
        "the run ended (its deadline, a cancel or a stop) before this call was over",
        "{call}"
    );
    assert_eq!(call["approval"]["decision"], "unanswered", "{call}");
    assert_eq!(records[2]["outcome"], "stopped");
}

/// What `approve_task.mjs ANSWER CODE` (the TypeScript SDK, which has 2025-11-25 tasks)
/// printed after running `code` as a task against `target`: a serve command, or the URL of
/// a `serve --http`.
fn approve_as_task(answer: &str, code: &str, target: &[String]) -> Value {
    let dir = super::ts_client::client_dir().expect("the TypeScript client");
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
    let served = super::http_serving::Served::launch(
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

#[test]
fn approval_is_marked_in_the_stub_and_tools_entry_of_each_tool_that_asks_first() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved(
        "none",
        "print(TOOLS['write_note'])\nprint('--')\nprint(TOOLS['read_note'])",
        &["--approve", "write_note"],
    );
    let out = printed(&reply);
    let (write, read) = out.split_once("--").unwrap();
    assert!(write.contains("[asks first]"), "{out}");
    assert!(!read.contains("[asks first]"), "{out}");
    let description = reply["description"].as_str().unwrap();
    let stub = description
        .split("async def ")
        .find(|s| s.starts_with("write_note("))
        .unwrap();
    assert!(stub.contains("[asks first]"), "{description}");
    assert_eq!(
        description.matches("[asks first]").count(),
        1,
        "{description}"
    );
}

#[test]
fn read_only_mode_keeps_only_tools_annotated_read_only_and_says_how_many_it_hid() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("none", "print(sorted(TOOLS))", &["--read-only"]);
    assert_eq!(printed(&reply), "['read_note']\n", "{reply}");
    let description = reply["description"].as_str().unwrap();
    assert!(
        description.contains("Read-only mode is on")
            && description.contains("4 other tools are hidden"),
        "{description}"
    );
    assert!(!description.contains("def write_note"), "{description}");
}

#[test]
fn read_only_mode_refuses_a_hidden_tool_before_it_is_sent() {
    let Some(f) = Fixture::ready() else { return };
    let run = f.exec(
        "try:\n    await globals()['delete_note']({'id': 1})\nexcept KeyError:\n    print('absent')",
        &["--read-only"],
    );
    assert_eq!(run.printed(), "absent\n", "{run:?}");
    assert!(f.calls_received().is_empty());
}

/// The run of the audit test: one call sent, two refused by the bridge (the second to a
/// tool that needs approval, refused by its schema before anyone is asked), one approved.
const MIXED: &str = "print(await read_note({'id': 7}))\ntry:\n    await read_note({'id': 'seven'})\nexcept ToolError as e:\n    print('refused')\ntry:\n    await write_note({'id': 7, 'color': 'red'})\nexcept ToolError as e:\n    print('refused')\nprint(await write_note({'id': 7, 'text': 'x'}))";

#[test]
fn audit_records_a_run_with_sent_refused_and_approved_calls() {
    let Some(f) = Fixture::ready() else { return };
    let reply = f.run_approved("accept", MIXED, &["--approve", "write_note"]);
    assert_eq!(printed(&reply), "done\nrefused\nrefused\ndone\n", "{reply}");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&f.audit).unwrap().mode() & 0o777, 0o600);
    let records = f.records();
    assert!(
        records.iter().all(|r| r["v"] == 1 && r["time"].is_string()),
        "{records:?}"
    );
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["run_start", "call", "call", "call", "call", "run_end"]
    );
    let run = records[0]["run"].as_str().unwrap();
    assert!(
        records
            .iter()
            .all(|r| r["run"] == run && r["session"] == records[0]["session"])
    );
    assert_eq!(records[0]["code"], MIXED);
    assert_eq!(records[0]["code_sha256"], sha256_hex(MIXED.as_bytes()));
    let calls = &records[1..5];
    let summary: Vec<(u64, &str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["seq"].as_u64().unwrap(),
                c["tool"].as_str().unwrap(),
                c["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (1, "read_note", "sent"),
            (2, "read_note", "refused"),
            (3, "write_note", "refused"),
            (4, "write_note", "sent"),
        ]
    );
    assert_eq!(calls[0]["server"], "server");
    assert_eq!(calls[0]["result_bytes"], 4);
    assert_eq!(calls[0]["isError"], false);
    let digest = sha256_hex(br#"{"id":7}"#);
    assert_eq!(calls[0]["args"], json!({"sha256": digest, "bytes": 8}));
    assert!(
        calls[1]["reason"]
            .as_str()
            .unwrap()
            .contains("outside its schema")
    );
    assert!(calls[2]["reason"].as_str().unwrap().contains("\"color\""));
    assert!(calls[0].get("approval").is_none());
    assert!(
        calls[2].get("approval").is_none(),
        "asked about a call its schema refuses"
    );
    assert_eq!(reply["asked"].as_array().unwrap().len(), 1, "{reply}");
    assert_eq!(calls[3]["approval"]["decision"], "accepted");
    let end = &records[5];
    assert_eq!(end["outcome"], "ok");
    assert_eq!(end["calls"], 2);
    assert!(end["duration_ms"].as_u64().is_some());
}

/// The lowercase hex sha256 of `bytes`, as the audit log writes digests.
fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The calls of a log as (seq, tool, args digest, verdict), for comparing two runs.
fn call_trace(records: &[Value]) -> Vec<(Value, Value, Value, Value)> {
    of_kind(records, "call")
        .into_iter()
        .map(|c| {
            (
                c["seq"].clone(),
                c["tool"].clone(),
                c["args"].clone(),
                c["verdict"].clone(),
            )
        })
        .collect()
}

#[test]
fn audit_log_replays_a_run_from_its_recorded_code_with_the_same_calls() {
    let Some(f) = Fixture::ready() else { return };
    let code = "for i in range(3):\n    print(await read_note({'id': i}))\ntry:\n    await write_note({'id': 'x'})\nexcept ToolError:\n    print('refused')";
    let exec = |audit: &Path, code: &str| f.exec(code, &["--audit", &audit.display().to_string()]);
    let first = exec(&f.audit, code);
    assert_eq!(first.printed(), "done\ndone\ndone\nrefused\n", "{first:?}");
    let original = f.records();
    let start = of_kind(&original, "run_start")[0];
    let recorded = start["code"].as_str().unwrap();
    assert_eq!(start["code_sha256"], sha256_hex(recorded.as_bytes()));
    let replay_log = f.dir.path().join("replay.jsonl");
    let replay = exec(&replay_log, recorded);
    assert_eq!(replay.printed(), first.printed());
    let replayed = records(&replay_log);
    assert_ne!(of_kind(&replayed, "run_start")[0]["run"], start["run"]);
    assert_eq!(call_trace(&replayed), call_trace(&original));
    assert_eq!(call_trace(&original).len(), 4);
    assert_eq!(
        of_kind(&replayed, "run_end")[0]["outcome"],
        of_kind(&original, "run_end")[0]["outcome"]
    );
}

/// Send one JSON-RPC message to a serve child.
fn send(stdin: &mut impl Write, message: Value) {
    writeln!(stdin, "{message}").unwrap();
    stdin.flush().unwrap();
}

#[test]
fn audit_log_survives_a_serve_killed_mid_run_every_complete_record_parses() {
    let Some(f) = Fixture::ready() else { return };
    let audit = f.audit.display().to_string();
    let command = f.serve(&["--audit", &audit, "--audit-args", "full"]);
    let mut child = Command::new(&command[0])
        .args(&command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "killer", "version": "1"}}}),
    );
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    let code =
        "i = 0\nwhile True:\n    await write_note({'id': i, 'text': 'p' * 2000})\n    i += 1";
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": "run_python", "arguments": {"code": code}}}),
    );
    let started = Instant::now();
    while of_kind(&f.records(), "call").len() < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{:?}",
            f.records()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&f.audit).unwrap();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    // Every line ended by a newline is one whole record; only a last line without one may
    // be torn.
    for line in &lines {
        if line.ends_with('\n') {
            serde_json::from_str::<Value>(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        }
    }
    let before = f.records();
    assert_eq!(before[0]["kind"], "run_start");
    assert!(of_kind(&before, "run_end").is_empty());
    // The next process appends after whatever was torn, on a line of its own.
    let run = f.exec("print(await read_note({'id': 1}))", &["--audit", &audit]);
    assert_eq!(run.printed(), "done\n", "{run:?}");
    let after = f.records();
    assert_eq!(
        after.len(),
        before.len() + 3,
        "{}",
        std::fs::read_to_string(&f.audit).unwrap()
    );
}

#[test]
fn audit_required_fails_closed_on_a_full_disk_and_sends_nothing() {
    let Some(f) = Fixture::ready() else { return };
    let code = "print(await read_note({'id': 1}))";
    let required = f.exec(code, &["--audit", "/dev/full", "--audit-required"]);
    assert!(required.stopped(), "{required:?}");
    assert!(
        required.error().contains("/dev/full") && required.error().contains("--audit-required"),
        "{required:?}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    // No sandbox ran, so no limits held: the summary line says only the calls.
    assert!(
        required.stderr.contains("mcp-code-mode: calls sent: 0")
            && !required.stderr.contains("limits: ;"),
        "{required:?}"
    );
    // Without --audit-required the failure is reported and the run goes on.
    let lenient = f.exec(code, &["--audit", "/dev/full"]);
    assert_eq!(lenient.printed(), "done\n", "{lenient:?}");
    assert!(
        lenient.stderr.contains("No space left on device"),
        "{lenient:?}"
    );
    assert_eq!(f.calls_received(), ["read_note"]);
}

#[test]
fn audit_args_full_or_off_and_audit_code_off_shape_the_records() {
    let Some(f) = Fixture::ready() else { return };
    let code = "print(await read_note({'id': 3}))";
    let audit = f.audit.display().to_string();
    let full = f.exec(
        code,
        &[
            "--audit",
            &audit,
            "--audit-args",
            "full",
            "--audit-code",
            "off",
        ],
    );
    assert_eq!(full.printed(), "done\n", "{full:?}");
    let records = f.records();
    let start = of_kind(&records, "run_start")[0];
    assert!(start.get("code").is_none(), "{start}");
    assert_eq!(start["code_sha256"], sha256_hex(code.as_bytes()));
    assert_eq!(of_kind(&records, "call")[0]["args"], json!({"id": 3}));
    std::fs::remove_file(&f.audit).unwrap();
    let off = f.exec(code, &["--audit", &audit, "--audit-args", "off"]);
    assert_eq!(off.printed(), "done\n", "{off:?}");
    let records = f.records();
    assert_eq!(of_kind(&records, "run_start")[0]["code"], code);
    let call = of_kind(&records, "call")[0];
    assert!(call.get("args").is_none(), "{call}");
    assert_eq!(call["verdict"], "sent", "{call}");
}

#[test]
fn audit_log_that_cannot_be_opened_stops_startup() {
    let f = Fixture::new();
    let run = f.exec("print(1)", &["--audit", "/nonexistent-dir/audit.jsonl"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("cannot be opened"), "{run:?}");
}

#[test]
fn audit_log_that_is_a_symlink_stops_startup_and_its_target_is_untouched() {
    let f = Fixture::new();
    let victim = f.dir.path().join("victim.conf");
    std::fs::write(&victim, "a config\n").unwrap();
    let link = f.dir.path().join("planted.jsonl");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let run = f.exec("print(1)", &["--audit", &link.display().to_string()]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("symbolic link"), "{run:?}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "a config\n");
}

#[test]
fn audit_names_the_server_of_a_known_tool_refused_for_its_argument_size() {
    let Some(f) = Fixture::ready() else { return };
    let code = "for args in ({'id': 1, 'text': 'x' * 20000}, {'id': 'x'}):\n    try:\n        await read_note(args)\n    except ToolError:\n        print('refused')";
    let audit = f.audit.display().to_string();
    let run = f.exec(code, &["--audit", &audit]);
    assert_eq!(run.printed(), "refused\nrefused\n", "{run:?}");
    let records = f.records();
    let calls = of_kind(&records, "call");
    assert_eq!(calls.len(), 2, "{records:?}");
    assert!(
        calls[0]["reason"].as_str().unwrap().contains("bytes"),
        "{}",
        calls[0]
    );
    for call in calls {
        assert_eq!(call["verdict"], "refused", "{call}");
        assert_eq!(call["server"], "server", "{call}");
        assert_eq!(call["tool"], "read_note", "{call}");
    }
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
}

#[test]
fn approval_refused_in_exec_names_the_function_the_code_called_and_the_flag_that_asked() {
    let Some(f) = Fixture::ready() else { return };
    // A tool named like a standard-library module is `json_` to the code.
    let mut scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(&f.scenario).unwrap()).unwrap();
    scenario["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "json", "inputSchema": {"type": "object"}}));
    std::fs::write(&f.scenario, scenario.to_string()).unwrap();
    let code = "try:\n    await json_({})\nexcept ToolError as e:\n    print('ToolError:', e)";
    let run = f.exec(code, &["--approve", "json"]);
    assert_eq!(
        run.printed(),
        "ToolError: json_ refused: it needs a person's approval (--approve), and this run has no MCP client to ask (exec, or a run without an approver); the call was not sent. Run the code through serve, whose MCP client is asked\n",
        "{run:?}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
}

#[test]
fn a_config_file_sets_read_only_and_approval_per_server_and_the_audit_log() {
    let Some(f) = Fixture::ready() else { return };
    let server = f.server();
    let config = json!({
        "audit": {"file": "config-audit.jsonl", "args": "full"},
        "mcpServers": {
            "notes": {"command": server[0], "args": [server[1]], "readOnly": true},
            "tracker": {"command": server[0], "args": [server[1]], "approve": ["write_note"]}
        }
    });
    let path = f.dir.path().join("servers.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let code = "print(sorted(n for n in TOOLS if n.startswith('notes__')))\nprint(await tracker__delete_note({'id': 1}))\ntry:\n    await tracker__write_note({'id': 1})\nexcept ToolError as e:\n    print('ToolError:', e)";
    let run = exec_with(
        code,
        ExecOptions {
            args: vec!["--config".into(), path.display().to_string()],
            server: Vec::new(),
            ..Default::default()
        },
    );
    let printed = run.printed();
    assert!(
        // The refusal names the function the code called, its server (there are two) and
        // the setting that asked for approval, not the MCP name or a flag nobody gave.
        printed.starts_with(
            "['notes__read_note']\ndone\nToolError: tracker__write_note (server \"tracker\") refused: it needs a person's approval (\"approve\" in the config entry \"tracker\"), and this run has no MCP client to ask (exec"
        ),
        "{run:?}"
    );
    assert_eq!(f.calls_received(), ["delete_note"]);
    let records = records(&f.dir.path().join("config-audit.jsonl"));
    let calls = of_kind(&records, "call");
    assert_eq!(calls.len(), 2, "{records:?}");
    assert_eq!(calls[0]["server"], "tracker");
    assert_eq!(calls[0]["args"], json!({"id": 1}));
    assert_eq!(calls[1]["approval"]["decision"], "unavailable");
}
