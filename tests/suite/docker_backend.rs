//! The Docker backend, end to end: `exec --backend docker` against a real engine.
//!
//! Every test needs a Docker engine (`scripts/start-docker`); without one it is skipped
//! loudly, and fails under `CI=true`.
//!
//! Index: the quick start; the deadline and killed runs leave no container (the reaper ends
//! a SIGKILLed exec's container; the next start removes what a killed reaper left); the host
//! environment stays out; Python under the exported seccomp profile; the memory limit; an
//! idle pooled container ends by itself when its serve dies with no clean-up (its stdin,
//! held only over serve's attach connection, closes); a container dropped midway is removed
//! without stalling the runtime, and a run cut short by SIGTERM leaves no container without
//! the reaper's help.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{
    ExecOptions, QUICK_START, assert_prints_the_quick_start_result, bin, docker_available,
    exec_with, require, send_signal, toy,
};

fn docker_ready() -> bool {
    require(
        docker_available(),
        "no Docker engine answers `docker info` (run scripts/start-docker)",
    )
}

fn docker_exec(code: &str, args: &[&str], env: &[(&str, &str)]) -> super::common::Exec {
    exec_with(
        code,
        ExecOptions {
            backend: "docker",
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        },
    )
}

/// Names of the containers, running or not, started by the process `pid`.
fn containers_of(pid: u32) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "--all", "--format", "{{.Names}}", "--filter"])
        .arg(format!("name=mcp-code-mode-{pid}-"))
        .output()
        .expect("run docker ps");
    assert!(out.status.success(), "docker ps: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        // The name filter matches substrings: keep exact prefixes only.
        .filter(|n| n.starts_with(&format!("mcp-code-mode-{pid}-")))
        .map(str::to_owned)
        .collect()
}

fn spawn_exec(code: &str, args: &[&str]) -> std::process::Child {
    Command::new(bin())
        .args(["exec", "--backend", "docker", "--code", code])
        .args(args)
        .arg("--")
        .args(toy())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcp-code-mode exec")
}

#[test]
fn the_quick_start_through_docker_prints_exactly_the_result_the_readme_shows() {
    if !docker_ready() {
        return;
    }
    let run = docker_exec(QUICK_START, &["--allow", "add"], &[]);
    assert_prints_the_quick_start_result(&run);
}

#[test]
fn a_run_killed_at_the_deadline_leaves_no_container() {
    if !docker_ready() {
        return;
    }
    let child = spawn_exec("while True: pass", &["--deadline", "2"]);
    let pid = child.id();
    let Output { stdout, .. } = child.wait_with_output().expect("wait for exec");
    let stdout = String::from_utf8_lossy(&stdout);
    assert!(stdout.contains("deadline of 2 s exceeded"), "{stdout}");
    assert_eq!(containers_of(pid), Vec::<String>::new());
}

/// SIGKILLs the container reaper of the process `pid` (a `sh` whose `$0` is
/// `mcp-code-mode-reaper` and whose owner argument starts with `pid-`).
fn kill_reaper_of(pid: u32) {
    let owner = format!("{pid}-");
    let mut killed = 0;
    for entry in std::fs::read_dir("/proc").expect("read /proc").flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let is_reaper = args.len() > 4
            && args[3] == b"mcp-code-mode-reaper"
            && args[4].starts_with(owner.as_bytes());
        if is_reaper {
            let status = Command::new("kill")
                .arg("-9")
                .arg(entry.file_name())
                .status()
                .expect("run kill");
            assert!(status.success(), "kill the reaper");
            killed += 1;
        }
    }
    assert_eq!(killed, 1, "exec {pid} should have exactly one reaper");
}

/// Waits until exec `pid` has a container; panics after 60 s.
fn wait_for_container(pid: u32) {
    let start = Instant::now();
    while containers_of(pid).is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no container appeared for exec {pid}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_busy_container_ends_within_seconds_of_its_exec_being_sigkilled() {
    if !docker_ready() {
        return;
    }
    let mut child = spawn_exec("while True: pass", &["--deadline", "30"]);
    let pid = child.id();
    wait_for_container(pid);
    std::thread::sleep(Duration::from_secs(1));
    child.kill().expect("kill exec");
    child.wait().expect("reap exec");
    let killed = Instant::now();
    // Well inside the deadline and RLIMIT_CPU (deadline + 5 s): only the reaper ends it.
    while !containers_of(pid).is_empty() {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the container of exec {pid} still exists 20 s after exec was SIGKILLed"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_container_left_by_a_killed_exec_is_removed_by_the_next_start() {
    if !docker_ready() {
        return;
    }
    let mut child = spawn_exec("import time\ntime.sleep(600)", &[]);
    let pid = child.id();
    wait_for_container(pid);
    // SIGKILL of the exec and of its reaper: no destructor runs, the container outlives
    // its owner.
    kill_reaper_of(pid);
    child.kill().expect("kill exec");
    child.wait().expect("reap exec");
    assert!(
        !containers_of(pid).is_empty(),
        "the container should outlive a SIGKILL"
    );
    let next = docker_exec("print('next')", &[], &[]);
    assert_eq!(next.printed(), "next\n", "{next:?}");
    assert_eq!(containers_of(pid), Vec::<String>::new());
}

#[test]
fn the_sandbox_sees_nothing_of_the_host_environment() {
    if !docker_ready() {
        return;
    }
    // DOCKER_API_VERSION would break the docker client if it reached it: it must not.
    let run = docker_exec(
        "import os, json, socket\nprint(json.dumps({'env': dict(os.environ), 'host': socket.gethostname(), 'cwd': os.getcwd(), 'uid': os.getuid(), 'resolv': open('/etc/resolv.conf').read(), 'sys': os.listdir('/sys')}))",
        &[],
        &[("SECRET_TOKEN", "hunter2"), ("DOCKER_API_VERSION", "0.1")],
    );
    assert_eq!(run.code, 0, "{run:?}");
    let seen: Value = serde_json::from_str(run.printed().trim()).expect("one JSON line");
    let mut names: Vec<&str> = seen["env"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["HOME", "HOSTNAME", "PATH"], "{seen}");
    assert_eq!(seen["env"]["HOSTNAME"], "sandbox");
    assert_eq!(seen["env"]["HOME"], "/nonexistent");
    assert_eq!(seen["host"], "sandbox");
    assert_eq!(seen["cwd"], "/tmp");
    assert_eq!(seen["uid"], 65534);
    assert_eq!(seen["resolv"], "nameserver 0.0.0.0\n");
    assert_eq!(seen["sys"], serde_json::json!([]));
    assert!(!run.stdout.contains("hunter2"));
}

const POSITIVE_AND_NEGATIVE: &str = r#"
import asyncio, ctypes, json, os, socket, subprocess, threading
out = {}
status = open('/proc/self/status').read()
out['seccomp'] = 'Seccomp:\t2' in status
out['no_new_privs'] = 'NoNewPrivs:\t1' in status
out['cap_eff'] = [l.split()[1] for l in status.splitlines() if l.startswith('CapEff')][0]
t = threading.Thread(target=lambda: out.__setitem__('thread', True)); t.start(); t.join()
async def main():
    loop = asyncio.get_running_loop()
    r = await loop.run_in_executor(None, lambda: 42)
    f = loop.create_future()
    threading.Thread(target=lambda: loop.call_soon_threadsafe(f.set_result, 'ts')).start()
    return [r, await f]
out['asyncio'] = asyncio.run(main())
out['subprocess'] = subprocess.run(['/usr/bin/python3', '-I', '-c', 'print(7)'], capture_output=True, text=True).stdout
out['urandom'] = len(os.urandom(16))
a, b = socket.socketpair(); a.send(b'x'); out['socketpair'] = b.recv(1).decode()
with open('/tmp/f', 'w') as f: out['tmp'] = f.write('hi')
def errno_of(fam, kind=socket.SOCK_STREAM):
    try: socket.socket(fam, kind)
    except OSError as e: return e.errno
    return 0
out['inet'] = errno_of(socket.AF_INET)
out['inet6'] = errno_of(socket.AF_INET6)
out['vsock'] = errno_of(40)
out['netlink'] = errno_of(16, socket.SOCK_RAW)
libc = ctypes.CDLL(None, use_errno=True)
def sc(*a):
    r = libc.syscall(*[ctypes.c_long(x) for x in a]); return 0 if r >= 0 else ctypes.get_errno()
out['clone3'] = sc(435, 0, 0)
out['inet_high_bits'] = sc(41, 2 | (1 << 32), 1, 0)
out['unshare'] = sc(272, 0x10000000)
out['io_uring_setup'] = sc(425, 1, 0)
try: open('/etc/x', 'w'); out['write_root'] = 0
except OSError as e: out['write_root'] = e.errno
print(json.dumps(out))
"#;

#[test]
fn python_works_under_the_exported_seccomp_profile_and_the_denials_hold() {
    if !docker_ready() {
        return;
    }
    let run = docker_exec(POSITIVE_AND_NEGATIVE, &[], &[]);
    assert_eq!(run.code, 0, "{run:?}");
    let seen: Value = serde_json::from_str(run.printed().trim()).expect("one JSON line");
    let expected = serde_json::json!({
        "seccomp": true, "no_new_privs": true, "cap_eff": "0000000000000000",
        "thread": true, "asyncio": [42, "ts"], "subprocess": "7\n", "urandom": 16,
        "socketpair": "x", "tmp": 2,
        // EPERM from the profile's default action, ENOSYS for clone3, EROFS for the root.
        "inet": 1, "inet6": 1, "vsock": 1, "netlink": 1,
        "clone3": 38, "inet_high_bits": 1, "unshare": 1, "io_uring_setup": 1,
        "write_root": 30,
    });
    assert_eq!(seen, expected);
}

#[test]
fn a_run_over_the_memory_limit_says_so() {
    if !docker_ready() {
        return;
    }
    let run = docker_exec("x = bytearray(400 * 1024 * 1024)\nprint(len(x))", &[], &[]);
    assert!(run.stopped(), "{run:?}");
    assert!(run.error().contains("ran out of memory"), "{run:?}");
}

/// Whether the container `name` is running (`docker inspect`); false when it is gone.
fn running(name: &str) -> bool {
    let out = Command::new("docker")
        .args(["inspect", "--format", "{{.State.Running}}", name])
        .output()
        .expect("run docker inspect");
    String::from_utf8_lossy(&out.stdout).trim() == "true"
}

#[test]
fn an_idle_pooled_container_exits_by_itself_once_its_serve_is_gone() {
    if !docker_ready() {
        return;
    }
    // serve holds the container's stdin over its attach connection; nothing else does.
    let mut serve = Command::new(bin())
        .args(["serve", "--backend", "docker", "--pool", "1", "--"])
        .args(toy())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn serve");
    let pid = serve.id();
    let start = Instant::now();
    let name = loop {
        if let Some(name) = containers_of(pid).into_iter().find(|n| running(n)) {
            break name;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no pooled container started for serve {pid}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    // No clean-up at all: no destructor, no reaper. Only the closed attach connection can
    // end the idle runner, which waits for its first cell on stdin.
    kill_reaper_of(pid);
    serve.kill().expect("kill serve");
    serve.wait().expect("reap serve");
    let killed = Instant::now();
    while running(&name) {
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the idle container {name} still runs 20 s after its serve was SIGKILLed"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let removed = Command::new("docker")
        .args(["rm", "--force", &name])
        .output()
        .expect("run docker rm");
    assert!(removed.status.success(), "{removed:?}");
}

/// A container whose control is dropped midway (a run or start cut short) is removed off
/// the runtime's thread, which `serve` runs every run and session on: while it is removed,
/// other tasks on a one-thread runtime go on (a timer that ticks every millisecond is never
/// held up for half of the removal's time), and the backend's `settle`
/// returns once it is gone.
#[test]
fn a_container_dropped_midway_is_removed_without_stalling_the_runtime() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use mcp_code_mode::sandbox::Backend;
    use mcp_code_mode::sandbox::docker::DockerBackend;

    if !docker_ready() {
        return;
    }
    let rootfs = mcp_code_mode::rootfs::ensure(&mcp_code_mode::rootfs::Options {
        quiet: true,
        ..Default::default()
    })
    .expect("the rootfs");
    let backend = DockerBackend::new(&rootfs, 60).expect("the docker backend");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        for round in 0..3 {
            let sandbox = backend.spawn().await.expect("a container");
            let done = Arc::new(AtomicBool::new(false));
            let ticker = tokio::spawn({
                let done = done.clone();
                async move {
                    let mut worst = Duration::ZERO;
                    let mut last = Instant::now();
                    while !done.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        worst = worst.max(last.elapsed());
                        last = Instant::now();
                    }
                    worst
                }
            });
            tokio::time::sleep(Duration::from_millis(20)).await;
            let dropped = Instant::now();
            drop(sandbox);
            backend.settle().await;
            let removal = dropped.elapsed();
            done.store(true, Ordering::SeqCst);
            let worst = ticker.await.expect("the ticker");
            assert!(
                worst < removal / 2,
                "round {round}: the runtime stood still for {worst:?} of the removal's {removal:?}"
            );
        }
    });
}

/// `exec` stopped by SIGTERM while its container starts or runs, with its reaper gone (so
/// nothing removes containers at its exit but exec itself): no container is left once it
/// has exited.
#[test]
fn a_run_cut_short_by_sigterm_leaves_no_container_even_without_the_reaper() {
    if !docker_ready() {
        return;
    }
    for wait in [Duration::ZERO, Duration::from_millis(300)] {
        let child = spawn_exec("import time\ntime.sleep(30)", &[]);
        let pid = child.id();
        // The reaper starts before the first container is made.
        let start = Instant::now();
        loop {
            let reapers = processes_named_reaper_of(pid);
            if reapers > 0 {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(60), "no reaper");
            std::thread::sleep(Duration::from_millis(10));
        }
        kill_reaper_of(pid);
        wait_for_container(pid);
        std::thread::sleep(wait);
        send_signal("TERM", pid);
        let output = child.wait_with_output().expect("wait for exec");
        assert_eq!(
            containers_of(pid),
            Vec::<String>::new(),
            "after {wait:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// How many container reapers the process `pid` has.
fn processes_named_reaper_of(pid: u32) -> usize {
    let owner = format!("{pid}-");
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
                args.len() > 4
                    && args[3] == b"mcp-code-mode-reaper"
                    && args[4].starts_with(owner.as_bytes())
            })
        })
        .count()
}
