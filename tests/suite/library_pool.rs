//! The warm pool through the library API ([`Pool`]), as a program that embeds mcp-code-mode
//! uses it, without `serve`.
//!
//! Index: the library's pool runs each cell in a fresh pooled sandbox and leaves nothing
//! behind.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, ServerEntry};
use mcp_code_mode::rootfs;
use mcp_code_mode::run::RunOptions;
use mcp_code_mode::run::pool::Pool;
use mcp_code_mode::sandbox::native::NativeBackend;

use super::cleanup::cgroups_of;
use super::common::{bin, native_available, processes_named, require, toy};

/// Longest wait for the pool to fill or a sandbox process to show.
const PATIENCE: Duration = Duration::from_secs(60);

/// Each run: whether the previous run's file and global are there, then its namespaces (pid,
/// mnt, net) and the start time of its pid 1 in clock ticks since boot (proc(5), field 22),
/// which together name one sandbox for good; then it leaves a file, a global and a process
/// named `{marker}` that sleeps (the sandbox's end must kill it), and waits for the test to
/// find that process.
fn cell(marker: &str) -> String {
    format!(
        "import ctypes, os, time\n\
         print(os.path.exists('/tmp/left'), 'left' in globals())\n\
         print(' '.join(os.readlink('/proc/self/ns/' + n) for n in ('pid', 'mnt', 'net')), open('/proc/1/stat').read().rsplit(')', 1)[1].split()[19])\n\
         open('/tmp/left', 'w').write('x')\n\
         left = 1\n\
         if os.fork() == 0:\n    ctypes.CDLL(None).prctl(15, {marker:?}.encode(), 0, 0, 0)\n    time.sleep(600)\n\
         time.sleep(1)\n"
    )
}

/// The run cgroup name of `pid` without its run number (`mcp-code-mode-PID-START-NS-TAG-`):
/// what every cgroup of one [`NativeBackend`] starts with. `None` without a run cgroup (the
/// rlimit fallback of an unprivileged caller).
fn backend_cgroup_prefix(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    let leaf = text
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .find(|leaf| leaf.starts_with("mcp-code-mode-"))?;
    let cut = leaf.rfind('-')?;
    Some(leaf[..=cut].to_owned())
}

/// Launcher processes whose command line names a cgroup starting with `prefix`.
fn launchers_with(prefix: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|cmd| {
                let cmd = String::from_utf8_lossy(&cmd);
                cmd.contains("__launcher") && cmd.contains(prefix)
            })
        })
        .collect()
}

async fn until<T>(what: &str, mut found: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = found() {
            return value;
        }
        assert!(start.elapsed() < PATIENCE, "waited in vain for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_library_pool_runs_each_cell_in_a_fresh_pooled_sandbox_and_leaves_nothing_behind() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let rootfs = rootfs::ensure(&rootfs::Options::default()).expect("the rootfs");
    // The launcher is the mcp-code-mode binary (this test program does not dispatch one).
    let backend = Arc::new(NativeBackend::new(
        bin(),
        rootfs.dir.clone(),
        rootfs.argv(),
        60,
    ));
    let entry = ServerEntry::stdio("toy", toy()[0].clone(), Vec::<String>::new());
    let bridge = Arc::new(
        Bridge::open(vec![entry], false)
            .await
            .expect("open the toy"),
    );
    let pool = Pool::new(bridge.clone(), backend, 2);

    let options = RunOptions::default();
    let mut seen = Vec::new();
    let mut prefix = None;
    for run in 0..3u64 {
        until("the pool to refill", || {
            (pool.stats().ready >= 2 + run).then_some(())
        })
        .await;
        let marker = format!("lp{run}{}", std::process::id() % 1_000_000_000);
        let code = cell(&marker);
        let found = until("the run's own process", || {
            processes_named(&marker).first().copied()
        });
        let (report, left) = tokio::join!(pool.run(&code, &options), found);
        let report = report.expect("a pooled run");
        assert!(report.pooled, "run {run} took a pooled sandbox");
        assert_eq!(report.result.error, None, "run {run}: {:?}", report.result);
        let mut lines = report.result.stdout.lines();
        assert_eq!(
            lines.next(),
            Some("False False"),
            "run {run} saw what an earlier run left: {:?}",
            report.result
        );
        let sandbox = lines.next().expect("the namespaces").to_owned();
        assert!(
            !seen.contains(&sandbox),
            "one sandbox for two runs: {sandbox} in {seen:?}"
        );
        seen.push(sandbox);
        prefix = prefix.or_else(|| backend_cgroup_prefix(left));
    }
    let stats = pool.stats();
    assert_eq!((stats.taken, stats.cold), (3, 0), "{stats:?}");
    until("the refill after the last run", || {
        (pool.stats().idle == 2).then_some(())
    })
    .await;

    pool.close().await;
    bridge.close().await;
    for run in 0..3u64 {
        let marker = format!("lp{run}{}", std::process::id() % 1_000_000_000);
        assert_eq!(
            processes_named(&marker),
            Vec::<u32>::new(),
            "run {run} left a process"
        );
    }
    if let Some(prefix) = prefix {
        assert_eq!(launchers_with(&prefix), Vec::<u32>::new(), "sandboxes left");
        let left: Vec<_> = cgroups_of(std::process::id())
            .into_iter()
            .filter(|c| {
                c.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with(&prefix))
            })
            .collect();
        assert_eq!(left, Vec::<std::path::PathBuf>::new(), "run cgroups left");
    }
}
