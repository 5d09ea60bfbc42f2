//! The directories rootfs builds assemble their tree in, and the sweep of those left behind.
//!
//! A build works in `<cache root>/.rootfs-build-XXXXXX/` and holds an exclusive `flock(2)` on
//! that directory for as long as it runs. A build that ends normally removes its directory;
//! one that was killed (SIGKILL, or a `serve` whose client left while the first rootfs was
//! being built and which exited without unwinding) cannot, but the kernel drops its lock. So
//! every later build first removes each such directory it can lock, once the directory is
//! older than [`STALE_AFTER`] (a build that has just made its directory and not yet locked it
//! is never taken for a dead one).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use tempfile::TempDir;

use super::RootfsError;

/// The name prefix of a build directory in the cache root.
pub(crate) const STAGING_PREFIX: &str = ".rootfs-build-";

/// How old an unlocked build directory must be (by its modification time) to be removed.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(60);

/// A build directory, locked while this value lives and removed with it.
pub(crate) struct Staging {
    // Dropped first: the tree goes while the lock still keeps sweepers out.
    dir: TempDir,
    _lock: Flock<File>,
}

impl Staging {
    /// A new, locked build directory in `root`.
    ///
    /// Errors: the directory cannot be made or opened ([`RootfsError::Io`]), or locked
    /// (`flock` failing on this filesystem).
    pub(crate) fn new(root: &Path) -> Result<Self, RootfsError> {
        let dir = tempfile::Builder::new()
            .prefix(STAGING_PREFIX)
            .tempdir_in(root)
            .map_err(super::io_err("create a build directory in", root))?;
        let file = File::open(dir.path()).map_err(super::io_err("open", dir.path()))?;
        let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
            .map_err(|(_, errno)| super::io_err("lock", dir.path())(std::io::Error::from(errno)))?;
        Ok(Self { dir, _lock: lock })
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the build directories in `root` that no build holds and that are older than
/// [`STALE_AFTER`]; returns the paths removed. Best effort: an entry that cannot be read,
/// locked or removed is left as it is.
pub(crate) fn sweep(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let is_staging = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.starts_with(STAGING_PREFIX));
        // A symlink is never followed: it would point the removal elsewhere.
        let is_dir = entry.file_type().is_ok_and(|kind| kind.is_dir());
        if is_staging && is_dir && remove_if_abandoned(&entry.path()) {
            removed.push(entry.path());
        }
    }
    removed
}

fn remove_if_abandoned(dir: &Path) -> bool {
    let Ok(file) = File::open(dir) else {
        return false;
    };
    let old_enough = file
        .metadata()
        .and_then(|meta| meta.modified())
        .is_ok_and(|modified| modified.elapsed().is_ok_and(|age| age >= STALE_AFTER));
    if !old_enough {
        return false;
    }
    // Held while removing, so a build cannot take the directory meanwhile.
    let Ok(_lock) = Flock::lock(file, FlockArg::LockExclusiveNonblock) else {
        return false; // a build is using it
    };
    fs::remove_dir_all(dir).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    fn age(dir: &Path, by: Duration) {
        let file = File::open(dir).unwrap();
        file.set_modified(SystemTime::now() - by).unwrap();
    }

    fn left_behind(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        fs::create_dir_all(dir.join("tree/usr/bin")).unwrap();
        fs::write(dir.join("tree/usr/bin/python3"), b"x").unwrap();
        age(&dir, STALE_AFTER + Duration::from_secs(5));
        dir
    }

    #[test]
    fn a_build_directory_whose_builder_is_gone_is_removed_by_the_next_sweep() {
        let root = tempfile::tempdir().unwrap();
        let dir = left_behind(root.path(), ".rootfs-build-dead01");
        assert_eq!(sweep(root.path()), vec![dir.clone()]);
        assert!(!dir.exists());
    }

    #[test]
    fn a_build_directory_in_use_is_kept_however_old() {
        let root = tempfile::tempdir().unwrap();
        let staging = Staging::new(root.path()).unwrap();
        fs::create_dir(staging.path().join("tree")).unwrap();
        age(staging.path(), STALE_AFTER * 10);
        assert!(sweep(root.path()).is_empty());
        assert!(staging.path().join("tree").exists());
    }

    #[test]
    fn a_young_unlocked_build_directory_is_kept() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(".rootfs-build-young1");
        fs::create_dir(&dir).unwrap();
        assert!(sweep(root.path()).is_empty());
        assert!(dir.exists());
    }

    #[test]
    fn only_build_directories_are_swept_and_symlinks_are_not_followed() {
        let root = tempfile::tempdir().unwrap();
        let rootfs = left_behind(root.path(), "rootfs-0123456789abcdef");
        let elsewhere = tempfile::tempdir().unwrap();
        let target = left_behind(elsewhere.path(), "keep");
        std::os::unix::fs::symlink(&target, root.path().join(".rootfs-build-link01")).unwrap();
        assert!(sweep(root.path()).is_empty());
        assert!(rootfs.exists() && target.join("tree").exists());
    }

    #[test]
    fn a_finished_build_leaves_no_directory_behind() {
        let root = tempfile::tempdir().unwrap();
        let path = {
            let staging = Staging::new(root.path()).unwrap();
            staging.path().to_path_buf()
        };
        assert!(!path.exists());
    }
}
