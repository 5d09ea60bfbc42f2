//! Test-only knobs: each relaxes or leaves out one layer, so that a layer test can show the
//! layer it tests is the only one refusing (tests/suite/layers.rs), and that the test fails
//! when that layer is gone.
//!
//! The launcher accepts them only when its own environment has
//! `MCP_CODE_MODE_LAUNCHER_TEST_KNOBS=1` ([`ENABLE_ENV`]). The host starts the launcher with
//! an empty environment (sandbox/native) and never writes these options, so nothing `serve`
//! or `exec` is given can reach them; they exist for `mcp-code-mode __launcher` run by hand
//! or by a test.

use std::path::{Path, PathBuf};

use crate::mounts::Step;
use crate::rlimits::Limit;

/// The variable that must be `1` in the launcher's environment for any knob to be accepted.
pub const ENABLE_ENV: &str = "MCP_CODE_MODE_LAUNCHER_TEST_KNOBS";

/// With [`ENABLE_ENV`]`=1` beside it in the environment of `mcp-code-mode serve` or `exec`,
/// this variable's value (an errno, 1 to 4095) is what the native backend's seccomp filter
/// answers denied syscalls with, instead of EPERM (the launcher gets it as `--seccomp-errno`).
/// A denial is never turned into an allowance; the probe table runs with a sentinel errno so
/// that each denial shows whether seccomp or another layer gave it (tests/suite/probes/).
/// The Docker backend ignores it: Docker 20.10 with runc 1.1 answers EPERM whatever the
/// profile's `defaultErrnoRet` says.
pub const SECCOMP_ERRNO_ENV: &str = "MCP_CODE_MODE_TEST_SECCOMP_ERRNO";

/// Where `--test-scratch-dir` mounts its tmpfs inside the sandbox: outside /tmp, under a
/// root entry that Landlock grants read and execute but not write.
pub const SCRATCH_DIR: &str = "/dev/scratch";

/// The knobs, all off by default (the sandbox as shipped).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TestKnobs {
    /// `--test-without-landlock`: stage 10 is left out.
    pub without_landlock: bool,
    /// `--test-without-seccomp`: stage 11 is left out.
    pub without_seccomp: bool,
    /// `--test-exec-tmp`: /tmp is mounted without noexec.
    pub exec_tmp: bool,
    /// `--test-scratch-dir`: a writable tmpfs that allows exec at [`SCRATCH_DIR`].
    pub scratch_dir: bool,
    /// `--test-core-dumps`: RLIMIT_CORE is left as the launcher inherited it (not 0).
    pub core_dumps: bool,
}

impl TestKnobs {
    /// The option names, as the launcher's command line spells them.
    pub const OPTIONS: [&'static str; 5] = [
        "--test-without-landlock",
        "--test-without-seccomp",
        "--test-exec-tmp",
        "--test-scratch-dir",
        "--test-core-dumps",
    ];

    /// Turns on the knob named by `option` (one of [`Self::OPTIONS`]); false if it is none.
    pub fn set(&mut self, option: &str) -> bool {
        let knob = match option {
            "--test-without-landlock" => &mut self.without_landlock,
            "--test-without-seccomp" => &mut self.without_seccomp,
            "--test-exec-tmp" => &mut self.exec_tmp,
            "--test-scratch-dir" => &mut self.scratch_dir,
            "--test-core-dumps" => &mut self.core_dumps,
            _ => return false,
        };
        *knob = true;
        true
    }

    /// Whether any knob is on.
    pub fn any(&self) -> bool {
        *self != Self::default()
    }

    /// Whether the environment allows knobs ([`ENABLE_ENV`] is exactly `1`).
    pub fn enabled_by_environment() -> bool {
        std::env::var_os(ENABLE_ENV).is_some_and(|v| v == "1")
    }

    /// The errno [`SECCOMP_ERRNO_ENV`] asks for, when [`ENABLE_ENV`] is `1` too; `None` when
    /// either is unset, or the value is not an errno from 1 to 4095 (seccomp's range for
    /// SECCOMP_RET_ERRNO data, seccomp(2)).
    pub fn seccomp_errno_from_environment() -> Option<i32> {
        if !Self::enabled_by_environment() {
            return None;
        }
        let value = std::env::var(SECCOMP_ERRNO_ENV).ok()?;
        value
            .parse()
            .ok()
            .filter(|errno| (1..=4095).contains(errno))
    }

    /// Changes the resource limits as the knobs say: RLIMIT_CORE left out.
    pub fn relax_rlimits(&self, limits: &mut Vec<Limit>) {
        if self.core_dumps {
            limits.retain(|l| l.resource != libc::RLIMIT_CORE);
        }
    }

    /// Changes the mount plan of `rootfs` as the knobs say: /tmp without noexec; a scratch
    /// tmpfs (nosuid, nodev, exec allowed, 1 MiB) made right after the /dev tmpfs.
    pub fn relax_mounts(&self, rootfs: &Path, steps: &mut Vec<Step>) {
        let tmp = rootfs.join("tmp");
        let dev = rootfs.join("dev");
        if self.exec_tmp {
            for step in steps.iter_mut() {
                if let Step::Tmpfs { target, flags, .. } = step
                    && *target == tmp
                {
                    *flags &= !libc::MS_NOEXEC;
                }
            }
        }
        if self.scratch_dir {
            let at = steps
                .iter()
                .position(|s| matches!(s, Step::Tmpfs { target, .. } if *target == dev))
                .map_or(steps.len(), |i| i + 1);
            let scratch: PathBuf = rootfs.join(SCRATCH_DIR.trim_start_matches('/'));
            steps.splice(
                at..at,
                [
                    Step::Directory {
                        path: scratch.clone(),
                    },
                    Step::Tmpfs {
                        target: scratch,
                        size: 1 << 20,
                        inodes: 1024,
                        mode: 0o1777,
                        flags: libc::MS_NOSUID | libc::MS_NODEV,
                    },
                ],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mounts;

    #[test]
    fn without_knobs_the_mount_plan_is_unchanged_and_each_knob_changes_only_its_part() {
        let root = Path::new("/r");
        let shipped = mounts::plan(root, 1 << 20);
        let mut plan = shipped.clone();
        TestKnobs::default().relax_mounts(root, &mut plan);
        assert_eq!(plan, shipped);

        let mut knobs = TestKnobs::default();
        for option in TestKnobs::OPTIONS {
            assert!(knobs.set(option), "{option}");
        }
        assert!(!knobs.set("--rootfs"));
        let mut plan = shipped.clone();
        knobs.relax_mounts(root, &mut plan);
        assert_eq!(plan.len(), shipped.len() + 2);
        let config = crate::Config::new(root, vec!["/p".into()]);
        let mut limits = crate::rlimits::plan(&config);
        let count = limits.len();
        TestKnobs::default().relax_rlimits(&mut limits);
        assert_eq!(limits.len(), count);
        knobs.relax_rlimits(&mut limits);
        assert_eq!(limits.len(), count - 1);
        assert!(!limits.iter().any(|l| l.resource == libc::RLIMIT_CORE));
        assert!(plan.iter().any(|s| matches!(s,
            Step::Tmpfs { target, flags, .. } if target == Path::new("/r/tmp") && flags & libc::MS_NOEXEC == 0)));
        assert!(plan.iter().any(|s| matches!(s,
            Step::Tmpfs { target, flags, .. } if target == Path::new("/r/dev/scratch") && flags & libc::MS_NOEXEC == 0)));
    }
}
