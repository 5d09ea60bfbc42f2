//! Stage 5a: who the sandbox is: uid/gid 65534 and hostname "sandbox".
//!
//! The switch to 65534 happens right after the id maps exist and before the mounts, not after
//! them: for a root caller the clone child's own uid (host 0) is unmapped inside, and the
//! kernel refuses to create inodes (the /dev mount points, anything in /tmp) for an unmapped
//! owner (EOVERFLOW, see `fsuidgid_has_mapping` in fs/namei.c). Capabilities survive the
//! switch: the namespace's root uid 0 is not mapped, so the setuid(2) capability fixups
//! (capabilities(7), "Effect of user ID changes on capabilities") never apply; stage 7 drops
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
    Gid(std::io::Error),
    /// setresuid(2) failed.
    #[error("failed to setresuid to {SANDBOX_ID}: {0}")]
    Uid(std::io::Error),
    /// sethostname(2) failed.
    #[error("failed to sethostname {HOSTNAME:?}: {0}")]
    Hostname(std::io::Error),
}

/// Sets real, effective and saved gid then uid to 65534 (gid first: after the uid change
/// setresgid may no longer be allowed), then the hostname.
pub fn become_sandbox_user() -> Result<(), IdentityError> {
    sys::set_all_gids(SANDBOX_ID).map_err(IdentityError::Gid)?;
    sys::set_all_uids(SANDBOX_ID).map_err(IdentityError::Uid)?;
    sys::sethostname(HOSTNAME).map_err(IdentityError::Hostname)
}
