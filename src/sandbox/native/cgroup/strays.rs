//! Removing the run cgroups of processes that died without cleaning up (killed with
//! SIGKILL, say), by the one owner rule of [`crate::sandbox::owner`].

use super::CgroupHost;
use super::run::{Controller, RunCgroup};
use crate::sandbox::owner::RunName;

impl CgroupHost {
    /// Removes run cgroups left by an earlier process that died without cleaning up: the
    /// children of the directories our runs go in whose name is a [`RunName`] of a dead
    /// owner. Their processes are killed first. Returns how many it removed; best effort,
    /// never fails.
    pub fn remove_strays(&self) -> usize {
        let Ok(parents) = self.run_parents() else {
            return 0;
        };
        let mut removed = 0;
        for (version, parent) in parents {
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                if !RunName::is_stray(&entry.file_name().to_string_lossy()) {
                    continue;
                }
                let controller = if version == 2 {
                    Controller::Unified
                } else {
                    Controller::Pids
                };
                let mut run = RunCgroup::new(version);
                run.dirs.push((controller, entry.path()));
                if run.remove().is_ok() {
                    removed += 1;
                }
            }
        }
        removed
    }
}
