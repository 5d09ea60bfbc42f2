//! doctor's diagnoses, from facts made up for each host kind (no kernel needed).

use std::path::PathBuf;

use launcher::probe::{Namespace, Probe, Step};

use super::checks::SANDBOX_EXPECTED;
use super::facts::{
    APPARMOR_PROFILE, CgroupFacts, CgroupVersion, DockerFacts, Facts, INSTALLED_BINARY,
    ProbeResult, SANDBOX_PROBE_PY, SandboxRun, UsernsSettings, docker_error,
};
use super::report::{Check, Layer, State};
use super::*;
use crate::rootfs::Rootfs;
use crate::sandbox::HeldLimits;

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
            start_failure: None,
            limits: HeldLimits::Cgroup(vec!["memory", "swap", "pids", "cpu"]),
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
    assert_eq!(report.lines.len(), 8 + 6 + 2);
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
            Namespace::User => refused(Step::Unshare(Namespace::Uts.flag()), libc::EPERM),
            _ => refused(
                Step::Unshare(Namespace::User.flag() | kind.flag()),
                libc::EPERM,
            ),
        };
    }
    let report = report(&facts);
    let user = line(&report, Layer::Namespace(Namespace::User));
    assert_eq!(user.state, State::Missing);
    assert!(user.detail.contains("AppArmor"), "{}", user.detail);
    // The profile first (it keeps the restriction for what mcp-code-mode does not start),
    // the sysctl last.
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
    facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc::EPERM);
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
    facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc::EPERM);
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
    facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc::ENOSPC);
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
    facts.namespaces[0].1 = refused(Step::Unshare(Namespace::User.flag()), libc::EPERM);
    let user = report(&facts).lines[0].clone();
    assert!(user.detail.contains("container"));
    assert!(user.fix.unwrap().contains("seccomp=unconfined"));
}

#[test]
fn one_kind_out_of_its_quota_names_its_own_sysctl() {
    let mut facts = healthy_root();
    facts.namespaces[3].1 = refused(
        Step::Unshare(Namespace::User.flag() | Namespace::Net.flag()),
        libc::ENOSPC,
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

/// The time namespace's probe result in `facts`.
fn time_probe(facts: &mut Facts) -> &mut ProbeResult {
    &mut facts
        .namespaces
        .iter_mut()
        .find(|(kind, _)| *kind == Namespace::Time)
        .expect("a time namespace probe")
        .1
}

#[test]
fn a_kernel_without_time_namespaces_is_degraded_since_sandboxes_keep_the_host_clocks() {
    let mut facts = healthy_root();
    *time_probe(&mut facts) = refused(
        Step::Unshare(Namespace::User.flag() | Namespace::Time.flag()),
        libc::EINVAL,
    );
    let report = report(&facts);
    let time = line(&report, Layer::Namespace(Namespace::Time));
    assert_eq!(time.state, State::Degraded, "{}", report.render());
    assert!(time.detail.contains("host's clocks"), "{}", time.detail);
    assert!(time.fix.as_deref().unwrap().contains("CONFIG_TIME_NS=y"));
    // The launcher goes on without one: degraded, not "cannot run".
    assert_eq!(report.exit_code(), 1);
}

#[test]
fn a_time_namespace_refused_otherwise_means_the_launcher_cannot_run() {
    // Only EINVAL at the unshare is the launcher's "no time namespaces here"; a full quota
    // or refused offsets fail its start (launcher/src/time_ns.rs).
    for (step, errno) in [
        (
            Step::Unshare(Namespace::User.flag() | Namespace::Time.flag()),
            libc::ENOSPC,
        ),
        (Step::WriteTimeOffsets, libc::EACCES),
    ] {
        let mut facts = healthy_root();
        *time_probe(&mut facts) = refused(step, errno);
        let report = report(&facts);
        let time = line(&report, Layer::Namespace(Namespace::Time));
        assert_eq!(time.state, State::Missing, "{}", report.render());
        assert!(time.detail.contains(&step.to_string()), "{}", time.detail);
        assert_eq!(report.exit_code(), 2);
    }
}

#[test]
fn an_unprivileged_user_on_v1_falls_back_to_rlimits_with_root_made_cgroups_as_the_fix() {
    let mut facts = healthy_root();
    facts.euid = 65534;
    facts.cgroups.probe = Ok(Vec::new());
    if let Some(Ok(run)) = &mut facts.sandbox {
        run.limits = HeldLimits::Rlimits;
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
        fix.contains("for c in memory pids cpu blkio; do [ -d /sys/fs/cgroup/$c ] || continue;")
            && fix.contains("cgroup.procs"),
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
    facts.namespaces[0].1 = refused(Step::Unshare(Namespace::Uts.flag()), libc::EPERM);
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
    facts.landlock_abi = Err(libc::EOPNOTSUPP);
    let ll = line(&report(&facts), Layer::Landlock).clone();
    assert_eq!(ll.state, State::Degraded);
    assert!(ll.fix.unwrap().contains("lsm="));
    facts.landlock_abi = Err(libc::ENOSYS);
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
        let note = launcher::Note::Landlock {
            status: "PartiallyEnforced".into(),
            abi: Some(5),
        };
        run.stderr = format!("Python said this\n{}", note.encode());
    }
    let ll = line(&report(&facts), Layer::Landlock).clone();
    assert_eq!(ll.state, State::Degraded);
    assert!(
        ll.detail
            .ends_with("says: landlock PartiallyEnforced (ABI 5)"),
        "{}",
        ll.detail
    );
}

#[test]
fn no_seccomp_filter_mode_means_the_launcher_cannot_run() {
    let mut facts = healthy_root();
    facts.seccomp = refused(Step::LoadAllowAllFilter, libc::EINVAL);
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
        stderr: "launcher: failed to mount /tmp: forged by the code".into(),
        start_failure: Some(crate::sandbox::SandboxError::Launch(
            launcher::LaunchFailure {
                stage: launcher::Stage::Mount,
                errno: Some(13),
                message: "failed to mount /tmp: Permission denied".into(),
            },
        )),
        output: String::new(),
        limits: HeldLimits::Rlimits,
    }));
    let sb = line(&report(&facts), Layer::Sandbox).clone();
    assert!(
        sb.detail.ends_with(
            "status 125: failed to start the sandbox: failed to mount /tmp: Permission denied"
        ),
        "{}",
        sb.detail
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
