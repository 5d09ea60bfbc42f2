//! The native backend: our launcher, no Docker, no setuid.
//!
//! Per run: a cgroup below our own (memory 256 MiB without swap, 64 pids, 1 CPU) when one
//! can be created, else rlimits (reported by [`SandboxControl::limits`]); then the launcher
//! (`mcp-code-mode __launcher …`, the same binary) with an empty environment, spawned from
//! the long-lived spawner thread. The launcher reports on a socket of its own
//! ([`launcher::report`]): a pidfd of the sandbox's pid 1 before any code runs, or why it
//! failed. At the end the host kills pid 1 through that pidfd (which ends every process of
//! the sandbox's pid namespace, whatever the code did to its death signal or session), then
//! the launcher, then every process left in the cgroup, waits (at most [`GONE_LIMIT`]) until
//! pid 1 and the launcher have exited, and removes the cgroup.
//! A sandbox started at [`CpuPriority::Background`] (the warm pool's) has its cgroup's CPU
//! weight lowered before the launcher joins it; [`SandboxControl::set_priority`] writes it
//! again.
//!
//! Making, emptying and removing a cgroup block (cgroupfs writes; a removal retries while the
//! kernel still counts dying processes, sleeping 10 ms at a time for up to 2 s), so they run
//! on tokio's blocking pool, never on the runtime's thread: `serve` runs every run on one
//! thread (see `crate::cli`), which such a wait would stall.

pub(crate) mod cgroup;
mod input;
pub(crate) mod scope;

use std::ffi::OsString;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::Duration;

use launcher::report::{self, Message};
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, poll};

pub use self::cgroup::{CgroupError, CgroupHost, CgroupLimits, RunCgroup};
use crate::limits::{CPUS, MAX_FILE_BYTES, MAX_OPEN_FILES, MAX_PIDS, MEMORY_BYTES, TMP_BYTES};
use crate::sandbox::owner::RunName;
use crate::sandbox::{
    Backend, BoxFuture, CpuPriority, Ending, HeldLimits, Removals, Sandbox, SandboxControl,
    SandboxError, StderrDrain, exit_code, spawner,
};

/// The hidden subcommand that turns this binary into the launcher.
pub const LAUNCHER_SUBCOMMAND: &str = "__launcher";
/// Longest wait for the launcher's first report (the sandbox exists, or why not).
const REPORT_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait, after the launcher exited, for the end of its report socket.
const REPORT_END_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait, in [`SandboxControl::kill`], for the killed sandbox's pid 1 and launcher to
/// have exited. A SIGKILLed process takes milliseconds to end; the bound is for one that
/// cannot (frozen by someone else), so that no ending, and so no exit of `serve`, hangs on it.
const GONE_LIMIT: Duration = Duration::from_millis(500);

/// Starts sandboxes with the native launcher.
pub struct NativeBackend {
    launcher: PathBuf,
    rootfs: PathBuf,
    argv: Vec<String>,
    cgroups: CgroupHost,
    cpu_seconds: u64,
    /// Removals of the cgroups of sandboxes dropped midway.
    removals: Removals,
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
            removals: Removals::default(),
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

    /// The launcher's configuration for one run: the limits of [`crate::limits`], the run's
    /// cgroups when it has them (RLIMIT_DATA stands in for a memory cgroup it lacks), and the
    /// report socket at [`report::REPORT_FD`]; the seccomp errno of the test-only
    /// [`launcher::test_knobs::SECCOMP_ERRNO_ENV`] when this process's environment enables it.
    fn launch_config(&self, cgroup: Option<&RunCgroup>) -> launcher::Config {
        let program = self.argv.iter().map(OsString::from).collect();
        let mut config = launcher::Config::new(&self.rootfs, program);
        config.cgroup_procs = cgroup.map(RunCgroup::procs_files).unwrap_or_default();
        let memory_cgroup = cgroup.is_some_and(|cg| cg.held().contains(&"memory"));
        config.memory_rlimit = (!memory_cgroup).then_some(MEMORY_BYTES);
        config.nproc = MAX_PIDS;
        config.nofile = MAX_OPEN_FILES;
        config.fsize = MAX_FILE_BYTES;
        config.tmp_size = TMP_BYTES;
        config.cpu_seconds = Some(self.cpu_seconds);
        config.report_fd = Some(report::REPORT_FD);
        if let Some(errno) = launcher::test_knobs::TestKnobs::seccomp_errno_from_environment() {
            config.seccomp_errno = errno;
        }
        config
    }

    fn command(&self, cgroup: Option<&RunCgroup>) -> Command {
        let mut command = Command::new(&self.launcher);
        command
            .arg(LAUNCHER_SUBCOMMAND)
            .args(self.launch_config(cgroup).to_args())
            .env_clear()
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }
}

impl Backend for NativeBackend {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        self.spawn_at(CpuPriority::Normal)
    }

    /// The run's cgroup gets the weight of `priority` before the launcher joins it, so every
    /// process of the sandbox runs at it from the start (without a CPU cgroup: normal).
    fn spawn_at(&self, priority: CpuPriority) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        Box::pin(async move {
            let limits = CgroupLimits {
                memory_bytes: MEMORY_BYTES,
                pids: MAX_PIDS,
                cpus: CPUS,
            };
            let cgroups = self.cgroups.clone();
            let name = RunName::next().to_string();
            // Dropped while this runs (a cancelled start), the cgroup made is removed by its
            // own drop, on the blocking thread.
            let made = tokio::task::spawn_blocking(move || {
                let made = cgroups.create(&name, &limits);
                if let Ok(Some(cg)) = &made
                    && priority != CpuPriority::Normal
                    && cg.held().contains(&"cpu")
                {
                    cg.set_cpu_priority(priority);
                }
                made
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|made| made.map_err(|e| e.to_string()));
            let cgroup = match made {
                Ok(cg) => cg.map(Arc::new),
                Err(e) => {
                    tracing::warn!("no cgroup for this run, falling back to rlimits: {e}");
                    None
                }
            };
            let (host_end, launcher_end) = report::channel()
                .map_err(|e| SandboxError::Spawn(format!("the launcher's report socket: {e}")))?;
            // Host → runner on a socket, not a pipe: a pipe's /proc/self/fd/N can be reopened
            // for writing by its owner (the caller's uid is the sandbox's when unprivileged),
            // which would let the code forge host lines to its own runner; a socket cannot be
            // opened by path at all (ENXIO).
            let (to_runner, runner_end) = std::os::unix::net::UnixStream::pair()
                .map_err(|e| SandboxError::Spawn(format!("the sandbox's input socket: {e}")))?;
            let _ = runner_end.shutdown(std::net::Shutdown::Write);
            let mut command = self.command(cgroup.as_deref());
            command.stdin(Stdio::from(OwnedFd::from(runner_end)));
            report::pass_to_child(command.as_std_mut(), launcher_end);
            let mut child = spawner::spawn(command)
                .await
                .map_err(|e| SandboxError::Spawn(format!("{}: {e}", self.launcher.display())))?;
            let mut reports = read_reports(host_end);
            let mut stderr = StderrDrain::start(child.stderr.take());
            let first = tokio::time::timeout(REPORT_TIMEOUT, reports.recv()).await;
            let pidfd = match first {
                Ok(Some(Message::Started { pidfd, .. })) => pidfd,
                other => {
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    let error = match other {
                        Ok(Some(Message::Failed(failure))) => SandboxError::Launch(failure),
                        Err(_) => SandboxError::Spawn(format!(
                            "the launcher did not start the sandbox within {} s",
                            REPORT_TIMEOUT.as_secs()
                        )),
                        // The launcher ended before its report socket was set up (bad
                        // arguments): nothing but the launcher ran, so its stderr is its own.
                        _ => SandboxError::Spawn(format!(
                            "the launcher exited before starting the sandbox: {}",
                            stderr.text().await
                        )),
                    };
                    remove_cgroup(cgroup).await;
                    return Err(error);
                }
            };
            to_runner
                .set_nonblocking(true)
                .map_err(|e| SandboxError::Spawn(format!("the sandbox's input socket: {e}")))?;
            let stdin = input::QuietInput::new(to_runner);
            let stdout = child
                .stdout
                .take()
                .ok_or_else(|| SandboxError::Spawn("the sandbox has no stdout pipe".into()))?;
            let (stdin, stdout): (Box<dyn tokio::io::AsyncWrite + Send + Unpin>, _) =
                (Box::new(stdin), Box::new(stdout));
            Ok(Sandbox {
                stdin,
                stdout,
                control: Box::new(NativeControl {
                    child,
                    pidfd,
                    reports,
                    cgroup,
                    stderr,
                    removals: self.removals.clone(),
                }),
            })
        })
    }

    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.removals.settled())
    }
}

/// Reads the launcher's report socket on a thread of its own until end of file (every
/// launcher process exited or exec'd); each message goes to the returned receiver.
fn read_reports(host_end: OwnedFd) -> mpsc::UnboundedReceiver<Message> {
    let (tx, rx) = mpsc::unbounded_channel();
    let spawned = std::thread::Builder::new()
        .name("launcher-report".into())
        .spawn(move || {
            while let Ok(Some(message)) = report::receive(&host_end) {
                if tx.send(message).is_err() {
                    break;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read the launcher's report: {e}");
    }
    rx
}

struct NativeControl {
    /// The outer launcher.
    child: Child,
    /// The sandbox's pid 1, as the launcher reported it.
    pidfd: OwnedFd,
    /// Later reports: a failure of the sandbox process before it exec'd the runner.
    reports: mpsc::UnboundedReceiver<Message>,
    /// Shared with a kill in progress on the blocking pool.
    cgroup: Option<Arc<RunCgroup>>,
    stderr: StderrDrain,
    /// Where a drop leaves the cgroup's removal.
    removals: Removals,
}

impl NativeControl {
    /// Ends the sandbox from the host: pid 1 first (the kernel then kills every process of
    /// its pid namespace), then the launcher.
    fn end_sandbox(&mut self) {
        if let Err(e) = report::kill(&self.pidfd) {
            tracing::warn!("failed to kill the sandbox's pid 1: {e}");
        }
        let _ = self.child.start_kill();
    }

    /// Waits, at most [`GONE_LIMIT`], until pid 1 and the launcher have exited after
    /// [`Self::end_sandbox`]; whether they have.
    ///
    /// Without a cgroup (an unprivileged caller) nothing else waits for the sandbox's
    /// processes: a SIGKILL only starts their end, and `serve` could exit while they still
    /// run. The launcher's own exit says nothing about pid 1 (it was killed too, not left to
    /// reap it), so pid 1 is waited for through its pidfd, which polls readable once pid 1 is
    /// a zombie. The kernel makes it one only after it has killed and reaped every other
    /// process of the pid namespace (zap_pid_ns_processes, in pid 1's exit), so then nothing
    /// of the sandbox runs any more. The wait blocks, so it runs on the blocking pool unless
    /// pid 1 is gone already.
    async fn wait_gone(&mut self) -> bool {
        let deadline = tokio::time::Instant::now() + GONE_LIMIT;
        let pid1_gone = exited_within(&self.pidfd, Duration::ZERO)
            || match self.pidfd.try_clone() {
                Ok(pid1) => tokio::task::spawn_blocking(move || exited_within(&pid1, GONE_LIMIT))
                    .await
                    .unwrap_or(false),
                Err(e) => {
                    tracing::warn!("cannot wait for the sandbox's pid 1: {e}");
                    false
                }
            };
        let launcher_gone = tokio::time::timeout_at(deadline, self.child.wait())
            .await
            .is_ok();
        pid1_gone && launcher_gone
    }
}

/// Whether the process `pidfd` names has exited (is a zombie or reaped) within `limit`:
/// poll(2) reports a pidfd readable then (pidfd_open(2)). Blocks for up to `limit`.
fn exited_within(pidfd: &OwnedFd, limit: Duration) -> bool {
    let deadline = std::time::Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
        match poll(
            &mut fds,
            u16::try_from(left.as_millis()).unwrap_or(u16::MAX),
        ) {
            Ok(ready) => return ready > 0,
            Err(Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}

impl SandboxControl for NativeControl {
    fn kill(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.end_sandbox();
            if let Some(cg) = self.cgroup.clone() {
                let _ = tokio::task::spawn_blocking(move || cg.kill_all()).await;
            }
            if !self.wait_gone().await {
                tracing::warn!(
                    "the sandbox's pid 1 or launcher was still there {} ms after its kill",
                    GONE_LIMIT.as_millis()
                );
            }
        })
    }

    fn release(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.end_sandbox();
            remove_cgroup(self.cgroup.take()).await;
        })
    }

    fn set_priority(&mut self, priority: CpuPriority) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match self.cgroup.clone() {
                Some(cg) if cg.held().contains(&"cpu") => {
                    tokio::task::spawn_blocking(move || cg.set_cpu_priority(priority))
                        .await
                        .unwrap_or(false)
                }
                // Never lowered: there is no weight of its own to set.
                _ => priority == CpuPriority::Normal,
            }
        })
    }

    fn wait(&mut self) -> BoxFuture<'_, Ending> {
        Box::pin(async move {
            let status = self.child.wait().await.ok().and_then(exit_code);
            // The launcher is gone; whatever of the sandbox it left behind goes with pid 1.
            self.end_sandbox();
            // A failure of the sandbox process before exec comes just before the socket ends.
            let mut start_failure = None;
            let deadline = tokio::time::Instant::now() + REPORT_END_TIMEOUT;
            while let Ok(Some(message)) =
                tokio::time::timeout_at(deadline, self.reports.recv()).await
            {
                if let Message::Failed(failure) = message {
                    start_failure = Some(SandboxError::Launch(failure));
                }
            }
            // Read to the end of stderr, so what the sandbox wrote just before exit is kept.
            let stderr = self.stderr.text().await;
            Ending {
                status,
                memory_limit_hit: self.cgroup.as_ref().is_some_and(|c| c.memory_limit_hit()),
                stderr,
                start_failure,
            }
        })
    }

    fn limits(&self) -> HeldLimits {
        match &self.cgroup {
            Some(cg) => HeldLimits::Cgroup(cg.held()),
            None => HeldLimits::Rlimits,
        }
    }
}

impl Drop for NativeControl {
    /// Without [`SandboxControl::release`] first (a start or run dropped midway): the cgroup
    /// is removed on the blocking pool, without waiting ([`Backend::settle`] waits for it);
    /// inline when no runtime runs. A removal the runtime's shutdown drops before it began
    /// is done by [`RunCgroup`]'s own drop, where the dropped job lets go of it.
    fn drop(&mut self) {
        self.end_sandbox();
        let Some(cg) = self.cgroup.take() else {
            return;
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => self
                .removals
                .spawn_blocking_on(move || remove_now(cg), &runtime),
            Err(_) => remove_now(cg),
        }
    }
}

/// Kill what is left in a run's cgroup and remove it, on the blocking pool.
async fn remove_cgroup(cgroup: Option<Arc<RunCgroup>>) {
    if let Some(cg) = cgroup {
        let _ = tokio::task::spawn_blocking(move || remove_now(cg)).await;
    }
}

/// Kill what is left in a run's cgroup and remove it (blocks for up to about 4 s). When a
/// kill still holds the cgroup, the last holder's drop removes it.
fn remove_now(cgroup: Arc<RunCgroup>) {
    if let Ok(cg) = Arc::try_unwrap(cgroup)
        && let Err(e) = cg.remove()
    {
        tracing::warn!("failed to remove a run's cgroup: {e}");
    }
}
