//! Kernel probes for `mcp-code-mode doctor`: can this user create each namespace kind the
//! launcher asks for, set no_new_privs and load a seccomp filter; which Landlock ABI the
//! kernel offers. Each answer comes from the syscall itself, not from reading settings.
//!
//! Why a forked child, and why that is sound from the host's multi-threaded process:
//! unshare(2), PR_SET_NO_NEW_PRIVS and seccomp filters change the calling process for good,
//! and unshare(CLONE_NEWUSER) refuses a multi-threaded caller (EINVAL). So every probe that
//! changes state runs in a child made by fork semantics (raw clone(2) with SIGCHLD), which
//! holds one thread only, and the caller is left untouched. The host runs tokio threads,
//! and after fork in a multi-threaded process the child may only make async-signal-safe
//! calls (another thread may have held the allocator's or stdio's lock at the fork). The
//! child therefore runs [`Step`]s only: a fixed list, chosen before the fork, of raw
//! syscalls on constants and stack data — no allocation, no lock, no panic — then reports
//! the first failure over a pipe (two bytes: step index, errno) and calls _exit(2).
//! The alternative, re-executing `mcp-code-mode` into a hidden subcommand before any
//! thread starts (as `__launcher` is), would need a second entry point in the argument
//! parser for no gain. The Landlock ABI query changes nothing and runs in the caller.
//!
//! The syscalls themselves (their `unsafe` blocks, each with a `// SAFETY:` comment) live in
//! [`crate::sys`], like every other raw call of the launcher.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;

use crate::sys::{self, Cloned, Exit};

/// A namespace kind the launcher creates (see [`crate::namespaces::FLAGS`]; the time
/// namespace is made later, by [`crate::time_ns`], and only where the kernel has them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// CLONE_NEWUSER: the one the others hang on for an unprivileged caller.
    User,
    /// CLONE_NEWNS.
    Mount,
    /// CLONE_NEWPID.
    Pid,
    /// CLONE_NEWNET.
    Net,
    /// CLONE_NEWIPC.
    Ipc,
    /// CLONE_NEWUTS.
    Uts,
    /// CLONE_NEWCGROUP.
    Cgroup,
    /// CLONE_NEWTIME (Linux >= 5.6 with `CONFIG_TIME_NS`): the sandbox's own monotonic and
    /// boot clocks. The launcher goes on without it when the kernel has none (EINVAL).
    Time,
}

impl Namespace {
    /// Every kind, in the order of namespaces(7).
    pub const ALL: [Namespace; 8] = [
        Namespace::User,
        Namespace::Mount,
        Namespace::Pid,
        Namespace::Net,
        Namespace::Ipc,
        Namespace::Uts,
        Namespace::Cgroup,
        Namespace::Time,
    ];

    /// The short name: `user`, `mount`, `pid`, `net`, `ipc`, `uts`, `cgroup`, `time`.
    pub fn name(self) -> &'static str {
        match self {
            Namespace::User => "user",
            Namespace::Mount => "mount",
            Namespace::Pid => "pid",
            Namespace::Net => "net",
            Namespace::Ipc => "ipc",
            Namespace::Uts => "uts",
            Namespace::Cgroup => "cgroup",
            Namespace::Time => "time",
        }
    }

    /// The clone(2)/unshare(2) flag.
    pub fn flag(self) -> libc::c_int {
        match self {
            Namespace::User => libc::CLONE_NEWUSER,
            Namespace::Mount => libc::CLONE_NEWNS,
            Namespace::Pid => libc::CLONE_NEWPID,
            Namespace::Net => libc::CLONE_NEWNET,
            Namespace::Ipc => libc::CLONE_NEWIPC,
            Namespace::Uts => libc::CLONE_NEWUTS,
            Namespace::Cgroup => libc::CLONE_NEWCGROUP,
            Namespace::Time => libc::CLONE_NEWTIME,
        }
    }

    /// The flag's name, e.g. `CLONE_NEWNS`.
    pub fn flag_name(self) -> &'static str {
        match self {
            Namespace::User => "CLONE_NEWUSER",
            Namespace::Mount => "CLONE_NEWNS",
            Namespace::Pid => "CLONE_NEWPID",
            Namespace::Net => "CLONE_NEWNET",
            Namespace::Ipc => "CLONE_NEWIPC",
            Namespace::Uts => "CLONE_NEWUTS",
            Namespace::Cgroup => "CLONE_NEWCGROUP",
            Namespace::Time => "CLONE_NEWTIME",
        }
    }

    /// The sysctl capping how many of this kind each user may own (namespaces(7),
    /// "/proc/sys/user"): `user.max_mnt_namespaces` and so on.
    pub fn max_sysctl(self) -> &'static str {
        match self {
            Namespace::User => "user.max_user_namespaces",
            Namespace::Mount => "user.max_mnt_namespaces",
            Namespace::Pid => "user.max_pid_namespaces",
            Namespace::Net => "user.max_net_namespaces",
            Namespace::Ipc => "user.max_ipc_namespaces",
            Namespace::Uts => "user.max_uts_namespaces",
            Namespace::Cgroup => "user.max_cgroup_namespaces",
            Namespace::Time => "user.max_time_namespaces",
        }
    }

    /// What the probe child does for this kind. Always inside a new user namespace, as the
    /// launcher does it, then a use that needs the namespace's capabilities where one is
    /// cheap: a private `/` for mount, a hostname for uts, clock offsets for time (as the
    /// launcher writes its own); for the user namespace itself, a uts namespace and a
    /// hostname (AppArmor's userns restriction lets the unshare succeed but strips the
    /// capabilities, so the unshare alone proves nothing).
    pub fn steps(self) -> &'static [Step] {
        match self {
            Namespace::User => &[
                Step::Unshare(libc::CLONE_NEWUSER),
                Step::Unshare(libc::CLONE_NEWUTS),
                Step::SetHostname,
            ],
            Namespace::Mount => &[
                Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS),
                Step::MakeRootPrivate,
            ],
            Namespace::Pid => &[Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID)],
            Namespace::Net => &[Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)],
            Namespace::Ipc => &[Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWIPC)],
            Namespace::Uts => &[
                Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWUTS),
                Step::SetHostname,
            ],
            Namespace::Cgroup => &[Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWCGROUP)],
            Namespace::Time => &[
                Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWTIME),
                Step::WriteTimeOffsets,
            ],
        }
    }
}

/// One syscall the probe child makes. Lists of steps are fixed in this module, so that
/// [`Step::SetHostname`], [`Step::MakeRootPrivate`] and [`Step::WriteTimeOffsets`] only
/// ever follow the unshare that makes them harmless to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// unshare(2) with these flags.
    Unshare(libc::c_int),
    /// sethostname("probe") (needs CAP_SYS_ADMIN over the uts namespace).
    SetHostname,
    /// mount(NULL, "/", NULL, MS_REC|MS_PRIVATE, NULL) (needs CAP_SYS_ADMIN over the mount
    /// namespace).
    MakeRootPrivate,
    /// Zero offsets written to `/proc/self/timens_offsets` (needs CAP_SYS_TIME over the
    /// time namespace made for the caller's children, and no process in it yet).
    WriteTimeOffsets,
    /// prctl(PR_SET_NO_NEW_PRIVS, 1).
    SetNoNewPrivs,
    /// prctl(PR_GET_NO_NEW_PRIVS) answers 1.
    ReadNoNewPrivs,
    /// seccomp(SECCOMP_SET_MODE_FILTER) with a one-instruction allow-all filter.
    LoadAllowAllFilter,
    /// prctl(PR_GET_SECCOMP) answers 2 (filter mode).
    ReadSeccompMode,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Unshare(flags) => {
                let names: Vec<&str> = Namespace::ALL
                    .iter()
                    .filter(|ns| flags & ns.flag() != 0)
                    .map(|ns| ns.flag_name())
                    .collect();
                let rest = flags & !Namespace::ALL.iter().fold(0, |all, ns| all | ns.flag());
                if rest == 0 {
                    write!(f, "unshare({})", names.join("|"))
                } else if names.is_empty() {
                    write!(f, "unshare({rest:#x})")
                } else {
                    write!(f, "unshare({}|{rest:#x})", names.join("|"))
                }
            }
            Step::SetHostname => f.write_str("sethostname"),
            Step::MakeRootPrivate => f.write_str("mount --make-rprivate /"),
            Step::WriteTimeOffsets => f.write_str("write /proc/self/timens_offsets"),
            Step::SetNoNewPrivs => f.write_str("prctl(PR_SET_NO_NEW_PRIVS)"),
            Step::ReadNoNewPrivs => f.write_str("prctl(PR_GET_NO_NEW_PRIVS) == 1"),
            Step::LoadAllowAllFilter => f.write_str("seccomp(SECCOMP_SET_MODE_FILTER)"),
            Step::ReadSeccompMode => f.write_str("prctl(PR_GET_SECCOMP) == 2"),
        }
    }
}

/// What a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Every step worked.
    Works,
    /// `step` failed with `errno` (0: the call worked but answered something unexpected).
    Refused { step: Step, errno: i32 },
}

/// Can this user create a `kind` namespace the way the launcher does, and use it?
///
/// # Errors
/// Only when the probe itself could not run (pipe, clone or waitpid failed, or the child
/// died by a signal); a refusal by the kernel is `Ok(Probe::Refused)`.
pub fn namespace(kind: Namespace) -> io::Result<Probe> {
    in_child(kind.steps())
}

/// Can this process set no_new_privs (and read it back)?
///
/// # Errors
/// As [`namespace`].
pub fn no_new_privs() -> io::Result<Probe> {
    in_child(&[Step::SetNoNewPrivs, Step::ReadNoNewPrivs])
}

/// Can this process load a seccomp filter (after no_new_privs, as the launcher does)?
///
/// # Errors
/// As [`namespace`].
pub fn seccomp_filter() -> io::Result<Probe> {
    in_child(&[
        Step::SetNoNewPrivs,
        Step::LoadAllowAllFilter,
        Step::ReadSeccompMode,
    ])
}

/// The Landlock ABI version the kernel offers (landlock_create_ruleset with
/// LANDLOCK_CREATE_RULESET_VERSION; landlock(7)), or the errno: ENOSYS when the kernel was
/// built without Landlock, EOPNOTSUPP when it is built in but not enabled at boot.
pub fn landlock_abi() -> Result<u32, i32> {
    sys::landlock_abi()
}

/// Runs `steps` in a child with fork semantics and reports the first that failed.
fn in_child(steps: &[Step]) -> io::Result<Probe> {
    let (read, write) = sys::pipe()?;
    // clone with SIGCHLD only: fork(2) without glibc's atfork handlers. The child keeps to
    // async-signal-safe work until it exits (see the module docs), which makes the clone
    // sound although the caller (doctor) is multi-threaded.
    match sys::clone_process(0)? {
        Cloned::Child => {
            // Only async-signal-safe work from here on (see the module docs).
            let code = match run_steps(steps) {
                Ok(()) => 0,
                Err((index, errno)) => {
                    let _ = sys::write_byte(&write, index);
                    let _ = sys::write_byte(&write, u8::try_from(errno).unwrap_or(u8::MAX));
                    1
                }
            };
            sys::exit_now(code)
        }
        Cloned::Parent { child } => {
            drop(write);
            let report = read_report(&read);
            let exit = sys::wait_for(child)?;
            match (exit, report?) {
                (Exit::Code(0), _) => Ok(Probe::Works),
                (Exit::Code(1), Some((index, errno))) => match steps.get(usize::from(index)) {
                    Some(step) => Ok(Probe::Refused {
                        step: *step,
                        errno: i32::from(errno),
                    }),
                    None => Err(io::Error::other(format!(
                        "the probe child named step {index} of {}",
                        steps.len()
                    ))),
                },
                (exit, _) => Err(io::Error::other(format!(
                    "the probe child ended with status {} and no report",
                    exit.as_status()
                ))),
            }
        }
    }
}

/// The child's two bytes (step index, errno), or `None` at EOF before them.
fn read_report(read: &OwnedFd) -> io::Result<Option<(u8, u8)>> {
    let Some(index) = sys::read_byte(read)? else {
        return Ok(None);
    };
    Ok(sys::read_byte(read)?.map(|errno| (index, errno)))
}

/// Runs each step in order; the first failure as (index, errno). Called in the forked
/// child: raw syscalls on constants and stack data only.
fn run_steps(steps: &[Step]) -> Result<(), (u8, i32)> {
    for (index, step) in steps.iter().enumerate() {
        let done = match *step {
            Step::Unshare(flags) => sys::unshare(flags),
            Step::SetHostname => set_hostname_probe(),
            Step::MakeRootPrivate => sys::make_root_private(),
            Step::WriteTimeOffsets => sys::write_zero_time_offsets(),
            Step::SetNoNewPrivs => sys::set_no_new_privs(),
            Step::ReadNoNewPrivs => expect(sys::prctl_get(libc::PR_GET_NO_NEW_PRIVS), 1),
            Step::LoadAllowAllFilter => sys::load_allow_all_filter(),
            Step::ReadSeccompMode => expect(sys::prctl_get(libc::PR_GET_SECCOMP), 2),
        };
        if let Err(e) = done {
            let index = u8::try_from(index).unwrap_or(u8::MAX);
            return Err((index, e.raw_os_error().unwrap_or(0)));
        }
    }
    Ok(())
}

/// Ok when `got` is `want`; a wrong answer is reported with errno 0.
fn expect(got: io::Result<libc::c_int>, want: libc::c_int) -> io::Result<()> {
    match got? {
        v if v == want => Ok(()),
        _ => Err(io::Error::from_raw_os_error(0)),
    }
}

/// sethostname("probe"). Only after unshare(CLONE_NEWUTS) (see [`Step`]).
fn set_hostname_probe() -> io::Result<()> {
    sys::sethostname("probe")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{landlock_available, require_user_namespaces};

    // The test harness runs several threads: these tests are the multi-threaded caller the
    // probes are written for.

    #[test]
    fn a_step_that_fails_is_named_with_its_errno() {
        // CLONE_VFORK is not an unshare flag: EINVAL, at the second step.
        let steps = [Step::SetNoNewPrivs, Step::Unshare(libc::CLONE_VFORK)];
        assert_eq!(
            in_child(&steps).unwrap(),
            Probe::Refused {
                step: Step::Unshare(libc::CLONE_VFORK),
                errno: libc::EINVAL
            }
        );
    }

    #[test]
    fn every_namespace_kind_works_where_user_namespaces_do_and_the_caller_is_untouched() {
        if !require_user_namespaces() {
            return;
        }
        let own = std::fs::read_link("/proc/self/ns/user").unwrap();
        for kind in Namespace::ALL {
            assert_eq!(namespace(kind).unwrap(), Probe::Works, "{}", kind.name());
        }
        assert_eq!(std::fs::read_link("/proc/self/ns/user").unwrap(), own);
    }

    #[test]
    fn seccomp_and_no_new_privs_work_in_the_child_only() {
        let before = sys::no_new_privs().unwrap();
        assert_eq!(no_new_privs().unwrap(), Probe::Works);
        assert_eq!(seccomp_filter().unwrap(), Probe::Works);
        assert_eq!(
            sys::no_new_privs().unwrap(),
            before,
            "the caller's no_new_privs changed"
        );
    }

    #[test]
    fn the_landlock_abi_is_what_the_kernel_answers() {
        if !landlock_available() {
            return;
        }
        assert!(landlock_abi().unwrap() >= 6);
    }

    #[test]
    fn steps_read_as_syscalls() {
        assert_eq!(
            Step::Unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS).to_string(),
            "unshare(CLONE_NEWUSER|CLONE_NEWNS)"
        );
        assert_eq!(
            Step::Unshare(libc::CLONE_VFORK).to_string(),
            "unshare(0x4000)"
        );
    }
}
