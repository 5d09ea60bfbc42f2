//! The cgroup module against a fake cgroupfs in a temp dir, and once against the real one.

use std::path::{Path, PathBuf};

use super::fake::{fake_v1, fake_v2};
use super::*;
use crate::limits::{DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC};
use crate::sandbox::disks::whole_disks;
use crate::sandbox::owner::{Owner, RunName};

const LIMITS: CgroupLimits = CgroupLimits {
    memory_bytes: 256 << 20,
    pids: 64,
    cpus: 1,
};

/// What the kernel puts in a new v2 cgroup that cgroups-rs reads before it writes
/// (cpu.max), and the swap file whose presence means swap is accounted.
fn kernel_files_v2(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("cpu.max"), "max 100000").unwrap();
    std::fs::write(dir.join("memory.swap.max"), "max").unwrap();
}

fn read(path: impl AsRef<Path>) -> String {
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn on_v1_each_controller_gets_a_child_below_our_own_cgroup_with_its_limits() {
    let (dir, host) = fake_v1(true);
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    let fs = dir.path().join("fs");
    let mem = fs.join("memory/machine/slot/run-1");
    assert_eq!(read(mem.join("memory.limit_in_bytes")), "268435456");
    assert_eq!(read(mem.join("memory.memsw.limit_in_bytes")), "268435456");
    assert_eq!(read(fs.join("pids/run-1/pids.max")), "64");
    assert_eq!(
        read(fs.join("cpu,cpuacct/run-1/cpu.cfs_quota_us")),
        "100000"
    );
    assert_eq!(
        read(fs.join("cpu,cpuacct/run-1/cpu.cfs_period_us")),
        "100000"
    );
    assert_eq!(run.held(), ["memory", "swap", "pids", "cpu"]);
    assert_eq!(run.procs_files().len(), 3);
    assert!(run.procs_files().contains(&mem.join("cgroup.procs")));
}

/// A fake `/sys/block` with one disk, `vda` 254:0 (cgroups-rs truncates each file it writes,
/// so a fake file keeps the last rule; the real-cgroup test below checks every disk).
fn one_disk(dir: &Path) -> PathBuf {
    let sys_block = dir.join("sys-block");
    std::fs::create_dir_all(sys_block.join("vda")).unwrap();
    std::fs::write(sys_block.join("vda/dev"), "254:0\n").unwrap();
    sys_block
}

fn placement_has_blkio(host: &CgroupHost) -> bool {
    match host.placement() {
        Ok(Placement::V1 { hierarchies }) => hierarchies.iter().any(|h| h.controller == "blkio"),
        _ => false,
    }
}

#[test]
fn on_v1_the_blkio_child_throttles_reads_and_writes_of_every_disk() {
    let (dir, host) = fake_v1(true);
    let fs = dir.path().join("fs");
    std::fs::create_dir_all(fs.join("blkio")).unwrap();
    let self_file = dir.path().join("self");
    let text = read(&self_file) + "7:blkio:/\n";
    std::fs::write(&self_file, text).unwrap();
    let host = host.with_block_devices(one_disk(dir.path()));
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    let blkio = fs.join("blkio/run-1");
    let mb = DISK_BYTES_PER_SEC;
    let ops = DISK_OPS_PER_SEC;
    assert_eq!(
        read(blkio.join("blkio.throttle.read_bps_device")),
        format!("254:0 {mb}")
    );
    assert_eq!(
        read(blkio.join("blkio.throttle.write_bps_device")),
        format!("254:0 {mb}")
    );
    assert_eq!(
        read(blkio.join("blkio.throttle.read_iops_device")),
        format!("254:0 {ops}")
    );
    assert_eq!(
        read(blkio.join("blkio.throttle.write_iops_device")),
        format!("254:0 {ops}")
    );
    assert_eq!(run.held(), ["memory", "swap", "pids", "cpu", "io"]);
    assert!(run.procs_files().contains(&blkio.join("cgroup.procs")));
}

#[test]
fn on_v1_a_blkio_hierarchy_without_a_disk_claims_no_io_limit() {
    let (dir, host) = fake_v1(true);
    std::fs::create_dir_all(dir.path().join("fs/blkio")).unwrap();
    let self_file = dir.path().join("self");
    let text = read(&self_file) + "7:blkio:/\n";
    std::fs::write(&self_file, text).unwrap();
    let host = host.with_block_devices(dir.path().join("no-disks"));
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    assert_eq!(run.held(), ["memory", "swap", "pids", "cpu"]);
}

#[test]
fn on_v2_io_max_throttles_every_disk_where_the_parent_offers_io() {
    let (dir, host) = fake_v2("/user.slice/serve", true, "memory pids cpu io");
    let host = host.with_block_devices(one_disk(dir.path()));
    let own = dir.path().join("fs/user.slice/serve");
    let run_dir = own.join("run-1");
    kernel_files_v2(&run_dir);
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    assert_eq!(
        read(own.join("cgroup.subtree_control")),
        "+memory +pids +cpu +io"
    );
    // The last of the four writes to io.max (the real file merges them into one line).
    assert_eq!(
        read(run_dir.join("io.max")),
        format!("254:0 wiops={DISK_OPS_PER_SEC}")
    );
    assert_eq!(run.held(), ["memory", "swap", "pids", "cpu", "io"]);
}

#[test]
fn on_v1_without_swap_accounting_swap_is_not_claimed() {
    let (_dir, host) = fake_v1(false);
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    assert_eq!(run.held(), ["memory", "pids", "cpu"]);
}

#[test]
fn removing_a_run_cgroup_leaves_nothing_behind() {
    let (dir, host) = fake_v1(true);
    let fs = dir.path().join("fs");
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    // The fake fs has files in the dirs (a real cgroupfs would not block rmdir on them).
    for f in run.procs_files() {
        for entry in std::fs::read_dir(f.parent().unwrap()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    }
    run.remove().unwrap();
    assert!(!fs.join("memory/machine/slot/run-1").exists());
    assert!(!fs.join("pids/run-1").exists());
    assert!(!fs.join("cpu,cpuacct/run-1").exists());
}

#[test]
fn an_unwritable_host_gives_no_cgroup_not_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let self_file = dir.path().join("self");
    std::fs::write(&self_file, "4:memory:/not/there\n").unwrap();
    std::fs::create_dir_all(dir.path().join("fs/memory")).unwrap();
    let host = CgroupHost::with_roots(dir.path().join("fs"), self_file);
    assert!(host.create("run-1", &LIMITS).unwrap().is_none());
}

#[test]
fn names_that_are_not_one_path_component_are_refused() {
    let (_dir, host) = fake_v1(true);
    for bad in ["", ".", "..", "a/b", HOST_LEAF] {
        assert!(
            matches!(host.create(bad, &LIMITS), Err(CgroupError::BadName(_))),
            "{bad}"
        );
    }
}

#[test]
fn on_v2_we_move_into_a_leaf_enable_controllers_and_set_the_limits() {
    let (dir, host) = fake_v2("/user.slice/serve", true, "memory pids cpu");
    let own = dir.path().join("fs/user.slice/serve");
    std::fs::create_dir_all(own.join(HOST_LEAF)).unwrap();
    let run_dir = own.join("run-1");
    kernel_files_v2(&run_dir);
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    assert_eq!(read(own.join(HOST_LEAF).join("cgroup.procs")), "4242");
    assert_eq!(
        read(own.join("cgroup.subtree_control")),
        "+memory +pids +cpu"
    );
    assert_eq!(read(run_dir.join("memory.max")), "268435456");
    assert_eq!(read(run_dir.join("memory.swap.max")), "0");
    assert_eq!(read(run_dir.join("pids.max")), "64");
    assert_eq!(read(run_dir.join("cpu.max")), "100000 100000");
    assert_eq!(run.held(), ["memory", "swap", "pids", "cpu"]);
    assert_eq!(run.procs_files(), [run_dir.join("cgroup.procs")]);
}

/// The directory and cgroup.subtree_control are our own code on v2 (README, "cgroups"):
/// cgroups-rs would ignore the failed write and hand back a cgroup that limits nothing.
#[test]
fn on_v2_a_parent_that_cannot_delegate_gives_no_cgroup_and_leaves_nothing() {
    let (dir, host) = fake_v2("/user.slice/serve", true, "memory pids cpu");
    let own = dir.path().join("fs/user.slice/serve");
    // A write to a directory fails, as a write to a parent we may not delegate from does.
    std::fs::remove_file(own.join("cgroup.subtree_control")).unwrap();
    std::fs::create_dir(own.join("cgroup.subtree_control")).unwrap();
    assert!(host.create("run-1", &LIMITS).unwrap().is_none());
    assert!(!own.join("run-1").exists());
}

#[test]
fn on_v2_once_in_our_leaf_runs_go_next_to_it() {
    let (dir, host) = fake_v2(&format!("/svc/{HOST_LEAF}"), true, "");
    let svc = dir.path().join("fs/svc");
    std::fs::write(svc.join("cgroup.controllers"), "pids").unwrap();
    std::fs::write(svc.join("cgroup.subtree_control"), "pids").unwrap();
    let run = host.create("run-2", &LIMITS).unwrap().unwrap();
    assert_eq!(run.procs_files(), [svc.join("run-2/cgroup.procs")]);
    assert_eq!(run.held(), ["pids"]);
}

#[test]
fn the_memory_limit_counts_as_hit_only_after_an_oom() {
    let (dir, host) = fake_v1(true);
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    let mem = dir.path().join("fs/memory/machine/slot/run-1");
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
    )
    .unwrap();
    assert!(!run.memory_limit_hit());
    std::fs::write(
        mem.join("memory.oom_control"),
        "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
    )
    .unwrap();
    assert!(run.memory_limit_hit());
}

/// On the real machine, as root: create, join, limits visible, remove leaves nothing.
#[test]
fn a_real_run_cgroup_holds_a_process_and_is_gone_after_remove() {
    let host = CgroupHost::system();
    let name = RunName::next().to_string();
    let created = host.create(&name, &LIMITS);
    let Ok(Some(run)) = created else {
        testkit::require(
            false,
            &format!("no writable cgroup: {:?}", host.placement()),
        );
        return;
    };
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    for f in run.procs_files() {
        std::fs::write(&f, sleeper.id().to_string()).unwrap();
        assert_eq!(read(&f).trim(), sleeper.id().to_string());
    }
    let dirs: Vec<PathBuf> = run
        .procs_files()
        .iter()
        .map(|f| f.parent().unwrap().to_owned())
        .collect();
    for d in &dirs {
        if let Ok(v) = std::fs::read_to_string(d.join("memory.limit_in_bytes")) {
            assert_eq!(v.trim(), "268435456");
        }
        if let Ok(v) = std::fs::read_to_string(d.join("pids.max")) {
            assert_eq!(v.trim(), "64");
        }
        // Every whole disk of the host, read and written, in bytes and in operations.
        for (file, value) in [
            ("blkio.throttle.read_bps_device", DISK_BYTES_PER_SEC),
            ("blkio.throttle.write_bps_device", DISK_BYTES_PER_SEC),
            ("blkio.throttle.read_iops_device", DISK_OPS_PER_SEC),
            ("blkio.throttle.write_iops_device", DISK_OPS_PER_SEC),
        ] {
            if let Ok(v) = std::fs::read_to_string(d.join(file)) {
                for disk in whole_disks(Path::new("/sys/block")) {
                    let rule = format!("{}:{} {value}", disk.major, disk.minor);
                    assert!(v.lines().any(|l| l == rule), "{file} lacks {rule}: {v}");
                }
            }
        }
    }
    if placement_has_blkio(&host) {
        assert!(run.held().contains(&"io"), "{:?}", run.held());
    }
    assert!(!run.memory_limit_hit());
    run.remove().unwrap();
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "the process in the cgroup was killed");
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

/// On the real machine, as root, where cgroup v1's freezer is mounted: a run's process
/// frozen in a freezer group of someone else's (an admin's, a test's) would never see its
/// SIGKILL; removing the run's cgroup thaws it, it dies, and the cgroup goes.
#[test]
fn a_frozen_process_of_a_real_run_cgroup_dies_and_the_cgroup_goes_at_its_removal() {
    let host = CgroupHost::system();
    let Some(own_freezer) = host.own_freezer() else {
        // cgroup v2, or no freezer: a fatal signal reaches a frozen process there.
        return;
    };
    let name = RunName::next().to_string();
    let Ok(Some(run)) = host.create(&name, &LIMITS) else {
        testkit::require(
            false,
            &format!("no writable cgroup: {:?}", host.placement()),
        );
        return;
    };
    let mut sleeper = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    for f in run.procs_files() {
        std::fs::write(&f, sleeper.id().to_string()).unwrap();
    }
    let dirs: Vec<PathBuf> = run
        .procs_files()
        .iter()
        .map(|f| f.parent().unwrap().to_owned())
        .collect();
    let group = own_freezer.join(format!("mcp-code-mode-test-freeze-{}", sleeper.id()));
    std::fs::create_dir(&group).unwrap();
    std::fs::write(group.join("cgroup.procs"), sleeper.id().to_string()).unwrap();
    std::fs::write(group.join("freezer.state"), "FROZEN").unwrap();
    while read(group.join("freezer.state")).trim() != "FROZEN" {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let removed = run.remove();
    let died = sleeper.try_wait().unwrap();
    // Whatever happened, the test's own group is thawed and removed.
    std::fs::write(group.join("freezer.state"), "THAWED").unwrap();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    while std::fs::remove_dir(&group).is_err() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(
        died.is_some(),
        "the frozen process outlived its cgroup's removal"
    );
    removed.unwrap();
    assert!(dirs.iter().all(|d| !d.exists()), "{dirs:?}");
}

/// A run cgroup named for `owner`, below `parent`, holding no files (as rmdir needs).
fn run_dir(parent: &Path, owner: &Owner) -> PathBuf {
    let dir = parent.join(
        RunName {
            owner: owner.clone(),
            seq: 0,
        }
        .to_string(),
    );
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn only_the_run_cgroups_of_dead_owners_are_removed_as_strays() {
    let (dir, host) = fake_v1(true);
    let fs = dir.path().join("fs");
    let memory = fs.join("memory/machine/slot");
    let dead = Owner {
        pid: u32::MAX,
        ..Owner::current().clone()
    };
    let stray = run_dir(&memory, &dead);
    let stray_pids = run_dir(&fs.join("pids"), &dead);
    let ours = run_dir(&memory, Owner::current());
    let foreign = memory.join("mcp-code-mode-123-4");
    std::fs::create_dir_all(&foreign).unwrap();
    assert_eq!(host.remove_strays(), 2);
    assert!(!stray.exists() && !stray_pids.exists());
    assert!(ours.exists(), "a live owner's run stays");
    assert!(foreign.exists(), "a name that is not a run name stays");
}

#[test]
fn an_empty_stray_in_a_cgroup_other_than_ours_is_removed_but_a_busy_one_stays() {
    let (dir, host) = fake_v1(true);
    let fs = dir.path().join("fs");
    let dead = Owner {
        pid: u32::MAX,
        ..Owner::current().clone()
    };
    // A dead serve's memory cgroup was a sibling of ours: its run there is out of our sweep.
    let elsewhere = run_dir(&fs.join("memory/machine/other"), &dead);
    // A file in it stands for its processes here: rmdir fails on it, as EBUSY would.
    let busy = run_dir(&fs.join("memory/elsewhere"), &dead);
    std::fs::write(busy.join("tasks"), "1\n").unwrap();
    let live = run_dir(&fs.join("memory/machine/other"), Owner::current());
    assert_eq!(host.remove_strays(), 1);
    assert!(!elsewhere.exists(), "the empty run of a dead owner went");
    assert!(busy.exists(), "a run that is not empty stays");
    assert!(live.exists(), "a live owner's run stays");
}

#[test]
fn on_v2_strays_are_found_next_to_our_leaf() {
    let (dir, host) = fake_v2(&format!("/svc/{HOST_LEAF}"), true, "");
    let svc = dir.path().join("fs/svc");
    let dead = Owner {
        pid: u32::MAX,
        ..Owner::current().clone()
    };
    let stray = run_dir(&svc, &dead);
    assert_eq!(host.remove_strays(), 1);
    assert!(!stray.exists());
    assert!(svc.join(HOST_LEAF).exists(), "our leaf stays");
}

/// cgroups-rs reports no OOM events on v2 (README, "cgroups"): memory.events is read here.
#[test]
fn on_v2_the_memory_limit_counts_as_hit_only_after_an_oom_kill() {
    let (dir, host) = fake_v2("/svc", true, "memory");
    std::fs::write(dir.path().join("fs/svc/cgroup.subtree_control"), "memory").unwrap();
    let run = host.create("run-1", &LIMITS).unwrap().unwrap();
    let events = dir.path().join("fs/svc/run-1/memory.events");
    std::fs::write(&events, "low 0\nhigh 0\nmax 12\noom 0\noom_kill 0\n").unwrap();
    assert!(!run.memory_limit_hit(), "reaching the limit is no OOM");
    std::fs::write(&events, "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n").unwrap();
    assert!(run.memory_limit_hit());
}
