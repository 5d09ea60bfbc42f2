//! Isolation between concurrent runs, judged from outside: locks, watches and record locks
//! on what runs share, and pipe buffer pages of other host users.

use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};

use crate::suite::common::{Exec, ExecOptions, exec_with, unprivileged};
use crate::suite::layers::PRELUDE;

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
    if !crate::suite::common::require(
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

#[test]
fn a_native_run_full_of_pipes_leaves_other_users_pipes_whole() {
    // Only a root caller's sandbox can have a host uid that is not the caller's.
    if super::ready("native") && !unprivileged() {
        a_run_full_of_pipes_leaves_other_users_pipes_whole()
    }
}

#[test]
fn concurrent_native_runs_share_no_lock_and_no_watch() {
    if super::ready("native") {
        concurrent_runs_share_no_lock_and_no_watch("native")
    }
}

#[test]
fn concurrent_native_runs_see_no_record_lock_of_each_other() {
    if super::ready("native") {
        concurrent_runs_see_no_record_lock_of_each_other("native")
    }
}

#[test]
fn concurrent_docker_runs_see_no_record_lock_of_each_other() {
    if super::ready("docker") {
        concurrent_runs_see_no_record_lock_of_each_other("docker")
    }
}

#[test]
fn concurrent_docker_runs_share_no_lock_and_no_watch() {
    if super::ready("docker") {
        concurrent_runs_share_no_lock_and_no_watch("docker")
    }
}
