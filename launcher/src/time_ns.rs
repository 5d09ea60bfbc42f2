//! Stage 3b: a time namespace of the sandbox's own, in which `CLOCK_MONOTONIC` and
//! `CLOCK_BOOTTIME` start near zero.
//!
//! Both clocks count from the host's boot, so without this the code reads the host's uptime
//! to the microsecond (and, from their difference, how long the host was suspended). The
//! sandbox process (pid 1), still holding every capability in its user namespace, unshares
//! a time namespace, writes offsets to `/proc/self/timens_offsets` (only possible before any
//! process is in the namespace) and joins it with setns(2); its children are born in it.
//! See time_namespaces(7). The offsets put zero at the whole second of its own start: a
//! process's start time in `/proc/PID/stat` is read through the reader's namespace, and pid 1
//! started before the namespace existed, so a zero at the unshare (later, by seconds for a
//! pooled sandbox started at a low CPU weight) made pid 1's start negative, which proc(5)
//! shows wrapped to about 2^64 ns. This runs
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

/// The offsets file's content that puts both clocks' zero at `started`, the whole second of
/// `CLOCK_BOOTTIME` in which pid 1 started, given the whole seconds `monotonic` and
/// `boottime` read now: "<clock> <seconds> <nanoseconds>" per line, time_namespaces(7).
/// The monotonic clock is moved back by the same whole seconds since `started` (never below
/// its own zero), so both read about the sandbox's age.
pub fn offsets(monotonic: i64, boottime: i64, started: i64) -> String {
    let started = started.clamp(0, boottime);
    let monotonic_then = (monotonic - (boottime - started)).max(0);
    format!("monotonic {} 0\nboottime {} 0\n", -monotonic_then, -started)
}

/// The whole second of `CLOCK_BOOTTIME` in which this process started: `/proc/self/stat`
/// field 22 (clock ticks since boot, proc(5)) over the ticks per second.
fn own_start_seconds() -> std::io::Result<i64> {
    let stat = std::fs::read_to_string("/proc/self/stat")?;
    start_seconds(&stat, sys::clock_ticks_per_second()?)
        .ok_or_else(|| std::io::Error::other("no start time in /proc/self/stat"))
}

/// Field 22 of a `/proc/PID/stat` line over `hz`, in whole seconds. The fields are counted
/// after the last `)`, which ends the command name (itself free to hold spaces and `)`).
fn start_seconds(stat: &str, hz: i64) -> Option<i64> {
    let ticks: i64 = stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(19)?
        .parse()
        .ok()?;
    (hz > 0).then(|| ticks / hz)
}

/// Unshares a time namespace, sets its offsets and joins it. Must run single-threaded, with
/// CAP_SYS_ADMIN and CAP_SYS_TIME in the caller's user namespace (before stage 8).
pub fn enter_own() -> Result<Clocks, TimeNsError> {
    match sys::unshare(libc::CLONE_NEWTIME) {
        Ok(()) => {}
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(Clocks::Host),
        Err(e) => return Err(TimeNsError::Unshare(e)),
    }
    // The clocks only grow between this read and the write, and pid 1 started before both,
    // so with these offsets they stay >= 0 there, as the kernel requires (ERANGE otherwise).
    let started = own_start_seconds().map_err(TimeNsError::Offsets)?;
    let monotonic = sys::clock_seconds(libc::CLOCK_MONOTONIC).map_err(TimeNsError::Offsets)?;
    let boottime = sys::clock_seconds(libc::CLOCK_BOOTTIME).map_err(TimeNsError::Offsets)?;
    std::fs::write(OFFSETS, offsets(monotonic, boottime, started)).map_err(TimeNsError::Offsets)?;
    let ns = std::fs::File::open(FOR_CHILDREN).map_err(TimeNsError::Join)?;
    sys::setns(&ns, libc::CLONE_NEWTIME).map_err(TimeNsError::Join)?;
    Ok(Clocks::Own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::{Cloned, Exit};
    use crate::testutil::{in_child, in_user_namespace, require_user_namespaces};

    #[test]
    fn the_offsets_put_both_clocks_zero_at_the_second_pid_1_started() {
        // Pid 1 started at boot second 12343, two seconds before the clocks were read.
        assert_eq!(
            offsets(12006, 12345, 12343),
            "monotonic -12004 0\nboottime -12343 0\n"
        );
        // Started this very second; a start after the read or before boot is clamped.
        assert_eq!(offsets(5, 9, 9), "monotonic -5 0\nboottime -9 0\n");
        assert_eq!(offsets(5, 9, 10), "monotonic -5 0\nboottime -9 0\n");
        assert_eq!(offsets(1, 9, 0), "monotonic 0 0\nboottime 0 0\n");
    }

    #[test]
    fn the_start_time_is_read_after_a_command_name_holding_spaces_and_parentheses() {
        let stat = "7 (a) b) S 1 7 7 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 0 0";
        assert_eq!(start_seconds(stat, 100), Some(123));
        assert_eq!(start_seconds("7 (x) S 1", 100), None);
    }

    /// The reason for the offsets: pid 1 starts before its time namespace exists (here two
    /// seconds before), and its start time, read from inside, must still be within the
    /// namespace's first second, not negative (wrapped to about 2^64 ns by proc(5)).
    #[test]
    fn pid_1_started_seconds_before_its_time_namespace_reads_a_start_within_its_first_second() {
        if !require_user_namespaces() {
            return;
        }
        let exit = in_child(|| {
            std::thread::sleep(std::time::Duration::from_secs(2));
            in_user_namespace();
            if enter_own().expect("a time namespace") == Clocks::Host {
                return 0;
            }
            let pid1 = sys::own_pid();
            match sys::fork().expect("fork") {
                Cloned::Child => {
                    // A child reads through the new namespace, as the code does.
                    let stat = std::fs::read_to_string(format!("/proc/{pid1}/stat")).unwrap();
                    let ticks: u64 = stat
                        .rsplit_once(')')
                        .unwrap()
                        .1
                        .split_whitespace()
                        .nth(19)
                        .unwrap()
                        .parse()
                        .unwrap();
                    let hz = sys::clock_ticks_per_second().unwrap() as u64;
                    sys::exit_now(if ticks < hz { 0 } else { 1 })
                }
                Cloned::Parent { child } => match sys::wait_for(child).expect("waitpid") {
                    Exit::Code(code) => code,
                    Exit::Signal(_) => 2,
                },
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}
