//! Calls from the code: ids matched out of order, refusals as `ToolError`, argument checks
//! in the code before anything is sent, calls from `asyncio.run`.

use serde_json::{Value, json};

use super::{Runner, ok_done};

#[test]
fn began_echoes_the_nonce_of_the_cell_it_read() {
    let mut runner = Runner::start();
    runner.send(&json!({"type": "cell", "code": "print('hi')", "nonce": "c0ffee"}));
    assert_eq!(
        runner.recv_any(),
        json!({"type": "began", "nonce": "c0ffee"})
    );
    assert_eq!(runner.recv(), ok_done("hi\n"));
}

#[test]
fn gathered_calls_are_matched_by_id_when_answered_out_of_order() {
    let mut runner = Runner::start();
    runner.cell(
        "import asyncio, json\n\
         sums = await asyncio.gather(*(add({'a': n, 'b': 10}) for n in range(3)))\n\
         print([json.loads(s)['sum'] for s in sums])",
    );
    let calls: Vec<Value> = (0..3).map(|_| runner.recv()).collect();
    for (n, call) in calls.iter().enumerate() {
        assert_eq!(call["type"], "call");
        assert_eq!(call["tool"], "add");
        assert_eq!(call["args"], json!({"a": n, "b": 10}));
        assert!(call["id"].is_u64(), "{call}");
    }
    // An id nobody waits for is ignored.
    runner.send(&json!({"type": "result", "id": 999, "ok": true, "value": "stray"}));
    for call in calls.iter().rev() {
        let sum = call["args"]["a"].as_i64().unwrap() + 10;
        runner.answer(&call["id"], &format!("{{\"sum\": {sum}}}"));
    }
    assert_eq!(runner.recv(), ok_done("[10, 11, 12]\n"));
    assert_eq!(runner.finish(), 0);
}

#[test]
fn a_refused_call_raises_tool_error_with_the_hosts_message() {
    let mut runner = Runner::start();
    runner.cell(
        "try:\n    await echo({'text': 'hi'})\nexcept ToolError as e:\n    print('refused:', e)",
    );
    let call = runner.recv();
    runner.send(
        &json!({"type": "result", "id": call["id"], "ok": false, "error": "not on the allowlist"}),
    );
    assert_eq!(runner.recv(), ok_done("refused: not on the allowlist\n"));
}

#[test]
fn a_call_that_is_not_one_dict_or_keywords_raises_type_error_and_sends_nothing() {
    // The host refuses such arguments on the wire too (controls'
    // `non_object_arguments_on_the_wire_are_refused_by_the_host`); this is the runner's
    // earlier, clearer error.
    let mut runner = Runner::start();
    for call in [
        "add([1, 2])",
        "add('a')",
        "add(None)",
        "add({'a': 1}, {'b': 2})",
        "add({'a': 1}, b=2)",
    ] {
        let done = runner.run(&format!("await {call}"));
        let error = done["error"].as_str().unwrap();
        assert!(
            error.contains("TypeError: add() takes its arguments as one dict or as keywords"),
            "{call}: {error}"
        );
    }
    // Nothing was sent: the next line is the next cell's done.
    assert_eq!(runner.run("print(1)"), ok_done("1\n"));
}

#[test]
fn keywords_and_one_dict_send_the_same_arguments() {
    let mut runner = Runner::start();
    for call in ["add(a=1, b=2)", "add({'a': 1, 'b': 2})"] {
        runner.cell(&format!("print(await {call})"));
        let sent = runner.recv();
        assert_eq!(sent["args"], json!({"a": 1, "b": 2}), "{call}");
        runner.answer(&sent["id"], "3");
        assert_eq!(runner.recv(), ok_done("3\n"));
    }
}

#[test]
fn a_lone_params_keyword_holding_a_dict_is_the_dict_form_unless_the_tool_has_a_params_parameter() {
    // The stub reads `async def add(params: dict)`; `add(params={...})` is its keyword form.
    let mut runner = Runner::spawn();
    let tool = |name: &str, params: Value| {
        json!({"name": name, "private": false, "params": params, "summary": name,
            "stub": format!("async def {name}(params: dict) -> str:\n    \"\"\"\"\"\"")})
    };
    runner.send(&json!({"type": "start", "tools": [
        tool("add", json!(["a", "b"])), tool("wrap", json!(["params", "x"]))]}));
    for (call, sent) in [
        ("add(params={'a': 1, 'b': 2})", json!({"a": 1, "b": 2})),
        (
            "add(params={'a': 1}, b=2)",
            json!({"params": {"a": 1}, "b": 2}),
        ),
        ("add(params=[1])", json!({"params": [1]})),
        ("wrap(params={'a': 1})", json!({"params": {"a": 1}})),
    ] {
        runner.cell(&format!("print(await {call})"));
        let line = runner.recv();
        assert_eq!(line["args"], sent, "{call}");
        runner.answer(&line["id"], "ok");
        assert_eq!(runner.recv(), ok_done("ok\n"), "{call}");
    }
}

#[test]
fn arguments_json_cannot_hold_fail_in_the_code_not_on_the_wire() {
    let mut runner = Runner::start();
    let done = runner.run("await add({'a': float('nan')})");
    let error = done["error"].as_str().unwrap();
    assert!(
        error.contains("ToolError: arguments cannot be sent as JSON"),
        "{error}"
    );
    // Nothing was sent: the next line is the next cell's done.
    assert_eq!(runner.run("print(1)"), ok_done("1\n"));
}

#[test]
fn tool_calls_work_from_asyncio_run_in_a_plain_cell() {
    let mut runner = Runner::start();
    runner.cell("import asyncio\nprint(asyncio.run(add({'a': 1, 'b': 2})))");
    let call = runner.recv();
    runner.answer(&call["id"], "3");
    assert_eq!(runner.recv(), ok_done("3\n"));
}

#[test]
fn arguments_the_host_could_not_read_as_sent_are_refused_in_the_code() {
    let mut runner = Runner::start();
    let cases = [
        (
            "{'text': '\\ud800'}",
            "a string holds the lone surrogate U+D800",
        ),
        ("{'\\udc80': 1}", "a string holds the lone surrogate U+DC80"),
        ("{'x': float('inf')}", "Out of range float values"),
        ("{'x': 10**5000}", "Exceeds the limit"),
        ("{'x': deep(100)}", "nested more than 100 levels deep"),
    ];
    for (args, why) in cases {
        let code = format!(
            "def deep(n):\n    v = []\n    for _ in range(n - 1):\n        v = [v]\n    return v\n\
             try:\n    await echo({args})\nexcept ToolError as e:\n    print(e)"
        );
        let done = runner.run(&code);
        let printed = done["stdout"].as_str().unwrap();
        assert!(
            printed.starts_with("arguments cannot be sent as JSON: ") && printed.contains(why),
            "{args}: {printed}"
        );
    }
    // Integers of any length Python writes, and 100 levels, are sent exactly.
    runner.cell(
        "def deep(n):\n    v = []\n    for _ in range(n - 1):\n        v = [v]\n    return v\n\
         print(await echo({'x': [2**64 - 1, -2**63, 2**64 + 1, -2**63 - 1, 10**309], 'd': deep(99)}))",
    );
    let call = runner.recv();
    assert_eq!(call["type"], "call", "{call}");
    assert_eq!(
        call["args"]["x"].to_string(),
        format!(
            "[18446744073709551615,-9223372036854775808,18446744073709551617,-9223372036854775809,1{}]",
            "0".repeat(309)
        ),
        "the line is read exactly"
    );
    runner.answer(&call["id"], "sent");
    assert_eq!(runner.recv(), ok_done("sent\n"));
}
