//! The probe classes: hostile Python from inside the sandbox, judged from outside.
//!
//! Every file in `tests/probes/<class>/` performs one hostile attempt (plus its positive
//! control) and prints one JSON line `{"probe", "outcome", "errno", "control", ...}`; it runs
//! through the real `mcp-code-mode exec` on each backend, after `tests/probes/prelude.py` and
//! the facts about the host it must not reach ([`HostFacts`]). A run that prints no line
//! (the sandbox was stopped, or the probe raised) is judged by the result instead:
//! `stopped:<reason>` or `raised:<exception>`. [`EXPECT`] lists, per probe, the accepted
//! outcomes: one outcome class per probe (the same on both backends); errnos may differ by
//! backend where the table says so. `exit 0` is never an outcome. After every probe the host
//! checks that nothing named with the probe's marker survived the run and that what exec
//! printed is bounded; after every class, that a host process of the sandbox's uid (the
//! sentinel) is still alive. One test per class per backend; the probes of a class run in
//! parallel. The whole table runs once more on the native backend with seccomp answering a
//! sentinel errno ([`UNDER_SENTINEL`], through the test-only
//! `MCP_CODE_MODE_TEST_SECCOMP_ERRNO`), so each denial is attributed to seccomp or to another
//! layer, and its table says which. The
//! per-layer view of the launcher alone is in `layers.rs` and `layers_alone.rs`.
//!
//! Index: the expectation table [`EXPECT`], the sentinel errno table [`UNDER_SENTINEL`],
//! and their check against the probe files; one test per probe class and backend, and per
//! class with the sentinel errno (`classes_on_both_backends!`); the host facts and the
//! survivor and sentinel-process checks.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{Exec, ExecOptions, exec_with, processes_named, unprivileged};
use super::layers::PRELUDE;

/// The probe classes, as directories of `tests/probes`.
const CLASSES: [&str; 10] = [
    "net", "fs", "priv", "krn", "res", "proto", "env", "life", "quota", "iso",
];

/// The device nodes whose host inode (device and inode number, times, mode) the probes must
/// leave alone.
const DEVICE_NODES: [&str; 4] = ["null", "zero", "random", "urandom"];

/// How long after a LIFE probe's run ended a process of it may still be dying; other classes
/// get [`SURVIVOR_GRACE`] (their probes are judged on containment, not on timing).
const LIFE_GRACE: Duration = Duration::from_secs(1);
const SURVIVOR_GRACE: Duration = Duration::from_secs(10);

/// Probes of one class running at once, per backend.
const PARALLEL: usize = 4;

/// The default deadline of a probe's run, seconds.
const DEADLINE: u64 = 30;

/// Most bytes `exec` may print on the host, stdout and stderr each, whatever the probe did.
const HOST_OUTPUT_LIMIT: usize = 64 * 1024;

/// A string the host puts in the environment of `exec`; it must appear nowhere inside.
const SECRET: &str = "mcp-code-mode-probe-secret-7d41c2";

/// What a probe may end as. Each accepted value is `outcome` or `outcome:errno`; a value
/// prefixed `native=` or `docker=` holds on that backend only, `rlimit=` on the native
/// backend without a cgroup (an unprivileged run: README, "rlimits").
struct Expect {
    probe: &'static str,
    accept: &'static [&'static str],
    deadline: u64,
}

const fn e(probe: &'static str, accept: &'static [&'static str]) -> Expect {
    Expect {
        probe,
        accept,
        deadline: DEADLINE,
    }
}

/// The deadline of probes that end by it: room for the sandbox's start (a container's on a
/// loaded host takes seconds) and then a few seconds of the probe, whose started marker the
/// run must show.
const START_AND_SECONDS: u64 = 12;

const fn within(seconds: u64, probe: &'static str, accept: &'static [&'static str]) -> Expect {
    Expect {
        probe,
        accept,
        deadline: seconds,
    }
}

/// The expectation table. A probe file without a row, or a row without a file, fails
/// `every_probe_file_has_one_expectation`.
const EXPECT: &[Expect] = &[
    // NET: seccomp refuses every socket family but AF_UNIX (EPERM) on both backends; the
    // host's UNIX sockets are out of the mount (pathname) and network (abstract) namespaces.
    e("net/tcp_ipv4_connect", &["denied:EPERM"]),
    e("net/udp_ipv4_sendto", &["denied:EPERM"]),
    e("net/tcp_ipv6_connect", &["denied:EPERM"]),
    e(
        "net/dns_lookup",
        &["denied:EAI_AGAIN", "denied:EAI_NONAME", "denied:EAI_FAIL"],
    ),
    e("net/netlink_route", &["denied:EPERM"]),
    e("net/packet_raw", &["denied:EPERM"]),
    e("net/icmp_raw", &["denied:EPERM"]),
    e("net/vsock", &["denied:EPERM"]),
    e("net/every_other_family", &["denied:EPERM"]),
    e("net/socket_high_bits", &["denied:EPERM"]),
    e("net/socketpair_inet", &["denied:EPERM"]),
    e("net/listen_inet", &["denied:EPERM"]),
    e("net/unix_host_sockets", &["denied:ENOENT"]),
    // ECONNREFUSED: the name is not in this network namespace; EPERM would be Landlock's scope.
    e(
        "net/unix_host_abstract",
        &["denied:ECONNREFUSED", "denied:EPERM"],
    ),
    e("net/control_unix_sockets", &["allowed"]),
    // FS
    // ETXTBSY: the running python, when the rootfs is the caller's own (unprivileged).
    e(
        "fs/write_outside_tmp",
        &["denied:EROFS", "denied:EACCES", "denied:ETXTBSY"],
    ),
    e("fs/read_host_paths", &["denied:ENOENT", "denied:EACCES"]),
    e("fs/proc_host_pids", &["denied:ENOENT", "denied:ESRCH"]),
    e(
        "fs/proc_self_exe_overwrite",
        &["denied:EACCES", "denied:EROFS", "denied:ETXTBSY"],
    ),
    e("fs/sys_absent", &["denied:ENOENT"]),
    e("fs/dev_nodes_absent", &["denied:ENOENT", "denied:ENXIO"]),
    e("fs/mknod_devices", &["denied:EPERM"]),
    e(
        "fs/exec_mmap_tmp",
        &[
            "denied:EPERM",
            "denied:LoaderRefused",
            "denied:DlopenRefused",
        ],
    ),
    e(
        "fs/symlink_write_passwd",
        &[
            "denied:EACCES",
            "denied:EROFS",
            "denied:EXDEV",
            "denied:ETXTBSY",
        ],
    ),
    e(
        "fs/hardlink_rootfs_files",
        &["denied:EXDEV", "denied:EPERM"],
    ),
    e(
        "fs/symlink_proc_root",
        &["denied:EACCES", "denied:ENOENT", "denied:EROFS"],
    ),
    e("fs/fill_tmp", &["denied:ENOSPC", "denied:EFBIG"]),
    // /tmp's nr_inodes cap, on both backends and in the rlimit fallback alike.
    e("fs/fill_tmp_inodes", &["denied:ENOSPC"]),
    // The chown to root fails: root is unmapped in the native user namespace (EINVAL), and
    // Docker's user lacks CAP_CHOWN (EPERM). The probe also reports nosuid, noexec and
    // no_new_privs as observed.
    e(
        "fs/setuid_bit_in_tmp",
        &["native=denied:EINVAL", "docker=denied:EPERM"],
    ),
    e("fs/open_by_handle_at", &["denied:EPERM"]),
    // Masked: Docker binds /dev/null over /proc/kcore, /proc/timer_list and others.
    e(
        "fs/proc_sys_writes",
        &[
            "denied:EACCES",
            "denied:ENOENT",
            "denied:EROFS",
            "denied:Masked",
        ],
    ),
    // EINVAL: uid 0 is not mapped in the native sandbox's user namespace.
    e(
        "fs/chown_and_xattrs",
        &["denied:EPERM", "denied:EINVAL", "denied:EOPNOTSUPP"],
    ),
    e(
        "fs/other_writable_mounts",
        &["denied:ENOENT", "denied:EROFS", "denied:EACCES"],
    ),
    e("fs/control_tmp_file", &["allowed"]),
    // PRIV
    e("priv/setuid_root", &["denied:EPERM"]),
    e("priv/unshare_every_flag", &["denied:EPERM"]),
    // ENOSYS: clone3, by policy (glibc falls back to clone).
    e(
        "priv/clone_namespace_flags",
        &["denied:EPERM", "denied:ENOSYS"],
    ),
    e("priv/mount_family", &["denied:EPERM"]),
    e("priv/setns_namespaces", &["denied:EPERM", "denied:ENOENT"]),
    e(
        "priv/ptrace_and_process_memory",
        &["denied:EPERM", "denied:ESRCH"],
    ),
    e("priv/status_no_privileges", &["denied"]),
    e("priv/signal_outside", &["denied:ESRCH", "denied:EPERM"]),
    // EINVAL: no_new_privs cannot be unset, PR_SET_DUMPABLE takes only 0 and 1.
    e("priv/prctl_games", &["denied:EPERM", "denied:EINVAL"]),
    e("priv/personality_flags", &["denied:EPERM"]),
    e(
        "priv/priority_and_limits",
        &["denied:EPERM", "denied:EACCES"],
    ),
    e("priv/setuid_files_absent", &["denied"]),
    e("priv/control_asyncio_threads", &["allowed"]),
    // KRN
    e("krn/io_uring", &["denied:EPERM"]),
    e("krn/userfaultfd", &["denied:EPERM", "denied:ENOENT"]),
    e("krn/bpf", &["denied:EPERM"]),
    e("krn/perf_event_open", &["denied:EPERM"]),
    e("krn/keyrings", &["denied:EPERM"]),
    e("krn/modules_and_kexec", &["denied:EPERM"]),
    e("krn/tty_ioctls", &["denied:EPERM"]),
    // Docker's runc answers ENOSYS above the profile's highest syscall number.
    e(
        "krn/unknown_syscall_numbers",
        &["denied:EPERM", "docker=denied:ENOSYS"],
    ),
    e("krn/x32_syscall", &["killed:SIGSYS"]),
    e("krn/i386_int80", &["killed:SIGSYS"]),
    // The kernel (>= 6.11) runs uretprobe past seccomp and raises SIGILL; before, unknown.
    e(
        "krn/uprobe_syscalls",
        &["killed:SIGILL", "denied:EPERM", "denied:ENOSYS"],
    ),
    e("krn/memfd_create", &["denied:EPERM"]),
    e(
        "krn/syslog",
        &["denied:EPERM", "denied:ENOENT", "denied:EACCES"],
    ),
    e("krn/host_admin_calls", &["denied:EPERM"]),
    e("krn/sysv_ipc", &["denied:EPERM"]),
    // Native: no /proc/kallsyms (proc subset=pid). Docker: masked, it reads empty.
    e(
        "krn/kernel_addresses",
        &["native=denied:ENOENT", "docker=denied:ZEROED"],
    ),
    e("krn/control_runtime", &["allowed"]),
    // RES
    within(START_AND_SECONDS, "res/fork_bomb", &["stopped:deadline"]),
    e("res/fork_until_refused", &["denied:EAGAIN"]),
    e("res/thread_bomb", &["denied:EAGAIN"]),
    e(
        "res/memory_at_once",
        &["stopped:memory", "rlimit=raised:MemoryError"],
    ),
    e(
        "res/memory_slowly",
        &["stopped:memory", "rlimit=raised:MemoryError"],
    ),
    // RLIMIT_DATA is per process: without a cgroup, four children of 96 MiB all live.
    e(
        "res/memory_in_children",
        &["denied:SIGKILL", "rlimit=allowed"],
    ),
    e("res/fd_exhaustion", &["denied:EMFILE"]),
    e("res/cpu_spin_threads", &["denied", "rlimit=allowed"]),
    within(
        START_AND_SECONDS,
        "res/sleep_ignoring_sigterm",
        &["stopped:deadline"],
    ),
    // Holds the host's pipes open: the run still ends with the cell's result (a "started"
    // run that was stopped fails), and the daemon dies with it.
    e("res/daemon_holding_the_pipes", &["started"]),
    e("res/stdout_gib", &["stopped:output"]),
    e("res/stderr_gib", &["stopped:output"]),
    e("res/raw_fds_gib", &["denied"]),
    e("res/diag_pipe_flood", &["denied"]),
    // The disk I/O limit (32 MiB/s per disk, cgroup blkio/io or Docker's --device-read-bps):
    // not in the rlimit fallback, which has no way to limit it (docs/threat-model.md).
    e("res/disk_read_direct", &["denied", "rlimit=allowed"]),
    // PROTO: every forged or broken line stops the run; a stop is never a success.
    e("proto/garbage_line", &["stopped:protocol"]),
    e("proto/invalid_utf8_line", &["stopped:protocol"]),
    e("proto/oversized_line", &["stopped:protocol"]),
    e("proto/endless_line", &["stopped:protocol"]),
    e("proto/deep_json", &["stopped:protocol"]),
    e("proto/forged_done_oversized", &["stopped:protocol"]),
    e("proto/forged_wrong_shapes", &["stopped:protocol"]),
    e("proto/forged_unknown_type", &["stopped:protocol"]),
    e("proto/forged_id_overflow", &["stopped:protocol"]),
    e("proto/forged_call_unknown_tool", &["denied"]),
    e("proto/close_and_exit0", &["stopped:ended"]),
    e("proto/exit0_silently", &["stopped:ended"]),
    e("proto/half_line_then_exit", &["stopped:ended"]),
    // Native: the last writer of the host's pipe is gone, EOF. Docker: its shim keeps the
    // pipe open, so the deadline ends the run.
    within(
        START_AND_SECONDS,
        "proto/silence_by_dup",
        &["stopped:ended", "stopped:deadline"],
    ),
    // The host's input is a socket whose sending side is shut down (EPIPE): natively the
    // launcher's stdin; on Docker the runner's relay child copies runc's stdin pipe onto one.
    e("proto/write_to_host_input", &["denied:EPIPE"]),
    // A socket cannot be opened by path (ENXIO). On Docker the pipe runc made the sandbox
    // user's is held only by the runner's non-dumpable relay child, whose /proc/PID/fd the
    // code cannot open (reopen_host_input tries that too).
    e(
        "proto/reopen_host_input",
        &["denied:ENXIO", "docker=denied:EACCES"],
    ),
    // The code's own exit 125, whatever its stderr says: never the host's startup failure.
    e("proto/forged_launcher_failure", &["stopped:status"]),
    e("proto/visible_fds", &["denied"]),
    // ENV: nothing of the host beyond what the README documents.
    e("env/environment", &["denied"]),
    e("env/hostname", &["denied"]),
    e("env/identity", &["denied"]),
    e("env/cwd_and_tmp", &["denied"]),
    e("env/mountinfo", &["denied"]),
    e("env/cgroup", &["denied"]),
    e("env/processes", &["denied"]),
    e("env/network_view", &["denied"]),
    e("env/etc_files", &["denied"]),
    // sysinfo(2): the host's uptime, load, RAM and process count; seccomp's, on both backends.
    e("env/host_sysinfo", &["denied:EPERM"]),
    // Host-wide /proc files (uptime, load, memory, interrupts, disks, pressure, boot id,
    // crypto use counts, the file systems' counters under /proc/fs...): absent natively
    // (proc subset=pid); Docker binds /dev/null over each file (MaskedPaths), and
    // /proc/pressure and /proc/fs are empty tmpfs.
    e(
        "env/host_activity_files",
        &[
            "native=denied:ENOENT",
            "docker=denied:Masked",
            "docker=denied:ENOENT",
        ],
    ),
    // Native: no /proc/cmdline (proc subset=pid) and no /dev/tty (ENOENT). Docker masks
    // /proc/cmdline (MaskedPaths: it reads empty) and always makes /dev/tty, with no
    // terminal behind it (ENXIO).
    e(
        "env/kernel_cmdline_and_tty",
        &[
            "native=denied:ENOENT",
            "docker=denied:Masked",
            "docker=denied:ENXIO",
        ],
    ),
    // LIFE: the death signal stays armed (prctl allows only the options in
    // launcher::seccomp::PRCTLS), and the host kills the sandbox's pid 1 itself through the
    // pidfd the launcher reported (Docker: the container's init). Nothing named with the
    // probe's marker may be alive 1 s after the run (LIFE_GRACE).
    e("life/clear_death_signal", &["denied:EPERM"]),
    e("life/daemon_outlives_the_run", &["started"]),
    within(
        START_AND_SECONDS,
        "life/pid1_outlives_by_deadline",
        &["stopped:deadline"],
    ),
    // QUOTA: no per-user host counter can be used up from inside.
    e("quota/inotify_instances", &["denied:EPERM"]),
    e("quota/pending_signals", &["denied:EAGAIN"]),
    e("quota/pipe_buffer_pages", &["denied:EPERM"]),
    e("quota/mqueue_bytes", &["denied:EPERM"]),
    e("quota/user_namespaces", &["denied:EPERM"]),
    e("quota/keys", &["denied:EPERM"]),
    e("quota/socket_buffers", &["denied:EPERM"]),
    // ISO: native binds the host's nodes read-only (EROFS); Docker makes the container its
    // own nodes (PRIVATE; EPERM where the times are not "now": root owns them).
    e(
        "iso/device_node_metadata",
        &[
            "native=denied:EROFS",
            "docker=denied:EPERM",
            "docker=denied:PRIVATE",
        ],
    ),
    e("iso/flock_shared_inodes", &["denied:EPERM"]),
    e("iso/watch_shared_inodes", &["denied:EPERM"]),
];

/// The errno the seccomp filter answers in the sentinel run (EADDRNOTAVAIL: no probe gets it
/// from the kernel), through the test-only `MCP_CODE_MODE_TEST_SECCOMP_ERRNO`.
const SENTINEL_ERRNO: &str = "99";
const SENTINEL: &str = "EADDRNOTAVAIL";

/// The whole table run once more with the sentinel errno attributes every denial to its
/// layer. A probe listed here is refused by seccomp (its accepted outcomes under the
/// sentinel, which must show the sentinel); a probe not listed must come out as [`EXPECT`]
/// says, without the sentinel: another layer refuses it (a capability check, the user or
/// another namespace, Landlock, a mount, an rlimit, a cgroup, the host's checks), even where
/// its errno is EPERM, seccomp's usual answer.
const UNDER_SENTINEL: &[(&str, &[&str])] = &[
    // NET: every socket family but AF_UNIX.
    ("net/tcp_ipv4_connect", S),
    ("net/udp_ipv4_sendto", S),
    ("net/tcp_ipv6_connect", S),
    ("net/netlink_route", S),
    ("net/packet_raw", S),
    ("net/icmp_raw", S),
    ("net/vsock", S),
    ("net/every_other_family", S),
    ("net/socket_high_bits", S),
    ("net/socketpair_inet", S),
    ("net/listen_inet", S),
    // FS: mknod and open_by_handle_at are seccomp's, not the capability check's (their EPERM
    // in EXPECT). Not listed, so another layer's: chown_and_xattrs' EPERM (no CAP_CHOWN in
    // the user namespace), exec_mmap_tmp's EPERM (noexec /tmp refuses PROT_EXEC),
    // hardlink_rootfs_files' EXDEV, and every EROFS, EACCES and ENOENT.
    ("fs/mknod_devices", S),
    ("fs/open_by_handle_at", S),
    // PRIV. clone3 answers ENOSYS by policy (also seccomp's); ptrace's ESRCH and setns'
    // ENOENT are the pid and mount namespaces'. priority_and_limits is split: real-time
    // scheduling, I/O priority and mlockall are seccomp's; a negative nice (EACCES) and
    // raising a hard limit (EPERM) are the kernel's capability checks.
    ("priv/setuid_root", S),
    ("priv/unshare_every_flag", S),
    ("priv/mount_family", S),
    ("priv/personality_flags", S),
    (
        "priv/clone_namespace_flags",
        &["denied:EADDRNOTAVAIL", "denied:ENOSYS"],
    ),
    (
        "priv/setns_namespaces",
        &["denied:EADDRNOTAVAIL", "denied:ENOENT"],
    ),
    (
        "priv/ptrace_and_process_memory",
        &["denied:EADDRNOTAVAIL", "denied:ESRCH"],
    ),
    (
        "priv/prctl_games",
        &["denied:EADDRNOTAVAIL", "denied:EINVAL"],
    ),
    (
        "priv/priority_and_limits",
        &["denied:EADDRNOTAVAIL", "denied:EACCES", "denied:EPERM"],
    ),
    // KRN: all seccomp's, but /dev/kmsg, /proc/kmsg and /dev/userfaultfd, absent (ENOENT);
    // x32 and i386 are killed (SIGSYS) whatever the errno.
    ("krn/io_uring", S),
    ("krn/bpf", S),
    ("krn/perf_event_open", S),
    ("krn/keyrings", S),
    ("krn/modules_and_kexec", S),
    ("krn/tty_ioctls", S),
    ("krn/unknown_syscall_numbers", S),
    ("krn/memfd_create", S),
    ("krn/host_admin_calls", S),
    ("krn/sysv_ipc", S),
    // ENV: sysinfo(2), the host's uptime, load, RAM and process count.
    ("env/host_sysinfo", S),
    (
        "krn/userfaultfd",
        &["denied:EADDRNOTAVAIL", "denied:ENOENT"],
    ),
    ("krn/syslog", &["denied:EADDRNOTAVAIL", "denied:ENOENT"]),
    // LIFE, QUOTA, ISO. pending_signals' EAGAIN is RLIMIT_SIGPENDING's.
    ("life/clear_death_signal", S),
    ("quota/inotify_instances", S),
    ("quota/pipe_buffer_pages", S),
    ("quota/mqueue_bytes", S),
    ("quota/user_namespaces", S),
    ("quota/keys", S),
    ("quota/socket_buffers", S),
    ("iso/flock_shared_inodes", S),
    ("iso/watch_shared_inodes", S),
];

/// Seccomp's sentinel answer, alone.
const S: &[&str] = &["denied:EADDRNOTAVAIL"];

fn probes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/probes")
}

/// The probes of `class`, as `class/name`, sorted.
fn probes_of(class: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(probes_dir().join(class))
        .unwrap_or_else(|e| panic!("tests/probes/{class}: {e}"))
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".py")?;
            Some(format!("{class}/{stem}"))
        })
        .collect();
    names.sort();
    names
}

fn expectation(probe: &str) -> &'static Expect {
    EXPECT
        .iter()
        .find(|x| x.probe == probe)
        .unwrap_or_else(|| panic!("{probe} has no row in EXPECT"))
}

/// What the host offers the probes to aim at, for one class on one backend: each must stay
/// out of reach. Dropping it stops the sentinel and the listeners.
struct HostFacts {
    /// A host process the sandbox must not be able to signal, in our process group: of our
    /// own uid when we are not root (a native sandbox's host uid then), else of host nobody
    /// (a Docker sandbox's host uid; a root caller's native sandbox has a host uid of its own).
    sentinel: Child,
    _abstract: UnixListener,
    _pathname: UnixListener,
    unix_path: PathBuf,
    secret_path: PathBuf,
    facts: Value,
    /// Times, mode and owner of each host device node in [`DEVICE_NODES`] at the start.
    devices: Vec<String>,
}

impl HostFacts {
    fn new(tag: &str) -> Self {
        let pid = std::process::id();
        let mut sleep = Command::new("sleep");
        sleep.arg("600").stdin(Stdio::null());
        if !unprivileged() {
            sleep.uid(65534).gid(65534);
        }
        let sentinel = sleep.spawn().expect("start the sentinel");
        let abstract_name = format!("mcp-code-mode-probe-{pid}-{tag}");
        let abstract_listener = UnixListener::bind_addr(
            &SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("abstract name"),
        )
        .expect("listen on a host abstract socket");
        let unix_path = std::env::temp_dir().join(format!("mcp-code-mode-probe-{pid}-{tag}.sock"));
        let _ = std::fs::remove_file(&unix_path);
        let pathname = UnixListener::bind(&unix_path).expect("listen on a host unix socket");
        let secret_path =
            std::env::temp_dir().join(format!("mcp-code-mode-probe-{pid}-{tag}.secret"));
        std::fs::write(&secret_path, SECRET).expect("write the host secret");
        let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
        let users = host_users();
        let user = std::env::var("USER").unwrap_or_default();
        // Strings that name the host; none may appear in what the sandbox can read.
        let mut strings = vec![
            SECRET.to_owned(),
            format!("{}/", home.trim_end_matches('/')),
            env!("CARGO_MANIFEST_DIR").to_owned(),
            super::common::target_dir().display().to_string(),
        ];
        if !user.is_empty() && user != "root" {
            strings.push(format!("/{user}/"));
        }
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let hostname = hostname.trim();
        if hostname.len() >= 4 && !["localhost", "sandbox"].contains(&hostname) {
            strings.push(hostname.to_owned());
        }
        let devices: serde_json::Map<String, Value> = DEVICE_NODES
            .iter()
            .filter_map(|name| {
                let st = std::fs::metadata(format!("/dev/{name}")).ok()?;
                Some(((*name).to_owned(), json!([st.dev(), st.ino()])))
            })
            .collect();
        let facts = json!({
            "devices": devices,
            "pid": pid,
            "sentinel_pid": sentinel.id(),
            "abstract": abstract_name,
            "unix_path": unix_path,
            "home": home,
            "secret_path": secret_path,
            "users": users,
            "strings": strings,
        });
        HostFacts {
            devices: device_state(),
            sentinel,
            _abstract: abstract_listener,
            _pathname: pathname,
            unix_path,
            secret_path,
            facts,
        }
    }

    /// The device nodes whose times, mode or owner changed since the start.
    fn changed_devices(&self) -> Vec<String> {
        device_state()
            .into_iter()
            .filter(|now| !self.devices.contains(now))
            .collect()
    }

    fn sentinel_alive(&mut self) -> bool {
        matches!(self.sentinel.try_wait(), Ok(None))
    }
}

impl Drop for HostFacts {
    fn drop(&mut self) {
        let _ = self.sentinel.kill();
        let _ = self.sentinel.wait();
        let _ = std::fs::remove_file(&self.unix_path);
        let _ = std::fs::remove_file(&self.secret_path);
    }
}

/// `name mtime ctime mode uid gid` (times in ns) of each host device node in DEVICE_NODES.
fn device_state() -> Vec<String> {
    DEVICE_NODES
        .iter()
        .filter_map(|name| {
            let st = std::fs::metadata(format!("/dev/{name}")).ok()?;
            Some(format!(
                "{name} {}.{:09} {}.{:09} {:o} {} {}",
                st.mtime(),
                st.mtime_nsec(),
                st.ctime(),
                st.ctime_nsec(),
                st.mode(),
                st.uid(),
                st.gid()
            ))
        })
        .collect()
}

/// Names of the host's accounts with uid 1000 or more (not nobody).
fn host_users() -> Vec<String> {
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            let uid: u32 = f.get(2)?.parse().ok()?;
            (uid >= 1000 && uid != 65534).then(|| f[0].to_owned())
        })
        .collect()
}

/// A process name (comm, at most 15 bytes) unique to one probe run.
fn marker() -> String {
    static SEQ: AtomicUsize = AtomicUsize::new(0);
    format!(
        "pm{}-{}",
        std::process::id() % 1_000_000,
        SEQ.fetch_add(1, Ordering::SeqCst)
    )
}

/// The cell: the probe's name, the host facts, the prelude, the probe.
fn cell(probe: &str, facts: &Value) -> String {
    let dir = probes_dir();
    let prelude = std::fs::read_to_string(dir.join("prelude.py")).expect("prelude.py");
    let body = std::fs::read_to_string(dir.join(format!("{probe}.py"))).expect("probe file");
    let quoted = |v: &str| serde_json::to_string(v).expect("a JSON string is a Python string");
    // The started marker, printed before the probe's body: a run stopped by its deadline
    // counts only when the probe itself ran (the deadline includes the sandbox's start).
    format!(
        "PROBE = {}\nimport json\nHOST = json.loads({})\nPRELUDE_SOURCE = {}\n{prelude}\n\
         print({}, flush=True)\n{body}",
        quoted(probe),
        quoted(&facts.to_string()),
        quoted(&prelude),
        quoted(&started_marker(probe)),
    )
}

/// The line a probe prints before its body runs.
fn started_marker(probe: &str) -> String {
    format!("probe-started {probe}")
}

/// One probe's run, as judged.
struct Verdict {
    probe: String,
    observed: String,
    took: Duration,
    failures: Vec<String>,
}

/// The outcome of a run: the probe's own line, or what the result says.
fn observe(probe: &str, r: &Exec) -> (String, Vec<String>, Option<Value>) {
    let Some(result) = r.result.as_ref() else {
        return ("no-result".into(), Vec::new(), None);
    };
    let printed = result["stdout"].as_str().unwrap_or_default();
    let line = printed
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .rfind(|v| v["probe"] == probe);
    if let Some(line) = line {
        let outcome = line["outcome"].as_str().unwrap_or("?").to_owned();
        let errnos = line["errno"]
            .as_str()
            .map(|s| s.split('|').map(str::to_owned).collect())
            .unwrap_or_default();
        return (outcome, errnos, Some(line));
    }
    let error = result["error"].as_str().unwrap_or_default();
    if result["stopped"].as_bool() == Some(true) {
        let reason = if error.contains("deadline") {
            "deadline"
        } else if error.contains("ran out of memory") {
            "memory"
        } else if error.contains("output limit") {
            "output"
        } else if error.starts_with("protocol violation") {
            "protocol"
        } else if error.contains("exited with status") {
            "status"
        } else if error.contains("without a result") {
            "ended"
        } else {
            "other"
        };
        return ("stopped".into(), vec![reason.into()], None);
    }
    if !error.is_empty() {
        // The last traceback line: "MemoryError" or "OSError: [Errno 1] ...".
        let last = error.lines().last().unwrap_or_default();
        let name = last.split(':').next().unwrap_or(last).trim().to_owned();
        return ("raised".into(), vec![name], None);
    }
    ("silent".into(), Vec::new(), None)
}

/// Whether `value` (an accepted entry, maybe prefixed) holds on `backend`.
fn applies<'a>(value: &'a str, backend: &str) -> Option<&'a str> {
    match value.split_once('=') {
        None => Some(value),
        Some(("rlimit", v)) if backend == "native" && unprivileged() => Some(v),
        Some((b, v)) if b == backend => Some(v),
        Some(_) => None,
    }
}

/// How the probe table is run: as shipped, or with seccomp answering [`SENTINEL_ERRNO`].
#[derive(Clone, Copy, PartialEq, Eq)]
enum Errno {
    Shipped,
    Sentinel,
}

/// The outcomes `probe` may end as in a run of `errno`, as the tables say.
fn accepted_outcomes(probe: &str, errno: Errno) -> &'static [&'static str] {
    let sentinel = UNDER_SENTINEL.iter().find(|(p, _)| *p == probe);
    match (errno, sentinel) {
        (Errno::Sentinel, Some((_, accept))) => accept,
        _ => expectation(probe).accept,
    }
}

fn run_probe(backend: &str, probe: &str, facts: &Value, errno: Errno) -> Verdict {
    let expect = expectation(probe);
    let marker = marker();
    let mut facts = facts.clone();
    facts["marker"] = json!(marker);
    let started = Instant::now();
    let r = exec_with(
        &cell(probe, &facts),
        ExecOptions {
            backend,
            args: vec!["--deadline".into(), expect.deadline.to_string()],
            env: [("MCP_CODE_MODE_PROBE_SECRET", SECRET)]
                .into_iter()
                .chain(match errno {
                    Errno::Shipped => vec![],
                    Errno::Sentinel => vec![
                        ("MCP_CODE_MODE_LAUNCHER_TEST_KNOBS", "1"),
                        ("MCP_CODE_MODE_TEST_SECCOMP_ERRNO", SENTINEL_ERRNO),
                    ],
                })
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ..Default::default()
        },
    );
    let took = started.elapsed();
    let (outcome, errnos, line) = observe(probe, &r);
    let observed = if errnos.is_empty() {
        outcome.clone()
    } else {
        format!("{outcome}:{}", errnos.join("|"))
    };
    let accepted: Vec<&str> = accepted_outcomes(probe, errno)
        .iter()
        .filter_map(|a| applies(a, backend))
        .collect();
    let mut failures = Vec::new();
    let fits = if errnos.is_empty() {
        accepted.contains(&outcome.as_str())
    } else {
        errnos
            .iter()
            .all(|e| accepted.contains(&format!("{outcome}:{e}").as_str()))
    };
    if !fits {
        failures.push(format!("{observed} is not one of {accepted:?}"));
    }
    // The sentinel run: a probe listed as seccomp's shows the sentinel, any other never.
    let listed = UNDER_SENTINEL.iter().any(|(p, _)| *p == probe);
    if errno == Errno::Sentinel && listed != errnos.iter().any(|e| e == SENTINEL) {
        failures.push(format!(
            "{observed}: listed as refused by seccomp: {listed}, but the sentinel {} there",
            if listed { "is not" } else { "is" }
        ));
    }
    // Every denial carries its positive control, and a control that ran must have passed.
    if let Some(line) = &line {
        let control = line.get("control").and_then(Value::as_str);
        if !errnos.is_empty() && ["denied", "killed"].contains(&outcome.as_str()) {
            if control != Some("ok") {
                failures.push(format!("positive control: {control:?}"));
            }
        } else if control.is_some_and(|c| c != "ok") {
            failures.push(format!("positive control: {control:?}"));
        }
    }
    if outcome == "no-result" || outcome == "silent" {
        failures.push(format!(
            "exit {}; stdout {:?}; stderr {:?}",
            r.code,
            r.stdout.chars().take(300).collect::<String>(),
            r.stderr.chars().take(300).collect::<String>()
        ));
    }
    // A deadline stop counts only if the probe had started: a slow sandbox start must not
    // pass for a probe that was stopped in time.
    if observed == "stopped:deadline"
        && !r
            .result()
            .get("stdout")
            .and_then(Value::as_str)
            .is_some_and(|s| s.lines().any(|l| l == started_marker(probe)))
    {
        failures.push("stopped by the deadline before the probe started".into());
    }
    // A daemon that started must not keep the run from ending with the cell's result.
    if outcome == "started" && r.result().get("stopped").and_then(Value::as_bool) != Some(false) {
        failures.push(format!(
            "the run did not end with the cell's result: {:?}",
            r.result().get("error")
        ));
    }
    if outcome == "stopped" && r.result().get("error").and_then(Value::as_str) == Some("") {
        failures.push("a stop without an error reads as a success".into());
    }
    // Host-side checks: bounded output, bounded time, nothing of the run left alive.
    if r.stdout.len() > HOST_OUTPUT_LIMIT || r.stderr.len() > HOST_OUTPUT_LIMIT {
        failures.push(format!(
            "exec printed {} bytes on stdout and {} on stderr",
            r.stdout.len(),
            r.stderr.len()
        ));
    }
    if took > Duration::from_secs(expect.deadline + 30) {
        failures.push(format!("took {took:?}"));
    }
    // Nothing a sandbox wrote may reach the operator's terminal raw: no control character
    // but newline and tab in what exec printed.
    for (stream, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
        if let Some(c) = text
            .chars()
            .find(|c| c.is_control() && *c != '\n' && *c != '\t')
        {
            failures.push(format!(
                "exec printed the control character {c:?} on {stream}"
            ));
        }
    }
    if r.code == 2 {
        failures.push(format!(
            "exec reported a startup failure of its own: {:?}",
            r.stderr.chars().take(300).collect::<String>()
        ));
    }
    let grace = if probe.starts_with("life/") {
        LIFE_GRACE
    } else {
        SURVIVOR_GRACE
    };
    let mut survivors = processes_named(&marker);
    let waited = Instant::now();
    while !survivors.is_empty() && waited.elapsed() < grace {
        std::thread::sleep(Duration::from_millis(100));
        survivors = processes_named(&marker);
    }
    if !survivors.is_empty() {
        failures.push(format!(
            "host processes {survivors:?} named {marker} were alive {grace:?} after the run"
        ));
    }
    Verdict {
        probe: probe.into(),
        observed,
        took,
        failures,
    }
}

/// Runs every probe of `class` on `backend`, prints the table, fails with every mismatch.
fn class_is_contained(backend: &str, class: &str) {
    run_class(backend, class, Errno::Shipped)
}

/// [`class_is_contained`] with seccomp answering the sentinel errno: the table also says
/// which layer refused each probe (`seccomp`, or `other` for every other layer).
fn class_denials_are_attributed(backend: &str, class: &str) {
    run_class(backend, class, Errno::Sentinel)
}

fn run_class(backend: &str, class: &str, errno: Errno) {
    let mut host = HostFacts::new(&format!("{backend}-{class}"));
    let probes = probes_of(class);
    let next = AtomicUsize::new(0);
    let verdicts = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PARALLEL.min(probes.len()) {
            s.spawn(|| {
                while let Some(probe) = probes.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let verdict = run_probe(backend, probe, &host.facts, errno);
                    verdicts.lock().unwrap().push(verdict);
                }
            });
        }
    });
    let mut verdicts = verdicts.into_inner().unwrap();
    verdicts.sort_by(|a, b| a.probe.cmp(&b.probe));
    let mut table = String::new();
    let mut failed = Vec::new();
    for v in &verdicts {
        let mark = if v.failures.is_empty() { "ok" } else { "FAIL" };
        let layer = match errno {
            Errno::Shipped => "",
            Errno::Sentinel if v.observed.contains(SENTINEL) => " seccomp",
            Errno::Sentinel => " other  ",
        };
        table += &format!(
            "{backend:6}{layer} {:34} {:40} {:>6.1}s {mark}\n",
            v.probe,
            v.observed,
            v.took.as_secs_f64()
        );
        for f in &v.failures {
            failed.push(format!("{backend} {}: {f}", v.probe));
        }
    }
    eprint!("{table}");
    let changed = host.changed_devices();
    if !changed.is_empty() {
        failed.push(format!(
            "{backend} {class}: the host's device nodes changed: {changed:?}"
        ));
    }
    if !host.sentinel_alive() {
        failed.push(format!(
            "{backend} {class}: the host sentinel (uid of the sandbox, our process group) was killed"
        ));
    }
    assert!(failed.is_empty(), "\n{table}\n{}", failed.join("\n"));
}

fn ready(backend: &str) -> bool {
    super::common::backend_ready(backend)
}

macro_rules! classes_on_both_backends {
    ($($name:ident => $class:literal),* $(,)?) => {
        mod native {
            $( #[test] fn $name() { if super::ready("native") { super::class_is_contained("native", $class) } } )*
        }
        mod docker {
            $( #[test] fn $name() { if super::ready("docker") { super::class_is_contained("docker", $class) } } )*
        }
        /// The same classes with seccomp answering the sentinel errno, on the native backend
        /// only: the Docker engine here (20.10.24, runc 1.1.5) answers EPERM whatever the
        /// profile's `defaultErrnoRet` says (checked with `docker run` and a profile of 99).
        mod native_sentinel {
            $( #[test] fn $name() { if super::ready("native") { super::class_denials_are_attributed("native", $class) } } )*
        }
    };
}

classes_on_both_backends!(
    net_probes_are_contained => "net",
    fs_probes_are_contained => "fs",
    priv_probes_are_contained => "priv",
    krn_probes_are_contained => "krn",
    res_probes_are_contained => "res",
    proto_probes_are_contained => "proto",
    env_probes_are_contained => "env",
    life_probes_are_contained => "life",
    quota_probes_are_contained => "quota",
    iso_probes_are_contained => "iso",
);

#[test]
fn every_probe_file_has_one_expectation() {
    let files: Vec<String> = CLASSES.iter().flat_map(|c| probes_of(c)).collect();
    for probe in &files {
        assert_eq!(
            EXPECT.iter().filter(|x| x.probe == *probe).count(),
            1,
            "{probe} needs exactly one row in EXPECT"
        );
    }
    for x in EXPECT {
        assert!(
            files.iter().any(|f| f == x.probe),
            "{} has no file",
            x.probe
        );
        assert!(
            !x.accept.iter().any(|a| a.contains("exit")),
            "{}: exit 0 is never an outcome",
            x.probe
        );
    }
    for (probe, accept) in UNDER_SENTINEL {
        assert_eq!(
            UNDER_SENTINEL.iter().filter(|(p, _)| p == probe).count(),
            1,
            "{probe}: one row in UNDER_SENTINEL"
        );
        assert!(files.iter().any(|f| f == probe), "{probe} has no file");
        assert!(
            accept.contains(&format!("denied:{SENTINEL}").as_str()),
            "{probe}: a row of UNDER_SENTINEL accepts the sentinel"
        );
    }
    let dir = probes_dir();
    let entries = std::fs::read_dir(&dir).expect("tests/probes");
    for entry in entries.flatten() {
        let name = entry.file_name().into_string().unwrap_or_default();
        assert!(
            name == "prelude.py" || CLASSES.contains(&name.as_str()),
            "tests/probes/{name} is not a probe class"
        );
    }
    assert!(Path::new(&dir.join("prelude.py")).exists());
}

#[test]
fn each_probe_has_one_outcome_class_on_both_backends() {
    // The kernel, not the backend, decides krn/uprobe_syscalls (killed from Linux 6.11).
    let differ = ["krn/uprobe_syscalls"];
    for x in EXPECT.iter().filter(|x| !differ.contains(&x.probe)) {
        let classes: std::collections::BTreeSet<&str> = x
            .accept
            .iter()
            .filter(|a| !a.starts_with("rlimit="))
            .map(|a| {
                let a = a.split_once('=').map_or(*a, |(_, v)| v);
                a.split(':').next().unwrap_or(a)
            })
            .collect();
        assert_eq!(classes.len(), 1, "{}: {classes:?}", x.probe);
    }
}

/// Run A of [`concurrent_runs_share_no_lock_and_no_watch`]: lock and watch what every run
/// shares, report, then hold whatever it got for a while and report what its watch saw.
/// Like every run of this section it follows [`PRELUDE`] (`t(f, *args)`: "ok" or the errno).
const HOLDER: &str = r#"
import fcntl, select, time
shared = ["/dev/null", "/runner.py", "/usr/bin/python3"]
files = [open(p, "rb") for p in shared]
locks = [t(fcntl.flock, f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB) for f in files]
fd = libc.inotify_init1(os.O_NONBLOCK)
watch = errno.errorcode.get(ctypes.get_errno(), "?") if fd < 0 else "ok"
if fd >= 0:
    for p in shared:
        libc.inotify_add_watch(fd, p.encode(), 0xfff)
time.sleep(7)
events = 0
if fd >= 0:
    try:
        events = len(os.read(fd, 65536))
    except BlockingIOError:
        events = 0
print(json.dumps({"locks": locks, "watch": watch, "events": events}))
"#;

/// Run B: while A holds, try the same locks without waiting, and open the watched files.
const PROBER: &str = r#"
import fcntl
files = [open(p, "rb") for p in ["/dev/null", "/runner.py", "/usr/bin/python3"]]
print(json.dumps({"locks": [t(fcntl.flock, f.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB) for f in files]}))
"#;

/// The last JSON line a run printed.
fn printed(r: &Exec) -> Value {
    let stdout = r.result()["stdout"].as_str().unwrap_or_default().to_owned();
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON line; exec stderr: {}", r.stderr))
}

/// ISO between runs: run A tries to lock and watch inodes every run and the host share
/// (`/dev/null`, the rootfs's `/runner.py` and python); while it holds, run B tries the same
/// locks and opens the watched files, and the host runs `flock -n /dev/null`. Nothing A
/// did may be visible to B or to the host. Without the fix (flock and inotify allowed), B
/// gets EWOULDBLOCK, the host's flock fails and A's watch sees B's opens.
fn concurrent_runs_share_no_lock_and_no_watch(backend: &str) {
    let (holder, prober) = holder_and_prober(backend, HOLDER, PROBER, || {
        std::thread::sleep(Duration::from_secs(1));
        let host = Command::new("flock")
            .args(["-n", "/dev/null", "true"])
            .status()
            .expect("run flock(1)");
        assert!(
            host.success(),
            "the host's flock -n /dev/null failed while a run held"
        );
    });
    let (a, b) = (printed(&holder), printed(&prober));
    for lock in a["locks"].as_array().expect("locks") {
        assert_ne!(lock, "ok", "run A locked a shared inode: {a}");
    }
    for lock in b["locks"].as_array().expect("locks") {
        assert!(
            lock != "EWOULDBLOCK" && lock != "EAGAIN",
            "run B saw run A's lock: {b}"
        );
    }
    assert_ne!(a["watch"], "ok", "run A could watch shared inodes: {a}");
    assert_eq!(a["events"], 0, "run A saw run B: {a}");
}

/// Run A of [`concurrent_runs_see_no_record_lock_of_each_other`]: POSIX record locks, which
/// seccomp allows (sqlite3 needs them on its files), on the rootfs files every run shares:
/// a process-owned and an open-file-description read lock on each (a read descriptor is
/// enough for a read lock), then hold them. Positive control: a write lock on its own file
/// in /tmp, which a child tests with F_GETLK and must see.
const RECORD_HOLDER: &str = r#"
import fcntl, struct, time
F_OFD_GETLK, F_OFD_SETLK = 36, 37
def lock(fd, cmd, kind):
    fcntl.fcntl(fd, cmd, struct.pack("hhqqi", kind, 0, 0, 0, 0))
shared = __SHARED__
nodes = [[os.stat(p).st_dev, os.stat(p).st_ino] for p in shared if p.startswith("/dev/")]
files = [os.open(p, os.O_RDONLY) for p in shared]
locks = [t(lock, fd, fcntl.F_SETLK, fcntl.F_RDLCK) for fd in files]
dups = [os.open(p, os.O_RDONLY) for p in shared]
locks += [t(lock, fd, F_OFD_SETLK, fcntl.F_RDLCK) for fd in dups]
own = os.open("/tmp/own", os.O_RDWR | os.O_CREAT)
lock(own, fcntl.F_SETLK, fcntl.F_WRLCK)
r, w = os.pipe()
if os.fork() == 0:
    got = fcntl.fcntl(own, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
    os.write(w, b"seen" if struct.unpack("hhqqi", got)[0] == fcntl.F_WRLCK else b"unseen")
    os._exit(0)
control = os.read(r, 16).decode()
time.sleep(7)
print(json.dumps({"locks": locks, "control": control, "nodes": nodes}))
"#;

/// Run B: while A holds, ask for a write lock's conflicts on the same files with F_GETLK and
/// F_OFD_GETLK; a conflicting lock comes back as its type, none as F_UNLCK.
const RECORD_PROBER: &str = r#"
import fcntl, struct
F_OFD_GETLK = 36
seen = []
for p in __SHARED__:
    fd = os.open(p, os.O_RDONLY)
    for cmd in (fcntl.F_GETLK, F_OFD_GETLK):
        got = fcntl.fcntl(fd, cmd, struct.pack("hhqqi", fcntl.F_WRLCK, 0, 0, 0, 0))
        seen.append("unlocked" if struct.unpack("hhqqi", got)[0] == fcntl.F_UNLCK else "locked")
print(json.dumps({"seen": seen}))
"#;

/// Runs `holder`, then (3 s later) `prober` while the holder still runs, on `backend`, each
/// after [`PRELUDE`]; `meanwhile` runs on this thread once the prober has started.
fn holder_and_prober(
    backend: &str,
    holder: &str,
    prober: &str,
    meanwhile: impl FnOnce(),
) -> (Exec, Exec) {
    let run = |code: &str| {
        exec_with(
            &format!("{PRELUDE}{code}"),
            ExecOptions {
                backend,
                ..Default::default()
            },
        )
    };
    std::thread::scope(|s| {
        let a = s.spawn(|| run(holder));
        std::thread::sleep(Duration::from_secs(3));
        let b = s.spawn(|| run(prober));
        meanwhile();
        (a.join().unwrap(), b.join().unwrap())
    })
}

/// ISO between runs, record locks: run A read-locks rootfs files and device nodes
/// (process-owned and open-file-description locks) and holds them; run B, at the same time,
/// asks F_GETLK and F_OFD_GETLK whether a write lock would conflict. Each run's root is its
/// own overlay (natively) or its own container root (Docker), and its device nodes are its
/// own (a root caller's native launcher makes them, `launcher::devices`; Docker makes each
/// container's), so B sees nothing and A's nodes are not the host's inodes. Without the
/// overlay (the rootfs bound as it is), B saw A's locks on the rootfs files: "locked"; with
/// the host's nodes bound, on `/dev/null` and `/dev/zero`. An unprivileged caller cannot make
/// device nodes: its runs share the host's, so they are left out there (docs/threat-model.md).
fn concurrent_runs_see_no_record_lock_of_each_other(backend: &str) {
    let own_nodes = backend == "docker" || !unprivileged();
    let mut shared = vec!["/runner.py", "/usr/bin/python3"];
    if own_nodes {
        shared.extend(["/dev/null", "/dev/zero"]);
    }
    let shared = json!(shared).to_string();
    let (holder, prober) = holder_and_prober(
        backend,
        &RECORD_HOLDER.replace("__SHARED__", &shared),
        &RECORD_PROBER.replace("__SHARED__", &shared),
        || {},
    );
    let (a, b) = (printed(&holder), printed(&prober));
    assert_eq!(
        a["control"], "seen",
        "a lock on the run's own file must show: {a}"
    );
    for lock in a["locks"].as_array().expect("locks") {
        assert_eq!(lock, "ok", "run A must hold its record locks: {a}");
    }
    for seen in b["seen"].as_array().expect("seen") {
        assert_eq!(seen, "unlocked", "run B saw run A's record lock: {b}");
    }
    for (node, inside) in ["/dev/null", "/dev/zero"]
        .iter()
        .zip(a["nodes"].as_array().expect("nodes"))
    {
        let host = std::fs::metadata(node).unwrap();
        assert_ne!(
            inside,
            &json!([host.dev(), host.ino()]),
            "{node} in run A is the host's inode"
        );
    }
}

/// A run that holds as many pipes as its process and descriptor limits allow (every process
/// fills its table with read ends), reports when it is full, the size of a new pipe of its
/// own (8 KiB once its host uid passed `pipe-user-pages-soft`: the positive control), holds
/// on, and reports when it lets go.
const PIPE_FILLER: &str = r#"
import fcntl, json, os, time
def fill():
    held = []
    while True:
        try:
            r, w = os.pipe()
        except OSError:
            return held
        os.close(w)
        held.append(r)
kids = []
for _ in range(56):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        held = fill()
        time.sleep(22)
        os._exit(0)
    kids.append(pid)
mine = fill()
time.sleep(1)
full = time.time()
for fd in mine[:2]:
    os.close(fd)
r, w = os.pipe()
own = fcntl.fcntl(r, 1032)
time.sleep(14)
print(json.dumps({"kids": len(kids), "full": full, "own": own, "released": time.time()}))
"#;

/// QUOTA/ISO, pipe buffer pages: while a native run of a root caller holds pipes up to its
/// limits (which passes `pipe-user-pages-soft` for its host uid), host nobody, the id a
/// shared mapping would use, still gets 64 KiB pipes. Each root caller's sandbox has a host
/// uid of its own (`launcher::idmap::ROOT_CALLER_BASE`). With every sandbox mapped to host
/// nobody, the host's pipes made during the run were 8 KiB. An unprivileged caller's
/// sandbox can only be the caller itself, and Docker's is host nobody: docs/threat-model.md.
fn a_run_full_of_pipes_leaves_other_users_pipes_whole() {
    let soft: u64 = std::fs::read_to_string("/proc/sys/fs/pipe-user-pages-soft")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    if !super::common::require(
        soft > 0 && soft <= 32768,
        "pipe-user-pages-soft is off or above what 64 processes of 64 pipes reach",
    ) {
        return;
    }
    let host_pipe = || {
        let out = Command::new("/usr/bin/python3")
            .args(["-c", "import fcntl, os, time; r, w = os.pipe(); print(time.time(), fcntl.fcntl(r, 1032))"])
            .uid(65534)
            .gid(65534)
            .output()
            .expect("run python3 as nobody");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut f = text.split_whitespace();
        let at: f64 = f.next().and_then(|v| v.parse().ok()).expect("time");
        let size: u64 = f.next().and_then(|v| v.parse().ok()).expect("size");
        (at, size)
    };
    let (run, checks) = std::thread::scope(|s| {
        let run = s.spawn(|| exec_with(PIPE_FILLER, ExecOptions::default()));
        let mut checks = Vec::new();
        while !run.is_finished() {
            std::thread::sleep(Duration::from_secs(2));
            checks.push(host_pipe());
        }
        (run.join().unwrap(), checks)
    });
    let report = printed(&run);
    let (full, released) = (
        report["full"].as_f64().expect("full"),
        report["released"].as_f64().expect("released"),
    );
    assert_eq!(
        report["own"], 8192,
        "the run never passed the soft limit: {report}"
    );
    let during: Vec<_> = checks
        .iter()
        .filter(|(at, _)| *at > full && *at < released)
        .collect();
    assert!(
        !during.is_empty(),
        "no host check fell while the run was full: {report} {checks:?}"
    );
    for (at, size) in during {
        assert_eq!(
            *size, 65536,
            "host nobody's pipe at {at} while the run was full: {report}"
        );
    }
}

mod between_runs {
    #[test]
    fn a_native_run_full_of_pipes_leaves_other_users_pipes_whole() {
        // Only a root caller's sandbox can have a host uid that is not the caller's.
        if super::ready("native") && !super::unprivileged() {
            super::a_run_full_of_pipes_leaves_other_users_pipes_whole()
        }
    }

    #[test]
    fn concurrent_native_runs_share_no_lock_and_no_watch() {
        if super::ready("native") {
            super::concurrent_runs_share_no_lock_and_no_watch("native")
        }
    }

    #[test]
    fn concurrent_native_runs_see_no_record_lock_of_each_other() {
        if super::ready("native") {
            super::concurrent_runs_see_no_record_lock_of_each_other("native")
        }
    }

    #[test]
    fn concurrent_docker_runs_see_no_record_lock_of_each_other() {
        if super::ready("docker") {
            super::concurrent_runs_see_no_record_lock_of_each_other("docker")
        }
    }

    #[test]
    fn concurrent_docker_runs_share_no_lock_and_no_watch() {
        if super::ready("docker") {
            super::concurrent_runs_share_no_lock_and_no_watch("docker")
        }
    }
}
