//! cgroup v2: one directory in the unified hierarchy, next to the leaf this process moves
//! into so that the parent may enable controllers for its children
//! (Documentation/admin-guide/cgroup-v2.rst, "No Internal Process Constraint").

use std::io::ErrorKind;
use std::path::Path;

use super::run::{Controller, RunCgroup, finish, not_ours, write};
use super::{CPU_PERIOD_US, CgroupError, CgroupLimits, HOST_LEAF, io_err};

/// The controllers a run cgroup uses, where the parent offers them.
const CONTROLLERS: [&str; 3] = ["memory", "pids", "cpu"];

/// Creates `base/name` and sets `limits` there. `Ok(None)` when `base` is not writable or
/// cannot delegate controllers to its children.
pub(super) fn create(
    base: &Path,
    name: &str,
    limits: &CgroupLimits,
) -> Result<Option<RunCgroup>, CgroupError> {
    let dir = base.join(name);
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if not_ours(&e) => return Ok(None),
        Err(e) => return Err(io_err("create cgroup", &dir)(e)),
    }
    let mut run = RunCgroup::new(2);
    run.dirs.push((Controller::Unified, dir.clone()));
    // Move ourselves into a leaf so `base` has no processes and may delegate controllers.
    let available = std::fs::read_to_string(base.join("cgroup.controllers")).unwrap_or_default();
    let wanted: Vec<&str> = CONTROLLERS
        .into_iter()
        .filter(|c| available.split_whitespace().any(|a| a == *c))
        .collect();
    let enabled = std::fs::read_to_string(base.join("cgroup.subtree_control")).unwrap_or_default();
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
            .and_then(|()| move_all_processes(base, &leaf));
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

fn move_all_processes(from: &Path, to: &Path) -> std::io::Result<()> {
    let procs = to.join("cgroup.procs");
    for pid in std::fs::read_to_string(from.join("cgroup.procs"))?.split_whitespace() {
        match std::fs::write(&procs, pid) {
            // A process that exited meanwhile.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
            other => other?,
        }
    }
    Ok(())
}
