//! Stage 1b: device nodes of the run's own, for a root caller.
//!
//! The sandbox's `/dev` gets four nodes ([`mounts::DEVICES`](crate::mounts::DEVICES)),
//! bound by path from `/dev` as the launcher sees it. Bound from the host's `/dev` they are
//! the host's own inodes, and a POSIX record lock on one (`fcntl` `F_SETLK`, which seccomp
//! must allow for sqlite3, and which it cannot tell from a lock on a file in `/tmp`) is seen
//! by the host and by every other run (`F_GETLK`): a covert channel between concurrent runs.
//! A user namespace cannot make device nodes that open (a filesystem mounted there is
//! nodev), but a caller with `CAP_MKNOD` in the initial user namespace (root) can, before
//! the clone: the launcher moves into a mount namespace of its own, makes every mount in it
//! private (so nothing it mounts reaches the host), mounts a small tmpfs on `/dev` and makes
//! the four nodes there with the host's device numbers, mode 0666, owner root. The
//! sandbox's clone copies that namespace, and `mounts` binds the nodes by the same paths
//! (then read-only). They go away with the launcher's and the sandbox's namespaces.
//!
//! Anyone else keeps the host's nodes (the caller cannot make nodes): [`make_own`] returns
//! `false` and leaves every mount as it was. Sources: mknod(2), mount_namespaces(7)
//! ("Restrictions on mount namespaces": mounts copied into a less privileged namespace keep
//! working devices; a filesystem mounted inside a user namespace is nodev),
//! user_namespaces(7).

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;

use crate::mounts::DEVICES;
use crate::sys;

/// Size of the tmpfs the nodes are made in, in bytes: four inodes, no data.
const DEV_TMPFS_BYTES: u64 = 4096;

/// Makes `/dev` of this process (and of the sandbox it clones next) a tmpfs holding new
/// [`DEVICES`] nodes with the numbers of the host's, when the caller may (effective uid 0
/// and `CAP_MKNOD` in the initial user namespace). Returns whether it did. On any failure
/// it undoes what it mounted and returns `false`, so the sandbox gets the host's nodes as
/// before; once the mounts are private, nothing it does is visible outside this process.
/// Must run before the clone and while single-threaded (unshare(2) of a mount namespace).
pub fn make_own() -> bool {
    if sys::effective_ids().0 != 0 {
        return false;
    }
    // The host's numbers, read before anything hides them.
    let mut numbers = Vec::new();
    for name in DEVICES {
        match std::fs::metadata(Path::new("/dev").join(name)) {
            Ok(m) if m.file_type().is_char_device() => numbers.push((name, m.rdev())),
            _ => return false,
        }
    }
    if sys::unshare(libc::CLONE_NEWNS).is_err() || sys::make_root_private().is_err() {
        // A new mount namespace whose mounts still propagate must get no mount: stop here.
        return false;
    }
    let dev = Path::new("/dev");
    let Ok(data) = sys::cstring(format!("size={DEV_TMPFS_BYTES},mode=755").as_ref()) else {
        return false;
    };
    let flags = libc::MS_NOSUID | libc::MS_NOEXEC;
    if sys::mount(
        Some(Path::new("tmpfs")),
        dev,
        Some(c"tmpfs"),
        flags,
        Some(&data),
    )
    .is_err()
    {
        return false;
    }
    let made = numbers.iter().all(|&(name, rdev)| {
        let node = dev.join(name);
        sys::mknod_char(&node, 0o666, rdev).is_ok()
            && std::fs::set_permissions(&node, std::fs::Permissions::from_mode(0o666)).is_ok()
    });
    if !made {
        let _ = sys::umount2(dev, libc::MNT_DETACH);
    }
    made
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::in_child;

    /// Root: a launcher's `/dev/null` and `/dev/zero` become nodes of their own, which work,
    /// and the host's stay as they were. Anyone else: nothing changes.
    #[test]
    fn a_root_launcher_makes_device_nodes_of_its_own_and_the_host_keeps_its_own() {
        let root = sys::effective_ids().0 == 0;
        let host = |p: &str| {
            std::fs::metadata(p)
                .map(|m| (m.dev(), m.ino(), m.rdev()))
                .unwrap()
        };
        let before = [host("/dev/null"), host("/dev/zero")];
        let exit = in_child(move || {
            if make_own() != root {
                return 1;
            }
            let now = [host("/dev/null"), host("/dev/zero")];
            let own = now
                .iter()
                .zip(&before)
                .all(|(n, b)| n.0 != b.0 && n.1 != 0 && n.2 == b.2);
            if root != own || (!root && now != before) {
                return 2;
            }
            // The new nodes are devices that work: a write to null, a read of zero.
            let wrote = std::fs::write("/dev/null", b"x").is_ok();
            let mut zero = [1u8; 8];
            let read = std::fs::File::open("/dev/zero")
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut zero))
                .is_ok();
            if wrote && read && zero == [0; 8] {
                0
            } else {
                3
            }
        });
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(
            [host("/dev/null"), host("/dev/zero")],
            before,
            "the host's nodes changed"
        );
    }
}
