//! The create request of one sandbox's container: every isolation option and limit, as the
//! body of the Engine API's `POST /containers/create` (the fields `docker run` would send for
//! the equivalent flags, named in the comments).

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{
    ContainerCreateBody, HostConfig, HostConfigCgroupnsModeEnum, HostConfigLogConfig,
    ResourcesUlimits, ThrottleDevice,
};

use super::{OWNER_LABEL, SANDBOX_ID};
use crate::limits::{
    CPUS, DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC, MAX_FILE_BYTES, MAX_OPEN_FILES, MAX_PIDS,
    MEMORY_BYTES, TMP_BYTES, TMP_INODES,
};
use crate::sandbox::disks::BlockDevice;
use launcher::rlimits::{MSGQUEUE_BYTES, SIGPENDING};

/// Docker's own masked paths (the engine's default `MaskedPaths`, moby `oci.DefaultSpec`),
/// kept: setting `MaskedPaths` in the create request replaces the defaults.
const DOCKER_MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Host-wide files of `/proc` that the native sandbox's `/proc` (`subset=pid`) leaves out and
/// that would tell the code the host's uptime, load, memory, CPUs, disks, interrupt and
/// pressure counts (activity of everything else on the host, between runs too), boot options,
/// kernel symbols, open-file, AIO and lock counts, the boot's identity, the host file
/// systems' own counters (`/proc/fs/ext4/*/es_shrinker_info`: extent cache hits and misses
/// of every file access on the host; `mb_groups`: free blocks of each block group) and the
/// kernel crypto algorithms' use counts (`/proc/crypto` `refcnt`). runc binds `/dev/null`
/// over each file (it reads empty) and an empty read-only tmpfs over each directory; a path
/// the host's kernel lacks is skipped. README "What it does not protect" lists what stays
/// readable.
pub const HOST_PROC_MASKED_PATHS: &[&str] = &[
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/proc/schedstat",
    "/proc/interrupts",
    "/proc/softirqs",
    "/proc/diskstats",
    "/proc/partitions",
    "/proc/swaps",
    "/proc/vmstat",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/pagetypeinfo",
    "/proc/locks",
    "/proc/key-users",
    "/proc/cmdline",
    "/proc/kallsyms",
    "/proc/pressure",
    "/proc/irq",
    "/proc/sys/kernel/random/boot_id",
    "/proc/sys/kernel/random/entropy_avail",
    "/proc/sys/fs/file-nr",
    "/proc/sys/fs/aio-nr",
    "/proc/sys/fs/inode-nr",
    "/proc/sys/fs/inode-state",
    "/proc/sys/fs/dentry-state",
    "/proc/fs",
    "/proc/crypto",
];

/// What differs between sandboxes and hosts; the rest of the request is fixed.
#[derive(Debug, Clone, Copy)]
pub struct ContainerSpec<'a> {
    /// The value of [`OWNER_LABEL`]: the process that creates the container (`Owner`).
    pub owner: &'a str,
    /// Docker's seccomp profile as JSON text (the content, not a path: through the API the
    /// `seccomp=` security option carries the profile itself).
    pub seccomp_profile: &'a str,
    /// RLIMIT_CPU of every process inside, in seconds (soft = hard).
    pub cpu_seconds: u64,
    /// The image, `mcp-code-mode-rootfs:<tag>`.
    pub image: &'a str,
    /// The command: runner.py under the image's Python.
    pub argv: &'a [String],
    /// Device nodes of the host's whole disks (`/dev/sda`), each limited to
    /// [`DISK_BYTES_PER_SEC`] and [`DISK_OPS_PER_SEC`] of reads and of writes
    /// ([`disk_nodes`]).
    pub disks: &'a [String],
}

/// The `ContainerCreate` body for one sandbox; every limit from [`crate::limits`].
///
/// stdin is open and attached, and closed for good when the one attached client's stream
/// ends (`StdinOnce`, as `docker run -i` sets it): when serve drops the sandbox or dies, the
/// runner reads end of file and exits. No tty: stdout and stderr come as Docker's
/// multiplexed frames. No variables, no network, no capability, no log copy (log driver
/// `none`), no automatic removal (wait reads `OOMKilled` first).
pub fn create_body(spec: &ContainerSpec<'_>) -> ContainerCreateBody {
    let id = SANDBOX_ID;
    let limit = |value: u64| i64::try_from(value).unwrap_or(i64::MAX);
    let ulimit = |name: &str, value: u64| ResourcesUlimits {
        name: Some(name.into()),
        soft: Some(limit(value)),
        hard: Some(limit(value)),
    };
    let throttle = |rate: u64| -> Option<Vec<ThrottleDevice>> {
        Some(
            spec.disks
                .iter()
                .map(|path| ThrottleDevice {
                    path: Some(path.clone()),
                    rate: Some(limit(rate)),
                })
                .collect(),
        )
    };
    let tmpfs: HashMap<String, String> = [
        // The mode of /tmp is copied from the image (0755, root), so it is given to the user.
        (
            "/tmp",
            format!(
                "rw,noexec,nosuid,nodev,size={TMP_BYTES},nr_inodes={TMP_INODES},uid={id},gid={id}"
            ),
        ),
        // Like the native sandbox, no /sys.
        ("/sys", "ro,noexec,nosuid,nodev,size=4096".into()),
        // No pseudo-terminals: an empty /dev/pts leaves /dev/ptmx (a link into it) dangling.
        // Reading a pty master blocks forever, and the native sandbox has none either.
        ("/dev/pts", "ro,noexec,nosuid,nodev,size=4096".into()),
        // Docker mounts a world-writable mqueue filesystem on /dev/mqueue even with IPC mode
        // none: files there are writable outside /tmp (tests/probes/fs). Cover it.
        ("/dev/mqueue", "ro,noexec,nosuid,nodev,size=4096".into()),
    ]
    .into_iter()
    .map(|(path, options)| (path.to_owned(), options))
    .collect();
    let host_config = HostConfig {
        // --log-driver=none
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".into()),
            config: None,
        }),
        // isolation: --network=none, --dns=0.0.0.0 (Docker writes the host's resolver into
        // /etc/resolv.conf even without a network), --ipc=none, --cgroupns=private,
        // --read-only, --tmpfs
        network_mode: Some("none".into()),
        dns: Some(vec!["0.0.0.0".into()]),
        ipc_mode: Some("none".into()),
        cgroupns_mode: Some(HostConfigCgroupnsModeEnum::PRIVATE),
        readonly_rootfs: Some(true),
        tmpfs: Some(tmpfs),
        // Docker's masked paths and the host-wide /proc files (no `docker run` flag: the
        // API's MaskedPaths replaces the defaults, so they are listed too).
        masked_paths: Some(
            DOCKER_MASKED_PATHS
                .iter()
                .chain(HOST_PROC_MASKED_PATHS)
                .map(|p| (*p).to_owned())
                .collect(),
        ),
        // --cap-drop=ALL, --security-opt=no-new-privileges, --security-opt=seccomp=…
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec![
            "no-new-privileges".into(),
            format!("seccomp={}", spec.seccomp_profile),
        ]),
        // limits: --memory, --memory-swap (no swap beyond the memory), --pids-limit, --cpus
        memory: Some(limit(MEMORY_BYTES)),
        memory_swap: Some(limit(MEMORY_BYTES)),
        pids_limit: Some(limit(MAX_PIDS)),
        nano_cpus: Some(limit(CPUS.saturating_mul(1_000_000_000))),
        ulimits: Some(vec![
            ulimit("nofile", MAX_OPEN_FILES),
            ulimit("fsize", MAX_FILE_BYTES),
            ulimit("cpu", spec.cpu_seconds),
            // Per-user host counters, as the native launcher sets them (launcher::rlimits).
            ulimit("sigpending", SIGPENDING),
            ulimit("msgqueue", MSGQUEUE_BYTES),
            // No nproc: RLIMIT_NPROC counts every process of uid 65534 in the host's user
            // namespace, so concurrent sandboxes would share one budget; the pids limit holds.
        ]),
        // --device-{read,write}-{bps,iops}
        blkio_device_read_bps: throttle(DISK_BYTES_PER_SEC),
        blkio_device_write_bps: throttle(DISK_BYTES_PER_SEC),
        blkio_device_read_iops: throttle(DISK_OPS_PER_SEC),
        blkio_device_write_iops: throttle(DISK_OPS_PER_SEC),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.into()),
        cmd: Some(spec.argv.to_vec()),
        labels: Some(HashMap::from([(OWNER_LABEL.into(), spec.owner.into())])),
        hostname: Some("sandbox".into()),
        working_dir: Some("/tmp".into()),
        user: Some(format!("{id}:{id}")),
        // `docker run -i`: stdin open and attached, closed when the attach ends.
        open_stdin: Some(true),
        stdin_once: Some(true),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        env: Some(Vec::new()),
        host_config: Some(host_config),
        ..Default::default()
    }
}

/// The device nodes in `dev` of `disks` whose node there is a block device of its number
/// (Docker takes a path and reads the number from it): the container's reads and writes of
/// every whole disk of the host are limited (crate::sandbox::disks says why every disk).
pub fn disk_nodes(disks: &[BlockDevice], dev: &Path) -> Vec<String> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let mut nodes = Vec::new();
    for disk in disks {
        let node = dev.join(&disk.name);
        let Ok(meta) = std::fs::metadata(&node) else {
            continue;
        };
        let (Ok(major), Ok(minor)) = (u32::try_from(disk.major), u32::try_from(disk.minor)) else {
            continue;
        };
        let number = libc::makedev(major, minor);
        if !meta.file_type().is_block_device() || meta.rdev() != number {
            continue;
        }
        nodes.push(node.display().to_string());
    }
    nodes
}
