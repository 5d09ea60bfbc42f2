//! The sandbox's clocks: the monotonic and boot clocks tell nothing of the host's uptime.
//!
//! Tests: `a_native_runs_boot_and_monotonic_clocks_start_near_zero`,
//! `a_native_sandboxs_pid_1_started_within_its_clocks_first_second` (and its pooled twin in
//! pool.rs).

use super::common::{backend_ready, exec, require};

/// The code reads both clocks that count from the host's boot.
const CLOCKS: &str = r#"
import time
print(time.clock_gettime(time.CLOCK_BOOTTIME), time.clock_gettime(time.CLOCK_MONOTONIC))
"#;

/// ENV, host uptime: natively the sandbox has a time namespace of its own whose
/// `CLOCK_BOOTTIME` and `CLOCK_MONOTONIC` start near zero (launcher/src/time_ns.rs), so a
/// run reads how long its sandbox has lived, not the host's uptime (without the namespace
/// both read the host's /proc/uptime to the microsecond). Docker 20.10 has no time
/// namespace option: docs/threat-model.md.
#[test]
fn a_native_runs_boot_and_monotonic_clocks_start_near_zero() {
    if !backend_ready("native") {
        return;
    }
    let host_uptime = || -> f64 {
        let text = std::fs::read_to_string("/proc/uptime").expect("read /proc/uptime");
        text.split_whitespace().next().unwrap().parse().unwrap()
    };
    if !require(
        host_uptime() > 600.0,
        "the host has been up under 10 minutes: a sandbox's clocks cannot be told from its",
    ) {
        return;
    }
    let run = exec(CLOCKS, &[]);
    let host = host_uptime();
    let clocks: Vec<f64> = run
        .printed()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect();
    assert_eq!(clocks.len(), 2, "{}", run.stderr);
    for clock in clocks {
        // A sandbox lives well under a minute before its code runs; the host, far longer.
        assert!(
            clock < 60.0,
            "a clock read {clock} s inside, the host's uptime is {host} s"
        );
    }
}

/// Prints the start time of the sandbox's pid 1 (`/proc/1/stat` field 22, clock ticks since
/// the boot clock's zero, proc(5)) and the ticks per second.
pub(super) const PID_1_START: &str = "import os\nprint(open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19], os.sysconf('SC_CLK_TCK'))";

/// Whether `printed` (from [`PID_1_START`]) says pid 1 started within the first second of
/// its clocks: not before zero, which proc(5) shows wrapped to about 2^64 ns.
pub(super) fn started_in_the_first_second(printed: &str) -> bool {
    let numbers: Vec<u64> = printed
        .split_whitespace()
        .map(|v| v.parse().expect("a number"))
        .collect();
    numbers.len() == 2 && numbers[0] < numbers[1]
}

/// ENV, pid 1's start time: the sandbox's pid 1 exists before its time namespace does, so the
/// launcher puts the namespace's zero at the second pid 1 started (launcher/src/time_ns.rs);
/// a zero at the namespace's making read pid 1's start as negative whenever the two fell in
/// different seconds.
#[test]
fn a_native_sandboxs_pid_1_started_within_its_clocks_first_second() {
    if !backend_ready("native") {
        return;
    }
    let run = exec(PID_1_START, &[]);
    assert!(started_in_the_first_second(run.printed()), "{run:?}");
}
