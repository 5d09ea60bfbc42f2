//! What doctor prints and what it exits with: one [`Check`] line per [`Layer`], a verdict,
//! and the exit code (0 every native layer ok, 1 degraded, 2 the native backend cannot run).

use std::fmt;

use launcher::probe::Namespace;

/// One layer of the sandbox (or of the Docker backend) that doctor checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layer {
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
    pub(crate) fn name(self) -> &'static str {
        match self {
            Layer::Namespace(Namespace::User) => "user namespace",
            Layer::Namespace(Namespace::Mount) => "mount namespace",
            Layer::Namespace(Namespace::Pid) => "pid namespace",
            Layer::Namespace(Namespace::Net) => "net namespace",
            Layer::Namespace(Namespace::Ipc) => "ipc namespace",
            Layer::Namespace(Namespace::Uts) => "uts namespace",
            Layer::Namespace(Namespace::Cgroup) => "cgroup namespace",
            Layer::Namespace(Namespace::Time) => "time namespace",
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
    pub(crate) fn native(self) -> bool {
        !matches!(self, Layer::DockerEngine | Layer::DockerImage)
    }

    /// Whether the native backend cannot start without it. The others have a fallback
    /// (rlimits for cgroups), are best effort (Landlock), or are made on first use (rootfs).
    pub(crate) fn required(self) -> bool {
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
pub(crate) enum State {
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
pub(crate) struct Check {
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
    pub(super) fn new(layer: Layer, state: State, detail: impl Into<String>) -> Self {
        Check {
            layer,
            state,
            detail: detail.into(),
            fix: None,
        }
    }

    pub(super) fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub(super) fn fix_opt(mut self, fix: Option<String>) -> Self {
        self.fix = fix;
        self
    }

    /// What this line means for the exit code: 0 ok (or not a native layer), 1 degraded,
    /// 2 the native backend cannot run.
    pub(crate) fn severity(&self) -> u8 {
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
pub(crate) struct Report {
    /// One check per layer.
    pub lines: Vec<Check>,
}

impl Report {
    /// 0 when the native backend runs with every layer, 1 when it runs degraded, 2 when it
    /// cannot run. The Docker lines do not count.
    pub(crate) fn exit_code(&self) -> u8 {
        self.lines.iter().map(Check::severity).max().unwrap_or(0)
    }

    /// The native layers that are not ok.
    pub(crate) fn not_ok(&self) -> Vec<&Check> {
        self.lines
            .iter()
            .filter(|c| c.layer.native() && c.state != State::Ok)
            .collect()
    }

    /// The lines and a verdict, as doctor prints them.
    pub(crate) fn render(&self) -> String {
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
