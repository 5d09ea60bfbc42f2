//! The one chokepoint for raw system calls.
//!
//! Every `unsafe` block of the launcher lives here, each in a small named function that checks
//! the return value at once and turns `-1`/`errno` into [`std::io::Error`]. The stage modules
//! add the context (which path, which stage) to these errors.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

mod probe_calls;

pub(crate) use probe_calls::{
    landlock_abi, load_allow_all_filter, make_root_private, prctl_get, unshare,
    write_zero_time_offsets,
};

/// Turns a path into a C string; a path with an interior NUL is `EINVAL`.
pub(crate) fn cstring(bytes: &OsStr) -> io::Result<CString> {
    CString::new(bytes.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn path_c(path: &Path) -> io::Result<CString> {
    cstring(path.as_os_str())
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn check_long(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Which side of a [`clone_process`] call we are on.
pub(crate) enum Cloned {
    /// The calling process; `child` is the new process's pid as seen from here.
    Parent { child: libc::pid_t },
    /// The new process.
    Child,
}

/// clone(2) with `flags | SIGCHLD` and no new stack: fork semantics plus the namespace flags.
///
/// The child runs on a copy of the caller's stack, like fork(2). Sound in a single-threaded
/// process (the launcher is one; tests call it from a freshly forked child), or when the
/// child keeps to async-signal-safe raw syscalls and `_exit` (`probe::in_child`).
pub(crate) fn clone_process(flags: libc::c_int) -> io::Result<Cloned> {
    // SAFETY: with a NULL stack pointer the raw clone syscall behaves like fork(2): the child
    // gets a copy-on-write copy of the whole address space, including this stack frame, so no
    // memory is shared. Either the caller is single-threaded, so no lock can be held by a
    // thread that does not exist in the child, or the child takes no lock and allocates
    // nothing before it exits (the probe). glibc's cached thread id in the child is stale,
    // which only matters to pthread functions the child never calls before execve or _exit.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (flags | libc::SIGCHLD) as libc::c_ulong,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::null_mut::<libc::c_int>(),
            std::ptr::null_mut::<libc::c_int>(),
            0 as libc::c_ulong,
        )
    };
    match check_long(ret)? {
        0 => Ok(Cloned::Child),
        pid => Ok(Cloned::Parent {
            child: pid as libc::pid_t,
        }),
    }
}

#[cfg(test)]
/// fork(2) through glibc (which resets its own locks and caches in the child).
pub(crate) fn fork() -> io::Result<Cloned> {
    // SAFETY: fork has no memory-safety preconditions of its own; the child only runs code
    // that the callers (tests, single-threaded launcher) keep to simple syscalls before exit.
    match check(unsafe { libc::fork() })? {
        0 => Ok(Cloned::Child),
        pid => Ok(Cloned::Parent { child: pid }),
    }
}

/// How a child ended, as waitpid(2) reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// exit(2) with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl Exit {
    /// The shell convention: the exit code, or 128 + the signal number.
    pub fn as_status(self) -> i32 {
        match self {
            Exit::Code(code) => code,
            Exit::Signal(sig) => 128 + sig,
        }
    }
}

/// waitpid(2) for `pid` until it exits or is killed (retries on EINTR).
pub(crate) fn wait_for(pid: libc::pid_t) -> io::Result<Exit> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable c_int for the duration of the call.
        let ret = unsafe { libc::waitpid(pid, &mut status, 0) };
        if ret == -1 {
            let err = io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(err);
        }
        if libc::WIFEXITED(status) {
            return Ok(Exit::Code(libc::WEXITSTATUS(status)));
        }
        if libc::WIFSIGNALED(status) {
            return Ok(Exit::Signal(libc::WTERMSIG(status)));
        }
    }
}

/// _exit(2): end this process now, without running atexit handlers or destructors, and
/// without flushing stdio (async-signal-safe).
pub(crate) fn exit_now(code: i32) -> ! {
    // SAFETY: _exit never returns and has no preconditions.
    unsafe { libc::_exit(code) }
}

/// prctl(PR_SET_PDEATHSIG, sig): get `sig` when the thread that forked us exits.
pub(crate) fn set_parent_death_signal(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// getppid(2). Never fails.
pub(crate) fn parent_pid() -> libc::pid_t {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getppid() }
}

/// getpid(2). Never fails.
pub(crate) fn own_pid() -> libc::pid_t {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::getpid() }
}

/// geteuid(2) and getegid(2). Never fail.
pub(crate) fn effective_ids() -> (u32, u32) {
    // SAFETY: no arguments, cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// pipe2(2) with O_CLOEXEC: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a writable array of two c_ints, as pipe2 requires.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// read(2) of up to one byte; `Ok(None)` at end of file. Retries on EINTR.
pub(crate) fn read_byte(fd: &OwnedFd) -> io::Result<Option<u8>> {
    let mut byte = 0u8;
    loop {
        // SAFETY: the buffer is one writable byte and the length says so.
        let n = unsafe { libc::read(fd.as_raw_fd(), (&mut byte as *mut u8).cast(), 1) };
        match n {
            -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
            -1 => return Err(io::Error::last_os_error()),
            0 => return Ok(None),
            _ => return Ok(Some(byte)),
        }
    }
}

/// write(2) of one byte. Retries on EINTR.
pub(crate) fn write_byte(fd: &OwnedFd, byte: u8) -> io::Result<()> {
    loop {
        // SAFETY: the buffer is one readable byte and the length says so.
        let n = unsafe { libc::write(fd.as_raw_fd(), (&byte as *const u8).cast(), 1) };
        match n {
            -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
            -1 => return Err(io::Error::last_os_error()),
            _ => return Ok(()),
        }
    }
}

/// poll(2) with a zero timeout: has every writer of this pipe's read end gone (POLLHUP)?
pub(crate) fn pipe_writers_gone(fd: &OwnedFd) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pfd` is one valid pollfd and nfds says 1.
    check(unsafe { libc::poll(&mut pfd, 1, 0) })?;
    Ok(pfd.revents & libc::POLLHUP != 0)
}

/// Points `fd` at /dev/null (open + dup2 + close), keeping the descriptor number in use.
pub(crate) fn point_at_dev_null(fd: RawFd) -> io::Result<()> {
    // SAFETY: the path is a NUL-terminated literal.
    let null = check(unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) })?;
    // SAFETY: open succeeded, so we own `null` now; OwnedFd closes it on every path.
    let null = unsafe { OwnedFd::from_raw_fd(null) };
    // SAFETY: dup2 on two descriptor numbers; `fd` is replaced atomically.
    check(unsafe { libc::dup2(null.as_raw_fd(), fd) }).map(drop)
}

/// setgroups(2) with an empty list: drop every supplementary group (needs CAP_SETGID).
pub(crate) fn drop_supplementary_groups() -> io::Result<()> {
    // SAFETY: a zero-length list with a NULL pointer is valid for setgroups.
    check(unsafe { libc::setgroups(0, std::ptr::null()) }).map(drop)
}

/// mount(2). `source`/`fstype`/`data` may be absent.
pub(crate) fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let source = source.map(path_c).transpose()?;
    let target = path_c(target)?;
    // SAFETY: every pointer is either NULL (allowed by mount(2) for these arguments) or a
    // NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            source.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    })
    .map(drop)
}

/// mknod(2) of a character device `path` with the number `rdev` and permission bits
/// `mode` (the umask still applies; the caller sets the mode afterwards).
pub(crate) fn mknod_char(path: &Path, mode: libc::mode_t, rdev: libc::dev_t) -> io::Result<()> {
    let path = path_c(path)?;
    // SAFETY: `path` is a NUL-terminated string that outlives the call; the rest are integers.
    check(unsafe { libc::mknod(path.as_ptr(), libc::S_IFCHR | mode, rdev) }).map(drop)
}

/// umount2(2).
pub(crate) fn umount2(target: &Path, flags: libc::c_int) -> io::Result<()> {
    let target = path_c(target)?;
    // SAFETY: `target` is a NUL-terminated string that outlives the call.
    check(unsafe { libc::umount2(target.as_ptr(), flags) }).map(drop)
}

/// pivot_root(2) (no glibc wrapper: raw syscall).
pub(crate) fn pivot_root(new_root: &Path, put_old: &Path) -> io::Result<()> {
    let new_root = path_c(new_root)?;
    let put_old = path_c(put_old)?;
    // SAFETY: both arguments are NUL-terminated strings that outlive the call.
    check_long(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

/// statvfs(3)'s `f_flag` (ST_RDONLY, ST_NOSUID, ...) of the filesystem holding `path`.
pub(crate) fn mount_flags_of(path: &Path) -> io::Result<libc::c_ulong> {
    let path = path_c(path)?;
    let mut buf = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `buf` is a writable statvfs; `path` is NUL-terminated.
    check(unsafe { libc::statvfs(path.as_ptr(), buf.as_mut_ptr()) })?;
    // SAFETY: statvfs succeeded and filled the struct (it was zeroed before anyway).
    Ok(unsafe { buf.assume_init() }.f_flag)
}

/// chdir(2).
pub(crate) fn chdir(path: &Path) -> io::Result<()> {
    let path = path_c(path)?;
    // SAFETY: `path` is NUL-terminated and outlives the call.
    check(unsafe { libc::chdir(path.as_ptr()) }).map(drop)
}

/// sethostname(2) (needs CAP_SYS_ADMIN in the owning user namespace of the uts namespace).
pub(crate) fn sethostname(name: &str) -> io::Result<()> {
    // SAFETY: the pointer and length describe the bytes of `name`, which outlives the call.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// setsid(2): a new session and process group led by the caller.
pub(crate) fn setsid() -> io::Result<()> {
    // SAFETY: no arguments; fails only with EPERM when the caller already leads a group.
    check(unsafe { libc::setsid() }).map(drop)
}

/// setresgid(2) with all three ids the same.
pub(crate) fn set_all_gids(gid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresgid(gid, gid, gid) }).map(drop)
}

/// setresuid(2) with all three ids the same.
pub(crate) fn set_all_uids(uid: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::setresuid(uid, uid, uid) }).map(drop)
}

/// getrlimit(2): (soft, hard).
pub(crate) fn get_rlimit(resource: libc::__rlimit_resource_t) -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a writable rlimit.
    check(unsafe { libc::getrlimit(resource, &mut lim) })?;
    Ok((lim.rlim_cur, lim.rlim_max))
}

/// setrlimit(2) with soft and hard limits.
pub(crate) fn set_rlimit(
    resource: libc::__rlimit_resource_t,
    soft: u64,
    hard: u64,
) -> io::Result<()> {
    let lim = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: `lim` is a valid rlimit that outlives the call.
    check(unsafe { libc::setrlimit(resource, &lim) }).map(drop)
}

/// close_range(2) from `first` to the highest possible descriptor.
pub(crate) fn close_from(first: u32) -> io::Result<()> {
    // SAFETY: closing descriptors has no memory-safety effect; every OwnedFd above `first`
    // that is still alive is leaked by the caller (mem::forget) or never used again, since
    // the next step is execve.
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) }).map(drop)
}

#[cfg(test)]
/// fcntl(F_GETFD): is `fd` an open descriptor?
pub(crate) fn is_open(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads descriptor flags; an invalid fd yields EBADF.
    unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
}

/// Whether `fd` is open and close-on-exec (F_GETFD).
#[cfg(test)]
pub(crate) fn is_cloexec(fd: RawFd) -> bool {
    // SAFETY: F_GETFD only reads descriptor flags; an invalid fd yields -1 (EBADF).
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
    flags != -1 && flags & libc::FD_CLOEXEC != 0
}

/// fcntl(F_SETFD, 0) on `fd`: inherited across execve again, as a careless parent leaves it.
#[cfg(test)]
pub(crate) fn clear_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD only changes the descriptor's flags; an invalid fd yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }).map(drop)
}

/// prctl(PR_SET_NO_NEW_PRIVS, 1): execve can never grant privileges again (irreversible).
pub(crate) fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }).map(drop)
}

#[cfg(test)]
/// prctl(PR_GET_NO_NEW_PRIVS).
pub(crate) fn no_new_privs() -> io::Result<bool> {
    // SAFETY: plain integer arguments.
    Ok(check(unsafe { libc::prctl(libc::PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) })? == 1)
}

/// prctl(PR_CAPBSET_DROP, cap): remove `cap` from the bounding set (needs CAP_SETPCAP).
pub(crate) fn drop_bounding_cap(cap: u32) -> io::Result<()> {
    // SAFETY: plain integer arguments.
    check(unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) }).map(drop)
}

/// execve(2) with an explicit argv and envp. Returns only on failure.
pub(crate) fn execve(program: &CStr, argv: &[CString], envp: &[CString]) -> io::Error {
    let mut argv_ptrs: Vec<*const libc::c_char> = argv.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let mut envp_ptrs: Vec<*const libc::c_char> = envp.iter().map(|e| e.as_ptr()).collect();
    envp_ptrs.push(std::ptr::null());
    // SAFETY: `program` and every string in argv/envp are NUL-terminated and outlive the
    // call; both pointer arrays are NULL-terminated as execve(2) requires.
    unsafe { libc::execve(program.as_ptr(), argv_ptrs.as_ptr(), envp_ptrs.as_ptr()) };
    io::Error::last_os_error()
}

/// signal(2) with SIG_IGN (tests only).
#[cfg(test)]
pub(crate) fn ignore_signal(sig: libc::c_int) {
    // SAFETY: installing SIG_IGN touches no memory and runs no handler.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
}

/// A raw syscall with three arguments: Ok(return value) or Err(errno) (tests only: probes).
#[cfg(test)]
pub(crate) fn raw_syscall3(nr: libc::c_long, args: [u64; 3]) -> Result<i64, i32> {
    // SAFETY: test probes pass NULL or pointers to live memory, or syscalls the filter is
    // expected to refuse before the kernel reads any argument.
    let ret = unsafe { libc::syscall(nr, args[0], args[1], args[2]) };
    if ret == -1 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(ret)
    }
}

/// A raw syscall with five arguments (tests only: probes).
#[cfg(test)]
pub(crate) fn raw_syscall5(nr: libc::c_long, args: [u64; 5]) -> Result<i64, i32> {
    // SAFETY: as raw_syscall3: test probes pass NULL, pointers to live memory, or calls the
    // filter refuses before the kernel reads any argument.
    let ret = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3], args[4]) };
    if ret == -1 {
        Err(io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(ret)
    }
}

/// utimensat(2) with the current time on `path` (tests only).
#[cfg(test)]
pub(crate) fn touch(path: &Path) -> io::Result<()> {
    let path = path_c(path)?;
    // SAFETY: `path` is NUL-terminated; a NULL times pointer means "now".
    check(unsafe { libc::utimensat(libc::AT_FDCWD, path.as_ptr(), std::ptr::null(), 0) }).map(drop)
}

/// gethostname(2) into `buf` (tests only).
#[cfg(test)]
pub(crate) fn hostname(buf: &mut [u8]) -> String {
    // SAFETY: the pointer and length describe `buf`, which outlives the call.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// kill(2) with SIGKILL for one process. `pid` must be > 0 (0 and negative values would
/// signal whole process groups, so they are refused with EINVAL).
pub(crate) fn kill_pid(pid: libc::pid_t) -> io::Result<()> {
    if pid <= 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: plain integer arguments; pid > 0 names exactly one process.
    check(unsafe { libc::kill(pid, libc::SIGKILL) }).map(drop)
}

/// socketpair(2) AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC: two connected ends that keep message
/// boundaries (one sendmsg is one recvmsg).
pub(crate) fn seqpacket_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a writable array of two c_ints, as socketpair requires.
    check(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: socketpair succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Space for one control message carrying one descriptor.
const CMSG_SPACE_ONE_FD: usize = 32;

/// sendmsg(2) of `data` on `sock`, with `fd` attached as SCM_RIGHTS when given (unix(7)).
/// Retries on EINTR; MSG_NOSIGNAL, so a closed peer is EPIPE, not SIGPIPE.
pub(crate) fn send_with_fd(sock: &OwnedFd, data: &[u8], fd: Option<&OwnedFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    let mut control = [0u8; CMSG_SPACE_ONE_FD];
    // SAFETY: msghdr is plain data; all-zero is a valid empty header.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) };
        assert!(space as usize <= control.len(), "control buffer too small");
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as usize;
        // SAFETY: msg_control points at `control`, which holds at least one cmsghdr plus one
        // int (checked above); CMSG_FIRSTHDR/CMSG_DATA stay inside it, and the int is
        // written unaligned.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd.as_raw_fd());
        }
    }
    loop {
        // SAFETY: `msg` points at `iov` (describing `data`) and `control`, all alive here.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        match n {
            -1 if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) => continue,
            -1 => return Err(io::Error::last_os_error()),
            _ => return Ok(()),
        }
    }
}

/// recvmsg(2) of one message into `buf`: its length (0 at end of file) and the descriptor
/// it carried (SCM_RIGHTS, received close-on-exec), if any. Retries on EINTR. A message
/// longer than `buf` is cut (SOCK_SEQPACKET drops the rest).
pub(crate) fn recv_with_fd(sock: &OwnedFd, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u8; CMSG_SPACE_ONE_FD];
    loop {
        // SAFETY: msghdr is plain data; all-zero is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: `msg` points at `iov` (describing `buf`) and `control`, both writable and
        // alive for the call.
        let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n == -1 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(io::Error::last_os_error());
        }
        let mut received = None;
        // SAFETY: the kernel filled `msg.msg_control` up to msg_controllen; CMSG_FIRSTHDR and
        // CMSG_NXTHDR walk only inside it, and each SCM_RIGHTS payload is read unaligned.
        unsafe {
            let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
            while !cmsg.is_null() {
                if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                    let fd = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>());
                    // Own it at once (a second one, never sent by the launcher, is closed).
                    let owned = OwnedFd::from_raw_fd(fd);
                    if received.is_none() {
                        received = Some(owned);
                    }
                }
                cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
            }
        }
        return Ok((n as usize, received));
    }
}

/// pidfd_open(2): a descriptor that names `pid` for as long as the descriptor lives, even
/// after the process is reaped and its pid reused (close-on-exec by default).
pub(crate) fn pidfd_open(pid: libc::pid_t) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = check_long(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) })?;
    // SAFETY: pidfd_open succeeded and returned a new descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// pidfd_send_signal(2) with SIGKILL: kill exactly the process the pidfd names (ESRCH when
/// it already exited).
pub(crate) fn pidfd_kill(pidfd: &OwnedFd) -> io::Result<()> {
    // SAFETY: a valid descriptor, SIGKILL, NULL siginfo and flags 0 (all allowed by the man
    // page).
    check_long(unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            libc::SIGKILL,
            std::ptr::null::<libc::siginfo_t>(),
            0u32,
        )
    })
    .map(drop)
}

/// fcntl(F_SETFD, FD_CLOEXEC) on `fd`.
pub(crate) fn set_cloexec(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_SETFD only changes the descriptor's flags; an invalid fd yields EBADF.
    check(unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) }).map(drop)
}

/// Makes `command` hand `fd` to its child as descriptor `target` (without close-on-exec):
/// dup2 in the child between fork and exec. `fd` is closed in the parent when `command` is
/// dropped.
pub(crate) fn pass_fd(command: &mut std::process::Command, fd: OwnedFd, target: RawFd) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the forked child before exec and calls only dup2 and
    // fcntl, which are async-signal-safe; it allocates nothing and takes no lock.
    unsafe {
        command.pre_exec(move || {
            let source = fd.as_raw_fd();
            if source == target {
                // dup2 onto itself keeps close-on-exec; clear it instead.
                check(libc::fcntl(target, libc::F_SETFD, 0))?;
            } else {
                check(libc::dup2(source, target))?;
            }
            Ok(())
        });
    }
}

/// Takes ownership of descriptor `fd`, which the caller must have checked is open (e.g.
/// with [`set_cloexec`]) and not owned elsewhere in this process (a descriptor inherited
/// from the host by number).
pub(crate) fn own_fd(fd: RawFd) -> OwnedFd {
    // SAFETY: the caller guarantees `fd` is open and that nothing else in this process
    // owns it, so exactly one OwnedFd closes it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// close_range(2) from `first` to the highest possible descriptor with
/// CLOSE_RANGE_CLOEXEC (Linux >= 5.11): every one stays open here and is closed at execve.
pub(crate) fn cloexec_from(first: u32) -> io::Result<()> {
    // SAFETY: CLOSE_RANGE_CLOEXEC only sets the close-on-exec flag of descriptors; nothing
    // is closed, so no OwnedFd of this process is affected.
    check_long(unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    })
    .map(drop)
}

/// sysconf(_SC_CLK_TCK): clock ticks per second, the unit of `/proc/PID/stat`'s times.
pub(crate) fn clock_ticks_per_second() -> io::Result<i64> {
    // SAFETY: sysconf takes an integer name and reads no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz <= 0 {
        return Err(io::Error::other("sysconf(_SC_CLK_TCK) gave no tick rate"));
    }
    // c_long is i64 here but i32 on 32-bit targets.
    #[allow(clippy::useless_conversion)]
    Ok(i64::from(hz))
}

/// close_range(2) from `first` to `last` inclusive.
pub(crate) fn close_range(first: u32, last: u32) -> io::Result<()> {
    // SAFETY: closing descriptors has no memory-safety effect; the caller keeps no OwnedFd
    // in the range that it uses again (the next step is execve).
    check_long(unsafe { libc::syscall(libc::SYS_close_range, first, last, 0u32) }).map(drop)
}

/// setns(2): the caller joins the namespace `fd` refers to, which must be of type `nstype`.
pub(crate) fn setns(fd: &impl AsRawFd, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is an open descriptor borrowed for the whole call; `nstype` an integer.
    check(unsafe { libc::setns(fd.as_raw_fd(), nstype) }).map(drop)
}

/// clock_gettime(2): the whole seconds `clock` reads.
pub(crate) fn clock_seconds(clock: libc::clockid_t) -> io::Result<i64> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a writable timespec that outlives the call.
    check(unsafe { libc::clock_gettime(clock, &mut now) })?;
    Ok(now.tv_sec)
}
