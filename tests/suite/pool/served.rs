//! The pool tests' harness: `serve --pool N` under the Python SDK driver
//! (tests/clients/pool_driver.py), one call at a time, and the host's view of its sandboxes
//! (launcher children natively, containers on Docker): listed, killed, stopped, frozen.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::suite::common::{bin, send_signal, toy, venv_python};
/// Longest wait for the pool to reach a state (a Docker container start under load).
pub(super) const PATIENCE: Duration = Duration::from_secs(60);

/// `serve` under the driver, one call at a time.
pub(crate) struct Served {
    pub(super) backend: String,
    driver: Child,
    /// The driver's input; `None` once closed (the client disconnects).
    pub(crate) stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
    pid_file: PathBuf,
}

/// `docker pause id`, tried up to five times: on a loaded machine runc may give up freezing
/// the container's cgroup ("unable to freeze") and thaw it again, which leaves it running.
fn docker_pause(id: &str) {
    for attempt in 1..=5 {
        let paused = Command::new("docker")
            .args(["pause", id])
            .stdout(Stdio::null())
            .status()
            .expect("docker pause");
        if paused.success() {
            return;
        }
        assert!(attempt < 5, "docker pause {id} failed {attempt} times");
        std::thread::sleep(Duration::from_millis(500));
    }
}

impl Served {
    pub(crate) fn start(backend: &str, args: &[&str]) -> Self {
        Self::wrapping(backend, args, &toy())
    }

    /// `serve` on `backend` with `args`, wrapping the server `server` (its command line).
    pub(crate) fn wrapping(backend: &str, args: &[&str], server: &[String]) -> Self {
        let python = venv_python().expect("venv python");
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/clients/pool_driver.py");
        let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
            .replace(|c: char| !c.is_ascii_alphanumeric(), "");
        let dir = std::env::temp_dir();
        let log = dir.join(format!("mcp-code-mode-pool-{backend}-{tag}.log"));
        let pid_file = dir.join(format!("mcp-code-mode-pool-{backend}-{tag}.pid"));
        let _ = std::fs::remove_file(&log);
        let _ = std::fs::remove_file(&pid_file);
        let mut command = Command::new(python);
        command
            .arg(script)
            .arg(&log)
            .arg("--")
            .args([
                "sh",
                "-c",
                &format!("echo $$ > {}; exec \"$@\"", pid_file.display()),
                "sh",
            ])
            .arg(bin())
            .args(["serve", "--backend", backend])
            .args(args)
            .arg("--")
            .args(server)
            .env("MCP_CODE_MODE_LOG", "info,rmcp=warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut driver = command.spawn().expect("start the pool driver");
        let stdin = driver.stdin.take().expect("stdin");
        let stdout = BufReader::new(driver.stdout.take().expect("stdout"));
        let mut served = Self {
            backend: backend.into(),
            driver,
            stdin: Some(stdin),
            stdout,
            log,
            pid_file,
        };
        assert_eq!(served.reply()["ready"], true, "the session started");
        served
    }

    pub(crate) fn reply(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read the driver");
        serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!(
                "driver said {line:?} ({e}); serve's log:\n{}",
                self.log_text()
            )
        })
    }

    /// Call run_python with `code`; the whole reply (structured, is_error, meta).
    pub(crate) fn run(&mut self, code: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("the client is still connected");
        writeln!(stdin, "{}", Value::from(code)).expect("write the driver");
        stdin.flush().expect("flush");
        self.reply()
    }

    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How often serve's log holds `what`.
    pub(crate) fn logged(&self, what: &str) -> usize {
        self.log_text().matches(what).count()
    }

    /// Wait until serve has logged `what` at least `count` times.
    pub(crate) fn wait_logged(&self, what: &str, count: usize) {
        let start = Instant::now();
        while self.logged(what) < count {
            assert!(
                start.elapsed() < PATIENCE,
                "serve did not log {what:?} {count} times; its log:\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Wait until `count` pooled sandboxes have said ready since serve started.
    pub(crate) fn wait_ready(&self, count: usize) {
        self.wait_logged("pooled sandbox ready", count);
    }

    pub(super) fn serve_pid(&self) -> u32 {
        std::fs::read_to_string(&self.pid_file)
            .expect("serve's pid")
            .trim()
            .parse()
            .expect("a pid")
    }

    /// serve's sandboxes as the host sees them: launcher pids (native) or container names
    /// (docker). Between runs, these are the pooled ones.
    pub(crate) fn sandboxes(&self) -> Vec<String> {
        let pid = self.serve_pid();
        if self.backend == "docker" {
            let out = Command::new("docker")
                .args(["ps", "--all", "--format", "{{.Names}}"])
                .output()
                .expect("docker ps");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter(|n| n.starts_with(&format!("mcp-code-mode-{pid}-")))
                .map(str::to_owned)
                .collect()
        } else {
            children(pid)
                .into_iter()
                .filter(|c| {
                    std::fs::read(format!("/proc/{c}/cmdline"))
                        .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains("__launcher"))
                })
                .map(|c| c.to_string())
                .collect()
        }
    }

    /// Wait until serve holds exactly `count` sandboxes (those of finished runs are gone);
    /// their ids.
    pub(super) fn wait_sandboxes(&self, count: usize) -> Vec<String> {
        let start = Instant::now();
        loop {
            let held = self.sandboxes();
            if held.len() == count {
                return held;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "serve holds {held:?}, not {count} sandboxes"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the sandbox `id` (from [`Self::sandboxes`]) still exists on the host.
    pub(super) fn exists(&self, id: &str) -> bool {
        if self.backend == "docker" {
            Command::new("docker")
                .args(["inspect", id])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        } else {
            std::path::Path::new(&format!("/proc/{id}")).exists()
        }
    }

    /// Kill the code's process of an idle sandbox, as the OOM killer or a host signal would,
    /// and wait until it is gone.
    pub(super) fn kill_idle(&self, id: &str) {
        if self.backend == "docker" {
            let killed = Command::new("docker")
                .args(["kill", id])
                .stdout(Stdio::null())
                .status()
                .expect("docker kill");
            assert!(killed.success(), "docker kill {id}");
        } else {
            let launcher: u32 = id.parse().expect("a pid");
            let runner = *children(launcher).first().expect("the launcher's child");
            send_signal("KILL", runner);
            // Its launcher reaps it; the launcher is reaped by serve once serve notices.
            let start = Instant::now();
            while std::path::Path::new(&format!("/proc/{runner}")).exists() {
                assert!(start.elapsed() < PATIENCE, "{runner} did not die");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Make the idle sandbox `id` unable to answer while it stays alive, so the pool's idle
    /// watch sees nothing: `how` is `STOP` (SIGSTOP to the runner; Docker: to the container's
    /// main process), `freeze` (native: the runner moved into a frozen cgroup v1 freezer
    /// group) or `pause` (`docker pause`). The returned guard thaws a frozen group and
    /// removes it; with it the pid of the process silenced (none for `pause`).
    pub(super) fn silence_idle(&self, id: &str, how: &str) -> (Thaw, Option<u32>) {
        let runner: u32 = if self.backend == "docker" {
            if how == "pause" {
                docker_pause(id);
                return (Thaw(None), None);
            }
            let out = Command::new("docker")
                .args(["inspect", "--format", "{{.State.Pid}}", id])
                .output()
                .expect("docker inspect");
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .expect("the container's pid")
        } else {
            let launcher: u32 = id.parse().expect("a pid");
            *children(launcher).first().expect("the launcher's child")
        };
        match how {
            "STOP" => {
                send_signal("STOP", runner);
                (Thaw(None), Some(runner))
            }
            "freeze" => {
                let group = PathBuf::from(FREEZER).join(format!(
                    "mcp-code-mode-test-freeze-{}-{runner}",
                    std::process::id()
                ));
                std::fs::create_dir(&group).expect("a freezer group");
                let thaw = Thaw(Some(group.clone()));
                std::fs::write(group.join("cgroup.procs"), runner.to_string())
                    .expect("move the runner");
                std::fs::write(group.join("freezer.state"), "FROZEN").expect("freeze");
                let start = Instant::now();
                while std::fs::read_to_string(group.join("freezer.state"))
                    .is_ok_and(|state| state.trim() != "FROZEN")
                {
                    assert!(start.elapsed() < PATIENCE, "the group did not freeze");
                    std::thread::sleep(Duration::from_millis(10));
                }
                (thaw, Some(runner))
            }
            other => panic!("no way {other:?} to silence a sandbox"),
        }
    }
}

/// Where cgroup v1's freezer hierarchy is mounted.
pub(super) const FREEZER: &str = "/sys/fs/cgroup/freezer";

/// A frozen freezer group (or nothing): thawed and removed when dropped.
pub(super) struct Thaw(Option<PathBuf>);

impl Drop for Thaw {
    fn drop(&mut self) {
        if let Some(group) = &self.0 {
            let _ = std::fs::write(group.join("freezer.state"), "THAWED");
            let start = Instant::now();
            // The group can be removed once its processes are gone (a killed one dies as
            // soon as it is thawed).
            while std::fs::remove_dir(group).is_err() && start.elapsed() < PATIENCE {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let _ = std::fs::remove_file(&self.log);
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// Child pids of `pid`, over all its threads.
pub(crate) fn children(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
                found.extend(
                    list.split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    found
}
