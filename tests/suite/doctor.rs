//! `mcp-code-mode doctor` on this host, and `--strict` acting on what it finds.
//!
//! Index: doctor as root finds every layer; doctor as an unprivileged user reports the cgroup
//! fallback and its fix; a rootfs whose runner.py was deleted is reported damaged with the
//! rebuild command; `--strict` starts only when every layer is there. The module is in
//! scripts/test-unprivileged's list, so it runs again as an unprivileged user.

use std::process::{Command, Output};

use super::common::{bin, exec, native_available, require, unprivileged};

struct Doctor {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Doctor {
    /// The line of `layer` (the state, the layer name, the detail).
    fn line(&self, layer: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.get(10..).is_some_and(|rest| rest.starts_with(layer)))
            .unwrap_or_else(|| panic!("no {layer} line in\n{}", self.stdout))
    }

    /// The fix printed under `layer`'s line, if any.
    fn fix(&self, layer: &str) -> Option<&str> {
        let mut lines = self
            .stdout
            .lines()
            .skip_while(|l| *l != self.line(layer))
            .skip(1);
        lines
            .next()
            .and_then(|l| l.trim_start().strip_prefix("fix: "))
    }
}

/// `doctor --build`: the rootfs is made when missing, so the real sandbox probe runs.
fn doctor() -> Doctor {
    doctor_with(&["--build"])
}

/// `doctor ARGS`.
fn doctor_with(args: &[&str]) -> Doctor {
    let Output {
        status,
        stdout,
        stderr,
    } = Command::new(bin())
        .arg("doctor")
        .args(args)
        .output()
        .expect("run mcp-code-mode doctor");
    let doctor = Doctor {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    };
    eprintln!(
        "doctor said (exit {}):\n{}{}",
        doctor.code, doctor.stdout, doctor.stderr
    );
    doctor
}

const NAMESPACES: [&str; 7] = ["user", "mount", "pid", "net", "ipc", "uts", "cgroup"];

#[test]
fn doctor_as_root_finds_every_native_layer_and_exits_0() {
    if unprivileged() || !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let doctor = doctor();
    for kind in NAMESPACES {
        assert!(doctor.line(&format!("{kind} namespace")).starts_with("ok "));
    }
    for layer in ["cgroups", "no_new_privs", "landlock", "seccomp", "rootfs"] {
        assert!(
            doctor.line(layer).starts_with("ok "),
            "{}",
            doctor.line(layer)
        );
    }
    let sandbox = doctor.line("sandbox probe");
    assert!(sandbox.starts_with("ok "), "{sandbox}");
    assert!(
        sandbox.contains("uid 65534") && sandbox.contains("no capabilities"),
        "{sandbox}"
    );
    assert!(sandbox.contains("limits: cgroup"), "{sandbox}");
    assert!(doctor.stdout.ends_with("runs with every layer (exit 0)\n"));
    assert_eq!(doctor.code, 0);
}

#[test]
fn doctor_as_an_unprivileged_user_reports_the_native_cgroup_fallback_and_its_fix() {
    if !unprivileged() || !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let doctor = doctor();
    for kind in NAMESPACES {
        assert!(doctor.line(&format!("{kind} namespace")).starts_with("ok "));
    }
    let sandbox = doctor.line("sandbox probe");
    assert!(sandbox.starts_with("ok "), "{sandbox}");
    let cgroups = doctor.line("cgroups");
    if cgroups.starts_with("ok ") {
        // A cgroup was delegated to this user: nothing falls back.
        assert_eq!(doctor.code, 0);
        return;
    }
    assert!(cgroups.starts_with("degraded "), "{cgroups}");
    assert!(cgroups.contains("fall back to rlimits"), "{cgroups}");
    let fix = doctor.fix("cgroups").expect("a fix under the cgroups line");
    assert!(
        fix.contains("cgroup.procs") || fix.contains("--systemd-scope auto"),
        "{fix}"
    );
    assert!(sandbox.contains("limits: rlimits"), "{sandbox}");
    assert_eq!(doctor.code, 1);
}

#[test]
fn doctor_reports_a_rootfs_whose_runner_py_was_deleted_as_damaged_with_the_rebuild_command() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    // The rootfs doctor --build finds (or makes), copied whole into a cache root of our own.
    let built = doctor();
    let line = built.line("rootfs");
    assert!(line.starts_with("ok "), "{line}");
    let dir = line[10..]
        .trim_start_matches("rootfs")
        .trim_start()
        .split(": python")
        .next()
        .expect("the rootfs line names its directory");
    let cache = tempfile::tempdir().expect("a temporary cache root");
    let copied = Command::new("cp")
        .arg("-a")
        .arg(dir)
        .arg(cache.path())
        .status()
        .expect("run cp");
    assert!(copied.success(), "cp -a {dir} failed");
    let name = std::path::Path::new(dir)
        .file_name()
        .expect("a rootfs-KEY name");
    std::fs::remove_file(cache.path().join(name).join("runner.py")).expect("remove runner.py");

    let doctor = doctor_with(&["--rootfs", &cache.path().display().to_string()]);
    let rootfs = doctor.line("rootfs");
    assert!(!rootfs.starts_with("ok "), "{rootfs}");
    assert!(rootfs.contains("damaged"), "{rootfs}");
    assert!(rootfs.contains("/runner.py is missing"), "{rootfs}");
    assert_eq!(
        doctor.fix("rootfs"),
        Some(
            format!(
                "mcp-code-mode doctor --build --rootfs {}",
                cache.path().display()
            )
            .as_str()
        )
    );
    assert!(
        !doctor.stdout.contains("every layer (exit 0)"),
        "{}",
        doctor.stdout
    );
    assert_ne!(doctor.code, 0);
}

#[test]
fn strict_native_runs_start_only_when_doctor_finds_every_layer() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let every_layer = doctor().code == 0;
    let run = exec("print('strict')", &["--strict"]);
    if every_layer {
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(run.printed(), "strict\n");
    } else {
        assert_eq!(run.code, 2, "{}", run.stderr);
        assert!(
            run.stderr
                .contains("refusing to start the native backend with --strict"),
            "{}",
            run.stderr
        );
        assert!(run.result.is_none());
    }
}
