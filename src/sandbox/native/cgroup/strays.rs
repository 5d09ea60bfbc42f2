//! Removing the run cgroups of processes that died without cleaning up (killed with
//! SIGKILL, say), by the one owner rule of [`crate::sandbox::owner`].
//!
//! Two sweeps: next to our own run cgroups, a dead owner's run is killed and removed; and,
//! since a dead process may have sat elsewhere in a hierarchy (a v1 memory cgroup of its
//! own while it shared our pids cgroup, say), every other cgroup of each hierarchy is
//! searched too, where a dead owner's run is only removed when it is empty (rmdir(2) of a
//! cgroup with processes or children fails with EBUSY), so nothing that runs is touched.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use super::run::RunCgroup;
use super::subtree::OwnSubtree;
use super::{CgroupHost, Placement};
use crate::sandbox::owner::RunName;

impl CgroupHost {
    /// Removes run cgroups left by an earlier process that died without cleaning up: the
    /// children of the directories our runs go in whose name is a [`RunName`] of a dead
    /// owner, their processes killed first; then, anywhere else in those hierarchies, the
    /// empty run cgroups of dead owners ([`remove_empty_strays_below`]). Returns how many it
    /// removed; best effort, never fails.
    pub fn remove_strays(&self) -> usize {
        // Each hierarchy on its own: a stray may exist in some and not in others.
        // (The hierarchies' mounts are where the search of the second sweep starts.)
        let (subtrees, roots): (Vec<OwnSubtree>, Vec<PathBuf>) = match self.placement() {
            Ok(Placement::V2 { path }) => (
                vec![OwnSubtree::V2 {
                    base: self.v2_base(&path),
                    controllers: Vec::new(),
                }],
                vec![self.fs_root.clone()],
            ),
            Ok(Placement::V1 { hierarchies }) => {
                let roots = hierarchies.iter().map(|h| h.dir.clone()).collect();
                let subtrees = hierarchies
                    .into_iter()
                    .map(|h| OwnSubtree::V1(vec![h]))
                    .collect();
                (subtrees, roots)
            }
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
                    && RunCgroup::new(subtree.clone(), &name)
                        .thawed_in(self.own_freezer())
                        .remove()
                        .is_ok()
                {
                    removed += 1;
                }
            }
        }
        removed
            + roots
                .iter()
                .map(|root| remove_empty_strays_below(root))
                .sum::<usize>()
    }
}

/// Most cgroups one hierarchy's search reads, and how deep it goes below the root: a bound
/// on the time a start spends on hosts with very many cgroups.
const MOST_CGROUPS_SEARCHED: usize = 20_000;
const DEEPEST_SEARCHED: usize = 12;

/// Removes, anywhere below `root` (a hierarchy's mount), the run cgroups of dead owners
/// that hold no process and no child cgroup, with a plain rmdir(2): one that is busy, or
/// not ours to remove, stays. Run cgroups are not searched inside. Returns how many went.
fn remove_empty_strays_below(root: &Path) -> usize {
    let mut removed = 0;
    let mut searched = 0;
    let mut queue = VecDeque::from([(root.to_path_buf(), 0)]);
    while let Some((dir, depth)) = queue.pop_front() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            searched += 1;
            if searched > MOST_CGROUPS_SEARCHED {
                return removed;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if RunName::parse(&name).is_some() {
                if RunName::is_stray(&name) && std::fs::remove_dir(entry.path()).is_ok() {
                    removed += 1;
                }
            } else if depth < DEEPEST_SEARCHED {
                queue.push_back((entry.path(), depth + 1));
            }
        }
    }
    removed
}
