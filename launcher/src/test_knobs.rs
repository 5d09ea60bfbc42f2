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

/// The variable that must be `1` in the launcher's environment for any knob to be accepted.
pub const ENABLE_ENV: &str = "MCP_CODE_MODE_LAUNCHER_TEST_KNOBS";

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
}

impl TestKnobs {
    /// The option names, as the launcher's command line spells them.
    pub const OPTIONS: [&'static str; 4] = [
        "--test-without-landlock",
        "--test-without-seccomp",
        "--test-exec-tmp",
        "--test-scratch-dir",
    ];

    /// Turns on the knob named by `option` (one of [`Self::OPTIONS`]); false if it is none.
    pub fn set(&mut self, option: &str) -> bool {
        let knob = match option {
            "--test-without-landlock" => &mut self.without_landlock,
            "--test-without-seccomp" => &mut self.without_seccomp,
            "--test-exec-tmp" => &mut self.exec_tmp,
            "--test-scratch-dir" => &mut self.scratch_dir,
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
        assert!(plan.iter().any(|s| matches!(s,
            Step::Tmpfs { target, flags, .. } if target == Path::new("/r/tmp") && flags & libc::MS_NOEXEC == 0)));
        assert!(plan.iter().any(|s| matches!(s,
            Step::Tmpfs { target, flags, .. } if target == Path::new("/r/dev/scratch") && flags & libc::MS_NOEXEC == 0)));
    }
}
