//! The whole launcher, driven as a binary, on a tiny Python rootfs assembled from the host's
//! Debian/Ubuntu python3 (`/usr/bin/python3`: the binary, the libraries `ldd` lists, the
//! standard library), whatever its version.
//!
//! Skipped by `testkit::require` (a failure under CI) when the host lacks user namespaces or
//! that python3.

// Tests may unwrap: a panic is the test failing with the value that was wrong.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The host's system Python (a pyenv build elsewhere on PATH may keep its standard library
/// under a home directory that the sandbox user cannot read).
const PYTHON: &str = "/usr/bin/python3";

fn skip(why: &str) -> Option<PathBuf> {
    testkit::require(false, why);
    None
}

/// The rootfs, built once per test process in a fresh private temporary directory (made
/// world-readable, since a root caller's sandbox runs as a host uid of its own) and removed when
/// the test process exits.
fn rootfs() -> Option<PathBuf> {
    static ROOTFS: OnceLock<Result<tempfile::TempDir, String>> = OnceLock::new();
    extern "C" fn remove_rootfs() {
        if let Some(Ok(dir)) = ROOTFS.get() {
            let _ = std::fs::remove_dir_all(dir.path());
        }
    }
    let built = ROOTFS.get_or_init(|| {
        let dir = build_rootfs()?;
        // SAFETY: registers a plain function to run at exit(3); it only removes a directory.
        #[allow(unsafe_code)]
        unsafe {
            libc::atexit(remove_rootfs)
        };
        Ok(dir)
    });
    match built {
        Ok(dir) => Some(dir.path().join("root")),
        Err(why) => skip(why),
    }
}

/// What the host Python says about itself: the real executable, `python3.N`, the stdlib.
fn describe_python() -> Result<(PathBuf, String, PathBuf), String> {
    if !Path::new(PYTHON).exists() {
        return Err(format!("{PYTHON} is not installed"));
    }
    let out = Command::new(PYTHON)
        .args([
            "-I",
            "-S",
            "-c",
            "import os, sys, sysconfig; print(os.path.realpath(sys.executable)); \
             print('python%d.%d' % sys.version_info[:2]); print(sysconfig.get_path('stdlib'))",
        ])
        .output()
        .map_err(|e| format!("{PYTHON}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.lines().collect::<Vec<_>>()[..] {
        [exe, name, stdlib] => Ok((exe.into(), name.into(), stdlib.into())),
        _ => Err(format!("{PYTHON} did not describe itself: {text:?}")),
    }
}

fn build_rootfs() -> Result<tempfile::TempDir, String> {
    let (exe, name, stdlib) = describe_python()?;
    let dir = tempfile::Builder::new()
        .prefix("launcher-test-rootfs-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    let root = dir.path().join("root");
    for sub in ["tmp", "dev", "proc", "etc", "usr/bin", "usr/lib"] {
        std::fs::create_dir_all(root.join(sub)).map_err(|e| e.to_string())?;
    }
    place(&exe, &root.join("usr/bin").join(&name))?;
    std::os::unix::fs::symlink(&name, root.join("usr/bin/python3")).map_err(|e| e.to_string())?;
    let ldd = Command::new("ldd")
        .arg(&exe)
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    for lib in String::from_utf8_lossy(&ldd.stdout)
        .split_whitespace()
        .filter(|w| w.starts_with('/'))
    {
        place(Path::new(lib), &root.join(lib.trim_start_matches('/')))?;
    }
    copy_tree(
        &stdlib,
        &root.join(stdlib.strip_prefix("/").unwrap_or(&stdlib)),
    )?;
    set_mode(dir.path(), 0o755);
    set_mode(&root, 0o755);
    std::fs::write(root.join("etc/marker"), "rootfs\n").map_err(|e| e.to_string())?;
    Ok(dir)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Hard-links `src` (symlinks resolved) to `dst`, or copies it when linking is refused.
fn place(src: &Path, dst: &Path) -> Result<(), String> {
    let src = std::fs::canonicalize(src).map_err(|e| format!("{}: {e}", src.display()))?;
    std::fs::create_dir_all(dst.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::hard_link(&src, dst)
        .or_else(|_| std::fs::copy(&src, dst).map(drop))
        .map_err(|e| format!("{}: {e}", src.display()))
}

fn copy_tree(src: &Path, dst: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dst).map_err(|e| e.to_string())?;
    for entry in std::fs::read_dir(src).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let name = entry.file_name();
        if [
            "test",
            "site-packages",
            "dist-packages",
            "idlelib",
            "tkinter",
            "ensurepip",
            "lib2to3",
        ]
        .iter()
        .any(|skip| name == *skip)
        {
            continue;
        }
        let ty = entry.file_type().map_err(|e| e.to_string())?;
        if ty.is_dir() {
            copy_tree(&entry.path(), &dst.join(&name))?;
        } else if ty.is_file() {
            place(&entry.path(), &dst.join(&name))?;
        }
    }
    Ok(())
}

/// Runs `python -I -S -c code` through the launcher with `extra` options.
fn python(root: &Path, extra: &[&str], code: &str) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_launcher"));
    cmd.arg("--rootfs").arg(root).args(extra).args([
        "--",
        "/usr/bin/python3",
        "-I",
        "-S",
        "-c",
        code,
    ]);
    cmd.env("SECRET_FROM_THE_HOST", "x")
        .output()
        .expect("spawn launcher")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn require_userns(out: &Output) -> bool {
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("failed to clone into new") {
        skip(&format!("user namespaces unavailable: {err}"));
        return false;
    }
    true
}

#[test]
fn the_program_runs_as_65534_with_no_capabilities_no_new_privs_seccomp_and_an_empty_environment() {
    let Some(root) = rootfs() else { return };
    let out = python(
        &root,
        &[],
        r#"
import os, socket
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
print(os.getuid(), os.getgid(), os.getpid(), os.getcwd(), dict(os.environ), socket.gethostname())
print(st["CapEff"].strip(), st["CapPrm"].strip(), st["CapBnd"].strip(), st["NoNewPrivs"].strip(), st["Seccomp"].strip())
"#,
    );
    if !require_userns(&out) {
        return;
    }
    assert_eq!(
        stdout(&out),
        "65534 65534 1 /tmp {} sandbox\n0000000000000000 0000000000000000 0000000000000000 1 2\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn python_threads_asyncio_subprocess_and_urandom_work_in_the_sandbox() {
    let Some(root) = rootfs() else { return };
    let out = python(
        &root,
        &[],
        r#"
import asyncio, os, subprocess, sys, threading
res = []
t = threading.Thread(target=lambda: res.append("thread")); t.start(); t.join()
async def main():
    loop = asyncio.get_running_loop()
    a = await loop.run_in_executor(None, lambda: "executor")
    fut = loop.create_future()
    loop.call_soon_threadsafe(fut.set_result, "threadsafe")
    return a, await fut
res.extend(asyncio.run(main()))
res.append(subprocess.run([sys.executable, "-I", "-S", "-c", "print('child')"], capture_output=True, text=True).stdout.strip())
res.append(len(os.urandom(16)))
print(res)
"#,
    );
    if !require_userns(&out) {
        return;
    }
    assert_eq!(
        stdout(&out),
        "['thread', 'executor', 'threadsafe', 'child', 16]\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_network_the_root_and_exec_from_tmp_are_refused_and_denials_carry_the_seccomp_errno() {
    let Some(root) = rootfs() else { return };
    let out = python(
        &root,
        &["--seccomp-errno", "133"],
        r#"
import os, socket, shutil, subprocess, sys
def err(f):
    try:
        f(); return "ok"
    except OSError as e:
        return e.errno
shutil.copy(sys.executable, "/tmp/py"); os.chmod("/tmp/py", 0o755)
print(err(lambda: socket.socket(socket.AF_INET)), err(lambda: socket.socket(socket.AF_VSOCK)),
      err(lambda: open("/etc/new", "w")), err(lambda: open("/tmp/new", "w").write("x")),
      err(lambda: subprocess.run(["/tmp/py", "-c", "1"])), err(lambda: socket.socketpair()),
      sorted(os.listdir("/")), sorted(os.listdir("/dev")))
"#,
    );
    if !require_userns(&out) {
        return;
    }
    assert_eq!(
        stdout(&out),
        "133 133 30 ok 13 ok ['dev', 'etc', 'lib', 'lib64', 'proc', 'tmp', 'usr'] \
         ['fd', 'null', 'random', 'stderr', 'stdin', 'stdout', 'urandom', 'zero']\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn only_descriptors_0_1_and_2_reach_the_program_and_stdin_and_stdout_are_the_callers_pipes() {
    let Some(root) = rootfs() else { return };
    let mut child = Command::new(env!("CARGO_BIN_EXE_launcher"))
        .arg("--rootfs")
        .arg(&root)
        .args(["--", "/usr/bin/python3", "-I", "-S", "-c"])
        .arg("import os, sys; print(sys.stdin.readline().strip(), sorted(os.listdir('/proc/self/fd')))")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"ping\n").unwrap();
    let out = child.wait_with_output().unwrap();
    if !require_userns(&out) {
        return;
    }
    // 3 is the descriptor listdir itself opens.
    assert_eq!(
        stdout(&out),
        "ping ['0', '1', '2', '3']\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_programs_exit_status_and_death_by_signal_are_the_launchers() {
    let Some(root) = rootfs() else { return };
    let out = python(&root, &[], "import sys; sys.exit(7)");
    if !require_userns(&out) {
        return;
    }
    assert_eq!(out.status.code(), Some(7));
    // Killed by a signal (SIGKILL from the host to the sandbox's pid 1): 128 + 9.
    let mut child = Command::new(env!("CARGO_BIN_EXE_launcher"))
        .arg("--rootfs")
        .arg(&root)
        .args([
            "--",
            "/usr/bin/python3",
            "-I",
            "-S",
            "-c",
            "print('ready', flush=True); import time; time.sleep(60)",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let pid1 = descendants(child.id())[0];
    Command::new("kill")
        .args(["-KILL", &pid1.to_string()])
        .status()
        .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(128 + 9));
}

#[test]
fn a_fork_bomb_is_stopped_by_the_process_limit() {
    let Some(root) = rootfs() else { return };
    let out = python(
        &root,
        &["--nproc", "16"],
        &format!(
            "{}\nn, error = fork_up_to(1000)\nprint('stopped', n < 16, error)\n",
            testkit::FORK_UP_TO_PY
        ),
    );
    if !require_userns(&out) {
        return;
    }
    assert_eq!(
        stdout(&out),
        "stopped True EAGAIN\n",
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn killing_the_launcher_kills_every_process_of_the_sandbox() {
    let Some(root) = rootfs() else { return };
    let mut child = Command::new(env!("CARGO_BIN_EXE_launcher"))
        .arg("--rootfs")
        .arg(&root)
        .args(["--", "/usr/bin/python3", "-I", "-S", "-c"])
        .arg(
            "import os, sys, time\n\
             for _ in range(3):\n    if os.fork() == 0:\n        os.setsid()\n        \
             if os.fork() == 0: time.sleep(60)\n        os._exit(0)\n\
             print('ready', flush=True); time.sleep(60)",
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let launcher = child.id();
    let mut line = String::new();
    use std::io::BufRead;
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if line != "ready\n" {
        let out = child.wait_with_output().unwrap();
        if !require_userns(&out) {
            return;
        }
        panic!("no ready line: {}", String::from_utf8_lossy(&out.stderr));
    }
    let sandbox = descendants(launcher);
    assert!(sandbox.len() >= 4, "pid 1 and three daemons: {sandbox:?}");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while sandbox.iter().any(|pid| alive(*pid)) {
        assert!(
            Instant::now() < deadline,
            "sandbox processes survived: {sandbox:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_rootfs_without_mount_points_fails_with_one_line_and_status_125() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_launcher"))
        .arg("--rootfs")
        .arg(dir.path())
        .args(["--", "/bin/true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("launcher: failed to find "), "{err}");
}

/// Every process whose ancestry reaches `pid`, or whose session began below it (the
/// double-forked daemons are reparented to the sandbox's pid 1, which is `pid`'s child).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = vec![pid];
    loop {
        let before = found.len();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(p) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
                continue;
            };
            let after = &stat[stat.rfind(')').unwrap() + 2..];
            let ppid: u32 = after.split_whitespace().nth(1).unwrap().parse().unwrap();
            if found.contains(&ppid) && !found.contains(&p) {
                found.push(p);
            }
        }
        if found.len() == before {
            found.remove(0);
            return found;
        }
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s[s.rfind(')').unwrap() + 2..].starts_with('Z'))
        .unwrap_or(false)
}
