//! The native backend: our launcher, no Docker, no setuid.
//!
//! Per run: a cgroup below our own (memory 256 MiB without swap, 64 pids, 1 CPU) when one
//! can be created, else rlimits (reported by [`SandboxControl::limits`]); then the launcher
//! (`mcp-code-mode __launcher …`, the same binary) with an empty environment, spawned from
//! the long-lived spawner thread. At the end, the launcher is killed (its death takes the
//! sandbox's pid namespace with it), every process left in the cgroup is killed, and the
//! cgroup is removed.

pub mod cgroup;

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use tokio::process::{Child, Command};

use self::cgroup::{CgroupHost, CgroupLimits, RunCgroup};
use crate::limits::{CPUS, MAX_OPEN_FILES, MAX_PIDS, MEMORY_BYTES, TMP_BYTES};
use crate::sandbox::owner::RunName;
use crate::sandbox::{
    Backend, BoxFuture, Ending, Sandbox, SandboxControl, SandboxError, drain_stderr, exit_code,
    spawner, stderr_text, take_pipes,
};

/// The hidden subcommand that turns this binary into the launcher.
pub const LAUNCHER_SUBCOMMAND: &str = "__launcher";
/// RLIMIT_FSIZE inside the sandbox, bytes (no file can outgrow /tmp).
pub const MAX_FILE_BYTES: u64 = TMP_BYTES;

/// Starts sandboxes with the native launcher.
pub struct NativeBackend {
    launcher: PathBuf,
    rootfs: PathBuf,
    argv: Vec<String>,
    cgroups: CgroupHost,
    cpu_seconds: u64,
}

impl NativeBackend {
    /// A backend running `argv` (runner.py's command inside the rootfs) in `rootfs`, with
    /// `launcher` the `mcp-code-mode` binary, and RLIMIT_CPU of `cpu_seconds`.
    /// Run cgroups left by an earlier process that was killed are removed here.
    pub fn new(launcher: PathBuf, rootfs: PathBuf, argv: Vec<String>, cpu_seconds: u64) -> Self {
        let cgroups = CgroupHost::system();
        let strays = cgroups.remove_strays();
        if strays > 0 {
            tracing::info!("removed {strays} run cgroup(s) left by a process that died");
        }
        Self {
            launcher,
            rootfs,
            argv,
            cgroups,
            cpu_seconds,
        }
    }

    /// A backend for `rootfs` whose launcher is this very program, which must call
    /// [`crate::dispatch_launcher`] first thing in `main`; RLIMIT_CPU is `cpu_seconds`.
    ///
    /// # Errors
    /// The OS error when this program's path cannot be read from `/proc/self/exe`.
    pub fn for_rootfs(rootfs: &crate::rootfs::Rootfs, cpu_seconds: u64) -> std::io::Result<Self> {
        Ok(Self::new(
            std::env::current_exe()?,
            rootfs.dir.clone(),
            rootfs.argv(),
            cpu_seconds,
        ))
    }

    fn command(&self, cgroup: Option<&RunCgroup>) -> Command {
        let mut command = Command::new(&self.launcher);
        command
            .arg(LAUNCHER_SUBCOMMAND)
            .arg("--rootfs")
            .arg(&self.rootfs);
        match cgroup {
            Some(cg) => {
                for file in cg.procs_files() {
                    command.arg("--cgroup-procs").arg(file);
                }
                if !cg.held().contains(&"memory") {
                    command.arg("--memory-rlimit").arg(MEMORY_BYTES.to_string());
                }
            }
            None => {
                command.arg("--memory-rlimit").arg(MEMORY_BYTES.to_string());
            }
        }
        command
            .arg("--nproc")
            .arg(MAX_PIDS.to_string())
            .arg("--nofile")
            .arg(MAX_OPEN_FILES.to_string())
            .arg("--fsize")
            .arg(MAX_FILE_BYTES.to_string())
            .arg("--tmp-size")
            .arg(TMP_BYTES.to_string())
            .arg("--cpu-seconds")
            .arg(self.cpu_seconds.to_string())
            .arg("--")
            .args(&self.argv)
            .env_clear()
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

impl Backend for NativeBackend {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        Box::pin(async move {
            let limits = CgroupLimits {
                memory_bytes: MEMORY_BYTES,
                pids: MAX_PIDS,
                cpus: CPUS,
            };
            let cgroup = match self.cgroups.create(&RunName::next().to_string(), &limits) {
                Ok(cg) => cg,
                Err(e) => {
                    tracing::warn!("no cgroup for this run, falling back to rlimits: {e}");
                    None
                }
            };
            let mut child = spawner::spawn(self.command(cgroup.as_ref()))
                .await
                .map_err(|e| SandboxError::Spawn(format!("{}: {e}", self.launcher.display())))?;
            let (stdin, stdout) = take_pipes(&mut child)?;
            let stderr = drain_stderr(child.stderr.take());
            Ok(Sandbox {
                stdin,
                stdout,
                control: Box::new(NativeControl {
                    child,
                    cgroup,
                    stderr,
                }),
            })
        })
    }

    fn name(&self) -> &'static str {
        "native"
    }
}

struct NativeControl {
    child: Child,
    cgroup: Option<RunCgroup>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl SandboxControl for NativeControl {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let _ = self.child.start_kill();
            if let Some(cg) = &self.cgroup {
                cg.kill_all();
            }
        })
    }

    fn wait(&mut self) -> BoxFuture<'_, Ending> {
        Box::pin(async move {
            let status = self.child.wait().await.ok().and_then(exit_code);
            // Give the stderr drain a moment to read what was written just before exit.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            Ending {
                status,
                memory_limit_hit: self.cgroup.as_ref().is_some_and(|c| c.memory_limit_hit()),
                stderr: stderr_text(&self.stderr),
            }
        })
    }

    fn limits(&self) -> String {
        match &self.cgroup {
            Some(cg) => format!("cgroup: {}", cg.held().join(", ")),
            None => {
                "rlimits (no writable cgroup): RLIMIT_DATA, RLIMIT_NPROC, RLIMIT_NOFILE, RLIMIT_CPU"
                    .into()
            }
        }
    }
}

impl Drop for NativeControl {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        if let Some(cg) = self.cgroup.take()
            && let Err(e) = cg.remove()
        {
            tracing::warn!("failed to remove a run's cgroup: {e}");
        }
    }
}
