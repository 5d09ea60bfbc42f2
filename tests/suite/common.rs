//! Helpers shared by the suite: paths to the binaries, running `exec`, raw stdio clients of
//! `serve`, loud skips.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The `mcp-code-mode` binary under test: the one cargo built, or `MCP_CODE_MODE_BIN` when
/// set (an installed binary, e.g. `/usr/local/bin/mcp-code-mode`, which an AppArmor profile
/// may allow user namespaces that the build's binary is refused).
pub(crate) fn bin() -> PathBuf {
    match std::env::var_os("MCP_CODE_MODE_BIN") {
        Some(path) if !path.is_empty() => PathBuf::from(path),
        _ => PathBuf::from(env!("CARGO_BIN_EXE_mcp-code-mode")),
    }
}

/// An example binary built by `cargo test` (e.g. `toy_server`).
pub(crate) fn example(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test binary path");
    let profile = deps
        .parent()
        .and_then(|d| d.parent())
        .expect("target profile dir");
    let path = profile.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: `cargo test` builds examples; run the suite with cargo test",
        path.display()
    );
    path
}

/// The toy server's command line.
pub(crate) fn toy() -> Vec<String> {
    vec![example("toy_server").display().to_string()]
}

/// The one skip rule of the workspace (see the `testkit` crate): `require(ok,
/// why)` prints SKIPPED past the harness's capture when `ok` is false, and fails under CI.
pub(crate) use testkit::require;

/// Whether the native sandbox can run here (user namespaces). With `MCP_CODE_MODE_BIN` set,
/// the binary under test answers (`doctor` exits 2 only when the native backend cannot
/// run): an AppArmor profile may allow it what `unshare(1)` is refused.
pub(crate) fn native_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        if std::env::var_os("MCP_CODE_MODE_BIN").is_some_and(|p| !p.is_empty()) {
            return Command::new(bin())
                .arg("doctor")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.code().is_some_and(|c| c < 2));
        }
        Command::new("unshare")
            .args(["--user", "--map-root-user", "true"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// `mcp-code-mode ARGS…` with piped stdin and stdout (for an MCP client over stdio), stderr
/// discarded, killed when dropped.
pub(crate) fn spawn_serve<S: AsRef<std::ffi::OsStr>>(
    args: impl IntoIterator<Item = S>,
) -> tokio::process::Child {
    tokio::process::Command::new(bin())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start serve")
}

/// A raw stdio client's `initialize` (protocol 2025-11-25), id `"init"`.
pub(crate) const RAW_INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#;

/// A `serve` spoken to in raw lines: the child (killed when dropped), its stdin, and its
/// stdout read by line.
pub(crate) type RawServe = (Child, ChildStdin, BufReader<ChildStdout>);

/// `serve --pool 0 ARGS… <toy server>`, spoken to in raw lines.
pub(crate) fn serve_toy_with(args: &[&std::ffi::OsStr]) -> RawServe {
    let toy = example("toy_server");
    let mut command: Vec<&std::ffi::OsStr> =
        vec!["serve".as_ref(), "--pool".as_ref(), "0".as_ref()];
    command.extend_from_slice(args);
    command.push(toy.as_os_str());
    let mut serve = spawn_serve(command);
    let stdin = serve.stdin.take().unwrap();
    let stdout = BufReader::new(serve.stdout.take().unwrap());
    (serve, stdin, stdout)
}

/// [`serve_toy_with`] with no further arguments.
pub(crate) fn serve_toy() -> RawServe {
    serve_toy_with(&[])
}

/// Write `line` and a newline to a raw stdio client's `stdin`, flushed.
pub(crate) async fn send_line(stdin: &mut ChildStdin, line: &str) {
    stdin
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    stdin.flush().await.unwrap();
}

/// The next line `serve` writes to a raw stdio client, within 60 s (a panic when none
/// comes).
pub(crate) async fn next_line(stdout: &mut BufReader<ChildStdout>) -> String {
    let mut line = String::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(60),
        stdout.read_line(&mut line),
    );
    match read.await {
        Ok(Ok(n)) if n > 0 => line,
        other => panic!("no message from serve: {other:?}"),
    }
}

/// [`next_line`] as JSON.
pub(crate) async fn next_message(stdout: &mut BufReader<ChildStdout>) -> Value {
    let line = next_line(stdout).await;
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))
}

/// A `run_python` request (JSON text) with id `id` running `code`.
pub(crate) fn run_request(id: u64, code: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": "run_python", "arguments": {"code": code}}})
    .to_string()
}

/// A raw stdio client's handshake: [`RAW_INITIALIZE`], its answer, and
/// `notifications/initialized`.
pub(crate) async fn initialize(stdin: &mut ChildStdin, stdout: &mut BufReader<ChildStdout>) {
    send_line(stdin, RAW_INITIALIZE).await;
    let init = next_message(stdout).await;
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    send_line(
        stdin,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    )
    .await;
}

/// The README's quick start: three concurrent `add` calls on the toy server.
pub(crate) const QUICK_START: &str = "import asyncio, json\n\nsums = await asyncio.gather(*(add({\"a\": n, \"b\": 10}) for n in range(3)))\nprint([json.loads(s)[\"sum\"] for s in sums])\n";

/// `exec` of [`QUICK_START`] exited 0 and printed exactly the result the README shows.
pub(crate) fn assert_prints_the_quick_start_result(run: &Exec) {
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout.trim_end(),
        r#"{"stdout": "[10, 11, 12]\n", "error": null, "truncated": false, "stopped": false}"#
    );
}

/// The result of one `exec`: exit code, the parsed result object (if any), stderr.
#[derive(Debug)]
pub(crate) struct Exec {
    pub code: i32,
    pub result: Option<Value>,
    pub stdout: String,
    pub stderr: String,
}

impl Exec {
    /// The result object, or a panic with stderr.
    pub(crate) fn result(&self) -> &Value {
        self.result.as_ref().unwrap_or_else(|| {
            panic!(
                "no result object; exit {}; stderr:\n{}",
                self.code, self.stderr
            )
        })
    }

    /// What the code printed.
    pub(crate) fn printed(&self) -> &str {
        self.result()["stdout"].as_str().unwrap_or_default()
    }

    /// The error field, or "".
    pub(crate) fn error(&self) -> &str {
        self.result()["error"].as_str().unwrap_or_default()
    }

    /// The stopped flag.
    pub(crate) fn stopped(&self) -> bool {
        self.result()["stopped"].as_bool().unwrap_or(false)
    }
}

/// Options for one `exec`.
pub(crate) struct ExecOptions<'a> {
    pub backend: &'a str,
    pub args: Vec<String>,
    pub server: Vec<String>,
    pub env: Vec<(String, String)>,
}

impl Default for ExecOptions<'_> {
    fn default() -> Self {
        Self {
            backend: "native",
            args: Vec::new(),
            server: toy(),
            env: Vec::new(),
        }
    }
}

/// Run `mcp-code-mode exec --code CODE` with the toy server (or `opts.server`).
/// `exec` of `code` on `backend` with the extra options `args`, wrapping `server`.
pub(crate) fn exec_wrapping(backend: &str, code: &str, args: &[&str], server: Vec<String>) -> Exec {
    exec_with(
        code,
        ExecOptions {
            backend,
            args: args.iter().map(|s| s.to_string()).collect(),
            server,
            ..Default::default()
        },
    )
}

pub(crate) fn exec_with(code: &str, opts: ExecOptions<'_>) -> Exec {
    let mut cmd = Command::new(bin());
    cmd.arg("exec")
        .arg("--backend")
        .arg(opts.backend)
        .arg("--code")
        .arg(code);
    cmd.args(&opts.args).arg("--").args(&opts.server);
    for (k, v) in &opts.env {
        cmd.env(k, v);
    }
    let Output {
        status,
        stdout,
        stderr,
    } = cmd.output().expect("run mcp-code-mode exec");
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let result = stdout
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    Exec {
        code: status.code().unwrap_or(-1),
        result,
        stdout,
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// `exec` on `backend` with the toy server and extra CLI args.
pub(crate) fn exec_on(backend: &str, code: &str, args: &[&str]) -> Exec {
    exec_wrapping(backend, code, args, toy())
}

/// `exec` on the native backend with the toy server and extra CLI args.
pub(crate) fn exec(code: &str, args: &[&str]) -> Exec {
    exec_on("native", code, args)
}

/// The cargo target directory (`target/`).
pub(crate) fn target_dir() -> PathBuf {
    let deps = std::env::current_exe().expect("test binary path");
    deps.ancestors().nth(3).expect("target dir").to_path_buf()
}

/// A Python with the MCP SDK 2.x and `mcp-server-time` installed, made on first use in
/// `target/py-venv-system` (pip from PyPI); `None` when it cannot be made.
pub(crate) fn venv_python() -> Option<PathBuf> {
    static PY: OnceLock<Option<PathBuf>> = OnceLock::new();
    PY.get_or_init(|| {
        // Debian's python3 when there is one: a venv made from it is usable by every user
        // (one made from a python under /root is not), which the unprivileged run needs.
        let base = ["/usr/bin/python3", "python3"]
            .into_iter()
            .find(|p| !p.starts_with('/') || std::path::Path::new(p).exists())
            .unwrap_or("python3");
        let venv = target_dir().join("py-venv-system");
        let python = venv.join("bin").join("python");
        let ready = |p: &PathBuf| {
            Command::new(p)
                .args([
                    "-c",
                    "import mcp, mcp_server_time; from mcp.client.stdio import stdio_client",
                ])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if ready(&python) {
            return Some(python);
        }
        let made = Command::new(base)
            .arg("-m")
            .arg("venv")
            .arg(&venv)
            .status()
            .is_ok_and(|s| s.success())
            && Command::new(venv.join("bin").join("pip"))
                .args(["install", "-q", "mcp>=2,<3", "mcp-server-time"])
                .status()
                .is_ok_and(|s| s.success());
        (made && ready(&python)).then_some(python)
    })
    .clone()
}

/// Run the Python SDK client against `serve_command`, calling run_python with each code.
pub(crate) fn python_client(codes: &[&str], serve_command: &[String]) -> Value {
    let python = venv_python().expect("venv python");
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/mcp_client.py");
    let out = Command::new(python)
        .arg(script)
        .args(codes)
        .arg("--")
        .args(serve_command)
        .output()
        .expect("run the python client");
    last_json_line(&out, "the python client")
}

/// The JSON object a test client printed as its last line of stdout; a panic showing its
/// stdout and stderr when that is not JSON (`what` names the client).
pub(crate) fn last_json_line(out: &std::process::Output, what: &str) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "{what} printed no JSON ({e}): {stdout}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// Whether a Docker engine answers.
pub(crate) fn docker_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        Command::new("docker")
            .arg("info")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// Whether the tests run as a user other than root (no writable cgroup: rlimit fallback).
pub(crate) fn unprivileged() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) != Some("0"))
        })
        .unwrap_or(false)
}

/// Whether `backend` ("native" or "docker") can run here; skips loudly (fails under CI) if not.
pub(crate) fn backend_ready(backend: &str) -> bool {
    match backend {
        "native" => require(native_available(), "user namespaces are not available here"),
        _ => require(
            docker_available(),
            "no Docker engine answers (scripts/start-docker starts one)",
        ),
    }
}

/// One `native::NAME` and one `docker::NAME` test for each body `NAME(backend: &str)`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod native {
            $( #[test] fn $name() { if $crate::suite::common::backend_ready("native") { super::$name("native") } } )*
        }
        mod docker {
            $( #[test] fn $name() { if $crate::suite::common::backend_ready("docker") { super::$name("docker") } } )*
        }
    };
}

/// Whether the native sandbox and the Python MCP SDK are both here (skips loudly if not).
pub(crate) fn native_client_ready() -> bool {
    require(native_available(), "user namespaces are not available here")
        && require(
            venv_python().is_some(),
            "could not install the Python MCP SDK from PyPI",
        )
}

/// `mcp-code-mode serve ARGS… -- <toy server>` as a command line.
pub(crate) fn serve_command(args: &[&str]) -> Vec<String> {
    let mut command = vec![bin().display().to_string(), "serve".to_owned()];
    command.extend(args.iter().map(|a| a.to_string()));
    command.push("--".into());
    command.extend(toy());
    command
}

/// Host pids whose name (`/proc/PID/comm`, set with prctl(PR_SET_NAME)) is `marker`, zombies
/// left out; any user's.
pub(crate) fn processes_named(marker: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end() == marker)
        })
        .filter(|pid| {
            // A zombie has let go of everything; it only waits for its parent to reap it.
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .is_ok_and(|zombie| !zombie)
        })
        .collect()
}

/// Send `SIG{name}` (`"TERM"`, `"INT"`, …) to `pid` with kill(1); the test fails when
/// kill(1) does.
pub(crate) fn send_signal(name: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([format!("-{name}"), pid.to_string()])
        .status()
        .expect("kill");
    assert!(sent.success(), "SIG{name} to {pid}");
}

/// Wait (at most `bound`, polling every 20 ms) for `child` to exit: its exit code (`None`:
/// ended by a signal). When it still runs after `bound` it is killed and reaped, and the
/// test fails naming `what`.
pub(crate) fn exits_within(
    child: &mut std::process::Child,
    bound: Duration,
    what: &str,
) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        if start.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {bound:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait (at most `bound`, polling every 20 ms) until at least `count` processes named
/// `marker` run ([`processes_named`]): their pids; the test fails naming `what` when they
/// do not come in time.
pub(crate) fn until_named(marker: &str, count: usize, bound: Duration, what: &str) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let pids = processes_named(marker);
        if pids.len() >= count {
            return pids;
        }
        assert!(
            start.elapsed() < bound,
            "{what} never started within {bound:?}: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Once serve has ended, wait (at most 2 s, for the kills it sent to land) until no process
/// named `marker` runs; the test fails naming `what` (what those processes are) when one
/// is left.
pub(crate) fn assert_none_named(marker: &str, what: &str) {
    let start = Instant::now();
    while !processes_named(marker).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{what} outlived serve: {:?}",
            processes_named(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
