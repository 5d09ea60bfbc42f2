//! Stage 7: close every descriptor except 0, 1 and 2 (the protocol pipes and stderr).
//!
//! close_range(2) from 3 to the top, so nothing the launcher or the host leaked (even a
//! descriptor without O_CLOEXEC) reaches the program.

use std::os::fd::RawFd;

use crate::sys;

/// The first descriptor that is closed.
pub const FIRST_CLOSED: u32 = 3;

/// close_range(2) failed.
#[derive(Debug, thiserror::Error)]
pub enum FdError {
    /// close_range(3, ~0) failed (Linux < 5.9 lacks it: ENOSYS).
    #[error("failed to close descriptors from {FIRST_CLOSED} up (close_range): {0}")]
    CloseRange(#[source] std::io::Error),
    /// Replacing the outer launcher's stdin/stdout with /dev/null failed.
    #[error("failed to hand the protocol pipes over to the sandbox: {0}")]
    HandOver(#[source] std::io::Error),
}

/// Closes every descriptor from 3 up except `keep` (the launcher's report socket, which is
/// close-on-exec and so never reaches the program). Any other `OwnedFd` still alive above 2
/// must not be used or dropped afterwards (callers consume theirs before this stage).
pub fn close_all_but_stdio(keep: Option<RawFd>) -> Result<(), FdError> {
    match keep.and_then(|fd| u32::try_from(fd).ok()) {
        Some(keep) if keep >= FIRST_CLOSED => {
            if keep > FIRST_CLOSED {
                sys::close_range(FIRST_CLOSED, keep - 1).map_err(FdError::CloseRange)?;
            }
            match keep.checked_add(1) {
                Some(next) => sys::close_from(next).map_err(FdError::CloseRange),
                None => Ok(()),
            }
        }
        _ => sys::close_from(FIRST_CLOSED).map_err(FdError::CloseRange),
    }
}

/// Marks every descriptor from 3 up close-on-exec, so that no child this process starts
/// (a wrapped server, a launcher, the docker client) inherits one it was not handed on
/// purpose. For `serve` and `exec` at their start: descriptors their own parent leaked
/// without O_CLOEXEC (a pipe, a socket, a file) stay usable here but reach no child.
/// Descriptors a child is meant to get are set up for it at its spawn (`pass_fd`, stdio).
///
/// close_range(2) with CLOSE_RANGE_CLOEXEC; where the kernel lacks that flag (EINVAL,
/// Linux 5.9 and 5.10) or close_range itself (ENOSYS), fcntl(F_SETFD) on each descriptor
/// listed in /proc/self/fd.
///
/// # Errors
/// The error of close_range other than EINVAL and ENOSYS, of reading /proc/self/fd, or
/// of an fcntl other than EBADF (the listing's own descriptor, closed once it is read).
pub fn close_on_exec_above_stdio() -> std::io::Result<()> {
    match sys::cloexec_from(FIRST_CLOSED) {
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL | libc::ENOSYS)) => {}
        done => return done,
    }
    let open: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd: &RawFd| fd >= FIRST_CLOSED as RawFd)
        .collect();
    for fd in open {
        match sys::set_cloexec(fd) {
            Err(e) if e.raw_os_error() != Some(libc::EBADF) => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// In the outer launcher, after the clone: point fds 0 and 1 at /dev/null. The sandbox
/// holds its own copies of the protocol pipes, so the host sees end-of-file as soon as the
/// sandbox closes them, not only when the outer launcher exits.
pub fn hand_over_protocol_pipes() -> Result<(), FdError> {
    [0, 1]
        .into_iter()
        .try_for_each(sys::point_at_dev_null)
        .map_err(FdError::HandOver)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::in_child;
    use std::os::fd::IntoRawFd;

    #[test]
    fn descriptors_other_than_stdio_and_the_report_socket_are_closed_before_exec() {
        let exit = in_child(|| {
            // A leaked descriptor without O_CLOEXEC, as a careless host might pass on.
            let leaked = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
            assert!(sys::is_open(leaked));
            let kept = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
            let above = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
            close_all_but_stdio(Some(kept)).unwrap();
            match (
                sys::is_open(leaked),
                sys::is_open(above),
                sys::is_open(kept),
                (0..3).all(sys::is_open),
            ) {
                (false, false, true, true) => 0,
                _ => 1,
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn descriptors_above_stdio_are_marked_close_on_exec_and_stay_open() {
        let exit = in_child(|| {
            // A descriptor a careless parent left without O_CLOEXEC.
            let leaked = std::fs::File::open("/dev/null").unwrap().into_raw_fd();
            sys::clear_cloexec(leaked).unwrap();
            let before = sys::is_cloexec(leaked);
            let stderr = sys::is_cloexec(2);
            close_on_exec_above_stdio().unwrap();
            match (
                before,
                sys::is_cloexec(leaked),
                sys::is_open(leaked),
                sys::is_cloexec(2) == stderr,
            ) {
                (false, true, true, true) => 0,
                _ => 1,
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}
