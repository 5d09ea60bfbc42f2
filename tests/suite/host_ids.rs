//! The host ids of a root caller's native sandboxes tell the code nothing of the host.
//!
//! Tests: `a_root_callers_sandbox_host_id_does_not_follow_its_host_pid`.

use std::time::Duration;

use launcher::idmap::ROOT_CALLER_BASE;

use super::common::{backend_ready, exec, unprivileged};

/// The code reads its outside id from its own uid_map while it lives a few seconds.
const OWN_ID: &str = r#"
import time
outside = int(open("/proc/self/uid_map").read().split()[1])
time.sleep(4)
print(outside)
"#;

/// Host processes whose real uid lies in the root caller's sandbox range: (pid, uid).
fn sandbox_processes() -> Vec<(u32, u32)> {
    let range = ROOT_CALLER_BASE..ROOT_CALLER_BASE + (1 << 22);
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let uid: u32 = status
            .lines()
            .find(|l| l.starts_with("Uid:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        range.contains(&uid).then_some((pid, uid))
    })
    .collect()
}

/// ISO, host pid: a root caller's sandbox runs as a host id of its own (so per-user kernel
/// counters are its own), and that id is `ROOT_CALLER_BASE` plus a keyed permutation of its
/// host pid, not the pid itself: with `base + pid`, the code read its host pid (which the pid
/// namespace hides) from /proc/self/uid_map, and between two runs how many processes the
/// whole host started. docs/threat-model.md.
#[test]
fn a_root_callers_sandbox_host_id_does_not_follow_its_host_pid() {
    // Only a root caller's sandbox has a host id that is not the caller's own.
    if !backend_ready("native") || unprivileged() {
        return;
    }
    let mut seen = Vec::new();
    let (run, seen) = std::thread::scope(|s| {
        let run = s.spawn(|| exec(OWN_ID, &[]));
        while !run.is_finished() {
            seen.extend(sandbox_processes());
            std::thread::sleep(Duration::from_millis(200));
        }
        (run.join().unwrap(), seen)
    });
    let id: u32 = run
        .printed()
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("no id printed: {}", run.stderr));
    assert!(
        (ROOT_CALLER_BASE..ROOT_CALLER_BASE + (1 << 22)).contains(&id),
        "the sandbox's host id {id} is outside the root caller range"
    );
    let own: Vec<_> = seen.iter().filter(|(_, uid)| *uid == id).collect();
    assert!(
        !own.is_empty(),
        "no host process ran as the sandbox's id {id} while it slept"
    );
    for (pid, uid) in own {
        assert_ne!(
            *uid,
            ROOT_CALLER_BASE + pid,
            "the sandbox's host id is base + its host pid {pid}"
        );
    }
}
