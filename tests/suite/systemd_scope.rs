//! `--systemd-scope`: serve and exec re-run themselves inside a delegated systemd user scope
//! (`systemd-run --user --scope -p Delegate=yes`). A fake `systemd-run` on PATH records its
//! arguments and execs the command after `--`, as the real one does in scope mode; a
//! listening socket stands in for the user manager's. Whether a real user manager delegates
//! a cgroup is checked by the CI workflow (scripts/check-doctor), not here.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use super::common::{Exec, ExecOptions, bin, exec_with, native_available, require};

struct FakeSystemd {
    dir: tempfile::TempDir,
    _manager: UnixListener,
}

impl FakeSystemd {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = dir.path().join("bin");
        std::fs::create_dir(&bin_dir).unwrap();
        let script = bin_dir.join("systemd-run");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$*\" >> {calls}\nwhile [ \"$#\" -gt 0 ]; do a=\"$1\"; shift; [ \"$a\" = -- ] && break; done\nexec \"$@\"\n",
                calls = dir.path().join("calls").display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::create_dir_all(dir.path().join("run/systemd")).unwrap();
        let manager = UnixListener::bind(dir.path().join("run/systemd/private")).unwrap();
        FakeSystemd {
            dir,
            _manager: manager,
        }
    }

    fn exec(&self, mode: &str, code: &str) -> Exec {
        let path = format!(
            "{}:{}",
            self.dir.path().join("bin").display(),
            std::env::var("PATH").unwrap_or_default()
        );
        exec_with(
            code,
            ExecOptions {
                args: vec!["--systemd-scope".into(), mode.into()],
                env: vec![
                    ("PATH".into(), path),
                    (
                        "XDG_RUNTIME_DIR".into(),
                        self.dir.path().join("run").display().to_string(),
                    ),
                ],
                ..ExecOptions::default()
            },
        )
    }

    /// One line per call of the fake systemd-run: its arguments.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("calls"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn cgroup_v2_host() -> bool {
    Path::new("/sys/fs/cgroup/cgroup.controllers").exists()
}

#[test]
fn native_exec_with_systemd_scope_on_reruns_itself_once_inside_a_delegated_user_scope() {
    let fake = FakeSystemd::new();
    if !cgroup_v2_host() {
        // cgroup v1: systemd delegates no v1 hierarchy to a user, so `on` is refused with
        // the reason, and systemd-run is never called.
        let r = fake.exec("on", "print(1)");
        assert_eq!(r.code, 2, "{r:?}");
        assert!(r.stderr.contains("cgroup v1"), "{}", r.stderr);
        assert!(fake.calls().is_empty(), "{:?}", fake.calls());
        return;
    }
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let r = fake.exec("on", "print(6 * 7)");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.printed(), "42\n");
    let calls = fake.calls();
    assert_eq!(calls.len(), 1, "re-executed more than once: {calls:?}");
    let exe: PathBuf = bin().canonicalize().unwrap();
    let (options, command) = calls[0].split_once(" -- ").expect("a -- separator");
    for wanted in ["--user", "--scope", "--property=Delegate=yes"] {
        assert!(options.split(' ').any(|o| o == wanted), "{options}");
    }
    assert!(
        command.starts_with(&format!("{} exec ", exe.display())),
        "{command}"
    );
    assert!(command.contains("--systemd-scope on"), "{command}");
}

#[test]
fn native_exec_with_systemd_scope_off_never_calls_systemd_run() {
    if !require(native_available(), "user namespaces are not available here") {
        return;
    }
    let fake = FakeSystemd::new();
    let r = fake.exec("off", "print(1)");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(fake.calls().is_empty(), "{:?}", fake.calls());
}

#[test]
fn systemd_scope_on_that_cannot_be_honoured_fails_with_the_reason_before_starting_anything() {
    let fake = FakeSystemd::new();
    let r = exec_with(
        "print(1)",
        ExecOptions {
            args: vec!["--systemd-scope".into(), "on".into()],
            env: vec![(
                "XDG_RUNTIME_DIR".into(),
                fake.dir.path().join("bin").display().to_string(),
            )],
            ..ExecOptions::default()
        },
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("--systemd-scope on: cannot run in a delegated systemd scope"),
        "{}",
        r.stderr
    );
    assert!(r.result.is_none());
}
