//! Stage 3: uid/gid maps, written by the outer launcher for the sandbox process.
//!
//! Inside, uid and gid 65534 map to the caller's effective ids, or, when the caller is root,
//! to a host id of the sandbox's own: [`ROOT_CALLER_BASE`] plus a keyed permutation of the
//! sandbox's host pid (host_id.rs), so the id is unique among live sandboxes without telling
//! the code its host pid or how many processes the host started between two runs. So a
//! root host never runs sandboxed code as root, and the kernel's per-user counters (pipe
//! buffer pages against `pipe-user-pages-soft`, pending signals, unix descriptors in flight,
//! message queue bytes) that a run fills are charged to no host process and to no other run:
//! with one shared id (host nobody), a run holding pipes up to its fd and process limits left
//! every new pipe of host nobody, and of every concurrent run, at 8 KiB instead of 64 KiB
//! (pipe(7), "/proc/sys/fs/pipe-user-pages-soft"). setgroups(2) is denied
//! first, as an unprivileged map of the gid requires (user_namespaces(7), "Interaction with
//! system calls that change process UIDs or GIDs"). A root caller also drops its supplementary
//! groups before the clone, so the sandbox does not inherit group 0.

use std::path::{Path, PathBuf};

use crate::host_id::{IdKey, IdKeyError, KEY_PATH};
use crate::sys;

/// The uid and gid the sandboxed program runs as, inside its user namespace.
pub const SANDBOX_ID: u32 = 65534;

/// For a root caller, sandbox `pid` runs as host uid and gid `ROOT_CALLER_BASE + P(pid)`,
/// `P` the host's keyed permutation of `0 .. 2^22` (host_id.rs). Host pids stay below 2^22
/// (`PID_MAX_LIMIT`), so the ids lie in 0x7F000000..0x7F400000: above the ranges
/// distributions and systemd hand out (system, regular, dynamic and container users end
/// below 0x70000000) and below 2^31. Two live sandboxes never share an id, since their pids
/// differ and `P` is one permutation for every launcher of the host.
pub const ROOT_CALLER_BASE: u32 = 0x7F00_0000;

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

/// Whom the sandbox's id 65534 maps to on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mapping {
    /// An unprivileged caller: its own effective uid and gid (the only ids it may map).
    Caller { uid: u32, gid: u32 },
    /// A root caller: an id of the sandbox's own, from this key and the sandbox's host pid.
    PerSandbox(IdKey),
}

impl Mapping {
    /// The mapping for a caller with effective ids `(uid, gid)`; a root caller reads the
    /// host's key from [`KEY_PATH`], making it on first use.
    pub fn for_caller(uid: u32, gid: u32) -> Result<Self, IdMapError> {
        if uid == 0 {
            Ok(Self::PerSandbox(IdKey::load_or_create(Path::new(
                KEY_PATH,
            ))?))
        } else {
            Ok(Self::Caller { uid, gid })
        }
    }
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
    /// A root caller's key for its sandboxes' host ids could not be read or made.
    #[error(transparent)]
    Key(#[from] IdKeyError),
}

/// Builds the maps for sandbox `pid` (its host pid) under `mapping`.
pub fn plan(mapping: &Mapping, pid: libc::pid_t) -> IdMaps {
    let (uid, gid) = match mapping {
        Mapping::PerSandbox(key) => {
            let own = ROOT_CALLER_BASE + key.permute(pid.unsigned_abs());
            (own, own)
        }
        Mapping::Caller { uid, gid } => (*uid, *gid),
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
    fn a_root_caller_maps_each_sandbox_to_a_host_id_of_its_own_never_to_root() {
        let key = Mapping::PerSandbox(IdKey::from_bytes([3; 32]));
        let maps = plan(&key, 4321);
        let outside = |m: &IdMaps| -> u32 { m.uid_map.split(' ').nth(1).unwrap().parse().unwrap() };
        assert_eq!(maps.uid_map, maps.gid_map);
        assert!(maps.uid_map.starts_with("65534 ") && maps.uid_map.ends_with(" 1\n"));
        assert_eq!(maps.setgroups, "deny");
        assert_ne!(plan(&key, 4322).uid_map, maps.uid_map);
        // Every pid the kernel hands out (up to PID_MAX_LIMIT - 1) lands in the range.
        for pid in [1, 4321, 4322, (1 << 22) - 1] {
            let id = outside(&plan(&key, pid));
            assert!(
                (ROOT_CALLER_BASE..ROOT_CALLER_BASE + (1 << 22)).contains(&id),
                "{id}"
            );
        }
    }

    #[test]
    fn a_root_callers_host_id_is_not_derived_from_the_pid_alone() {
        // Under one key or another the same pid gets other ids, and no id is base + pid.
        let a = Mapping::PerSandbox(IdKey::from_bytes([1; 32]));
        let b = Mapping::PerSandbox(IdKey::from_bytes([2; 32]));
        assert_ne!(plan(&a, 4321).uid_map, plan(&b, 4321).uid_map);
        assert_ne!(plan(&a, 4321).uid_map, "65534 2130710753 1\n");
    }

    #[test]
    fn an_unprivileged_caller_maps_the_sandbox_to_itself() {
        let maps = plan(
            &Mapping::Caller {
                uid: 1000,
                gid: 1001,
            },
            4321,
        );
        assert_eq!(maps.uid_map, "65534 1000 1\n");
        assert_eq!(maps.gid_map, "65534 1001 1\n");
    }
}
