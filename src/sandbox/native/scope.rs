//! A delegated systemd scope for users who have no writable cgroup.
//!
//! On cgroup v2 an unprivileged user can write only the cgroups systemd delegates to them.
//! A login shell usually sits in `session-N.scope`, which belongs to root, so every run
//! would fall back to rlimits. systemd's user manager can make a transient scope with
//! `Delegate=yes` (systemd.resource-control(5)): the scope's cgroup then belongs to the
//! user, with the controllers the user manager holds (memory and pids by default; cpu too
//! where `user@.service` delegates it). `systemd-run --user --scope` (systemd-run(1))
//! registers that scope, moves its own process into it, and execs the command: the same
//! pid, the same stdin/stdout/stderr, the same parent, so an MCP client talking to `serve`
//! over stdio sees no difference.
//!
//! `serve`, `exec` and `doctor` call [`enter`] before anything else. What it does is
//! decided by [`decide`] from [`ScopeFacts`], by the `--systemd-scope` mode:
//! - `off`: never.
//! - `auto` (the default): only on cgroup v2, when no run cgroup can be made here, the
//!   user manager answers and `systemd-run` is on PATH. A trial scope (`systemd-run ...
//!   true`) must succeed first, so a broken manager leaves the rlimit fallback in place
//!   rather than a failed start. A log line says so.
//! - `on`: always (unless already inside one); an error when it cannot be done.
//!
//! The re-executed process carries [`IN_SCOPE_ENV`], so it never re-executes again.

use std::ffi::OsString;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::cgroup::{CgroupHost, CgroupLimits};
use crate::limits::{CPUS, MAX_PIDS, MEMORY_BYTES};

/// Set (to `1`) in the environment of a process re-executed inside a delegated scope.
pub(crate) const IN_SCOPE_ENV: &str = "MCP_CODE_MODE_SYSTEMD_SCOPE";

/// When to run inside a delegated systemd scope (`--systemd-scope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ScopeMode {
    /// Only when no cgroup is writable and systemd's user manager can delegate one.
    Auto,
    /// Always; fail when systemd's user manager cannot.
    On,
    /// Never: without a writable cgroup, runs fall back to rlimits.
    Off,
}

/// What [`decide`] needs to know about this host and process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScopeFacts {
    /// This process was already re-executed inside a delegated scope ([`IN_SCOPE_ENV`]).
    pub in_scope: bool,
    /// The host runs cgroup v2 (`cgroup.controllers` at the top of /sys/fs/cgroup).
    pub cgroup_v2: bool,
    /// A run cgroup with limits can be made below ours; `None` when not probed (the
    /// decision did not need it).
    pub cgroup_writable: Option<bool>,
    /// The socket of systemd's user manager, when it exists
    /// (`$XDG_RUNTIME_DIR/systemd/private`, or the user bus `$XDG_RUNTIME_DIR/bus`).
    pub user_manager: Option<PathBuf>,
    /// `systemd-run`, found on PATH.
    pub systemd_run: Option<PathBuf>,
}

/// What [`enter`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Run here; the reason, for the debug log.
    Stay(String),
    /// Re-execute inside a delegated scope with this `systemd-run`.
    Enter(PathBuf),
    /// `--systemd-scope on` cannot be honoured; why.
    Refuse(String),
}

/// The decision for `mode` given `facts` (pure; see the module docs for the rules).
pub(crate) fn decide(mode: ScopeMode, facts: &ScopeFacts) -> Decision {
    if mode == ScopeMode::Off {
        return Decision::Stay("--systemd-scope off".into());
    }
    if facts.in_scope {
        return Decision::Stay("already inside a delegated systemd scope".into());
    }
    let why_not = if !facts.cgroup_v2 {
        "the host runs cgroup v1, whose hierarchies systemd delegates to no user"
    } else if facts.user_manager.is_none() {
        "no systemd user manager answers (no socket in $XDG_RUNTIME_DIR: log in through a session that starts `systemd --user`, or `sudo loginctl enable-linger $USER` and set XDG_RUNTIME_DIR=/run/user/$UID)"
    } else if let Some(systemd_run) = &facts.systemd_run {
        if mode == ScopeMode::Auto && facts.cgroup_writable != Some(false) {
            return Decision::Stay("a run cgroup can be made here".into());
        }
        return Decision::Enter(systemd_run.clone());
    } else {
        "systemd-run is not on PATH"
    };
    match mode {
        ScopeMode::On => Decision::Refuse(format!(
            "--systemd-scope on: cannot run in a delegated systemd scope: {why_not}"
        )),
        _ => Decision::Stay(why_not.into()),
    }
}

/// `systemd-run` arguments that run `argv` in a new transient scope of the user manager
/// with `Delegate=yes` (systemd-run(1): `--scope` execs the command in-process;
/// `--collect` unloads the unit even when it failed; `--quiet` drops the "Running scope as
/// unit" line).
pub(crate) fn scope_args(argv: &[OsString]) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--user",
        "--scope",
        "--quiet",
        "--collect",
        "--property=Delegate=yes",
        "--description=mcp-code-mode (delegated cgroup for its sandboxes)",
        "--",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    args.extend(argv.iter().cloned());
    args
}

/// The facts of this host and process. The cgroup probe (a run cgroup made with the real
/// limits and removed) runs only when `mode` is `auto` and nothing else rules the scope out.
pub(crate) fn gather(mode: ScopeMode) -> ScopeFacts {
    let mut facts = ScopeFacts {
        in_scope: std::env::var_os(IN_SCOPE_ENV).is_some_and(|v| v == "1"),
        cgroup_v2: Path::new("/sys/fs/cgroup/cgroup.controllers").exists(),
        cgroup_writable: None,
        user_manager: user_manager_socket(std::env::var_os("XDG_RUNTIME_DIR")),
        systemd_run: find_on_path("systemd-run", std::env::var_os("PATH")),
    };
    if mode == ScopeMode::Auto && matches!(decide(ScopeMode::On, &facts), Decision::Enter(_)) {
        facts.cgroup_writable = Some(run_cgroup_possible(&CgroupHost::system()));
    }
    facts
}

/// Whether a run cgroup with the real limits can be made below ours (made and removed).
fn run_cgroup_possible(host: &CgroupHost) -> bool {
    let limits = CgroupLimits {
        memory_bytes: MEMORY_BYTES,
        pids: MAX_PIDS,
        cpus: CPUS,
    };
    // A run name, so a probe left by a killed process is removed like any stray run.
    let name = crate::sandbox::owner::RunName::next().to_string();
    match host.create(&name, &limits) {
        Ok(Some(cgroup)) => {
            let _ = cgroup.remove();
            true
        }
        _ => false,
    }
}

/// The user manager's socket under `runtime_dir`, if one exists.
pub(crate) fn user_manager_socket(runtime_dir: Option<OsString>) -> Option<PathBuf> {
    let dir = PathBuf::from(runtime_dir.filter(|d| !d.is_empty())?);
    ["systemd/private", "bus"]
        .into_iter()
        .map(|name| dir.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket()))
}

/// The first executable `name` in the directories of `path`.
pub(crate) fn find_on_path(name: &str, path: Option<OsString>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(&path?)
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Failing to enter a scope that `--systemd-scope on` asked for.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ScopeError {
    /// The decision refused (the message says why).
    #[error("{0}")]
    Refused(String),
    /// exec(2) of systemd-run failed.
    #[error("failed to run {path}: {error}")]
    Exec {
        path: PathBuf,
        /// Shown in the text, so not also a `source()` (a `{:#}` chain would repeat it).
        error: std::io::Error,
    },
}

/// Re-executes this program (same arguments) inside a delegated systemd scope when `mode`
/// and this host call for it (see the module docs); returns when it stays here.
///
/// # Errors
/// With `on`, when the scope cannot be had ([`ScopeError::Refused`]); in any mode, when
/// exec(2) of `systemd-run` fails ([`ScopeError::Exec`]).
pub(crate) fn enter(mode: ScopeMode) -> Result<(), ScopeError> {
    let facts = gather(mode);
    let systemd_run = match decide(mode, &facts) {
        Decision::Stay(why) => {
            tracing::debug!("not entering a delegated systemd scope: {why}");
            return Ok(());
        }
        Decision::Refuse(why) => return Err(ScopeError::Refused(why)),
        Decision::Enter(systemd_run) => systemd_run,
    };
    let exe = std::env::current_exe().map_err(|error| ScopeError::Exec {
        path: PathBuf::from("/proc/self/exe"),
        error,
    })?;
    if mode == ScopeMode::Auto {
        let trial = Command::new(&systemd_run)
            .args(scope_args(&["true".into()]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        if !trial.is_ok_and(|s| s.success()) {
            tracing::warn!(
                "no writable cgroup, and systemd's user manager did not start a trial scope: runs fall back to rlimits"
            );
            return Ok(());
        }
        tracing::info!(
            "no writable cgroup here: re-running inside a delegated systemd user scope (systemd-run --user --scope -p Delegate=yes) so each run gets cgroup limits (--systemd-scope off to not)"
        );
    }
    let mut argv: Vec<OsString> = vec![exe.into_os_string()];
    argv.extend(std::env::args_os().skip(1));
    let source = Command::new(&systemd_run)
        .args(scope_args(&argv))
        .env(IN_SCOPE_ENV, "1")
        .exec();
    Err(ScopeError::Exec {
        path: systemd_run,
        error: source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::native::cgroup::fake::fake_v2;

    fn ready_v2() -> ScopeFacts {
        ScopeFacts {
            in_scope: false,
            cgroup_v2: true,
            cgroup_writable: Some(false),
            user_manager: Some("/run/user/1000/systemd/private".into()),
            systemd_run: Some("/usr/bin/systemd-run".into()),
        }
    }

    #[test]
    fn auto_enters_a_scope_on_v2_when_no_cgroup_is_writable_and_the_user_manager_answers() {
        assert_eq!(
            decide(ScopeMode::Auto, &ready_v2()),
            Decision::Enter("/usr/bin/systemd-run".into())
        );
    }

    #[test]
    fn auto_stays_when_a_run_cgroup_can_be_made_here() {
        let facts = ScopeFacts {
            cgroup_writable: Some(true),
            ..ready_v2()
        };
        assert!(matches!(decide(ScopeMode::Auto, &facts), Decision::Stay(_)));
    }

    #[test]
    fn auto_stays_on_cgroup_v1_where_systemd_delegates_nothing() {
        let facts = ScopeFacts {
            cgroup_v2: false,
            ..ready_v2()
        };
        let Decision::Stay(why) = decide(ScopeMode::Auto, &facts) else {
            panic!("entered a scope on v1");
        };
        assert!(why.contains("v1"), "{why}");
    }

    #[test]
    fn auto_stays_without_a_user_manager_or_systemd_run() {
        for facts in [
            ScopeFacts {
                user_manager: None,
                ..ready_v2()
            },
            ScopeFacts {
                systemd_run: None,
                ..ready_v2()
            },
        ] {
            assert!(matches!(decide(ScopeMode::Auto, &facts), Decision::Stay(_)));
        }
    }

    #[test]
    fn a_process_already_in_its_scope_never_enters_another() {
        let facts = ScopeFacts {
            in_scope: true,
            ..ready_v2()
        };
        for mode in [ScopeMode::Auto, ScopeMode::On] {
            assert!(matches!(decide(mode, &facts), Decision::Stay(_)));
        }
    }

    #[test]
    fn off_never_enters() {
        assert!(matches!(
            decide(ScopeMode::Off, &ready_v2()),
            Decision::Stay(_)
        ));
    }

    #[test]
    fn on_enters_even_where_a_cgroup_is_writable() {
        let facts = ScopeFacts {
            cgroup_writable: Some(true),
            ..ready_v2()
        };
        assert!(matches!(decide(ScopeMode::On, &facts), Decision::Enter(_)));
    }

    #[test]
    fn on_refuses_with_the_reason_when_no_user_manager_answers() {
        let facts = ScopeFacts {
            user_manager: None,
            ..ready_v2()
        };
        let Decision::Refuse(why) = decide(ScopeMode::On, &facts) else {
            panic!("did not refuse");
        };
        assert!(why.contains("no systemd user manager"), "{why}");
        assert!(why.contains("enable-linger"), "{why}");
    }

    #[test]
    fn the_scope_is_a_delegated_user_scope_that_execs_the_same_command() {
        let argv: Vec<OsString> = ["/usr/local/bin/mcp-code-mode", "serve", "--", "srv", "--x"]
            .into_iter()
            .map(OsString::from)
            .collect();
        let args = scope_args(&argv);
        let dash = args.iter().position(|a| a == "--").expect("a -- separator");
        let options = &args[..dash];
        for wanted in ["--user", "--scope", "--property=Delegate=yes"] {
            assert!(
                options.iter().any(|a| a == wanted),
                "{wanted} missing: {args:?}"
            );
        }
        assert_eq!(&args[dash + 1..], &argv[..]);
    }

    #[test]
    fn the_user_manager_is_found_by_its_socket_only() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(user_manager_socket(Some(dir.path().into())), None);
        assert_eq!(user_manager_socket(None), None);
        std::fs::create_dir(dir.path().join("systemd")).unwrap();
        // A plain file is not a socket.
        std::fs::write(dir.path().join("bus"), "").unwrap();
        assert_eq!(user_manager_socket(Some(dir.path().into())), None);
        let private = dir.path().join("systemd/private");
        let _listener = std::os::unix::net::UnixListener::bind(&private).unwrap();
        assert_eq!(user_manager_socket(Some(dir.path().into())), Some(private));
    }

    #[test]
    fn systemd_run_is_looked_up_on_path_and_must_be_executable() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = Some(OsString::from(format!(
            "/nonexistent:{}",
            dir.path().display()
        )));
        assert_eq!(find_on_path("systemd-run", path.clone()), None);
        let tool = dir.path().join("systemd-run");
        std::fs::write(&tool, "#!/bin/sh\n").unwrap();
        assert_eq!(find_on_path("systemd-run", path.clone()), None);
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(find_on_path("systemd-run", path), Some(tool));
    }

    #[test]
    fn a_delegated_scope_turns_the_rlimit_fallback_into_cgroup_limits() {
        // Before: a login session's scope, which is not ours: no run cgroup, so `auto`
        // re-executes in a scope.
        let (_before_dir, before) =
            fake_v2("/user.slice/user-1000.slice/session-2.scope", false, "");
        let writable = run_cgroup_possible(&before);
        assert!(!writable);
        let facts = ScopeFacts {
            cgroup_writable: Some(writable),
            ..ready_v2()
        };
        assert!(matches!(
            decide(ScopeMode::Auto, &facts),
            Decision::Enter(_)
        ));
        // After: the same process inside the transient scope systemd delegated to the user
        // (memory and pids, the user manager's default): the run cgroup holds them.
        let scope = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope";
        let (after_dir, after) = fake_v2(scope, true, "memory pids");
        let run = after
            .create(
                "mcp-code-mode-1-0",
                &CgroupLimits {
                    memory_bytes: MEMORY_BYTES,
                    pids: MAX_PIDS,
                    cpus: CPUS,
                },
            )
            .unwrap()
            .expect("a run cgroup in the delegated scope");
        assert_eq!(run.held(), ["memory", "pids"]);
        let scope_dir = after_dir
            .path()
            .join("fs")
            .join(scope.trim_start_matches('/'));
        assert_eq!(
            std::fs::read_to_string(scope_dir.join("cgroup.subtree_control")).unwrap(),
            "+memory +pids"
        );
        let facts = ScopeFacts {
            in_scope: true,
            ..facts
        };
        assert!(matches!(decide(ScopeMode::Auto, &facts), Decision::Stay(_)));
    }
}
