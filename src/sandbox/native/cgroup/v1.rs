//! cgroup v1: one directory per controller (memory, pids, cpu), each below our own cgroup in
//! that controller's hierarchy (Documentation/admin-guide/cgroup-v1/memory.rst, pids.rst;
//! Documentation/scheduler/sched-bwc.rst).

use super::placement::V1Hierarchy;
use super::run::{Controller, RunCgroup, finish, not_ours, write};
use super::{CPU_PERIOD_US, CgroupError, CgroupLimits, io_err};

/// Creates `name` below our cgroup in each hierarchy we can write and sets `limits` there.
/// `Ok(None)` when no hierarchy is writable.
pub(super) fn create(
    hierarchies: &[V1Hierarchy],
    name: &str,
    limits: &CgroupLimits,
) -> Result<Option<RunCgroup>, CgroupError> {
    let mut run = RunCgroup::new(1);
    let mut seen = Vec::new();
    for hierarchy in hierarchies {
        let parent = hierarchy.own_dir();
        let dir = parent.join(name);
        // Two controllers on one hierarchy ("cpu,cpuacct" and "cpu") share the directory.
        if !seen.contains(&dir) {
            match std::fs::create_dir(&dir) {
                Ok(()) => seen.push(dir.clone()),
                Err(e) if not_ours(&e) => continue,
                Err(e) => return finish(run, Err(io_err("create cgroup", &dir)(e))),
            }
        }
        let kind = match hierarchy.controller {
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
