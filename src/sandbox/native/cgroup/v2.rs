//! cgroup v2: one directory in the unified hierarchy, next to the leaf this process moves
//! into so that the parent may enable controllers for its children
//! (Documentation/admin-guide/cgroup-v2.rst, "No Internal Process Constraint").
//!
//! Limits and the move into the leaf go through cgroups-rs. Making the directory and
//! writing `cgroup.subtree_control` are done here: the crate's v2 create enables
//! controllers on every ancestor, reading the list from the machine's
//! `/sys/fs/cgroup/cgroup.controllers` whatever the root, and ignores failed writes, while
//! we must know whether the delegation held (else the limits would silently not apply).

use std::io::ErrorKind;
use std::path::Path;

use cgroups_rs::CgroupPid;

use super::run::{RunCgroup, finish, io_not_ours};
use super::subtree::{OwnSubtree, os_error};
use super::{CgroupError, CgroupLimits, HOST_LEAF, io_err};
use crate::sandbox::disks::BlockDevice;

/// The controllers a run cgroup uses, where the parent offers them.
const CONTROLLERS: [&str; 4] = ["memory", "pids", "cpu", "io"];

/// Creates `base/name` and sets `limits` there. `Ok(None)` when `base` is not writable or
/// cannot delegate controllers to its children.
pub(super) fn create(
    base: &Path,
    name: &str,
    limits: &CgroupLimits,
    disks: &[BlockDevice],
) -> Result<Option<RunCgroup>, CgroupError> {
    if !base.is_dir() {
        return Ok(None);
    }
    let dir = base.join(name);
    match std::fs::create_dir(&dir) {
        // A name is never reused while its owner lives, so an existing directory is ours.
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) if io_not_ours(&e) => return Ok(None),
        Err(e) => return Err(io_err("create cgroup", &dir)(e)),
    }
    let available = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let wanted: Vec<&'static str> = CONTROLLERS
        .into_iter()
        .filter(|c| available.split_whitespace().any(|a| a == *c))
        .collect();
    let subtree = OwnSubtree::V2 {
        base: base.to_owned(),
        controllers: wanted.clone(),
    };
    let mut run = RunCgroup::new(subtree.clone(), name);
    let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
    if wanted
        .iter()
        .any(|c| !enabled.split_whitespace().any(|e| e == *c))
        && delegate(&subtree, base, &wanted).is_err()
    {
        // No delegation: the cgroup still groups and kills the run, but limits nothing.
        run.discard();
        return Ok(None);
    }
    // v2's swap.max counts swap alone: none at all keeps memory + swap at the memory limit.
    let swap = dir.join("memory.swap.max").exists().then_some(0);
    let result = run.set_limits(limits, swap, disks);
    finish(run, result)
}

/// Moves every process of `base` into our leaf, then enables `wanted` for `base`'s children.
fn delegate(subtree: &OwnSubtree, base: &Path, wanted: &[&str]) -> Result<(), CgroupError> {
    let leaf = base.join(HOST_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("create cgroup", &leaf)(e)),
    }
    let (here, there) = (subtree.cgroup(""), subtree.cgroup(HOST_LEAF));
    for pid in here.procs() {
        match there.add_task_by_tgid(CgroupPid::from(pid.pid)) {
            Ok(()) => {}
            // A process that exited meanwhile.
            Err(e) if os_error(&e) == Some(libc::ESRCH) => {}
            Err(source) => {
                return Err(CgroupError::Cgroupfs {
                    what: "move into our leaf",
                    name: HOST_LEAF.to_owned(),
                    source,
                });
            }
        }
    }
    let control: Vec<String> = wanted.iter().map(|c| format!("+{c}")).collect();
    let file = base.join("cgroup.subtree_control");
    std::fs::write(&file, control.join(" ")).map_err(io_err("write", &file))
}
