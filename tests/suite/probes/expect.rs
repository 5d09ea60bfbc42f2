//! The expectation tables of the probes: [`EXPECT`], what each probe may end as, and
//! [`UNDER_SENTINEL`], which probes seccomp refuses; and their check against the probe files.

use std::path::{Path, PathBuf};

/// The probe classes, as directories of `tests/probes`.
pub(super) const CLASSES: [&str; 10] = [
    "net", "fs", "priv", "krn", "res", "proto", "env", "life", "quota", "iso",
];

/// The default deadline of a probe's run, seconds.
const DEADLINE: u64 = 30;

/// What a probe may end as. Each accepted value is `outcome` or `outcome:errno`; a value
/// prefixed `native=` or `docker=` holds on that backend only, `rlimit=` on the native
/// backend without a cgroup (an unprivileged run: README, "rlimits").
pub(super) struct Expect {
    pub(super) probe: &'static str,
    pub(super) accept: &'static [&'static str],
    pub(super) deadline: u64,
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

/// The deadline of a probe that moves hundreds of MiB through the host's pipes: room for a
/// loaded host's copying on top of the sandbox's start.
const FLOOD_SECONDS: u64 = 60;

const fn within(seconds: u64, probe: &'static str, accept: &'static [&'static str]) -> Expect {
    Expect {
        probe,
        accept,
        deadline: seconds,
    }
}

/// The expectation table. A probe file without a row, or a row without a file, fails
/// `every_probe_file_has_one_expectation`.
pub(super) const EXPECT: &[Expect] = &[
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
    // 256 MiB through the host's stderr drain. On Docker they first pass the engine's own
    // stream copy (containerd-shim to dockerd to the attach connection): about 1 s of the
    // engine's CPU and 2-3 s of the probe on an idle 2-core host, beyond 30 s under a load
    // of 20 (two CI runs at 33 and 37 s; native once at 33 s). A host that stops draining
    // blocks the probe for good, so it still fails here, by this deadline.
    within(FLOOD_SECONDS, "res/diag_pipe_flood", &["denied"]),
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
pub(super) const SENTINEL_ERRNO: &str = "99";
pub(super) const SENTINEL: &str = "EADDRNOTAVAIL";

/// The whole table run once more with the sentinel errno attributes every denial to its
/// layer. A probe listed here is refused by seccomp (its accepted outcomes under the
/// sentinel, which must show the sentinel); a probe not listed must come out as [`EXPECT`]
/// says, without the sentinel: another layer refuses it (a capability check, the user or
/// another namespace, Landlock, a mount, an rlimit, a cgroup, the host's checks), even where
/// its errno is EPERM, seccomp's usual answer.
pub(super) const UNDER_SENTINEL: &[(&str, &[&str])] = &[
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

pub(super) fn probes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/probes")
}

/// The probes of `class`, as `class/name`, sorted.
pub(super) fn probes_of(class: &str) -> Vec<String> {
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

pub(super) fn expectation(probe: &str) -> &'static Expect {
    EXPECT
        .iter()
        .find(|x| x.probe == probe)
        .unwrap_or_else(|| panic!("{probe} has no row in EXPECT"))
}

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
