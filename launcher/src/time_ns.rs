//! Stage 3b: a time namespace of the sandbox's own, in which `CLOCK_MONOTONIC` and
//! `CLOCK_BOOTTIME` start near zero.
//!
//! Both clocks count from the host's boot, so without this the code reads the host's uptime
//! to the microsecond (and, from their difference, how long the host was suspended). The
//! sandbox process, still holding every capability in its user namespace, unshares a time
//! namespace, writes offsets of minus the clocks' current whole seconds to
//! `/proc/self/timens_offsets` (only possible before any process is in the namespace) and
//! joins it with setns(2); its children are born in it. See time_namespaces(7). This runs
//! before stage 4's uid change: that change makes the process non-dumpable, after which its
//! `/proc/self` files belong to host root and the write is refused (EACCES). A kernel
//! built without time namespaces (before 5.6, or `CONFIG_TIME_NS` off) answers unshare with
//! EINVAL: the sandbox then keeps the host's clocks, as README says.

use crate::sys;

/// Where the namespace's offsets are written (the namespace for the caller's children).
const OFFSETS: &str = "/proc/self/timens_offsets";
/// The namespace the caller's children get, which the caller joins.
const FOR_CHILDREN: &str = "/proc/self/ns/time_for_children";

/// Making or joining the time namespace failed.
#[derive(Debug, thiserror::Error)]
pub enum TimeNsError {
    /// unshare(CLONE_NEWTIME) failed with something other than EINVAL.
    #[error("failed to unshare a time namespace: {0}")]
    Unshare(#[source] std::io::Error),
    /// Reading a clock or writing the offsets failed.
    #[error("failed to set the time namespace's offsets: {0}")]
    Offsets(#[source] std::io::Error),
    /// Opening or joining the namespace failed.
    #[error("failed to join the time namespace: {0}")]
    Join(#[source] std::io::Error),
}

/// Whether the sandbox got a time namespace of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clocks {
    /// Monotonic and boot time start near zero (below one second) at this call.
    Own,
    /// The kernel has no time namespaces: the host's clocks.
    Host,
}

/// The offsets file's content that puts `monotonic` and `boottime` (whole seconds they read
/// now) back to zero: "<clock> <seconds> <nanoseconds>" per line, time_namespaces(7).
pub fn offsets(monotonic: i64, boottime: i64) -> String {
    format!("monotonic {} 0\nboottime {} 0\n", -monotonic, -boottime)
}

/// Unshares a time namespace, sets its offsets and joins it. Must run single-threaded, with
/// CAP_SYS_ADMIN and CAP_SYS_TIME in the caller's user namespace (before stage 8).
pub fn enter_own() -> Result<Clocks, TimeNsError> {
    match sys::unshare(libc::CLONE_NEWTIME) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(Clocks::Host),
        Err(e) => return Err(TimeNsError::Unshare(e)),
    }
    // The clocks only grow between this read and the write, so they stay >= 0 there, as
    // the kernel requires (ERANGE otherwise).
    let monotonic = sys::clock_seconds(libc::CLOCK_MONOTONIC).map_err(TimeNsError::Offsets)?;
    let boottime = sys::clock_seconds(libc::CLOCK_BOOTTIME).map_err(TimeNsError::Offsets)?;
    std::fs::write(OFFSETS, offsets(monotonic, boottime)).map_err(TimeNsError::Offsets)?;
    let ns = std::fs::File::open(FOR_CHILDREN).map_err(TimeNsError::Join)?;
    sys::setns(&ns, libc::CLONE_NEWTIME).map_err(TimeNsError::Join)?;
    Ok(Clocks::Own)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_offsets_take_each_clocks_whole_seconds_back_to_zero() {
        assert_eq!(
            offsets(12006, 12345),
            "monotonic -12006 0\nboottime -12345 0\n"
        );
    }
}
