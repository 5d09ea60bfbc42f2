//! The warm pool's CPU priority (native, with a CPU cgroup): a pooled sandbox waits at
//! background priority, its run cgroup's CPU weight lowered (v1 `cpu.shares` 64, v2
//! `cpu.weight` 6), and the run that takes it runs at normal priority (1024, 100).
//!
//! Checked to fail with the rule taken out: without the take's raise the taken sandbox
//! spins at weight 64; without the start's lowering the idle check fails.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::common::{require, unprivileged};
use super::pool::{Served, children, ready, stdout};

/// Longest wait for the spinning run to show up on the host.
const PATIENCE: Duration = Duration::from_secs(60);

/// The file holding the CPU weight of a native sandbox's run cgroup (v1 `cpu.shares`, v2
/// `cpu.weight`), from its launcher's `--cgroup-procs` arguments; `None` without one.
fn weight_file(launcher: u32) -> Option<PathBuf> {
    let cmdline = std::fs::read(format!("/proc/{launcher}/cmdline")).ok()?;
    let args: Vec<String> = cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    args.windows(2)
        .filter(|pair| pair[0] == "--cgroup-procs")
        .filter_map(|pair| PathBuf::from(&pair[1]).parent().map(PathBuf::from))
        .flat_map(|dir| [dir.join("cpu.shares"), dir.join("cpu.weight")])
        .find(|file| file.exists())
}

fn weight(file: &Path) -> u64 {
    std::fs::read_to_string(file)
        .expect("read the CPU weight")
        .trim()
        .parse()
        .expect("a number")
}

/// CPU time (user + system, clock ticks) of `pid`, 0 when it is gone.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(") ")
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // utime and stime are fields 14 and 15 of proc(5)'s stat, 11 and 12 after the name.
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

#[test]
fn a_taken_pooled_sandbox_runs_at_normal_cpu_priority_and_idle_ones_at_background() {
    if !ready("native")
        || !require(
            !unprivileged(),
            "an unprivileged run has no CPU cgroup of its own to weigh here",
        )
    {
        return;
    }
    let mut served = Served::start("native", &["--pool", "2"]);
    served.wait_ready(2);
    let launchers: Vec<u32> = served
        .sandboxes()
        .iter()
        .map(|id| id.parse().expect("a launcher pid"))
        .collect();
    assert_eq!(launchers.len(), 2, "{launchers:?}");
    let files: Vec<PathBuf> = launchers.iter().filter_map(|l| weight_file(*l)).collect();
    if !require(
        files.len() == 2,
        "the runs have no CPU cgroup here (no cpu controller we can write)",
    ) {
        return;
    }
    let (normal, background) = if files[0].ends_with("cpu.shares") {
        (1024, 64)
    } else {
        (100, 6)
    };
    for file in &files {
        assert_eq!(weight(file), background, "an idle pooled sandbox: {file:?}");
    }

    // A run that spins on the CPU for 3 s; the sandbox it took is the one whose runner
    // (the launcher's child, the sandbox's pid 1) gathers CPU time meanwhile.
    let before: Vec<u64> = launchers
        .iter()
        .map(|l| children(*l).first().map_or(0, |r| cpu_ticks(*r)))
        .collect();
    let spin = "import time\nt = time.time()\nwhile time.time() - t < 3:\n    pass\nprint('spun')";
    {
        use std::io::Write;
        let stdin = served.stdin.as_mut().expect("connected");
        writeln!(stdin, "{}", serde_json::Value::from(spin)).expect("write the driver");
        stdin.flush().expect("flush");
    }
    let start = Instant::now();
    let taken = loop {
        let spinning = launchers.iter().zip(&before).position(|(l, ticks)| {
            children(*l)
                .first()
                .is_some_and(|r| cpu_ticks(*r) >= ticks + 50)
        });
        if let Some(i) = spinning {
            break i;
        }
        assert!(start.elapsed() < PATIENCE, "no pooled sandbox ran the code");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        weight(&files[taken]),
        normal,
        "the taken sandbox runs at normal priority: {:?}",
        files[taken]
    );
    assert_eq!(
        weight(&files[1 - taken]),
        background,
        "the other one still waits at background priority"
    );
    let reply = served.reply();
    assert_eq!(stdout(&reply), "spun\n", "{reply}");
}
