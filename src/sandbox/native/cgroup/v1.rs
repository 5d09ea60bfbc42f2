//! cgroup v1: one directory per controller (memory, pids, cpu), each below our own cgroup in
//! that controller's hierarchy (Documentation/admin-guide/cgroup-v1/memory.rst, pids.rst;
//! Documentation/scheduler/sched-bwc.rst), made and limited through cgroups-rs.

use cgroups_rs::fs::MaxValue;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;

use super::placement::V1Hierarchy;
use super::run::{RunCgroup, finish};
use super::subtree::{OwnSubtree, not_ours};
use super::{CPU_PERIOD_US, CgroupError, CgroupLimits};

/// Creates `name` below our cgroup in each hierarchy we can write and sets `limits` there.
/// `Ok(None)` when no hierarchy is writable.
pub(super) fn create(
    hierarchies: &[V1Hierarchy],
    name: &str,
    limits: &CgroupLimits,
) -> Result<Option<RunCgroup>, CgroupError> {
    let mut made: Vec<V1Hierarchy> = Vec::new();
    for hierarchy in hierarchies {
        // Our own cgroup must be visible in this mount; the crate would create it otherwise.
        if !hierarchy.own_dir().is_dir() {
            continue;
        }
        let one = OwnSubtree::V1(vec![hierarchy.clone()]).cgroup(name);
        match one.create() {
            Ok(()) => made.push(hierarchy.clone()),
            Err(e) if not_ours(&e) => continue,
            Err(source) => {
                let error = CgroupError::Cgroupfs {
                    what: "create cgroup",
                    name: name.to_owned(),
                    source,
                };
                return finish(RunCgroup::new(OwnSubtree::V1(made), name), Err(error));
            }
        }
    }
    if made.is_empty() {
        return Ok(None);
    }
    // memsw exists only with swap accounting; it must be set after the plain limit.
    let swap = made.iter().any(|h| {
        h.controller == "memory" && h.own_dir().join("memory.memsw.limit_in_bytes").exists()
    });
    let mut run = RunCgroup::new(OwnSubtree::V1(made), name);
    let result = limit(&mut run, limits, swap).map_err(|source| CgroupError::Cgroupfs {
        what: "limit cgroup",
        name: name.to_owned(),
        source,
    });
    finish(run, result)
}

fn limit(
    run: &mut RunCgroup,
    limits: &CgroupLimits,
    swap: bool,
) -> Result<(), cgroups_rs::fs::error::Error> {
    let bytes = i64::try_from(limits.memory_bytes).unwrap_or(i64::MAX);
    let mut held = Vec::new();
    let cgroup = run.cgroup();
    if let Some(memory) = cgroup.controller_of::<MemController>() {
        memory.set_limit(bytes)?;
        held.push("memory");
        if swap {
            memory.set_memswap_limit(bytes)?;
            held.push("swap");
        }
    }
    if let Some(pids) = cgroup.controller_of::<PidController>() {
        let max = i64::try_from(limits.pids).unwrap_or(i64::MAX);
        pids.set_pid_max(MaxValue::Value(max))?;
        held.push("pids");
    }
    if let Some(cpu) = cgroup.controller_of::<CpuController>() {
        let quota = limits.cpus.saturating_mul(CPU_PERIOD_US);
        cpu.set_cfs_period(CPU_PERIOD_US)?;
        cpu.set_cfs_quota(i64::try_from(quota).unwrap_or(i64::MAX))?;
        held.push("cpu");
    }
    run.held = held;
    Ok(())
}
