//! The Docker backend's arguments, client environment and image tag, without a Docker engine.

use super::*;

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

#[test]
fn the_run_arguments_carry_every_limit_and_lock() {
    let argv: Vec<String> = ["/usr/bin/python3", "-I", "-S", "-B", "/runner.py"]
        .map(String::from)
        .to_vec();
    let args = run_args(
        "mcp-code-mode-1-2-3-0badcafe-0",
        "1-2-3-0badcafe",
        Path::new("/tmp/p.json"),
        95,
        "mcp-code-mode-rootfs:0123456789abcdef",
        &argv,
    );
    for want in [
        "--network=none",
        "--read-only",
        "--user=65534:65534",
        "--cap-drop=ALL",
        "--security-opt=no-new-privileges",
        "--security-opt=seccomp=/tmp/p.json",
        "--memory=268435456",
        "--memory-swap=268435456",
        "--pids-limit=64",
        "--ulimit=sigpending=64:64",
        "--ulimit=msgqueue=0:0",
        "--cpus=1",
        "--ulimit=nofile=64:64",
        "--ulimit=fsize=16777216:16777216",
        "--ulimit=cpu=95:95",
        "--tmpfs=/tmp:rw,noexec,nosuid,nodev,size=16777216,uid=65534,gid=65534",
        "--label=mcp-code-mode.owner=1-2-3-0badcafe",
        "--name=mcp-code-mode-1-2-3-0badcafe-0",
        "--pull=never",
        "--tmpfs=/dev/pts:ro,noexec,nosuid,nodev,size=4096",
        "--tmpfs=/dev/mqueue:ro,noexec,nosuid,nodev,size=4096",
    ] {
        assert!(args.iter().any(|a| a == want), "missing {want} in {args:?}");
    }
    assert!(
        !args.iter().any(|a| a.starts_with("--env") || a == "-e"),
        "no variables"
    );
    assert!(
        !args.iter().any(|a| a == "--rm"),
        "wait reads OOMKilled before removal"
    );
    assert!(
        !args.iter().any(|a| a.contains("nproc")),
        "RLIMIT_NPROC is host-wide"
    );
    let image = args
        .iter()
        .position(|a| a.starts_with(IMAGE_REPOSITORY))
        .unwrap();
    assert_eq!(
        &args[image + 1..],
        &argv[..],
        "the command follows the image"
    );
}

#[test]
fn every_whole_disk_with_its_node_gets_read_and_write_limits() {
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
    let args = disk_limit_args(&[first.clone(), wrong, absent], Path::new("/dev"));
    let node = format!("/dev/{}", first.name);
    let mb = DISK_BYTES_PER_SEC;
    let ops = DISK_OPS_PER_SEC;
    assert_eq!(
        args,
        [
            format!("--device-read-bps={node}:{mb}"),
            format!("--device-write-bps={node}:{mb}"),
            format!("--device-read-iops={node}:{ops}"),
            format!("--device-write-iops={node}:{ops}"),
        ]
    );
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
