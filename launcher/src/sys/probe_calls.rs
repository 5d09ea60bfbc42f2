//! The raw syscalls of doctor's kernel probes ([`crate::probe`]). Those run in a child
//! cloned from a multi-threaded process, so each call here is async-signal-safe: it takes
//! constants and stack data only, and allocates nothing, takes no lock and cannot panic.

use std::io;

use super::{check, check_long};

/// unshare(2) with `flags`.
pub(crate) fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer argument; it changes only the calling process.
    check(unsafe { libc::unshare(flags) }).map(drop)
}

/// mount(NULL, "/", NULL, MS_REC|MS_PRIVATE, NULL): stop mount events from propagating
/// between "/" and its peers. Only useful after unshare(CLONE_NEWNS).
pub(crate) fn make_root_private() -> io::Result<()> {
    // SAFETY: the target is a NUL-terminated literal; NULL source, type and data are valid
    // for a propagation change (mount(2)).
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    })
    .map(drop)
}

/// Write zero offsets for both clocks to `/proc/self/timens_offsets`, the file the launcher
/// writes its own offsets to (time_ns.rs). Only after unshare(CLONE_NEWTIME), while no
/// process is in the new namespace yet, with CAP_SYS_TIME over it (time_namespaces(7)).
pub(crate) fn write_zero_time_offsets() -> io::Result<()> {
    const OFFSETS: &[u8] = b"monotonic 0 0\nboottime 0 0\n";
    // SAFETY: the path is a NUL-terminated literal and the flags are constants.
    let fd = check(unsafe {
        libc::open(
            c"/proc/self/timens_offsets".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was opened above and is still open; the buffer is a static of
    // `OFFSETS.len()` bytes.
    let written = unsafe { libc::write(fd, OFFSETS.as_ptr().cast(), OFFSETS.len()) };
    let result = if written == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    };
    // SAFETY: closes the descriptor opened above, once; nothing else holds it.
    unsafe { libc::close(fd) };
    result
}

/// prctl(option) for a PR_GET_* option that answers in its return value
/// (PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP).
pub(crate) fn prctl_get(option: libc::c_int) -> io::Result<libc::c_int> {
    // SAFETY: plain integer arguments; PR_GET_NO_NEW_PRIVS and PR_GET_SECCOMP write nothing.
    check(unsafe { libc::prctl(option, 0, 0, 0, 0) })
}

/// seccomp(SECCOMP_SET_MODE_FILTER, 0, prog) with a one-instruction program that returns
/// ALLOW: whether this process may load a filter at all (it needs no_new_privs first).
pub(crate) fn load_allow_all_filter() -> io::Result<()> {
    const SECCOMP_SET_MODE_FILTER: libc::c_uint = 1;
    let mut filter = [libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: libc::SECCOMP_RET_ALLOW,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: filter.as_mut_ptr(),
    };
    // SAFETY: `prog` points at one valid instruction on this stack frame, which outlives
    // the call; the kernel copies the program and keeps no pointer to it.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            0 as libc::c_uint,
            &prog as *const libc::sock_fprog,
        )
    })
    .map(drop)
}

/// The Landlock ABI version the kernel offers (landlock_create_ruleset with
/// LANDLOCK_CREATE_RULESET_VERSION; landlock(7)), or the errno: ENOSYS when the kernel was
/// built without Landlock, EOPNOTSUPP when it is built in but not enabled at boot.
pub(crate) fn landlock_abi() -> Result<u32, i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a NULL attribute pointer and size 0, the kernel reads no memory and only
    // answers the ABI version; the call creates nothing and changes nothing.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(u32::try_from(ret).unwrap_or(0))
    }
}
