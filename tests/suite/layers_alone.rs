//! Layers that an earlier layer would hide, each caught by a test of its own: the launcher run
//! by itself (as in `layers.rs`) in a setting where only the layer under test can refuse, and
//! the same run without that layer as the control, which must come out differently.
//!
//! Layers are left out or relaxed with the launcher's test-only knobs (`--test-*`, accepted
//! only with `MCP_CODE_MODE_LAUNCHER_TEST_KNOBS=1` in its environment, which the host never
//! sets: it starts the launcher with an empty environment), or, for cgroups and rlimits, by
//! what the launcher is given or inherits.
//!
//! Index:
//! - the knobs are refused without the variable, and exec's sentinel errno needs it too;
//! - Landlock: writes outside /tmp (in a writable, exec-allowed scratch tmpfs), exec from an
//!   exec-allowed /tmp, TCP connect and bind with seccomp left out; an expectation table by
//!   Landlock ABI;
//! - the pids cgroup stops a run whose RLIMIT_NPROC is raised;
//! - the CPU cgroup throttles (cpu.stat counters), against a cgroup with a quota too large
//!   to matter;
//! - RLIMIT_CPU ends a spinning process; RLIMIT_STACK bounds exec arguments even when the
//!   launcher inherits an unlimited stack; RLIMIT_CORE 0 leaves no core of a crash, even when
//!   the launcher inherits an unlimited one.

use std::process::{Command, Stdio};

use mcp_code_mode::sandbox::RunName;
use mcp_code_mode::sandbox::native::{CgroupHost, CgroupLimits, RunCgroup};

use super::common::{ExecOptions, bin, exec_with, require, unprivileged};
use super::layers::{field, launch, launch_by, ready};

/// The variable that enables the launcher's test knobs.
const KNOBS_ENV: &str = "MCP_CODE_MODE_LAUNCHER_TEST_KNOBS";

/// `mcp-code-mode` with an empty environment but the test knobs enabled.
fn with_knobs() -> Command {
    let mut launcher = Command::new(bin());
    launcher.env_clear().env(KNOBS_ENV, "1");
    launcher
}

/// The host kernel's Landlock ABI (0 when it has none), from landlock_create_ruleset(2) with
/// LANDLOCK_CREATE_RULESET_VERSION, asked through the host's python3.
fn landlock_abi() -> u32 {
    let out = Command::new("python3")
        .args([
            "-c",
            "import ctypes; print(max(0, ctypes.CDLL(None).syscall(444, None, 0, 1)))",
        ])
        .output()
        .expect("run python3");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

#[test]
fn the_test_knobs_are_refused_without_their_environment_variable() {
    if ready().is_none() {
        return;
    }
    let rootfs = ready().expect("checked");
    for knob in [
        "--test-without-landlock",
        "--test-without-seccomp",
        "--test-exec-tmp",
        "--test-scratch-dir",
        "--test-core-dumps",
    ] {
        let out = Command::new(bin())
            .arg("__launcher")
            .arg("--rootfs")
            .arg(&rootfs)
            .arg(knob)
            .args(["--", "/usr/bin/python3", "-c", "print('ran')"])
            .env_clear()
            .output()
            .expect("run the launcher");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(125), "{knob}: {stderr}");
        assert!(stderr.contains("test-only option"), "{knob}: {stderr}");
        assert!(out.stdout.is_empty(), "{knob}: the program ran");
    }
}

#[test]
fn the_sentinel_seccomp_errno_of_exec_needs_the_test_knobs_variable() {
    if ready().is_none() {
        return;
    }
    let code = "import errno, socket\n\
                try:\n    socket.socket(socket.AF_INET)\n    print('ok')\n\
                except OSError as e:\n    print(errno.errorcode[e.errno])";
    let errno_env = (
        "MCP_CODE_MODE_TEST_SECCOMP_ERRNO".to_owned(),
        "99".to_owned(),
    );
    let knobs_env = (KNOBS_ENV.to_owned(), "1".to_owned());
    let run = |env: Vec<(String, String)>| {
        exec_with(
            code,
            ExecOptions {
                env,
                ..Default::default()
            },
        )
        .printed()
        .to_owned()
    };
    assert_eq!(run(vec![errno_env.clone()]), "EPERM\n", "the errno alone");
    assert_eq!(
        run(vec![knobs_env.clone()]),
        "EPERM\n",
        "the variable alone"
    );
    let wrong = (
        "MCP_CODE_MODE_TEST_SECCOMP_ERRNO".to_owned(),
        "0".to_owned(),
    );
    assert_eq!(
        run(vec![knobs_env.clone(), wrong]),
        "EPERM\n",
        "errno 0 (an allowance) is ignored"
    );
    assert_eq!(run(vec![knobs_env, errno_env]), "EADDRNOTAVAIL\n", "both");
}

/// One Landlock probe: the Python expression that fills `out[name]`, the ABI that first
/// handles the access, and what the same probe gets without Landlock (the control).
struct LandlockCase {
    name: &'static str,
    code: &'static str,
    since_abi: u32,
    without: &'static str,
}

/// Each access only Landlock refuses here: the scratch tmpfs at /dev/scratch is writable and
/// allows exec, /tmp allows exec (`--test-exec-tmp`), and seccomp is left out so AF_INET
/// sockets exist (the network namespace has only a loopback that is down).
const LANDLOCK_CASES: &[LandlockCase] = &[
    LandlockCase {
        name: "write_outside_tmp",
        code: r#"t(lambda: os.close(os.open("/dev/scratch/f", os.O_WRONLY | os.O_CREAT, 0o644)))"#,
        since_abi: 1,
        without: "ok",
    },
    LandlockCase {
        name: "mkdir_outside_tmp",
        code: r#"t(os.mkdir, "/dev/scratch/d")"#,
        since_abi: 1,
        without: "ok",
    },
    LandlockCase {
        name: "exec_from_tmp",
        code: r#"t(lambda: subprocess.run(["/tmp/py", "-c", "0"], stderr=subprocess.DEVNULL))"#,
        since_abi: 1,
        without: "ok",
    },
    LandlockCase {
        name: "tcp_connect",
        code: r#"t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).connect(("127.0.0.1", 9)))"#,
        since_abi: 4,
        without: "ENETUNREACH",
    },
    LandlockCase {
        name: "tcp_bind",
        code: r#"t(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).bind(("0.0.0.0", 8080)))"#,
        since_abi: 4,
        without: "ok",
    },
];

fn landlock_probe() -> String {
    let mut code =
        String::from("import shutil, subprocess\nshutil.copy(sys.executable, \"/tmp/py\")\n");
    code.push_str("os.chmod(\"/tmp/py\", 0o755)\n");
    code.push_str(
        "out[\"scratch_writable\"] = str(os.statvfs(\"/dev/scratch\").f_flag & os.ST_RDONLY == 0)\n",
    );
    for case in LANDLOCK_CASES {
        code.push_str(&format!("out[{:?}] = {}\n", case.name, case.code));
    }
    code
}

#[test]
fn landlock_alone_refuses_writes_outside_tmp_exec_from_tmp_and_tcp_by_abi() {
    if ready().is_none() {
        return;
    }
    let abi = landlock_abi();
    let probe = landlock_probe();
    let relaxed = [
        "--test-scratch-dir",
        "--test-exec-tmp",
        "--test-without-seccomp",
    ];
    let (with, stderr) = launch_by(with_knobs(), &probe, &relaxed);
    let mut control_args = relaxed.to_vec();
    control_args.push("--test-without-landlock");
    let (without, _) = launch_by(with_knobs(), &probe, &control_args);
    assert_eq!(field(&with, "scratch_writable"), "True", "{with}");
    for case in LANDLOCK_CASES {
        assert_ne!(
            case.without, "EACCES",
            "a control must differ from the denial"
        );
        // The control: without Landlock nothing else refuses.
        assert_eq!(
            field(&without, case.name),
            case.without,
            "{}: {without}",
            case.name
        );
        let expected = if abi >= case.since_abi {
            "EACCES"
        } else {
            case.without
        };
        assert_eq!(
            field(&with, case.name),
            expected,
            "{} with Landlock ABI {abi}: {with}; launcher stderr: {stderr}",
            case.name
        );
    }
    // Below ABI 4 the TCP rows are the control's; say so, and fail under CI.
    require(
        abi >= 4,
        "Landlock ABI < 4: TCP connect and bind are not Landlock's",
    );
}

/// A cgroup made the way the host makes a run's, with `limits`; `None` (after a loud skip as
/// root) when no writable cgroup exists. The unprivileged phase has none by design (the rlimit
/// fallback is what it exercises), so there it returns `None` quietly.
fn run_cgroup(limits: &CgroupLimits) -> Option<RunCgroup> {
    let host = CgroupHost::system();
    let name = RunName::next().to_string();
    match host.create(&name, limits) {
        Ok(Some(run)) => Some(run),
        _ if unprivileged() => None,
        other => {
            require(false, &format!("no writable cgroup: {other:?}"));
            None
        }
    }
}

/// The `--cgroup-procs` arguments that join `run`.
fn join_args(run: &RunCgroup) -> Vec<String> {
    run.procs_files()
        .iter()
        .flat_map(|f| ["--cgroup-procs".to_owned(), f.display().to_string()])
        .collect()
}

/// Forks up to 200 children: `forks` made, and `error`, the errno that stopped it, if any.
fn fork_up_to_200() -> String {
    format!(
        "{}\nn, error = fork_up_to(200)\nout['forks'] = str(n)\nif error:\n    out['error'] = error\n",
        testkit::FORK_UP_TO_PY
    )
}

#[test]
fn the_pids_cgroup_stops_a_run_whose_process_rlimit_is_raised() {
    if ready().is_none() {
        return;
    }
    let limits = CgroupLimits {
        memory_bytes: 256 << 20,
        pids: 16,
        cpus: 1,
    };
    let Some(run) = run_cgroup(&limits) else {
        return;
    };
    assert!(run.held().contains(&"pids"), "{:?}", run.held());
    let mut args = join_args(&run);
    args.extend(["--nproc".into(), "100000".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (joined, _) = launch(&fork_up_to_200(), &args);
    // The control: the same raised RLIMIT_NPROC, no cgroup: nothing stops 200 forks.
    let (alone, _) = launch(&fork_up_to_200(), &["--nproc", "100000"]);
    assert_eq!(field(&alone, "forks"), "200", "{alone}");
    let forks: u64 = field(&joined, "forks").parse().unwrap_or(u64::MAX);
    assert!(forks < 16, "{joined}");
    assert_eq!(field(&joined, "error"), "EAGAIN", "{joined}");
    run.remove().expect("remove the cgroup");
}

/// Spins `processes` processes (not threads: the GIL would keep threads on one CPU) for
/// `seconds` of wall-clock time.
fn spin(processes: u32, seconds: f64) -> String {
    format!(
        r#"
import time
def burn():
    end = time.monotonic() + {seconds}
    while time.monotonic() < end:
        pass
pids = []
for _ in range({processes}):
    pid = os.fork()
    if pid == 0:
        burn(); os._exit(0)
    pids.append(pid)
out["spun"] = str(all(os.waitpid(p, 0)[1] == 0 for p in pids))
"#
    )
}

/// (nr_throttled, throttled time in µs) from the cpu.stat next to one of `run`'s
/// cgroup.procs files: v2's `throttled_usec` or v1's `throttled_time` (ns).
fn throttling(run: &RunCgroup) -> Option<(u64, u64)> {
    run.procs_files().iter().find_map(|procs| {
        let stat = std::fs::read_to_string(procs.with_file_name("cpu.stat")).ok()?;
        let value = |key: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
        };
        let nr = value("nr_throttled ")?;
        let usec =
            value("throttled_usec ").or_else(|| value("throttled_time ").map(|ns| ns / 1000))?;
        Some((nr, usec))
    })
}

/// Gives `run` the highest scheduling weight (v1 cpu.shares, v2 cpu.weight), so that on a busy
/// host its processes still get more than one CPU when they want it, and the quota (not the
/// other load) is what holds them back. The weight is not the control under test.
fn favour(run: &RunCgroup) {
    for procs in run.procs_files() {
        for (file, value) in [("cpu.shares", "262144"), ("cpu.weight", "10000")] {
            let path = procs.with_file_name(file);
            if path.exists() {
                std::fs::write(&path, value).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
    }
}

#[test]
fn the_cpu_cgroup_throttles_a_run_that_wants_more_than_its_quota() {
    if ready().is_none() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
    let limited = CgroupLimits {
        memory_bytes: 256 << 20,
        pids: 64,
        cpus: 1,
    };
    // The control: the same cgroup with a quota of many more CPUs than the host has.
    let unlimited = CgroupLimits {
        cpus: 1024,
        ..limited
    };
    let Some(run) = run_cgroup(&limited) else {
        return;
    };
    let Some(control) = run_cgroup(&unlimited) else {
        return;
    };
    assert!(run.held().contains(&"cpu"), "{:?}", run.held());
    let code = spin(2 * cpus, 1.5);
    for cgroup in [&run, &control] {
        favour(cgroup);
        let args = join_args(cgroup);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (out, _) = launch(&code, &args);
        assert_eq!(field(&out, "spun"), "True", "{out}");
    }
    let (nr, usec) = throttling(&run).expect("cpu.stat of the limited cgroup");
    let (control_nr, _) = throttling(&control).expect("cpu.stat of the control cgroup");
    assert_eq!(control_nr, 0, "a quota of 1024 CPUs never throttles");
    assert!(
        nr > 0 && usec > 0,
        "{} processes spinning for 1.5 s under a 1-CPU quota were never throttled",
        2 * cpus
    );
    run.remove().expect("remove the cgroup");
    control.remove().expect("remove the control cgroup");
}

/// A child that spins until it has used 1.5 s of CPU, then exits 0; the parent reports how
/// the child ended ("exit N" or the signal's name).
const SPIN_CHILD: &str = r#"
import signal, time
pid = os.fork()
if pid == 0:
    while time.process_time() < 1.5:
        pass
    os._exit(0)
_, status = os.waitpid(pid, 0)
out["child"] = ("exit %d" % os.waitstatus_to_exitcode(status)) if os.WIFEXITED(status) else signal.Signals(os.WTERMSIG(status)).name
"#;

#[test]
fn rlimit_cpu_ends_a_process_at_its_cpu_seconds() {
    if ready().is_none() {
        return;
    }
    let (limited, _) = launch(SPIN_CHILD, &["--cpu-seconds", "1"]);
    let (control, _) = launch(SPIN_CHILD, &[]);
    assert_eq!(field(&control, "child"), "exit 0", "{control}");
    assert!(
        ["SIGXCPU", "SIGKILL"].contains(&field(&limited, "child")),
        "{limited}"
    );
}

/// Execs python with `mib` MiB of arguments (100 KiB each, under MAX_ARG_STRLEN).
fn exec_with_arguments(mib: u32) -> String {
    format!(
        r#"
import subprocess
args = ["x" * 100 * 1024] * ({mib} * 10)
out["exec_{mib}mib"] = t(lambda: subprocess.run([sys.executable, "-I", "-S", "-c", "0", *args], check=True))
"#
    )
}

#[test]
fn rlimit_stack_bounds_exec_arguments_even_when_the_launcher_inherits_no_stack_limit() {
    if ready().is_none() {
        return;
    }
    // execve(2) refuses arguments over a quarter of RLIMIT_STACK with E2BIG: 8 MiB gives
    // 2 MiB. The launcher is started with an unlimited stack, so only its own limit counts.
    let code = format!("{}{}", exec_with_arguments(1), exec_with_arguments(3));
    let mut prlimit = Command::new("prlimit");
    prlimit
        .env_clear()
        .arg("--stack=unlimited")
        .arg("--")
        .arg(bin())
        .stdin(Stdio::null());
    let (out, stderr) = launch_by(prlimit, &code, &[]);
    assert_eq!(field(&out, "exec_1mib"), "ok", "{out} {stderr}");
    assert_eq!(field(&out, "exec_3mib"), "E2BIG", "{out} {stderr}");
}

/// A child that crashes (SIGABRT, which dumps core) in /tmp, the sandbox's one writable
/// directory; the parent reports the limit, whether raising it works, how the child ended,
/// whether the kernel says it dumped core, and the core files left in /tmp.
const CRASH_CHILD: &str = r#"
import resource, signal
out["limit"] = "%d %d" % resource.getrlimit(resource.RLIMIT_CORE)
unlimited = (ctypes.c_uint64 * 2)(2**64 - 1, 2**64 - 1)
out["raise"] = t(raw, 302, 0, resource.RLIMIT_CORE, ctypes.byref(unlimited), 0)  # prlimit64
pid = os.fork()
if pid == 0:
    os.chdir("/tmp")
    os.abort()
_, status = os.waitpid(pid, 0)
out["child"] = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else "exit"
out["core_dumped"] = str(os.WCOREDUMP(status))
out["cores"] = ",".join(sorted(n for n in os.listdir("/tmp") if n.startswith("core")))
"#;

/// Files named `core*` directly in `dir`.
fn cores_in(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| n.starts_with("core"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn rlimit_core_leaves_no_core_of_a_crash_even_when_the_launcher_inherits_an_unlimited_one() {
    let Some(rootfs) = ready() else {
        return;
    };
    // A pattern that pipes to a host helper gets the core whatever RLIMIT_CORE says
    // (core(5): the limit does not apply to pipes): the host would see it.
    let pattern = std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default();
    if !require(
        !pattern.starts_with('|'),
        &format!(
            "core_pattern pipes to a host helper ({}); RLIMIT_CORE cannot keep the core from it",
            pattern.trim()
        ),
    ) {
        return;
    }
    let cwd = tempfile::tempdir().expect("a directory for the launcher to start in");
    let crash = |knobs: &[&str]| {
        let mut prlimit = Command::new("prlimit");
        prlimit
            .env_clear()
            .env(KNOBS_ENV, "1")
            .current_dir(cwd.path())
            .arg("--core=unlimited")
            .arg("--")
            .arg(bin())
            .stdin(Stdio::null());
        launch_by(prlimit, CRASH_CHILD, knobs)
    };
    let (limited, stderr) = crash(&[]);
    // The control: the same crash with RLIMIT_CORE left as inherited (unlimited) dumps core.
    let (control, _) = crash(&["--test-core-dumps"]);
    assert_eq!(field(&control, "child"), "SIGABRT", "{control}");
    assert_eq!(field(&control, "core_dumped"), "True", "{control}");
    assert_eq!(field(&control, "cores"), "core", "{control}");

    assert_eq!(field(&limited, "limit"), "0 0", "{limited} {stderr}");
    assert_eq!(field(&limited, "raise"), "EPERM", "{limited}");
    assert_eq!(field(&limited, "child"), "SIGABRT", "{limited}");
    assert_eq!(field(&limited, "core_dumped"), "False", "{limited}");
    assert_eq!(field(&limited, "cores"), "", "{limited}");
    // Nothing reached the host: not where the launcher started, not in the rootfs.
    assert_eq!(cores_in(cwd.path()), Vec::<String>::new());
    assert_eq!(cores_in(&rootfs), Vec::<String>::new());
    assert_eq!(cores_in(&rootfs.join("tmp")), Vec::<String>::new());
}
