//! One cgroup per run, created below the cgroup this process already belongs to.
//!
//! Limits then nest inside whatever the host granted us, and a run can never escape them.
//! cgroup v2 (one unified hierarchy) is used when the host runs it; otherwise the v1
//! `memory`, `pids`, `cpu` and `blkio` hierarchies, each where we can write. The disk I/O
//! limits ([`crate::limits::DISK_BYTES_PER_SEC`], [`crate::limits::DISK_OPS_PER_SEC`]) go on
//! every whole disk of the host ([`crate::sandbox::disks`]). When no writable place
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
//! The cgroup files are written through cgroups-rs, rooted at our own cgroup (`subtree`);
//! what the crate does not do (v2 delegation, killing on v1, v2 OOM events, waiting out a
//! busy removal) is done here, as the README's "Run cgroups" lists.
//!
//! The parts: [`placement`] (where we are and where runs go), `v1` and `v2` (creating and
//! limiting), [`RunCgroup`] (one run's handle: kill, remove), `strays` (removing the run
//! cgroups of dead owners, by the rule in [`crate::sandbox::owner`]).
//!
//! No unsafe here: `launcher::kill_process` sends SIGKILL.

#[cfg(test)]
pub(crate) mod fake;
mod placement;
mod run;
mod strays;
mod subtree;
#[cfg(test)]
mod tests;
mod v1;
mod v2;

use std::path::{Path, PathBuf};

pub(crate) use placement::Placement;
pub use run::RunCgroup;

/// The CFS period written with every CPU quota, in microseconds (100 ms, the kernel default).
pub(crate) const CPU_PERIOD_US: u64 = 100_000;

/// On cgroup v2, the leaf this process moves itself into (see the module docs).
pub(crate) const HOST_LEAF: &str = "mcp-code-mode-host";

/// Limits for one run's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CgroupLimits {
    /// Memory, in bytes; swap is limited so memory + swap stays at this value (no swap).
    pub memory_bytes: u64,
    /// The most processes and threads at once.
    pub pids: u64,
    /// Whole CPUs of bandwidth (quota = cpus x `CPU_PERIOD_US`).
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
    /// cgroups-rs failed to create, limit, join or remove the cgroup `name`.
    #[error("failed to {what} {name}: {source}")]
    Cgroupfs {
        what: &'static str,
        name: String,
        source: cgroups_rs::fs::error::Error,
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
    sys_block: PathBuf,
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
            sys_block: PathBuf::from("/sys/block"),
        }
    }

    /// This host with its whole disks listed in `sys_block` instead of `/sys/block` (for
    /// tests).
    pub fn with_block_devices(mut self, sys_block: PathBuf) -> Self {
        self.sys_block = sys_block;
        self
    }

    /// Creates a child cgroup `name` for one run below our own cgroup, on v2 or v1, and sets
    /// `limits` in it. On v1: memory.limit_in_bytes and memory.memsw.limit_in_bytes (where the
    /// kernel accounts swap), pids.max, cpu.cfs_period_us/cfs_quota_us, and for every whole
    /// disk blkio.throttle.{read,write}_{bps,iops}_device; on v2: memory.max, memory.swap.max
    /// 0, pids.max, cpu.max, and io.max for every whole disk (the disk limits are the fixed
    /// [`crate::limits::DISK_BYTES_PER_SEC`] and [`crate::limits::DISK_OPS_PER_SEC`]).
    ///
    /// Returns `Ok(None)` when no writable place exists (then the caller uses rlimits).
    /// `name` must be unique among this process's live runs: a
    /// [`RunName`](crate::sandbox::owner::RunName), so that a later process removes it if we
    /// die before we do.
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
        let disks = crate::sandbox::disks::whole_disks(&self.sys_block);
        match self.placement()? {
            Placement::V2 { path } => v2::create(&self.v2_base(&path), name, limits, &disks),
            Placement::V1 { hierarchies } => Ok(v1::create(&hierarchies, name, limits, &disks)?
                .map(|run| run.thawed_in(self.own_freezer()))),
        }
    }
}
