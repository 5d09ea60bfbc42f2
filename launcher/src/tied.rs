//! `mcp-code-mode __tied PARENT_PID PROGRAM [ARG...]`: runs PROGRAM (a wrapped MCP server)
//! so that it dies with `serve`.
//!
//! The process arms SIGKILL for the death of the thread that spawned it
//! (`prctl(PR_SET_PDEATHSIG)`, kept across execve for a program without set-user-ID bits),
//! checks that its parent is still PARENT_PID (`serve` may have died before the signal was
//! armed: the process was then reparented), and execs PROGRAM in place, with the
//! environment, working directory and descriptors it was given. `serve` spawns its wrapped
//! servers from its runtime's thread, the process's main thread, so the signal comes when
//! `serve` ends however it ends (SIGKILL too), even for a server that ignores the end of its
//! input and SIGTERM.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;

use crate::sys;

/// The subcommand (the first argument) that runs [`run_from_args`].
pub const SUBCOMMAND: &str = "__tied";

/// Exit status when the arguments are wrong or the death signal cannot be armed.
pub const SETUP_FAILED: i32 = 125;

/// Exit status when `serve` was gone before the death signal was armed.
pub const PARENT_GONE: i32 = 124;

/// Exit status when PROGRAM cannot be executed (as a shell's: 126 for a program that is
/// there but cannot run, 127 for one that is not there).
pub fn exec_failed_status(error: &std::io::Error) -> i32 {
    if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Parses `PARENT_PID PROGRAM [ARG...]` (the arguments after [`SUBCOMMAND`]), arms the death
/// signal and execs PROGRAM. Returns only on failure, with the exit status to use after one
/// line `mcp-code-mode: failed to ...` on stderr: [`SETUP_FAILED`], [`PARENT_GONE`] or
/// [`exec_failed_status`].
pub fn run_from_args(mut args: impl Iterator<Item = OsString>) -> i32 {
    let parent = args
        .next()
        .and_then(|p| p.to_str().and_then(|p| p.parse::<libc::pid_t>().ok()));
    let (Some(parent), Some(program)) = (parent, args.next()) else {
        eprintln!(
            "mcp-code-mode: failed to start a wrapped server: usage: {SUBCOMMAND} PARENT_PID PROGRAM [ARG...]"
        );
        return SETUP_FAILED;
    };
    if let Err(e) = sys::set_parent_death_signal(libc::SIGKILL) {
        eprintln!("mcp-code-mode: failed to arm the death signal of a wrapped server: {e}");
        return SETUP_FAILED;
    }
    if sys::parent_pid() != parent {
        eprintln!(
            "mcp-code-mode: failed to start a wrapped server: serve (pid {parent}) has ended"
        );
        return PARENT_GONE;
    }
    let error = std::process::Command::new(&program).args(args).exec();
    eprintln!(
        "mcp-code-mode: failed to start the wrapped server {:?}: {error}",
        program
    );
    exec_failed_status(&error)
}
