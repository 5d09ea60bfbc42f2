//! Which layer of the native sandbox denies what: the launcher run by itself
//! (`mcp-code-mode __launcher --seccomp-errno 99 ...`) on the rootfs, with a short Python
//! probe as the program. The seccomp filter answers a sentinel errno (99, EADDRNOTAVAIL,
//! which no probe here can get from the kernel), so a denial with 99 is the filter's and any
//! other errno is a later layer's: a namespace, Landlock, a mount flag, a capability check or
//! an rlimit. Each test pairs the denial with a positive control that the same layer allows.
//! The probe classes through the whole runner are in `probes/`.
//!
//! Index: seccomp alone; the mount, network and pid namespaces; Landlock alone; signals;
//! capabilities and the user namespace; mount flags; rlimits and the tmpfs size.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;

use super::common::{bin, native_available, require, unprivileged};

/// The errno the filter answers in these tests.
const SENTINEL: &str = "EADDRNOTAVAIL";

/// Helpers every probe starts with: `t(f, *args)` is "ok" or the errno's name.
pub(super) const PRELUDE: &str = r#"
import ctypes, errno, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def t(f, *args):
    try:
        f(*args)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))
def raw(nr, *args):
    ctypes.set_errno(0)
    if libc.syscall(ctypes.c_long(nr), *[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]) == -1:
        raise OSError(ctypes.get_errno(), "")
out = {}
"#;

/// The rootfs of the native backend (built on first use, like `exec` does).
fn rootfs() -> Option<PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let options = mcp_code_mode::rootfs::Options {
            quiet: true,
            ..Default::default()
        };
        mcp_code_mode::rootfs::ensure(&options)
            .map(|r| r.dir)
            .map_err(|e| eprintln!("no rootfs: {e}"))
            .ok()
    })
    .clone()
}

pub(super) fn ready() -> Option<PathBuf> {
    if !require(native_available(), "user namespaces are not available here") {
        return None;
    }
    let dir = rootfs();
    require(dir.is_some(), "the rootfs could not be made").then_some(())?;
    dir
}

/// Runs `code` (after [`PRELUDE`]; it fills `out`) as the launcher's program with the
/// sentinel errno and `args`; returns `out` and the launcher's stderr.
pub(super) fn launch(code: &str, args: &[&str]) -> (Value, String) {
    let mut launcher = Command::new(bin());
    launcher.env_clear();
    launch_by(launcher, code, args)
}

/// [`launch`], started by `starter`: `mcp-code-mode` itself (its environment set by the
/// caller, e.g. with the test knobs enabled) or a wrapper such as `prlimit … mcp-code-mode`;
/// the launcher's arguments are added to it.
pub(super) fn launch_by(mut starter: Command, code: &str, args: &[&str]) -> (Value, String) {
    let rootfs = ready().expect("checked by the caller");
    let program = format!("{PRELUDE}\n{code}\nprint(json.dumps(out))");
    let output = starter
        .arg("__launcher")
        .arg("--rootfs")
        .arg(&rootfs)
        .args(["--seccomp-errno", "99"])
        .args(args)
        .args(["--", "/usr/bin/python3", "-I", "-S", "-c", &program])
        .stdin(Stdio::null())
        .output()
        .expect("run the launcher");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let out = serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!(
            "the probe printed no JSON ({e}); exit {:?}; stdout {stdout}; stderr {stderr}",
            output.status
        )
    });
    (out, stderr)
}

/// A `sleep` in our process group, of our uid when we are not root (the sandbox's host uid
/// then), else of host nobody; killed on drop.
struct Sentinel(Child);

impl Sentinel {
    fn start() -> Self {
        let mut sleep = Command::new("sleep");
        sleep.arg("600").stdin(Stdio::null());
        if !unprivileged() {
            sleep.uid(65534).gid(65534);
        }
        Sentinel(sleep.spawn().expect("start the sentinel"))
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    fn alive(&mut self) -> bool {
        matches!(self.0.try_wait(), Ok(None))
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn field<'a>(out: &'a Value, key: &str) -> &'a str {
    out[key].as_str().unwrap_or("missing")
}

mod native {
    use super::*;

    #[test]
    fn seccomp_alone_refuses_network_sockets_namespaces_and_identity_changes() {
        if ready().is_none() {
            return;
        }
        let (out, _) = launch(
            r#"
out["inet"] = t(socket.socket, socket.AF_INET, socket.SOCK_STREAM)
out["inet6"] = t(socket.socket, socket.AF_INET6, socket.SOCK_DGRAM)
out["inet_high_bits"] = t(raw, 41, 2 | 1 << 32, 1, 0)
out["vsock"] = t(raw, 41, 40, 1, 0)
out["netlink"] = t(raw, 41, 16, 3, 0)
out["setuid"] = t(os.setuid, 0)
out["unshare"] = t(raw, 272, 0x10000000)
out["clone_newuser"] = t(raw, 56, 0x10000000 | 17, 0, 0, 0, 0)
out["ptrace"] = t(raw, 101, 16, 1, 0, 0)
out["bpf"] = t(raw, 321, 0, 0, 0)
out["io_uring"] = t(raw, 425, 1, 0)
out["memfd"] = t(raw, 319, b"x", 0)
out["mount"] = t(raw, 165, b"none", b"/tmp", b"tmpfs", 0, 0)
out["tiocsti"] = t(raw, 16, 0, 0x5412, b"x")
out["clone3"] = t(raw, 435, 0, 0)
out["unix"] = t(socket.socket, socket.AF_UNIX, socket.SOCK_STREAM)
out["pair"] = t(socket.socketpair)
"#,
            &[],
        );
        for key in [
            "inet",
            "inet6",
            "inet_high_bits",
            "vsock",
            "netlink",
            "setuid",
            "unshare",
            "clone_newuser",
            "ptrace",
            "bpf",
            "io_uring",
            "memfd",
            "mount",
            "tiocsti",
        ] {
            assert_eq!(field(&out, key), SENTINEL, "{key}: {out}");
        }
        // clone3 is answered ENOSYS by policy (not the default errno); AF_UNIX is allowed.
        assert_eq!(field(&out, "clone3"), "ENOSYS", "{out}");
        assert_eq!(field(&out, "unix"), "ok", "{out}");
        assert_eq!(field(&out, "pair"), "ok", "{out}");
    }

    #[test]
    fn the_mount_namespace_hides_the_hosts_sockets_and_files() {
        if ready().is_none() {
            return;
        }
        let pid = std::process::id();
        let sock = std::env::temp_dir().join(format!("mcp-code-mode-layers-{pid}.sock"));
        let file = std::env::temp_dir().join(format!("mcp-code-mode-layers-{pid}.txt"));
        let _ = std::fs::remove_file(&sock);
        let _listener = UnixListener::bind(&sock).expect("a host unix socket");
        std::fs::write(&file, "host").unwrap();
        let (out, _) = launch(
            &format!(
                r#"
def connect(path):
    socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(path)
out["host_socket"] = t(connect, {sock:?})
out["docker_socket"] = t(connect, "/run/docker.sock")
out["host_file"] = t(open, {file:?})
out["proc_1_root"] = t(open, "/proc/1/root" + {file:?})
out["rootfs_file"] = t(open, "/etc/passwd")
"#,
                sock = sock.display().to_string(),
                file = file.display().to_string()
            ),
            &[],
        );
        let _ = std::fs::remove_file(&sock);
        let _ = std::fs::remove_file(&file);
        for key in ["host_socket", "docker_socket", "host_file", "proc_1_root"] {
            assert_eq!(field(&out, key), "ENOENT", "{key}: {out}");
        }
        assert_eq!(field(&out, "rootfs_file"), "ok", "{out}");
    }

    #[test]
    fn the_network_namespace_hides_the_hosts_abstract_sockets_and_interfaces() {
        if ready().is_none() {
            return;
        }
        let name = format!("mcp-code-mode-layers-{}", std::process::id());
        let _listener = UnixListener::bind_addr(
            &SocketAddr::from_abstract_name(name.as_bytes()).expect("abstract name"),
        )
        .expect("a host abstract socket");
        let (out, _) = launch(
            &format!(
                r#"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
out["host_abstract"] = t(s.connect, "\0" + {name:?})
inner = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
inner.bind("\0inner")
inner.listen()
out["own_abstract"] = t(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect, "\0inner")
out["interfaces"] = " ".join(l.split(":")[0].strip() for l in open("/proc/self/net/dev").read().splitlines()[2:])
"#
            ),
            &[],
        );
        // ECONNREFUSED: the name does not exist in this namespace (a Landlock scope denial
        // would be EPERM, and it comes after the lookup).
        assert_eq!(field(&out, "host_abstract"), "ECONNREFUSED", "{out}");
        assert_eq!(field(&out, "own_abstract"), "ok", "{out}");
        assert_eq!(field(&out, "interfaces"), "lo", "{out}");
    }

    #[test]
    fn the_pid_namespace_hides_host_processes() {
        if ready().is_none() {
            return;
        }
        let mut sentinel = Sentinel::start();
        let (out, _) = launch(
            &format!(
                r#"
out["kill_host"] = t(os.kill, {pid}, 0)
out["proc_host"] = t(open, "/proc/{pid}/status")
out["ppid"] = str(os.getppid())
out["pid"] = str(os.getpid())
"#,
                pid = sentinel.pid()
            ),
            &[],
        );
        assert_eq!(field(&out, "kill_host"), "ESRCH", "{out}");
        assert_eq!(field(&out, "proc_host"), "ENOENT", "{out}");
        assert_eq!(
            (field(&out, "pid"), field(&out, "ppid")),
            ("1", "0"),
            "{out}"
        );
        assert!(sentinel.alive());
    }

    #[test]
    fn landlock_alone_refuses_writing_devices_but_null_and_device_ioctls() {
        if ready().is_none() {
            return;
        }
        let (out, stderr) = launch(
            r#"
import fcntl, stat, termios
out["zero_mode"] = oct(os.stat("/dev/zero").st_mode & 0o777)
out["write_zero"] = t(os.open, "/dev/zero", os.O_WRONLY)
out["write_urandom"] = t(os.open, "/dev/urandom", os.O_WRONLY)
out["write_null"] = t(os.open, "/dev/null", os.O_WRONLY)
null = os.open("/dev/null", os.O_RDONLY)
out["tcgets_null"] = t(fcntl.ioctl, null, termios.TCGETS, bytes(64))
r, w = os.pipe()
out["tcgets_pipe"] = t(fcntl.ioctl, r, termios.TCGETS, bytes(64))
"#,
            &[],
        );
        if !require(
            !stderr.contains("landlock NotEnforced"),
            "Landlock is not enforced on this kernel",
        ) {
            return;
        }
        // The nodes are world-writable (mode 0666) and seccomp allows open and ioctl: only
        // Landlock says EACCES. The pipe's ENOTTY is the kernel's own answer.
        assert_eq!(field(&out, "zero_mode"), "0o666", "{out}");
        assert_eq!(field(&out, "write_zero"), "EACCES", "{out}");
        assert_eq!(field(&out, "write_urandom"), "EACCES", "{out}");
        assert_eq!(field(&out, "write_null"), "ok", "{out}");
        assert_eq!(field(&out, "tcgets_pipe"), "ENOTTY", "{out}");
        if require(
            !stderr.contains("landlock PartiallyEnforced"),
            "Landlock ABI < 5: no device ioctl control",
        ) {
            assert_eq!(field(&out, "tcgets_null"), "EACCES", "{out}");
        }
    }

    #[test]
    fn a_signal_to_the_hosts_process_group_does_not_leave_the_sandbox() {
        // The launcher gives the sandbox a session and process group of its own (setsid in
        // stage 4; pid 1 leads it), so kill(0, sig) reaches only the sandbox. Without it the
        // sandbox would keep the host's group (getpgrp() 0 inside) and, on kernels without
        // Landlock's signal scope (ABI < 6), signal the sentinel: a host process in our
        // group with the sandbox's host uid.
        if ready().is_none() {
            return;
        }
        let mut sentinel = Sentinel::start();
        let (out, _) = launch(
            r#"
import signal, subprocess
signal.signal(signal.SIGUSR1, signal.SIG_IGN)
out["pgrp"] = str(os.getpgrp())
out["kill_group"] = t(os.kill, 0, signal.SIGUSR1)
"#,
            &[],
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
        assert_eq!(
            field(&out, "pgrp"),
            "1",
            "the sandbox leads its own group: {out}"
        );
        assert_eq!(
            field(&out, "kill_group"),
            "ok",
            "the sandbox signals itself: {out}"
        );
        assert!(
            sentinel.alive(),
            "kill(0, SIGUSR1) from the sandbox killed a host process in its process group"
        );
    }

    #[test]
    fn capabilities_and_the_user_namespace_refuse_what_seccomp_allows() {
        if ready().is_none() {
            return;
        }
        let (out, _) = launch(
            r#"
open("/tmp/f", "w").close()
out["nice"] = t(os.setpriority, os.PRIO_PROCESS, 0, -5)
out["fifo"] = t(raw, 144, 0, 1, ctypes.byref(ctypes.c_int(50)))
out["chown_root"] = t(os.chown, "/tmp/f", 0, 0)
out["oom_adj"] = t(lambda: open("/proc/self/oom_score_adj", "w").write("-1000"))
out["nice_up"] = t(os.setpriority, os.PRIO_PROCESS, 0, 5)
out["chown_self"] = t(os.chown, "/tmp/f", 65534, 65534)
"#,
            &[],
        );
        // Allowed by the filter, refused by the kernel: no CAP_SYS_NICE, RLIMIT_RTPRIO 0, no
        // CAP_SYS_RESOURCE; uid 0 is not mapped in the user namespace (EINVAL).
        assert_eq!(field(&out, "nice"), "EACCES", "{out}");
        assert_eq!(field(&out, "fifo"), "EPERM", "{out}");
        assert_eq!(field(&out, "chown_root"), "EINVAL", "{out}");
        assert_eq!(field(&out, "oom_adj"), "EACCES", "{out}");
        assert_eq!(field(&out, "nice_up"), "ok", "{out}");
        assert_eq!(field(&out, "chown_self"), "ok", "{out}");
    }

    #[test]
    fn mount_flags_make_the_root_read_only_and_tmp_noexec() {
        if ready().is_none() {
            return;
        }
        let (out, _) = launch(
            r#"
import mmap, shutil
out["create_in_root"] = t(os.open, "/x", os.O_WRONLY | os.O_CREAT, 0o644)
shutil.copy("/usr/bin/python3", "/tmp/py")
fd = os.open("/tmp/py", os.O_RDONLY)
out["mmap_exec_tmp"] = t(mmap.mmap, fd, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_EXEC)
lib = os.open("/usr/bin/python3", os.O_RDONLY)
out["mmap_exec_root"] = t(mmap.mmap, lib, 4096, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_EXEC)
root, tmp = os.statvfs("/").f_flag, os.statvfs("/tmp").f_flag
out["root_flags"] = "ro" if root & os.ST_RDONLY else "rw"
out["tmp_flags"] = ",".join(n for n, f in (("noexec", os.ST_NOEXEC), ("nosuid", os.ST_NOSUID), ("nodev", os.ST_NODEV)) if tmp & f)
"#,
            &[],
        );
        // EROFS and EPERM come from the mounts: seccomp allows open and mmap, and Landlock
        // does not govern mmap.
        assert_eq!(field(&out, "create_in_root"), "EROFS", "{out}");
        assert_eq!(field(&out, "mmap_exec_tmp"), "EPERM", "{out}");
        assert_eq!(field(&out, "mmap_exec_root"), "ok", "{out}");
        assert_eq!(field(&out, "root_flags"), "ro", "{out}");
        assert_eq!(field(&out, "tmp_flags"), "noexec,nosuid,nodev", "{out}");
    }

    #[test]
    fn rlimits_and_the_tmpfs_size_bound_descriptors_and_files() {
        if ready().is_none() {
            return;
        }
        let code = r#"
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    out["fds"] = "%s after %d" % (errno.errorcode[e.errno], len(fds))
for fd in fds:
    os.close(fd)
def fill(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(b"\0" * (1 << 20))
            f.flush()
out["one_file"] = t(fill, "/tmp/a", 8)
os.unlink("/tmp/a")
out["many_files"] = t(lambda: [fill("/tmp/b%d" % i, 1) for i in range(8)])
"#;
        // RLIMIT_NOFILE 16; RLIMIT_FSIZE 2 MiB stops one file (EFBIG: Python ignores
        // SIGXFSZ); a 4 MiB /tmp stops several small files (ENOSPC).
        let (out, _) = launch(
            code,
            &[
                "--nofile",
                "16",
                "--fsize",
                "2097152",
                "--tmp-size",
                "4194304",
            ],
        );
        let fds = field(&out, "fds");
        assert!(fds.starts_with("EMFILE after "), "{out}");
        let opened: usize = fds.rsplit(' ').next().unwrap().parse().unwrap();
        assert!((10..16).contains(&opened), "{out}");
        assert_eq!(field(&out, "one_file"), "EFBIG", "{out}");
        assert_eq!(field(&out, "many_files"), "ENOSPC", "{out}");
    }

    #[test]
    fn the_memory_rlimit_bounds_every_mapping_of_one_process() {
        if ready().is_none() {
            return;
        }
        // --memory-rlimit 256 MiB, as the rlimit fallback sets it: RLIMIT_DATA 256 MiB and
        // RLIMIT_AS 1 GiB (launcher::rlimits::ADDRESS_SPACE_PER_DATA). RLIMIT_DATA alone
        // misses shared anonymous and grows-down mappings; RLIMIT_AS counts every mapping.
        let code = r#"
import mmap
MIB = 1 << 20
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
def touch(m, size):
    for i in range(0, size, 4096):
        m[i] = 1
def shared(size):
    m = mmap.mmap(-1, size, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
    touch(m, size)
    m.close()
def grows_down(size):
    MAP_GROWSDOWN, PROT_RW, PRIVATE_ANON = 0x100, 3, 0x22
    p = libc.mmap(None, size, PROT_RW, PRIVATE_ANON | MAP_GROWSDOWN, -1, 0)
    if p in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    ctypes.memset(p, 1, size)
out["shared_1100"] = t(shared, 1100 * MIB)
out["grows_down_1100"] = t(grows_down, 1100 * MIB)
out["shared_64"] = t(shared, 64 * MIB)
out["grows_down_64"] = t(grows_down, 64 * MIB)
"#;
        let (out, _) = launch(code, &["--memory-rlimit", "268435456"]);
        assert_eq!(field(&out, "shared_1100"), "ENOMEM", "{out}");
        assert_eq!(field(&out, "grows_down_1100"), "ENOMEM", "{out}");
        // Positive controls: smaller mappings of both kinds still work.
        assert_eq!(field(&out, "shared_64"), "ok", "{out}");
        assert_eq!(field(&out, "grows_down_64"), "ok", "{out}");
    }
}
