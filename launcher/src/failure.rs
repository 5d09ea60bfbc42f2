//! What the launcher says about itself, as typed values: its failure before the program runs
//! ([`LaunchFailure`]) and notes about a layer that holds only in part ([`Note`]).
//!
//! Each has one fixed text encoding, written by `encode` and read back by `decode`, so the
//! host matches typed values and never the wording. A failure reads
//! `failed to <step>: <why> (stage <stage>[, errno <n>])`; it travels on the report socket
//! ([`crate::report`]), or, without one, on stderr after [`PREFIX`]; the launcher then exits
//! with [`FAILURE_STATUS`]. A note is a stderr line `launcher: note: ...`.

use std::error::Error;
use std::fmt;

/// The exit status of the launcher when it fails before the program runs (as `env`, `chroot`
/// and container runtimes use it).
pub const FAILURE_STATUS: i32 = 125;

/// The start of every line the launcher writes about itself on stderr.
pub const PREFIX: &str = "launcher: ";

/// The stage that failed, in the order of `run` (launcher/README.md "Stage order").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Reading the command line.
    Args,
    /// Joining the run's cgroups.
    Cgroup,
    /// The death signal, the clone into new namespaces, the start gate, the wait.
    Namespace,
    /// Writing the uid/gid maps, dropping supplementary groups.
    IdMap,
    /// Becoming uid/gid 65534 with hostname `sandbox`.
    Identity,
    /// The mounts and pivot_root.
    Mount,
    /// The resource limits.
    Rlimit,
    /// Closing descriptors, handing the protocol pipes over.
    Fd,
    /// Dropping capabilities.
    Capability,
    /// no_new_privs.
    Privs,
    /// The Landlock ruleset.
    Landlock,
    /// The seccomp filter.
    Seccomp,
    /// Executing the program.
    Exec,
    /// Reporting to the host: sending the sandbox's pidfd, or a report the host cannot read.
    Report,
}

impl Stage {
    /// Every stage, in order.
    pub const ALL: [Stage; 14] = [
        Stage::Args,
        Stage::Cgroup,
        Stage::Namespace,
        Stage::IdMap,
        Stage::Identity,
        Stage::Mount,
        Stage::Rlimit,
        Stage::Fd,
        Stage::Capability,
        Stage::Privs,
        Stage::Landlock,
        Stage::Seccomp,
        Stage::Exec,
        Stage::Report,
    ];

    /// The stage's name in a report line (`mount`, `seccomp`).
    pub fn name(self) -> &'static str {
        match self {
            Stage::Args => "args",
            Stage::Cgroup => "cgroup",
            Stage::Namespace => "namespace",
            Stage::IdMap => "idmap",
            Stage::Identity => "identity",
            Stage::Mount => "mount",
            Stage::Rlimit => "rlimit",
            Stage::Fd => "fd",
            Stage::Capability => "capability",
            Stage::Privs => "privs",
            Stage::Landlock => "landlock",
            Stage::Seccomp => "seccomp",
            Stage::Exec => "exec",
            Stage::Report => "report",
        }
    }

    fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The launcher failed before the program ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchFailure {
    /// Which stage failed.
    pub stage: Stage,
    /// The OS error number behind it, when there is one (errno(3)).
    pub errno: Option<i32>,
    /// "failed to <step>: <why>", one line.
    pub message: String,
}

impl LaunchFailure {
    /// A failure of `stage`; the errno is the first `std::io::Error` in `error`'s chain.
    pub fn new(stage: Stage, error: &(dyn Error + 'static)) -> Self {
        let mut errno = None;
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(code) = e
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::raw_os_error)
            {
                errno = Some(code);
                break;
            }
            next = e.source();
        }
        Self {
            stage,
            errno,
            message: one_line(&error.to_string()),
        }
    }

    /// A report the host could not read as a failure: kept whole, as the message.
    pub fn unreadable(text: &str) -> Self {
        Self {
            stage: Stage::Report,
            errno: None,
            message: one_line(text),
        }
    }

    /// The encoded failure, one line without a newline.
    pub fn encode(&self) -> String {
        let errno = self
            .errno
            .map(|e| format!(", errno {e}"))
            .unwrap_or_default();
        format!("{} (stage {}{errno})", one_line(&self.message), self.stage)
    }

    /// Read an encoded failure back; `None` for any other text.
    pub fn decode(text: &str) -> Option<Self> {
        let rest = text.strip_suffix(')')?;
        let (message, trailer) = rest.rsplit_once(" (stage ")?;
        let (stage, errno) = match trailer.split_once(", errno ") {
            Some((stage, errno)) => (stage, Some(errno.parse().ok()?)),
            None => (trailer, None),
        };
        Some(Self {
            stage: Stage::from_name(stage)?,
            errno,
            message: message.to_owned(),
        })
    }

    /// The stderr line of a launcher without a report socket.
    pub fn stderr_line(&self) -> String {
        format!("{PREFIX}{}", self.encode())
    }
}

impl fmt::Display for LaunchFailure {
    /// `failed to <step>: <why>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error for LaunchFailure {}

/// A layer that holds only in part; the launcher goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// Landlock is not fully enforced: `status` is the landlock crate's `RulesetStatus`
    /// (`PartiallyEnforced`, `NotEnforced`), `abi` the ABI in use, if any.
    Landlock {
        /// How much of the ruleset holds.
        status: String,
        /// The Landlock ABI version in use.
        abi: Option<u32>,
    },
}

impl Note {
    const LANDLOCK: &'static str = "note: landlock ";

    /// The report line, without a trailing newline.
    pub fn encode(&self) -> String {
        match self {
            Note::Landlock { status, abi } => {
                let abi = abi.map_or_else(|| "none".to_owned(), |v| v.to_string());
                format!("{PREFIX}{}{} (abi {abi})", Self::LANDLOCK, one_line(status))
            }
        }
    }

    /// Read one report line back; `None` for any other line.
    pub fn decode(line: &str) -> Option<Self> {
        let rest = line.strip_prefix(PREFIX)?.strip_prefix(Self::LANDLOCK)?;
        let (status, abi) = rest.strip_suffix(')')?.rsplit_once(" (abi ")?;
        let abi = match abi {
            "none" => None,
            v => Some(v.parse().ok()?),
        };
        Some(Note::Landlock {
            status: status.to_owned(),
            abi,
        })
    }

    /// Every note in `output` (the launcher's stderr).
    pub fn find_all(output: &str) -> Vec<Self> {
        output.lines().filter_map(Self::decode).collect()
    }
}

/// `text` on one line: line breaks become spaces.
fn one_line(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_reads_back_as_written() {
        for stage in Stage::ALL {
            for errno in [None, Some(13)] {
                let failure = LaunchFailure {
                    stage,
                    errno,
                    message: "failed to mount /tmp (size 16 MiB): Permission denied (os error 13)"
                        .into(),
                };
                let text = failure.encode();
                assert!(text.starts_with("failed to mount /tmp"), "{text}");
                assert_eq!(LaunchFailure::decode(&text), Some(failure.clone()));
                assert!(
                    failure
                        .stderr_line()
                        .starts_with("launcher: failed to mount /tmp")
                );
            }
        }
    }

    #[test]
    fn the_errno_is_found_in_the_error_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("failed to clone: {0}")]
        struct Wrapped(#[source] std::io::Error);
        let failure = LaunchFailure::new(
            Stage::Namespace,
            &Wrapped(std::io::Error::from_raw_os_error(libc::EPERM)),
        );
        assert_eq!(failure.errno, Some(libc::EPERM));
        assert!(failure.message.starts_with("failed to clone: "));
        let plain = LaunchFailure::new(Stage::Args, &std::fmt::Error);
        assert_eq!(plain.errno, None);
    }

    #[test]
    fn other_lines_are_not_failures() {
        for line in [
            "",
            "failed to mount /tmp",
            "x (stage nonsense)",
            "x (stage mount, errno many)",
            "x (stage mount, errno 1",
            "launcher: note: landlock PartiallyEnforced (abi 5)",
        ] {
            assert_eq!(LaunchFailure::decode(line), None, "{line}");
        }
    }

    #[test]
    fn a_message_with_line_breaks_stays_one_line() {
        let failure = LaunchFailure {
            stage: Stage::Exec,
            errno: None,
            message: "failed to exec \"/a\nb\"".into(),
        };
        let text = failure.encode();
        assert_eq!(text.lines().count(), 1);
        assert_eq!(LaunchFailure::decode(&text).unwrap().stage, Stage::Exec);
        let unreadable = LaunchFailure::unreadable("no\nstage");
        assert_eq!(
            (unreadable.stage, unreadable.message.as_str()),
            (Stage::Report, "no stage")
        );
    }

    #[test]
    fn a_landlock_note_reads_back_as_written() {
        for abi in [None, Some(5)] {
            let note = Note::Landlock {
                status: "PartiallyEnforced".into(),
                abi,
            };
            assert_eq!(Note::decode(&note.encode()), Some(note.clone()));
            assert_eq!(Note::find_all(&format!("x\n{}\n", note.encode())), [note]);
        }
    }
}
