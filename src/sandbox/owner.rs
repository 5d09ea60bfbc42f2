//! Who made a run's cgroup or container, and whether that process is gone: one name format
//! and one stray rule for native run cgroups, Docker containers and doctor's probe cgroup.
//!
//! A run is named `mcp-code-mode-<pid>-<start>-<pidns>-<boot>-<seq>` ([`RunName`]):
//! - `pid`: the owner's pid, as its own pid namespace numbers it;
//! - `start`: the owner's start time, field 22 of `/proc/<pid>/stat` (clock ticks since
//!   boot; proc(5)), so a reused pid is told apart from the owner;
//! - `pidns`: the inode of the owner's pid namespace (`/proc/self/ns/pid`, namespaces(7));
//! - `boot`: the first 8 hex digits of `/proc/sys/kernel/random/boot_id` (random(4)), so a
//!   container kept across a reboot is known to have lost its owner;
//! - `seq`: a counter of this process, so names are unique among its live runs.
//!
//! A value that cannot be read is written as `unknown`, and no judgement rests on it. The
//! owner is dead ([`Owner::is_dead`]) when it ran in another boot, or in our boot and our
//! pid namespace but no process with that pid and start time exists. An owner in another
//! pid namespace is never judged dead: we cannot see its processes.

use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// What every run name starts with.
pub(crate) const RUN_PREFIX: &str = "mcp-code-mode-";

/// The process that made a run cgroup or container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// Its pid, in its pid namespace.
    pub pid: u32,
    /// Its start time in clock ticks since boot (proc(5), `/proc/<pid>/stat` field 22).
    pub start: Option<u64>,
    /// The inode number of its pid namespace.
    pub pidns: Option<u64>,
    /// The first 8 hex digits of its boot id.
    pub boot: Option<String>,
}

/// One value of an owner or `unknown`.
fn field<T: fmt::Display>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| "unknown".into(), T::to_string)
}

impl fmt::Display for Owner {
    /// `<pid>-<start>-<pidns>-<boot>`, each `unknown` when it could not be read.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}-{}-{}-{}",
            self.pid,
            field(&self.start),
            field(&self.pidns),
            field(&self.boot)
        )
    }
}

/// The text is not `<pid>-<start>-<pidns>-<boot>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an owner (<pid>-<start>-<pidns>-<boot>): {0:?}")]
pub struct NotAnOwner(String);

impl FromStr for Owner {
    type Err = NotAnOwner;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || NotAnOwner(text.to_owned());
        let mut parts = text.split('-');
        let (Some(pid), Some(start), Some(pidns), Some(boot), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(bad());
        };
        fn known<T: FromStr>(v: &str) -> Result<Option<T>, ()> {
            match v {
                "unknown" => Ok(None),
                v => v.parse().map(Some).map_err(|_| ()),
            }
        }
        let boot = match boot {
            "unknown" => None,
            b if b.len() == 8 && b.bytes().all(|c| c.is_ascii_hexdigit()) => Some(b.to_owned()),
            _ => return Err(bad()),
        };
        Ok(Owner {
            pid: pid.parse().map_err(|_| bad())?,
            start: known(start).map_err(|()| bad())?,
            pidns: known(pidns).map_err(|()| bad())?,
            boot,
        })
    }
}

impl Owner {
    /// This process (read once, then cached: none of the values can change).
    pub fn current() -> &'static Owner {
        static CURRENT: OnceLock<Owner> = OnceLock::new();
        CURRENT.get_or_init(|| {
            let pid = std::process::id();
            Owner {
                pid,
                start: start_time(pid),
                pidns: our_pidns(),
                boot: our_boot(),
            }
        })
    }

    /// Whether this owner is certainly gone (see the module docs for the rule).
    pub fn is_dead(&self) -> bool {
        let ours = Owner::current();
        if let (Some(theirs), Some(ours)) = (&self.boot, &ours.boot)
            && theirs != ours
        {
            return true;
        }
        match (self.pidns, ours.pidns) {
            (Some(theirs), Some(ours)) if theirs == ours => {}
            _ => return false,
        }
        match (start_time(self.pid), self.start) {
            (None, _) => true,
            (Some(now), Some(then)) => now != then,
            (Some(_), None) => false,
        }
    }
}

/// Field 22 of /proc/<pid>/stat (start time in clock ticks since boot), or `None` when the
/// process does not exist.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields resume after the
    // last ')'. Field 3 is the first after it, so field 22 is the 20th.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The inode of our pid namespace: `/proc/self/ns/pid` reads `pid:[<inode>]`.
fn our_pidns() -> Option<u64> {
    let link = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let link = link.to_str()?;
    link.strip_prefix("pid:[")?.strip_suffix(']')?.parse().ok()
}

/// The first 8 hex digits of this boot's id.
fn our_boot() -> Option<String> {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let hex: String = id.chars().filter(char::is_ascii_hexdigit).take(8).collect();
    (hex.len() == 8).then_some(hex)
}

/// The name of one run's cgroup or container (see the module docs for the format).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunName {
    /// Who made it.
    pub owner: Owner,
    /// Which of the owner's runs.
    pub seq: u64,
}

impl RunName {
    /// A fresh name for a run of this process.
    pub fn next() -> RunName {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        RunName {
            owner: Owner::current().clone(),
            seq: SEQ.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The run named `name`, or `None` when `name` is not a run name (another program's
    /// cgroup or container, or our host leaf).
    pub fn parse(name: &str) -> Option<RunName> {
        let rest = name.strip_prefix(RUN_PREFIX)?;
        let (owner, seq) = rest.rsplit_once('-')?;
        Some(RunName {
            owner: owner.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    /// Whether `name` is a run of a process that is certainly gone.
    pub fn is_stray(name: &str) -> bool {
        RunName::parse(name).is_some_and(|run| run.owner.is_dead())
    }
}

impl fmt::Display for RunName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{RUN_PREFIX}{}-{}", self.owner, self.seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours() -> Owner {
        Owner::current().clone()
    }

    #[test]
    fn a_run_name_reads_back_as_the_same_owner_and_sequence() {
        let name = RunName::next();
        let text = name.to_string();
        assert!(
            text.starts_with(&format!("mcp-code-mode-{}-", std::process::id())),
            "{text}"
        );
        assert_eq!(RunName::parse(&text), Some(name));
        let unknown = RunName {
            owner: Owner {
                pid: 7,
                start: None,
                pidns: None,
                boot: None,
            },
            seq: 3,
        };
        assert_eq!(
            unknown.to_string(),
            "mcp-code-mode-7-unknown-unknown-unknown-3"
        );
        assert_eq!(RunName::parse(&unknown.to_string()), Some(unknown));
    }

    #[test]
    fn only_run_names_have_an_owner() {
        for other in [
            "mcp-code-mode-host",
            "mcp-code-mode-123-4",
            "mcp-code-mode-probe-123",
            "mcp-code-mode-rootfs",
            "other-1-2-3-abcdef01-0",
            "mcp-code-mode-1-2-3-xyz-0",
            "mcp-code-mode-1-2-3-abcdef01-",
            "mcp-code-mode-1-2-3-abcdef01-0-9",
        ] {
            assert_eq!(RunName::parse(other), None, "{other}");
        }
    }

    #[test]
    fn we_are_alive_and_an_owner_without_its_process_is_dead() {
        let me = ours();
        assert!(me.start.is_some() && me.pidns.is_some() && me.boot.is_some());
        assert!(!me.is_dead());
        assert!(!RunName::is_stray(&RunName::next().to_string()));
        // Our pid with another start time: the pid was reused, the owner is dead.
        let reused = Owner {
            start: me.start.map(|s| s + 1),
            ..me.clone()
        };
        assert!(reused.is_dead());
        // A pid above pid_max never exists.
        let gone = Owner {
            pid: u32::MAX,
            ..me.clone()
        };
        assert!(gone.is_dead());
        assert!(RunName::is_stray(
            &RunName {
                owner: gone.clone(),
                seq: 0
            }
            .to_string()
        ));
        // Another boot: dead.
        let before_reboot = Owner {
            boot: Some(if me.boot.as_deref() == Some("00000000") {
                "00000001".into()
            } else {
                "00000000".into()
            }),
            ..me.clone()
        };
        assert!(before_reboot.is_dead());
        // Another pid namespace, or one we cannot read: we cannot tell, so alive.
        let elsewhere = Owner {
            pidns: me.pidns.map(|n| n + 1),
            ..gone.clone()
        };
        assert!(!elsewhere.is_dead());
        assert!(
            !Owner {
                pidns: None,
                ..gone
            }
            .is_dead()
        );
        assert!(!RunName::is_stray("garbage"));
    }

    #[test]
    fn the_start_time_is_read_after_the_command_name() {
        let ours = start_time(std::process::id()).expect("our own stat");
        assert!(ours > 0);
        assert_eq!(start_time(u32::MAX), None);
    }
}
