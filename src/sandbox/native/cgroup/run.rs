//! One run's cgroup: the files the launcher joins, the limits it holds, whether the memory
//! limit struck, and killing and removing it (also on drop).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{CgroupError, io_err};

/// How long [`RunCgroup::kill_all`] and [`RunCgroup::remove`] keep trying.
const SETTLE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Controller {
    Unified,
    Memory,
    Pids,
    Cpu,
}

/// One run's cgroup: a directory on v2, one per controller on v1. Removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    version: u8,
    pub(super) dirs: Vec<(Controller, PathBuf)>,
    pub(super) held: Vec<&'static str>,
}

impl RunCgroup {
    /// An empty handle of cgroup `version` (1 or 2), filled in as directories are made.
    pub(super) fn new(version: u8) -> Self {
        RunCgroup {
            version,
            dirs: Vec::new(),
            held: Vec::new(),
        }
    }

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

    pub(super) fn remove_dirs(&self) -> Result<(), CgroupError> {
        let mut first_err = None;
        for dir in self.unique_dirs() {
            let deadline = Instant::now() + SETTLE;
            loop {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::NotFound => break,
                    Err(e)
                        if e.raw_os_error() == Some(libc::EBUSY) && Instant::now() < deadline =>
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
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

/// Errors that mean "not our place to write": fall back to rlimits rather than fail.
pub(super) fn not_ours(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem | ErrorKind::NotFound
    )
}

pub(super) fn write(path: &Path, value: u64) -> Result<(), CgroupError> {
    std::fs::write(path, value.to_string()).map_err(io_err("write", path))
}

/// Returns the run, or removes what was made and returns the error.
pub(super) fn finish(
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
