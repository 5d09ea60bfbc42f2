//! The Docker backend's create request, client environment and image tag, without a Docker
//! engine.

use bollard::models::{ContainerCreateBody, HostConfigCgroupnsModeEnum, ThrottleDevice};

use super::create::{ContainerSpec, create_body, disk_nodes};
use super::*;
use crate::limits::{DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC};
use crate::sandbox::disks::BlockDevice;

fn pair(k: &str, v: &str) -> (String, String) {
    (k.into(), v.into())
}

#[test]
fn the_docker_client_gets_only_the_four_variables() {
    let env = vec![
        pair("PATH", "/usr/bin"),
        pair("HOME", "/root"),
        pair("DOCKER_HOST", "unix:///run/docker.sock"),
        pair("DOCKER_CONTEXT", "default"),
        pair("SECRET_TOKEN", "hunter2"),
        pair("DOCKER_API_VERSION", "0.1"),
        pair("DOCKER_CONFIG", "/tmp/evil"),
        pair("LD_PRELOAD", "/tmp/evil.so"),
    ];
    let kept: Vec<String> = client_env(env).into_iter().map(|(k, _)| k).collect();
    assert_eq!(kept, ["PATH", "HOME", "DOCKER_HOST", "DOCKER_CONTEXT"]);
}

fn sandbox_body() -> ContainerCreateBody {
    let argv: Vec<String> = ["/usr/bin/python3", "-I", "-S", "-B", "/runner.py"]
        .map(String::from)
        .to_vec();
    create_body(&ContainerSpec {
        owner: "1-2-3-0badcafe",
        seccomp_profile: r#"{"defaultAction":"SCMP_ACT_ERRNO"}"#,
        cpu_seconds: 95,
        image: "mcp-code-mode-rootfs:0123456789abcdef",
        argv: &argv,
        disks: &["/dev/sda".into()],
    })
}

#[test]
fn the_create_request_carries_every_lock() {
    let body = sandbox_body();
    let host = body.host_config.clone().unwrap();
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.dns, Some(vec!["0.0.0.0".to_string()]));
    assert_eq!(host.ipc_mode.as_deref(), Some("none"));
    assert_eq!(
        host.cgroupns_mode,
        Some(HostConfigCgroupnsModeEnum::PRIVATE)
    );
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(
        host.security_opt,
        Some(vec![
            "no-new-privileges".to_string(),
            r#"seccomp={"defaultAction":"SCMP_ACT_ERRNO"}"#.to_string(),
        ]),
        "the profile's content, not a path"
    );
    assert_eq!(host.log_config.and_then(|l| l.typ).as_deref(), Some("none"));
    assert_eq!(host.privileged, None);
    assert_eq!(
        host.auto_remove, None,
        "wait reads OOMKilled before removal"
    );
    let tmpfs = host.tmpfs.unwrap();
    assert_eq!(
        tmpfs["/tmp"],
        "rw,noexec,nosuid,nodev,size=16777216,nr_inodes=8192,uid=65534,gid=65534"
    );
    for covered in ["/sys", "/dev/pts", "/dev/mqueue"] {
        assert_eq!(tmpfs[covered], "ro,noexec,nosuid,nodev,size=4096");
    }
    assert_eq!(body.user.as_deref(), Some("65534:65534"));
    assert_eq!(body.hostname.as_deref(), Some("sandbox"));
    assert_eq!(body.working_dir.as_deref(), Some("/tmp"));
    assert_eq!(body.env, Some(Vec::new()), "no variables");
    assert_eq!(
        body.labels.unwrap()[OWNER_LABEL],
        "1-2-3-0badcafe",
        "the owner label finds the container"
    );
    assert_eq!(
        body.image.as_deref(),
        Some("mcp-code-mode-rootfs:0123456789abcdef")
    );
    assert_eq!(
        body.cmd.unwrap(),
        ["/usr/bin/python3", "-I", "-S", "-B", "/runner.py"]
    );
}

#[test]
fn the_create_request_carries_every_limit() {
    let host = sandbox_body().host_config.unwrap();
    assert_eq!(host.memory, Some(268435456));
    assert_eq!(host.memory_swap, Some(268435456), "no swap");
    assert_eq!(host.pids_limit, Some(64));
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    let ulimits: Vec<(String, i64, i64)> = host
        .ulimits
        .unwrap()
        .into_iter()
        .map(|u| (u.name.unwrap(), u.soft.unwrap(), u.hard.unwrap()))
        .collect();
    let want = |name: &str, value: i64| (name.to_string(), value, value);
    assert_eq!(
        ulimits,
        [
            want("nofile", 64),
            want("fsize", 16777216),
            want("cpu", 95),
            want("sigpending", 64),
            want("msgqueue", 0),
        ],
        "no nproc: RLIMIT_NPROC is host-wide"
    );
    let throttled = |devices: Option<Vec<ThrottleDevice>>| -> Vec<(String, i64)> {
        devices
            .unwrap()
            .into_iter()
            .map(|d| (d.path.unwrap(), d.rate.unwrap()))
            .collect()
    };
    let mb = i64::try_from(DISK_BYTES_PER_SEC).unwrap();
    let ops = i64::try_from(DISK_OPS_PER_SEC).unwrap();
    let sda = |rate: i64| vec![("/dev/sda".to_string(), rate)];
    assert_eq!(throttled(host.blkio_device_read_bps), sda(mb));
    assert_eq!(throttled(host.blkio_device_write_bps), sda(mb));
    assert_eq!(throttled(host.blkio_device_read_iops), sda(ops));
    assert_eq!(throttled(host.blkio_device_write_iops), sda(ops));
}

#[test]
fn stdin_is_open_and_closes_when_the_one_attach_ends() {
    let body = sandbox_body();
    assert_eq!(body.open_stdin, Some(true));
    assert_eq!(
        body.stdin_once,
        Some(true),
        "a dropped sandbox or a dead serve must end the runner"
    );
    assert_eq!(body.attach_stdin, Some(true));
    assert_eq!(body.attach_stdout, Some(true));
    assert_eq!(body.attach_stderr, Some(true));
    assert_eq!(body.tty, Some(false), "stdout and stderr stay apart");
}

#[test]
fn every_whole_disk_with_its_node_is_limited() {
    let disk = |name: &str, major, minor| BlockDevice {
        name: name.into(),
        major,
        minor,
    };
    let host = whole_disks(Path::new("/sys/block"));
    let first = host.first().expect("a disk on this host").clone();
    // A node whose number differs, and a disk without a node, are left out.
    let wrong = disk(&first.name, first.major, first.minor + 1000);
    let absent = disk("no-such-disk", 1, 2);
    let nodes = disk_nodes(&[first.clone(), wrong, absent], Path::new("/dev"));
    assert_eq!(nodes, [format!("/dev/{}", first.name)]);
}

#[test]
fn the_image_is_tagged_by_the_first_16_hex_of_the_rootfs_digest() {
    let rootfs = Rootfs {
        dir: "/r".into(),
        key: "k".into(),
        digest: "aab142763a960a4f133008a72f7e69bc376502d7b5ea4417153050b50db8d7cc".into(),
        python_version: "3.11.7".into(),
        source: "host".into(),
    };
    assert_eq!(image_tag(&rootfs), "mcp-code-mode-rootfs:aab142763a960a4f");
}

#[test]
fn the_api_goes_to_the_engine_docker_host_names() {
    let env = |host: Option<&str>, home: &Path| {
        let mut env = vec![
            pair("PATH", &std::env::var("PATH").unwrap_or_default()),
            pair("HOME", &home.display().to_string()),
        ];
        env.extend(host.map(|h| pair("DOCKER_HOST", h)));
        env
    };
    // A HOME without a docker config: no current context but the default.
    let home = tempfile::tempdir().unwrap();
    assert_eq!(
        container::engine_host(env(Some("tcp://192.0.2.1:2375"), home.path())),
        "tcp://192.0.2.1:2375"
    );
    assert_eq!(
        container::engine_host(env(Some("unix:///run/elsewhere.sock"), home.path())),
        "unix:///run/elsewhere.sock"
    );
    assert_eq!(
        container::engine_host(env(None, home.path())),
        container::DEFAULT_ENGINE_HOST
    );
}

#[test]
fn the_api_goes_to_the_engine_of_the_chosen_docker_context() {
    let home = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("docker")
        .env("HOME", home.path())
        .env_remove("DOCKER_HOST")
        .env_remove("DOCKER_CONTEXT")
        .args([
            "context",
            "create",
            "elsewhere",
            "--docker",
            "host=tcp://192.0.2.7:2375",
        ])
        .output();
    if !testkit::require(made.is_ok(), "no docker client on PATH") {
        return;
    }
    let made = made.unwrap();
    assert!(made.status.success(), "{made:?}");
    let env = vec![
        pair("PATH", &std::env::var("PATH").unwrap_or_default()),
        pair("HOME", &home.path().display().to_string()),
        pair("DOCKER_CONTEXT", "elsewhere"),
    ];
    assert_eq!(container::engine_host(env), "tcp://192.0.2.7:2375");
}

#[test]
fn the_create_request_keeps_dockers_masked_paths_and_masks_the_host_wide_proc_files() {
    let masked = sandbox_body().host_config.unwrap().masked_paths.unwrap();
    // The engine's defaults (moby oci.DefaultSpec), which MaskedPaths replaces when set.
    for path in [
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
    ] {
        assert!(masked.iter().any(|m| m == path), "{path} is not masked");
    }
    for path in [
        "/proc/uptime",
        "/proc/meminfo",
        "/proc/interrupts",
        "/proc/diskstats",
        "/proc/pressure",
        "/proc/sys/kernel/random/boot_id",
        "/proc/cmdline",
        "/proc/fs",
        "/proc/crypto",
    ] {
        assert!(masked.iter().any(|m| m == path), "{path} is not masked");
    }
}
