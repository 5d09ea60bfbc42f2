//! End to end, through `exec` and the native sandbox (the module scripts/test-unprivileged
//! selects from this file).

use serde_json::json;

use super::Scenario;
use crate::suite::common::{ExecOptions, exec_with, native_available, require};

fn exec_scenario(code: &str, scenario: &Scenario) -> crate::suite::common::Exec {
    exec_with(
        code,
        ExecOptions {
            server: scenario.command(),
            ..Default::default()
        },
    )
}

#[test]
fn exec_reads_a_crlf_server_with_junk_and_boms() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("transport");
    let run = exec_scenario("print(await echo({}))", &scenario);
    assert_eq!(run.printed(), "echoed\n", "{run:?}");
}

#[test]
fn exec_turns_a_dying_server_into_a_tool_error_the_code_can_catch() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("process");
    let code = "try:\n    await die({})\nexcept ToolError as e:\n    print('caught', e)\n";
    let run = exec_scenario(code, &scenario);
    assert!(run.printed().starts_with("caught "), "{run:?}");
    assert!(run.printed().contains("exited with status 9"), "{run:?}");
}

#[test]
fn exec_survives_an_endless_line_with_bounded_memory() {
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let scenario = Scenario::load("floods");
    let code = "try:\n    await endless_line({})\nexcept ToolError as e:\n    print('caught', e)\n";
    let run = exec_scenario(code, &scenario);
    assert!(run.printed().contains("over 16 MiB"), "{run:?}");
}

#[test]
fn tools_named_in_other_scripts_keep_their_names_and_each_calls_its_own_tool() {
    // README "How a call works", step 1: identifiers in any script are kept; two CJK names
    // and `_` no longer all become `__` and stop startup.
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    let tool = |name: &str| json!({"name": name, "inputSchema": {"type": "object"}});
    let reply = |text: &str| json!([{"reply": {"content": [{"type": "text", "text": text}]}}]);
    let scenario = Scenario::from_value(
        "script_names",
        json!({
            "tools": [tool("名前"), tool("検索"), tool("_"), tool("échec"), tool("ｐｒｉｎｔ")],
            "on": {"tools/call:名前": reply("name"), "tools/call:検索": reply("search"),
                   "tools/call:_": reply("underscore"), "tools/call:échec": reply("fail"),
                   "tools/call:ｐｒｉｎｔ": reply("fullwidth")}
        }),
    );
    let code =
        "print(sorted(TOOLS))\nfor f in (名前, 検索, __, échec, print_):\n    print(await f())";
    let run = exec_scenario(code, &scenario);
    assert_eq!(
        run.printed(),
        "['__', 'print_', 'échec', '名前', '検索']\nname\nsearch\nunderscore\nfail\nfullwidth\n",
        "{run:?}"
    );
}

#[test]
fn thousands_of_refused_server_requests_are_logged_in_a_few_lines_that_count_them() {
    // README "What wrapped servers send": the first few refused requests are logged one by
    // one, the rest counted in one line a second at most.
    if !require(native_available(), "user namespaces are not available") {
        return;
    }
    const SENT: u64 = 3000;
    let requests: String = (0..SENT)
        .map(|i| {
            let request = if i % 2 == 0 {
                json!({"jsonrpc": "2.0", "id": format!("f{i}"), "method": "sampling/createMessage",
                       "params": {"messages": [], "maxTokens": 1}})
            } else {
                json!({"jsonrpc": "2.0", "id": format!("f{i}"), "method": "made_up/method"})
            };
            format!("{request}\n")
        })
        .collect();
    let scenario = Scenario::from_value(
        "refused_flood",
        json!({
            "tools": [{"name": "flood", "inputSchema": {"type": "object"}}],
            "on": {"tools/call:flood": [
                {"raw": requests},
                {"sleep_ms": 1500},
                {"reply": {"content": [{"type": "text", "text": "done"}]}}
            ]}
        }),
    );
    let run = exec_scenario("print(await flood())", &scenario);
    assert_eq!(run.printed(), "done\n", "{run:?}");
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|line| line.contains("refused") || line.contains("response error"))
        .collect();
    let one_by_one = lines
        .iter()
        .filter(|line| line.contains("refused a request of the server"))
        .count() as u64;
    let counted: u64 = lines
        .iter()
        .filter_map(|line| {
            let (_, rest) = line.split_once(" WARN ")?;
            let (count, _) = rest
                .trim_start()
                .split_once(" more requests of the server refused")?;
            count.rsplit(' ').next()?.parse::<u64>().ok()
        })
        .sum();
    assert!(
        lines.len() <= 12,
        "{} log lines for {SENT} refused requests:\n{}",
        lines.len(),
        lines.join("\n")
    );
    assert_eq!(one_by_one, 5, "{}", lines.join("\n"));
    assert_eq!(one_by_one + counted, SENT, "{}", lines.join("\n"));
}
