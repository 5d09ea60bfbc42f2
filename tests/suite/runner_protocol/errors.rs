//! Errors as the code sees them: traceback tails without runner frames, `SystemExit`,
//! `os._exit`, golden tracebacks, exception groups, syntax errors, lone surrogates.

use std::process::Command;

use serde_json::{Value, json};

use super::{Runner, host_python, names_a_runner_file, ok_done, wait_exit};

#[test]
fn an_error_is_the_traceback_tail_without_runner_frames() {
    let mut runner = Runner::start();
    let done = runner.run("def f():\n    raise ValueError('boom')\nprint('before')\nf()");
    assert_eq!(done["stdout"], "before\n");
    assert_eq!(done["stopped"], false);
    let error = done["error"].as_str().unwrap();
    assert!(
        error.starts_with("Traceback (most recent call last):\n  File \"<code>\", line 4"),
        "{error}"
    );
    assert!(error.ends_with("ValueError: boom"), "{error}");
    assert!(
        !names_a_runner_file(error) && !error.contains("asyncio"),
        "{error}"
    );

    // In an awaited cell, and when the ToolError is raised inside the runner's tool function.
    runner.cell("await add({'a': 1})");
    let call = runner.recv();
    runner.send(&json!({"type": "result", "id": call["id"], "ok": false, "error": "missing b"}));
    let error = runner.recv()["error"].as_str().unwrap().to_string();
    assert_eq!(
        error,
        "Traceback (most recent call last):\n  File \"<code>\", line 1, in <module>\n    await add({'a': 1})\nToolError: missing b"
    );
}

#[test]
fn a_long_traceback_keeps_its_last_twenty_lines_and_its_end() {
    let mut runner =
        Runner::start_with(json!({"stdout_keep": 8192, "stdout_stop": 1048576, "error_chars": 60}));
    let done = runner.run("def r(n):\n    return r(n - 1) if n else 1 / 0\nr(50)");
    let error = done["error"].as_str().unwrap();
    assert_eq!(error.chars().count(), 60);
    assert!(
        error.ends_with("ZeroDivisionError: division by zero"),
        "{error}"
    );

    // Thirty distinct frames (a plain recursion would be folded by Python).
    let mut code = String::from("def f0():\n    1 / 0\n");
    for n in 1..30 {
        code.push_str(&format!("def f{n}():\n    f{}()\n", n - 1));
    }
    code.push_str("f29()");
    let mut runner = Runner::start();
    let error = runner.run(&code)["error"].as_str().unwrap().to_string();
    assert_eq!(error.lines().count(), 20, "{error}");
    assert!(
        error.ends_with("ZeroDivisionError: division by zero"),
        "{error}"
    );
}

#[test]
fn system_exit_and_keyboard_interrupt_are_results() {
    let mut runner = Runner::start();
    assert_eq!(
        runner.run("import sys\nprint('a')\nsys.exit()"),
        ok_done("a\n")
    );
    assert_eq!(runner.run("raise SystemExit(0)"), ok_done(""));
    assert_eq!(runner.run("print('x')\nexit()"), ok_done("x\n"));
    assert_eq!(runner.run("quit(0)"), ok_done(""));
    let failed = |stdout: &str, error: &str| json!({"type": "done", "stdout": stdout, "error": error, "truncated": false, "stopped": false});
    assert_eq!(
        runner.run("print('x')\nraise SystemExit(3)"),
        failed("x\n", "exited with status 3")
    );
    assert_eq!(runner.run("exit(4)"), failed("", "exited with status 4"));
    assert_eq!(runner.run("quit(5)"), failed("", "exited with status 5"));
    assert_eq!(
        runner.run("import sys\nsys.exit(6)"),
        failed("", "exited with status 6")
    );
    assert_eq!(
        runner.run("raise SystemExit('bye')"),
        failed("", "exited with status 1: bye")
    );
    // Inside a task of the event loop too.
    assert_eq!(
        runner.run("import asyncio\nasync def f():\n    exit(7)\nawait asyncio.create_task(f())"),
        failed("", "exited with status 7")
    );
    let error =
        runner.run("import asyncio\nawait asyncio.sleep(0)\nraise KeyboardInterrupt")["error"]
            .clone();
    assert!(
        error.as_str().unwrap().ends_with("KeyboardInterrupt"),
        "{error}"
    );
    // The loop survives all of that.
    assert_eq!(
        runner.run("import asyncio\nawait asyncio.sleep(0)\nprint('alive')"),
        ok_done("alive\n")
    );
}

#[test]
fn os_exit_ends_the_cell_with_its_output_and_status_and_then_the_process() {
    for (status, error) in [(0, Value::Null), (9, json!("exited with status 9"))] {
        let mut runner = Runner::start();
        let done = runner.run(&format!(
            "print('bye', end='')\nimport os\nos._exit({status})"
        ));
        assert_eq!(
            done,
            json!({"type": "done", "stdout": "bye", "error": error, "truncated": false, "stopped": false})
        );
        assert_eq!(wait_exit(&mut runner.child), status);
    }
    // A forked child that calls os._exit just exits: the cell goes on.
    let mut runner = Runner::start();
    let done = runner.run(
        "import os\npid = os.fork()\nif pid == 0:\n    os._exit(3)\nprint(os.waitpid(pid, 0)[1] >> 8)",
    );
    assert_eq!(done, ok_done("3\n"));
}

/// The errors of `cases` (description, code), run one after the other, as the code sees
/// them; calls are refused with "<tool> refused".
fn errors_of(cases: &[(&str, &str)]) -> String {
    let mut runner = Runner::start();
    let mut text = String::new();
    for (what, code) in cases {
        runner.cell(code);
        let done = loop {
            let message = runner.recv();
            if message["type"] == "call" {
                let error = format!("{} refused", message["tool"].as_str().unwrap_or("?"));
                runner.send(
                    &json!({"type": "result", "id": message["id"], "ok": false, "error": error}),
                );
                continue;
            }
            break message;
        };
        let error = done["error"].as_str().unwrap_or_default();
        assert!(!names_a_runner_file(error), "{what}: {error}");
        text.push_str(&format!("### {what}\n{code}\n--- error ---\n{error}\n\n"));
    }
    text
}

fn golden_file(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

#[test]
fn tracebacks_show_only_the_codes_frames_and_match_their_golden_file() {
    let text = errors_of(&[
        ("a plain error", "def f():\n    return 1 + 1 / 0\nf()"),
        (
            "a chained error",
            "try:\n    {}['k']\nexcept KeyError as e:\n    raise ValueError('no k') from e",
        ),
        (
            "a ToolError from a call",
            "async def go():\n    await add({'a': 1})\nawait go()",
        ),
    ]);
    testkit::golden(&golden_file("tracebacks.txt"), &text);
}

#[test]
fn exception_groups_from_a_task_group_show_each_sub_exception() {
    let version = Command::new(host_python())
        .args(["-c", "import sys; print(sys.version_info >= (3, 11))"])
        .output()
        .expect("python3");
    if String::from_utf8_lossy(&version.stdout).trim() != "True" {
        // Python 3.10 has no TaskGroup and no exception groups: nothing to show.
        let mut runner = Runner::start();
        let error = runner.run("import asyncio\nasyncio.TaskGroup")["error"].clone();
        assert!(
            error
                .as_str()
                .unwrap_or("")
                .ends_with("has no attribute 'TaskGroup'"),
            "{error}"
        );
        return;
    }
    let text = errors_of(&[
        (
            // The barrier holds each failed call until both have failed: without it the
            // group cancels the second call when the first fails, whenever the host answers
            // the first before the second, and shows one sub-exception, not two.
            "ToolErrors inside an asyncio.TaskGroup",
            "import asyncio\nboth_failed = asyncio.Barrier(2)\nasync def call(tool, params):\n    try:\n        await tool(params)\n    finally:\n        await both_failed.wait()\nasync with asyncio.TaskGroup() as tg:\n    tg.create_task(call(add, {'a': 1}))\n    tg.create_task(call(echo, {'x': 2}))",
        ),
        (
            "a group of ValueErrors from a TaskGroup",
            "import asyncio\nasync def bad(n):\n    raise ValueError(n)\nasync with asyncio.TaskGroup() as tg:\n    for n in range(3):\n        tg.create_task(bad(n))",
        ),
    ]);
    testkit::golden(&golden_file("tracebacks-task-group.txt"), &text);
}

#[test]
fn a_syntax_error_is_reported_against_the_code() {
    let mut runner = Runner::start();
    let error = runner.run("def (:")["error"].as_str().unwrap().to_string();
    assert!(error.starts_with("  File \"<code>\", line 1"), "{error}");
    assert!(error.ends_with("SyntaxError: invalid syntax"), "{error}");
}

#[test]
fn lone_surrogates_in_an_error_become_replacement_characters() {
    let mut runner = Runner::start();
    let done = runner.run("print('kept')\nraise ValueError('\\ud800')");
    assert_eq!(done["stdout"], "kept\n");
    let error = done["error"].as_str().unwrap();
    assert!(error.ends_with("ValueError: \u{fffd}"), "{error}");
    let done = runner.run("raise Exception(b'a\\xff'.decode('utf-8', 'surrogateescape'))");
    let error = done["error"].as_str().unwrap();
    assert!(error.ends_with("Exception: a\u{fffd}"), "{error}");
    // Printed ones too (print would raise on a real stdout; here they are replaced).
    assert_eq!(runner.run("print('\\udcff!')"), ok_done("\u{fffd}!\n"));
}
