//! Removing the run cgroups of processes that died without cleaning up (killed with
//! SIGKILL, say), by the one owner rule of [`crate::sandbox::owner`].

use super::run::RunCgroup;
use super::subtree::OwnSubtree;
use super::{CgroupHost, Placement};
use crate::sandbox::owner::RunName;

impl CgroupHost {
    /// Removes run cgroups left by an earlier process that died without cleaning up: the
    /// children of the directories our runs go in whose name is a [`RunName`] of a dead
    /// owner. Their processes are killed first. Returns how many it removed; best effort,
    /// never fails.
    pub fn remove_strays(&self) -> usize {
        // Each hierarchy on its own: a stray may exist in some and not in others.
        let subtrees = match self.placement() {
            Ok(Placement::V2 { path }) => vec![OwnSubtree::V2 {
                base: self.v2_base(&path),
                controllers: Vec::new(),
            }],
            Ok(Placement::V1 { hierarchies }) => hierarchies
                .into_iter()
                .map(|h| OwnSubtree::V1(vec![h]))
                .collect(),
            Err(_) => return 0,
        };
        let mut removed = 0;
        for subtree in subtrees {
            let Some(parent) = subtree.dirs("").into_iter().next() else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(&parent) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if RunName::is_stray(&name)
                    && RunCgroup::new(subtree.clone(), &name).remove().is_ok()
                {
                    removed += 1;
                }
            }
        }
        removed
    }
}
