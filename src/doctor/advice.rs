//! How to get a layer that is missing on this host: the fix each check names, by the most
//! likely cause (a sysctl, an AppArmor profile, a delegated cgroup, a kernel option, the
//! container's options). Pure, like the checks.

use launcher::probe::Namespace;

use super::facts::{
    APPARMOR_PROFILE, CgroupVersion, Facts, INSTALLED_BINARY, RootfsFacts, UsernsSettings,
};

/// The fix for a refused user namespace, by its most likely cause (pure).
pub(super) fn userns_cause(facts: &Facts, errno: i32) -> (String, Option<String>) {
    let s = &facts.userns;
    let unprivileged = facts.euid != 0;
    if unprivileged && s.unprivileged_userns_clone == Some(0) {
        return (
            "kernel.unprivileged_userns_clone is 0: the kernel refuses user namespaces to users other than root".into(),
            Some(persisted_sysctl("kernel.unprivileged_userns_clone", "1")),
        );
    }
    if s.max_user_namespaces == Some(0) || errno == libc::ENOSPC {
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

/// Ubuntu's restriction: the profile first (it keeps the restriction for programs
/// mcp-code-mode does not start), the sysctl last (it lifts it for all of them). Which profile advice fits
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
            "install the AppArmor profile that lets this one program and the programs it starts create user namespaces (every user who may run it can then have them: README \"What it does not protect\"), keeping the restriction for the rest: scripts/install in the source checkout (it puts the binary at {INSTALLED_BINARY} and loads deploy/apparmor/{APPARMOR_PROFILE}), then run {INSTALLED_BINARY}"
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

pub(super) const CONTAINER_FIX: &str = "run mcp-code-mode on the host, or start the container with --security-opt seccomp=unconfined --security-opt apparmor=unconfined so it may create namespaces (or use --backend docker from the host)";

pub(super) fn persisted_sysctl(key: &str, value: &str) -> String {
    format!(
        "sudo sysctl -w {key}={value} (to keep it across reboots: echo {key}={value} | sudo tee /etc/sysctl.d/60-mcp-code-mode.conf)"
    )
}

pub(super) fn kernel_config(kind: Namespace) -> &'static str {
    match kind {
        Namespace::User => "CONFIG_USER_NS",
        Namespace::Mount => "CONFIG_NAMESPACES",
        Namespace::Pid => "CONFIG_PID_NS",
        Namespace::Net => "CONFIG_NET_NS",
        Namespace::Ipc => "CONFIG_IPC_NS",
        Namespace::Uts => "CONFIG_UTS_NS",
        Namespace::Cgroup => "CONFIG_CGROUPS",
        Namespace::Time => "CONFIG_TIME_NS",
    }
}

/// How an unprivileged user gets a cgroup of their own (pure: by version, systemd, and
/// why no delegated systemd scope was used).
pub(super) fn delegated_cgroup_fix(
    version: CgroupVersion,
    systemd: bool,
    scope: Option<&str>,
) -> String {
    match (version, systemd) {
        (CgroupVersion::V2, true) => format!(
            "serve, exec and doctor move into a delegated systemd user scope by themselves (--systemd-scope auto) when systemd's user manager answers; {}; or run as root",
            scope.map_or_else(
                || "this one is in such a scope, and it still gives no cgroup".into(),
                |why| format!("here {why}")
            )
        ),
        (CgroupVersion::V2, false) => "as root, make a cgroup for this user and move the shell into it: sudo mkdir /sys/fs/cgroup/mcp-code-mode-$USER && sudo chown -R $USER /sys/fs/cgroup/mcp-code-mode-$USER && echo $$ | sudo tee /sys/fs/cgroup/mcp-code-mode-$USER/cgroup.procs (or run as root)".into(),
        _ => "v1 hierarchies belong to root and systemd delegates none of them: run as root, or, as root, make one cgroup per controller for this user and move the shell into them (blkio, which holds the disk I/O limit, where this v1 host has it): for c in memory pids cpu blkio; do [ -d /sys/fs/cgroup/$c ] || continue; sudo mkdir -p /sys/fs/cgroup/$c/mcp-code-mode-$USER && sudo chown -R $USER /sys/fs/cgroup/$c/mcp-code-mode-$USER && echo $$ | sudo tee /sys/fs/cgroup/$c/mcp-code-mode-$USER/cgroup.procs; done (or boot with cgroup v2, where serve and exec use a delegated systemd scope by themselves)".into(),
    }
}

pub(super) fn build_fix(facts: &Facts) -> String {
    match &facts.rootfs {
        RootfsFacts::Present(r) => match r.dir.parent() {
            Some(cache) => format!("mcp-code-mode doctor --build --rootfs {}", cache.display()),
            None => "mcp-code-mode doctor --build".into(),
        },
        RootfsFacts::Missing { dir } | RootfsFacts::Damaged { dir, .. } => format!(
            "mcp-code-mode doctor --build --rootfs {}",
            dir.parent().unwrap_or(dir).display()
        ),
        RootfsFacts::Unknown(_) => "mcp-code-mode doctor --build --rootfs DIR".into(),
    }
}
