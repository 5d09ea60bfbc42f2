//! The command that starts a wrapped stdio server tied to `serve`'s life: through this very
//! program's `__tied` mode (`launcher::tied`), which arms SIGKILL for `serve`'s death and
//! execs the server in place, so a server that ignores the end of its input and SIGTERM still
//! ends with a `serve` that was killed (README "Wrapped servers"). Each server leads a
//! process group of its own, so that ending the server ends the children it started too
//! ([`ProcessGroup`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::process::Command;

/// Set by [`crate::dispatch_launcher`]: this program runs `__tied` when started with it. A
/// program that never called it (a test binary of the library) starts servers directly.
static TIED_MODE: AtomicBool = AtomicBool::new(false);

/// Records that this program handles `launcher::tied::SUBCOMMAND`.
pub(crate) fn enable() {
    TIED_MODE.store(true, Ordering::Relaxed);
}

/// Where `program` is found, as execvp would find it for the server: a name with a slash from
/// `cwd`; a bare name in the directories of `path` (the server's PATH; without one, glibc's
/// default `/bin:/usr/bin`). `None` when no such file exists.
pub(super) fn resolve(program: &Path, path: Option<&str>, cwd: &Path) -> Option<PathBuf> {
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        let full = cwd.join(program);
        return full.is_file().then_some(full);
    }
    path.unwrap_or("/bin:/usr/bin")
        .split(':')
        .map(|dir| {
            cwd.join(if dir.is_empty() { "." } else { dir })
                .join(program)
        })
        .find(|candidate| candidate.is_file())
}

/// The command for `program args`: `THIS_PROGRAM __tied SERVE_PID PROGRAM ARGS` when this
/// program has the mode ([`enable`]) and its path is readable, else `program args` itself.
/// Either way the process is the leader of a new process group (its id is the process's
/// pid), which the terminal's SIGINT does not reach: `serve` ends it.
pub(super) fn command(program: &Path, args: &[String]) -> Command {
    let exe = std::env::current_exe().ok();
    let mut command = match exe.filter(|_| TIED_MODE.load(Ordering::Relaxed)) {
        Some(exe) => {
            let mut command = Command::new(exe);
            command
                .arg(launcher::tied::SUBCOMMAND)
                .arg(std::process::id().to_string())
                .arg(OsString::from(program.as_os_str()))
                .args(args);
            command
        }
        None => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    };
    command.process_group(0);
    command
}

/// The process group a wrapped server leads (see [`command`]); dropping this SIGKILLs every
/// process still in it: the server's children (`npx`'s `node`, a shell wrapper's program),
/// which would otherwise outlive the server, one group per start attempt. A child that
/// left the group (`setsid`, `setpgid`) is not reached.
pub(super) struct ProcessGroup(Option<nix::unistd::Pid>);

impl ProcessGroup {
    /// The group led by the process `pid` (`None`: a process already reaped, no group).
    pub(super) fn led_by(pid: Option<u32>) -> Self {
        Self(
            pid.and_then(|p| i32::try_from(p).ok())
                .map(nix::unistd::Pid::from_raw),
        )
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // A group's id stays taken while any process is in it, so after the leader was
        // reaped this reaches only its leftover members (ESRCH when none are left).
        if let Some(group) = self.0 {
            let _ = nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_name_is_found_on_the_path_and_a_slashed_one_from_the_working_directory() {
        let sh = resolve(Path::new("sh"), Some("/nonexistent:/bin"), Path::new("/"));
        assert_eq!(sh.as_deref(), Some(Path::new("/bin/sh")));
        assert_eq!(
            resolve(Path::new("no-such-x7"), Some("/bin"), Path::new("/")),
            None
        );
        let rel = resolve(Path::new("./sh"), None, Path::new("/bin"));
        assert_eq!(rel.as_deref(), Some(Path::new("/bin/./sh")));
        assert_eq!(resolve(Path::new("./sh"), None, Path::new("/")), None);
    }
}
