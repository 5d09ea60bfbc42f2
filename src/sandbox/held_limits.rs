//! Which resource limits hold in one sandbox, as a run reports them (the `limits:` line of
//! `mcp-code-mode exec`, the `mcp-code-mode/limits` key of a `run_python` result's `_meta`,
//! doctor's sandbox line).

use std::fmt;

use crate::limits::{
    CPUS, DISK_BYTES_PER_SEC, DISK_OPS_PER_SEC, MAX_OPEN_FILES, MAX_PIDS, MEMORY_BYTES,
};

/// Which resource limits hold in one sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeldLimits {
    /// The native backend's cgroup for the run, with the controllers whose limit it holds:
    /// a subset of `memory`, `swap`, `pids`, `cpu`, `io` (disk reads and writes), in that
    /// order.
    Cgroup(Vec<&'static str>),
    /// The native backend without a writable cgroup: the launcher's rlimits only
    /// (`launcher::rlimits`).
    Rlimits,
    /// Docker's own limits on the container.
    Docker,
}

impl fmt::Display for HeldLimits {
    /// `cgroup: memory, swap, pids, cpu`; `rlimits (no writable cgroup): ...`;
    /// `docker: memory 256 MiB, no swap, 64 pids, 1 CPU, nofile 64, disk I/O 32 MiB/s and
    /// 1000 ops/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cgroup(held) => write!(f, "cgroup: {}", held.join(", ")),
            Self::Rlimits => f.write_str(
                "rlimits (no writable cgroup): per process RLIMIT_DATA 256 MiB and RLIMIT_AS \
                 1 GiB (every mapping), RLIMIT_NPROC 64, RLIMIT_NOFILE, RLIMIT_CPU; no disk I/O \
                 limit",
            ),
            Self::Docker => write!(
                f,
                "docker: memory {} MiB, no swap, {MAX_PIDS} pids, {CPUS} CPU, nofile \
                 {MAX_OPEN_FILES}, disk I/O {} MiB/s and {DISK_OPS_PER_SEC} ops/s",
                MEMORY_BYTES >> 20,
                DISK_BYTES_PER_SEC >> 20
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_limits_reads_as_the_run_reports_it() {
        assert_eq!(
            HeldLimits::Cgroup(vec!["memory", "pids", "cpu"]).to_string(),
            "cgroup: memory, pids, cpu"
        );
        assert!(
            HeldLimits::Rlimits
                .to_string()
                .starts_with("rlimits (no writable cgroup): per process RLIMIT_DATA 256 MiB")
        );
        assert_eq!(
            HeldLimits::Docker.to_string(),
            "docker: memory 256 MiB, no swap, 64 pids, 1 CPU, nofile 64, disk I/O 32 MiB/s and \
             1000 ops/s"
        );
    }
}
