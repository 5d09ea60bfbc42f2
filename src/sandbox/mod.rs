//! Where the code runs: the [`Backend`] seam and the sandboxes it starts.
//!
//! A backend starts one sandbox per run: runner.py in the read-only rootfs, the protocol on
//! its stdin/stdout, its stderr drained by the host (bounded). The MCP layer knows only this
//! trait; `native` spawns our launcher, `docker` runs the same rootfs as an image.

pub(crate) mod disks;
pub mod docker;
mod held_limits;
pub mod native;
pub(crate) mod owner;
mod spawner;
mod stderr_drain;

use std::future::Future;
use std::pin::Pin;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Child;

pub use self::held_limits::HeldLimits;
pub use self::owner::RunName;
pub use self::stderr_drain::{StderrDrain, StderrFeed};

/// A boxed future, for the object-safe trait methods.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Bytes of a sandbox's stderr kept for diagnostics.
pub const STDERR_KEEP_BYTES: usize = 4096;

/// Why a sandbox could not be started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// The backend could not start the process at all.
    #[error("failed to start the sandbox: {0}")]
    Spawn(String),
    /// The native launcher failed before the program ran, as it reported on its report
    /// socket (control characters escaped when shown).
    #[error("failed to start the sandbox: {}", escape_controls(&.0.message))]
    Launch(launcher::LaunchFailure),
}

/// How much of a busy CPU a sandbox gets next to the host's other work.
///
/// The warm pool starts its sandboxes and ends used ones at [`CpuPriority::Background`], so
/// that this work, about 120 ms of CPU per start, yields the CPU to the runs being served;
/// a sandbox taken for a run is back at [`CpuPriority::Normal`] before its cell is sent.
/// Only a priority the host can raise again is ever lowered: natively the weight of the
/// run's own cgroup (v1 `cpu.shares`, v2 `cpu.weight`), which the host wrote and may write
/// again, privileged or not. Docker and a native run without a CPU cgroup keep the normal
/// priority throughout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPriority {
    /// The weight every process and cgroup has by default (v1 `cpu.shares` 1024, v2
    /// `cpu.weight` 100).
    Normal,
    /// A sixteenth of the normal weight (v1 `cpu.shares` 64, v2 `cpu.weight` 6): under
    /// contention it gets about 6% of what one normal process beside it gets; on an idle
    /// CPU it runs at full speed.
    Background,
}

/// A way to start sandboxes.
pub trait Backend: Send + Sync {
    /// Start one sandbox running runner.py, ready for the `start` message.
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>>;

    /// [`Self::spawn`] at `priority` (see [`CpuPriority`]), set before any process of the
    /// sandbox runs where the backend can set it and raise it again
    /// ([`SandboxControl::set_priority`]). Default: [`Self::spawn`], at normal priority.
    fn spawn_at(&self, priority: CpuPriority) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        let _ = priority;
        self.spawn()
    }

    /// Wait until the sandboxes this backend ends in the background are gone: those whose
    /// start or [`SandboxControl`] was dropped midway (a run cancelled or cut by its deadline
    /// while it started, a pool's start that lost its race, serve ending), whose removal
    /// (native: cgroup; Docker: container) runs off the runtime's thread. Unbounded: each
    /// removal is bounded on its own (about 4 s native, [`docker::DOCKER_COMMAND_TIMEOUT`]
    /// Docker); callers bound the whole wait. Default: nothing to wait for.
    fn settle(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The removals a backend runs in the background ([`Backend::settle`] waits for them).
#[derive(Clone, Default)]
pub(crate) struct Removals(tokio_util::task::TaskTracker);

impl Removals {
    /// Run `removal` on `runtime`, tracked.
    pub(crate) fn spawn_on<F>(&self, removal: F, runtime: &tokio::runtime::Handle)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.0.spawn_on(removal, runtime));
    }

    /// Run the blocking `removal` on `runtime`'s blocking pool, tracked.
    pub(crate) fn spawn_blocking_on<F>(&self, removal: F, runtime: &tokio::runtime::Handle)
    where
        F: FnOnce() + Send + 'static,
    {
        drop(self.0.spawn_blocking_on(removal, runtime));
    }

    /// Resolves once no removal runs (those started meanwhile included).
    pub(crate) async fn settled(&self) {
        self.0.close();
        self.0.wait().await;
        self.0.reopen();
    }
}

/// Facts about how a sandbox ended, for the run's error text.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ending {
    /// Exit code, or 128+signal.
    pub status: Option<i32>,
    /// The memory limit was hit in this run.
    pub memory_limit_hit: bool,
    /// The start of what the sandbox wrote to stderr (Python's fatal errors, the runner's
    /// diagnostics). Untrusted: the code writes there too.
    pub stderr: String,
    /// The sandbox could not be started, as the backend itself reported it (the native
    /// launcher's report socket, which the code never holds: [`SandboxError::Launch`];
    /// Docker's own failure before the container started: [`SandboxError::Spawn`]). Never
    /// taken from anything the code can write.
    pub start_failure: Option<SandboxError>,
}

/// Backend-specific control of a running sandbox.
pub trait SandboxControl: Send {
    /// Kill every process of the sandbox now. Native returns once its pid 1 and launcher
    /// have exited (at most 500 ms), so nothing of the sandbox runs then; Docker once the
    /// engine has answered the kill request.
    fn kill(&mut self) -> BoxFuture<'_, ()>;
    /// Wait for the sandbox to exit and report how it ended.
    fn wait(&mut self) -> BoxFuture<'_, Ending>;
    /// Which resource limits hold in this sandbox.
    fn limits(&self) -> HeldLimits;
    /// Free what the sandbox holds on the host once it has ended (native: its cgroup),
    /// without blocking the runtime's thread; called last, after [`Self::kill`] and
    /// [`Self::wait`]. Dropping the control frees it too, in the background. Default: nothing.
    fn release(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
    /// Put every process of the sandbox, those it starts later included, at `priority`.
    /// `true` when it now runs there, or at [`CpuPriority::Normal`] because the backend
    /// never lowers it; `false` when the change failed. Default: `true` for
    /// [`CpuPriority::Normal`], `false` otherwise (nothing is changed).
    fn set_priority(&mut self, priority: CpuPriority) -> BoxFuture<'_, bool> {
        Box::pin(async move { priority == CpuPriority::Normal })
    }
}

/// One running sandbox: the protocol pipes and its control.
pub struct Sandbox {
    /// Host → runner.
    pub stdin: Box<dyn AsyncWrite + Send + Unpin>,
    /// Runner → host.
    pub stdout: Box<dyn AsyncRead + Send + Unpin>,
    /// Kill, wait, limits.
    pub control: Box<dyn SandboxControl>,
}

/// A sandbox's protocol pipes: host → runner, runner → host.
pub type Pipes = (
    Box<dyn AsyncWrite + Send + Unpin>,
    Box<dyn AsyncRead + Send + Unpin>,
);

/// Take a child's stdio as a [`Sandbox`]'s pipes.
///
/// # Errors
/// [`SandboxError::Spawn`] when a pipe is missing.
pub fn take_pipes(child: &mut Child) -> Result<Pipes, SandboxError> {
    match (child.stdin.take(), child.stdout.take()) {
        (Some(i), Some(o)) => Ok((Box::new(i), Box::new(o))),
        _ => Err(SandboxError::Spawn("the sandbox has no stdio pipes".into())),
    }
}

/// `text` with every control character (C0, DEL, C1) but newline and tab, every format
/// character and every line or paragraph separator written as `\u{..}`, so text from a
/// sandbox or a wrapped server cannot move a terminal's cursor, retitle its window or colour
/// what follows when it is printed or logged (ECMA-48: C0 is U+0000-U+001F, C1 is
/// U+0080-U+009F; ESC and CSI start the sequences), nor reorder or hide what a person reads
/// (Unicode general category Cf: the bidi embeddings and overrides U+202A-U+202E, the
/// isolates U+2066-U+2069, zero-width characters U+200B-U+200F, U+FEFF, tag characters;
/// Zl U+2028 and Zp U+2029 break lines).
pub fn escape_controls(text: &str) -> String {
    use unicode_general_category::{GeneralCategory, get_general_category};
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let hidden = (c.is_control() && c != '\n' && c != '\t')
            || (!c.is_ascii()
                && matches!(
                    get_general_category(c),
                    GeneralCategory::Format
                        | GeneralCategory::LineSeparator
                        | GeneralCategory::ParagraphSeparator
                ));
        if hidden {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

/// Exit code of a finished child: the code, or 128+signal.
pub fn exit_code(status: std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_from_a_sandbox_are_escaped_but_lines_stay_lines() {
        let hostile = "\u{1b}]0;owned\u{7}\u{1b}[31mred\u{9b}2J\u{7f}\r\nnext\tcol";
        let escaped = escape_controls(hostile);
        assert_eq!(
            escaped,
            "\\u{1b}]0;owned\\u{7}\\u{1b}[31mred\\u{9b}2J\\u{7f}\\u{d}\nnext\tcol"
        );
        assert!(
            !escaped
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
    }

    #[test]
    fn bidi_overrides_isolates_and_zero_width_characters_are_escaped_too() {
        let hostile = "/tmp/\u{202e}fdp.exe\u{2066}x\u{2069}\u{200b}\u{200f}\u{feff}\u{ad}\u{2028}\u{e0041}é→";
        assert_eq!(
            escape_controls(hostile),
            "/tmp/\\u{202e}fdp.exe\\u{2066}x\\u{2069}\\u{200b}\\u{200f}\\u{feff}\\u{ad}\\u{2028}\\u{e0041}é→"
        );
    }
}
