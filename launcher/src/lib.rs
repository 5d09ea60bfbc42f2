//! The native sandbox launcher of mcp-code-mode.
//!
//! `mcp-code-mode __launcher ARGS` re-executes itself into [`run_from_args`] before any thread
//! starts. The launcher joins the run's cgroups, clones into fresh namespaces and, in the
//! child, locks the process down layer by layer before it execs the program (Python) as pid 1
//! of the new pid namespace. The outer launcher waits and passes the exit status on.
//! Every `unsafe` call lives in [`sys`]; each stage is one module with one job. See
//! README.md for the stage order and why it is so.

use std::convert::Infallible;
use std::ffi::OsString;
use std::path::Path;

pub mod args;
pub mod capabilities;
pub mod cgroups;
pub mod devices;
pub mod exec;
pub mod failure;
pub mod fds;
pub mod host_id;
pub mod identity;
pub mod idmap;
pub mod landlock_rules;
pub mod mounts;
pub mod namespaces;
pub mod privs;
pub mod probe;
pub mod report;
pub mod rlimits;
pub mod seccomp;
#[allow(unsafe_code)]
mod sys;
pub mod test_knobs;
#[cfg(test)]
mod testutil;
pub mod tied;
pub mod time_ns;

pub use args::Config;
pub use failure::{FAILURE_STATUS, LaunchFailure, Note, Stage};
pub use seccomp::{ArgCmp, CmpOp, Policy, Rule, policy};

use namespaces::{Gate, Sandbox, Side};

/// Any stage's failure. Each message reads "failed to <step>: <why>".
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(transparent)]
    Args(#[from] args::ArgsError),
    #[error(transparent)]
    Cgroup(#[from] cgroups::CgroupJoinError),
    #[error(transparent)]
    Namespace(#[from] namespaces::NamespaceError),
    #[error(transparent)]
    IdMap(#[from] idmap::IdMapError),
    #[error(transparent)]
    Identity(#[from] identity::IdentityError),
    #[error(transparent)]
    TimeNamespace(#[from] time_ns::TimeNsError),
    #[error(transparent)]
    Mount(#[from] mounts::MountError),
    #[error(transparent)]
    Rlimit(#[from] rlimits::RlimitError),
    #[error(transparent)]
    Fd(#[from] fds::FdError),
    #[error(transparent)]
    Capability(#[from] capabilities::CapabilityError),
    #[error(transparent)]
    Privs(#[from] privs::PrivsError),
    #[error(transparent)]
    Landlock(#[from] landlock_rules::LandlockError),
    #[error(transparent)]
    Seccomp(#[from] seccomp::SeccompError),
    #[error(transparent)]
    Exec(#[from] exec::ExecError),
    /// Sending the sandbox's pidfd to the host failed.
    #[error("failed to report the sandbox to the host: {0}")]
    Report(#[source] std::io::Error),
}

impl LaunchError {
    /// The failure as the host reads it: the stage, the errno behind it, the message.
    pub fn failure(&self) -> LaunchFailure {
        let (stage, error): (Stage, &(dyn std::error::Error + 'static)) = match self {
            LaunchError::Args(e) => (Stage::Args, e),
            LaunchError::Cgroup(e) => (Stage::Cgroup, e),
            LaunchError::Namespace(e) => (Stage::Namespace, e),
            LaunchError::IdMap(e) => (Stage::IdMap, e),
            LaunchError::Identity(e) => (Stage::Identity, e),
            LaunchError::TimeNamespace(e) => (Stage::Namespace, e),
            LaunchError::Mount(e) => (Stage::Mount, e),
            LaunchError::Rlimit(e) => (Stage::Rlimit, e),
            LaunchError::Fd(e) => (Stage::Fd, e),
            LaunchError::Capability(e) => (Stage::Capability, e),
            LaunchError::Privs(e) => (Stage::Privs, e),
            LaunchError::Landlock(e) => (Stage::Landlock, e),
            LaunchError::Seccomp(e) => (Stage::Seccomp, e),
            LaunchError::Exec(e) => (Stage::Exec, e),
            LaunchError::Report(_) => (Stage::Report, self),
        };
        LaunchFailure::new(stage, error)
    }
}

/// Parses the arguments after `__launcher` and runs the sandbox.
///
/// On success the sandbox process execs the program and the outer launcher returns the
/// program's exit status (128 + N when killed by signal N). On failure it returns
/// [`FAILURE_STATUS`] (125) and reports a [`LaunchFailure`]: on the report socket when
/// `--report-fd` was given (the only failure the host believes, see [`report`]), else as one
/// line `launcher: failed to <step>: <why> (stage <stage>, errno <n>)` on stderr.
pub fn run_from_args(args: impl Iterator<Item = OsString>) -> i32 {
    let cfg = match Config::parse(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("{}", LaunchError::from(e).failure().stderr_line());
            return FAILURE_STATUS;
        }
    };
    let reporter = match report::Reporter::adopt(cfg.report_fd) {
        Ok(reporter) => reporter,
        Err(e) => {
            eprintln!("{}", LaunchError::Report(e).failure().stderr_line());
            return FAILURE_STATUS;
        }
    };
    match run(&cfg, &reporter) {
        Ok(status) => status,
        Err(e) if reporter.is_active() => {
            reporter.failed(&e.failure());
            FAILURE_STATUS
        }
        Err(e) => {
            eprintln!("{}", e.failure().stderr_line());
            FAILURE_STATUS
        }
    }
}

/// The stages, in order. Returns the program's exit status in the outer launcher; in the
/// sandbox process it returns only on failure.
pub fn run(cfg: &Config, reporter: &report::Reporter) -> Result<i32, LaunchError> {
    // 0. Die with the host thread that spawned us (SIGKILL), re-checked after arming.
    namespaces::die_with_parent()?;
    // 1. Join the run's cgroups, so every sandbox process is born inside them.
    cgroups::join(&cfg.cgroup_procs, sys_pid())?;
    // (Fail early, with the fix, if the rootfs has nothing to mount on.)
    mounts::check_rootfs(&cfg.rootfs)?;
    // 1b. A root caller makes the sandbox's device nodes anew in a mount namespace of the
    //     launcher's own, so no lock on them is shared with the host or another run; anyone
    //     else binds the host's (devices.rs).
    devices::make_own();
    // 2. Clone into new user/mount/pid/net/ipc/uts/cgroup namespaces (a root caller first
    //    sheds its supplementary groups, which setgroups "deny" would freeze in).
    let (uid, gid) = idmap::caller();
    let mapping = idmap::Mapping::for_caller(uid, gid)?;
    idmap::drop_groups_if_root(uid)?;
    match namespaces::clone_sandbox()? {
        Side::Outer(sandbox) => outer(sandbox, &mapping, reporter),
        Side::Inner(gate) => inner(cfg, gate, reporter).map(|never| match never {}),
    }
}

/// The outer launcher, still in the initial namespaces.
fn outer(
    sandbox: Sandbox,
    mapping: &idmap::Mapping,
    reporter: &report::Reporter,
) -> Result<i32, LaunchError> {
    // 3. Write the child's uid/gid maps from here (setgroups "deny" first), hand the host a
    //    pidfd of the child (before any of the program's code can run), then release it.
    idmap::write(sandbox.pid(), &idmap::plan(mapping, sandbox.pid()))?;
    reporter
        .started(sandbox.pid())
        .map_err(LaunchError::Report)?;
    sandbox.release()?;
    // Leave the protocol pipes to the sandbox alone, so the host sees EOF when it closes them.
    fds::hand_over_protocol_pipes()?;
    // Pass the program's exit status on (128 + N for signal N).
    Ok(sandbox.wait()?.as_status())
}

/// The sandbox process: pid 1 of the new pid namespace, full capabilities in its own user
/// namespace until stage 8.
fn inner(cfg: &Config, gate: Gate, reporter: &report::Reporter) -> Result<Infallible, LaunchError> {
    // 3. Wait for the id maps; if the outer launcher failed, it already said why.
    if gate.wait_for_release().is_err() {
        std::process::exit(FAILURE_STATUS);
    }
    // 3b. A time namespace of its own: the monotonic and boot clocks start near zero instead
    //     of telling the host's uptime (time_ns.rs). Before the uid change, which makes the
    //     process non-dumpable and so its /proc/self files no longer its own to write.
    time_ns::enter_own()?;
    // 4. Own session; become uid/gid 65534 with hostname "sandbox" (before the mounts: see
    //    identity.rs), and re-arm the death signal that the uid change cleared.
    identity::become_sandbox_user()?;
    gate.rearm_after_credentials_change()?;
    // 5. Private mounts, read-only root, /tmp, /dev, fresh /proc, pivot_root, cwd /tmp.
    let mut mount_plan = mounts::plan(&cfg.rootfs, cfg.tmp_size);
    cfg.test_knobs.relax_mounts(&cfg.rootfs, &mut mount_plan);
    mounts::install(&mount_plan)?;
    // 6. Resource limits: NPROC, NOFILE, FSIZE, CORE 0, STACK, optional DATA and CPU.
    //    (CORE left as inherited only by the test knob --test-core-dumps.)
    let mut limits = rlimits::plan(cfg);
    cfg.test_knobs.relax_rlimits(&mut limits);
    rlimits::install(&limits)?;
    // 7. Close every descriptor but 0, 1, 2 and the report socket (close-on-exec).
    fds::close_all_but_stdio(reporter.raw_fd())?;
    // 8. Drop every capability: bounding, ambient, inheritable, effective, permitted.
    capabilities::drop_all()?;
    // 9. no_new_privs.
    privs::forbid_new_privileges()?;
    // 10. Landlock: read+exec under / but not /tmp, read+write /tmp and /dev/null; no TCP;
    //     abstract unix sockets and signals scoped to the sandbox.
    //     (Left out only by the test knob --test-without-landlock.)
    if !cfg.test_knobs.without_landlock {
        let (root, tmp) = (Path::new("/"), Path::new("/tmp"));
        let entries = landlock_rules::root_entries(root, tmp)?;
        let plan = landlock_rules::plan(root, &entries, tmp, Path::new("/dev/null"));
        let enforced = landlock_rules::install(&plan)?;
        if enforced.status != landlock::RulesetStatus::FullyEnforced {
            let note = Note::Landlock {
                status: format!("{:?}", enforced.status),
                abi: enforced.abi.map(|abi| abi as u32),
            };
            eprintln!("{}", note.encode());
        }
    }
    // 11. seccomp: the allowlist policy, denied calls answered with --seccomp-errno.
    //     (Left out only by the test knob --test-without-seccomp.)
    if !cfg.test_knobs.without_seccomp {
        seccomp::install(&Policy {
            default_errno: cfg.seccomp_errno,
            ..seccomp::policy()
        })?;
    }
    // 12. Exec the program with an empty environment.
    Err(exec::exec_program(&cfg.program).into())
}

/// SIGKILL one process by pid (for the host's cgroup cleanup, which has no `unsafe` of its
/// own). `pid` must be > 0, else EINVAL; ESRCH when it already exited. Source: kill(2).
pub fn kill_process(pid: i32) -> std::io::Result<()> {
    sys::kill_pid(pid)
}

fn sys_pid() -> i32 {
    sys::own_pid()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::{empty_rootfs, in_child, require_user_namespaces};

    /// Stages 2 to 4 in a forked child: clone, id maps, identity, mounts; then `probe` runs
    /// inside and its return value comes back as the exit code.
    fn inside_mounts(root: &Path, probe: fn() -> i32) -> Exit {
        let root = root.to_owned();
        in_child(move || match namespaces::clone_sandbox().unwrap() {
            Side::Outer(sandbox) => {
                let (uid, gid) = idmap::caller();
                let mapping = idmap::Mapping::for_caller(uid, gid).unwrap();
                idmap::write(sandbox.pid(), &idmap::plan(&mapping, sandbox.pid())).unwrap();
                sandbox.release().unwrap();
                sandbox.wait().unwrap().as_status()
            }
            Side::Inner(gate) => {
                gate.wait_for_release().unwrap();
                identity::become_sandbox_user().unwrap();
                gate.rearm_after_credentials_change().unwrap();
                mounts::install(&mounts::plan(&root, 1 << 20)).unwrap();
                probe()
            }
        })
    }

    #[test]
    fn the_root_is_read_only_tmp_is_writable_but_noexec_and_no_host_path_is_visible() {
        if !require_user_namespaces() {
            return;
        }
        let (_dir, root) = empty_rootfs();
        let exit = inside_mounts(&root, || {
            let errno = |r: std::io::Result<()>| r.err().and_then(|e| e.raw_os_error());
            let checks = [
                // the rootfs is the root, and read-only
                std::fs::read_to_string("/etc/marker").ok().as_deref() == Some("rootfs"),
                errno(std::fs::write("/etc/new", "x")) == Some(libc::EROFS),
                // /tmp takes writes, cannot execute, and is the cwd
                errno(std::fs::write("/tmp/f", "x")).is_none(),
                sys::mount_flags_of(Path::new("/tmp")).unwrap() & libc::ST_NOEXEC != 0,
                std::env::current_dir().unwrap() == Path::new("/tmp"),
                // /dev has exactly the four nodes (+ links), read-only, and /dev/null works
                errno(std::fs::write("/dev/null", "x")).is_none(),
                // the host's device nodes keep their metadata
                errno(sys::touch(Path::new("/dev/null"))) == Some(libc::EROFS),
                errno(sys::touch(Path::new("/dev/urandom"))) == Some(libc::EROFS),
                std::fs::read_dir("/dev").unwrap().count() == 8,
                errno(std::fs::write("/dev/new", "x")) == Some(libc::EROFS),
                // a fresh /proc of our pid namespace: we are pid 1
                std::fs::read_link("/proc/self").unwrap() == Path::new("1"),
                // no /sys, no host paths
                !Path::new("/sys").exists() && !Path::new("/usr").exists(),
            ];
            checks
                .iter()
                .position(|ok| !ok)
                .map_or(0, |i| 10 + i as i32)
        });
        assert_eq!(exit, Exit::Code(0));
    }

    #[test]
    fn the_sandbox_runs_as_65534_with_hostname_sandbox() {
        if !require_user_namespaces() {
            return;
        }
        let (_dir, root) = empty_rootfs();
        let exit = inside_mounts(&root, || {
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let uid_line = status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .unwrap()
                .to_owned();
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
            let mut buf = [0u8; 64];
            let name = sys::hostname(&mut buf);
            match (
                uid_line.split_whitespace().skip(1).all(|u| u == "65534"),
                name == "sandbox",
            ) {
                (true, true) => 0,
                _ => {
                    eprintln!("{uid_line} {name} {host}");
                    1
                }
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}
