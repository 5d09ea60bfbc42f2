//! The runner against a scripted host: the host's python3 runs `rootfs/runner.py` (which
//! imports its package from `rootfs/usr/lib/mcp-code-mode`) on pipes (no sandbox), and each
//! test plays the host's side of the line protocol.
//!
//! Index: calls (ids, refusals, argument checks, asyncio); the globals (variables, names,
//! stubs, search_tools); output (truncation, capture, streaming, the write cap, lines never
//! broken); errors (tracebacks, SystemExit, syntax errors, surrogates); the wire (forged
//! messages, bad host lines, EOF, the line cap, tool names).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(20);

/// One runner process and the host's ends of its pipes.
struct Runner {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// The `output` messages `recv` passed over since the last `take_output`.
    outputs: Vec<Value>,
}

impl Runner {
    /// Starts runner.py with the tools `add` and `echo` and the default limits.
    fn start() -> Runner {
        Runner::start_with(
            json!({"stdout_keep": 8192, "stdout_stop": 1048576, "error_chars": 2000}),
        )
    }

    fn start_with(limits: Value) -> Runner {
        let mut runner = Runner::spawn();
        runner.send(&json!({
            "type": "start",
            "tools": [
                {"name": "add", "private": false,
                 "stub": "async def add(params: dict) -> str:\n    \"\"\"\n    Add two integers.\n\n    params: a: int, b: int\n    \"\"\"",
                 "summary": "add(a, b): Add two integers."},
                {"name": "echo", "private": false,
                 "stub": "async def echo(params: dict) -> str:\n    \"\"\"\n    Echo the text back; to add a note.\n\n    params: text: str\n    \"\"\"",
                 "summary": "echo(text): Echo the text back; to add a note."},
                {"name": "create_issue", "private": true,
                 "stub": "async def create_issue(params: dict) -> str:\n    \"\"\"\n    File an issue.\n\n    params: title: str\n    \"\"\"",
                 "summary": "create_issue(title) [private]: File an issue."}
            ],
            "limits": limits,
        }));
        runner
    }

    fn spawn() -> Runner {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/rootfs/runner.py");
        let mut child = Command::new(host_python())
            .args(["-I", "-S", "-B", script])
            .env_clear()
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("failed to spawn python3");
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        Runner {
            child,
            stdin,
            lines,
            outputs: Vec::new(),
        }
    }

    fn send(&mut self, message: &Value) {
        self.send_raw(&format!("{message}\n"));
    }

    fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        stdin
            .write_all(line.as_bytes())
            .expect("write to the runner");
        stdin.flush().expect("flush to the runner");
    }

    /// Sends a cell; its first line back is always `began`, before any of its code runs.
    fn cell(&mut self, code: &str) {
        self.send(&json!({"type": "cell", "code": code}));
        let began = self.recv_any();
        assert_eq!(began, json!({"type": "began"}), "the first line of a cell");
    }

    /// The next line from the runner that is not `output`, parsed; panics after `WAIT`.
    /// The `output` messages on the way are kept for `take_output`.
    fn recv(&mut self) -> Value {
        loop {
            let message = self.recv_any();
            if message["type"] != "output" {
                return message;
            }
            self.outputs.push(message);
        }
    }

    /// The next line from the runner, whatever its type, parsed; panics after `WAIT`.
    fn recv_any(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(WAIT)
            .expect("a line from the runner in time");
        serde_json::from_str(&line).expect("the runner writes JSON lines")
    }

    /// The `output` messages received since the last call.
    fn take_output(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.outputs)
    }

    /// Runs a cell that makes no calls and returns its `done`.
    fn run(&mut self, code: &str) -> Value {
        self.cell(code);
        let done = self.recv();
        assert_eq!(done["type"], "done", "{done}");
        done
    }

    fn answer(&mut self, id: &Value, value: &str) {
        self.send(&json!({"type": "result", "id": id, "ok": true, "value": value}));
    }

    /// Closes the protocol and returns the exit status.
    fn finish(mut self) -> i32 {
        self.stdin.take();
        wait_exit(&mut self.child)
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The host's python3, as an absolute path: the runner sees an empty environment, and a
/// PATH shim (pyenv) would leave `sys.executable` empty.
fn host_python() -> &'static str {
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("failed to run python3 (needed on PATH for the runner tests)");
        String::from_utf8(out.stdout)
            .expect("a UTF-8 path")
            .trim()
            .to_string()
    })
}

fn wait_exit(child: &mut Child) -> i32 {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = child.try_wait().expect("wait for the runner") {
            return status.code().unwrap_or(-1);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the runner did not exit"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn ok_done(stdout: &str) -> Value {
    json!({"type": "done", "stdout": stdout, "error": null, "truncated": false, "stopped": false})
}

/// Whether `text` names a file of the runner: its entry or a module of its package.
fn names_a_runner_file(text: &str) -> bool {
    text.contains("runner.py") || text.contains("code_mode_runner")
}

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
fn variables_persist_across_cells() {
    let mut runner = Runner::start();
    assert_eq!(
        runner.run("x = 41\ndef bump(v):\n    return v + 1"),
        ok_done("")
    );
    assert_eq!(runner.run("print(bump(x))"), ok_done("42\n"));
    assert_eq!(
        runner.run("import asyncio\nawait asyncio.sleep(0)\ny = x"),
        ok_done("")
    );
    assert_eq!(runner.run("print(y, __name__)"), ok_done("41 __main__\n"));
}

#[test]
fn the_runner_names_and_stubs_are_in_the_globals() {
    let mut runner = Runner::start();
    let done = runner.run(
        "print(sorted(TOOLS))\nprint(add.__name__, add.__doc__ == TOOLS['add'])\n\
         print(issubclass(ToolError, Exception), len(dir(__builtins__)) > 100)",
    );
    assert_eq!(
        done,
        ok_done("['add', 'create_issue', 'echo']\nadd True\nTrue True\n")
    );
}

#[test]
fn the_runner_globals_belong_to_main_and_sys_path_is_pythons_own() {
    let mut runner = Runner::start();
    let done = runner.run(
        "import pickle, sys\n\
         print(ToolError.__module__, add.__module__, search_tools.__module__)\n\
         print(pickle.loads(pickle.dumps(ToolError('x'))).args, pickle.loads(pickle.dumps(add)) is add)\n\
         print([p for p in sys.path if 'mcp-code-mode' in p])",
    );
    assert_eq!(
        done,
        ok_done("__main__ __main__ __main__\n('x',) True\n[]\n")
    );
}

#[test]
fn search_tools_scores_names_over_stubs_and_keeps_catalog_order() {
    let mut runner = Runner::start();
    // "add": name of add (2), stub of echo (1). "issue": name of create_issue (2).
    let done = runner.run(
        "print(repr(search_tools('add')))\nprint(repr(search_tools('ISSUE add add')))\n\
         print(repr(search_tools('nothing-here')))\nprint(repr(search_tools('params')))",
    );
    let expected = [
        "'add(a, b): Add two integers.\\necho(text): Echo the text back; to add a note.'",
        "'add(a, b): Add two integers.\\ncreate_issue(title) [private]: File an issue.\\necho(text): Echo the text back; to add a note.'",
        "''",
        "'add(a, b): Add two integers.\\necho(text): Echo the text back; to add a note.\\ncreate_issue(title) [private]: File an issue.'",
    ];
    assert_eq!(done["stdout"], format!("{}\n", expected.join("\n")));
}

#[test]
fn output_past_eight_kib_is_truncated_on_a_character_boundary() {
    let mut runner = Runner::start();
    let done = runner.run("print('x' * 10000)");
    assert_eq!(done["truncated"], true);
    assert_eq!(done["stopped"], false);
    assert_eq!(done["stdout"].as_str().unwrap().len(), 8192);
    // 'a' then 3-byte characters: byte 8192 falls inside one, which is dropped.
    let done = runner.run("print('a' + '\\u20ac' * 4000)");
    let stdout = done["stdout"].as_str().unwrap();
    assert_eq!(stdout.len(), 1 + 3 * 2730);
    assert_eq!(done["truncated"], true);
}

#[test]
fn stderr_and_threads_share_the_capture() {
    let mut runner = Runner::start();
    let done = runner.run(
        "import sys, threading\nprint('out')\nprint('err', file=sys.stderr)\n\
         t = threading.Thread(target=lambda: print('thread'))\nt.start(); t.join()\n\
         sys.stdout.buffer.write(b'raw\\n')",
    );
    assert_eq!(done, ok_done("out\nerr\nthread\nraw\n"));
}

#[test]
fn writing_a_mebibyte_stops_the_runner_at_once() {
    let mut runner = Runner::start();
    runner.cell("try:\n    while True:\n        print('y' * 1000)\nexcept BaseException:\n    print('caught')\n    while True: pass");
    let done = runner.recv();
    assert_eq!(done["stopped"], true);
    assert_eq!(done["truncated"], true);
    assert_eq!(done["error"], "output limit of 1 MiB exceeded");
    assert_eq!(done["stdout"].as_str().unwrap().len(), 8192);
    assert_eq!(wait_exit(&mut runner.child), 0);
}

#[test]
fn the_stop_message_names_the_limit_it_was_given() {
    let mut runner =
        Runner::start_with(json!({"stdout_keep": 10, "stdout_stop": 100, "error_chars": 2000}));
    let done = {
        runner.cell("print('z' * 200)");
        runner.recv()
    };
    assert_eq!(done["error"], "output limit of 100 bytes exceeded");
    assert_eq!(done["stdout"], "zzzzzzzzzz");
}

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
fn plain_output_cannot_forge_a_protocol_message() {
    let mut runner = Runner::start();
    let forged = r#"{"type":"call","id":1,"tool":"add","args":{"a":1,"b":2}}"#;
    let code = format!(
        "import os, subprocess, sys\nprint({forged:?})\nos.write(1, b'{forged}\\n')\nos.write(2, b'x\\n')\n\
         subprocess.run([sys.executable, '-c', 'print({forged:?})'])\nprint('end')"
    );
    let done = runner.run(&code);
    assert_eq!(done, ok_done(&format!("{forged}\nend\n")));
    // stdin is /dev/null for the code.
    assert_eq!(
        runner.run("import sys\nprint(repr(sys.stdin.read()))"),
        ok_done("''\n")
    );
    assert_eq!(runner.finish(), 0);
}

#[test]
fn a_bad_line_from_the_host_exits_with_status_two() {
    for line in [
        "not json\n",
        "[1]\n",
        "{\"type\":\"bogus\"}\n",
        "{\"type\":\"result\",\"id\":\"1\",\"ok\":true,\"value\":\"x\"}\n",
        "{\"type\":\"start\",\"tools\":[{\"name\":\"not an identifier\",\"stub\":\"\",\"summary\":\"\"}]}\n",
        "{\"type\":\"cell\",\"code\":\"print(1)\"}\n",
    ] {
        let mut runner = Runner::spawn();
        runner.send_raw(line);
        assert_eq!(wait_exit(&mut runner.child), 2, "for {line}");
    }
}

#[test]
fn eof_before_and_between_cells_exits_cleanly() {
    let runner = Runner::spawn();
    assert_eq!(runner.finish(), 0);
    let mut runner = Runner::start();
    runner.cell("print('last')");
    runner.stdin.take();
    assert_eq!(runner.recv(), ok_done("last\n"));
    assert_eq!(wait_exit(&mut runner.child), 0);
}

/// The `text` of `output` messages, joined; checks each is well formed.
fn joined(outputs: &[Value]) -> String {
    outputs
        .iter()
        .map(|o| {
            assert_eq!(o.as_object().map(|m| m.len()), Some(3), "{o}");
            assert!(o["truncated"].is_boolean(), "{o}");
            o["text"].as_str().expect("output text").to_string()
        })
        .collect()
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

#[test]
fn arguments_the_host_could_not_read_as_sent_are_refused_in_the_code() {
    let mut runner = Runner::start();
    let cases = [
        (
            "{'text': '\\ud800'}",
            "a string holds the lone surrogate U+D800",
        ),
        ("{'\\udc80': 1}", "a string holds the lone surrogate U+DC80"),
        (
            "{'a': 10**309, 'b': 0}",
            "the integer of 310 digits is outside",
        ),
        (
            "{'x': 2**64 + 1}",
            "the integer 18446744073709551617 is outside",
        ),
        (
            "{'x': [-2**63 - 1]}",
            "the integer -9223372036854775809 is outside",
        ),
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
    // The edges of the range, and 100 levels, are sent exactly.
    runner.cell(
        "def deep(n):\n    v = []\n    for _ in range(n - 1):\n        v = [v]\n    return v\n\
         print(await echo({'x': [2**64 - 1, -2**63], 'd': deep(99)}))",
    );
    let call = runner.recv();
    assert_eq!(call["type"], "call", "{call}");
    assert_eq!(
        call["args"]["x"],
        json!([u64::MAX, i64::MIN]),
        "the line is read exactly"
    );
    runner.answer(&call["id"], "sent");
    assert_eq!(runner.recv(), ok_done("sent\n"));
}

#[test]
fn a_call_over_the_line_cap_is_refused_in_the_code() {
    // This start has no max_line: the runner takes 1 MiB, the host's cap.
    let mut runner = Runner::start();
    let code = "for args in ({'text': 'x' * (1 << 20)}, {str(i): i for i in range(100_000)}):\n    \
                try:\n        await echo(args)\n    except ToolError as e:\n        print(e)";
    let done = runner.run(code);
    let printed = done["stdout"].as_str().unwrap();
    assert_eq!(printed.lines().count(), 2, "{printed}");
    for line in printed.lines() {
        assert!(
            line.starts_with("arguments too large to send: the call would be a line of ")
                && line.ends_with("bytes; the limit is 1 MiB"),
            "{line}"
        );
    }
    // A smaller cap from the host holds exactly: a line of max_line bytes goes out.
    let mut runner = Runner::start_with(
        json!({"stdout_keep": 8192, "stdout_stop": 1048576, "error_chars": 2000, "max_line": 100}),
    );
    let overhead = r#"{"type": "call", "id": 1, "tool": "echo", "args": {"text": ""}}"#.len();
    let fits = 100 - overhead;
    runner.cell(&format!(
        "try:\n    await echo({{'text': 'y' * {}}})\nexcept ToolError as e:\n    print(e)\n\
         print(await echo({{'text': 'y' * {fits}}}))",
        fits + 1
    ));
    let call = runner.recv();
    assert_eq!(call["type"], "call", "{call}");
    assert_eq!(call["args"]["text"].as_str().unwrap().len(), fits);
    runner.answer(&call["id"], "ok");
    let done = runner.recv();
    assert_eq!(
        done["stdout"],
        format!(
            "arguments too large to send: the call would be a line of 101 bytes; the limit is 100 bytes\nok\n"
        )
    );
}

#[test]
fn output_is_streamed_as_it_is_written_a_last_line_without_newline_too() {
    let mut runner = Runner::start();
    runner.cell(
        "print('one', 'two')\nprint('part', end='')\nprint(' flushed', end='', flush=True)\n\
         print(await add({'a': 1, 'b': 2}))\nprint('tail', end='')",
    );
    // Before the call is sent, what was written so far has been streamed, the piece
    // without a newline too.
    let call = runner.recv();
    assert_eq!(call["type"], "call");
    assert_eq!(joined(&runner.take_output()), "one two\npart flushed");
    runner.answer(&call["id"], "3");
    let done = runner.recv();
    assert_eq!(done, ok_done("one two\npart flushed3\ntail"));
    // The unterminated tail was streamed before `done`; nothing is sent after `done`.
    assert_eq!(joined(&runner.take_output()), "3\ntail");
    runner.stdin.take();
    assert_eq!(wait_exit(&mut runner.child), 0);
    assert!(runner.lines.try_recv().is_err(), "a line after done");
}

#[test]
fn streamed_output_stops_at_the_cap_and_says_it_was_cut() {
    let mut runner = Runner::start();
    runner.cell("for i in range(2000):\n    print('line', i)");
    let done = runner.recv();
    let outputs = runner.take_output();
    let streamed = joined(&outputs);
    assert_eq!(streamed, done["stdout"].as_str().unwrap());
    assert!(streamed.len() <= 8192);
    assert_eq!(done["truncated"], true);
    let last = outputs.last().unwrap();
    assert_eq!(last["truncated"], true, "{last}");
    assert!(
        outputs[..outputs.len() - 1]
            .iter()
            .all(|o| o["truncated"] == false)
    );
    // At most one message per write (print writes `line`, ` `, the number, `\n`).
    assert!(outputs.len() <= 4 * 2000, "{}", outputs.len());

    // Invalid bytes become U+FFFD, which is longer: the cap still holds on the text.
    let done = runner.run("import sys\nsys.stdout.buffer.write(b'\\xff' * 9000)");
    assert_eq!(done["truncated"], true);
    let stdout = done["stdout"].as_str().unwrap();
    assert_eq!(stdout, "\u{fffd}".repeat(8192 / 3));
    assert_eq!(joined(&runner.take_output()), stdout);
    // Bytes split over writes are joined; a character cut at the end is replaced.
    let done = runner.run(
        "import sys\nsys.stdout.buffer.write(b'\\xe2\\x82')\nsys.stdout.buffer.write(b'\\xac\\n\\xe2')",
    );
    assert_eq!(done, ok_done("\u{20ac}\n\u{fffd}"));
}

#[test]
fn printing_threads_and_signal_handlers_never_break_a_line() {
    // Eight threads and the main thread print lines of several writes each (print writes
    // each argument, the separators and the end separately), a signal handler prints every
    // half millisecond, and calls go out in between; the interpreter switches threads as
    // often as it can. Every line must arrive whole, each exactly once, in its writer's order.
    let mut runner = Runner::start_with(
        json!({"stdout_keep": 1 << 20, "stdout_stop": 4 << 20, "error_chars": 2000}),
    );
    runner.cell(
        "import asyncio, signal, sys, threading\n\
         sys.setswitchinterval(1e-6)\n\
         signal.signal(signal.SIGALRM, lambda *a: print('tick', 'tock'))\n\
         signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)\n\
         def chatter(n):\n    for i in range(300):\n        print('thread', n, i, sep=' ', end='\\n')\n\
         threads = [threading.Thread(target=chatter, args=(n,)) for n in range(8)]\n\
         for t in threads:\n    t.start()\n\
         results = await asyncio.gather(*(add({'a': i, 'b': 0}) for i in range(20)))\n\
         for i in range(300):\n    print('main', i)\n\
         for t in threads:\n    t.join()\n\
         signal.setitimer(signal.ITIMER_REAL, 0)\nprint(len(results))",
    );
    let mut answered = 0;
    let done = loop {
        let message = runner.recv();
        match message["type"].as_str() {
            Some("call") => {
                runner.answer(&message["id"], "0");
                answered += 1;
            }
            _ => break message,
        }
    };
    assert_eq!(answered, 20);
    assert_eq!(done["type"], "done", "{done}");
    assert_eq!(done["truncated"], false, "{done}");
    let stdout = done["stdout"].as_str().unwrap();
    assert!(stdout.starts_with(&joined(&runner.take_output())));
    assert_eq!(stdout.lines().filter(|l| *l == "20").count(), 1, "{stdout}");
    // Each writer's lines, in the order they arrived.
    let mut seen: std::collections::BTreeMap<String, Vec<u32>> = Default::default();
    let mut ticks = 0;
    for line in stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            ["tick", "tock"] => ticks += 1,
            ["20"] => {}
            ["thread", n, i] if n.len() == 1 => seen
                .entry(format!("thread {n}"))
                .or_default()
                .push(i.parse().expect("a line number")),
            ["main", i] => seen
                .entry("main".into())
                .or_default()
                .push(i.parse().expect("a line number")),
            _ => panic!("a broken line: {line:?}"),
        }
    }
    assert_eq!(seen.len(), 9, "{seen:?}");
    for (writer, numbers) in &seen {
        assert_eq!(*numbers, (0..300).collect::<Vec<u32>>(), "{writer}");
    }
    assert!(ticks > 0, "the signal handler never printed");
}

/// The standard library's module names, which the host renames and the runner refuses.
const STDLIB_LIST: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/rootfs/usr/lib/mcp-code-mode/code_mode_runner/stdlib_modules.txt"
);

#[test]
fn every_name_the_host_gives_a_tool_is_one_the_runner_takes() {
    // The host's python3 is the rootfs's: its builtins and keywords are the runner's.
    let out = Command::new(host_python())
        .args([
            "-c",
            "import builtins, json, keyword\n\
             print(json.dumps(dir(builtins) + keyword.kwlist + keyword.softkwlist))",
        ])
        .output()
        .expect("run python3");
    let mut awkward: Vec<String> = serde_json::from_slice(&out.stdout).expect("names");
    for name in [
        "",
        "_",
        "__",
        "___",
        "____",
        "_____",
        "__class__",
        "__builtins__",
        "__init__",
        "__a__",
        "___x__",
        "__x___",
        "ToolError",
        "TOOLS",
        "search_tools",
        "1st",
        "get-weather",
        "héllo",
        "a.b",
        "__main__",
        "__name__",
        "__doc__",
        "__import__",
        "__debug__",
    ] {
        awkward.push(name.to_string());
    }
    // The standard library's module names, from the one list both sides read.
    let modules = std::fs::read_to_string(STDLIB_LIST).expect("the module list");
    let modules: Vec<&str> = modules
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(modules.contains(&"json"), "{modules:?}");
    awkward.extend(modules.iter().map(|m| m.to_string()));
    let mut names: Vec<String> = awkward
        .iter()
        .map(|n| mcp_code_mode::bridge::python_name(None, n))
        .collect();
    names.sort();
    names.dedup();
    for name in [
        "__class___",
        "__builtins___",
        "____",
        "__",
        "print_",
        "match_",
        "json_",
        "asyncio_",
    ] {
        assert!(names.contains(&name.to_string()), "{name} in {names:?}");
    }

    let mut runner = Runner::spawn();
    let tools: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "stub": "", "summary": "", "private": false}))
        .collect();
    runner.send(&json!({"type": "start", "tools": tools}));
    runner.cell("print(len(TOOLS))\nprint(await globals()['__class___']({}))");
    let call = runner.recv();
    assert_eq!(call["tool"], "__class___", "{call}");
    runner.answer(&call["id"], "renamed");
    assert_eq!(
        runner.recv(),
        ok_done(&format!("{}\nrenamed\n", names.len()))
    );
    assert_eq!(runner.finish(), 0);

    // Real dunders, keywords, builtins, standard-library modules and the runner's names are
    // still refused.
    for name in [
        "__class__",
        "__a__",
        "match",
        "print",
        "TOOLS",
        "None",
        "json",
        "os",
        "zoneinfo",
    ] {
        let mut runner = Runner::spawn();
        runner.send(&json!({"type": "start", "tools": [
            {"name": name, "stub": "", "summary": "", "private": false}
        ]}));
        assert_eq!(wait_exit(&mut runner.child), 2, "{name}");
    }
}
