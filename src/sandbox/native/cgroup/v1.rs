//! cgroup v1: one directory per controller (memory, pids, cpu, blkio), each below our own cgroup in
//! that controller's hierarchy (Documentation/admin-guide/cgroup-v1/memory.rst, pids.rst,
//! blkio-controller.rst;
//! Documentation/scheduler/sched-bwc.rst), made and limited through cgroups-rs.

use super::placement::V1Hierarchy;
use super::run::{RunCgroup, finish};
use super::subtree::{OwnSubtree, not_ours};
use super::{CgroupError, CgroupLimits};
use crate::sandbox::disks::BlockDevice;

/// Creates `name` below our cgroup in each hierarchy we can write and sets `limits` there.
/// `Ok(None)` when no hierarchy is writable.
pub(super) fn create(
    hierarchies: &[V1Hierarchy],
    name: &str,
    limits: &CgroupLimits,
    disks: &[BlockDevice],
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
    // v1's memsw counts memory and swap together: the same value leaves no room for swap.
    let swap = swap.then_some(limits.memory_bytes);
    let result = run.set_limits(limits, swap, disks);
    finish(run, result)
}
