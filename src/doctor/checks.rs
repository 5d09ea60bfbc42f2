//! The pure half of doctor: [`report`] maps [`Facts`] to one [`Check`] per layer, with the
//! fix for anything not ok. No I/O here, so every diagnosis is unit-tested without the kernel.

use launcher::probe::{Namespace, Probe, Step};

use super::advice::{
    CONTAINER_FIX, build_fix, delegated_cgroup_fix, kernel_config, persisted_sysctl, userns_cause,
};
use super::facts::{CgroupVersion, DockerFacts, Facts, ProbeResult, RootfsFacts, SandboxRun};
use super::report::{Check, Layer, Report, State};

/// What the sandbox probe must print, and what each value means.
pub(super) const SANDBOX_EXPECTED: [(&str, &str, &str); 8] = [
    ("uid", "65534", "uid 65534"),
    ("gid", "65534", "gid 65534"),
    ("pid", "1", "pid 1"),
    ("hostname", "sandbox", "hostname sandbox"),
    ("CapEff", "0000000000000000", "no capabilities"),
    ("CapBnd", "0000000000000000", "empty bounding set"),
    ("NoNewPrivs", "1", "no_new_privs"),
    ("Seccomp", "2", "seccomp filter"),
];

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
        // The launcher takes the unshare's EINVAL (no time namespaces in this kernel) as
        // "keep the host's clocks" and goes on (launcher/src/time_ns.rs); any other
        // refusal fails its start, as for the other kinds.
        Ok(Probe::Refused {
            step: step @ Step::Unshare(_),
            errno: libc::EINVAL,
        }) if kind == Namespace::Time => Check::new(
            layer,
            State::Degraded,
            format!(
                "{step} failed: {}: this kernel has no time namespaces, so sandboxes keep the host's clocks (CLOCK_BOOTTIME and CLOCK_MONOTONIC read the host's uptime)",
                errno_text(libc::EINVAL)
            ),
        )
        .fix(format!(
            "Linux >= 5.6 built with {}=y",
            kernel_config(kind)
        )),
        Ok(Probe::Refused { step, errno }) => {
            let fix = match *errno {
                libc::ENOSPC => Some(persisted_sysctl(kind.max_sysctl(), "15000")),
                libc::EINVAL => Some(format!("a kernel built with {}=y", kernel_config(kind))),
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
        Some(Ok(run)) => landlock_note(&run.stderr),
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
        Err(libc::EOPNOTSUPP) => Check::new(
            Layer::Landlock,
            State::Degraded,
            "built into the kernel but not enabled at boot (EOPNOTSUPP); the sandbox runs without its filesystem, TCP and IPC rules",
        )
        .fix("add landlock to the lsm= kernel parameter (the current list: cat /sys/kernel/security/lsm) and reboot"),
        Err(libc::ENOSYS) => Check::new(
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
            libc::EINVAL => Some("a kernel built with CONFIG_SECCOMP_FILTER=y".into()),
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
        |errno| (errno == libc::EINVAL).then(|| "Linux >= 3.5".into()),
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
        RootfsFacts::Damaged { dir, why } => Check::new(
            Layer::Rootfs,
            State::Missing,
            format!(
                "damaged at {}: {why} (serve and exec rebuild it on first use); the sandbox probe needs it",
                dir.display()
            ),
        )
        .fix(format!(
            "mcp-code-mode doctor --build --rootfs {}",
            dir.parent().unwrap_or(dir).display()
        )),
        RootfsFacts::Unknown(e) => {
            Check::new(Layer::Rootfs, State::Missing, e.clone()).fix("pass --rootfs DIR")
        }
    }
}

/// The `key=value` lines the sandbox probe printed.
fn probe_values(output: &str) -> Vec<(&str, &str)> {
    output.lines().filter_map(|l| l.split_once('=')).collect()
}

/// The launcher's note that Landlock holds only in part, if its stderr has one.
fn landlock_note(stderr: &str) -> Option<String> {
    launcher::Note::find_all(stderr)
        .into_iter()
        .map(|note| match note {
            launcher::Note::Landlock { status, abi } => match abi {
                Some(abi) => format!("landlock {status} (ABI {abi})"),
                None => format!("landlock {status}"),
            },
        })
        .next()
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
        // The launcher's own report first; else the last thing the sandbox said.
        let why = match &run.start_failure {
            Some(failure) => failure.to_string(),
            None => run.stderr.lines().last().unwrap_or("no message").to_owned(),
        };
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

/// Maps the facts to the report: one line per layer, in the launcher's order, then the
/// rootfs, the real sandbox probe and Docker. Pure.
pub(crate) fn report(facts: &Facts) -> Report {
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
