//! Approval through MCP elicitation: a Python SDK client that accepts, declines, cancels,
//! never answers before the deadline, or declares no elicitation capability; what is never
//! asked (a call refused anyway, arguments too long to show whole); the stubs of tools that ask
//! first; a refusal in `exec`, which has no client to ask; after a decline or cancel, no
//! further question in the same run.

use std::path::Path;

use serde_json::{Value, json};

use super::{Fixture, WRITE, of_kind, printed};
use crate::suite::misbehaving_servers::Scenario;

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
fn approval_refused_in_exec_names_the_function_the_code_called_and_the_flag_that_asked() {
    let Some(mut f) = Fixture::ready() else {
        return;
    };
    // A tool named like a standard-library module is `json_` to the code.
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios/annotated.json");
    let mut scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(source).unwrap()).unwrap();
    scenario["tools"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "json", "inputSchema": {"type": "object"}}));
    f.scenario = Scenario::from_value("annotated", scenario);
    let code = "try:\n    await json_({})\nexcept ToolError as e:\n    print('ToolError:', e)";
    let run = f.exec(code, &["--approve", "json"]);
    assert_eq!(
        run.printed(),
        "ToolError: json_ refused: it needs a person's approval (--approve), and this run has no MCP client to ask (exec, or a run without an approver); the call was not sent. Run the code through serve, whose MCP client is asked\n",
        "{run:?}"
    );
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
}

/// Three calls gathered, then a fourth, with the person answering each question `mode`:
/// only the first question is put, and every later call is refused without asking.
fn declined_once_asks_no_more(mode: &str, decision: &str) {
    let Some(f) = Fixture::ready() else { return };
    let code = "import asyncio\nasync def write(i):\n    try:\n        return await write_note({'id': i, 'text': 'hi'})\n    except ToolError as e:\n        return 'ToolError: ' + str(e)\nfor line in await asyncio.gather(*(write(i) for i in range(3))):\n    print(line)\nprint(await write(3))";
    let reply = f.run_approved(mode, code, &["--approve", "write_note"]);
    let out = printed(&reply);
    let earlier = "ToolError: write_note refused: it needs a person's approval, and the user declined a call earlier in this run, so nobody is asked again in it; the call was not sent";
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{reply}");
    assert_eq!(
        lines
            .iter()
            .filter(|l| **l == "ToolError: declined by the user")
            .count(),
        1,
        "{reply}"
    );
    assert_eq!(
        lines.iter().filter(|l| **l == earlier).count(),
        3,
        "{reply}"
    );
    assert_eq!(lines[3], earlier, "{reply}");
    assert_eq!(reply["asked"].as_array().unwrap().len(), 1, "{reply}");
    assert!(f.calls_received().is_empty(), "{:?}", f.calls_received());
    let mut decisions = f.decisions();
    decisions.sort_by_key(|d| d.is_null());
    assert_eq!(
        decisions,
        [json!(decision), Value::Null, Value::Null, Value::Null]
    );
}

#[test]
fn approval_declined_once_refuses_the_runs_later_calls_without_asking_again() {
    declined_once_asks_no_more("decline", "declined");
}

#[test]
fn approval_cancelled_once_refuses_the_runs_later_calls_without_asking_again() {
    declined_once_asks_no_more("cancel", "cancelled");
}
