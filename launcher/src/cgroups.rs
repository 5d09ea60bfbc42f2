//! Stage 1: join the run's cgroups (created by the host) before anything is unshared.
//!
//! Moving the launcher into each of the run's cgroups means every process it starts is born
//! inside, so the memory, pids and cpu limits cover the whole sandbox, and the cgroup
//! namespace created in stage 2 is rooted at the run's cgroup. See cgroups(7), "Creating
//! cgroups and moving processes".
//!
//! On a cgroup v1 hierarchy the launcher writes `0` to the cgroup's `tasks` file, which moves
//! the calling thread. The launcher is single-threaded at stage 1, so that thread is the whole
//! process, and the sandbox, cloned from it, is born inside all the same. The reason is speed:
//! a write to `cgroup.procs` (a whole thread group) takes the kernel's global threadgroup
//! lock, whose write side waits for an RCU grace period when no other move happened just
//! before (7-15 ms of a cold start on a 2-core VM with Linux 6.18); moving only the caller's
//! own thread skips that lock (`cgroup_procs_write_start` in kernel/cgroup/cgroup.c; a kernel
//! without that shortcut takes the lock either way, as for `cgroup.procs`). cgroup v2 allows no single-thread move out of a
//! domain cgroup, so there, and when `tasks` cannot be written, the pid goes to
//! `cgroup.procs`.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Joining a cgroup failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupJoinError {
    /// The write of our pid to a `cgroup.procs` file failed (after the write to its v1
    /// `tasks` file, if there is one, failed too).
    #[error("failed to join cgroup {path}: {source} (does the host still own this cgroup?)")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Moves the calling process, `pid`, which must be single-threaded, into the cgroup of every
/// `cgroup.procs` file in `procs_files`, in order: by `0` written to the `tasks` file beside
/// it where there is one (cgroup v1, see the module doc), else by `pid` written to it.
///
/// Errors: the first cgroup that cannot be joined (e.g. `ENOENT` when the host removed the
/// cgroup, `EACCES` when it is not ours).
pub fn join(procs_files: &[PathBuf], pid: i32) -> Result<(), CgroupJoinError> {
    procs_files.iter().try_for_each(|path| {
        let tasks = path.with_file_name("tasks");
        let v1 = path.file_name().is_some_and(|name| name == "cgroup.procs") && tasks.exists();
        if v1 && write_line(&tasks, "0").is_ok() {
            return Ok(());
        }
        write_line(path, &pid.to_string()).map_err(|source| CgroupJoinError::Write {
            path: path.to_owned(),
            source,
        })
    })
}

fn write_line(path: &Path, text: &str) -> std::io::Result<()> {
    // cgroupfs wants the whole number in one write(2); no O_CREAT: the file must exist.
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{text}\n").as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_writes_its_pid_into_every_cgroup_procs_file_it_is_given() {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = ["memory", "pids"]
            .iter()
            .map(|c| {
                let path = dir.path().join(c).join("cgroup.procs");
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, "").unwrap();
                path
            })
            .collect();
        join(&files, 4242).unwrap();
        for f in &files {
            assert_eq!(std::fs::read_to_string(f).unwrap(), "4242\n");
        }
    }

    #[test]
    fn on_cgroup_v1_the_launcher_moves_its_own_thread_through_the_tasks_file() {
        let dir = tempfile::tempdir().unwrap();
        let v1 = dir.path().join("memory");
        let v2 = dir.path().join("unified");
        for d in [&v1, &v2] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("cgroup.procs"), "").unwrap();
        }
        std::fs::write(v1.join("tasks"), "").unwrap();
        join(&[v1.join("cgroup.procs"), v2.join("cgroup.procs")], 4242).unwrap();
        assert_eq!(std::fs::read_to_string(v1.join("tasks")).unwrap(), "0\n");
        assert_eq!(
            std::fs::read_to_string(v1.join("cgroup.procs")).unwrap(),
            ""
        );
        assert_eq!(
            std::fs::read_to_string(v2.join("cgroup.procs")).unwrap(),
            "4242\n"
        );
    }

    #[test]
    fn a_missing_cgroup_is_an_error_naming_the_file() {
        let err = join(&[PathBuf::from("/nonexistent/cgroup.procs")], 1).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("failed to join cgroup /nonexistent/cgroup.procs"),
            "{msg}"
        );
    }
}
