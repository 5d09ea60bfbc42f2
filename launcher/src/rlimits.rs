//! Stage 6: resource limits, as a list ([`plan`]) and its installer ([`install`]).
//!
//! Soft and hard limits are set equal, so the program cannot raise them again. A limit is
//! never raised above the hard limit the launcher inherited (that would need CAP_SYS_RESOURCE
//! in the initial user namespace). Sources: getrlimit(2); RLIMIT_NPROC is counted per user
//! namespace since Linux 5.14, so 64 holds per sandbox.

use crate::args::Config;
use crate::sys;

/// One limit: the resource (RLIMIT_*), its name for messages, and the value (soft = hard).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The RLIMIT_* constant.
    pub resource: libc::__rlimit_resource_t,
    /// Its name, e.g. "RLIMIT_NPROC".
    pub name: &'static str,
    /// Soft and hard limit, in the resource's unit (bytes, count, or CPU seconds).
    pub value: u64,
}

/// Stack size limit, in bytes: 8 MiB, glibc's usual default.
pub const STACK_BYTES: u64 = 8 * 1024 * 1024;

/// Signals that may be queued at once (RLIMIT_SIGPENDING). The count is a per-user counter
/// shared with the host user (the caller, or root): every signal queued inside is charged
/// to each user namespace up to the initial one, so a low limit here keeps the host user's
/// count out of reach (getrlimit(2), user_namespaces(7)). CPython queues none of its own.
pub const SIGPENDING: u64 = 64;

/// RLIMIT_AS is this many times RLIMIT_DATA. Address space is reserved far beyond what is
/// used: every thread's stack (RLIMIT_STACK, 8 MiB) and glibc's per-thread malloc arenas
/// (64 MiB reserved each, up to 8 per CPU). Measured with DATA at 256 MiB, a Python process
/// starts 6 threads that allocate at 1x, 13 at 2x, 14 at 4x (docs/threat-model.md). At 4x
/// one process still cannot map more than 4 x --memory-rlimit in all, whatever the kind of
/// mapping (shared, grows-down, file).
pub const ADDRESS_SPACE_PER_DATA: u64 = 4;

/// Bytes of POSIX message queues (RLIMIT_MSGQUEUE): none. mq_open(3) is also refused by
/// seccomp; the limit keeps the per-user byte count untouched even if that changed.
pub const MSGQUEUE_BYTES: u64 = 0;

/// Setting a limit failed.
#[derive(Debug, thiserror::Error)]
pub enum RlimitError {
    /// setrlimit(2) or getrlimit(2) failed.
    #[error("failed to set {name} to {value}: {source}")]
    Set {
        name: &'static str,
        value: u64,
        source: std::io::Error,
    },
}

/// The limits for `cfg`: NPROC, NOFILE, FSIZE, CORE 0, STACK 8 MiB, SIGPENDING 64,
/// MSGQUEUE 0, then DATA and AS (only with --memory-rlimit) and CPU (only with
/// --cpu-seconds). RLIMIT_DATA alone misses shared anonymous and grows-down mappings;
/// RLIMIT_AS bounds every mapping of one process (threads' stacks included).
pub fn plan(cfg: &Config) -> Vec<Limit> {
    let limit = |resource, name, value| Limit {
        resource,
        name,
        value,
    };
    let mut limits = vec![
        limit(libc::RLIMIT_NPROC, "RLIMIT_NPROC", cfg.nproc),
        limit(libc::RLIMIT_NOFILE, "RLIMIT_NOFILE", cfg.nofile),
        limit(libc::RLIMIT_FSIZE, "RLIMIT_FSIZE", cfg.fsize),
        limit(libc::RLIMIT_CORE, "RLIMIT_CORE", 0),
        limit(libc::RLIMIT_STACK, "RLIMIT_STACK", STACK_BYTES),
        limit(libc::RLIMIT_SIGPENDING, "RLIMIT_SIGPENDING", SIGPENDING),
        limit(libc::RLIMIT_MSGQUEUE, "RLIMIT_MSGQUEUE", MSGQUEUE_BYTES),
    ];
    if let Some(bytes) = cfg.memory_rlimit {
        limits.push(limit(libc::RLIMIT_DATA, "RLIMIT_DATA", bytes));
        limits.push(limit(
            libc::RLIMIT_AS,
            "RLIMIT_AS",
            bytes.saturating_mul(ADDRESS_SPACE_PER_DATA),
        ));
    }
    if let Some(seconds) = cfg.cpu_seconds {
        limits.push(limit(libc::RLIMIT_CPU, "RLIMIT_CPU", seconds));
    }
    limits
}

/// Sets each limit, soft = hard = min(value, inherited hard limit).
pub fn install(limits: &[Limit]) -> Result<(), RlimitError> {
    for l in limits {
        let err = |source| RlimitError::Set {
            name: l.name,
            value: l.value,
            source,
        };
        let (_, hard) = sys::get_rlimit(l.resource).map_err(err)?;
        let value = l.value.min(hard);
        sys::set_rlimit(l.resource, value, value).map_err(err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::{config, in_child};

    #[test]
    fn the_default_limits_match_the_sandbox_contract() {
        let names: Vec<_> = plan(&config()).iter().map(|l| (l.name, l.value)).collect();
        assert_eq!(
            names,
            [
                ("RLIMIT_NPROC", 64),
                ("RLIMIT_NOFILE", 64),
                ("RLIMIT_FSIZE", 16 << 20),
                ("RLIMIT_CORE", 0),
                ("RLIMIT_STACK", 8 << 20),
                ("RLIMIT_SIGPENDING", 64),
                ("RLIMIT_MSGQUEUE", 0),
            ]
        );
    }

    #[test]
    fn data_and_cpu_limits_appear_only_when_asked_for() {
        let cfg = Config {
            memory_rlimit: Some(1 << 28),
            cpu_seconds: Some(3),
            ..config()
        };
        let names: Vec<_> = plan(&cfg).iter().map(|l| l.name).collect();
        assert!(names.ends_with(&["RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_CPU"]));
    }

    #[test]
    fn the_open_file_and_file_size_limits_are_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        let exit = in_child(move || {
            let cfg = Config {
                nofile: 16,
                fsize: 4096,
                ..config()
            };
            install(&plan(&cfg)).unwrap();
            // Positive control: a few files open, a small write fits.
            let mut file = std::fs::File::create(&path).unwrap();
            use std::io::Write;
            file.write_all(&[0; 4096]).unwrap();
            // SIGXFSZ would kill us; CPython ignores it too, so the write fails with EFBIG.
            crate::testutil::ignore_sigxfsz();
            let big = file.write_all(&[0; 1]).map_err(|e| e.raw_os_error());
            let mut held = Vec::new();
            let emfile = loop {
                match std::fs::File::open("/dev/null") {
                    Ok(f) => held.push(f),
                    Err(e) => break e.raw_os_error(),
                }
                if held.len() > 100 {
                    break None;
                }
            };
            match (big, emfile) {
                (Err(Some(libc::EFBIG)), Some(libc::EMFILE)) => 0,
                _ => 1,
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}
