//! Timeouts that line up: the run's deadline holds on both backends whatever the code does (and while its sandbox starts),
//! a syscall through a foreign ABI ends the whole run at once (never only its thread, which
//! would leave the run hanging until the deadline), the per-call timeout is `--call-timeout` or a config entry's own `timeout`, and the
//! run_python description states the numbers in force.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mcp_code_mode::bridge::Bridge;
use mcp_code_mode::run::{RunOptions, run_code};
use mcp_code_mode::sandbox::{Backend, Sandbox, SandboxError};
use serde_json::Value;

use super::common::{
    ExecOptions, backend_ready, bin, example, exec_with, last_json_line, native_client_ready,
    python_client, require, venv_python,
};
use super::misbehaving_servers::{Scenario, entry};

/// Each code's seconds and result under `serve ARGS` on `backend`, one run after the other,
/// timed by the Python SDK client from request to result.
fn timed(backend: &str, args: &[&str], codes: &[&str]) -> Vec<(f64, Value)> {
    let dir = tempfile::tempdir().unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/steer.py");
    let out = Command::new(venv_python().expect("venv python"))
        .arg(script)
        .arg("timed")
        .arg(dir.path().join("journal"))
        .args(codes)
        .arg("--")
        .arg(bin())
        .args(["serve", "--backend", backend])
        .args(args)
        .arg("--")
        .arg(example("toy_server"))
        .output()
        .expect("run steer.py");
    let parsed = last_json_line(&out, "steer.py timed");
    parsed["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            (
                r["seconds"].as_f64().unwrap_or(f64::MAX),
                r["result"].clone(),
            )
        })
        .collect()
}

fn a_three_second_deadline_ends_every_kind_of_run_within_a_second_of_it(backend: &str) {
    if !backend_ready(backend)
        || !require(
            venv_python().is_some(),
            "could not install the Python MCP SDK from PyPI",
        )
    {
        return;
    }
    let codes = [
        // A busy loop, in Python.
        "print('spinning', end='')\nwhile True:\n    pass",
        // A blocking sleep in C: the interpreter never gets the thread back.
        "import ctypes\nprint('sleeping', end='')\nctypes.CDLL(None).sleep(60)",
        // A process tree, each process busy, the parent waiting on them.
        "import subprocess\nprint('forking', end='')\nchildren = [subprocess.Popen(['/usr/bin/python3', '-c', 'import os\\nos.fork()\\nwhile True: pass']) for _ in range(3)]\nfor c in children:\n    c.wait()",
    ];
    let runs = timed(backend, &["--deadline", "3"], &codes);
    for ((seconds, result), (code, printed)) in runs
        .iter()
        .zip(codes.iter().zip(["spinning", "sleeping", "forking"]))
    {
        assert_eq!(result["stopped"], true, "{code}: {result}");
        assert_eq!(
            result["error"], "deadline of 3 s exceeded; the sandbox was killed",
            "{code}"
        );
        // Under heavy load a container may take the whole deadline to start: then nothing
        // was printed.
        assert!(
            result["stdout"] == printed || result["stdout"] == "",
            "{code}: {result}"
        );
        // The deadline counts from the run's start (the container's start on Docker).
        assert!(
            *seconds < 4.0,
            "{backend}: the result came {seconds:.2} s after the request, past deadline + 1 s: {code}"
        );
    }
    assert!(
        runs.iter().any(|(_, r)| r["stdout"] != ""),
        "at least one run got going before its deadline: {runs:?}"
    );
}

/// x32 getpid (`__X32_SYSCALL_BIT | 39`) from the main thread or another thread, and i386's
/// getpid through `int 0x80` (machine code in an executable mapping).
const FOREIGN_ABI: [(&str, &str); 3] = [
    (
        "x32 in the main thread",
        "import ctypes\nprint('before', end='')\nctypes.CDLL(None).syscall(0x40000000 | 39)\nprint('survived')",
    ),
    (
        "x32 in a thread",
        "import ctypes, threading\nprint('before', end='')\nt = threading.Thread(target=lambda: ctypes.CDLL(None).syscall(0x40000000 | 39))\nt.start()\nt.join()\nprint('survived')",
    ),
    (
        "i386 int 0x80",
        "import ctypes, mmap\nprint('before', end='')\nm = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\nm.write(bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3]))\nf = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))\nprint('survived', f())",
    ),
];

fn a_foreign_abi_syscall_kills_the_whole_sandbox_at_once(backend: &str) {
    if !backend_ready(backend) {
        return;
    }
    for (what, code) in FOREIGN_ABI {
        let r = super::common::exec_on(backend, code, &["--deadline", "30"]);
        // Killed by SIGSYS as a whole (seccomp's kill-process), not left hanging with its
        // thread gone until the deadline, and not allowed through.
        assert_eq!(
            r.error(),
            "the sandbox was killed by signal 31 without a result",
            "{what}: {r:?}"
        );
        assert_eq!(r.printed(), "before", "{what}: {r:?}");
    }
}

crate::on_both_backends!(
    a_three_second_deadline_ends_every_kind_of_run_within_a_second_of_it,
    a_foreign_abi_syscall_kills_the_whole_sandbox_at_once,
);

fn config(dir: &tempfile::TempDir) -> String {
    let toy = serde_json::to_string(&example("toy_server").display().to_string()).unwrap();
    let path = dir.path().join("servers.json");
    std::fs::write(
        &path,
        format!(
            r#"{{"mcpServers": {{"quick": {{"command": {toy}, "timeout": 1}}, "patient": {{"command": {toy}}}}}}}"#
        ),
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn a_config_entry_timeout_overrides_the_default_for_its_server_only() {
    if !require(
        super::common::native_available(),
        "user namespaces are not available here",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = config(&dir);
    let code = "try:\n    await quick__slow({'seconds': 3})\nexcept ToolError as e:\n    print(e)\nprint(await patient__slow({'seconds': 2}))";
    let r = exec_with(
        code,
        ExecOptions {
            args: vec!["--config".into(), path, "--call-timeout".into(), "5".into()],
            server: vec![],
            ..Default::default()
        },
    );
    assert_eq!(
        r.printed(),
        "quick__slow did not answer within 1 s; the call was cancelled\ndone\n",
        "{r:?}"
    );
}

#[test]
fn the_description_states_the_timeouts_in_force() {
    if !native_client_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let serve = vec![
        bin().display().to_string(),
        "serve".into(),
        "--config".into(),
        config(&dir),
        "--call-timeout".into(),
        "7".into(),
        "--deadline".into(),
        "45".into(),
    ];
    let out = python_client(&[], &serve);
    let description = out["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("Limits per run: 45 s, 200 tool calls")
            && description.contains("7 s per call (1 s for quick)."),
        "{description}"
    );
}

#[test]
fn call_timeout_is_refused_outside_its_range() {
    for bad in ["0", "-1", "3601", "soon"] {
        let out = Command::new(bin())
            .args(["exec", "--code", "print(1)"])
            .arg(format!("--call-timeout={bad}"))
            .arg("--")
            .arg(example("toy_server"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("above 0 and at most 3600"),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A backend whose start never finishes (a launcher that stalls); `dropped` closes when the
/// start is dropped.
struct StalledStart {
    dropped: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
}

impl Backend for StalledStart {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        let held = self.dropped.lock().unwrap().take();
        Box::pin(async move {
            let _held = held;
            std::future::pending().await
        })
    }
}

#[tokio::test]
async fn the_deadline_holds_while_the_sandbox_starts_and_the_stalled_start_is_dropped() {
    let env = Scenario::load("env");
    let bridge = Arc::new(Bridge::open(vec![entry(env.spec())], false).await.unwrap());
    let (tx, dropped) = tokio::sync::oneshot::channel::<()>();
    let backend = StalledStart {
        dropped: std::sync::Mutex::new(Some(tx)),
    };
    let options = RunOptions {
        deadline: Duration::from_secs(1),
        ..RunOptions::default()
    };
    let run = run_code(&bridge, &backend, "print(1)", &options);
    let report = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the run outlived its deadline by far")
        .expect("a report, not a start failure");
    assert!(report.result.stopped, "{:?}", report.result);
    assert_eq!(
        report.result.error.as_deref(),
        Some("deadline of 1 s exceeded; the sandbox was killed")
    );
    assert!(dropped.await.is_err(), "the stalled start was kept");
    bridge.close().await;
}
