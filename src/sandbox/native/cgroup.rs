//! One cgroup per run, created below the cgroup this process already belongs to.
//!
//! Limits then nest inside whatever the host granted us, and a run can never escape them.
//! cgroup v2 (one unified hierarchy) is used when the host runs it; otherwise the v1
//! `memory`, `pids` and `cpu` hierarchies, each where we can write. When no writable place
//! exists (an unprivileged user without delegation), [`CgroupHost::create`] returns `Ok(None)`
//! and the launcher falls back to rlimits. The launcher joins the cgroup itself (it writes
//! its own pid to each [`RunCgroup::procs_files`] before unsharing).
//!
//! v2's no-internal-processes rule: a cgroup with processes cannot enable controllers for its
//! children. So before the first run cgroup, this process moves itself into a leaf
//! ([`HOST_LEAF`]) next to the run cgroups, as systemd's delegation model expects. Sources:
//! cgroups(7), Documentation/admin-guide/cgroup-v2.rst ("No Internal Process Constraint",
//! "cgroup.kill"), Documentation/admin-guide/cgroup-v1/memory.rst and pids.rst,
//! Documentation/scheduler/sched-bwc.rst (cfs_quota_us).
//!
//! No unsafe and no libc here: only std::fs, plus `launcher::kill_process` for SIGKILL.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The CFS period written with every CPU quota, in microseconds (100 ms, the kernel default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// On cgroup v2, the leaf this process moves itself into (see the module docs).
pub const HOST_LEAF: &str = "mcp-code-mode-host";

/// The v1 controllers a run cgroup uses.
const V1_CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// How long [`RunCgroup::kill_all`] and [`RunCgroup::remove`] keep trying.
const SETTLE: Duration = Duration::from_secs(2);

/// Limits for one run's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory, in bytes; swap is limited so memory + swap stays at this value (no swap).
    pub memory_bytes: u64,
    /// The most processes and threads at once.
    pub pids: u64,
    /// Whole CPUs of bandwidth (quota = cpus x [`CPU_PERIOD_US`]).
    pub cpus: u64,
}

/// A cgroup operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// The run name would not be a single directory name.
    #[error("failed to create a run cgroup: invalid name {0:?} (one path component, not empty)")]
    BadName(String),
    /// /proc/self/cgroup could not be read or made no sense.
    #[error("failed to read our own cgroup from {path}: {why}")]
    SelfCgroup { path: PathBuf, why: String },
    /// A cgroupfs file or directory operation failed.
    #[error("failed to {what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// Processes stayed in the cgroup after repeated SIGKILL, or it stayed busy.
    #[error("failed to empty cgroup {0}: processes remain after SIGKILL")]
    Busy(PathBuf),
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> CgroupError + 'a {
    move |source| CgroupError::Io {
        what,
        path: path.to_owned(),
        source,
    }
}

/// Where cgroupfs lives: injectable, so tests run against a fake cgroupfs in a temp dir.
#[derive(Debug, Clone)]
pub struct CgroupHost {
    fs_root: PathBuf,
    self_cgroup_file: PathBuf,
}

/// Our place in the hierarchies, as /proc/self/cgroup gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Placement {
    /// The unified hierarchy at `fs_root`, our cgroup at this path below it.
    V2 { path: String },
    /// v1: (controller, hierarchy directory, our path in it) for each controller we use.
    V1 {
        controllers: Vec<(&'static str, PathBuf, String)>,
    },
}

impl CgroupHost {
    /// The real host: /sys/fs/cgroup and /proc/self/cgroup.
    pub fn system() -> Self {
        Self::with_roots(
            PathBuf::from("/sys/fs/cgroup"),
            PathBuf::from("/proc/self/cgroup"),
        )
    }

    /// A host whose cgroupfs is mounted at `fs_root` and whose /proc/self/cgroup is
    /// `self_cgroup_file` (for tests).
    pub fn with_roots(fs_root: PathBuf, self_cgroup_file: PathBuf) -> Self {
        CgroupHost {
            fs_root,
            self_cgroup_file,
        }
    }

    fn placement(&self) -> Result<Placement, CgroupError> {
        let text = std::fs::read_to_string(&self.self_cgroup_file).map_err(|e| {
            CgroupError::SelfCgroup {
                path: self.self_cgroup_file.clone(),
                why: e.to_string(),
            }
        })?;
        // A pure v2 host has cgroup.controllers at the top of the mount.
        if self.fs_root.join("cgroup.controllers").exists() {
            let path = text
                .lines()
                .find_map(|l| l.strip_prefix("0::"))
                .ok_or_else(|| CgroupError::SelfCgroup {
                    path: self.self_cgroup_file.clone(),
                    why: "no \"0::\" line on a cgroup v2 host".into(),
                })?;
            return Ok(Placement::V2 {
                path: path.to_owned(),
            });
        }
        let mut controllers = Vec::new();
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(names), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            for wanted in V1_CONTROLLERS {
                if names.split(',').any(|n| n == wanted) {
                    // The hierarchy is mounted under its joined name ("cpu,cpuacct"), often
                    // with a symlink per controller; take whichever exists.
                    let dir = [self.fs_root.join(names), self.fs_root.join(wanted)]
                        .into_iter()
                        .find(|d| d.is_dir());
                    if let Some(dir) = dir {
                        controllers.push((wanted, dir, path.to_owned()));
                    }
                }
            }
        }
        Ok(Placement::V1 { controllers })
    }

    /// Creates a child cgroup `name` for one run below our own cgroup, on v2 or v1, and sets
    /// `limits` in it. On v1: memory.limit_in_bytes and memory.memsw.limit_in_bytes (where the
    /// kernel accounts swap), pids.max, cpu.cfs_period_us/cfs_quota_us; on v2: memory.max,
    /// memory.swap.max 0, pids.max, cpu.max.
    ///
    /// Returns `Ok(None)` when no writable place exists (then the caller uses rlimits).
    /// `name` must be unique among this process's live runs (e.g. "mcp-code-mode-PID-SEQ").
    /// Errors: a bad name, an unreadable /proc/self/cgroup, or a limit that cannot be written
    /// into a cgroup we could create (the half-made cgroup is removed first).
    pub fn create(
        &self,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<Option<RunCgroup>, CgroupError> {
        if name.is_empty() || name == "." || name == ".." || name.contains('/') || name == HOST_LEAF
        {
            return Err(CgroupError::BadName(name.to_owned()));
        }
        match self.placement()? {
            Placement::V2 { path } => self.create_v2(&path, name, limits),
            Placement::V1 { controllers } => create_v1(&controllers, name, limits),
        }
    }

    fn create_v2(
        &self,
        own: &str,
        name: &str,
        limits: &CgroupLimits,
    ) -> Result<Option<RunCgroup>, CgroupError> {
        let own_dir = self.fs_root.join(own.trim_start_matches('/'));
        // After the first run we already live in our leaf: the runs go next to it.
        let base = if own_dir.file_name().is_some_and(|n| n == HOST_LEAF) {
            own_dir.parent().map(Path::to_owned).unwrap_or(own_dir)
        } else {
            own_dir
        };
        let dir = base.join(name);
        match std::fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if not_ours(&e) => return Ok(None),
            Err(e) => return Err(io_err("create cgroup", &dir)(e)),
        }
        let mut run = RunCgroup {
            version: 2,
            dirs: vec![(Controller::Unified, dir.clone())],
            held: Vec::new(),
        };
        // Move ourselves into a leaf so `base` has no processes and may delegate controllers.
        let available =
            std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
        let wanted: Vec<&str> = ["memory", "pids", "cpu"]
            .into_iter()
            .filter(|c| available.split_whitespace().any(|a| a == *c))
            .collect();
        let enabled =
            std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
        if wanted
            .iter()
            .any(|c| !enabled.split_whitespace().any(|e| e == *c))
        {
            let leaf = base.join(HOST_LEAF);
            let moved = std::fs::create_dir(&leaf)
                .or_else(|e| {
                    if e.kind() == ErrorKind::AlreadyExists {
                        Ok(())
                    } else {
                        Err(e)
                    }
                })
                .and_then(|()| move_all_processes(&base, &leaf));
            let control: String = wanted.iter().map(|c| format!("+{c} ")).collect();
            if moved.is_err()
                || std::fs::write(base.join("cgroup.subtree_control"), control.trim_end()).is_err()
            {
                // No delegation: the cgroup still groups and kills the run, but limits nothing.
                let _ = run.remove_dirs();
                return Ok(None);
            }
        }
        let result = (|| {
            if wanted.contains(&"memory") {
                write(&dir.join("memory.max"), limits.memory_bytes)?;
                run.held.push("memory");
                if dir.join("memory.swap.max").exists() {
                    write(&dir.join("memory.swap.max"), 0)?;
                    run.held.push("swap");
                }
            }
            if wanted.contains(&"pids") {
                write(&dir.join("pids.max"), limits.pids)?;
                run.held.push("pids");
            }
            if wanted.contains(&"cpu") {
                let quota = format!(
                    "{} {CPU_PERIOD_US}",
                    limits.cpus.saturating_mul(CPU_PERIOD_US)
                );
                std::fs::write(dir.join("cpu.max"), quota)
                    .map_err(io_err("write", &dir.join("cpu.max")))?;
                run.held.push("cpu");
            }
            Ok(())
        })();
        finish(run, result)
    }

    /// Removes run cgroups left by an earlier process that died without cleaning up (killed
    /// with SIGKILL, say): children named `mcp-code-mode-PID-SEQ` below our own cgroup whose
    /// PID is no longer alive. Their processes are killed first. Returns how many it removed;
    /// best effort, never fails.
    pub fn remove_strays(&self) -> usize {
        let parents: Vec<(u8, PathBuf)> = match self.placement() {
            Ok(Placement::V2 { path }) => {
                let own = self.fs_root.join(path.trim_start_matches('/'));
                let base = if own.file_name().is_some_and(|n| n == HOST_LEAF) {
                    own.parent().map(Path::to_owned).unwrap_or(own)
                } else {
                    own
                };
                vec![(2, base)]
            }
            Ok(Placement::V1 { controllers }) => controllers
                .iter()
                .map(|(_, hierarchy, own)| (1, hierarchy.join(own.trim_start_matches('/'))))
                .collect(),
            Err(_) => return 0,
        };
        let mut removed = 0;
        for (version, parent) in parents {
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let Some(pid) = stray_owner(&name) else {
                    continue;
                };
                if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
                    continue;
                }
                let controller = if version == 2 {
                    Controller::Unified
                } else {
                    Controller::Pids
                };
                let run = RunCgroup {
                    version,
                    dirs: vec![(controller, entry.path())],
                    held: Vec::new(),
                };
                if run.remove().is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }

    /// One line for `doctor` and the logs: the cgroup version, whether we can create run
    /// cgroups (and which limits they hold), and the fix when we cannot.
    pub fn describe(&self) -> String {
        let probe = format!("mcp-code-mode-probe-{}", std::process::id());
        let limits = CgroupLimits {
            memory_bytes: u64::MAX / 2,
            pids: 1 << 20,
            cpus: 1 << 10,
        };
        let version = match self.placement() {
            Ok(Placement::V2 { path }) => format!("cgroup v2 (ours: {path})"),
            Ok(Placement::V1 { controllers }) if controllers.is_empty() => {
                "cgroup v1 without memory, pids or cpu".into()
            }
            Ok(Placement::V1 { controllers }) => {
                let list: Vec<String> = controllers
                    .iter()
                    .map(|(c, _, p)| format!("{c} at {p}"))
                    .collect();
                format!("cgroup v1 ({})", list.join(", "))
            }
            Err(e) => return format!("cgroups unavailable ({e}); limits fall back to rlimits"),
        };
        match self.create(&probe, &limits) {
            Ok(Some(run)) if !run.held().is_empty() => {
                let held = run.held().join(", ");
                drop(run);
                format!("{version}: writable, run cgroups limit {held}")
            }
            Ok(_) => format!(
                "{version}: not writable by this user; limits fall back to rlimits (run as root, or \
                 under a delegated cgroup: systemd-run --user -p Delegate=yes --scope mcp-code-mode ...)"
            ),
            Err(e) => format!("{version}: {e}; limits fall back to rlimits"),
        }
    }
}

fn create_v1(
    controllers: &[(&'static str, PathBuf, String)],
    name: &str,
    limits: &CgroupLimits,
) -> Result<Option<RunCgroup>, CgroupError> {
    let mut run = RunCgroup {
        version: 1,
        dirs: Vec::new(),
        held: Vec::new(),
    };
    let mut seen = Vec::new();
    for (controller, hierarchy, own) in controllers {
        let parent = hierarchy.join(own.trim_start_matches('/'));
        let dir = parent.join(name);
        // Two controllers on one hierarchy ("cpu,cpuacct" and "cpu") share the directory.
        if !seen.contains(&dir) {
            match std::fs::create_dir(&dir) {
                Ok(()) => seen.push(dir.clone()),
                Err(e) if not_ours(&e) => continue,
                Err(e) => return finish(run, Err(io_err("create cgroup", &dir)(e))),
            }
        }
        let kind = match *controller {
            "memory" => Controller::Memory,
            "pids" => Controller::Pids,
            _ => Controller::Cpu,
        };
        run.dirs.push((kind, dir.clone()));
        let result = match kind {
            Controller::Memory => write(&dir.join("memory.limit_in_bytes"), limits.memory_bytes)
                .and_then(|()| {
                    run.held.push("memory");
                    // memsw exists only with swap accounting; it must be set after the plain limit.
                    if parent.join("memory.memsw.limit_in_bytes").exists() {
                        write(
                            &dir.join("memory.memsw.limit_in_bytes"),
                            limits.memory_bytes,
                        )?;
                        run.held.push("swap");
                    }
                    Ok(())
                }),
            Controller::Pids => {
                write(&dir.join("pids.max"), limits.pids).map(|()| run.held.push("pids"))
            }
            Controller::Cpu => write(&dir.join("cpu.cfs_period_us"), CPU_PERIOD_US)
                .and_then(|()| {
                    write(
                        &dir.join("cpu.cfs_quota_us"),
                        limits.cpus.saturating_mul(CPU_PERIOD_US),
                    )
                })
                .map(|()| run.held.push("cpu")),
            Controller::Unified => Ok(()),
        };
        if result.is_err() {
            return finish(run, result);
        }
    }
    const ORDER: [&str; 4] = ["memory", "swap", "pids", "cpu"];
    run.held.sort_by_key(|h| ORDER.iter().position(|o| o == h));
    if run.dirs.is_empty() {
        Ok(None)
    } else {
        Ok(Some(run))
    }
}

/// The pid in a run cgroup's name `mcp-code-mode-PID-SEQ`, or `None` for any other name.
fn stray_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("mcp-code-mode-")?;
    let (pid, seq) = rest.split_once('-')?;
    seq.parse::<u64>().ok()?;
    pid.parse().ok()
}

/// Errors that mean "not our place to write": fall back to rlimits rather than fail.
fn not_ours(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem | ErrorKind::NotFound
    )
}

fn write(path: &Path, value: u64) -> Result<(), CgroupError> {
    std::fs::write(path, value.to_string()).map_err(io_err("write", path))
}

/// Returns the run, or removes what was made and returns the error.
fn finish(
    run: RunCgroup,
    result: Result<(), CgroupError>,
) -> Result<Option<RunCgroup>, CgroupError> {
    match result {
        Ok(()) => Ok(Some(run)),
        Err(e) => {
            let _ = run.remove_dirs(); // a cleanup error never hides the original one
            Err(e)
        }
    }
}

fn move_all_processes(from: &Path, to: &Path) -> std::io::Result<()> {
    let procs = to.join("cgroup.procs");
    for pid in std::fs::read_to_string(from.join("cgroup.procs"))?.split_whitespace() {
        match std::fs::write(&procs, pid) {
            // A process that exited meanwhile.
            Err(e) if e.raw_os_error() == Some(3) => {}
            other => other?,
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Unified,
    Memory,
    Pids,
    Cpu,
}

/// One run's cgroup: a directory on v2, one per controller on v1. Removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    version: u8,
    dirs: Vec<(Controller, PathBuf)>,
    held: Vec<&'static str>,
}

impl RunCgroup {
    fn unique_dirs(&self) -> Vec<&Path> {
        let mut dirs: Vec<&Path> = Vec::new();
        for (_, d) in &self.dirs {
            if !dirs.contains(&d.as_path()) {
                dirs.push(d);
            }
        }
        dirs
    }

    /// The cgroup.procs files to pass to the launcher as `--cgroup-procs` (one per directory).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.unique_dirs()
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Which limits this cgroup enforces: a subset of ["memory", "swap", "pids", "cpu"].
    pub fn held(&self) -> Vec<&'static str> {
        self.held.clone()
    }

    /// The cgroup version in use, 1 or 2.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// Whether the memory limit struck in this run: v2 memory.events `oom`/`oom_kill` > 0;
    /// v1 memory.oom_control `oom_kill` > 0 (or memory.failcnt > 0 on kernels without it).
    pub fn memory_limit_hit(&self) -> bool {
        let counter = |text: &str, key: &str| {
            text.lines()
                .filter_map(|l| l.split_once(' '))
                .find(|(k, _)| *k == key)
                .and_then(|(_, v)| v.trim().parse::<u64>().ok())
        };
        self.dirs.iter().any(|(kind, dir)| match kind {
            Controller::Unified => {
                let events = std::fs::read_to_string(dir.join("memory.events")).unwrap_or_default();
                counter(&events, "oom").unwrap_or(0) > 0
                    || counter(&events, "oom_kill").unwrap_or(0) > 0
            }
            Controller::Memory => {
                let oom =
                    std::fs::read_to_string(dir.join("memory.oom_control")).unwrap_or_default();
                match counter(&oom, "oom_kill") {
                    Some(n) => n > 0,
                    None => {
                        let failcnt =
                            std::fs::read_to_string(dir.join("memory.failcnt")).unwrap_or_default();
                        failcnt.trim().parse::<u64>().unwrap_or(0) > 0
                    }
                }
            }
            _ => false,
        })
    }

    /// SIGKILLs every process in the cgroup: v2 `cgroup.kill` where the kernel has it (5.14+),
    /// else a loop over cgroup.procs until it is empty (bounded by about 2 s). Best effort.
    pub fn kill_all(&self) {
        for dir in self.unique_dirs() {
            let kill = dir.join("cgroup.kill");
            if self.version == 2 && kill.exists() && std::fs::write(&kill, "1").is_ok() {
                continue;
            }
            let deadline = Instant::now() + SETTLE;
            loop {
                let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = pids
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect();
                if pids.is_empty() || Instant::now() > deadline {
                    break;
                }
                for pid in pids {
                    let _ = launcher::kill_process(pid);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Kills every process, then removes each directory (retrying briefly while the kernel
    /// still counts dying processes: EBUSY).
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.kill_all();
        let result = self.remove_dirs();
        self.dirs.clear(); // nothing left for Drop
        result
    }

    fn remove_dirs(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for dir in self.unique_dirs() {
            let deadline = Instant::now() + SETTLE;
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::NotFound => break,
                    Err(e) if e.raw_os_error() == Some(16) && Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) if e.raw_os_error() == Some(16) => {
                        first_err.get_or_insert(CgroupError::Busy(dir.to_owned()));
                        break;
                    }
                    Err(e) => {
                        first_err.get_or_insert(io_err("remove cgroup", dir)(e));
                        break;
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if !self.dirs.is_empty() {
            self.kill_all();
            let _ = self.remove_dirs();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_run_cgroup_names_have_an_owner() {
        assert_eq!(stray_owner("mcp-code-mode-123-4"), Some(123));
        assert_eq!(stray_owner("mcp-code-mode-probe-123"), None);
        assert_eq!(stray_owner("mcp-code-mode-host"), None);
        assert_eq!(stray_owner("other-1-2"), None);
    }

    const LIMITS: CgroupLimits = CgroupLimits {
        memory_bytes: 256 << 20,
        pids: 64,
        cpus: 1,
    };

    /// A fake v1 cgroupfs: memory below a parent the machine set up, pids and cpu at the top.
    fn fake_v1(memsw: bool) -> (tempfile::TempDir, CgroupHost) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("fs");
        let mem = root.join("memory/machine/slot");
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::write(mem.join("memory.limit_in_bytes"), "").unwrap();
        if memsw {
            std::fs::write(mem.join("memory.memsw.limit_in_bytes"), "").unwrap();
        }
        std::fs::create_dir_all(root.join("pids")).unwrap();
        std::fs::create_dir_all(root.join("cpu,cpuacct")).unwrap();
        let self_file = dir.path().join("self");
        std::fs::write(
            &self_file,
            "9:name=systemd:/\n8:pids:/\n4:memory:/machine/slot\n1:cpu,cpuacct:/\n0::/\n",
        )
        .unwrap();
        (dir, CgroupHost::with_roots(root, self_file))
    }

    fn fake_v2(own: &str, controllers: &str) -> (tempfile::TempDir, CgroupHost) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("fs");
        let own_dir = root.join(own.trim_start_matches('/'));
        std::fs::create_dir_all(&own_dir).unwrap();
        std::fs::write(root.join("cgroup.controllers"), "memory pids cpu io").unwrap();
        std::fs::write(own_dir.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(own_dir.join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(own_dir.join("cgroup.procs"), "4242\n").unwrap();
        let self_file = dir.path().join("self");
        std::fs::write(&self_file, format!("0::{own}\n")).unwrap();
        (dir, CgroupHost::with_roots(root, self_file))
    }

    fn read(path: impl AsRef<Path>) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn on_v1_each_controller_gets_a_child_below_our_own_cgroup_with_its_limits() {
        let (dir, host) = fake_v1(true);
        let run = host.create("run-1", &LIMITS).unwrap().unwrap();
        let fs = dir.path().join("fs");
        let mem = fs.join("memory/machine/slot/run-1");
        assert_eq!(read(mem.join("memory.limit_in_bytes")), "268435456");
        assert_eq!(read(mem.join("memory.memsw.limit_in_bytes")), "268435456");
        assert_eq!(read(fs.join("pids/run-1/pids.max")), "64");
        assert_eq!(
            read(fs.join("cpu,cpuacct/run-1/cpu.cfs_quota_us")),
            "100000"
        );
        assert_eq!(
            read(fs.join("cpu,cpuacct/run-1/cpu.cfs_period_us")),
            "100000"
        );
        assert_eq!(run.held(), ["memory", "swap", "pids", "cpu"]);
        assert_eq!(run.procs_files().len(), 3);
        assert!(run.procs_files().contains(&mem.join("cgroup.procs")));
    }

    #[test]
    fn on_v1_without_swap_accounting_swap_is_not_claimed() {
        let (_dir, host) = fake_v1(false);
        let run = host.create("run-1", &LIMITS).unwrap().unwrap();
        assert_eq!(run.held(), ["memory", "pids", "cpu"]);
    }

    #[test]
    fn removing_a_run_cgroup_leaves_nothing_behind() {
        let (dir, host) = fake_v1(true);
        let fs = dir.path().join("fs");
        let run = host.create("run-1", &LIMITS).unwrap().unwrap();
        // The fake fs has files in the dirs (a real cgroupfs would not block rmdir on them).
        for f in run.procs_files() {
            for entry in std::fs::read_dir(f.parent().unwrap()).unwrap() {
                std::fs::remove_file(entry.unwrap().path()).unwrap();
            }
        }
        run.remove().unwrap();
        assert!(!fs.join("memory/machine/slot/run-1").exists());
        assert!(!fs.join("pids/run-1").exists());
        assert!(!fs.join("cpu,cpuacct/run-1").exists());
    }

    #[test]
    fn an_unwritable_host_gives_no_cgroup_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let self_file = dir.path().join("self");
        std::fs::write(&self_file, "4:memory:/not/there\n").unwrap();
        std::fs::create_dir_all(dir.path().join("fs/memory")).unwrap();
        let host = CgroupHost::with_roots(dir.path().join("fs"), self_file);
        assert!(host.create("run-1", &LIMITS).unwrap().is_none());
        assert!(
            host.describe().contains("not writable"),
            "{}",
            host.describe()
        );
    }

    #[test]
    fn names_that_are_not_one_path_component_are_refused() {
        let (_dir, host) = fake_v1(true);
        for bad in ["", ".", "..", "a/b", HOST_LEAF] {
            assert!(
                matches!(host.create(bad, &LIMITS), Err(CgroupError::BadName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn on_v2_we_move_into_a_leaf_enable_controllers_and_set_the_limits() {
        let (dir, host) = fake_v2("/user.slice/serve", "memory pids cpu");
        let own = dir.path().join("fs/user.slice/serve");
        std::fs::create_dir_all(own.join(HOST_LEAF)).unwrap();
        let run = host.create("run-1", &LIMITS).unwrap().unwrap();
        assert_eq!(read(own.join(HOST_LEAF).join("cgroup.procs")), "4242");
        assert_eq!(
            read(own.join("cgroup.subtree_control")),
            "+memory +pids +cpu"
        );
        let run_dir = own.join("run-1");
        assert_eq!(read(run_dir.join("memory.max")), "268435456");
        assert_eq!(read(run_dir.join("pids.max")), "64");
        assert_eq!(read(run_dir.join("cpu.max")), "100000 100000");
        assert_eq!(run.held(), ["memory", "pids", "cpu"]);
        assert_eq!(run.procs_files(), [run_dir.join("cgroup.procs")]);
    }

    #[test]
    fn on_v2_once_in_our_leaf_runs_go_next_to_it() {
        let (dir, host) = fake_v2(&format!("/svc/{HOST_LEAF}"), "");
        let svc = dir.path().join("fs/svc");
        std::fs::write(svc.join("cgroup.controllers"), "pids").unwrap();
        std::fs::write(svc.join("cgroup.subtree_control"), "pids").unwrap();
        let run = host.create("run-2", &LIMITS).unwrap().unwrap();
        assert_eq!(run.procs_files(), [svc.join("run-2/cgroup.procs")]);
        assert_eq!(run.held(), ["pids"]);
    }

    #[test]
    fn the_memory_limit_counts_as_hit_only_after_an_oom() {
        let (dir, host) = fake_v1(true);
        let run = host.create("run-1", &LIMITS).unwrap().unwrap();
        let mem = dir.path().join("fs/memory/machine/slot/run-1");
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        assert!(!run.memory_limit_hit());
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        assert!(run.memory_limit_hit());
    }

    /// On the real machine, as root: create, join, limits visible, remove leaves nothing.
    #[test]
    fn a_real_run_cgroup_holds_a_process_and_is_gone_after_remove() {
        let host = CgroupHost::system();
        let name = format!("mcp-code-mode-test-{}", std::process::id());
        let Ok(Some(run)) = host.create(&name, &LIMITS) else {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("no writable cgroup under CI=true: {}", host.describe());
            }
            eprintln!("SKIPPED: {}", host.describe());
            return;
        };
        let mut sleeper = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        for f in run.procs_files() {
            std::fs::write(&f, sleeper.id().to_string()).unwrap();
            assert_eq!(read(&f).trim(), sleeper.id().to_string());
        }
        let dirs: Vec<PathBuf> = run
            .procs_files()
            .iter()
            .map(|f| f.parent().unwrap().to_owned())
            .collect();
        for d in &dirs {
            if let Ok(v) = std::fs::read_to_string(d.join("memory.limit_in_bytes")) {
                assert_eq!(v.trim(), "268435456");
            }
            if let Ok(v) = std::fs::read_to_string(d.join("pids.max")) {
                assert_eq!(v.trim(), "64");
            }
        }
        assert!(!run.memory_limit_hit());
        run.remove().unwrap();
        let status = sleeper.wait().unwrap();
        assert!(!status.success(), "the process in the cgroup was killed");
        assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
    }
}
