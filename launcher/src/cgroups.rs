//! Stage 1: join the run's cgroups (created by the host) before anything is unshared.
//!
//! Writing our own pid to each `cgroup.procs` moves the launcher; every process it starts is
//! then born inside, so the memory, pids and cpu limits cover the whole sandbox, and the
//! cgroup namespace created in stage 2 is rooted at the run's cgroup. See cgroups(7),
//! "Creating cgroups and moving processes".

use std::io::Write;
use std::path::{Path, PathBuf};

/// Joining a cgroup failed.
#[derive(Debug, thiserror::Error)]
pub enum CgroupJoinError {
    /// The write of our pid to a `cgroup.procs` file failed.
    #[error("failed to join cgroup {path}: {source} (does the host still own this cgroup?)")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Writes `pid` to every `cgroup.procs` file in `procs_files`, in order.
///
/// Errors: the first file that cannot be opened or written (e.g. `ENOENT` when the host
/// removed the cgroup, `EACCES` when it is not ours).
pub fn join(procs_files: &[PathBuf], pid: i32) -> Result<(), CgroupJoinError> {
    procs_files.iter().try_for_each(|path| write_pid(path, pid))
}

fn write_pid(path: &Path, pid: i32) -> Result<(), CgroupJoinError> {
    // cgroupfs wants the whole number in one write(2); no O_CREAT: the file must exist.
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{pid}\n").as_bytes()))
        .map_err(|source| CgroupJoinError::Write {
            path: path.to_owned(),
            source,
        })
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
    fn a_missing_cgroup_is_an_error_naming_the_file() {
        let err = join(&[PathBuf::from("/nonexistent/cgroup.procs")], 1).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("failed to join cgroup /nonexistent/cgroup.procs"),
            "{msg}"
        );
    }
}
