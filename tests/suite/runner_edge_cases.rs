//! Edge cases of the runner ⇄ host protocol, end to end through `exec` (and a
//! [`HeldSandbox`] for several cells) on each backend: values JSON readers do not keep,
//! lines over the cap, output of a cell that is stopped, a runner that leaves on its own,
//! tools named like dunders, builtins or standard-library modules, and lines the code
//! writes itself on runner.py's protocol
//! descriptor (it shares runner.py's process), which the host holds to its own rules
//! (`src/run/cell_rules.rs`).
//!
//! Index: lone surrogates; arguments JSON cannot carry; integers beyond 64 bits both ways; the line cap; output kept when a
//! cell is stopped (deadline, protocol violation, memory); running out of memory; a runner that exits by itself or
//! refuses a host line; tools with reserved names; forged lines: a `done` past the output cap or
//! denying truncation, calls after a `done`, lines written while a held sandbox runs no cell,
//! a forged `began`; a flood of refused calls; forged calls in the audit log.
//!
//! Each forged-line test was checked to fail with its rule taken out of the host: the
//! truncated flag taken from the `done` alone (the forged-done test); reading on after a
//! `done` until the sandbox's output ends (the after-done test); the check for waiting lines
//! before a held sandbox's next cell (the between-cells test, by its error; with the
//! began-first rule also out, by the journal); the nonce check of `began` (the forged-began
//! test); the count of a cell's calls (the flood test: the loop ends and prints 5000, the
//! written lines keep the host busy until the deadline).

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use mcp_code_mode::bridge::{Bridge, ServerEntry};
use mcp_code_mode::run::{HeldSandbox, RunReport};
use mcp_code_mode::sandbox::Backend;

use super::common::{ExecOptions, bin, exec_with, toy};
use super::misbehaving_servers::Scenario;

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
    integers_beyond_64_bits_pass_between_the_code_and_the_server_digit_for_digit,
    a_call_over_the_line_cap_raises_tool_error,
    output_printed_before_the_deadline_is_returned,
    output_printed_before_a_protocol_violation_is_returned,
    output_printed_before_the_memory_limit_is_returned,
    running_out_of_memory_is_the_codes_error_without_the_runners_frames,
    a_runner_that_exits_by_itself_reports_its_own_status,
    every_way_to_exit_means_what_it_says,
    a_last_line_without_newline_survives_a_kill,
    a_runner_refusing_a_host_line_says_why,
    reserved_named_tools_are_renamed_and_callable,
    a_forged_done_line_cannot_exceed_the_output_limit,
    no_call_after_a_done_line_reaches_the_server,
    lines_written_while_no_cell_runs_discard_a_held_sandbox,
    a_forged_began_does_not_open_a_cell,
    a_flood_of_refused_calls_stops_the_run,
    the_audit_log_records_forged_calls_bounded,
    a_cell_whose_deadline_is_duration_max_runs_as_if_it_had_none,
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
for tool, args in ((echo, {"text": "\ud800"}), (add, {"a": 10**5000, "b": 0}), (echo, {"x": float("inf")}), (add, {"a": float("nan"), "b": 1})):
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

/// A server's structuredContent holding integers no 64 bits hold reaches the code as the
/// server wrote them, and the code's arguments reach the server so, validated against an
/// inputSchema that types them (README "How a call works", steps 3 and 4).
fn integers_beyond_64_bits_pass_between_the_code_and_the_server_digit_for_digit(backend: &str) {
    let structured = r#"{"c": 18446744073709551616, "d": -123456789012345678901234567890, "f": 0.30000000000000004}"#;
    let schema = serde_json::json!({"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0}, "b": {"type": "array", "items": {"type": "integer"}}}});
    let script = serde_json::json!({
        "tools": [{"name": "big_numbers", "inputSchema": schema}],
        "on": {"tools/call:big_numbers": [{"raw": format!(
            r#"{{"jsonrpc":"2.0","id":$ID,"result":{{"content":[],"structuredContent":{structured}}}}}{}"#,
            "\n"
        )}]},
    });
    let scenario = Scenario::from_value("numbers", script);
    let code = "import json\n\
        text = await big_numbers({'a': 2**64 + 1, 'b': [-10**30, 10**309]})\n\
        print(text)\n\
        print(json.loads(text)['c'] == 2**64, json.loads(text)['d'] == -123456789012345678901234567890)";
    let r = exec_with(
        code,
        ExecOptions {
            backend,
            server: scenario.command(),
            ..Default::default()
        },
    );
    assert_eq!(r.printed(), format!("{structured}\nTrue True\n"), "{r:?}");
    let sent = format!(
        r#""arguments":{{"a":18446744073709551617,"b":[-1000000000000000000000000000000,1{}]}}"#,
        "0".repeat(309)
    );
    assert!(
        scenario.received().contains(&sent),
        "{}",
        scenario.received()
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

fn running_out_of_memory_is_the_codes_error_without_the_runners_frames(backend: &str) {
    // A memory cgroup kills the sandbox ("ran out of memory"); the rlimit fallback (an
    // unprivileged user: scripts/test-unprivileged) gives the code a MemoryError, or a
    // runaway recursion's SystemError that says it ran out of memory. Either way the error
    // names memory and nothing of the runner reaches the output.
    for code in [
        "import sys\nsys.setrecursionlimit(10**8)\ndef f(n): return f(n+1)\nprint('deep')\nf(0)",
        "print('hog')\nx = []\nwhile True:\n    x.append([0] * 100)",
    ] {
        let r = run(backend, code, &["--deadline", "60"]);
        let first = code.split('\'').nth(1).unwrap();
        assert_eq!(r.printed(), format!("{first}\n"), "{r:?}");
        assert!(
            r.error().contains("memory") || r.error().contains("MemoryError"),
            "{r:?}"
        );
        assert!(
            !r.error().contains("runner") && !r.error().contains("without a result"),
            "{r:?}"
        );
    }
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
    // Status 3 is the runner's own out-of-memory end (errors.runner_failed); others say it.
    let r = run(backend, &format!("{exit}(3)"), &[]);
    assert_eq!(
        r.error(),
        "the sandbox ran out of memory (its memory limit) and ended without a result",
        "{r:?}"
    );
    let r = run(backend, &format!("{exit}(5)"), &[]);
    assert_eq!(
        r.error(),
        "the sandbox exited with status 5 without a result",
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

/// Tools named like dunders, builtins or standard-library modules get a trailing `_`, and the
/// runner in the sandbox (which reads the module list from the rootfs) takes every such
/// name and calls the tool.
fn reserved_named_tools_are_renamed_and_callable(backend: &str) {
    let reply =
        |text: &str| serde_json::json!([{"reply": {"content": [{"type": "text", "text": text}]}}]);
    let tools: Vec<_> = ["__class__", "__builtins__", "____", "print", "json"]
        .iter()
        .map(|name| serde_json::json!({"name": name, "inputSchema": {"type": "object"}}))
        .collect();
    let script = serde_json::json!({
        "tools": tools,
        "on": {
            "tools/call:__class__": reply("class"),
            "tools/call:____": reply("underscores"),
            "tools/call:json": reply("module"),
        },
    });
    let scenario = Scenario::from_value("dunders", script);
    let r = exec_with(
        "print(sorted(TOOLS))\nprint(await __class___({}), await ____({}), await json_({}))",
        ExecOptions {
            backend,
            server: scenario.command(),
            ..Default::default()
        },
    );
    assert_eq!(
        r.printed(),
        "['____', '__builtins___', '__class___', 'json_', 'print_']\nclass underscores module\n",
        "{r:?}"
    );
}

/// Python that writes `line` (a JSON object) on runner.py's protocol descriptor to the host.
fn forge(line: &serde_json::Value) -> String {
    format!(
        "import os as _os\n_os.write({RUNNER_CHANNEL}.PROTO_OUT, {:?}.encode() + b'\\n')\n",
        line.to_string()
    )
}

fn a_forged_done_line_cannot_exceed_the_output_limit(backend: &str) {
    let huge = serde_json::json!({"type": "done", "stdout": "F".repeat(100_000), "error": null,
                                  "truncated": false, "stopped": false});
    let code = format!("print('kept')\n{}import time\ntime.sleep(10)", forge(&huge));
    let r = run(backend, &code, &[]);
    assert_eq!(r.printed(), "kept\n", "{r:?}");
    assert_eq!(
        r.result()["truncated"],
        true,
        "the host dropped output: {r:?}"
    );
    assert!(r.stopped(), "{r:?}");
    assert_eq!(
        r.error(),
        "protocol violation: more than 8192 bytes of output in one message",
        "{r:?}"
    );
    // A done within the cap that denies the truncation the cell streamed is still truncated.
    let short = serde_json::json!({"type": "done", "stdout": "short", "error": null,
                                   "truncated": false, "stopped": false});
    let code = format!(
        "print('x' * 9000)\n{}import time\ntime.sleep(10)",
        forge(&short)
    );
    let r = run(backend, &code, &[]);
    assert_eq!(r.printed(), "short", "{r:?}");
    assert_eq!(r.result()["truncated"], true, "{r:?}");
    // A stopped result always says why.
    let silent = serde_json::json!({"type": "done", "stdout": "", "error": null,
                                    "truncated": false, "stopped": true});
    let r = run(backend, &forge(&silent), &[]);
    assert!(r.stopped(), "{r:?}");
    assert_eq!(
        r.error(),
        "protocol violation: a message of unknown shape (stopped without an error)",
        "{r:?}"
    );
}

/// The toy server over stdio, journalling every call it sees to `journal`.
pub(crate) fn journalled_toy(journal: &Path) -> Vec<String> {
    let mut server = toy();
    server.extend(["--journal".to_owned(), journal.display().to_string()]);
    server
}

/// The calls the journalled toy saw, as `call <tool> <arguments JSON>` lines.
pub(crate) fn calls_seen(journal: &Path) -> Vec<String> {
    std::fs::read_to_string(journal)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("call "))
        .map(str::to_owned)
        .collect()
}

fn no_call_after_a_done_line_reaches_the_server(backend: &str) {
    let late = serde_json::json!({"type": "call", "id": 900, "tool": "echo",
                                  "args": {"text": "after done"}});
    // Right after the runner's own done (its capture's `finish` sends it), and in the same
    // write as a forged done.
    let after_real = format!(
        "import os, sys\nfd = {RUNNER_CHANNEL}.PROTO_OUT\nreal_finish = sys.stdout.finish\n\
         def finish(error):\n    real_finish(error)\n    os.write(fd, {late:?}.encode() + b'\\n')\n\
         sys.stdout.finish = finish\nprint(await echo({{'text': 'before done'}}))",
        late = late.to_string()
    );
    let forged_done = serde_json::json!({"type": "done", "stdout": "forged", "error": null,
                                         "truncated": false, "stopped": false});
    let after_forged = format!(
        "print(await echo({{'text': 'before done'}}))\nimport os, time\n\
         os.write({RUNNER_CHANNEL}.PROTO_OUT, {lines:?}.encode())\ntime.sleep(3)",
        lines = format!("{forged_done}\n{late}\n")
    );
    for (code, printed) in [(after_real, "before done\n"), (after_forged, "forged")] {
        let dir = tempfile::tempdir().expect("temp dir");
        let journal = dir.path().join("journal");
        let r = exec_with(
            &code,
            ExecOptions {
                backend,
                server: journalled_toy(&journal),
                ..Default::default()
            },
        );
        assert_eq!(r.printed(), printed, "{r:?}");
        assert!(!r.stopped(), "{r:?}");
        assert_eq!(
            calls_seen(&journal),
            [r#"call echo {"text":"before done"}"#],
            "{code}"
        );
    }
}

/// The library's backend named `backend` (`native` or `docker`), 60 s per sandbox start.
pub(crate) fn library_backend(backend: &str) -> Arc<dyn Backend> {
    let rootfs = mcp_code_mode::rootfs::ensure(&mcp_code_mode::rootfs::Options {
        quiet: true,
        ..Default::default()
    })
    .expect("the rootfs");
    match backend {
        "native" => Arc::new(mcp_code_mode::sandbox::native::NativeBackend::new(
            bin(),
            rootfs.dir.clone(),
            rootfs.argv(),
            60,
        )),
        _ => Arc::new(
            mcp_code_mode::sandbox::docker::DockerBackend::new(&rootfs, 60)
                .expect("the docker backend"),
        ),
    }
}

/// Run `body` with a held sandbox on `backend` over the journalled toy server.
fn with_held_sandbox<F>(backend: &str, journal: &Path, body: F)
where
    F: AsyncFnOnce(&mut HeldSandbox),
{
    let sandboxes = library_backend(backend);
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async {
        let server = journalled_toy(journal);
        let entry = ServerEntry::stdio("toy", server[0].clone(), server[1..].to_vec());
        let bridge = Arc::new(Bridge::open(vec![entry], false).await.expect("the toy"));
        let mut held = HeldSandbox::start(bridge.clone(), sandboxes.as_ref())
            .await
            .expect("a sandbox");
        body(&mut held).await;
        held.close().await;
        bridge.close().await;
    });
}

async fn cell(held: &mut HeldSandbox, code: &str) -> RunReport {
    held.cell(code, 10, Duration::from_secs(30))
        .await
        .expect("the sandbox started")
}

/// Runs a second cell (one echo call) in `held`, checks that it was stopped with `error`,
/// and returns its report.
async fn cell_two_is_stopped(held: &mut HeldSandbox, error: &str) -> RunReport {
    let r = cell(held, "print(await echo({'text': 'cell two'}))").await;
    assert!(r.result.stopped, "{r:?}");
    assert_eq!(r.result.error.as_deref(), Some(error), "{r:?}");
    r
}

/// Checks that the toy server's `journal` saw the first cell's echo call and nothing else.
fn only_cell_one_was_served(journal: &Path, why: &str) {
    assert_eq!(
        calls_seen(journal),
        [r#"call echo {"text":"cell one"}"#],
        "{why}"
    );
}

fn lines_written_while_no_cell_runs_discard_a_held_sandbox(backend: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("journal");
    let stray = serde_json::json!({"type": "call", "id": 900, "tool": "echo",
                                   "args": {"text": "between cells"}});
    with_held_sandbox(backend, &journal, async |held| {
        // A thread the first cell leaves running writes a call after the cell's done.
        let first = format!(
            "import os, threading, time\nfd = {RUNNER_CHANNEL}.PROTO_OUT\n\
             def later():\n    time.sleep(0.3)\n    os.write(fd, {stray:?}.encode() + b'\\n')\n\
             threading.Thread(target=later).start()\nx = await echo({{'text': 'cell one'}})\nprint(x)",
            stray = stray.to_string()
        );
        let r = cell(held, &first).await;
        assert_eq!(r.result.stdout, "cell one\n", "{r:?}");
        assert!(r.result.succeeded(), "{r:?}");
        tokio::time::sleep(Duration::from_secs(2)).await;
        let r = cell_two_is_stopped(
            held,
            "protocol violation: lines written while no cell ran; \
             this cell was not run and the sandbox is discarded",
        )
        .await;
        assert_eq!(r.calls, 0, "{r:?}");
        let r = cell(held, "print(x)").await;
        assert_eq!(
            r.result.error.as_deref(),
            Some("the sandbox is gone: protocol violation: lines written while no cell ran"),
            "{r:?}"
        );
    });
    only_cell_one_was_served(
        &journal,
        "only the first cell's own call reached the server",
    );
}

fn a_forged_began_does_not_open_a_cell(backend: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("journal");
    // The first cell hooks runner.py so that, as the next cell arrives and before the runner
    // begins it, a `began` naming no cell and a call are written.
    let forged = format!(
        "{}\n{}\n",
        serde_json::json!({"type": "began", "nonce": "guessed"}),
        serde_json::json!({"type": "call", "id": 900, "tool": "echo",
                           "args": {"text": "before began"}})
    );
    with_held_sandbox(backend, &journal, async |held| {
        let first = format!(
            "import os, sys\nfd = {RUNNER_CHANNEL}.PROTO_OUT\nreal_reset = sys.stdout.reset\n\
             def reset():\n    os.write(fd, {forged:?}.encode())\n    real_reset()\n\
             sys.stdout.reset = reset\nprint(await echo({{'text': 'cell one'}}))"
        );
        let r = cell(held, &first).await;
        assert!(r.result.succeeded(), "{r:?}");
        cell_two_is_stopped(
            held,
            "protocol violation: a line before the runner began the cell \
             (written while no cell ran)",
        )
        .await;
    });
    only_cell_one_was_served(
        &journal,
        "neither the forged call nor the cell's own reached the server",
    );
}

fn a_flood_of_refused_calls_stops_the_run(backend: &str) {
    // Calls through the tool functions, refused for their arguments, and the same written
    // as lines straight to the host without waiting for any answer.
    let looped = "n = 0\nfor i in range(5000):\n    try:\n        await add({'x': i})\n    except ToolError:\n        n += 1\nprint(n)";
    let written = format!(
        "import json, os, time\nfd = {RUNNER_CHANNEL}.PROTO_OUT\n\
         data = ''.join(json.dumps({{'type': 'call', 'id': 10000 + i, 'tool': 'add', \
         'args': {{'x': i}}}}) + '\\n' for i in range(5000)).encode()\n\
         while data:\n    data = data[os.write(fd, data):]\ntime.sleep(30)"
    );
    for code in [looped.to_owned(), written] {
        let r = run(backend, &code, &["--max-calls", "2"]);
        assert!(r.stopped(), "{r:?}");
        assert_eq!(
            r.error(),
            "more than 1002 calls (the budget plus 1000 refused); the sandbox was killed",
            "{r:?}"
        );
    }
}

fn the_audit_log_records_forged_calls_bounded(backend: &str) {
    // A made-up tool name as long as a line may be, and arguments far over the 16 KiB the
    // bridge takes, even with --audit-args full: each record stays small.
    let dir = tempfile::tempdir().expect("temp dir");
    let audit = dir.path().join("audit.jsonl");
    let code = format!(
        "import json, os, time\nfd = {RUNNER_CHANNEL}.PROTO_OUT\n\
         for i, (tool, args) in enumerate([('n' * 500000, {{}}), ('echo', {{'text': 'x' * 500000}})]):\n\
         \x20   os.write(fd, (json.dumps({{'type': 'call', 'id': 10 + i, 'tool': tool, 'args': args}}) + '\\n').encode())\n\
         time.sleep(2)\nprint(await echo({{'text': 'after'}}))"
    );
    let r = run(
        backend,
        &code,
        &[
            "--audit",
            &audit.display().to_string(),
            "--audit-args",
            "full",
        ],
    );
    assert_eq!(r.printed(), "after\n", "{r:?}");
    let log = std::fs::read_to_string(&audit).expect("the audit log");
    assert!(log.len() < 8 * 1024, "{} bytes: {log:.2000}", log.len());
    let calls: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON record"))
        .filter(|r: &serde_json::Value| r["kind"] == "call")
        .collect();
    assert_eq!(calls.len(), 3, "{log}");
    assert_eq!(
        calls[0]["tool"].as_str().map(|t| t.chars().count()),
        Some(201)
    );
    assert_eq!(calls[1]["args"]["bytes"], 500_011, "{log}");
    assert_eq!(
        calls[2]["args"],
        serde_json::json!({"text": "after"}),
        "{log}"
    );
}

fn a_cell_whose_deadline_is_duration_max_runs_as_if_it_had_none(backend: &str) {
    let dir = tempfile::tempdir().expect("temp dir");
    let journal = dir.path().join("journal");
    with_held_sandbox(backend, &journal, async |held| {
        // `start + Duration::MAX` overflows the clock: the library cuts it, never panics.
        let r = held
            .cell(
                "print(await echo({'text': 'no deadline'}))",
                10,
                Duration::MAX,
            )
            .await
            .expect("the sandbox started");
        assert!(!r.result.stopped, "{r:?}");
        assert_eq!(r.result.stdout, "no deadline\n", "{r:?}");
    });
}
