//! The host's block devices, for the disk I/O limits of a run.
//!
//! A sandbox writes nothing to a disk (its root is read-only, `/tmp` a tmpfs), but it can
//! read: `O_DIRECT` reads of the rootfs, and reads of rootfs pages the page cache does not
//! hold, go to the disk the rootfs lies on (600+ MiB/s measured without a limit). The run's
//! cgroup (v1 `blkio.throttle.*`, v2 `io.max`) and Docker (`--device-read-bps` and its
//! siblings) throttle I/O per device, and the kernel takes only whole disks, not partitions
//! (Documentation/admin-guide/cgroup-v1/blkio-controller.rst, "Throttling/Upper Limit
//! policy"; cgroup-v2.rst, "IO Interface Files"). So every whole disk of the host gets the
//! limits: whichever one the rootfs, Docker's storage or a loop device behind them lies on.

use std::path::Path;

/// One whole disk, as `/sys/block/NAME/dev` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDevice {
    /// The kernel's name (`vda`, `nvme0n1`, `loop0`); `/dev/NAME` is its node on most hosts.
    pub name: String,
    /// The device number's major part.
    pub major: u64,
    /// The device number's minor part.
    pub minor: u64,
}

/// The whole disks listed in `sys_block` (the host's is `/sys/block`), sorted by name.
/// A directory whose `dev` file is missing or not `MAJOR:MINOR` is skipped; an unreadable
/// `sys_block` gives none.
pub(crate) fn whole_disks(sys_block: &Path) -> Vec<BlockDevice> {
    let Ok(entries) = std::fs::read_dir(sys_block) else {
        return Vec::new();
    };
    let mut disks: Vec<BlockDevice> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let dev = std::fs::read_to_string(entry.path().join("dev")).ok()?;
            let (major, minor) = dev.trim().split_once(':')?;
            Some(BlockDevice {
                name: entry.file_name().to_str()?.to_owned(),
                major: major.parse().ok()?,
                minor: minor.parse().ok()?,
            })
        })
        .collect();
    disks.sort_by(|a, b| a.name.cmp(&b.name));
    disks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_disks_are_read_from_each_dev_file_and_junk_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        for (name, dev) in [("vda", "254:0\n"), ("loop1", "7:1\n"), ("odd", "x\n")] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
            std::fs::write(dir.path().join(name).join("dev"), dev).unwrap();
        }
        std::fs::create_dir(dir.path().join("nodev")).unwrap();
        let names: Vec<(String, u64, u64)> = whole_disks(dir.path())
            .into_iter()
            .map(|d| (d.name, d.major, d.minor))
            .collect();
        assert_eq!(names, [("loop1".into(), 7, 1), ("vda".into(), 254, 0)]);
        assert!(whole_disks(&dir.path().join("absent")).is_empty());
    }

    #[test]
    fn this_host_has_at_least_one_whole_disk() {
        // Every test host has a disk (or a virtual one); the limits would be empty otherwise.
        assert!(!whole_disks(Path::new("/sys/block")).is_empty());
    }
}
