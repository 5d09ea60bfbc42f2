//! Stage 2: new namespaces, with the sandbox's first process as pid 1 of its pid namespace.
//!
//! Why one clone(2) with every `CLONE_NEW*` flag rather than unshare(2) + fork(2): the outer
//! launcher stays in the initial user namespace, so it can still write the child's uid/gid
//! maps when the caller is root (a process that unshared its own user namespace has no
//! CAP_SETUID in the parent; user_namespaces(7), "Defining user and group ID mappings"), and
//! `CLONE_NEWPID` on clone makes the child pid 1 directly, with no middle process. The child
//! execs the program as pid 1: when it exits, or is killed with the outer launcher, the kernel
//! kills every other process of the pid namespace (pid_namespaces(7), "The namespace init
//! process"), so nothing of the sandbox survives the run.
//!
//! Lifetime: the outer launcher gets SIGKILL when the host thread that spawned it exits
//! (PR_SET_PDEATHSIG, prctl(2)), and the child gets SIGKILL when the outer launcher exits.
//! Each death signal is re-checked after it is armed (getppid() for the outer one, a pipe for
//! the child, since pid 1 of a new pid namespace sees a parent pid of 0).

use std::os::fd::OwnedFd;

use crate::sys::{self, Cloned, Exit};

/// The namespaces every sandbox gets: user, mount, pid, net, ipc, uts, cgroup.
pub const FLAGS: libc::c_int = libc::CLONE_NEWUSER
    | libc::CLONE_NEWNS
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWCGROUP;

/// Where users can find out how to enable user namespaces.
const USERNS_HINT: &str = "unprivileged user namespaces may be disabled \
    (sysctl kernel.unprivileged_userns_clone, user.max_user_namespaces, or AppArmor's \
    kernel.apparmor_restrict_unprivileged_userns); see README 'Host setup'";

/// Creating or supervising the sandbox process failed.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// prctl(PR_SET_PDEATHSIG) failed.
    #[error("failed to arm the parent death signal: {0}")]
    DeathSignal(#[source] std::io::Error),
    /// Our parent died before the death signal was armed.
    #[error("failed to start: the parent process exited before the launcher was ready")]
    ParentGone,
    /// pipe2(2) for the start handshake failed.
    #[error("failed to create the start pipe: {0}")]
    Pipe(#[source] std::io::Error),
    /// clone(2) with the namespace flags failed.
    #[error("failed to clone into new user, mount, pid, net, ipc, uts and cgroup namespaces: {0}; {hint}", hint = USERNS_HINT)]
    Clone(#[source] std::io::Error),
    /// Telling the child to go on failed.
    #[error("failed to release the sandbox process: {0}")]
    Release(#[source] std::io::Error),
    /// The outer launcher went away before releasing the child.
    #[error("failed to start: the outer launcher exited before writing the id maps")]
    NotReleased,
    /// waitpid(2) failed.
    #[error("failed to wait for the sandbox process: {0}")]
    Wait(#[source] std::io::Error),
}

/// Arms SIGKILL for when our parent (the host's spawning thread) exits, then checks that it
/// has not already exited. Call first thing in the outer launcher.
pub fn die_with_parent() -> Result<(), NamespaceError> {
    let parent = sys::parent_pid();
    sys::set_parent_death_signal(libc::SIGKILL).map_err(NamespaceError::DeathSignal)?;
    if sys::parent_pid() != parent {
        return Err(NamespaceError::ParentGone);
    }
    Ok(())
}

/// Which side of the clone this process is on.
pub enum Side {
    /// The outer launcher, still in the initial namespaces.
    Outer(Sandbox),
    /// The sandbox process: pid 1 in fresh namespaces, waiting to be released.
    Inner(Gate),
}

/// The outer launcher's handle on the sandbox process.
pub struct Sandbox {
    pid: libc::pid_t,
    release: OwnedFd,
}

/// The sandbox process's end of the start handshake.
pub struct Gate {
    released: OwnedFd,
}

/// clone(2) with [`FLAGS`]. The child arms SIGKILL for its parent's death before returning.
///
/// Errors: `EPERM`/`ENOSPC`/`EINVAL` when user namespaces are not available to this user
/// (the message carries a hint), `EAGAIN` when out of processes.
pub fn clone_sandbox() -> Result<Side, NamespaceError> {
    let (released, release) = sys::pipe().map_err(NamespaceError::Pipe)?;
    match sys::clone_process(FLAGS).map_err(NamespaceError::Clone)? {
        Cloned::Parent { child } => {
            drop(released);
            Ok(Side::Outer(Sandbox {
                pid: child,
                release,
            }))
        }
        Cloned::Child => {
            // Keep only the read end: EOF on it then means the outer launcher is gone.
            drop(release);
            sys::set_parent_death_signal(libc::SIGKILL).map_err(NamespaceError::DeathSignal)?;
            Ok(Side::Inner(Gate { released }))
        }
    }
}

impl Sandbox {
    /// The sandbox process's pid, as seen from the outer launcher.
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    /// Lets the sandbox process go on (after its id maps are written).
    pub fn release(&self) -> Result<(), NamespaceError> {
        sys::write_byte(&self.release, b'1').map_err(NamespaceError::Release)
    }

    /// Waits for the sandbox process to end. The release pipe stays open until then: the
    /// child's last liveness check reads it.
    pub fn wait(self) -> Result<Exit, NamespaceError> {
        sys::wait_for(self.pid).map_err(NamespaceError::Wait)
    }
}

impl Gate {
    /// Blocks until the outer launcher releases us. If it died first (EOF), this is an
    /// error; its death signal may not have reached us if it died before we armed ours.
    pub fn wait_for_release(&self) -> Result<(), NamespaceError> {
        match sys::read_byte(&self.released) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(NamespaceError::NotReleased),
            Err(e) => Err(NamespaceError::Release(e)),
        }
    }

    /// Re-arms the death signal (a change of effective uid/gid clears it, see
    /// PR_SET_PDEATHSIG in prctl(2)) and checks the outer launcher is still alive. Consumes
    /// the gate: its descriptor must be closed before the descriptor sweep.
    pub fn rearm_after_credentials_change(self) -> Result<(), NamespaceError> {
        sys::set_parent_death_signal(libc::SIGKILL).map_err(NamespaceError::DeathSignal)?;
        match sys::pipe_writers_gone(&self.released) {
            Ok(false) => Ok(()),
            Ok(true) => Err(NamespaceError::ParentGone),
            Err(e) => Err(NamespaceError::DeathSignal(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{in_child, require_user_namespaces};

    #[test]
    fn the_sandbox_process_is_pid_1_in_new_namespaces() {
        if !require_user_namespaces() {
            return;
        }
        let host_net = std::fs::read_link("/proc/self/ns/net").unwrap();
        let exit = in_child(move || match clone_sandbox().unwrap() {
            Side::Outer(sandbox) => {
                sandbox.release().unwrap();
                sandbox.wait().unwrap().as_status()
            }
            Side::Inner(gate) => {
                gate.wait_for_release().unwrap();
                let net = std::fs::read_link("/proc/self/ns/net").unwrap();
                // getpid() is 1 only in a new pid namespace; the net link differs only in a
                // new network namespace.
                match (sys::own_pid(), net != host_net) {
                    (1, true) => 0,
                    (1, false) => 2,
                    _ => 3,
                }
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn the_sandbox_process_dies_when_the_outer_launcher_is_killed() {
        if !require_user_namespaces() {
            return;
        }
        let (report_r, report_w) = sys::pipe().unwrap();
        let exit = in_child(|| match clone_sandbox().unwrap() {
            Side::Outer(sandbox) => {
                sandbox.release().unwrap();
                // Die abruptly while the sandbox process sleeps.
                std::thread::sleep(std::time::Duration::from_millis(100));
                sys::exit_now(9)
            }
            Side::Inner(gate) => {
                gate.wait_for_release().unwrap();
                std::thread::sleep(std::time::Duration::from_secs(5));
                // Only reached if the death signal did not kill us.
                sys::write_byte(&report_w, b'x').unwrap();
                0
            }
        });
        assert_eq!(exit, Exit::Code(9));
        drop(report_w);
        // EOF (no byte) means every holder of the write end, the sandbox included, is gone
        // without writing: it was killed before its sleep ended.
        assert_eq!(sys::read_byte(&report_r).unwrap(), None);
    }
}
