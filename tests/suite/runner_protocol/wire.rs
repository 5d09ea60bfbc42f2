//! The wire: output that cannot forge a message, bad host lines, EOF, the line cap, and the
//! names the host gives tools.

use std::process::Command;

use serde_json::{Value, json};

use super::{Runner, host_python, ok_done, wait_exit};

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
