//! The command that starts a wrapped stdio server tied to `serve`'s life: through this very
//! program's `__tied` mode (`launcher::tied`), which arms SIGKILL for `serve`'s death and
//! execs the server in place, so a server that ignores the end of its input and SIGTERM still
//! ends with a `serve` that was killed (README "Wrapped servers").

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
pub(super) fn command(program: &Path, args: &[String]) -> Command {
    let exe = std::env::current_exe().ok();
    match exe.filter(|_| TIED_MODE.load(Ordering::Relaxed)) {
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
