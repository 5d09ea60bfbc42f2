//! The sandbox's seccomp policy as data: what is allowed, on which arguments, and what must
//! never be. [`super::build`] turns it into a filter; the host exports it as Docker's profile.

use super::{ArgCmp, CmpOp, Policy, Rule};

/// Mask for comparing the low 32 bits of an argument (the kernel's view of an `int`).
pub const LOW_32: u64 = 0xffff_ffff;

/// Every namespace flag clone(2) knows (CLONE_NEWTIME exists only for clone3/unshare: in
/// clone's flag word 0x80 is part of the exit signal).
pub const CLONE_NEW_ANY: u64 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u64;

/// Syscalls the policy must never allow, with the reason (probe classes PRIV and KRN, README
/// "Security model"). Tests check none of them is in [`Policy::allow`] or [`Policy::allow_if`].
pub const REFUSED: &[(&str, &str)] = &[
    ("ptrace", "tracing other processes"),
    ("process_vm_readv", "reading another process's memory"),
    ("process_vm_writev", "writing another process's memory"),
    ("bpf", "kernel attack surface"),
    ("perf_event_open", "kernel attack surface, side channels"),
    ("userfaultfd", "widens kernel race windows"),
    ("io_uring_setup", "bypasses syscall filtering"),
    ("io_uring_enter", "bypasses syscall filtering"),
    ("io_uring_register", "bypasses syscall filtering"),
    ("keyctl", "kernel keyrings are not namespaced"),
    ("add_key", "kernel keyrings are not namespaced"),
    ("request_key", "kernel keyrings are not namespaced"),
    ("kexec_load", "replaces the kernel"),
    ("kexec_file_load", "replaces the kernel"),
    ("init_module", "loads kernel code"),
    ("finit_module", "loads kernel code"),
    ("delete_module", "unloads kernel code"),
    ("mount", "changes the filesystem view"),
    ("umount2", "uncovers what mounts hide"),
    ("fsopen", "new mount API"),
    ("fsconfig", "new mount API"),
    ("fsmount", "new mount API"),
    ("fspick", "new mount API"),
    ("move_mount", "new mount API"),
    ("open_tree", "new mount API"),
    ("mount_setattr", "new mount API"),
    ("pivot_root", "changes the root"),
    ("chroot", "changes the root"),
    ("unshare", "new namespaces: fresh capabilities"),
    ("setns", "joins other namespaces"),
    ("memfd_create", "executable anonymous files"),
    ("open_by_handle_at", "opens files by handle, past mounts"),
    ("name_to_handle_at", "pairs with open_by_handle_at"),
    ("syslog", "kernel log"),
    (
        "clone3",
        "its flags live in memory and cannot be filtered: ENOSYS",
    ),
    ("pidfd_getfd", "steals another process's descriptors"),
    ("mknod", "device nodes"),
    ("mknodat", "device nodes"),
    ("setuid", "identity is fixed"),
    ("setgid", "identity is fixed"),
    ("setresuid", "identity is fixed"),
    ("setresgid", "identity is fixed"),
    ("setgroups", "identity is fixed"),
    ("acct", "host accounting"),
    ("swapon", "host swap"),
    ("swapoff", "host swap"),
    ("reboot", "host power"),
    ("settimeofday", "host clock"),
    ("clock_settime", "host clock"),
    ("clock_adjtime", "host clock"),
    ("adjtimex", "host clock"),
    ("quotactl", "host quotas"),
    ("lookup_dcookie", "kernel profiling"),
    ("vhangup", "terminal hangup"),
    ("iopl", "port I/O"),
    ("ioperm", "port I/O"),
    ("seccomp", "the filter is fixed"),
    ("landlock_create_ruleset", "the ruleset is fixed"),
    ("mbind", "NUMA policy"),
    ("move_pages", "NUMA pages of other processes"),
    ("migrate_pages", "NUMA pages of other processes"),
    ("set_mempolicy", "NUMA policy"),
    ("fanotify_init", "filesystem-wide notification"),
    ("uselib", "obsolete loader"),
    ("execveat", "exec by descriptor; execve suffices"),
    (
        "inotify_init",
        "instances are a per-user host quota, and a watch sees host activity",
    ),
    (
        "inotify_init1",
        "instances are a per-user host quota, and a watch sees host activity",
    ),
    ("inotify_add_watch", "no inotify instance to add to"),
    (
        "sysinfo",
        "the host's uptime, load, RAM and host-wide process count, which proc subset=pid hides",
    ),
    (
        "flock",
        "a lock on a shared inode (/dev/null, the rootfs) is seen by the host and other runs",
    ),
];

/// Syscalls allowed without conditions: what CPython 3.11 and its subprocesses use on
/// x86_64 (asyncio, threads, subprocess, select/poll/epoll, signals, mmap, stat family, ...),
/// from strace of the rootfs Python and Docker's default profile, minus everything in
/// [`REFUSED`].
const ALLOW: &[&str] = &[
    // memory
    "brk",
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "mincore",
    "msync",
    "membarrier",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "map_shadow_stack",
    // files and descriptors
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "preadv",
    "pwritev",
    "preadv2",
    "pwritev2",
    "open",
    "openat",
    "openat2",
    "close",
    "close_range",
    "creat",
    "lseek",
    "dup",
    "dup2",
    "dup3",
    "fsync",
    "fdatasync",
    "syncfs",
    "sync",
    "sync_file_range",
    "truncate",
    "ftruncate",
    "fallocate",
    "fadvise64",
    "readahead",
    "sendfile",
    "splice",
    "tee",
    "vmsplice",
    "copy_file_range",
    "pipe",
    "pipe2",
    // paths and metadata
    "stat",
    "fstat",
    "lstat",
    "newfstatat",
    "statx",
    "statfs",
    "fstatfs",
    "access",
    "faccessat",
    "faccessat2",
    "getdents",
    "getdents64",
    "getcwd",
    "chdir",
    "fchdir",
    "rename",
    "renameat",
    "renameat2",
    "mkdir",
    "mkdirat",
    "rmdir",
    "link",
    "linkat",
    "unlink",
    "unlinkat",
    "symlink",
    "symlinkat",
    "readlink",
    "readlinkat",
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "fchownat",
    "lchown",
    "umask",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "getxattr",
    "lgetxattr",
    "fgetxattr",
    "listxattr",
    "llistxattr",
    "flistxattr",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    // polling and events
    "select",
    "pselect6",
    "poll",
    "ppoll",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "eventfd",
    "eventfd2",
    "signalfd",
    "signalfd4",
    "timerfd_create",
    "timerfd_settime",
    "timerfd_gettime",
    // sockets (creation is in `allow_if`: AF_UNIX only). sendto must stay: asyncio's
    // self-pipe is written with sendto(fd, buf, n, 0, NULL, 0).
    "bind",
    "connect",
    "listen",
    "accept",
    "accept4",
    "getsockname",
    "getpeername",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    "getsockopt",
    // processes and threads (clone is in `allow_if`)
    "fork",
    "vfork",
    "execve",
    "exit",
    "exit_group",
    "wait4",
    "waitid",
    "kill",
    "tkill",
    "tgkill",
    "getpid",
    "getppid",
    "gettid",
    "getpgrp",
    "getpgid",
    "setpgid",
    "getsid",
    "setsid",
    "set_tid_address",
    "set_robust_list",
    "get_robust_list",
    "rseq",
    "futex",
    "futex_waitv",
    "arch_prctl",
    "sched_yield",
    "sched_getaffinity",
    "sched_setaffinity",
    "sched_getparam",
    "sched_setparam",
    "sched_getscheduler",
    "sched_setscheduler",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_rr_get_interval",
    "getpriority",
    "setpriority",
    "getcpu",
    "pidfd_open",
    "pidfd_send_signal",
    "capget",
    // identity (read only)
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "getresuid",
    "getresgid",
    "getgroups",
    // limits and usage
    "getrlimit",
    "setrlimit",
    "prlimit64",
    "getrusage",
    "times",
    "uname",
    // signals
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "rt_sigpending",
    "rt_sigtimedwait",
    "rt_sigqueueinfo",
    "rt_tgsigqueueinfo",
    "rt_sigsuspend",
    "sigaltstack",
    "pause",
    "alarm",
    "restart_syscall",
    // time
    "clock_gettime",
    "clock_getres",
    "clock_nanosleep",
    "nanosleep",
    "gettimeofday",
    "time",
    "getitimer",
    "setitimer",
    "timer_create",
    "timer_settime",
    "timer_gettime",
    "timer_getoverrun",
    "timer_delete",
    // randomness
    "getrandom",
];

/// prctl(2) options allowed (by name, value), from include/uapi/linux/prctl.h. CPython
/// itself calls none (strace of threads, asyncio, subprocess and sqlite3); the C library may
/// name anonymous mappings (PR_SET_VMA) and threads (PR_SET_NAME); the rest only read.
/// Never PR_SET_PDEATHSIG (clearing it would let the sandbox outlive its launcher),
/// PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE other than off ([`PR_SET_DUMPABLE`]), PR_SET_MM,
/// PR_SET_SECCOMP (but one more filter), PR_CAP_AMBIENT, PR_SET_SECUREBITS,
/// PR_SET_NO_NEW_PRIVS or PR_SET_PTRACER.
pub const PRCTLS: &[(&str, u64)] = &[
    ("PR_GET_PDEATHSIG", 2),
    ("PR_GET_DUMPABLE", 3),
    ("PR_SET_NAME", 15),
    ("PR_GET_NAME", 16),
    ("PR_GET_SECCOMP", 21),
    ("PR_CAPBSET_READ", 23),
    ("PR_GET_NO_NEW_PRIVS", 39),
    ("PR_SET_VMA", 0x5356_4d41),
];

/// prctl(2) option that sets whether a process is dumpable (include/uapi/linux/prctl.h),
/// allowed only with 0 (`SUID_DUMP_DISABLE`): a process that turns it off is one the others
/// of its uid cannot open through /proc (`/proc/PID/fd`, `mem`; ptrace(2), "Ptrace access
/// mode checking"), and no process may turn it back on. runner.py's relay of the host's
/// input on Docker needs it.
pub const PR_SET_DUMPABLE: u64 = 4;

/// prctl(2) option that adds a seccomp filter (include/uapi/linux/prctl.h).
pub const PR_SET_SECCOMP: u64 = 22;
/// Its mode for a BPF filter (include/uapi/linux/seccomp.h).
pub const SECCOMP_MODE_FILTER: u64 = 2;

/// fcntl(2) commands allowed (by name, value), from include/uapi/asm-generic/fcntl.h and
/// linux/fcntl.h: descriptor and status flags, duplication, and POSIX record locks (sqlite3
/// needs F_SETLK/F_GETLK on its files in /tmp). Never F_SETPIPE_SZ (pipe buffer pages are
/// a per-user host quota, pipe-user-pages-soft), F_NOTIFY (dnotify watches), F_SETLEASE
/// (a lease on a shared inode signals on another run's open), F_SETOWN/F_SETSIG.
pub const FCNTLS: &[(&str, u64)] = &[
    ("F_DUPFD", 0),
    ("F_GETFD", 1),
    ("F_SETFD", 2),
    ("F_GETFL", 3),
    ("F_SETFL", 4),
    ("F_GETLK", 5),
    ("F_SETLK", 6),
    ("F_SETLKW", 7),
    ("F_OFD_GETLK", 36),
    ("F_OFD_SETLK", 37),
    ("F_OFD_SETLKW", 38),
    ("F_DUPFD_CLOEXEC", 1030),
    ("F_GETPIPE_SZ", 1032),
];

/// SOL_SOCKET options setsockopt(2) may set (by name, value), from
/// include/uapi/asm-generic/socket.h. Never SO_SNDBUF/SO_RCVBUF (or their FORCE forms):
/// raised buffers queue kernel memory that no address-space limit counts (up to
/// net.core.wmem_max, 4 MiB each, per socket). Other levels mean nothing to AF_UNIX.
pub const SOCKOPTS: &[(&str, u64)] = &[
    ("SO_REUSEADDR", 2),
    ("SO_KEEPALIVE", 9),
    ("SO_LINGER", 13),
    ("SO_PASSCRED", 16),
    ("SO_RCVLOWAT", 18),
    ("SO_SNDLOWAT", 19),
    ("SO_RCVTIMEO_OLD", 20),
    ("SO_SNDTIMEO_OLD", 21),
    ("SO_RCVTIMEO_NEW", 66),
    ("SO_SNDTIMEO_NEW", 67),
];

/// ioctl(2) commands allowed (by name, value): terminal queries and descriptor flags.
/// Never TIOCSTI (injects input into a terminal) or TIOCLINUX. Values from
/// include/uapi/asm-generic/ioctls.h.
pub const IOCTLS: &[(&str, u64)] = &[
    ("TCGETS", libc::TCGETS),
    ("TIOCGWINSZ", libc::TIOCGWINSZ),
    ("TIOCGPGRP", libc::TIOCGPGRP),
    ("FIONREAD", libc::FIONREAD),
    ("FIONBIO", libc::FIONBIO),
    ("FIOCLEX", libc::FIOCLEX),
    ("FIONCLEX", libc::FIONCLEX),
];

fn low32(index: u32, value: u64) -> ArgCmp {
    ArgCmp {
        index,
        op: CmpOp::MaskedEq { mask: LOW_32 },
        value,
    }
}

/// The sandbox's seccomp policy, with the default errno EPERM.
pub fn policy() -> Policy {
    let mut allow_if = vec![
        Rule {
            syscall: "socket",
            args: vec![low32(0, libc::AF_UNIX as u64)],
            why: "socket(2): `int domain`; only AF_UNIX (no network, no AF_VSOCK, no netlink)",
        },
        Rule {
            syscall: "socketpair",
            args: vec![low32(0, libc::AF_UNIX as u64)],
            why: "socketpair(2): `int domain`; only AF_UNIX (asyncio's self-pipe)",
        },
        Rule {
            syscall: "clone",
            args: vec![ArgCmp {
                index: 0,
                op: CmpOp::MaskedEq {
                    mask: CLONE_NEW_ANY,
                },
                value: 0,
            }],
            why: "clone(2): flags word (the kernel uses its low 32 bits); no CLONE_NEW* flag, so \
                  threads, fork and posix_spawn's CLONE_VM|CLONE_VFORK work but no namespace",
        },
        Rule {
            syscall: "personality",
            args: vec![low32(0, 0xffff_ffff)],
            why: "personality(2): `unsigned int persona`; only the query 0xffffffff",
        },
        Rule {
            syscall: "prctl",
            args: vec![low32(0, PR_SET_DUMPABLE), low32(1, 0)],
            why: "prctl(PR_SET_DUMPABLE, 0): a process makes itself non-dumpable, which only \
                  closes its /proc files to the rest of the sandbox; runner.py's relay of the \
                  host's input on Docker does, so the code cannot reopen that pipe",
        },
        Rule {
            syscall: "prctl",
            args: vec![low32(0, PR_SET_SECCOMP), low32(1, SECCOMP_MODE_FILTER)],
            why: "prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER): one more filter (no flags, so no \
                  user-notification listener), which can only \
                  narrow this one; runner.py adds one that kills the whole process on a \
                  foreign-ABI or x32 syscall, which the Docker profile cannot say",
        },
    ];
    allow_if.extend(PRCTLS.iter().map(|&(_, option)| Rule {
        syscall: "prctl",
        args: vec![low32(0, option)],
        why: "prctl(2): `int option`; see PRCTLS",
    }));
    allow_if.extend(FCNTLS.iter().map(|&(_, cmd)| Rule {
        syscall: "fcntl",
        args: vec![low32(1, cmd)],
        why: "fcntl(2): `int cmd`; see FCNTLS",
    }));
    allow_if.extend(SOCKOPTS.iter().map(|&(_, option)| Rule {
        syscall: "setsockopt",
        args: vec![low32(1, libc::SOL_SOCKET as u64), low32(2, option)],
        why: "setsockopt(2): `int level`, `int optname`; only SOL_SOCKET options in SOCKOPTS",
    }));
    allow_if.extend(IOCTLS.iter().map(|&(_, cmd)| Rule {
        syscall: "ioctl",
        args: vec![low32(1, cmd)],
        why: "ioctl(2): `unsigned int cmd` (ioctl_tty(2), ioctl_fionread); see IOCTLS",
    }));
    Policy {
        arch: std::env::consts::ARCH,
        default_errno: libc::EPERM,
        allow: ALLOW.to_vec(),
        allow_if,
        enosys: vec!["clone3"],
    }
}
