//! Stage 5: the sandbox's filesystem view, as a plan ([`plan`]) and its installer ([`install`]).
//!
//! The root is a read-only overlay whose only content is the rootfs directory (so no host mount
//! below it comes along, and every file is an inode of this sandbox's own overlay: a record
//! lock, which seccomp cannot refuse by file, is seen by no other run and not by the host);
//! `/tmp` is a small tmpfs (bytes and inodes capped; noexec, nosuid, nodev); `/dev` is a read-only
//! tmpfs holding only null, zero, urandom and random (bind-mounted from the host: device nodes
//! made inside a user namespace would not open; each bind read-only, so the host's inode
//! keeps its times, mode and owner) and the /dev/fd symlinks; `/proc` is a fresh
//! procfs of the new pid namespace. No /sys. Sources: mount(2), mount_namespaces(7),
//! pivot_root(2) ("pivot_root(".", ".")" idiom), proc(5) ("subset=pid").

use std::ffi::CStr;
use std::path::{Path, PathBuf};

use crate::sys;

/// Size of the /dev tmpfs, in bytes: it holds only mount points and symlinks.
const DEV_SIZE: u64 = 64 * 1024;
/// Inodes of the /dev tmpfs: its root, the mount points and the symlinks, with room.
const DEV_INODES: u64 = 64;

/// The device nodes the sandbox gets, bind-mounted from the host's /dev.
pub const DEVICES: [&str; 4] = ["null", "zero", "urandom", "random"];

/// Mount flags every mount except the root gets.
const NO_SUID_DEV_EXEC: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// One step of the filesystem setup, in the order [`plan`] lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Make every mount private (MS_REC | MS_PRIVATE on /): nothing propagates to the host.
    MakePrivate,
    /// A non-recursive bind mount of `source` on `target`.
    Bind { source: PathBuf, target: PathBuf },
    /// A read-only overlay on `target` whose layers are `lower` and an empty directory (the
    /// kernel wants two layers when there is no upper one). The empty directory is made on a
    /// 4 KiB tmpfs mounted on `lower`/proc, which the overlay hides; the layers are named
    /// relative to `lower`, so the mount table shows `lowerdir=.:proc/empty` and no host path.
    /// Files of an overlay are its own inodes, so locks taken on them stay in this mount.
    Overlay { lower: PathBuf, target: PathBuf },
    /// A tmpfs on `target`; `size` in bytes, `inodes` its `nr_inodes` (files, directories
    /// and symlinks it may hold), `mode` of its root directory, extra mount flags.
    Tmpfs {
        target: PathBuf,
        size: u64,
        inodes: u64,
        mode: u32,
        flags: libc::c_ulong,
    },
    /// An empty regular file to bind a device node on.
    MountPoint { path: PathBuf },
    /// An empty directory (mode 0755) to mount on.
    Directory { path: PathBuf },
    /// A symlink at `path` pointing to `to`.
    Symlink { path: PathBuf, to: PathBuf },
    /// Remount `target` read-only plus `flags`, keeping the flags the kernel locked (read
    /// with statvfs(3)); without them the remount fails with EPERM in a user namespace.
    RemountReadOnly {
        target: PathBuf,
        flags: libc::c_ulong,
    },
    /// A fresh procfs on `target`: `subset=pid` first, plain procfs if refused. Must come
    /// before the old root is detached, or the kernel refuses it (mount_too_revealing).
    Proc { target: PathBuf },
    /// pivot_root(2) into `new_root` and detach the old root: chdir(new_root),
    /// pivot_root(".", "."), umount2(".", MNT_DETACH), chdir("/").
    PivotRoot { new_root: PathBuf },
    /// chdir(2) to `path` (the program's working directory).
    Chdir { path: PathBuf },
}

/// Setting up a mount failed.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The rootfs directory itself is missing, unreadable or no directory (moved away or
    /// removed while `serve` ran, say).
    #[error("failed to find the rootfs {0}: {1}")]
    RootfsGone(PathBuf, String),
    /// The rootfs lacks a directory to mount on.
    #[error("failed to find {0} in the rootfs: it needs empty directories tmp, dev and proc")]
    MissingMountPoint(PathBuf),
    /// A mount step failed.
    #[error("failed to {step}: {source}{hint}")]
    Step {
        step: String,
        source: std::io::Error,
        hint: &'static str,
    },
}

/// Builds the plan for a sandbox rooted at `rootfs`, with a /tmp of `tmp_size` bytes.
pub fn plan(rootfs: &Path, tmp_size: u64) -> Vec<Step> {
    let dev = rootfs.join("dev");
    let mut steps = vec![
        Step::MakePrivate,
        Step::Overlay {
            lower: rootfs.to_owned(),
            target: rootfs.to_owned(),
        },
        Step::Tmpfs {
            target: rootfs.join("tmp"),
            size: tmp_size,
            inodes: crate::args::defaults::TMP_INODES,
            mode: 0o1777,
            flags: NO_SUID_DEV_EXEC,
        },
        Step::Tmpfs {
            target: dev.clone(),
            size: DEV_SIZE,
            inodes: DEV_INODES,
            mode: 0o755,
            flags: NO_SUID_DEV_EXEC,
        },
    ];
    for name in DEVICES {
        steps.push(Step::MountPoint {
            path: dev.join(name),
        });
        steps.push(Step::Bind {
            source: Path::new("/dev").join(name),
            target: dev.join(name),
        });
        // The node is the host's own inode: read-only, the code cannot change its times,
        // mode or owner (EROFS). Reads and writes of a device node ignore the read-only flag.
        steps.push(Step::RemountReadOnly {
            target: dev.join(name),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
        });
    }
    for (name, to) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        steps.push(Step::Symlink {
            path: dev.join(name),
            to: PathBuf::from(to),
        });
    }
    steps.extend([
        Step::RemountReadOnly {
            target: dev,
            flags: NO_SUID_DEV_EXEC,
        },
        Step::Proc {
            target: rootfs.join("proc"),
        },
        Step::PivotRoot {
            new_root: rootfs.to_owned(),
        },
        Step::RemountReadOnly {
            target: PathBuf::from("/"),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
        },
        Step::Chdir {
            path: PathBuf::from("/tmp"),
        },
    ]);
    steps
}

/// Checks the rootfs is there, a directory, and has the directories the plan mounts on.
///
/// # Errors
/// [`MountError::RootfsGone`] when `rootfs` is missing, cannot be looked up, or is no
/// directory, else [`MountError::MissingMountPoint`] naming the first of
/// `tmp`, `dev`, `proc` it lacks.
pub fn check_rootfs(rootfs: &Path) -> Result<(), MountError> {
    let why = match std::fs::metadata(rootfs) {
        Ok(meta) if meta.is_dir() => None,
        Ok(_) => Some("it is no directory".to_owned()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some("it is missing (was it moved or removed?)".to_owned())
        }
        Err(e) => Some(format!("it cannot be read ({e})")),
    };
    if let Some(why) = why {
        return Err(MountError::RootfsGone(rootfs.to_owned(), why));
    }
    for dir in ["tmp", "dev", "proc"] {
        let path = rootfs.join(dir);
        if !path.is_dir() {
            return Err(MountError::MissingMountPoint(path));
        }
    }
    Ok(())
}

/// Runs every step of `steps` in order. Needs CAP_SYS_ADMIN in the user namespace that owns
/// the current mount namespace, and a pid namespace of our own for the procfs.
pub fn install(steps: &[Step]) -> Result<(), MountError> {
    steps.iter().try_for_each(run_step)
}

fn failed(step: String, hint: &'static str) -> impl FnOnce(std::io::Error) -> MountError {
    move |source| MountError::Step { step, source, hint }
}

fn run_step(step: &Step) -> Result<(), MountError> {
    match step {
        Step::MakePrivate => sys::mount(
            None,
            Path::new("/"),
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        )
        .map_err(failed(
            "make mounts private (mount / MS_REC|MS_PRIVATE)".into(),
            "",
        )),
        Step::Bind { source, target } => {
            sys::mount(Some(source), target, None, libc::MS_BIND, None).map_err(failed(
                format!("bind {} on {}", source.display(), target.display()),
                " (the rootfs and every directory above it must be searchable by others \
                 when the caller is root, e.g. mode o+rx)",
            ))
        }
        Step::Overlay { lower, target } => mount_overlay(lower, target),
        Step::Tmpfs {
            target,
            size,
            inodes,
            mode,
            flags,
        } => {
            let data =
                sys::cstring(format!("size={size},nr_inodes={inodes},mode={mode:o}").as_ref())
                    .map_err(failed(format!("mount tmpfs on {}", target.display()), ""))?;
            sys::mount(
                Some(Path::new("tmpfs")),
                target,
                Some(c"tmpfs"),
                *flags,
                Some(&data),
            )
            .map_err(failed(format!("mount tmpfs on {}", target.display()), ""))
        }
        Step::MountPoint { path } => std::fs::File::create(path)
            .map(drop)
            .map_err(failed(format!("create mount point {}", path.display()), "")),
        Step::Directory { path } => std::fs::create_dir(path)
            .map_err(failed(format!("create directory {}", path.display()), "")),
        Step::Symlink { path, to } => std::os::unix::fs::symlink(to, path)
            .map_err(failed(format!("create symlink {}", path.display()), "")),
        Step::RemountReadOnly { target, flags } => remount_read_only(target, *flags),
        Step::Proc { target } => mount_proc(target),
        Step::PivotRoot { new_root } => pivot_into(new_root),
        Step::Chdir { path } => {
            sys::chdir(path).map_err(failed(format!("chdir to {}", path.display()), ""))
        }
    }
}

/// The statvfs(3) flags that are mount flags the kernel may lock, and their MS_* twins.
const LOCKABLE: [(libc::c_ulong, libc::c_ulong); 6] = [
    (libc::ST_NOSUID, libc::MS_NOSUID),
    (libc::ST_NODEV, libc::MS_NODEV),
    (libc::ST_NOEXEC, libc::MS_NOEXEC),
    (libc::ST_NOATIME, libc::MS_NOATIME),
    (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
    (libc::ST_RELATIME, libc::MS_RELATIME),
];

/// The MS_* flags a bind remount must repeat to keep what statvfs reports in `st_flags`.
pub fn kept_flags(st_flags: libc::c_ulong) -> libc::c_ulong {
    LOCKABLE
        .iter()
        .filter(|(st, _)| st_flags & st != 0)
        .fold(0, |acc, (_, ms)| acc | ms)
}

fn remount_read_only(target: &Path, flags: libc::c_ulong) -> Result<(), MountError> {
    let what = format!("remount {} read-only", target.display());
    let current = sys::mount_flags_of(target).map_err(failed(what.clone(), ""))?;
    let all = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags | kept_flags(current);
    sys::mount(None, target, None, all, None).map_err(failed(what, ""))
}

/// Where [`Step::Overlay`] makes its empty layer, relative to the lower directory.
const EMPTY_LAYER: &str = "proc/empty";

fn mount_overlay(lower: &Path, target: &Path) -> Result<(), MountError> {
    let what = || {
        format!(
            "mount a read-only overlay of {} on {}",
            lower.display(),
            target.display()
        )
    };
    let scratch = lower.join("proc");
    sys::mount(
        Some(Path::new("tmpfs")),
        &scratch,
        Some(c"tmpfs"),
        NO_SUID_DEV_EXEC,
        Some(c"size=4096,mode=755"),
    )
    .map_err(failed(format!("mount tmpfs on {}", scratch.display()), ""))?;
    std::fs::create_dir(lower.join(EMPTY_LAYER)).map_err(failed(what(), ""))?;
    // Relative layer paths: resolved from the working directory, shown as given.
    sys::chdir(lower).map_err(failed(format!("chdir to {}", lower.display()), ""))?;
    let data =
        sys::cstring(format!("lowerdir=.:{EMPTY_LAYER}").as_ref()).map_err(failed(what(), ""))?;
    sys::mount(
        Some(Path::new("overlay")),
        target,
        Some(c"overlay"),
        libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
        Some(&data),
    )
    .map_err(failed(
        what(),
        " (overlayfs must be mountable in a user namespace, Linux 5.11 or later, and the \
         rootfs searchable by others when the caller is root)",
    ))
}

fn mount_proc(target: &Path) -> Result<(), MountError> {
    let proc = |data: Option<&CStr>| {
        sys::mount(
            Some(Path::new("proc")),
            target,
            Some(c"proc"),
            NO_SUID_DEV_EXEC,
            data,
        )
    };
    proc(Some(c"subset=pid"))
        .or_else(|_| proc(None))
        .map_err(failed(
            format!("mount proc on {}", target.display()),
            " (a new procfs needs a fully visible /proc on the host: is part of it over-mounted?)",
        ))
}

fn pivot_into(new_root: &Path) -> Result<(), MountError> {
    let dot = Path::new(".");
    sys::chdir(new_root).map_err(failed(format!("chdir to {}", new_root.display()), ""))?;
    sys::pivot_root(dot, dot)
        .map_err(failed(format!("pivot_root to {}", new_root.display()), ""))?;
    sys::umount2(dot, libc::MNT_DETACH).map_err(failed("detach the old root".into(), ""))?;
    sys::chdir(Path::new("/")).map_err(failed("chdir to /".into(), ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rootfs_that_is_gone_is_named_gone_not_as_a_missing_tmp_inside_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rootfs = dir.path().join("rootfs");
        for sub in ["tmp", "dev", "proc"] {
            std::fs::create_dir_all(rootfs.join(sub)).expect("mkdir");
        }
        assert!(check_rootfs(&rootfs).is_ok());
        std::fs::rename(&rootfs, dir.path().join("moved")).expect("rename");
        let gone = check_rootfs(&rootfs).expect_err("the rootfs is gone");
        assert!(matches!(gone, MountError::RootfsGone(..)), "{gone:?}");
        assert_eq!(
            gone.to_string(),
            format!(
                "failed to find the rootfs {}: it is missing (was it moved or removed?)",
                rootfs.display()
            )
        );
        std::fs::write(&rootfs, b"").expect("a file in its place");
        let file = check_rootfs(&rootfs).expect_err("a file is no rootfs");
        assert!(file.to_string().ends_with(": it is no directory"), "{file}");
        std::fs::remove_file(&rootfs).expect("rm");
        std::fs::create_dir_all(rootfs.join("dev")).expect("mkdir");
        let lacking = check_rootfs(&rootfs).expect_err("no tmp");
        assert!(
            matches!(lacking, MountError::MissingMountPoint(_)),
            "{lacking:?}"
        );
    }

    fn position(steps: &[Step], pred: impl Fn(&Step) -> bool) -> usize {
        steps.iter().position(pred).expect("step present")
    }

    #[test]
    fn the_plan_mounts_proc_before_the_old_root_is_detached() {
        let steps = plan(Path::new("/r"), 1);
        let proc = position(&steps, |s| matches!(s, Step::Proc { .. }));
        let pivot = position(&steps, |s| matches!(s, Step::PivotRoot { .. }));
        assert!(proc < pivot);
        assert_eq!(steps[0], Step::MakePrivate);
        assert_eq!(
            steps.last(),
            Some(&Step::Chdir {
                path: PathBuf::from("/tmp")
            })
        );
    }

    #[test]
    fn tmp_is_a_sized_inode_capped_noexec_tmpfs_and_the_root_ends_read_only() {
        let steps = plan(Path::new("/r"), 12345);
        assert!(steps.contains(&Step::Tmpfs {
            target: PathBuf::from("/r/tmp"),
            size: 12345,
            inodes: crate::args::defaults::TMP_INODES,
            mode: 0o1777,
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        }));
        let pivot = position(&steps, |s| matches!(s, Step::PivotRoot { .. }));
        let ro = position(
            &steps,
            |s| matches!(s, Step::RemountReadOnly { target, .. } if target == Path::new("/")),
        );
        assert!(pivot < ro);
    }

    #[test]
    fn only_four_device_nodes_and_no_host_directory_are_bound() {
        let binds: Vec<_> = plan(Path::new("/r"), 1)
            .into_iter()
            .filter_map(|s| match s {
                Step::Bind { source, .. } => Some(source),
                _ => None,
            })
            .collect();
        let expected: Vec<PathBuf> = DEVICES.iter().map(|d| Path::new("/dev").join(d)).collect();
        assert_eq!(binds, expected);
        assert_eq!(
            plan(Path::new("/r"), 1)[1],
            Step::Overlay {
                lower: PathBuf::from("/r"),
                target: PathBuf::from("/r"),
            }
        );
        assert!(
            !plan(Path::new("/r"), 1)
                .iter()
                .any(|s| format!("{s:?}").contains("sys"))
        );
    }

    #[test]
    fn every_bound_device_node_is_remounted_read_only_right_after_its_bind() {
        let steps = plan(Path::new("/r"), 1);
        for name in DEVICES {
            let node = Path::new("/r/dev").join(name);
            let bind = position(
                &steps,
                |s| matches!(s, Step::Bind { target, .. } if *target == node),
            );
            assert_eq!(
                steps[bind + 1],
                Step::RemountReadOnly {
                    target: node,
                    flags: libc::MS_NOSUID | libc::MS_NOEXEC,
                }
            );
        }
    }

    #[test]
    fn a_read_only_remount_repeats_the_locked_flags() {
        assert_eq!(
            kept_flags(libc::ST_NOSUID | libc::ST_RELATIME),
            libc::MS_NOSUID | libc::MS_RELATIME
        );
        assert_eq!(kept_flags(libc::ST_RDONLY), 0);
    }
}
