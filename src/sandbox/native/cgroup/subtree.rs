//! The part of the cgroup tree below our own cgroup, as cgroups-rs sees it.
//!
//! cgroups-rs finds v1 mounts in the real `/proc/self/mountinfo` and v2 at the real
//! `/sys/fs/cgroup`. Its [`Hierarchy`] trait is public, though, so we hand it our own: the
//! roots are our own cgroup's directories from [`Placement`](super::Placement) (on the real
//! host or in a fake cgroupfs), and a run cgroup is one path component below them. Creating,
//! limiting, joining and removing then go through the crate's controllers.

use std::path::PathBuf;

use cgroups_rs::fs::blkio::BlkIoController;
use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::error::Error as CrateError;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{Cgroup, Hierarchy, Subsystem};

use super::placement::V1Hierarchy;

/// Where run cgroups are made, with the controllers they get.
#[derive(Debug, Clone)]
pub(super) enum OwnSubtree {
    /// v1: one directory per controller, below our own cgroup in its hierarchy.
    V1(Vec<V1Hierarchy>),
    /// v2: below `base` (our cgroup, or its parent once we live in our leaf), with the
    /// controllers `base` delegates to its children.
    V2 {
        base: PathBuf,
        controllers: Vec<&'static str>,
    },
}

impl OwnSubtree {
    /// The crate's handle of the child `name` (nothing is created).
    pub(super) fn cgroup(&self, name: &str) -> Cgroup {
        Cgroup::load(Box::new(self.clone()), name)
    }

    /// The directories of the child `name`, one per hierarchy, without repeats.
    pub(super) fn dirs(&self, name: &str) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let all = match self {
            OwnSubtree::V1(hierarchies) => hierarchies.iter().map(|h| h.own_dir()).collect(),
            OwnSubtree::V2 { base, .. } => vec![base.clone()],
        };
        for dir in all {
            let dir = dir.join(name);
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        dirs
    }
}

/// Whether a crate error is one of "not our place to write" (missing, read-only or not
/// permitted): then the caller falls back to rlimits rather than fails.
pub(super) fn not_ours(e: &CrateError) -> bool {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .is_some_and(super::run::io_not_ours)
}

/// The OS error under a crate error, if any.
pub(super) fn os_error(e: &CrateError) -> Option<i32> {
    std::error::Error::source(e)
        .and_then(|s| s.downcast_ref::<std::io::Error>())
        .and_then(std::io::Error::raw_os_error)
}

fn subsystem(controller: &str, dir: PathBuf, v2: bool) -> Option<Subsystem> {
    // The second path is the controller's "base"; only the first (where the files are) is
    // used for the controllers we need.
    match controller {
        "memory" => Some(Subsystem::Mem(MemController::new(dir.clone(), dir, v2))),
        "pids" => Some(Subsystem::Pid(PidController::new(dir.clone(), dir, v2))),
        "cpu" => Some(Subsystem::Cpu(CpuController::new(dir.clone(), dir, v2))),
        // v1 calls it blkio, v2 io; the crate's controller writes either's files.
        "blkio" | "io" => Some(Subsystem::BlkIo(BlkIoController::new(dir.clone(), dir, v2))),
        _ => None,
    }
}

impl Hierarchy for OwnSubtree {
    fn subsystems(&self) -> Vec<Subsystem> {
        match self {
            OwnSubtree::V1(hierarchies) => hierarchies
                .iter()
                .filter_map(|h| subsystem(h.controller, h.own_dir(), false))
                .collect(),
            OwnSubtree::V2 { base, controllers } => controllers
                .iter()
                .filter_map(|c| subsystem(c, base.clone(), true))
                .collect(),
        }
    }

    fn root(&self) -> PathBuf {
        match self {
            OwnSubtree::V1(hierarchies) => hierarchies
                .first()
                .map(V1Hierarchy::own_dir)
                .unwrap_or_default(),
            OwnSubtree::V2 { base, .. } => base.clone(),
        }
    }

    fn root_control_group(&self) -> Cgroup {
        self.cgroup("")
    }

    fn parent_control_group(&self, _path: &str) -> Cgroup {
        // Run cgroups are one component deep: their parent is the root of this subtree.
        self.cgroup("")
    }

    fn v2(&self) -> bool {
        matches!(self, OwnSubtree::V2 { .. })
    }
}
