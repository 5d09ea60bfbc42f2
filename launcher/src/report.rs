//! The launcher's report to the host: a channel the program never holds.
//!
//! The host makes a `SOCK_SEQPACKET` socket pair ([`channel`]) and hands one end to the
//! launcher as `--report-fd N` ([`pass_to_child`]). The launcher marks it close-on-exec first
//! thing, keeps it through the descriptor sweep, and sends at most two kinds of message:
//!
//! - `started <pid>` with a pidfd of the sandbox's pid 1 attached (SCM_RIGHTS), from the
//!   outer launcher after the clone and before the sandbox is released, so before any of
//!   the program's code runs. With it the host ends the sandbox itself (killing pid 1 ends
//!   its whole pid namespace, pid_namespaces(7)), whatever the code did to its own death
//!   signal, session or process group. A pidfd names one process for as long as it is open,
//!   so a reused pid can never be hit (pidfd_open(2)).
//! - a [`LaunchFailure`] when a stage fails, from either side (its own text encoding).
//!
//! At execve the socket closes (close-on-exec), so nothing the program writes, on any
//! descriptor, can pass for a launcher failure: the host believes only this channel.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::failure::LaunchFailure;
use crate::sys;

/// The descriptor number the host gives the report socket in the launcher.
pub const REPORT_FD: RawFd = 3;

/// Longest message the host reads, in bytes; a longer one is cut.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// Prefix of the message that carries the sandbox's pidfd.
const STARTED: &str = "started ";

/// One message from the launcher, as the host reads it.
#[derive(Debug)]
pub enum Message {
    /// The sandbox's pid 1 exists; `pid` is its pid in the host's pid namespace and `pidfd`
    /// names it (close-on-exec). The program has not run yet.
    Started { pid: i32, pidfd: OwnedFd },
    /// A stage failed (untrusted bytes never reach this channel, but the host escapes the
    /// message before printing anyway). A message of neither shape is read as a failure of
    /// [`crate::Stage::Report`].
    Failed(LaunchFailure),
}

/// A new report channel: (the host's end, the launcher's end). Both are close-on-exec.
///
/// # Errors
/// socketpair(2)'s error (EMFILE, ENFILE).
pub fn channel() -> io::Result<(OwnedFd, OwnedFd)> {
    sys::seqpacket_pair()
}

/// Makes `command` (the launcher's) receive `launcher_end` as [`REPORT_FD`]; the caller adds
/// `--report-fd 3`. The parent's copy closes when `command` is dropped.
pub fn pass_to_child(command: &mut std::process::Command, launcher_end: OwnedFd) {
    sys::pass_fd(command, launcher_end, REPORT_FD);
}

/// Reads the next message from the host's end: `Ok(None)` at end of file (every launcher
/// process has exited or exec'd). A message that is neither shape is read as a failure.
///
/// # Errors
/// recvmsg(2)'s error (EAGAIN/EWOULDBLOCK after a receive timeout set on the socket).
pub fn receive(host_end: &OwnedFd) -> io::Result<Option<Message>> {
    let mut buf = [0u8; MAX_MESSAGE_BYTES];
    let (n, fd) = sys::recv_with_fd(host_end, &mut buf)?;
    if n == 0 && fd.is_none() {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&buf[..n]).into_owned();
    let pid = text
        .strip_prefix(STARTED)
        .and_then(|p| p.trim().parse::<i32>().ok());
    Ok(Some(match (pid, fd) {
        (Some(pid), Some(pidfd)) => Message::Started { pid, pidfd },
        _ => Message::Failed(
            LaunchFailure::decode(&text).unwrap_or_else(|| LaunchFailure::unreadable(&text)),
        ),
    }))
}

/// Kills the process `pidfd` names with SIGKILL. Killing a sandbox's pid 1 ends every
/// process of its pid namespace. ESRCH (already gone) is success.
///
/// # Errors
/// pidfd_send_signal(2)'s other errors (EPERM, EBADF).
pub fn kill(pidfd: &OwnedFd) -> io::Result<()> {
    match sys::pidfd_kill(pidfd) {
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        other => other,
    }
}

/// The launcher's side of the channel; does nothing without `--report-fd`.
#[derive(Debug, Default)]
pub struct Reporter {
    socket: Option<OwnedFd>,
}

impl Reporter {
    /// Takes over descriptor `fd` (from `--report-fd`) and marks it close-on-exec, so the
    /// program never inherits it. `None` gives a reporter that reports nothing.
    ///
    /// # Errors
    /// EBADF when `fd` is not open.
    pub fn adopt(fd: Option<RawFd>) -> io::Result<Self> {
        let Some(fd) = fd else {
            return Ok(Self::default());
        };
        sys::set_cloexec(fd)?;
        Ok(Self {
            socket: Some(sys::own_fd(fd)),
        })
    }

    /// The descriptor the sweep before exec must keep, if any.
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.socket.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Whether a host is listening (`--report-fd` was given).
    pub fn is_active(&self) -> bool {
        self.socket.is_some()
    }

    /// Sends `started <pid>` with a pidfd of `pid` (the outer launcher's unreaped child, so
    /// the pid cannot have been reused).
    ///
    /// # Errors
    /// pidfd_open(2) or sendmsg(2)'s error.
    pub fn started(&self, pid: i32) -> io::Result<()> {
        let Some(socket) = &self.socket else {
            return Ok(());
        };
        let pidfd = sys::pidfd_open(pid)?;
        sys::send_with_fd(socket, format!("{STARTED}{pid}").as_bytes(), Some(&pidfd))
    }

    /// Sends a failure. Errors are ignored: the launcher exits 125 either way.
    pub fn failed(&self, failure: &LaunchFailure) {
        if let Some(socket) = &self.socket {
            let text = failure.encode();
            let bytes = text.as_bytes();
            let _ = sys::send_with_fd(socket, &bytes[..bytes.len().min(MAX_MESSAGE_BYTES)], None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{Cloned, Exit};

    #[test]
    fn a_started_message_carries_a_pidfd_that_kills_exactly_that_process() {
        let (host, launcher) = channel().unwrap();
        let reporter = Reporter {
            socket: Some(launcher),
        };
        let child = match sys::fork().unwrap() {
            Cloned::Child => {
                std::thread::sleep(std::time::Duration::from_secs(30));
                sys::exit_now(0)
            }
            Cloned::Parent { child } => child,
        };
        reporter.started(child).unwrap();
        let failure = LaunchFailure {
            stage: crate::Stage::Exec,
            errno: Some(libc::ENOENT),
            message: "failed to exec: no such file".into(),
        };
        reporter.failed(&failure);
        drop(reporter);
        let Some(Message::Started { pid, pidfd }) = receive(&host).unwrap() else {
            panic!("expected a started message");
        };
        assert_eq!(pid, child);
        kill(&pidfd).unwrap();
        assert_eq!(sys::wait_for(child).unwrap(), Exit::Signal(libc::SIGKILL));
        // Already gone: still fine.
        kill(&pidfd).unwrap();
        assert!(matches!(
            receive(&host).unwrap(),
            Some(Message::Failed(f)) if f == failure
        ));
        assert!(receive(&host).unwrap().is_none());
    }

    #[test]
    fn a_started_line_without_a_descriptor_is_not_a_start() {
        let (host, launcher) = channel().unwrap();
        sys::send_with_fd(&launcher, b"started 1", None).unwrap();
        assert!(matches!(receive(&host).unwrap(), Some(Message::Failed(_))));
    }
}
