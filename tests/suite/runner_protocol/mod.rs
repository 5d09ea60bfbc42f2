//! The runner against a scripted host: the host's python3 runs `rootfs/runner.py` (which
//! imports its package from `rootfs/usr/lib/mcp-code-mode`) on pipes (no sandbox), and each
//! test plays the host's side of the line protocol. Here: the scripted host ([`Runner`]).
//!
//! Index: `calls` (ids, refusals, argument checks, asyncio); `globals` (variables, names,
//! stubs, search_tools); `output` (truncation, capture, streaming, the write cap, lines never
//! broken); `errors` (tracebacks, SystemExit, syntax errors, surrogates); `memory` (running
//! out of memory under the rlimit fallback's kind of limits); `wire` (forged messages, bad
//! host lines, EOF, the line cap, tool names).

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

mod calls;
mod errors;
mod globals;
mod memory;
mod output;
mod wire;

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
        Runner::start_from(Runner::spawn(), limits)
    }

    /// Starts the runner (as [`Runner::start`] does) under `prlimit` with these arguments
    /// (e.g. `--data=N`, `--as=N`), the way the launcher's rlimit fallback limits it.
    fn start_under_prlimit(prlimit_args: &[&str]) -> Runner {
        let mut command = Command::new("prlimit");
        command.args(prlimit_args).arg("--").arg(host_python());
        Runner::start_from(
            Runner::spawn_by(command),
            json!({"stdout_keep": 8192, "stdout_stop": 1048576, "error_chars": 2000}),
        )
    }

    fn start_from(mut runner: Runner, limits: Value) -> Runner {
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
        Runner::spawn_by(Command::new(host_python()))
    }

    /// Spawns runner.py by `command`, the host's python3 or a command that ends in it.
    fn spawn_by(mut command: Command) -> Runner {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/rootfs/runner.py");
        let mut child = command
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
