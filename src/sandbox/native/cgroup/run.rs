//! One run's cgroup: the files the launcher joins, the limits it holds, whether the memory
//! limit struck, and killing and removing it (also on drop).

use std::io::ErrorKind;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use cgroups_rs::fs::blkio::BlkIoController;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{Cgroup, MaxValue};

use super::subtree::{OwnSubtree, os_error};
use super::{CPU_PERIOD_US, CgroupError, CgroupLimits};
use crate::limits::{DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC};
use crate::sandbox::CpuPriority;
use crate::sandbox::disks::BlockDevice;

/// The default v1 `cpu.shares` of a cgroup (and the weight of a process at nice 0).
const CPU_SHARES_NORMAL: u64 = 1024;
/// The default v2 `cpu.weight` of a cgroup.
const CPU_WEIGHT_NORMAL: u64 = 100;

/// How long [`RunCgroup::kill_all`] and [`RunCgroup::remove`] keep trying.
const SETTLE: Duration = Duration::from_secs(2);

/// One run's cgroup: a directory on v2, one per controller on v1. Removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    subtree: OwnSubtree,
    name: String,
    cgroup: Cgroup,
    held: Vec<&'static str>,
    /// Whether the directories may still exist (false once removed).
    live: bool,
    /// v1: our own freezer cgroup (a thawed one: we run in it), where [`Self::kill_all`]
    /// puts back the processes a kill did not end, since v1 delivers no signal to a frozen
    /// task until it is thawed.
    thaw_into: Option<PathBuf>,
}

impl RunCgroup {
    /// The handle of the child `name` of `subtree`, made (or found) by the caller.
    pub(super) fn new(subtree: OwnSubtree, name: &str) -> Self {
        RunCgroup {
            cgroup: subtree.cgroup(name),
            subtree,
            name: name.to_owned(),
            held: Vec::new(),
            live: true,
            thaw_into: None,
        }
    }

    /// This cgroup with `freezer` (v1: our own freezer cgroup, [`CgroupHost::own_freezer`])
    /// as the place its processes are thawed in when a kill leaves them alive.
    ///
    /// [`CgroupHost::own_freezer`]: super::CgroupHost::own_freezer
    pub(super) fn thawed_in(mut self, freezer: Option<PathBuf>) -> Self {
        self.thaw_into = freezer;
        self
    }

    /// Sets `limits` through the crate's controllers this cgroup has, and records which
    /// hold. `swap`: the value for the swap file (v1 memory.memsw.limit_in_bytes, v2
    /// memory.swap.max), `None` where the kernel does not account swap. `disks`: the whole
    /// disks whose reads and writes are throttled to [`DISK_BYTES_PER_SEC`] and
    /// [`DISK_OPS_PER_SEC`]; `io` is held only when every one of them took all four limits.
    pub(super) fn set_limits(
        &mut self,
        limits: &CgroupLimits,
        swap: Option<u64>,
        disks: &[BlockDevice],
    ) -> Result<(), CgroupError> {
        let value = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let crate_error = |source| CgroupError::Cgroupfs {
            what: "limit cgroup",
            name: self.name.clone(),
            source,
        };
        let mut held = Vec::new();
        if let Some(memory) = self.cgroup.controller_of::<MemController>() {
            memory
                .set_limit(value(limits.memory_bytes))
                .map_err(crate_error)?;
            held.push("memory");
            if let Some(swap) = swap {
                // After the plain limit: v1 refuses memsw below it.
                memory.set_memswap_limit(value(swap)).map_err(crate_error)?;
                held.push("swap");
            }
        }
        if let Some(pids) = self.cgroup.controller_of::<PidController>() {
            pids.set_pid_max(MaxValue::Value(value(limits.pids)))
                .map_err(crate_error)?;
            held.push("pids");
        }
        if let Some(cpu) = self.cgroup.controller_of::<CpuController>() {
            let quota = limits.cpus.saturating_mul(CPU_PERIOD_US);
            cpu.set_cfs_quota_and_period(Some(value(quota)), Some(CPU_PERIOD_US))
                .map_err(crate_error)?;
            held.push("cpu");
        }
        if let Some(io) = self.cgroup.controller_of::<BlkIoController>()
            && !disks.is_empty()
        {
            // A disk the kernel will not throttle (a driver without a request queue) leaves
            // `io` unclaimed rather than the whole run without a cgroup.
            let refused = disks.iter().find_map(|disk| {
                let (major, minor) = (disk.major, disk.minor);
                io.throttle_read_bps_for_device(major, minor, DISK_BYTES_PER_SEC)
                    .and_then(|()| {
                        io.throttle_write_bps_for_device(major, minor, DISK_BYTES_PER_SEC)
                    })
                    .and_then(|()| io.throttle_read_iops_for_device(major, minor, DISK_OPS_PER_SEC))
                    .and_then(|()| {
                        io.throttle_write_iops_for_device(major, minor, DISK_OPS_PER_SEC)
                    })
                    .err()
                    .map(|e| (disk.name.clone(), e))
            });
            match refused {
                None => held.push("io"),
                Some((disk, e)) => {
                    tracing::warn!("no disk I/O limit for run {}: {disk}: {e}", self.name);
                }
            }
        }
        self.held = held;
        Ok(())
    }

    /// Sets the CPU weight of the cgroup (v1 `cpu.shares`, v2 `cpu.weight`) for `priority`
    /// ([`CpuPriority`]'s values), relative to serve's own processes and the other runs'
    /// cgroups. `false` when the cgroup has no CPU controller or the cgroupfs write failed.
    pub fn set_cpu_priority(&self, priority: CpuPriority) -> bool {
        let Some(cpu) = self.cgroup.controller_of::<CpuController>() else {
            return false;
        };
        let weight = match (priority, self.cgroup.v2()) {
            (CpuPriority::Normal, false) => CPU_SHARES_NORMAL,
            (CpuPriority::Background, false) => CPU_SHARES_NORMAL / 16,
            (CpuPriority::Normal, true) => CPU_WEIGHT_NORMAL,
            (CpuPriority::Background, true) => CPU_WEIGHT_NORMAL / 16,
        };
        match cpu.set_shares(weight) {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    "run {}: cannot set its CPU weight to {weight}: {e}",
                    self.name
                );
                false
            }
        }
    }

    /// The cgroup.procs files to pass to the launcher as `--cgroup-procs` (one per directory).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.subtree
            .dirs(&self.name)
            .into_iter()
            .map(|d| d.join("cgroup.procs"))
            .collect()
    }

    /// Which limits this cgroup enforces: a subset of ["memory", "swap", "pids", "cpu", "io"]
    /// (`io`: disk reads and writes, on every whole disk).
    pub fn held(&self) -> Vec<&'static str> {
        self.held.clone()
    }

    /// Whether the memory limit struck in this run: v1 memory.oom_control `oom_kill` > 0
    /// (through cgroups-rs; kernels before 4.13 have no such counter and report none); v2
    /// memory.events `oom`/`oom_kill` > 0 (read here: cgroups-rs reports no v2 OOM events).
    pub fn memory_limit_hit(&self) -> bool {
        match &self.subtree {
            OwnSubtree::V1(_) => self
                .cgroup
                .controller_of::<MemController>()
                .is_some_and(|m| m.memory_stat().oom_control.oom_kill > 0),
            OwnSubtree::V2 { .. } => self.subtree.dirs(&self.name).iter().any(|dir| {
                let events = std::fs::read_to_string(dir.join("memory.events")).unwrap_or_default();
                events
                    .lines()
                    .filter_map(|l| l.split_once(' '))
                    .filter(|(k, _)| *k == "oom" || *k == "oom_kill")
                    .any(|(_, v)| v.trim().parse::<u64>().is_ok_and(|n| n > 0))
            }),
        }
    }

    /// SIGKILLs every process in the cgroup: v2 `cgroup.kill` where the kernel has it (5.14+,
    /// through cgroups-rs), else a loop over cgroup.procs until it is empty (bounded by about
    /// 2 s; cgroups-rs kills on v2 only). Best effort.
    ///
    /// Frozen processes die too. On v2 a fatal signal reaches a frozen process (cgroup-v2.rst,
    /// "cgroup.freeze"). On v1 it is held until the process is thawed (freezer-subsystem.rst),
    /// so a process still listed after a round of kills is moved back into our own freezer
    /// cgroup (`thaw_into`), which is thawed since we run in it; moving a task into a thawed
    /// freezer cgroup thaws it, and its pending SIGKILL ends it. Only the run's own processes
    /// move: whoever froze them, nothing else of theirs is thawed.
    pub fn kill_all(&self) {
        if self.cgroup.v2() && self.cgroup.kill().is_ok() {
            return;
        }
        for dir in self.subtree.dirs(&self.name) {
            let deadline = Instant::now() + SETTLE;
            let mut killed_before = false;
            loop {
                let pids = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                let pids: Vec<i32> = pids
                    .split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect();
                if pids.is_empty() || Instant::now() > deadline {
                    break;
                }
                for &pid in &pids {
                    let _ = launcher::kill_process(pid);
                }
                if killed_before && let Some(freezer) = &self.thaw_into {
                    let procs = freezer.join("cgroup.procs");
                    for pid in pids {
                        // Fails for a process that has exited meanwhile, and where we may
                        // not write (then nobody but root could have frozen it either).
                        let _ = std::fs::write(&procs, pid.to_string());
                    }
                }
                killed_before = true;
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    /// Kills every process, then removes each directory (retrying for about 2 s while the
    /// kernel still counts dying processes: EBUSY).
    pub fn remove(mut self) -> Result<(), CgroupError> {
        self.kill_all();
        let result = self.remove_dirs();
        self.live = false; // nothing left for Drop
        result
    }

    /// Removes a cgroup that holds no process yet (a half-made one), ignoring errors.
    pub(super) fn discard(mut self) {
        let _ = self.remove_dirs();
        self.live = false;
    }

    /// Removes the directories through cgroups-rs, which retries for about 150 ms on v1
    /// and not at all on v2; dying processes can keep a cgroup busy for longer.
    pub(super) fn remove_dirs(&self) -> Result<(), CgroupError> {
        let deadline = Instant::now() + SETTLE;
        loop {
            match self.cgroup.delete() {
                Ok(()) => return Ok(()),
                Err(e) if os_error(&e) == Some(libc::ENOENT) => return Ok(()),
                Err(e) if os_error(&e) == Some(libc::EBUSY) && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) if os_error(&e) == Some(libc::EBUSY) => {
                    let dir = self.subtree.dirs(&self.name).into_iter().next();
                    let dir = dir.unwrap_or_default();
                    return Err(CgroupError::Busy(dir));
                }
                Err(source) => {
                    return Err(CgroupError::Cgroupfs {
                        what: "remove cgroup",
                        name: self.name.clone(),
                        source,
                    });
                }
            }
        }
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        if self.live {
            self.kill_all();
            let _ = self.remove_dirs();
        }
    }
}

/// I/O errors that mean "not our place to write": fall back to rlimits rather than fail.
pub(super) fn io_not_ours(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem | ErrorKind::NotFound
    )
}

/// Returns the run, or removes what was made and returns the error.
pub(super) fn finish(
    run: RunCgroup,
    result: Result<(), CgroupError>,
) -> Result<Option<RunCgroup>, CgroupError> {
    match result {
        Ok(()) => Ok(Some(run)),
        Err(e) => {
            run.discard(); // a cleanup error never hides the original one
            Err(e)
        }
    }
}
