//! The sandbox's clocks: the monotonic and boot clocks tell nothing of the host's uptime.
//!
//! Tests: `a_native_runs_boot_and_monotonic_clocks_start_near_zero`.

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
