//! Where this process sits in the cgroup hierarchies (`/proc/self/cgroup`, cgroups(7)) and
//! where its run cgroups go: directly below our own cgroup on v1; on v2 below our own cgroup
//! too, or next to our leaf once we moved into it ([`HOST_LEAF`]).

use std::path::{Path, PathBuf};

use super::{CgroupError, CgroupHost, HOST_LEAF};

/// The v1 controllers a run cgroup uses, in the order they are reported.
pub(super) const V1_CONTROLLERS: [&str; 4] = ["memory", "pids", "cpu", "blkio"];

/// One v1 controller we use: its hierarchy and our cgroup in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct V1Hierarchy {
    /// `memory`, `pids`, `cpu` or `blkio`.
    pub controller: &'static str,
    /// Where its hierarchy is mounted (`/sys/fs/cgroup/cpu,cpuacct`).
    pub dir: PathBuf,
    /// Our cgroup in it, as /proc/self/cgroup names it (`/user.slice`).
    pub path: String,
}

impl V1Hierarchy {
    /// Our own cgroup's directory in this hierarchy: run cgroups are made below it.
    pub fn own_dir(&self) -> PathBuf {
        self.dir.join(self.path.trim_start_matches('/'))
    }
}

/// Our place in the hierarchies, as /proc/self/cgroup gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// The unified hierarchy at the cgroupfs root, our cgroup at `path` below it.
    V2 {
        /// Our cgroup (`/user.slice/serve`).
        path: String,
    },
    /// v1: each of [`V1_CONTROLLERS`] whose hierarchy is mounted, in that order.
    V1 {
        /// Empty when none of memory, pids, cpu and blkio is mounted.
        hierarchies: Vec<V1Hierarchy>,
    },
}

impl Placement {
    /// Our own cgroup(s), in a few words: `ours: /user.slice` on v2; `memory at /a, pids at
    /// /, cpu at /` on v1.
    pub fn ours(&self) -> String {
        match self {
            Placement::V2 { path } => format!("ours: {path}"),
            Placement::V1 { hierarchies } if hierarchies.is_empty() => {
                "no memory, pids, cpu or blkio hierarchy".into()
            }
            Placement::V1 { hierarchies } => hierarchies
                .iter()
                .map(|h| format!("{} at {}", h.controller, h.path))
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}

impl CgroupHost {
    /// Reads our place from /proc/self/cgroup: v2 when the cgroupfs root has
    /// `cgroup.controllers` (a pure v2 host), else the v1 hierarchies of memory, pids, cpu
    /// and blkio that are mounted.
    ///
    /// # Errors
    /// [`CgroupError::SelfCgroup`] when /proc/self/cgroup cannot be read, or has no `0::`
    /// line on a v2 host.
    pub fn placement(&self) -> Result<Placement, CgroupError> {
        let text = std::fs::read_to_string(&self.self_cgroup_file).map_err(|e| {
            CgroupError::SelfCgroup {
                path: self.self_cgroup_file.clone(),
                why: e.to_string(),
            }
        })?;
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
        let hierarchies = V1_CONTROLLERS
            .into_iter()
            .filter_map(|controller| self.v1_hierarchy(&text, controller))
            .collect();
        Ok(Placement::V1 { hierarchies })
    }

    /// On v1, our own cgroup's directory in the hierarchy of the `freezer` controller, when
    /// one is mounted: a run's processes are born there, and are put back there to be
    /// thawed when they must die (see [`super::RunCgroup::kill_all`]). `None` on v2 (its
    /// freezer lets a fatal signal through) and where /proc/self/cgroup cannot be read.
    pub(super) fn own_freezer(&self) -> Option<PathBuf> {
        if self.fs_root.join("cgroup.controllers").exists() {
            return None;
        }
        let text = std::fs::read_to_string(&self.self_cgroup_file).ok()?;
        self.v1_hierarchy(&text, "freezer").map(|h| h.own_dir())
    }

    /// The hierarchy of the v1 `controller` as /proc/self/cgroup's `text` names it, when it
    /// is mounted.
    fn v1_hierarchy(&self, text: &str, controller: &'static str) -> Option<V1Hierarchy> {
        for line in text.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(_), Some(names), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if !names.split(',').any(|n| n == controller) {
                continue;
            }
            // The hierarchy is mounted under its joined name ("cpu,cpuacct"), often with a
            // symlink per controller; take whichever exists.
            let dir = [self.fs_root.join(names), self.fs_root.join(controller)]
                .into_iter()
                .find(|d| d.is_dir())?;
            return Some(V1Hierarchy {
                controller,
                dir,
                path: path.to_owned(),
            });
        }
        None
    }

    /// On v2, the directory run cgroups go in, given our own cgroup `own`: our cgroup, or
    /// its parent once we live in our leaf.
    pub(super) fn v2_base(&self, own: &str) -> PathBuf {
        let own_dir = self.fs_root.join(own.trim_start_matches('/'));
        if own_dir.file_name().is_some_and(|n| n == HOST_LEAF) {
            own_dir.parent().map(Path::to_owned).unwrap_or(own_dir)
        } else {
            own_dir
        }
    }
}
