//! Stage 4: who the sandbox is: its own session, uid/gid 65534 and hostname "sandbox".
//!
//! The new session comes first: the clone child inherits the host's session and process
//! group, and `kill(0, sig)` (or `kill(-pgid, sig)`) from inside would reach every host
//! process of that group with the same uid; a pid namespace does not stop signals sent by
//! group (only Landlock's signal scope does, on ABI >= 6). setsid(2) puts the sandbox in a
//! group of its own.
//!
//! The switch to 65534 happens right after the id maps exist and before the mounts, not after
//! them: for a root caller the clone child's own uid (host 0) is unmapped inside, and the
//! kernel refuses to create inodes (the /dev mount points, anything in /tmp) for an unmapped
//! owner (EOVERFLOW, see `fsuidgid_has_mapping` in fs/namei.c). Capabilities survive the
//! switch: the namespace's root uid 0 is not mapped, so the setuid(2) capability fixups
//! (capabilities(7), "Effect of user ID changes on capabilities") never apply; stage 8 drops
//! them explicitly.

use crate::idmap::SANDBOX_ID;
use crate::sys;

/// The hostname inside the uts namespace.
pub const HOSTNAME: &str = "sandbox";

/// Changing ids or hostname failed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// setresgid(2) failed.
    #[error("failed to setresgid to {SANDBOX_ID}: {0}")]
    Gid(#[source] std::io::Error),
    /// setresuid(2) failed.
    #[error("failed to setresuid to {SANDBOX_ID}: {0}")]
    Uid(#[source] std::io::Error),
    /// setsid(2) failed.
    #[error("failed to setsid: {0}")]
    Session(#[source] std::io::Error),
    /// sethostname(2) failed.
    #[error("failed to sethostname {HOSTNAME:?}: {0}")]
    Hostname(#[source] std::io::Error),
}

/// Starts a new session, sets real, effective and saved gid then uid to 65534 (gid first:
/// after the uid change setresgid may no longer be allowed), then the hostname.
pub fn become_sandbox_user() -> Result<(), IdentityError> {
    sys::setsid().map_err(IdentityError::Session)?;
    sys::set_all_gids(SANDBOX_ID).map_err(IdentityError::Gid)?;
    sys::set_all_uids(SANDBOX_ID).map_err(IdentityError::Uid)?;
    sys::sethostname(HOSTNAME).map_err(IdentityError::Hostname)
}
