//! Helpers for the layer tests: run one layer in a forked child and read its exit status.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::args::Config;
use crate::sys::{self, Cloned, Exit};

/// Runs `f` in a forked child (so a layer never touches the test process) and returns how
/// the child ended: its return value as exit code, 101 on panic.
pub(crate) fn in_child(f: impl FnOnce() -> i32) -> Exit {
    match sys::fork().expect("fork") {
        Cloned::Child => {
            let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(101);
            sys::exit_now(code)
        }
        Cloned::Parent { child } => sys::wait_for(child).expect("waitpid"),
    }
}

/// A config with the defaults and a placeholder rootfs and program.
pub(crate) fn config() -> Config {
    Config::parse(
        ["--rootfs", "/nonexistent", "--", "/bin/true"]
            .into_iter()
            .map(OsString::from),
    )
    .unwrap()
}

/// Skips loudly (false) when the host lacks something; under CI, fails instead.
pub(crate) fn skip(why: &str) -> bool {
    testkit::require(false, why)
}

/// unshare(CLONE_NEWUSER) in the current (forked, single-threaded) process.
pub(crate) fn in_user_namespace() {
    raw_syscall(libc::SYS_unshare, [libc::CLONE_NEWUSER as u64, 0, 0])
        .expect("unshare(CLONE_NEWUSER)");
}

/// True when a user namespace can be created here; otherwise skips loudly.
pub(crate) fn require_user_namespaces() -> bool {
    match in_child(|| {
        if raw_syscall(libc::SYS_unshare, [libc::CLONE_NEWUSER as u64, 0, 0]).is_ok() {
            0
        } else {
            1
        }
    }) {
        Exit::Code(0) => true,
        _ => skip("user namespaces are unavailable (sysctl or AppArmor)"),
    }
}

/// True when the kernel has Landlock; otherwise skips loudly.
pub(crate) fn landlock_available() -> bool {
    let abi = raw_syscall(libc::SYS_landlock_create_ruleset, [0, 0, 1]);
    match abi {
        Ok(v) if v >= 6 => true,
        _ => skip("landlock ABI >= 6 is unavailable"),
    }
}

/// Ignores SIGXFSZ so an oversized write fails with EFBIG, as in CPython.
pub(crate) fn ignore_sigxfsz() {
    sys::ignore_signal(libc::SIGXFSZ);
}

/// A raw syscall with three arguments: Ok(return value) or Err(errno).
pub(crate) fn raw_syscall(nr: libc::c_long, args: [u64; 3]) -> Result<i64, i32> {
    sys::raw_syscall3(nr, args)
}

/// A raw syscall with five arguments: Ok(return value) or Err(errno).
pub(crate) fn raw_syscall5(nr: libc::c_long, args: [u64; 5]) -> Result<i64, i32> {
    sys::raw_syscall5(nr, args)
}

/// A temp dir laid out as an (empty) rootfs: tmp, dev and proc directories, mode 0755.
pub(crate) fn empty_rootfs() -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    for sub in ["tmp", "dev", "proc", "etc"] {
        std::fs::create_dir_all(root.join(sub)).unwrap();
    }
    std::fs::write(root.join("etc/marker"), "rootfs").unwrap();
    for p in [dir.path(), root.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, root)
}
