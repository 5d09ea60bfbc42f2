//! The launcher's command line: parsed by hand (no clap in the sandbox path), and written by
//! [`Config::to_args`] for the host, so both sides share one typed [`Config`].

use std::ffi::OsString;
use std::path::PathBuf;

/// 1 MiB in bytes.
const MIB: u64 = 1024 * 1024;

/// The sandbox's default limits; the host's run limits (`mcp_code_mode::limits`) are these
/// same constants.
pub mod defaults {
    use super::MIB;

    /// RLIMIT_NPROC: processes and threads.
    pub const NPROC: u64 = 64;
    /// RLIMIT_NOFILE: open files per process.
    pub const NOFILE: u64 = 64;
    /// Size of the /tmp tmpfs, bytes.
    pub const TMP_SIZE: u64 = 16 * MIB;
    /// Inodes of the /tmp tmpfs (its `nr_inodes`): files, directories and symlinks together;
    /// one more gets ENOSPC. Without it the kernel's default (half the host's RAM pages)
    /// applies, and where no memory cgroup counts the tmpfs's inodes and dentries (the
    /// rlimit fallback), empty files alone could take gigabytes of host kernel memory. Each
    /// costs at most about 1.3 KiB of kernel memory with a 255-byte name, so the cap bounds
    /// that to about 10 MiB per sandbox.
    pub const TMP_INODES: u64 = 8192;
    /// RLIMIT_FSIZE, bytes: no file can outgrow /tmp.
    pub const FSIZE: u64 = TMP_SIZE;
    /// The errno seccomp answers denied syscalls with.
    pub const SECCOMP_ERRNO: i32 = libc::EPERM;
}

/// Everything the launcher needs for one sandbox. All sizes are in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--rootfs DIR`: the directory that becomes the read-only root. It must hold empty
    /// directories `tmp`, `dev` and `proc` to mount on.
    pub rootfs: PathBuf,
    /// `--cgroup-procs FILE` (repeatable): cgroup.procs files the launcher joins first.
    pub cgroup_procs: Vec<PathBuf>,
    /// `--memory-rlimit BYTES`: RLIMIT_DATA, used only when no memory cgroup could be had.
    pub memory_rlimit: Option<u64>,
    /// `--nproc N`: RLIMIT_NPROC (default 64), counted per user namespace on kernel >= 5.14.
    pub nproc: u64,
    /// `--nofile N`: RLIMIT_NOFILE (default 64).
    pub nofile: u64,
    /// `--fsize BYTES`: RLIMIT_FSIZE (default 16 MiB).
    pub fsize: u64,
    /// `--cpu-seconds N`: RLIMIT_CPU, optional.
    pub cpu_seconds: Option<u64>,
    /// `--tmp-size BYTES`: size of the /tmp tmpfs (default 16 MiB).
    pub tmp_size: u64,
    /// `--seccomp-errno N`: errno for syscalls the seccomp filter denies (default EPERM).
    pub seccomp_errno: i32,
    /// `--report-fd N`: an inherited socket on which the launcher reports the sandbox's pidfd
    /// and any failure to the host ([`crate::report`]); made close-on-exec at once.
    pub report_fd: Option<i32>,
    /// After `--`: the absolute path of the program inside the new root, then its arguments.
    pub program: Vec<OsString>,
    /// `--test-*` flags: test-only knobs that leave out or relax one layer, accepted only with
    /// `MCP_CODE_MODE_LAUNCHER_TEST_KNOBS=1` in the launcher's environment
    /// ([`crate::test_knobs`]); all off unless given.
    pub test_knobs: crate::test_knobs::TestKnobs,
}

/// A command line the launcher cannot use.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ArgsError {
    /// An option the launcher does not know.
    #[error("failed to parse arguments: unknown option {0:?}")]
    Unknown(OsString),
    /// An option given without its value.
    #[error("failed to parse arguments: {0} needs a value")]
    MissingValue(&'static str),
    /// A value that is not a number in range.
    #[error("failed to parse arguments: {option} expects a number, got {value:?}")]
    NotANumber {
        option: &'static str,
        value: OsString,
    },
    /// `--rootfs` missing.
    #[error("failed to parse arguments: --rootfs DIR is required")]
    NoRootfs,
    /// Nothing after `--`, or a relative program path.
    #[error("failed to parse arguments: expected `-- /absolute/program [args...]`")]
    NoProgram,
    /// A `--test-*` knob without `MCP_CODE_MODE_LAUNCHER_TEST_KNOBS=1` in the environment.
    #[error(
        "failed to parse arguments: {0} is a test-only option (it needs MCP_CODE_MODE_LAUNCHER_TEST_KNOBS=1)"
    )]
    TestKnobNotEnabled(&'static str),
}

impl Config {
    /// A sandbox of `rootfs` running `program` (absolute path inside it, then its arguments)
    /// with the [`defaults`]: no cgroups, no RLIMIT_DATA, no RLIMIT_CPU.
    pub fn new(rootfs: impl Into<PathBuf>, program: Vec<OsString>) -> Self {
        Config {
            rootfs: rootfs.into(),
            cgroup_procs: Vec::new(),
            memory_rlimit: None,
            nproc: defaults::NPROC,
            nofile: defaults::NOFILE,
            fsize: defaults::FSIZE,
            cpu_seconds: None,
            tmp_size: defaults::TMP_SIZE,
            seccomp_errno: defaults::SECCOMP_ERRNO,
            report_fd: None,
            test_knobs: crate::test_knobs::TestKnobs::default(),
            program,
        }
    }

    /// The command line that [`Config::parse`] reads back as this config: every option,
    /// then `--` and the program.
    pub fn to_args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["--rootfs".into(), self.rootfs.clone().into()];
        for file in &self.cgroup_procs {
            args.extend(["--cgroup-procs".into(), file.clone().into()]);
        }
        let mut number = |option: &str, value: Option<u64>| {
            if let Some(value) = value {
                args.extend([option.into(), value.to_string().into()]);
            }
        };
        number("--memory-rlimit", self.memory_rlimit);
        number("--nproc", Some(self.nproc));
        number("--nofile", Some(self.nofile));
        number("--fsize", Some(self.fsize));
        number("--cpu-seconds", self.cpu_seconds);
        number("--tmp-size", Some(self.tmp_size));
        args.extend([
            "--seccomp-errno".into(),
            self.seccomp_errno.to_string().into(),
        ]);
        if let Some(fd) = self.report_fd {
            args.extend(["--report-fd".into(), fd.to_string().into()]);
        }
        for option in crate::test_knobs::TestKnobs::OPTIONS {
            // A knob that is on stays as it is when set again.
            let mut with = self.test_knobs;
            with.set(option);
            if with == self.test_knobs {
                args.push(option.into());
            }
        }
        args.push("--".into());
        args.extend(self.program.iter().cloned());
        args
    }

    /// Parses the arguments that follow `__launcher`.
    pub fn parse(args: impl Iterator<Item = OsString>) -> Result<Self, ArgsError> {
        let mut args = args.peekable();
        let mut rootfs = None;
        let mut cfg = Config::new(PathBuf::new(), Vec::new());
        while let Some(arg) = args.next() {
            let Some(name) = arg.to_str() else {
                return Err(ArgsError::Unknown(arg));
            };
            let name: &'static str = match name {
                knob if cfg.test_knobs.set(knob) => {
                    if !crate::test_knobs::TestKnobs::enabled_by_environment() {
                        let name = crate::test_knobs::TestKnobs::OPTIONS
                            .into_iter()
                            .find(|o| *o == knob)
                            .unwrap_or("--test-*");
                        return Err(ArgsError::TestKnobNotEnabled(name));
                    }
                    continue;
                }
                "--" => {
                    cfg.program = args.by_ref().collect();
                    break;
                }
                "--rootfs" => "--rootfs",
                "--cgroup-procs" => "--cgroup-procs",
                "--memory-rlimit" => "--memory-rlimit",
                "--nproc" => "--nproc",
                "--nofile" => "--nofile",
                "--fsize" => "--fsize",
                "--cpu-seconds" => "--cpu-seconds",
                "--tmp-size" => "--tmp-size",
                "--seccomp-errno" => "--seccomp-errno",
                "--report-fd" => "--report-fd",
                _ => return Err(ArgsError::Unknown(arg)),
            };
            let value = args.next().ok_or(ArgsError::MissingValue(name))?;
            let number = || -> Result<u64, ArgsError> {
                value
                    .to_str()
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| ArgsError::NotANumber {
                        option: name,
                        value: value.clone(),
                    })
            };
            match name {
                "--rootfs" => rootfs = Some(PathBuf::from(&value)),
                "--cgroup-procs" => cfg.cgroup_procs.push(PathBuf::from(&value)),
                "--memory-rlimit" => cfg.memory_rlimit = Some(number()?),
                "--nproc" => cfg.nproc = number()?,
                "--nofile" => cfg.nofile = number()?,
                "--fsize" => cfg.fsize = number()?,
                "--cpu-seconds" => cfg.cpu_seconds = Some(number()?),
                "--tmp-size" => cfg.tmp_size = number()?,
                "--report-fd" => {
                    cfg.report_fd = Some(
                        i32::try_from(number()?)
                            .ok()
                            .filter(|fd| *fd > 2)
                            .ok_or_else(|| ArgsError::NotANumber {
                                option: name,
                                value: value.clone(),
                            })?,
                    )
                }
                _ => {
                    cfg.seccomp_errno = i32::try_from(number()?)
                        .ok()
                        .filter(|e| (1..4096).contains(e))
                        .ok_or_else(|| ArgsError::NotANumber {
                            option: name,
                            value: value.clone(),
                        })?
                }
            }
        }
        cfg.rootfs = rootfs.ok_or(ArgsError::NoRootfs)?;
        match cfg.program.first() {
            Some(p) if p.as_encoded_bytes().starts_with(b"/") => Ok(cfg),
            _ => Err(ArgsError::NoProgram),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, ArgsError> {
        Config::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn defaults_match_the_sandbox_contract() {
        let cfg = parse(&["--rootfs", "/r", "--", "/usr/bin/python3", "-I"]).unwrap();
        assert_eq!(cfg.rootfs, PathBuf::from("/r"));
        assert_eq!((cfg.nproc, cfg.nofile), (64, 64));
        assert_eq!((cfg.fsize, cfg.tmp_size), (16 * MIB, 16 * MIB));
        assert_eq!(cfg.seccomp_errno, libc::EPERM);
        assert_eq!((cfg.memory_rlimit, cfg.cpu_seconds), (None, None));
        assert!(cfg.cgroup_procs.is_empty());
        assert_eq!(
            cfg.program,
            vec![OsString::from("/usr/bin/python3"), OsString::from("-I")]
        );
    }

    #[test]
    fn every_option_is_read_and_cgroup_procs_repeats() {
        let cfg = parse(&[
            "--rootfs",
            "/r",
            "--cgroup-procs",
            "/a",
            "--cgroup-procs",
            "/b",
            "--memory-rlimit",
            "268435456",
            "--nproc",
            "10",
            "--nofile",
            "20",
            "--fsize",
            "30",
            "--cpu-seconds",
            "5",
            "--tmp-size",
            "40",
            "--seccomp-errno",
            "77",
            "--report-fd",
            "3",
            "--",
            "/p",
            "--x",
        ])
        .unwrap();
        assert_eq!(
            cfg.cgroup_procs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(cfg.memory_rlimit, Some(268_435_456));
        assert_eq!(
            (cfg.nproc, cfg.nofile, cfg.fsize, cfg.tmp_size),
            (10, 20, 30, 40)
        );
        assert_eq!((cfg.cpu_seconds, cfg.seccomp_errno), (Some(5), 77));
        assert_eq!(cfg.report_fd, Some(3));
        assert_eq!(
            cfg.program,
            vec![OsString::from("/p"), OsString::from("--x")]
        );
    }

    #[test]
    fn test_knobs_are_refused_unless_the_environment_enables_them() {
        if crate::test_knobs::TestKnobs::enabled_by_environment() {
            return; // this process was started with the knobs enabled
        }
        for option in crate::test_knobs::TestKnobs::OPTIONS {
            assert_eq!(
                parse(&["--rootfs", "/r", option, "--", "/p"]),
                Err(ArgsError::TestKnobNotEnabled(option))
            );
        }
        assert!(
            !parse(&["--rootfs", "/r", "--", "/p"])
                .unwrap()
                .test_knobs
                .any()
        );
    }

    #[test]
    fn a_config_reads_back_from_its_own_command_line() {
        let mut full = Config::new("/root fs", vec!["/usr/bin/python3".into(), "-I".into()]);
        full.cgroup_procs = vec![PathBuf::from("/a/cgroup.procs"), PathBuf::from("/b")];
        full.memory_rlimit = Some(256 * MIB);
        full.cpu_seconds = Some(60);
        (full.nproc, full.nofile, full.fsize, full.tmp_size) = (1, 2, 3, 4);
        full.seccomp_errno = libc::ENOSYS;
        full.report_fd = Some(3);
        let bare = Config::new("/r", vec!["/p".into(), "--".into(), "--nproc".into()]);
        for cfg in [full, bare] {
            let args = cfg.to_args();
            assert_eq!(Config::parse(args.into_iter()), Ok(cfg));
        }
        // Test knobs are written too; they read back only where the environment allows them.
        let mut knobs = Config::new("/r", vec!["/p".into()]);
        for option in crate::test_knobs::TestKnobs::OPTIONS {
            knobs.test_knobs.set(option);
        }
        let args = knobs.to_args();
        for option in crate::test_knobs::TestKnobs::OPTIONS {
            assert!(args.contains(&OsString::from(option)), "{option}");
        }
        if crate::test_knobs::TestKnobs::enabled_by_environment() {
            assert_eq!(Config::parse(args.into_iter()), Ok(knobs));
        }
    }

    #[test]
    fn bad_command_lines_are_refused_by_name() {
        assert_eq!(parse(&["--", "/p"]), Err(ArgsError::NoRootfs));
        assert_eq!(parse(&["--rootfs", "/r"]), Err(ArgsError::NoProgram));
        assert_eq!(
            parse(&["--rootfs", "/r", "--", "python3"]),
            Err(ArgsError::NoProgram)
        );
        assert_eq!(
            parse(&["--rootfs"]),
            Err(ArgsError::MissingValue("--rootfs"))
        );
        assert!(matches!(parse(&["--bogus"]), Err(ArgsError::Unknown(_))));
        assert!(matches!(
            parse(&["--rootfs", "/r", "--nproc", "x", "--", "/p"]),
            Err(ArgsError::NotANumber {
                option: "--nproc",
                ..
            })
        ));
        assert!(matches!(
            parse(&["--rootfs", "/r", "--seccomp-errno", "0", "--", "/p"]),
            Err(ArgsError::NotANumber {
                option: "--seccomp-errno",
                ..
            })
        ));
    }
}
