//! The gathering half of doctor: [`gather`] collects [`Facts`] with I/O and no judgement:
//! kernel probes in forked children from [`launcher::probe`], a probe cgroup created and
//! removed through [`CgroupHost`] (placed by [`CgroupHost::placement`], as runs are), the
//! systemd scope decision, AppArmor's settings, the rootfs manifest, a real sandbox started
//! by the native backend running a tiny Python probe, and the Docker engine.

use std::path::{Path, PathBuf};
use std::time::Duration;

use launcher::probe::{self, Namespace, Probe};
use tokio::io::AsyncReadExt;

use crate::limits::{CPUS, MAX_PIDS, MEMORY_BYTES};
use crate::rootfs::{self, PYTHON_FLAGS, PYTHON_IN_ROOTFS, Rootfs, Source};
use crate::sandbox::Backend;
use crate::sandbox::docker;
use crate::sandbox::native::NativeBackend;
use crate::sandbox::native::cgroup::{CgroupHost, CgroupLimits, Placement};
use crate::sandbox::native::scope::{self, ScopeMode};
use crate::sandbox::owner::RunName;

/// A probe's answer, or why the probe itself could not run.
pub(crate) type ProbeResult = Result<Probe, String>;

/// Whether [`gather`] checks the Docker backend too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DockerCheck {
    /// No Docker checks (`--strict`: only the native backend counts).
    Skip,
    /// Ask the engine for its version and look for the rootfs image.
    Look,
    /// As `Look`, and import the rootfs image when the engine answers and it is missing
    /// (`doctor --build`).
    Import,
}

/// Everything doctor found out, before any judgement.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Facts {
    /// Our effective uid.
    pub euid: u32,
    /// The settings that explain a refused user namespace.
    pub userns: UsernsSettings,
    /// Each namespace kind, in [`Namespace::ALL`] order.
    pub namespaces: Vec<(Namespace, ProbeResult)>,
    /// cgroups.
    pub cgroups: CgroupFacts,
    /// Landlock ABI, or the errno of the version query.
    pub landlock_abi: Result<u32, i32>,
    /// no_new_privs in a probe child.
    pub no_new_privs: ProbeResult,
    /// A seccomp filter in a probe child.
    pub seccomp: ProbeResult,
    /// The rootfs.
    pub rootfs: RootfsFacts,
    /// The real sandbox probe; `None` when it did not run (no rootfs).
    pub sandbox: Option<Result<SandboxRun, String>>,
    /// The Docker engine and image; `None` when not checked.
    pub docker: Option<DockerFacts>,
}

/// Settings that decide whether this user may create user namespaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UsernsSettings {
    /// `kernel.unprivileged_userns_clone` (Debian's and Ubuntu's switch), if the kernel has it.
    pub unprivileged_userns_clone: Option<u64>,
    /// `user.max_user_namespaces`.
    pub max_user_namespaces: Option<u64>,
    /// `kernel.apparmor_restrict_unprivileged_userns` (Ubuntu ≥ 23.10), if present.
    pub apparmor_restrict_unprivileged_userns: Option<u64>,
    /// Why we may be inside a container, if something says so.
    pub container: Option<String>,
    /// This process's AppArmor label (`/proc/self/attr/apparmor/current`, else
    /// `/proc/self/attr/current`), e.g. `unconfined` or `mcp-code-mode (unconfined)`.
    pub apparmor_label: Option<String>,
    /// Whether the [`APPARMOR_PROFILE`] profile is loaded (a line of
    /// `/sys/kernel/security/apparmor/profiles`); `None` when that file cannot be read.
    pub apparmor_profile_loaded: Option<bool>,
    /// This program's path (`/proc/self/exe`).
    pub exe: Option<PathBuf>,
}

/// Where `scripts/install` puts the binary: the one path the AppArmor profile
/// `deploy/apparmor/mcp-code-mode` attaches to.
pub(crate) const INSTALLED_BINARY: &str = "/usr/local/bin/mcp-code-mode";
/// The name of that AppArmor profile.
pub(crate) const APPARMOR_PROFILE: &str = "mcp-code-mode";

/// Which cgroup hierarchy the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CgroupVersion {
    /// The v1 controllers (memory, pids, cpu), each its own hierarchy.
    V1,
    /// The unified hierarchy.
    V2,
    /// None that we could read.
    Unknown,
}

/// What the cgroup probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CgroupFacts {
    /// The hierarchy.
    pub version: CgroupVersion,
    /// Our own cgroup(s), as /proc/self/cgroup names them.
    pub ours: String,
    /// What a probe cgroup (created and removed) could limit: empty when none could be
    /// created; the error when creating or removing it failed.
    pub probe: Result<Vec<String>, String>,
    /// Whether systemd manages this host (`/run/systemd/system` exists).
    pub systemd: bool,
    /// `None` when this process runs in the delegated systemd scope it re-executed itself
    /// into (`--systemd-scope`); else why it does not (the scope decision's reason).
    pub scope: Option<String>,
}

/// The rootfs, as found (or built with `--build`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootfsFacts {
    /// Built, with its manifest.
    Present(Rootfs),
    /// Built, but its runner files are not this binary's (see [`rootfs::runner_damage`]):
    /// every run would fail. `why` names the first bad file.
    Damaged { dir: PathBuf, why: String },
    /// Not built yet; it would live in `dir`.
    Missing { dir: PathBuf },
    /// No directory could be worked out, or the build failed.
    Unknown(String),
}

/// How the real sandbox probe ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SandboxRun {
    /// Exit status (128 + signal); `None` when unknown.
    pub status: Option<i32>,
    /// What the probe printed: `key=value` lines.
    pub output: String,
    /// The launcher's and Python's stderr.
    pub stderr: String,
    /// The launcher's report that it failed before Python ran.
    pub start_failure: Option<crate::sandbox::SandboxError>,
    /// Which limits held, as the native backend reports them.
    pub limits: crate::sandbox::HeldLimits,
}

/// The Docker engine, as `docker version` and `docker image inspect` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DockerFacts {
    /// No `docker` client on PATH.
    NotInstalled,
    /// `docker version` failed: why.
    NotAnswering(String),
    /// The engine answers with this version; the rootfs image tag and whether it exists
    /// (`None` without a rootfs).
    Answering {
        version: String,
        image: Option<(String, bool)>,
    },
}

/// The Python the sandbox probe runs: what the code inside sees, as `key=value` lines.
pub(crate) const SANDBOX_PROBE_PY: &str = r#"import errno, os, socket
st = dict(l.split(':', 1) for l in open('/proc/self/status') if ':' in l)
def attempt(f):
    try:
        f()
        return 'allowed'
    except OSError as e:
        return 'refused:' + errno.errorcode.get(e.errno, str(e.errno))
print('uid=%d' % os.getuid())
print('gid=%d' % os.getgid())
print('pid=%d' % os.getpid())
print('hostname=' + os.uname().nodename)
for k in ('CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp'):
    print(k + '=' + st.get(k, '?').strip())
print('net=' + attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()))
print('root_write=' + attempt(lambda: open('/doctor-probe', 'w').close()))
print('tmp_write=' + attempt(lambda: open('/tmp/doctor-probe', 'w').close()))
"#;

/// The rootfs that `serve` would use with this cache root; built first when `build`.
pub(crate) async fn find_rootfs(cache_root: Option<PathBuf>, build: bool) -> RootfsFacts {
    let options = rootfs::Options {
        source: Source::Host { python: None },
        cache_root,
        quiet: false,
    };
    let found = tokio::task::spawn_blocking(move || {
        if build {
            return match rootfs::ensure(&options) {
                Ok(r) => RootfsFacts::Present(r),
                Err(e) => RootfsFacts::Unknown(format!("failed to build the rootfs: {e}")),
            };
        }
        match rootfs::rootfs_dir(&options) {
            Ok(dir) => match Rootfs::open(&dir) {
                None => RootfsFacts::Missing { dir },
                Some(r) => match rootfs::runner_damage(&dir) {
                    None => RootfsFacts::Present(r),
                    Some(why) => RootfsFacts::Damaged { dir, why },
                },
            },
            Err(e) => RootfsFacts::Unknown(e.to_string()),
        }
    })
    .await;
    found.unwrap_or_else(|e| RootfsFacts::Unknown(format!("failed to look for the rootfs: {e}")))
}

/// Collects the facts; `docker` says whether to check the Docker engine and image too.
pub(crate) async fn gather(rootfs: RootfsFacts, docker: DockerCheck) -> Facts {
    let kernel = tokio::task::spawn_blocking(|| {
        let namespaces: Vec<(Namespace, ProbeResult)> = Namespace::ALL
            .into_iter()
            .map(|kind| (kind, probe::namespace(kind).map_err(|e| e.to_string())))
            .collect();
        (
            namespaces,
            probe::no_new_privs().map_err(|e| e.to_string()),
            probe::seccomp_filter().map_err(|e| e.to_string()),
            probe::landlock_abi(),
            cgroup_facts(),
            userns_settings(),
        )
    })
    .await;
    let (namespaces, no_new_privs, seccomp, landlock_abi, cgroups, userns) = match kernel {
        Ok(found) => found,
        Err(e) => {
            let why = format!("the probe thread failed: {e}");
            (
                Namespace::ALL
                    .into_iter()
                    .map(|k| (k, Err(why.clone())))
                    .collect(),
                Err(why.clone()),
                Err(why.clone()),
                Err(0),
                CgroupFacts {
                    version: CgroupVersion::Unknown,
                    ours: "?".into(),
                    probe: Err(why),
                    systemd: false,
                    scope: Some("the probes could not run".into()),
                },
                UsernsSettings::default(),
            )
        }
    };
    let sandbox = match &rootfs {
        RootfsFacts::Present(r) => Some(sandbox_probe(r).await),
        _ => None,
    };
    let docker = match docker {
        DockerCheck::Skip => None,
        DockerCheck::Look | DockerCheck::Import => {
            let present = match &rootfs {
                RootfsFacts::Present(r) => Some(r.clone()),
                _ => None,
            };
            let import = docker == DockerCheck::Import;
            Some(
                tokio::task::spawn_blocking(move || docker_facts(present.as_ref(), import))
                    .await
                    .unwrap_or_else(|e| DockerFacts::NotAnswering(e.to_string())),
            )
        }
    };
    Facts {
        euid: effective_uid(),
        userns,
        namespaces,
        cgroups,
        landlock_abi,
        no_new_privs,
        seccomp,
        rootfs,
        sandbox,
        docker,
    }
}

/// Our effective uid, from /proc/self/status (the second field of `Uid:`).
fn effective_uid() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

fn sysctl(name: &str) -> Option<u64> {
    let path = Path::new("/proc/sys").join(name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

fn userns_settings() -> UsernsSettings {
    UsernsSettings {
        unprivileged_userns_clone: sysctl("kernel.unprivileged_userns_clone"),
        max_user_namespaces: sysctl("user.max_user_namespaces"),
        apparmor_restrict_unprivileged_userns: sysctl(
            "kernel.apparmor_restrict_unprivileged_userns",
        ),
        container: container_hint(),
        apparmor_label: [
            "/proc/self/attr/apparmor/current",
            "/proc/self/attr/current",
        ]
        .into_iter()
        .find_map(|p| std::fs::read_to_string(p).ok())
        .map(|l| l.trim_end_matches(['\n', '\0']).to_owned())
        .filter(|l| !l.is_empty()),
        apparmor_profile_loaded: std::fs::read_to_string("/sys/kernel/security/apparmor/profiles")
            .ok()
            .map(|text| {
                text.lines()
                    .any(|l| l.split(" (").next() == Some(APPARMOR_PROFILE))
            }),
        exe: std::env::current_exe().ok(),
    }
}

/// Why we may be in a container: a user namespace already (uid_map is not the identity),
/// a runtime's marker file, or a runtime in pid 1's cgroup path. Only a hint.
fn container_hint() -> Option<String> {
    if let Ok(map) = std::fs::read_to_string("/proc/self/uid_map") {
        let fields: Vec<&str> = map.split_whitespace().collect();
        if fields != ["0", "0", "4294967295"] {
            return Some(format!(
                "already in a user namespace: uid_map {}",
                fields.join(" ")
            ));
        }
    }
    for (marker, runtime) in [("/run/.containerenv", "podman"), ("/.dockerenv", "docker")] {
        if Path::new(marker).exists() {
            return Some(format!("{marker} exists: {runtime}"));
        }
    }
    let pid1 = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    ["docker", "kubepods", "lxc", "containerd"]
        .into_iter()
        .find(|r| pid1.contains(r))
        .map(|r| format!("pid 1's cgroup names {r}"))
}

fn cgroup_facts() -> CgroupFacts {
    let host = CgroupHost::system();
    let (version, ours) = match host.placement() {
        Ok(placement @ Placement::V2 { .. }) => (CgroupVersion::V2, placement.ours()),
        Ok(Placement::V1 { hierarchies }) if !hierarchies.is_empty() => {
            (CgroupVersion::V1, Placement::V1 { hierarchies }.ours())
        }
        Ok(placement) => (CgroupVersion::Unknown, placement.ours()),
        Err(_) => (CgroupVersion::Unknown, "?".into()),
    };
    let limits = CgroupLimits {
        memory_bytes: MEMORY_BYTES,
        pids: MAX_PIDS,
        cpus: CPUS,
    };
    // A run name, so a probe left by a killed doctor is removed like any stray run.
    let name = RunName::next().to_string();
    let probe = match host.create(&name, &limits) {
        Ok(Some(run)) => {
            let held: Vec<String> = run.held().iter().map(|h| h.to_string()).collect();
            run.remove()
                .map(|()| held)
                .map_err(|e| format!("a probe cgroup was created but not removed: {e}"))
        }
        Ok(None) => Ok(Vec::new()),
        Err(e) => Err(e.to_string()),
    };
    let scope = scope_reason(matches!(&probe, Ok(held) if !held.is_empty()));
    CgroupFacts {
        version,
        ours,
        probe,
        systemd: Path::new("/run/systemd/system").exists(),
        scope,
    }
}

/// Why this process does not run in a delegated systemd scope (`None`: it does), given
/// whether doctor's own probe could make a run cgroup.
fn scope_reason(cgroup_writable: bool) -> Option<String> {
    if std::env::var_os(scope::IN_SCOPE_ENV).is_some_and(|v| v == "1") {
        return None;
    }
    let mut facts = scope::gather(ScopeMode::Off);
    facts.cgroup_writable = Some(cgroup_writable);
    Some(match scope::decide(ScopeMode::Auto, &facts) {
        scope::Decision::Stay(why) | scope::Decision::Refuse(why) => why,
        scope::Decision::Enter(_) => "no delegated scope was used (--systemd-scope off, or systemd's user manager did not start a trial scope)".into(),
    })
}

/// How long the sandbox probe may take.
const SANDBOX_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// Starts a real sandbox with the native backend (this binary as the launcher, a run
/// cgroup when one can be had) running [`SANDBOX_PROBE_PY`], and collects what it printed.
async fn sandbox_probe(rootfs: &Rootfs) -> Result<SandboxRun, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("failed to find this program's path: {e}"))?;
    let mut argv = vec![PYTHON_IN_ROOTFS.to_string()];
    argv.extend(PYTHON_FLAGS.iter().map(|f| f.to_string()));
    argv.extend(["-c".to_string(), SANDBOX_PROBE_PY.to_string()]);
    let backend = NativeBackend::new(exe, rootfs.dir.clone(), argv, 10);
    let sandbox = backend.spawn().await.map_err(|e| e.to_string())?;
    let (stdin, mut stdout, mut control) = (sandbox.stdin, sandbox.stdout, sandbox.control);
    drop(stdin);
    let mut output = Vec::new();
    let read = tokio::time::timeout(
        SANDBOX_PROBE_TIMEOUT,
        (&mut stdout).take(64 * 1024).read_to_end(&mut output),
    )
    .await;
    if read.is_err() {
        control.kill().await;
    }
    let ending = control.wait().await;
    Ok(SandboxRun {
        status: ending.status,
        output: String::from_utf8_lossy(&output).into_owned(),
        stderr: ending.stderr,
        start_failure: ending.start_failure,
        limits: control.limits(),
    })
}

/// The line of a failed docker client's stderr that says why, without the client's
/// template complaints or the HTTP request it tried.
pub(super) fn docker_error(stderr: &str) -> String {
    let line = stderr
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("template:"))
        .unwrap_or("no message");
    match line.find(": Get \"") {
        Some(cut) => line[..cut].to_owned(),
        None => line.to_owned(),
    }
}

/// `docker version`, then the rootfs image (imported first when `build` and it is missing).
fn docker_facts(rootfs: Option<&Rootfs>, build: bool) -> DockerFacts {
    let output = std::process::Command::new("docker")
        .env_clear()
        .envs(docker::client_env(std::env::vars()))
        .args(["version", "--format", "{{.Server.Version}}"])
        .stdin(std::process::Stdio::null())
        .output();
    let version = match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return DockerFacts::NotInstalled,
        Err(e) => return DockerFacts::NotAnswering(e.to_string()),
        Ok(out) if !out.status.success() => {
            return DockerFacts::NotAnswering(docker_error(&String::from_utf8_lossy(&out.stderr)));
        }
        Ok(out) => String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    };
    let image = rootfs.map(|r| {
        let tag = docker::image_tag(r);
        let exists = std::process::Command::new("docker")
            .env_clear()
            .envs(docker::client_env(std::env::vars()))
            .args(["image", "inspect", "--format", "{{.Id}}", &tag])
            .stdin(std::process::Stdio::null())
            .output()
            .is_ok_and(|o| o.status.success());
        let exists = exists || (build && docker::build_image(r).is_ok());
        (tag, exists)
    });
    DockerFacts::Answering { version, image }
}
