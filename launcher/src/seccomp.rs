//! Stage 11: the seccomp filter. The policy is data ([`policy`]); [`install`] loads it with
//! libseccomp. The host exports the same [`Policy`] as Docker's seccomp JSON, so one policy
//! serves both backends.
//!
//! Shape: an allowlist for the native architecture only (other architectures and x32 are
//! killed), a default errno (EPERM), a few syscalls allowed only when their arguments match
//! ([`Rule`]), and `clone3` answered ENOSYS so glibc falls back to `clone` (with EPERM it does
//! not, and Python cannot start threads). Every integer argument is compared on its low 32
//! bits: the kernel reads `int` arguments as 32-bit, so a 64-bit compare can be bypassed by
//! setting high bits (`socket(AF_INET | 1 << 32)` passed a plain equality rule on this
//! machine). Rules say "allow iff equal", never "deny iff equal".
//! Sources: seccomp(2), seccomp_rule_add(3), Documentation/userspace-api/seccomp_filter.rst.

use libseccomp::{ScmpAction, ScmpArgCompare, ScmpCompareOp, ScmpFilterContext, ScmpSyscall};

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

/// How an argument is compared. Only masked equality is used (allow iff equal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// `(arg & mask) == value` — libseccomp `SCMP_CMP_MASKED_EQ`; in Docker's JSON
    /// `"op": "SCMP_CMP_MASKED_EQ", "value": mask, "valueTwo": value`.
    MaskedEq {
        /// The bits of the argument that are compared.
        mask: u64,
    },
}

/// One argument comparison of a [`Rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCmp {
    /// The argument's position, 0 to 5.
    pub index: u32,
    /// The comparison.
    pub op: CmpOp,
    /// The value the masked argument must equal.
    pub value: u64,
}

/// A syscall allowed only when every comparison in `args` holds. Several rules for the same
/// syscall are alternatives (any one allows the call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The syscall's name, as libseccomp and Docker spell it.
    pub syscall: &'static str,
    /// All must hold (AND); each index appears at most once per rule.
    pub args: Vec<ArgCmp>,
    /// Why the rule is shaped so, and where the constant comes from.
    pub why: &'static str,
}

/// The whole filter as data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The only architecture allowed (the native one, e.g. `x86_64`); any other, and x32,
    /// kill the process (libseccomp's bad-arch action `KillProcess`).
    pub arch: &'static str,
    /// errno returned for every syscall not allowed below (EPERM unless --seccomp-errno).
    pub default_errno: i32,
    /// Syscalls allowed whatever their arguments.
    pub allow: Vec<&'static str>,
    /// Syscalls allowed only with matching arguments.
    pub allow_if: Vec<Rule>,
    /// Syscalls answered ENOSYS, so the C library falls back to an older call.
    pub enosys: Vec<&'static str>,
}

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
    "sysinfo",
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
/// PR_SET_CHILD_SUBREAPER, PR_SET_DUMPABLE, PR_SET_MM, PR_SET_SECCOMP, PR_CAP_AMBIENT,
/// PR_SET_SECUREBITS, PR_SET_NO_NEW_PRIVS or PR_SET_PTRACER.
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

/// Building or loading the filter failed.
#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    /// libseccomp refused the filter, a rule, or the load.
    #[error("failed to {what} seccomp filter: {why}")]
    Filter { what: String, why: String },
}

fn filter_err(
    what: impl Into<String>,
) -> impl FnOnce(libseccomp::error::SeccompError) -> SeccompError {
    let what = what.into();
    move |e| SeccompError::Filter {
        what,
        why: e.to_string(),
    }
}

fn syscall(name: &str) -> Result<ScmpSyscall, SeccompError> {
    ScmpSyscall::from_name(name).map_err(filter_err(format!("resolve syscall {name:?} for the")))
}

/// Builds the libseccomp filter for `policy` without loading it.
pub fn build(policy: &Policy) -> Result<ScmpFilterContext, SeccompError> {
    let default = ScmpAction::Errno(policy.default_errno);
    let mut ctx = ScmpFilterContext::new(default).map_err(filter_err("create the"))?;
    // Only the native arch is in the filter; a syscall from another arch (i386 via int 0x80)
    // or from x32 (syscall number with bit 30 set) hits the bad-arch action.
    ctx.set_act_badarch(ScmpAction::KillProcess)
        .map_err(filter_err("set bad-arch action of the"))?;
    for name in &policy.allow {
        ctx.add_rule(ScmpAction::Allow, syscall(name)?)
            .map_err(filter_err(format!("allow {name} in the")))?;
    }
    for rule in &policy.allow_if {
        let cmps: Vec<ScmpArgCompare> = rule
            .args
            .iter()
            .map(|a| match a.op {
                CmpOp::MaskedEq { mask } => {
                    ScmpArgCompare::new(a.index, ScmpCompareOp::MaskedEqual(mask), a.value)
                }
            })
            .collect();
        ctx.add_rule_conditional(ScmpAction::Allow, syscall(rule.syscall)?, &cmps)
            .map_err(filter_err(format!("add the {} rule to the", rule.syscall)))?;
    }
    // A rule whose action equals the default is refused by libseccomp (and is redundant).
    if policy.default_errno != libc::ENOSYS {
        for name in &policy.enosys {
            ctx.add_rule(ScmpAction::Errno(libc::ENOSYS), syscall(name)?)
                .map_err(filter_err(format!("answer {name} ENOSYS in the")))?;
        }
    }
    Ok(ctx)
}

/// Loads `policy` into this thread (and every later child). Needs no_new_privs (stage 9).
/// After this, only allowed syscalls run; the next call should be execve.
pub fn install(policy: &Policy) -> Result<(), SeccompError> {
    let ctx = build(policy)?;
    ctx.load().map_err(filter_err("load the"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::{in_child, raw_syscall, raw_syscall5};
    use std::collections::HashSet;

    /// A sentinel errno, so a test can tell the filter denied a call (not the kernel).
    const SENTINEL: i32 = libc::EHWPOISON;

    fn sandboxed(probe: impl FnOnce() -> i32) -> Exit {
        in_child(move || {
            // As the launcher leaves it: the death signal armed before the filter.
            crate::sys::set_parent_death_signal(libc::SIGKILL).unwrap();
            crate::sys::set_no_new_privs().unwrap();
            install(&Policy {
                default_errno: SENTINEL,
                ..policy()
            })
            .unwrap();
            probe()
        })
    }

    #[test]
    fn every_syscall_name_in_the_policy_is_known_to_libseccomp() {
        let p = policy();
        let names = p
            .allow
            .iter()
            .chain(p.allow_if.iter().map(|r| &r.syscall))
            .chain(&p.enosys);
        for name in names {
            ScmpSyscall::from_name(name).unwrap_or_else(|_| panic!("unknown syscall {name}"));
        }
        build(&p).unwrap();
    }

    #[test]
    fn nothing_on_the_refused_list_is_allowed_and_nothing_is_listed_twice() {
        let p = policy();
        let allowed: HashSet<&str> = p
            .allow
            .iter()
            .copied()
            .chain(p.allow_if.iter().map(|r| r.syscall))
            .collect();
        for (name, why) in REFUSED {
            assert!(!allowed.contains(name), "{name} must be refused: {why}");
        }
        let unconditional: HashSet<&str> = p.allow.iter().copied().collect();
        assert_eq!(unconditional.len(), p.allow.len(), "duplicate in ALLOW");
        for rule in &p.allow_if {
            assert!(
                !unconditional.contains(rule.syscall),
                "{} is both allowed and conditional",
                rule.syscall
            );
        }
    }

    #[test]
    fn every_integer_argument_is_compared_on_its_low_32_bits() {
        for rule in policy().allow_if {
            for arg in &rule.args {
                let CmpOp::MaskedEq { mask } = arg.op;
                assert_eq!(
                    mask >> 32,
                    0,
                    "{}: a mask must never look at the high 32 bits",
                    rule.syscall
                );
                if rule.syscall != "clone" {
                    assert_eq!(
                        mask, LOW_32,
                        "{}: int arguments compare all 32 low bits",
                        rule.syscall
                    );
                }
            }
        }
    }

    #[test]
    fn the_ioctl_list_never_has_tiocsti_or_tioclinux() {
        let cmds: Vec<u64> = IOCTLS.iter().map(|(_, c)| *c).collect();
        assert!(!cmds.contains(&libc::TIOCSTI));
        assert!(!cmds.contains(&0x541C), "TIOCLINUX");
    }

    #[test]
    fn a_socket_other_than_af_unix_is_refused_by_the_seccomp_filter() {
        let exit = sandboxed(|| {
            let inet = raw_syscall(
                libc::SYS_socket,
                [libc::AF_INET as u64, libc::SOCK_STREAM as u64, 0],
            );
            let high = raw_syscall(
                libc::SYS_socket,
                [libc::AF_INET as u64 | 1 << 32, libc::SOCK_STREAM as u64, 0],
            );
            let vsock = raw_syscall(
                libc::SYS_socket,
                [libc::AF_VSOCK as u64, libc::SOCK_STREAM as u64, 0],
            );
            let netlink = raw_syscall(
                libc::SYS_socket,
                [libc::AF_NETLINK as u64, libc::SOCK_RAW as u64, 0],
            );
            // Positive control: AF_UNIX still works, as socket and as socketpair.
            let unix = raw_syscall(
                libc::SYS_socket,
                [libc::AF_UNIX as u64, libc::SOCK_STREAM as u64, 0],
            );
            let pair = std::os::unix::net::UnixStream::pair();
            let denied = [inet, high, vsock, netlink]
                .iter()
                .all(|r| *r == Err(SENTINEL));
            if denied && unix.is_ok() && pair.is_ok() {
                0
            } else {
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn clone3_answers_enosys_and_threads_still_start_through_clone() {
        let exit = sandboxed(|| {
            let clone3 = raw_syscall(libc::SYS_clone3, [0, 0, 0]);
            // std::thread uses pthread_create: clone3 first, then clone after ENOSYS.
            let thread = std::thread::spawn(|| 7).join().ok();
            if clone3 == Err(libc::ENOSYS) && thread == Some(7) {
                0
            } else {
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn clone_with_a_namespace_flag_is_refused_but_fork_works() {
        let exit = sandboxed(|| {
            let flags = (libc::CLONE_NEWUSER | libc::SIGCHLD) as u64;
            let newns = raw_syscall(libc::SYS_clone, [flags, 0, 0]);
            let unshare = raw_syscall(libc::SYS_unshare, [libc::CLONE_NEWUSER as u64, 0, 0]);
            // Positive control: a plain fork, child exits 3.
            let forked = match crate::sys::fork().unwrap() {
                crate::sys::Cloned::Child => crate::sys::exit_now(3),
                crate::sys::Cloned::Parent { child } => crate::sys::wait_for(child).unwrap(),
            };
            if newns == Err(SENTINEL) && unshare == Err(SENTINEL) && forked == Exit::Code(3) {
                0
            } else {
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn kernel_attack_surface_is_refused_by_the_seccomp_filter() {
        let exit = sandboxed(|| {
            let calls = [
                raw_syscall(libc::SYS_ptrace, [libc::PTRACE_TRACEME as u64, 0, 0]),
                raw_syscall(libc::SYS_io_uring_setup, [1, 0, 0]),
                raw_syscall(libc::SYS_userfaultfd, [0, 0, 0]),
                raw_syscall(libc::SYS_bpf, [0, 0, 0]),
                raw_syscall(libc::SYS_keyctl, [0, 0, 0]),
                raw_syscall(libc::SYS_memfd_create, [c"x".as_ptr() as u64, 0, 0]),
                raw_syscall(libc::SYS_mount, [0, 0, 0]),
                raw_syscall(libc::SYS_personality, [0x0040_0000, 0, 0]),
                raw_syscall(libc::SYS_ioctl, [0, libc::TIOCSTI, c"x".as_ptr() as u64]),
                raw_syscall(
                    libc::SYS_ioctl,
                    [0, libc::TIOCSTI | 1 << 32, c"x".as_ptr() as u64],
                ),
            ];
            // Positive controls: the personality query and an allowed ioctl.
            let query = raw_syscall(libc::SYS_personality, [0xffff_ffff, 0, 0]);
            let fionread = {
                let mut n: libc::c_int = 0;
                let (r, _w) = crate::sys::pipe().unwrap();
                use std::os::fd::AsRawFd;
                raw_syscall(
                    libc::SYS_ioctl,
                    [
                        r.as_raw_fd() as u64,
                        libc::FIONREAD,
                        &mut n as *mut _ as u64,
                    ],
                )
            };
            if calls.iter().all(|r| *r == Err(SENTINEL)) && query.is_ok() && fionread.is_ok() {
                0
            } else {
                eprintln!("{calls:?} {query:?} {fionread:?}");
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn the_death_signal_cannot_be_cleared_but_a_thread_can_be_named() {
        let exit = sandboxed(|| {
            let denied = [
                raw_syscall(libc::SYS_prctl, [libc::PR_SET_PDEATHSIG as u64, 0, 0]),
                raw_syscall(
                    libc::SYS_prctl,
                    [libc::PR_SET_PDEATHSIG as u64 | 1 << 32, 0, 0],
                ),
                raw_syscall(libc::SYS_prctl, [libc::PR_SET_CHILD_SUBREAPER as u64, 1, 0]),
                raw_syscall(libc::SYS_prctl, [libc::PR_SET_DUMPABLE as u64, 1, 0]),
            ];
            // Positive controls: naming a thread, and reading the death signal back.
            let named = raw_syscall(
                libc::SYS_prctl,
                [libc::PR_SET_NAME as u64, c"x".as_ptr() as u64, 0],
            );
            let mut sig: libc::c_int = 0;
            let read = raw_syscall(
                libc::SYS_prctl,
                [libc::PR_GET_PDEATHSIG as u64, &mut sig as *mut _ as u64, 0],
            );
            if denied.iter().all(|r| *r == Err(SENTINEL))
                && named.is_ok()
                && read.is_ok()
                && sig == libc::SIGKILL
            {
                0
            } else {
                eprintln!("{denied:?} {named:?} {read:?} {sig}");
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn inotify_flock_pipe_resizing_and_socket_buffers_are_refused_but_record_locks_work() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let exit = sandboxed(move || {
            use std::os::fd::AsRawFd;
            let file = std::fs::File::create(&path).unwrap();
            let fd = file.as_raw_fd() as u64;
            let (r, _w) = crate::sys::pipe().unwrap();
            let denied = [
                raw_syscall(libc::SYS_inotify_init1, [0, 0, 0]),
                raw_syscall(libc::SYS_inotify_init, [0, 0, 0]),
                raw_syscall(libc::SYS_flock, [fd, libc::LOCK_EX as u64, 0]),
                raw_syscall(
                    libc::SYS_fcntl,
                    [r.as_raw_fd() as u64, libc::F_SETPIPE_SZ as u64, 1 << 20],
                ),
                raw_syscall(libc::SYS_fcntl, [fd, libc::F_NOTIFY as u64, 0]),
                raw_syscall(libc::SYS_fcntl, [fd, libc::F_SETLEASE as u64, 0]),
            ];
            let one: libc::c_int = 1 << 22;
            let sndbuf = raw_syscall5(
                libc::SYS_setsockopt,
                [
                    fd,
                    libc::SOL_SOCKET as u64,
                    libc::SO_SNDBUF as u64,
                    &one as *const _ as u64,
                    4,
                ],
            );
            let rcvbuf = raw_syscall5(
                libc::SYS_setsockopt,
                [
                    fd,
                    libc::SOL_SOCKET as u64,
                    libc::SO_RCVBUF as u64,
                    &one as *const _ as u64,
                    4,
                ],
            );
            // Positive controls: a POSIX record lock (sqlite3), flags, and the pipe's size.
            let lock = libc::flock {
                l_type: libc::F_WRLCK as i16,
                l_whence: libc::SEEK_SET as i16,
                l_start: 0,
                l_len: 0,
                l_pid: 0,
            };
            let locked = raw_syscall(
                libc::SYS_fcntl,
                [fd, libc::F_SETLK as u64, &lock as *const _ as u64],
            );
            let flags = raw_syscall(libc::SYS_fcntl, [fd, libc::F_GETFL as u64, 0]);
            let size = raw_syscall(
                libc::SYS_fcntl,
                [r.as_raw_fd() as u64, libc::F_GETPIPE_SZ as u64, 0],
            );
            if denied.iter().all(|r| *r == Err(SENTINEL))
                && sndbuf == Err(SENTINEL)
                && rcvbuf == Err(SENTINEL)
                && locked.is_ok()
                && flags.is_ok()
                && size.is_ok()
            {
                0
            } else {
                eprintln!("{denied:?} {locked:?} {flags:?} {size:?}");
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn an_x32_syscall_kills_the_process() {
        let exit = sandboxed(|| {
            // getpid through the x32 ABI: same arch token, syscall number | 0x40000000.
            let _ = raw_syscall(libc::SYS_getpid | 0x4000_0000, [0, 0, 0]);
            0
        });
        assert_eq!(exit, Exit::Signal(libc::SIGSYS));
    }
}
