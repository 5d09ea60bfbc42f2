//! Edge cases of the runner ⇄ host protocol, end to end through `exec` on each backend:
//! values JSON readers do not keep, lines over the cap, output of a cell that is stopped, a
//! runner that leaves on its own, and tools whose names are dunders.
//!
//! Index: lone surrogates; arguments JSON cannot carry; the line cap; output kept when a
//! cell is stopped (deadline, protocol violation, memory); a runner that exits by itself or
//! refuses a host line; dunder-named tools.

use super::common::{ExecOptions, example, exec_with};

/// The code's expression for the runner's module that holds its private descriptors
/// (`PROTO_IN`, `PROTO_OUT`, `DIAG`) and its own exit (`real_exit`), for the tests where the
/// code plays the runner.
const RUNNER_CHANNEL: &str = "__import__('sys').modules['code_mode_runner.channel']";

fn run(backend: &str, code: &str, args: &[&str]) -> super::common::Exec {
    super::common::exec_on(backend, code, args)
}

crate::on_both_backends!(
    an_error_holding_lone_surrogates_keeps_what_was_printed,
    arguments_json_cannot_carry_exactly_raise_tool_error_and_never_reach_the_server,
    a_call_over_the_line_cap_raises_tool_error,
    output_printed_before_the_deadline_is_returned,
    output_printed_before_a_protocol_violation_is_returned,
    output_printed_before_the_memory_limit_is_returned,
    a_runner_that_exits_by_itself_reports_its_own_status,
    every_way_to_exit_means_what_it_says,
    a_last_line_without_newline_survives_a_kill,
    a_runner_refusing_a_host_line_says_why,
    dunder_named_tools_are_renamed_and_callable,
);

fn an_error_holding_lone_surrogates_keeps_what_was_printed(backend: &str) {
    let r = run(backend, "print('before')\nraise ValueError('\\ud800')", &[]);
    assert_eq!(r.printed(), "before\n", "{r:?}");
    assert!(!r.stopped(), "{r:?}");
    assert!(r.error().ends_with("ValueError: \u{fffd}"), "{r:?}");
    let r = run(
        backend,
        "raise Exception(b'\\xff'.decode('utf-8', 'surrogateescape'))",
        &[],
    );
    assert!(r.error().ends_with("Exception: \u{fffd}"), "{r:?}");
}

fn arguments_json_cannot_carry_exactly_raise_tool_error_and_never_reach_the_server(backend: &str) {
    let code = r#"
for tool, args in ((echo, {"text": "\ud800"}), (add, {"a": 10**309, "b": 0}), (echo, {"x": 2**64 + 1}), (add, {"a": float("nan"), "b": 1})):
    try:
        await tool(args)
        print("sent")
    except ToolError as e:
        print("refused:", str(e).split(":")[0])
print(await calls({}))
"#;
    let r = run(backend, code, &[]);
    assert_eq!(
        r.printed(),
        "refused: arguments cannot be sent as JSON\n".repeat(4) + "1\n",
        "{r:?}"
    );
}

fn a_call_over_the_line_cap_raises_tool_error(backend: &str) {
    let code = r#"
for args in ({"text": "x" * (1 << 20)}, {str(i): i for i in range(100_000)}):
    try:
        await echo(args)
    except ToolError as e:
        print(str(e).split(":")[0])
print(await calls({}))
"#;
    let r = run(backend, code, &[]);
    assert_eq!(
        r.printed(),
        "arguments too large to send\n".repeat(2) + "1\n",
        "{r:?}"
    );
}

fn output_printed_before_the_deadline_is_returned(backend: &str) {
    let r = run(
        backend,
        "print('spinning')\nprint('x' * 9000)\nwhile True:\n    pass",
        &["--deadline", "3"],
    );
    assert!(r.stopped(), "{r:?}");
    assert!(r.error().contains("deadline"), "{r:?}");
    assert!(r.printed().starts_with("spinning\nxxx"), "{r:?}");
    assert_eq!(r.printed().len(), 8192, "{r:?}");
    assert_eq!(r.result()["truncated"], true, "{r:?}");
}

fn output_printed_before_a_protocol_violation_is_returned(backend: &str) {
    let code = "print('before')\nimport os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, b'not json\\n')\n    except OSError:\n        pass\nimport time\ntime.sleep(5)";
    let r = run(backend, code, &[]);
    assert!(r.stopped(), "{r:?}");
    assert!(r.error().starts_with("protocol violation"), "{r:?}");
    assert_eq!(r.printed(), "before\n", "{r:?}");
    assert_eq!(r.result()["truncated"], false, "{r:?}");
}

fn output_printed_before_the_memory_limit_is_returned(backend: &str) {
    // Killed by the memory limit, or (rlimit fallback) a MemoryError: the print survives both.
    let r = run(
        backend,
        "print('before')\nx = b'x' * (1 << 30)\nprint(len(x))",
        &["--deadline", "20"],
    );
    assert_eq!(r.printed(), "before\n", "{r:?}");
    assert!(r.stopped() || r.error().contains("MemoryError"), "{r:?}");
}

fn a_runner_that_exits_by_itself_reports_its_own_status(backend: &str) {
    // The runner's own exit (not the code's os._exit, which ends the cell with a result).
    let exit = format!("{RUNNER_CHANNEL}.real_exit");
    let r = run(backend, &format!("print('bye')\n{exit}(0)"), &[]);
    assert!(r.stopped(), "{r:?}");
    assert_eq!(r.error(), "the sandbox exited without a result", "{r:?}");
    assert_eq!(r.printed(), "bye\n", "{r:?}");
    // Its pipe closes a moment before it exits: the host waits for the exit, not kills it.
    let code = format!(
        "import os, time\nos.close({RUNNER_CHANNEL}.PROTO_OUT)\ntime.sleep(0.2)\n{exit}(0)"
    );
    let r = run(backend, &code, &[]);
    assert_eq!(r.error(), "the sandbox exited without a result", "{r:?}");
    let r = run(backend, &format!("{exit}(3)"), &[]);
    assert_eq!(
        r.error(),
        "the sandbox exited with status 3 without a result",
        "{r:?}"
    );
}

fn every_way_to_exit_means_what_it_says(backend: &str) {
    for (code, error) in [
        ("print('out')\nexit()", None),
        ("print('out')\nquit()", None),
        ("print('out')\nimport sys\nsys.exit(0)", None),
        ("print('out')\nraise SystemExit(None)", None),
        ("print('out')\nimport os\nos._exit(0)", None),
        ("print('out')\nexit(2)", Some("exited with status 2")),
        (
            "print('out')\nimport sys\nsys.exit(3)",
            Some("exited with status 3"),
        ),
        (
            "print('out')\nraise SystemExit(4)",
            Some("exited with status 4"),
        ),
        (
            "print('out')\nimport os\nos._exit(5)",
            Some("exited with status 5"),
        ),
    ] {
        let r = run(backend, code, &[]);
        assert_eq!(r.printed(), "out\n", "{code}: {r:?}");
        assert!(!r.stopped(), "{code}: {r:?}");
        assert_eq!(r.result()["error"].as_str(), error, "{code}: {r:?}");
        assert_eq!(r.code, i32::from(error.is_some()), "{code}: {r:?}");
    }
}

fn a_last_line_without_newline_survives_a_kill(backend: &str) {
    // The deadline, the memory limit, a crash (SIGSEGV): the unterminated line is kept.
    for (code, args) in [
        (
            "print('partial', end='')\nwhile True:\n    pass",
            &["--deadline", "3"][..],
        ),
        ("print('partial', end='')\nx = b'x' * (1 << 30)", &[][..]),
        (
            "print('partial', end='')\nimport ctypes\nctypes.string_at(0)",
            &[][..],
        ),
    ] {
        let r = run(backend, code, args);
        assert_eq!(r.printed(), "partial", "{code}: {r:?}");
        assert!(r.result()["error"].is_string(), "{code}: {r:?}");
    }
}

fn a_runner_refusing_a_host_line_says_why(backend: &str) {
    // The code plays the runner: its diagnostics pipe, then status 2 (a bad host line).
    let code = format!(
        "import os\nos.write({RUNNER_CHANNEL}.DIAG, b'runner: bad line from the host: forged\\n')\n{RUNNER_CHANNEL}.real_exit(2)"
    );
    let r = run(backend, &code, &[]);
    assert_eq!(
        r.error(),
        "the sandbox exited with status 2 without a result: runner: bad line from the host: forged",
        "{r:?}"
    );
    assert!(
        r.stderr.contains("the sandbox exited without a result")
            && r.stderr.contains("runner: bad line from the host: forged"),
        "the host logs the runner's diagnostics: {}",
        r.stderr
    );
}

fn dunder_named_tools_are_renamed_and_callable(backend: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let scenario = dir.path().join("dunders.json");
    let reply =
        |text: &str| serde_json::json!([{"reply": {"content": [{"type": "text", "text": text}]}}]);
    let tools: Vec<_> = ["__class__", "__builtins__", "____", "print", ""]
        .iter()
        .map(|name| serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
        .collect();
    let script = serde_json::json!({
        "tools": tools,
        "on": {
            "tools/call:__class__": reply("class"),
            "tools/call:____": reply("underscores"),
            "tools/call:": reply("empty"),
        },
    });
    std::fs::write(&scenario, script.to_string()).expect("write the scenario");
    let r = exec_with(
        "print(sorted(TOOLS))\nprint(await __class___({}), await ____({}), await globals()['__']({}))",
        ExecOptions {
            backend,
            server: vec![
                example("scripted_server").display().to_string(),
                scenario.display().to_string(),
            ],
            ..Default::default()
        },
    );
    assert_eq!(
        r.printed(),
        "['__', '____', '__builtins___', '__class___', 'print_']\nclass underscores empty\n",
        "{r:?}"
    );
}
