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
            raw_syscall(libc::SYS_prctl, [libc::PR_SET_DUMPABLE as u64, 2, 0]),
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
fn a_process_may_make_itself_non_dumpable_but_never_dumpable_again() {
    let exit = sandboxed(|| {
        let dumpable = || raw_syscall(libc::SYS_prctl, [libc::PR_GET_DUMPABLE as u64, 0, 0]);
        let before = dumpable();
        let off = raw_syscall(libc::SYS_prctl, [libc::PR_SET_DUMPABLE as u64, 0, 0]);
        let after = dumpable();
        let on = raw_syscall(libc::SYS_prctl, [libc::PR_SET_DUMPABLE as u64, 1, 0]);
        // High bits above the 32 the kernel reads do not make 1 look like 0.
        let high = raw_syscall(
            libc::SYS_prctl,
            [libc::PR_SET_DUMPABLE as u64, 1 << 32 | 1, 0],
        );
        if before == Ok(1) && off.is_ok() && after == Ok(0) && on == Err(SENTINEL) && high.is_err()
        {
            0
        } else {
            eprintln!("{before:?} {off:?} {after:?} {on:?} {high:?}");
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
        let set_buffer = |option: libc::c_int| {
            raw_syscall5(
                libc::SYS_setsockopt,
                [
                    fd,
                    libc::SOL_SOCKET as u64,
                    option as u64,
                    &one as *const _ as u64,
                    4,
                ],
            )
        };
        let sndbuf = set_buffer(libc::SO_SNDBUF);
        let rcvbuf = set_buffer(libc::SO_RCVBUF);
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

/// What the kernel's seccomp action cache (Linux 5.11+) decides when it loads a filter: the
/// filter's answer for syscall `nr` on the native arch when only the number and the arch are
/// known, or None when the program reads an argument (or anything else) before it answers.
/// The same walk as the kernel's `seccomp_is_const_allow`: loads of `nr` and `arch`,
/// jumps, `and` and `ret` with constants; any other instruction ends it.
fn answer_by_number_alone(program: &[u8], nr: i32) -> Option<u32> {
    const LD_W_ABS: u16 = 0x20;
    const RET_K: u16 = 0x06;
    const JA: u16 = 0x05;
    const JEQ_K: u16 = 0x15;
    const JGT_K: u16 = 0x25;
    const JGE_K: u16 = 0x35;
    const JSET_K: u16 = 0x45;
    const AND_K: u16 = 0x54;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
    let arch = if cfg!(target_arch = "aarch64") {
        AUDIT_ARCH_AARCH64
    } else {
        AUDIT_ARCH_X86_64
    };
    // struct sock_filter { u16 code; u8 jt; u8 jf; u32 k }, in native byte order.
    let insns: Vec<(u16, u8, u8, u32)> = program
        .chunks_exact(8)
        .map(|i| {
            let code = u16::from_ne_bytes([i[0], i[1]]);
            (
                code,
                i[2],
                i[3],
                u32::from_ne_bytes([i[4], i[5], i[6], i[7]]),
            )
        })
        .collect();
    let mut a: u32 = 0;
    let mut pc = 0usize;
    while let Some(&(code, jt, jf, k)) = insns.get(pc) {
        let taken = match code {
            LD_W_ABS => {
                a = match k {
                    0 => nr as u32, // seccomp_data.nr
                    4 => arch,      // seccomp_data.arch
                    _ => return None,
                };
                None
            }
            RET_K => return Some(k),
            JA => {
                pc += k as usize;
                None
            }
            JEQ_K => Some(a == k),
            JGT_K => Some(a > k),
            JGE_K => Some(a >= k),
            JSET_K => Some(a & k != 0),
            AND_K => {
                a &= k;
                None
            }
            _ => return None,
        };
        if let Some(taken) = taken {
            pc += usize::from(if taken { jt } else { jf });
        }
        pc += 1;
    }
    None
}

#[test]
fn the_syscalls_of_a_tool_call_are_allowed_by_their_number_alone() {
    // A sequential tool call in the runner is write, poll and recvfrom; asyncio's loop adds
    // epoll_wait and its wake-up socket's sendto; threads, futex; the Docker relay, read.
    // Allowed by number alone, they are answered from the kernel's seccomp action cache,
    // without running the filter, so the filter adds nothing to a tool call's time.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("filter.bpf");
    build(&policy())
        .unwrap()
        .export_bpf(std::fs::File::create(&path).unwrap())
        .unwrap();
    let program = std::fs::read(&path).unwrap();
    let nr = |name: &str| ScmpSyscall::from_name(name).unwrap().as_raw_syscall();
    const ALLOW: u32 = 0x7FFF_0000; // SECCOMP_RET_ALLOW
    for name in [
        "read",
        "write",
        "poll",
        "recvfrom",
        "sendto",
        "epoll_wait",
        "futex",
    ] {
        assert_eq!(
            answer_by_number_alone(&program, nr(name)),
            Some(ALLOW),
            "{name} must be allowed whatever its arguments"
        );
    }
    // The walk tells the other kinds apart: a syscall whose arguments are compared, and one
    // the filter refuses.
    assert_eq!(answer_by_number_alone(&program, nr("fcntl")), None);
    assert_eq!(
        answer_by_number_alone(&program, nr("ptrace")),
        Some(0x0005_0000 | libc::EPERM as u32), // SECCOMP_RET_ERRNO | EPERM
    );
}
