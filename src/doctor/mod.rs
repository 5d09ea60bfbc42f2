//! `mcp-code-mode doctor`: which sandbox layers this host gives us, and how to get the rest.
//!
//! Three parts, as the rest of the crate is cut: [`gather`] collects [`Facts`] (kernel probes
//! in forked children from [`launcher::probe`], a probe cgroup created and removed through
//! [`CgroupHost`], the rootfs manifest, a real sandbox started by the native backend running
//! a tiny Python probe, the Docker engine); [`report`] maps facts to a [`Report`] and is pure,
//! so every diagnosis is unit-tested without the kernel; [`Report::exit_code`] says what the
//! native backend can do: 0 every layer, 1 degraded (it runs, with less), 2 it cannot run.
//!
//! `serve --strict` and `exec --strict` use [`require_every_layer`]. No unsafe here.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use launcher::probe::{self, Namespace, Probe, Step};
use tokio::io::AsyncReadExt;

use crate::limits::{CPUS, MAX_PIDS, MEMORY_BYTES};
use crate::rootfs::{self, PYTHON_FLAGS, PYTHON_IN_ROOTFS, Rootfs, Source};
use crate::sandbox::Backend;
use crate::sandbox::docker;
use crate::sandbox::native::NativeBackend;
use crate::sandbox::native::cgroup::{CgroupHost, CgroupLimits};
use crate::sandbox::native::scope::{self, ScopeMode};

/// One layer of the sandbox (or of the Docker backend) that doctor checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// A namespace kind; [`Namespace::User`] carries the diagnosis of why none can be had.
    Namespace(Namespace),
    /// A run cgroup (memory, pids, cpu), else the rlimit fallback.
    Cgroups,
    /// Landlock filesystem, TCP and IPC rules.
    Landlock,
    /// seccomp filter mode (the syscall allowlist).
    Seccomp,
    /// PR_SET_NO_NEW_PRIVS.
    NoNewPrivs,
    /// The read-only Python rootfs.
    Rootfs,
    /// A real sandbox: the launcher on the rootfs, running a Python probe.
    Sandbox,
    /// The Docker engine (the Docker backend only).
    DockerEngine,
    /// The rootfs imported as a Docker image (the Docker backend only).
    DockerImage,
}

impl Layer {
    /// The name in doctor's output.
    pub fn name(self) -> &'static str {
        match self {
            Layer::Namespace(Namespace::User) => "user namespace",
            Layer::Namespace(Namespace::Mount) => "mount namespace",
            Layer::Namespace(Namespace::Pid) => "pid namespace",
            Layer::Namespace(Namespace::Net) => "net namespace",
            Layer::Namespace(Namespace::Ipc) => "ipc namespace",
            Layer::Namespace(Namespace::Uts) => "uts namespace",
            Layer::Namespace(Namespace::Cgroup) => "cgroup namespace",
            Layer::Cgroups => "cgroups",
            Layer::Landlock => "landlock",
            Layer::Seccomp => "seccomp",
            Layer::NoNewPrivs => "no_new_privs",
            Layer::Rootfs => "rootfs",
            Layer::Sandbox => "sandbox probe",
            Layer::DockerEngine => "docker engine",
            Layer::DockerImage => "docker image",
        }
    }

    /// Whether the native backend depends on this layer (Docker's do not count).
    pub fn native(self) -> bool {
        !matches!(self, Layer::DockerEngine | Layer::DockerImage)
    }

    /// Whether the native backend cannot start without it. The others have a fallback
    /// (rlimits for cgroups), are best effort (Landlock), or are made on first use (rootfs).
    pub fn required(self) -> bool {
        matches!(
            self,
            Layer::Namespace(_) | Layer::Seccomp | Layer::NoNewPrivs | Layer::Sandbox
        )
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a layer's check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The layer works as the sandbox uses it.
    Ok,
    /// It works in part, or a weaker fallback takes its place.
    Degraded,
    /// It is not there.
    Missing,
}

impl State {
    fn name(self) -> &'static str {
        match self {
            State::Ok => "ok",
            State::Degraded => "degraded",
            State::Missing => "missing",
        }
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// Which layer.
    pub layer: Layer,
    /// What was found.
    pub state: State,
    /// What exactly, in a few words.
    pub detail: String,
    /// The command or setting that fixes it, when it is not ok and something can be done.
    pub fix: Option<String>,
}

impl Check {
    fn new(layer: Layer, state: State, detail: impl Into<String>) -> Self {
        Check {
            layer,
            state,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    fn fix_opt(mut self, fix: Option<String>) -> Self {
        self.fix = fix;
        self
    }

    /// What this line means for the exit code: 0 ok (or not a native layer), 1 degraded,
    /// 2 the native backend cannot run.
    pub fn severity(&self) -> u8 {
        match (self.layer.native(), self.state) {
            (false, _) | (true, State::Ok) => 0,
            (true, State::Missing) if self.layer.required() => 2,
            (true, _) => 1,
        }
    }
}

/// Width of the state and layer columns.
const STATE_WIDTH: usize = 9;
const LAYER_WIDTH: usize = 17;

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:<STATE_WIDTH$} {:<LAYER_WIDTH$} {}",
            self.state.name(),
            self.layer.name(),
            self.detail
        )?;
        if let Some(fix) = &self.fix {
            write!(
                f,
                "\n{:<width$}fix: {fix}",
                "",
                width = STATE_WIDTH + LAYER_WIDTH + 2
            )?;
        }
        Ok(())
    }
}

/// Every line doctor prints, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// One check per layer.
    pub lines: Vec<Check>,
}

impl Report {
    /// 0 when the native backend runs with every layer, 1 when it runs degraded, 2 when it
    /// cannot run. The Docker lines do not count.
    pub fn exit_code(&self) -> u8 {
        self.lines.iter().map(Check::severity).max().unwrap_or(0)
    }

    /// The native layers that are not ok.
    pub fn not_ok(&self) -> Vec<&Check> {
        self.lines
            .iter()
            .filter(|c| c.layer.native() && c.state != State::Ok)
            .collect()
    }

    /// The lines and a verdict, as doctor prints them.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for line in &self.lines {
            out.push_str(&line.to_string());
            out.push('\n');
        }
        let verdict = match self.exit_code() {
            0 => "the native backend runs with every layer",
            1 => "the native backend runs, degraded (see the lines above)",
            _ => "the native backend cannot run here (see the lines above)",
        };
        out.push_str(&format!("{verdict} (exit {})\n", self.exit_code()));
        out
    }
}

/// A probe's answer, or why the probe itself could not run.
pub type ProbeResult = Result<Probe, String>;

/// Everything doctor found out, before any judgement.
#[derive(Debug, Clone, PartialEq)]
pub struct Facts {
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
pub struct UsernsSettings {
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
pub const INSTALLED_BINARY: &str = "/usr/local/bin/mcp-code-mode";
/// The name of that AppArmor profile.
pub const APPARMOR_PROFILE: &str = "mcp-code-mode";

/// Which cgroup hierarchy the host runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupVersion {
    /// The v1 controllers (memory, pids, cpu), each its own hierarchy.
    V1,
    /// The unified hierarchy.
    V2,
    /// None that we could read.
    Unknown,
}

/// What the cgroup probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupFacts {
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
pub enum RootfsFacts {
    /// Built, with its manifest.
    Present(Rootfs),
    /// Not built yet; it would live in `dir`.
    Missing { dir: PathBuf },
    /// No directory could be worked out, or the build failed.
    Unknown(String),
}

/// How the real sandbox probe ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxRun {
    /// Exit status (128 + signal); `None` when unknown.
    pub status: Option<i32>,
    /// What the probe printed: `key=value` lines.
    pub output: String,
    /// The launcher's and Python's stderr.
    pub stderr: String,
    /// Which limits held, as the native backend reports them.
    pub limits: String,
}

/// The Docker engine, as `docker version` and `docker image inspect` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DockerFacts {
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
pub const SANDBOX_PROBE_PY: &str = r#"import errno, os, socket
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

/// What the sandbox probe must print, and what each value means.
const SANDBOX_EXPECTED: [(&str, &str, &str); 8] = [
    ("uid", "65534", "uid 65534"),
    ("gid", "65534", "gid 65534"),
    ("pid", "1", "pid 1"),
    ("hostname", "sandbox", "hostname sandbox"),
    ("CapEff", "0000000000000000", "no capabilities"),
    ("CapBnd", "0000000000000000", "empty bounding set"),
    ("NoNewPrivs", "1", "no_new_privs"),
    ("Seccomp", "2", "seccomp filter"),
];

/// The fix for a refused user namespace, by its most likely cause (pure).
fn userns_cause(facts: &Facts, errno: i32) -> (String, Option<String>) {
    let s = &facts.userns;
    let unprivileged = facts.euid != 0;
    if unprivileged && s.unprivileged_userns_clone == Some(0) {
        return (
            "kernel.unprivileged_userns_clone is 0: the kernel refuses user namespaces to users other than root".into(),
            Some(persisted_sysctl("kernel.unprivileged_userns_clone", "1")),
        );
    }
    if s.max_user_namespaces == Some(0) || errno == libc_errno::ENOSPC {
        return (
            format!(
                "user.max_user_namespaces is {}: no user namespace may be created",
                s.max_user_namespaces
                    .map_or_else(|| "exhausted".into(), |n| n.to_string())
            ),
            Some(persisted_sysctl("user.max_user_namespaces", "15000")),
        );
    }
    if unprivileged && s.apparmor_restrict_unprivileged_userns == Some(1) {
        return apparmor_cause(s);
    }
    if let Some(container) = &s.container {
        return (
            format!(
                "this looks like a container ({container}), whose seccomp or AppArmor profile refuses namespaces"
            ),
            Some(CONTAINER_FIX.into()),
        );
    }
    (
        "no known setting explains it".into(),
        Some("look for an LSM denial (sudo dmesg | grep -i -e apparmor -e selinux) and check that the kernel has CONFIG_USER_NS=y".into()),
    )
}

/// Ubuntu's restriction: the profile first (it keeps the restriction for every other
/// program), the sysctl last (it lifts it for all of them). Which profile advice fits
/// depends on whether ours is loaded and whether this process runs under it.
fn apparmor_cause(s: &UsernsSettings) -> (String, Option<String>) {
    let mut cause = "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1): they are created without capabilities".to_string();
    let under_ours = s
        .apparmor_label
        .as_deref()
        .is_some_and(|l| l.split_whitespace().next() == Some(APPARMOR_PROFILE));
    let here = s
        .exe
        .as_ref()
        .map_or_else(|| "this binary".into(), |p| p.display().to_string());
    let first = if under_ours {
        cause.push_str(&format!(
            "; this process runs under the {APPARMOR_PROFILE} profile, so the loaded version lacks the userns rule"
        ));
        format!(
            "load the profile as shipped: sudo apparmor_parser -r /etc/apparmor.d/{APPARMOR_PROFILE} after copying deploy/apparmor/{APPARMOR_PROFILE} there (scripts/install does both)"
        )
    } else if s.apparmor_profile_loaded == Some(true) && here != INSTALLED_BINARY {
        cause.push_str(&format!(
            "; the {APPARMOR_PROFILE} profile is loaded, but it covers {INSTALLED_BINARY} only, and this is {here}"
        ));
        format!("run {INSTALLED_BINARY} (scripts/install puts this build there)")
    } else {
        format!(
            "install the AppArmor profile that lets this one program create user namespaces and keeps the restriction for every other: scripts/install in the source checkout (it puts the binary at {INSTALLED_BINARY} and loads deploy/apparmor/{APPARMOR_PROFILE}), then run {INSTALLED_BINARY}"
        )
    };
    (
        cause,
        Some(format!(
            "{first}; last resort, since it lifts the restriction for every program: {}",
            persisted_sysctl("kernel.apparmor_restrict_unprivileged_userns", "0")
        )),
    )
}

const CONTAINER_FIX: &str = "run mcp-code-mode on the host, or start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined so it may create namespaces (or use --backend docker from the host)";

fn persisted_sysctl(key: &str, value: &str) -> String {
    format!(
        "sudo sysctl -w {key}={value} (to keep it across reboots: echo {key}={value} | sudo tee /etc/sysctl.d/60-mcp-code-mode.conf)"
    )
}

/// errno values used by the pure mapping (Linux, every architecture this runs on).
mod libc_errno {
    #[cfg(test)]
    pub const EPERM: i32 = 1;
    pub const EINVAL: i32 = 22;
    pub const ENOSPC: i32 = 28;
    pub const ENOSYS: i32 = 38;
    pub const EOPNOTSUPP: i32 = 95;
}

fn errno_text(errno: i32) -> String {
    if errno == 0 {
        "it answered an unexpected value".into()
    } else {
        std::io::Error::from_raw_os_error(errno).to_string()
    }
}

fn who(euid: u32) -> String {
    if euid == 0 {
        "root".into()
    } else {
        format!("uid {euid}")
    }
}

fn steps_text(steps: &[Step]) -> String {
    steps
        .iter()
        .map(Step::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

fn user_namespace_check(facts: &Facts, probe: &ProbeResult) -> Check {
    let layer = Layer::Namespace(Namespace::User);
    match probe {
        Ok(Probe::Works) => {
            let max = facts
                .userns
                .max_user_namespaces
                .map(|n| format!("; user.max_user_namespaces = {n}"))
                .unwrap_or_default();
            Check::new(
                layer,
                State::Ok,
                format!(
                    "{} gets one with capabilities inside ({}){max}",
                    who(facts.euid),
                    steps_text(Namespace::User.steps())
                ),
            )
        }
        Ok(Probe::Refused { step, errno }) => {
            let (cause, fix) = userns_cause(facts, *errno);
            Check::new(
                layer,
                State::Missing,
                format!(
                    "{step} failed for {}: {}; {cause}",
                    who(facts.euid),
                    errno_text(*errno)
                ),
            )
            .fix_opt(fix)
        }
        Err(e) => Check::new(
            layer,
            State::Missing,
            format!("the probe could not run: {e}"),
        ),
    }
}

fn kernel_config(kind: Namespace) -> &'static str {
    match kind {
        Namespace::User => "CONFIG_USER_NS",
        Namespace::Mount => "CONFIG_NAMESPACES",
        Namespace::Pid => "CONFIG_PID_NS",
        Namespace::Net => "CONFIG_NET_NS",
        Namespace::Ipc => "CONFIG_IPC_NS",
        Namespace::Uts => "CONFIG_UTS_NS",
        Namespace::Cgroup => "CONFIG_CGROUPS",
    }
}

fn namespace_check(facts: &Facts, kind: Namespace, probe: &ProbeResult, userns_ok: bool) -> Check {
    let layer = Layer::Namespace(kind);
    if !userns_ok {
        return Check::new(
            layer,
            State::Missing,
            "needs a user namespace (see the user namespace line)",
        );
    }
    match probe {
        Ok(Probe::Works) => Check::new(
            layer,
            State::Ok,
            format!("{}: ok", steps_text(kind.steps())),
        ),
        Ok(Probe::Refused { step, errno }) => {
            let fix = match *errno {
                libc_errno::ENOSPC => Some(persisted_sysctl(kind.max_sysctl(), "15000")),
                libc_errno::EINVAL => {
                    Some(format!("a kernel built with {}=y", kernel_config(kind)))
                }
                _ if facts.userns.container.is_some() => Some(CONTAINER_FIX.into()),
                _ => None,
            };
            Check::new(
                layer,
                State::Missing,
                format!("{step} failed: {}", errno_text(*errno)),
            )
            .fix_opt(fix)
        }
        Err(e) => Check::new(
            layer,
            State::Missing,
            format!("the probe could not run: {e}"),
        ),
    }
}

fn cgroup_version_text(version: CgroupVersion) -> &'static str {
    match version {
        CgroupVersion::V1 => "cgroup v1",
        CgroupVersion::V2 => "cgroup v2",
        CgroupVersion::Unknown => "no readable cgroup hierarchy",
    }
}

/// How an unprivileged user gets a cgroup of their own (pure: by version, systemd, and
/// why no delegated systemd scope was used).
fn delegated_cgroup_fix(version: CgroupVersion, systemd: bool, scope: Option<&str>) -> String {
    match (version, systemd) {
        (CgroupVersion::V2, true) => format!(
            "serve, exec and doctor move into a delegated systemd user scope by themselves (--systemd-scope auto) when systemd's user manager answers; {}; or run as root",
            scope.map_or_else(
                || "this one is in such a scope, and it still gives no cgroup".into(),
                |why| format!("here {why}")
            )
        ),
        (CgroupVersion::V2, false) => "as root, make a cgroup for this user and move the shell into it: sudo mkdir /sys/fs/cgroup/mcp-code-mode-$USER && sudo chown -R $USER /sys/fs/cgroup/mcp-code-mode-$USER && echo $$ | sudo tee /sys/fs/cgroup/mcp-code-mode-$USER/cgroup.procs (or run as root)".into(),
        _ => "v1 hierarchies belong to root and systemd delegates none of them: run as root, or, as root, make one cgroup per controller for this user and move the shell into them: for c in memory pids cpu; do sudo mkdir -p /sys/fs/cgroup/$c/mcp-code-mode-$USER && sudo chown -R $USER /sys/fs/cgroup/$c/mcp-code-mode-$USER && echo $$ | sudo tee /sys/fs/cgroup/$c/mcp-code-mode-$USER/cgroup.procs; done (or boot with cgroup v2, where serve and exec use a delegated systemd scope by themselves)".into(),
    }
}

fn cgroup_check(facts: &Facts) -> Check {
    let c = &facts.cgroups;
    let scope = if c.scope.is_none() {
        ", in the delegated systemd scope it runs in"
    } else {
        ""
    };
    let head = format!("{} ({}{scope})", cgroup_version_text(c.version), c.ours);
    const FALLBACK: &str = "runs fall back to rlimits (per process RLIMIT_DATA 256 MiB and RLIMIT_AS 1 GiB, RLIMIT_NPROC 64 per user namespace, RLIMIT_CPU)";
    match &c.probe {
        Ok(held)
            if ["memory", "pids", "cpu"]
                .iter()
                .all(|w| held.iter().any(|h| h == w)) =>
        {
            Check::new(
                Layer::Cgroups,
                State::Ok,
                format!(
                    "{head}: a probe cgroup was created and removed; runs are limited by {}",
                    held.join(", ")
                ),
            )
        }
        Ok(held) if !held.is_empty() => {
            let missing: Vec<&str> = ["memory", "pids", "cpu"]
                .into_iter()
                .filter(|w| !held.iter().any(|h| h == w))
                .collect();
            let fix = match c.version {
                CgroupVersion::V2 => format!(
                    "enable the controllers for our cgroup's parent: echo '{}' | sudo tee <parent>/cgroup.subtree_control",
                    missing
                        .iter()
                        .map(|m| format!("+{m}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ),
                _ => format!(
                    "mount the v1 hierarchies of {} (or boot with cgroup v2)",
                    missing.join(", ")
                ),
            };
            Check::new(
                Layer::Cgroups,
                State::Degraded,
                format!(
                    "{head}: runs are limited by {} only; no {} controller, so rlimits stand in for it",
                    held.join(", "),
                    missing.join(", ")
                ),
            )
            .fix(fix)
        }
        Ok(_) => Check::new(
            Layer::Cgroups,
            State::Degraded,
            format!(
                "{head}: no cgroup writable by {}; {FALLBACK}",
                who(facts.euid)
            ),
        )
        .fix(delegated_cgroup_fix(
            c.version,
            c.systemd,
            c.scope.as_deref(),
        )),
        Err(e) => Check::new(
            Layer::Cgroups,
            State::Degraded,
            format!("{head}: {e}; {FALLBACK}"),
        )
        .fix(delegated_cgroup_fix(
            c.version,
            c.systemd,
            c.scope.as_deref(),
        )),
    }
}

/// What the launcher's Landlock plan loses below each ABI (landlock(7)).
const LANDLOCK_LOSSES: [(u32, &str); 5] = [
    (2, "renaming and linking across directories (ABI 2)"),
    (3, "truncate rights (ABI 3)"),
    (4, "the TCP bind/connect denial (ABI 4)"),
    (5, "the device ioctl denial (ABI 5)"),
    (6, "abstract unix socket and signal scoping (ABI 6)"),
];

fn landlock_check(facts: &Facts) -> Check {
    let note = match &facts.sandbox {
        Some(Ok(run)) => run
            .stderr
            .lines()
            .find(|l| l.contains("note: landlock"))
            .map(str::to_owned),
        _ => None,
    };
    let check = match facts.landlock_abi {
        Ok(abi) if abi >= 6 => Check::new(
            Layer::Landlock,
            State::Ok,
            format!("ABI {abi}: filesystem rules, TCP denied, device ioctls denied, abstract unix sockets and signals scoped"),
        ),
        Ok(abi) => {
            let lost: Vec<&str> = LANDLOCK_LOSSES
                .iter()
                .filter(|(needs, _)| abi < *needs)
                .map(|(_, what)| *what)
                .collect();
            Check::new(
                Layer::Landlock,
                State::Degraded,
                format!("ABI {abi}: partly enforced, without {}", lost.join(", ")),
            )
            .fix("a kernel >= 6.12 (Landlock ABI 6)")
        }
        Err(libc_errno::EOPNOTSUPP) => Check::new(
            Layer::Landlock,
            State::Degraded,
            "built into the kernel but not enabled at boot (EOPNOTSUPP); the sandbox runs without its filesystem, TCP and IPC rules",
        )
        .fix("add landlock to the lsm= kernel parameter (the current list: cat /sys/kernel/security/lsm) and reboot"),
        Err(libc_errno::ENOSYS) => Check::new(
            Layer::Landlock,
            State::Degraded,
            "not in this kernel (ENOSYS); the sandbox runs without its filesystem, TCP and IPC rules",
        )
        .fix("a kernel >= 6.12 built with CONFIG_SECURITY_LANDLOCK=y"),
        Err(errno) => Check::new(
            Layer::Landlock,
            State::Degraded,
            format!("the ABI query failed: {}", errno_text(errno)),
        ),
    };
    match note {
        Some(note) if check.state == State::Ok => Check::new(
            Layer::Landlock,
            State::Degraded,
            format!("the sandbox probe says: {}", note.trim()),
        ),
        _ => check,
    }
}

fn probe_check(
    layer: Layer,
    probe: &ProbeResult,
    ok: &str,
    fix_for: impl Fn(i32) -> Option<String>,
) -> Check {
    match probe {
        Ok(Probe::Works) => Check::new(layer, State::Ok, ok),
        Ok(Probe::Refused { step, errno }) => Check::new(
            layer,
            State::Missing,
            format!("{step} failed: {}", errno_text(*errno)),
        )
        .fix_opt(fix_for(*errno)),
        Err(e) => Check::new(
            layer,
            State::Missing,
            format!("the probe could not run: {e}"),
        ),
    }
}

fn seccomp_check(facts: &Facts) -> Check {
    let container = facts.userns.container.is_some();
    probe_check(
        Layer::Seccomp,
        &facts.seccomp,
        "filter mode: a probe child loaded a filter, as the launcher loads its allowlist",
        |errno| match errno {
            libc_errno::EINVAL => Some("a kernel built with CONFIG_SECCOMP_FILTER=y".into()),
            _ if container => Some(CONTAINER_FIX.into()),
            _ => None,
        },
    )
}

fn no_new_privs_check(facts: &Facts) -> Check {
    probe_check(
        Layer::NoNewPrivs,
        &facts.no_new_privs,
        "a probe child set it and read it back",
        |errno| (errno == libc_errno::EINVAL).then(|| "Linux >= 3.5".into()),
    )
}

fn rootfs_check(facts: &Facts) -> Check {
    match &facts.rootfs {
        RootfsFacts::Present(r) => Check::new(
            Layer::Rootfs,
            State::Ok,
            format!(
                "{}: python {} ({} recipe), digest {}",
                r.dir.display(),
                r.python_version,
                r.source,
                &r.digest[..r.digest.len().min(16)]
            ),
        ),
        RootfsFacts::Missing { dir } => {
            let cache = dir.parent().unwrap_or(dir);
            Check::new(
                Layer::Rootfs,
                State::Missing,
                format!(
                    "not built at {} (serve and exec build it on first use); the sandbox probe needs it",
                    dir.display()
                ),
            )
            .fix(format!(
                "mcp-code-mode doctor --build --rootfs {}",
                cache.display()
            ))
        }
        RootfsFacts::Unknown(e) => {
            Check::new(Layer::Rootfs, State::Missing, e.clone()).fix("pass --rootfs DIR")
        }
    }
}

/// The `key=value` lines the sandbox probe printed.
fn probe_values(output: &str) -> Vec<(&str, &str)> {
    output.lines().filter_map(|l| l.split_once('=')).collect()
}

fn sandbox_check(run: &Result<SandboxRun, String>) -> Check {
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            return Check::new(
                Layer::Sandbox,
                State::Missing,
                format!("the launcher could not start: {e}"),
            );
        }
    };
    if run.status != Some(0) {
        let why = run
            .stderr
            .lines()
            .find(|l| l.starts_with("launcher: failed"))
            .or_else(|| run.stderr.lines().last())
            .unwrap_or("no message");
        return Check::new(
            Layer::Sandbox,
            State::Missing,
            format!(
                "the launcher on the rootfs ended with status {}: {why}",
                run.status
                    .map_or_else(|| "unknown".into(), |s| s.to_string())
            ),
        );
    }
    let values = probe_values(&run.output);
    let get = |key: &str| values.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for (key, want, meaning) in SANDBOX_EXPECTED {
        match get(key) {
            Some(v) if v == want => seen.push(meaning.to_string()),
            Some(v) => wrong.push(format!("{key}={v} (want {want})")),
            None => wrong.push(format!("no {key}")),
        }
    }
    for (key, refused, meaning) in [
        ("net", true, "AF_INET sockets refused"),
        ("root_write", true, "/ read-only"),
        ("tmp_write", false, "/tmp writable"),
    ] {
        match get(key) {
            Some(v) if v.starts_with("refused") == refused => seen.push(meaning.to_string()),
            Some(v) => wrong.push(format!("{key}={v}")),
            None => wrong.push(format!("no {key}")),
        }
    }
    if wrong.is_empty() {
        Check::new(
            Layer::Sandbox,
            State::Ok,
            format!(
                "python inside the launcher sees {}; limits: {}",
                seen.join(", "),
                run.limits
            ),
        )
    } else {
        Check::new(
            Layer::Sandbox,
            State::Missing,
            format!("python inside the launcher sees {}", wrong.join(", ")),
        )
    }
}

fn docker_checks(facts: &Facts, docker: &DockerFacts) -> Vec<Check> {
    const ONLY: &str = "only --backend docker needs it";
    match docker {
        DockerFacts::NotInstalled => vec![
            Check::new(
                Layer::DockerEngine,
                State::Missing,
                format!("no docker client on PATH; {ONLY}"),
            )
            .fix("sudo scripts/start-docker (installs docker.io with apt and starts dockerd)"),
        ],
        DockerFacts::NotAnswering(why) => {
            let fix = if why.to_lowercase().contains("permission denied") {
                "sudo usermod -aG docker $USER and log in again (or run as root)"
            } else {
                "sudo scripts/start-docker (starts dockerd)"
            };
            vec![
                Check::new(
                    Layer::DockerEngine,
                    State::Missing,
                    format!("{why}; {ONLY}"),
                )
                .fix(fix),
            ]
        }
        DockerFacts::Answering { version, image } => {
            let engine = Check::new(
                Layer::DockerEngine,
                State::Ok,
                format!("engine {version} answers"),
            );
            let image = match image {
                Some((tag, true)) => {
                    Check::new(Layer::DockerImage, State::Ok, format!("{tag} present"))
                }
                Some((tag, false)) => Check::new(
                    Layer::DockerImage,
                    State::Missing,
                    format!(
                        "{tag} not imported yet (serve --backend docker imports it on first use)"
                    ),
                )
                .fix(build_fix(facts)),
                None => Check::new(
                    Layer::DockerImage,
                    State::Missing,
                    "no rootfs to import yet",
                )
                .fix(build_fix(facts)),
            };
            vec![engine, image]
        }
    }
}

fn build_fix(facts: &Facts) -> String {
    match &facts.rootfs {
        RootfsFacts::Present(r) => match r.dir.parent() {
            Some(cache) => format!("mcp-code-mode doctor --build --rootfs {}", cache.display()),
            None => "mcp-code-mode doctor --build".into(),
        },
        RootfsFacts::Missing { dir } => format!(
            "mcp-code-mode doctor --build --rootfs {}",
            dir.parent().unwrap_or(dir).display()
        ),
        RootfsFacts::Unknown(_) => "mcp-code-mode doctor --build --rootfs DIR".into(),
    }
}

/// Maps the facts to the report: one line per layer, in the launcher's order, then the
/// rootfs, the real sandbox probe and Docker. Pure.
pub fn report(facts: &Facts) -> Report {
    let mut lines = Vec::new();
    let user = facts
        .namespaces
        .iter()
        .find(|(kind, _)| *kind == Namespace::User)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| Err("not probed".into()));
    let userns_ok = user == Ok(Probe::Works);
    lines.push(user_namespace_check(facts, &user));
    for (kind, probe) in &facts.namespaces {
        if *kind != Namespace::User {
            lines.push(namespace_check(facts, *kind, probe, userns_ok));
        }
    }
    lines.push(cgroup_check(facts));
    lines.push(no_new_privs_check(facts));
    lines.push(landlock_check(facts));
    lines.push(seccomp_check(facts));
    lines.push(rootfs_check(facts));
    if let Some(run) = &facts.sandbox {
        lines.push(sandbox_check(run));
    }
    if let Some(docker) = &facts.docker {
        lines.extend(docker_checks(facts, docker));
    }
    Report { lines }
}

/// `--strict` found a native layer that is not ok.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// The lines that are not ok, rendered.
    #[error(
        "refusing to start the native backend with --strict: {count} layer(s) not ok (mcp-code-mode doctor says more):\n{lines}"
    )]
    NotEveryLayer { count: usize, lines: String },
}

/// For `--strict`: Ok when the native backend would run with every layer on `rootfs`,
/// else the lines that are not ok.
///
/// # Errors
/// [`DoctorError::NotEveryLayer`].
pub async fn require_every_layer(rootfs: &Rootfs) -> Result<(), DoctorError> {
    let facts = gather(RootfsFacts::Present(rootfs.clone()), None).await;
    let report = report(&facts);
    let bad = report.not_ok();
    if bad.is_empty() {
        return Ok(());
    }
    Err(DoctorError::NotEveryLayer {
        count: bad.len(),
        lines: bad
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join("\n"),
    })
}

/// What `mcp-code-mode doctor` does: find (or, with `build`, build) the rootfs, gather the
/// facts, report.
pub async fn run(cache_root: Option<PathBuf>, build: bool) -> Report {
    let rootfs = find_rootfs(cache_root, build).await;
    report(&gather(rootfs, Some(build)).await)
}

/// The rootfs that `serve` would use with this cache root; built first when `build`.
pub async fn find_rootfs(cache_root: Option<PathBuf>, build: bool) -> RootfsFacts {
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
            Ok(dir) => {
                Rootfs::open(&dir).map_or(RootfsFacts::Missing { dir }, RootfsFacts::Present)
            }
            Err(e) => RootfsFacts::Unknown(e.to_string()),
        }
    })
    .await;
    found.unwrap_or_else(|e| RootfsFacts::Unknown(format!("failed to look for the rootfs: {e}")))
}

/// Collects the facts. `docker`: `None` skips the Docker checks; `Some(build)` checks them
/// and, when `build`, imports the rootfs image if the engine answers and it is missing.
pub async fn gather(rootfs: RootfsFacts, docker: Option<bool>) -> Facts {
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
        Some(build) => {
            let present = match &rootfs {
                RootfsFacts::Present(r) => Some(r.clone()),
                _ => None,
            };
            Some(
                tokio::task::spawn_blocking(move || docker_facts(present.as_ref(), build))
                    .await
                    .unwrap_or_else(|e| DockerFacts::NotAnswering(e.to_string())),
            )
        }
        None => None,
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
    let version = if Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        CgroupVersion::V2
    } else if Path::new("/sys/fs/cgroup/memory").exists()
        || Path::new("/sys/fs/cgroup/pids").exists()
    {
        CgroupVersion::V1
    } else {
        CgroupVersion::Unknown
    };
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let ours = match version {
        CgroupVersion::V2 => own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .map_or_else(|| "?".into(), |p| format!("ours: {p}")),
        _ => {
            let parts: Vec<String> = ["memory", "pids", "cpu"]
                .into_iter()
                .filter_map(|c| {
                    own.lines().find_map(|l| {
                        let mut f = l.splitn(3, ':');
                        let (_, names, path) = (f.next()?, f.next()?, f.next()?);
                        names
                            .split(',')
                            .any(|n| n == c)
                            .then(|| format!("{c} at {path}"))
                    })
                })
                .collect();
            if parts.is_empty() {
                "no memory, pids or cpu hierarchy".into()
            } else {
                parts.join(", ")
            }
        }
    };
    let limits = CgroupLimits {
        memory_bytes: MEMORY_BYTES,
        pids: MAX_PIDS,
        cpus: CPUS,
    };
    let name = crate::sandbox::owner::RunName::next().to_string();
    let probe = match CgroupHost::system().create(&name, &limits) {
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
        limits: control.limits(),
    })
}

/// The line of a failed docker client's stderr that says why, without the client's
/// template complaints or the HTTP request it tried.
fn docker_error(stderr: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// This VM as root: every layer works.
    fn healthy_root() -> Facts {
        Facts {
            euid: 0,
            userns: UsernsSettings {
                unprivileged_userns_clone: None,
                max_user_namespaces: Some(96365),
                apparmor_restrict_unprivileged_userns: None,
                container: None,
                apparmor_label: None,
                apparmor_profile_loaded: None,
                exe: None,
            },
            namespaces: Namespace::ALL
                .into_iter()
                .map(|k| (k, Ok(Probe::Works)))
                .collect(),
            cgroups: CgroupFacts {
                version: CgroupVersion::V1,
                ours: "memory at /, pids at /, cpu at /".into(),
                probe: Ok(vec![
                    "memory".into(),
                    "swap".into(),
                    "pids".into(),
                    "cpu".into(),
                ]),
                systemd: false,
                scope: Some("a run cgroup can be made here".into()),
            },
            landlock_abi: Ok(7),
            no_new_privs: Ok(Probe::Works),
            seccomp: Ok(Probe::Works),
            rootfs: RootfsFacts::Present(Rootfs {
                dir: PathBuf::from("/var/cache/mcp-code-mode/rootfs-00f9efec1262ff4c"),
                key: "00f9efec1262ff4c".into(),
                digest: "aab142763a960a4f133008a72f7e69bc376502d7b5ea4417153050b50db8d7cc".into(),
                python_version: "3.11.7".into(),
                source: "host".into(),
            }),
            sandbox: Some(Ok(SandboxRun {
                status: Some(0),
                output: "uid=65534\ngid=65534\npid=1\nhostname=sandbox\nCapEff=0000000000000000\n\
                         CapBnd=0000000000000000\nNoNewPrivs=1\nSeccomp=2\nnet=refused:EPERM\n\
                         root_write=refused:EROFS\ntmp_write=allowed\n"
                    .into(),
                stderr: String::new(),
                limits: "cgroup: memory, swap, pids, cpu".into(),
            })),
            docker: Some(DockerFacts::Answering {
                version: "20.10.24".into(),
                image: Some(("mcp-code-mode-rootfs:aab142763a960a4f".into(), true)),
            }),
        }
    }

    fn line(report: &Report, layer: Layer) -> &Check {
        report
            .lines
            .iter()
            .find(|c| c.layer == layer)
            .unwrap_or_else(|| panic!("no {layer} line in\n{}", report.render()))
    }

    fn refused(step: Step, errno: i32) -> ProbeResult {
        Ok(Probe::Refused { step, errno })
    }

    #[test]
    fn a_healthy_root_host_has_every_layer_ok_and_exits_0() {
        let report = report(&healthy_root());
        assert!(
            report.lines.iter().all(|c| c.state == State::Ok),
            "{}",
            report.render()
        );
        assert_eq!(report.exit_code(), 0);
        assert_eq!(report.lines.len(), 7 + 6 + 2);
        assert!(report.render().ends_with("every layer (exit 0)\n"));
    }

    #[test]
    fn ubuntu_with_apparmor_restricting_user_namespaces_cannot_run_and_names_the_profile_before_the_sysctl()
     {
        let mut facts = healthy_root();
        facts.euid = 1001;
        facts.userns.unprivileged_userns_clone = Some(1);
        facts.userns.apparmor_restrict_unprivileged_userns = Some(1);
        for (kind, probe) in &mut facts.namespaces {
            *probe = match kind {
                Namespace::User => refused(Step::Unshare(Namespace::Uts.flag()), libc_errno::EPERM),
                _ => refused(
                    Step::Unshare(Namespace::User.flag() | kind.flag()),
                    libc_errno::EPERM,
                ),
            };
        }
        let report = report(&facts);
        let user = line(&report, Layer::Namespace(Namespace::User));
        assert_eq!(user.state, State::Missing);
        assert!(user.detail.contains("AppArmor"), "{}", user.detail);
        // The profile first (it keeps the restriction for everything else), the sysctl last.
        let fix = user.fix.as_deref().unwrap();
        assert!(
            fix.starts_with("install the AppArmor profile that lets this one program"),
            "{fix}"
        );
        let profile = fix
            .find("scripts/install")
            .expect("the profile's installer");
        let sysctl = fix
            .find("sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")
            .expect("the sysctl");
        assert!(profile < sysctl, "{fix}");
        assert!(fix[..sysctl].contains("last resort"), "{fix}");
        let mount = line(&report, Layer::Namespace(Namespace::Mount));
        assert_eq!(mount.state, State::Missing);
        assert!(mount.detail.contains("needs a user namespace"));
        assert_eq!(report.exit_code(), 2);
    }

    #[test]
    fn root_is_not_sent_to_apparmor_or_debian_switches_it_is_not_subject_to() {
        let mut facts = healthy_root();
        facts.userns.apparmor_restrict_unprivileged_userns = Some(1);
        facts.userns.unprivileged_userns_clone = Some(0);
        facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc_errno::EPERM);
        let user = report(&facts).lines[0].clone();
        let fix = user.fix.unwrap_or_default();
        assert!(
            !fix.contains("kernel.apparmor_restrict") && !fix.contains("unprivileged_userns_clone"),
            "{fix}"
        );
    }

    #[test]
    fn debian_with_unprivileged_userns_clone_off_names_that_sysctl() {
        let mut facts = healthy_root();
        facts.euid = 1000;
        facts.userns.unprivileged_userns_clone = Some(0);
        facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc_errno::EPERM);
        let report = report(&facts);
        let user = line(&report, Layer::Namespace(Namespace::User));
        assert!(
            user.fix
                .as_deref()
                .unwrap()
                .starts_with("sudo sysctl -w kernel.unprivileged_userns_clone=1")
        );
        assert_eq!(report.exit_code(), 2);
    }

    #[test]
    fn zero_user_namespaces_allowed_names_max_user_namespaces() {
        let mut facts = healthy_root();
        facts.userns.max_user_namespaces = Some(0);
        facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc_errno::ENOSPC);
        let user = report(&facts).lines[0].clone();
        assert!(
            user.fix
                .unwrap()
                .starts_with("sudo sysctl -w user.max_user_namespaces=15000")
        );
    }

    #[test]
    fn inside_a_container_the_fix_is_about_the_container() {
        let mut facts = healthy_root();
        facts.userns.container = Some("/.dockerenv exists: docker".into());
        facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc_errno::EPERM);
        let user = report(&facts).lines[0].clone();
        assert!(user.detail.contains("container"));
        assert!(user.fix.unwrap().contains("seccomp=unconfined"));
    }

    #[test]
    fn one_kind_out_of_its_quota_names_its_own_sysctl() {
        let mut facts = healthy_root();
        facts.namespaces[3].1 = refused(
            Step::Unshare(Namespace::User.flag() | Namespace::Net.flag()),
            libc_errno::ENOSPC,
        );
        let report = report(&facts);
        let net = line(&report, Layer::Namespace(Namespace::Net));
        assert_eq!(net.state, State::Missing);
        assert!(
            net.fix
                .as_deref()
                .unwrap()
                .contains("user.max_net_namespaces")
        );
        assert_eq!(report.exit_code(), 2);
    }

    #[test]
    fn an_unprivileged_user_on_v1_falls_back_to_rlimits_with_root_made_cgroups_as_the_fix() {
        let mut facts = healthy_root();
        facts.euid = 65534;
        facts.cgroups.probe = Ok(Vec::new());
        if let Some(Ok(run)) = &mut facts.sandbox {
            run.limits = "rlimits (no writable cgroup)".into();
        }
        let report = report(&facts);
        let cg = line(&report, Layer::Cgroups);
        assert_eq!(cg.state, State::Degraded);
        assert!(
            cg.detail.contains("no cgroup writable by uid 65534"),
            "{}",
            cg.detail
        );
        assert!(cg.detail.contains("rlimits"));
        let fix = cg.fix.as_deref().unwrap();
        assert!(
            fix.contains("for c in memory pids cpu") && fix.contains("cgroup.procs"),
            "{fix}"
        );
        assert_eq!(report.exit_code(), 1);
        assert!(report.render().contains("degraded"));
    }

    #[test]
    fn an_unprivileged_user_on_v2_with_systemd_is_told_to_use_a_delegated_scope() {
        let mut facts = healthy_root();
        facts.euid = 1000;
        facts.cgroups.version = CgroupVersion::V2;
        facts.cgroups.systemd = true;
        facts.cgroups.probe = Ok(Vec::new());
        facts.cgroups.scope = Some("no systemd user manager answers".into());
        let cg = line(&report(&facts), Layer::Cgroups).clone();
        let fix = cg.fix.unwrap();
        assert!(fix.contains("--systemd-scope auto"), "{fix}");
        assert!(
            fix.contains("here no systemd user manager answers"),
            "{fix}"
        );
    }

    #[test]
    fn a_cgroup_in_the_delegated_scope_says_so() {
        let mut facts = healthy_root();
        facts.euid = 1000;
        facts.cgroups.version = CgroupVersion::V2;
        facts.cgroups.scope = None;
        let cg = line(&report(&facts), Layer::Cgroups).clone();
        assert_eq!(cg.state, State::Ok);
        assert!(
            cg.detail.contains("in the delegated systemd scope"),
            "{}",
            cg.detail
        );
    }

    fn restricted_by_apparmor() -> Facts {
        let mut facts = healthy_root();
        facts.euid = 1000;
        facts.userns.apparmor_restrict_unprivileged_userns = Some(1);
        facts.namespaces[0].1 = refused(Step::Unshare(Namespace::Uts.flag()), libc_errno::EPERM);
        facts
    }

    #[test]
    fn a_loaded_profile_and_a_binary_elsewhere_is_told_to_run_the_installed_one() {
        let mut facts = restricted_by_apparmor();
        facts.userns.apparmor_profile_loaded = Some(true);
        facts.userns.apparmor_label = Some("unconfined".into());
        facts.userns.exe = Some("/home/me/.cargo/bin/mcp-code-mode".into());
        let user = report(&facts).lines[0].clone();
        assert!(
            user.detail
                .contains("covers /usr/local/bin/mcp-code-mode only, and this is /home/me/.cargo/bin/mcp-code-mode"),
            "{}",
            user.detail
        );
        assert!(
            user.fix
                .unwrap()
                .starts_with("run /usr/local/bin/mcp-code-mode"),
        );
    }

    #[test]
    fn a_refusal_under_our_own_profile_means_the_loaded_one_is_not_as_shipped() {
        let mut facts = restricted_by_apparmor();
        facts.userns.apparmor_profile_loaded = Some(true);
        facts.userns.apparmor_label = Some("mcp-code-mode (unconfined)".into());
        facts.userns.exe = Some(INSTALLED_BINARY.into());
        let user = report(&facts).lines[0].clone();
        assert!(
            user.detail.contains("lacks the userns rule"),
            "{}",
            user.detail
        );
        assert!(user.fix.unwrap().starts_with("load the profile as shipped"));
    }

    #[test]
    fn the_shipped_profile_attaches_to_the_installed_binary_under_its_name() {
        let profile = include_str!("../../deploy/apparmor/mcp-code-mode");
        let header = format!("profile {APPARMOR_PROFILE} {INSTALLED_BINARY} flags=(unconfined) {{");
        assert!(profile.lines().any(|l| l == header), "{header}");
        assert!(profile.lines().any(|l| l.trim() == "userns,"));
    }

    #[test]
    fn a_cgroup_without_the_cpu_controller_is_degraded_and_names_it() {
        let mut facts = healthy_root();
        facts.cgroups.probe = Ok(vec!["memory".into(), "pids".into()]);
        let report = report(&facts);
        let cg = line(&report, Layer::Cgroups);
        assert_eq!(cg.state, State::Degraded);
        assert!(cg.detail.contains("no cpu controller"));
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn an_old_landlock_abi_is_degraded_and_says_what_is_lost() {
        let mut facts = healthy_root();
        facts.landlock_abi = Ok(4);
        let report = report(&facts);
        let ll = line(&report, Layer::Landlock);
        assert_eq!(ll.state, State::Degraded);
        assert!(ll.detail.contains("ioctl") && ll.detail.contains("scoping"));
        assert!(!ll.detail.contains("TCP"));
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn landlock_disabled_at_boot_points_at_the_lsm_parameter() {
        let mut facts = healthy_root();
        facts.landlock_abi = Err(libc_errno::EOPNOTSUPP);
        let ll = line(&report(&facts), Layer::Landlock).clone();
        assert_eq!(ll.state, State::Degraded);
        assert!(ll.fix.unwrap().contains("lsm="));
        facts.landlock_abi = Err(libc_errno::ENOSYS);
        assert!(
            line(&report(&facts), Layer::Landlock)
                .fix
                .as_deref()
                .unwrap()
                .contains("CONFIG_SECURITY_LANDLOCK")
        );
    }

    #[test]
    fn a_landlock_note_from_the_launcher_degrades_a_good_abi() {
        let mut facts = healthy_root();
        if let Some(Ok(run)) = &mut facts.sandbox {
            run.stderr = "launcher: note: landlock PartiallyEnforced (abi Some(V5))".into();
        }
        let ll = line(&report(&facts), Layer::Landlock).clone();
        assert_eq!(ll.state, State::Degraded);
        assert!(ll.detail.contains("PartiallyEnforced"));
    }

    #[test]
    fn no_seccomp_filter_mode_means_the_launcher_cannot_run() {
        let mut facts = healthy_root();
        facts.seccomp = refused(Step::LoadAllowAllFilter, libc_errno::EINVAL);
        let report = report(&facts);
        let sc = line(&report, Layer::Seccomp);
        assert_eq!(sc.state, State::Missing);
        assert!(sc.fix.as_deref().unwrap().contains("CONFIG_SECCOMP_FILTER"));
        assert_eq!(report.exit_code(), 2);
    }

    #[test]
    fn a_missing_rootfs_is_named_with_the_build_command_and_skips_the_sandbox_probe() {
        let mut facts = healthy_root();
        facts.rootfs = RootfsFacts::Missing {
            dir: PathBuf::from("/home/u/.cache/mcp-code-mode/rootfs-00f9efec1262ff4c"),
        };
        facts.sandbox = None;
        facts.docker = Some(DockerFacts::Answering {
            version: "27".into(),
            image: None,
        });
        let report = report(&facts);
        let rootfs = line(&report, Layer::Rootfs);
        assert_eq!(rootfs.state, State::Missing);
        assert_eq!(
            rootfs.fix.as_deref(),
            Some("mcp-code-mode doctor --build --rootfs /home/u/.cache/mcp-code-mode")
        );
        assert!(report.lines.iter().all(|c| c.layer != Layer::Sandbox));
        assert_eq!(report.exit_code(), 1);
    }

    #[test]
    fn a_sandbox_that_runs_as_root_inside_cannot_run() {
        let mut facts = healthy_root();
        if let Some(Ok(run)) = &mut facts.sandbox {
            run.output = run.output.replace("uid=65534", "uid=0");
        }
        let report = report(&facts);
        let sb = line(&report, Layer::Sandbox);
        assert_eq!(sb.state, State::Missing);
        assert!(sb.detail.contains("uid=0 (want 65534)"));
        assert_eq!(report.exit_code(), 2);
    }

    #[test]
    fn a_launcher_failure_is_quoted() {
        let mut facts = healthy_root();
        facts.sandbox = Some(Ok(SandboxRun {
            status: Some(125),
            stderr: "launcher: failed to mount /tmp: Permission denied".into(),
            ..SandboxRun::default()
        }));
        let sb = line(&report(&facts), Layer::Sandbox).clone();
        assert!(
            sb.detail
                .ends_with("launcher: failed to mount /tmp: Permission denied")
        );
    }

    #[test]
    fn docker_lines_never_change_the_exit_code() {
        let mut facts = healthy_root();
        facts.docker = Some(DockerFacts::NotAnswering(
            "permission denied while trying to connect to the Docker daemon socket".into(),
        ));
        let report = report(&facts);
        let engine = line(&report, Layer::DockerEngine);
        assert_eq!(engine.state, State::Missing);
        assert!(
            engine
                .fix
                .as_deref()
                .unwrap()
                .contains("usermod -aG docker")
        );
        assert_eq!(report.exit_code(), 0);
        assert!(report.not_ok().is_empty());
    }

    #[test]
    fn docker_errors_are_cut_to_the_reason() {
        let stderr = "template: :1:2: executing \"\" at <.ServerVersion>: nil pointer\n\
            permission denied while trying to connect to the Docker daemon socket at \
            unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.50/info\": dial unix";
        assert_eq!(
            docker_error(stderr),
            "permission denied while trying to connect to the Docker daemon socket at unix:///var/run/docker.sock"
        );
    }

    #[test]
    fn a_line_shows_state_layer_detail_and_the_fix_below() {
        let check =
            Check::new(Layer::Cgroups, State::Degraded, "cgroup v1: no cgroup").fix("run as root");
        assert_eq!(
            check.to_string(),
            format!(
                "degraded  cgroups           cgroup v1: no cgroup\n{}fix: run as root",
                " ".repeat(28)
            )
        );
    }

    #[test]
    fn the_sandbox_probe_prints_every_key_the_check_reads() {
        for (key, _, _) in SANDBOX_EXPECTED {
            assert!(SANDBOX_PROBE_PY.contains(&format!("'{key}")), "{key}");
        }
    }
}
