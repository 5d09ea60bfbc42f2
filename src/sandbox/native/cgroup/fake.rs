//! Fake cgroupfs mounts in a temp dir, for the tests of the cgroup module and its users.

use super::CgroupHost;

/// A fake v1 cgroupfs: memory below a parent the machine set up, pids and cpu at the top.
pub(crate) fn fake_v1(memsw: bool) -> (tempfile::TempDir, CgroupHost) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fs");
    let mem = root.join("memory/machine/slot");
    std::fs::create_dir_all(&mem).unwrap();
    std::fs::write(mem.join("memory.limit_in_bytes"), "").unwrap();
    if memsw {
        std::fs::write(mem.join("memory.memsw.limit_in_bytes"), "").unwrap();
    }
    std::fs::create_dir_all(root.join("pids")).unwrap();
    std::fs::create_dir_all(root.join("cpu,cpuacct")).unwrap();
    let self_file = dir.path().join("self");
    std::fs::write(
        &self_file,
        "9:name=systemd:/\n8:pids:/\n4:memory:/machine/slot\n1:cpu,cpuacct:/\n0::/\n",
    )
    .unwrap();
    (dir, CgroupHost::with_roots(root, self_file))
}

/// A fake cgroup v2 mount in which this process (pid 4242) sits at `own`; `own` exists,
/// with `controllers` available to its children, only when `present` (else it is a cgroup
/// of another manager, not visible to us).
pub(crate) fn fake_v2(
    own: &str,
    present: bool,
    controllers: &str,
) -> (tempfile::TempDir, CgroupHost) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("fs");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("cgroup.controllers"), "memory pids cpu io").unwrap();
    if present {
        let own_dir = root.join(own.trim_start_matches('/'));
        std::fs::create_dir_all(&own_dir).unwrap();
        std::fs::write(own_dir.join("cgroup.controllers"), controllers).unwrap();
        std::fs::write(own_dir.join("cgroup.subtree_control"), "").unwrap();
        std::fs::write(own_dir.join("cgroup.procs"), "4242\n").unwrap();
    }
    let self_file = dir.path().join("self");
    std::fs::write(&self_file, format!("0::{own}\n")).unwrap();
    (dir, CgroupHost::with_roots(root, self_file))
}
