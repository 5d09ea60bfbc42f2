//! Stage 3: uid/gid maps, written by the outer launcher for the sandbox process.
//!
//! Inside, uid and gid 65534 map to the caller's effective ids, or to host 65534 when the
//! caller is root (so a root host never runs sandboxed code as root). setgroups(2) is denied
//! first, as an unprivileged map of the gid requires (user_namespaces(7), "Interaction with
//! system calls that change process UIDs or GIDs"). A root caller also drops its supplementary
//! groups before the clone, so the sandbox does not inherit group 0.

use std::path::PathBuf;

use crate::sys;

/// The uid and gid the sandboxed program runs as, inside its user namespace.
pub const SANDBOX_ID: u32 = 65534;

/// The three files the outer launcher writes under /proc/PID, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMaps {
    /// Content for /proc/PID/setgroups: always "deny".
    pub setgroups: &'static str,
    /// One line for /proc/PID/gid_map: "inside outside count".
    pub gid_map: String,
    /// One line for /proc/PID/uid_map: "inside outside count".
    pub uid_map: String,
}

/// Writing the maps or dropping groups failed.
#[derive(Debug, thiserror::Error)]
pub enum IdMapError {
    /// A write to /proc/PID/{setgroups,gid_map,uid_map} failed.
    #[error("failed to write {path}: {source} (a non-root caller can map only its own uid/gid)")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// setgroups(0, NULL) as root failed.
    #[error("failed to drop supplementary groups: {0}")]
    Groups(#[source] std::io::Error),
}

/// Builds the maps for a caller with effective ids `(uid, gid)`.
pub fn plan(caller_uid: u32, caller_gid: u32) -> IdMaps {
    let (uid, gid) = if caller_uid == 0 {
        (SANDBOX_ID, SANDBOX_ID)
    } else {
        (caller_uid, caller_gid)
    };
    IdMaps {
        setgroups: "deny",
        gid_map: format!("{SANDBOX_ID} {gid} 1\n"),
        uid_map: format!("{SANDBOX_ID} {uid} 1\n"),
    }
}

/// The caller's effective ids (what [`plan`] takes).
pub fn caller() -> (u32, u32) {
    sys::effective_ids()
}

/// Before the clone: a root caller drops its supplementary groups (a non-root caller cannot,
/// and keeps them; they cannot be changed inside once setgroups is denied).
pub fn drop_groups_if_root(caller_uid: u32) -> Result<(), IdMapError> {
    if caller_uid == 0 {
        sys::drop_supplementary_groups().map_err(IdMapError::Groups)?;
    }
    Ok(())
}

/// Writes `maps` for process `pid`: setgroups, then gid_map, then uid_map.
pub fn write(pid: libc::pid_t, maps: &IdMaps) -> Result<(), IdMapError> {
    let proc_dir = PathBuf::from(format!("/proc/{pid}"));
    for (file, content) in [
        ("setgroups", maps.setgroups),
        ("gid_map", maps.gid_map.as_str()),
        ("uid_map", maps.uid_map.as_str()),
    ] {
        let path = proc_dir.join(file);
        std::fs::write(&path, content).map_err(|source| IdMapError::Write { path, source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_caller_maps_the_sandbox_to_host_nobody_never_to_root() {
        let maps = plan(0, 0);
        assert_eq!(maps.uid_map, "65534 65534 1\n");
        assert_eq!(maps.gid_map, "65534 65534 1\n");
        assert_eq!(maps.setgroups, "deny");
    }

    #[test]
    fn an_unprivileged_caller_maps_the_sandbox_to_itself() {
        let maps = plan(1000, 1001);
        assert_eq!(maps.uid_map, "65534 1000 1\n");
        assert_eq!(maps.gid_map, "65534 1001 1\n");
    }
}
