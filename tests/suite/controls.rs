//! The sandbox's and the bridge's controls, one body per control, run on each backend
//! (`on_both_backends!` makes a `native::NAME` and a `docker::NAME` test of each body).
//! Every test drives the real `mcp-code-mode exec` with the toy server.
//!
//! Index:
//! - isolation: no host secret, file or environment variable inside; no network; a read-only
//!   root with a noexec /tmp; uid nobody without privileges;
//! - limits: fork bomb, memory, endless loop, output cap, runaway code, each within the
//!   deadline, and the next run starts fresh;
//! - protocol: printed text cannot forge a protocol message, garbage on the pipe ends the cell;
//! - bridge: unknown and not-allowed tools, schema and size checks, the call budget, timeouts,
//!   oversized results, host faults;
//! - which limits held, as each backend reports them.

use std::time::{Duration, Instant};

use super::common::{ExecOptions, exec_with, unprivileged};

fn run(backend: &str, code: &str, args: &[&str]) -> super::common::Exec {
    super::common::exec_on(backend, code, args)
}

fn ready(backend: &str) -> bool {
    super::common::backend_ready(backend)
}

crate::on_both_backends!(
    no_secret_from_the_host_is_inside,
    neither_this_package_nor_an_mcp_client_is_installed,
    nothing_from_the_hosts_environment_reaches_the_code,
    there_is_no_network,
    the_filesystem_is_read_only_and_tmp_cannot_execute,
    the_sandbox_runs_as_nobody_with_no_privileges,
    a_fork_bomb_ends_within_the_deadline,
    a_gibibyte_allocation_ends_within_the_deadline,
    an_endless_loop_ends_within_the_deadline,
    runaway_code_is_stopped_and_the_next_run_starts_fresh,
    output_is_capped,
    plain_output_cannot_forge_a_protocol_message,
    garbage_on_the_protocol_pipe_ends_the_cell_safely,
    a_forged_call_for_an_allowed_tool_reaches_the_server,
    unknown_tools_are_refused_before_the_server_sees_them,
    the_allowlist_keeps_other_tools_out,
    arguments_outside_the_schema_are_refused,
    non_object_arguments_on_the_wire_are_refused_by_the_host,
    oversized_arguments_are_refused,
    a_run_has_a_fixed_budget_of_calls,
    a_slow_tool_times_out_and_the_session_survives,
    refusals_reach_the_code_and_the_budget_holds,
    oversized_results_are_refused_not_cut,
    a_host_fault_raises_in_the_cell_without_its_details,
);

const SECRET: &str = "mcp-code-mode-test-secret-5f1c9a";

fn no_secret_from_the_host_is_inside(backend: &str) {
    let host_file = std::env::temp_dir().join(format!(
        "mcp-code-mode-host-secret-{}.txt",
        std::process::id()
    ));
    std::fs::write(&host_file, SECRET).unwrap();
    let code = format!(
        r#"
import os
found = []
needle = {SECRET:?}.encode()
if any(needle in v.encode() for v in os.environ.values()):
    found.append("environ")
for root, dirs, files in os.walk("/"):
    if root.startswith(("/proc", "/sys", "/dev")):
        dirs[:] = []
        continue
    for f in files:
        p = os.path.join(root, f)
        try:
            if os.path.isfile(p) and not os.path.islink(p) and os.path.getsize(p) < 4_000_000 and needle in open(p, "rb").read():
                found.append(p)
        except OSError:
            pass
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            if needle in open(f"/proc/{{pid}}/environ", "rb").read():
                found.append(pid)
        except OSError:
            pass
print(found, os.path.exists({host:?}))
"#,
        host = host_file.display().to_string()
    );
    let r = exec_with(
        &code,
        ExecOptions {
            backend,
            env: vec![("SECRET_TOKEN".into(), SECRET.into())],
            ..Default::default()
        },
    );
    let _ = std::fs::remove_file(&host_file);
    assert_eq!(r.printed(), "[] False\n", "{r:?}");
}

fn neither_this_package_nor_an_mcp_client_is_installed(backend: &str) {
    let code = r#"
import importlib.util, os
print([m for m in ("mcp", "mcp_code_mode", "pip", "rmcp") if importlib.util.find_spec(m)],
      [p for p in ("/bin/sh", "/usr/bin/sh", "/bin/bash", "/usr/bin/pip", "/usr/local/bin/mcp-code-mode") if os.path.exists(p)])
"#;
    let r = run(backend, code, &[]);
    assert_eq!(r.printed(), "[] []\n", "{r:?}");
}

fn nothing_from_the_hosts_environment_reaches_the_code(backend: &str) {
    let code = "import os, json\nprint(json.dumps(dict(os.environ)))";
    let r = exec_with(
        code,
        ExecOptions {
            backend,
            env: vec![
                ("SECRET_TOKEN".into(), SECRET.into()),
                ("HOME".into(), "/home/host-user".into()),
                // The rootfs cache stays where it was before HOME was changed.
                (
                    "MCP_CODE_MODE_ROOTFS".into(),
                    mcp_code_mode::rootfs::cache_root(None)
                        .expect("a rootfs cache directory")
                        .display()
                        .to_string(),
                ),
            ],
            ..Default::default()
        },
    );
    let env: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r.printed().trim()).expect("environ as JSON");
    for (key, value) in &env {
        let value = value.as_str().unwrap_or_default();
        assert!(
            !value.contains(SECRET) && !value.contains("host-user"),
            "{key}={value}"
        );
        // Docker itself sets PATH and HOSTNAME (documented in README); nothing else.
        assert!(
            ["PATH", "HOSTNAME", "HOME"].contains(&key.as_str()),
            "unexpected variable {key}"
        );
    }
    if backend == "native" {
        assert!(env.is_empty(), "{env:?}");
    }
}

fn there_is_no_network(backend: &str) {
    let code = r#"
import socket, errno
out = []
def attempt(name, f):
    try:
        f()
        out.append(f"{name}:ok")
    except OSError as e:
        out.append(f"{name}:{errno.errorcode.get(e.errno, e.errno) if e.errno else type(e).__name__}")
def tcp():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.settimeout(2); s.connect(("1.1.1.1", 53))
def tcp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.settimeout(2); s.connect(("2606:4700:4700::1111", 53))
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("1.1.1.1", 53))
def dns():
    socket.getaddrinfo("example.com", 80)
def listen():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.bind(("127.0.0.1", 0)); s.listen()
def netlink():
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)
def vsock():
    socket.socket(40, socket.SOCK_STREAM)
def pair():
    a, b = socket.socketpair(); a.send(b"x"); assert b.recv(1) == b"x"
for name, f in [("tcp", tcp), ("tcp6", tcp6), ("udp", udp), ("dns", dns), ("listen", listen), ("netlink", netlink), ("vsock", vsock), ("pair", pair)]:
    attempt(name, f)
print(" ".join(out))
"#;
    let r = run(backend, code, &[]);
    let printed = r.printed().trim().to_owned();
    for part in printed.split(' ') {
        let (name, outcome) = part.split_once(':').unwrap();
        if name == "pair" {
            assert_eq!(
                outcome, "ok",
                "socketpair(AF_UNIX) is the positive control: {printed}"
            );
        } else {
            assert_ne!(outcome, "ok", "{name} must fail: {printed}");
        }
    }
}

fn the_filesystem_is_read_only_and_tmp_cannot_execute(backend: &str) {
    let code = r##"
import os, subprocess, errno, shutil
out = []
for path in ("/x", "/usr/bin/x", "/etc/passwd", "/runner.py"):
    try:
        open(path, "a").write("x")
        out.append("wrote " + path)
    except OSError as e:
        out.append(errno.errorcode[e.errno])
open("/tmp/t.sh", "w").write("#!/usr/bin/python3\nprint(1)\n")
os.chmod("/tmp/t.sh", 0o755)
shutil.copy("/usr/bin/python3", "/tmp/py")
os.chmod("/tmp/py", 0o755)
for prog in (["/tmp/t.sh"], ["/tmp/py", "-c", "1"]):
    try:
        subprocess.run(prog)
        out.append("ran " + prog[0])
    except OSError as e:
        out.append(errno.errorcode[e.errno])
r = subprocess.run(["/usr/bin/python3", "-c", "print(2)"], capture_output=True)
out.append(r.stdout.decode().strip())
print(" ".join(out))
"##;
    let r = run(backend, code, &[]);
    let words: Vec<&str> = r.printed().split_whitespace().collect();
    assert_eq!(words.len(), 7, "{r:?}");
    for w in &words[..4] {
        assert!(
            ["EROFS", "EACCES", "EPERM"].contains(w),
            "writing outside /tmp must fail: {words:?}"
        );
    }
    for w in &words[4..6] {
        assert!(
            ["EACCES", "EPERM"].contains(w),
            "exec from /tmp must fail: {words:?}"
        );
    }
    assert_eq!(
        words[6], "2",
        "the rootfs python runs as a subprocess (positive control): {words:?}"
    );
}

fn the_sandbox_runs_as_nobody_with_no_privileges(backend: &str) {
    let code = r#"
import os
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print(os.getuid(), os.getgid(), status["CapEff"].strip(), status["CapPrm"].strip(), status["CapBnd"].strip(), status["NoNewPrivs"].strip(), status["Seccomp"].strip())
try:
    os.setuid(0); print("setuid worked")
except OSError as e:
    print("setuid", e.errno)
# A session and process group of its own: kill(0, sig) cannot reach a host process group.
print("own session", os.getsid(0) == os.getpgrp() == os.getpid())
"#;
    let r = run(backend, code, &[]);
    let lines: Vec<&str> = r.printed().lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("65534 65534 0000000000000000 0000000000000000 0000000000000000 1 2"),
        "{r:?}"
    );
    assert_eq!(lines.get(1).copied(), Some("setuid 1"), "{r:?}");
    assert_eq!(lines.get(2).copied(), Some("own session True"), "{r:?}");
}

/// Runs `code` with `deadline` seconds, after a line `started` that the run must have
/// printed: the deadline includes the sandbox's start, so a stop without it would pass for a
/// run whose code never ran.
fn assert_ends_by_deadline(backend: &str, code: &str, deadline: u64) -> super::common::Exec {
    let code = format!("print('started', flush=True)\n{code}");
    let started = Instant::now();
    let r = run(backend, &code, &["--deadline", &deadline.to_string()]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(deadline + 15), "took {took:?}");
    assert!(
        r.printed().starts_with("started\n"),
        "the code never started: {r:?}"
    );
    r
}

fn a_fork_bomb_ends_within_the_deadline(backend: &str) {
    let code =
        "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n";
    let r = assert_ends_by_deadline(backend, code, 5);
    assert!(r.stopped(), "{r:?}");
    let after = run(backend, "print('fine')", &[]);
    assert_eq!(after.printed(), "fine\n", "the next run works: {after:?}");
}

fn a_gibibyte_allocation_ends_within_the_deadline(backend: &str) {
    let r = assert_ends_by_deadline(backend, "x = b'x' * (1 << 30)\nprint(len(x))", 20);
    if unprivileged() {
        // The rlimit fallback (no cgroup) refuses the allocation instead of killing the run.
        assert!(r.stopped() || r.error().contains("MemoryError"), "{r:?}");
    } else {
        assert!(r.stopped(), "{r:?}");
    }
    assert_eq!(r.printed(), "started\n", "{r:?}");
}

fn an_endless_loop_ends_within_the_deadline(backend: &str) {
    let r = assert_ends_by_deadline(backend, "while True:\n    pass\n", 3);
    assert!(r.stopped(), "{r:?}");
    assert!(r.error().contains("deadline"), "{r:?}");
}

fn runaway_code_is_stopped_and_the_next_run_starts_fresh(backend: &str) {
    let r = run(
        backend,
        "open('/tmp/m', 'w').write('x')\nX = 1\nwhile True:\n    pass\n",
        &["--deadline", "3"],
    );
    assert!(r.stopped(), "{r:?}");
    let r = run(
        backend,
        "import os\nprint(os.path.exists('/tmp/m'), 'X' in globals())",
        &[],
    );
    assert_eq!(r.printed(), "False False\n", "{r:?}");
}

fn output_is_capped(backend: &str) {
    let r = run(backend, "print('x' * 10000)", &[]);
    assert_eq!(r.printed().len(), 8192, "{r:?}");
    assert_eq!(r.result()["truncated"], true);
    assert!(!r.stopped());
    let r = run(
        backend,
        "import sys\nfor _ in range(2048):\n    sys.stdout.write('y' * 1024)\nprint('never')",
        &[],
    );
    assert!(r.stopped(), "{r:?}");
    assert_eq!(r.result()["truncated"], true);
    assert!(!r.printed().contains("never"));
}

fn plain_output_cannot_forge_a_protocol_message(backend: &str) {
    let forged = r#"{"type":"call","id":99,"tool":"calls","args":{}}"#;
    let code = format!(
        "import os, sys, subprocess\nline = {forged:?}\nprint(line)\nos.write(1, (line + '\\n').encode())\nos.write(2, (line + '\\n').encode())\nsubprocess.run(['/usr/bin/python3', '-c', 'print(' + repr(line) + ')'])\nprint(await calls({{}}))"
    );
    let r = run(backend, &code, &[]);
    assert_eq!(r.printed(), format!("{forged}\n1\n"), "{r:?}");
}

fn garbage_on_the_protocol_pipe_ends_the_cell_safely(backend: &str) {
    for garbage in [
        "b'not json\\n'",
        "b'{\"type\": \"done\"}\\n'",
        "b'[' * 2_000_000 + b'\\n'",
    ] {
        let code = format!(
            "import os\nfor fd in range(3, 64):\n    try:\n        os.write(fd, {garbage})\n    except OSError:\n        pass\nimport time\ntime.sleep(5)\nprint('survived')"
        );
        let r = run(backend, &code, &[]);
        assert!(r.stopped(), "{garbage}: {r:?}");
        assert!(
            r.error().starts_with("protocol violation"),
            "{garbage}: {r:?}"
        );
        assert!(!r.printed().contains("survived"));
    }
    assert_eq!(run(backend, "print('next')", &[]).printed(), "next\n");
}

/// Code that writes a raw `call` line for `tool` with arguments `{"text": "x"}` (valid for
/// `echo`, so only the check under test can refuse it) on every descriptor, the runner's
/// private protocol descriptor among them.
fn forge_call(tool: &str) -> String {
    forge_calls(tool, &["{'text': 'x'}"])
}

/// Code that writes one raw `call` line for `tool` per Python expression in `args` (each
/// with its own id) on every descriptor, bypassing the runner's own checks of the call shape.
fn forge_calls(tool: &str, args: &[&str]) -> String {
    let args = args.join(", ");
    format!(
        "import os, json, asyncio\nfor n, args in enumerate(({args},)):\n    line = (json.dumps({{'type': 'call', 'id': 424242 + n, 'tool': {tool:?}, 'args': args}}) + '\\n').encode()\n    for fd in range(3, 64):\n        try:\n            os.write(fd, line)\n        except OSError:\n            pass\nawait asyncio.sleep(0.5)\n"
    )
}

/// The control for the two refusal tests below: the same forged line naming a tool the run
/// may call does reach the bridge and the server (the server counts it), so a count of 1
/// there means the forged call was refused, not lost.
fn a_forged_call_for_an_allowed_tool_reaches_the_server(backend: &str) {
    let code = format!("{}print(await calls({{}}))", forge_call("echo"));
    let r = run(backend, &code, &[]);
    assert_eq!(
        r.printed(),
        "2\n",
        "the forged echo call and the calls() call: {r:?}"
    );
}

fn unknown_tools_are_refused_before_the_server_sees_them(backend: &str) {
    let code = format!("{}print(await calls({{}}))", forge_call("nope"));
    let r = run(backend, &code, &[]);
    assert_eq!(
        r.printed(),
        "1\n",
        "the server saw only the calls() call: {r:?}"
    );
}

fn the_allowlist_keeps_other_tools_out(backend: &str) {
    let r = run(
        backend,
        "try:\n    echo\nexcept NameError:\n    print('no echo')\nprint(sorted(TOOLS))",
        &["--allow", "add", "--allow", "calls"],
    );
    assert_eq!(r.printed(), "no echo\n['add', 'calls']\n", "{r:?}");
    let code = format!("{}print(await calls({{}}))", forge_call("echo"));
    let r = run(backend, &code, &["--allow", "add", "--allow", "calls"]);
    assert_eq!(r.printed(), "1\n", "{r:?}");
}

fn arguments_outside_the_schema_are_refused(backend: &str) {
    // Dicts the schema refuses come back as the host's ToolError; a call that is not one
    // dict or keywords raises TypeError in the runner before anything is sent.
    let code = r#"
for args in ({"a": "x", "b": 1}, {"a": 1}, {"a": 1, "b": 2, "c": 3}):
    try:
        await add(args)
        print("accepted", args)
    except ToolError as e:
        print("refused")
for args in ([1, 2], "a", None):
    try:
        await add(args)
        print("accepted", args)
    except TypeError as e:
        print("TypeError")
print(await calls({}))
"#;
    let r = run(backend, code, &[]);
    assert_eq!(
        r.printed(),
        "refused\n".repeat(3) + &"TypeError\n".repeat(3) + "1\n",
        "{r:?}"
    );
}

/// The host refuses arguments that are not an object even when they reach it as raw
/// protocol lines (the runner's TypeError is a convenience, not the control): the server
/// sees only the `calls()` call. `a_forged_call_for_an_allowed_tool_reaches_the_server` is
/// the control that a forged line does reach the server when its arguments are valid.
fn non_object_arguments_on_the_wire_are_refused_by_the_host(backend: &str) {
    let forged = forge_calls(
        "echo",
        &["[1, 2]", "'text'", "None", "7", "[{'text': 'x'}]"],
    );
    let code = format!("{forged}print(await calls({{}}))");
    let r = run(backend, &code, &[]);
    assert_eq!(
        r.printed(),
        "1\n",
        "the server saw only the calls() call: {r:?}"
    );
}

fn oversized_arguments_are_refused(backend: &str) {
    let code = "try:\n    await echo({'text': 'x' * 17000})\nexcept ToolError as e:\n    print('refused', 'KiB' in str(e))\nprint(len(await echo({'text': 'x' * 16000})))\nprint(await calls({}))";
    let r = run(backend, code, &[]);
    assert_eq!(r.printed(), "refused True\n16000\n2\n", "{r:?}");
}

fn a_run_has_a_fixed_budget_of_calls(backend: &str) {
    let code = "n = 0\nfor i in range(7):\n    try:\n        await add({'a': i, 'b': 0}); n += 1\n    except ToolError as e:\n        print(e)\nprint(n)";
    let r = run(backend, code, &["--max-calls", "5"]);
    assert!(r.printed().ends_with("\n5\n"), "{r:?}");
    assert_eq!(
        r.printed()
            .matches("budget of 5 tool calls is spent")
            .count(),
        2,
        "{r:?}"
    );
}

fn a_slow_tool_times_out_and_the_session_survives(backend: &str) {
    let code = "import time\nt = time.monotonic()\ntry:\n    await slow({'seconds': 30})\nexcept ToolError as e:\n    print('timed out', 'did not answer' in str(e), time.monotonic() - t < 10)\nprint(await add({'a': 1, 'b': 1}))";
    let r = run(backend, code, &["--call-timeout", "2"]);
    assert_eq!(r.printed(), "timed out True True\n{\"sum\": 2}\n", "{r:?}");
}

fn refusals_reach_the_code_and_the_budget_holds(backend: &str) {
    let code = "ok = refused = 0\nfor i in range(205):\n    try:\n        await add({'a': i, 'b': 1}); ok += 1\n    except ToolError:\n        refused += 1\nprint(ok, refused)";
    let r = run(backend, code, &[]);
    assert_eq!(r.printed(), "200 5\n", "{r:?}");
}

fn oversized_results_are_refused_not_cut(backend: &str) {
    let code = "try:\n    r = await huge({'size': 70000})\n    print('got', len(r))\nexcept ToolError as e:\n    print('refused', '70000 bytes' in str(e), '65536' in str(e), '--max-result-bytes' in str(e))\nprint(len(await huge({'size': 60000})))";
    let r = run(backend, code, &[]);
    assert_eq!(r.printed(), "refused True True True\n60000\n", "{r:?}");
}

fn a_host_fault_raises_in_the_cell_without_its_details(backend: &str) {
    // The toy's `fail` tool answers isError: its text reaches the code (capped); the
    // server's own processes and paths never do. A ToolError is at most 500 characters.
    let code = "try:\n    await fail({})\nexcept ToolError as e:\n    print(str(e))\ntry:\n    await add({'a': 'x' * 9000, 'b': 1})\nexcept ToolError as e:\n    print(len(str(e)) <= 500)";
    let r = run(backend, code, &[]);
    assert_eq!(r.printed(), "boom\nTrue\n", "{r:?}");
}

#[test]
fn native_runs_say_which_limits_held() {
    if !ready("native") {
        return;
    }
    let r = run("native", "print(1)", &[]);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("limits:"))
        .unwrap_or_default()
        .to_owned();
    if unprivileged() {
        assert!(line.contains("rlimits"), "{line}");
    } else {
        assert!(
            line.contains("cgroup") && line.contains("memory") && line.contains("pids"),
            "{line}"
        );
    }
}

#[test]
fn docker_runs_say_which_limits_held() {
    if !ready("docker") {
        return;
    }
    let r = run("docker", "print(1)", &[]);
    assert!(
        r.stderr
            .contains("limits: docker: memory 256 MiB, no swap, 64 pids, 1 CPU"),
        "{}",
        r.stderr
    );
}
