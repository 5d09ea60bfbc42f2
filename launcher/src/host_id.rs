//! The host uid and gid of a root caller's sandbox: a keyed permutation of its host pid.
//!
//! Each live sandbox needs a host id no other live sandbox and no real user has (idmap.rs
//! says why). Its host pid gives the uniqueness: no two live processes share a pid, across
//! every launcher and every serve on the host. But an id that is the pid plus a constant
//! tells the code inside its host pid, which the pid namespace hides, and, between two runs,
//! how many processes the whole host started. So the pid goes through a permutation of the
//! 22-bit pid range (pids stay below `PID_MAX_LIMIT`, 2^22) under a secret key: distinct pids
//! still give distinct ids, while an id says nothing of the pid, nor the difference of two
//! ids anything of the difference of their pids, to whoever lacks the key.
//!
//! The permutation is an 8-round balanced Feistel network on two 11-bit halves whose round
//! function is SHA-256 of the key, the round number and the half. The key is 32 random bytes
//! in [`KEY_PATH`], shared by every launcher of the host (it must be one key: two keys could
//! map two live pids to one id); the first launcher to need it makes it, from
//! `/dev/urandom`, and publishes it with link(2), which fails if another was first, so all
//! agree on the key that got there first. The file is root's, mode 0600, in a directory of
//! mode 0700 outside every sandbox's root.

use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where the key lives: 32 bytes, root's, mode 0600 (created on first use).
pub const KEY_PATH: &str = "/run/mcp-code-mode/sandbox-id.key";

/// The permutation's domain: pids are below 2^22 (`PID_MAX_LIMIT` on 64-bit Linux, proc(5)
/// "/proc/sys/kernel/pid_max"), so ids are `base + 0 ..= base + 2^22 - 1`.
pub const PID_BITS: u32 = 22;

const HALF_BITS: u32 = PID_BITS / 2;
const HALF_MASK: u32 = (1 << HALF_BITS) - 1;
const ROUNDS: u8 = 8;
const KEY_LEN: usize = 32;

/// The secret of the permutation: 32 bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct IdKey([u8; KEY_LEN]);

impl std::fmt::Debug for IdKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IdKey(..)")
    }
}

/// Reading or making the key failed.
#[derive(Debug, thiserror::Error)]
pub enum IdKeyError {
    /// A file system step on the key or its directory failed.
    #[error("failed to {step} {path}: {source}")]
    Io {
        step: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The key file is not a 32-byte regular file that only root can read and write.
    #[error(
        "failed to use the sandbox id key {path}: {why} (remove it; the next run makes a new one)"
    )]
    Unsafe { path: PathBuf, why: String },
}

impl IdKey {
    /// A key from the given bytes (tests, and the key file's content).
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// The key at `path`, made (32 bytes of `/dev/urandom`) if there is none yet. The file
    /// must be a regular file of 32 bytes owned by the caller with no group or other access,
    /// else [`IdKeyError::Unsafe`]; symlinks are not followed.
    pub fn load_or_create(path: &Path) -> Result<Self, IdKeyError> {
        match Self::load(path) {
            Err(IdKeyError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Self::create(path)?;
                Self::load(path)
            }
            other => other,
        }
    }

    fn load(path: &Path) -> Result<Self, IdKeyError> {
        let io = |step, source| IdKeyError::Io {
            step,
            path: path.to_owned(),
            source,
        };
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| io("open", e))?;
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        let unsafe_key = |why: String| IdKeyError::Unsafe {
            path: path.to_owned(),
            why,
        };
        if !meta.is_file() || meta.len() != KEY_LEN as u64 {
            return Err(unsafe_key(format!("not a regular file of {KEY_LEN} bytes")));
        }
        // The key must be the caller's (root's) alone.
        let owner = crate::sys::effective_ids().0;
        if meta.uid() != owner || meta.mode() & 0o077 != 0 {
            return Err(unsafe_key(format!(
                "owned by uid {} with mode {:o}; it must be uid {owner}'s with mode 0600",
                meta.uid(),
                meta.mode() & 0o7777
            )));
        }
        let mut bytes = [0u8; KEY_LEN];
        file.read_exact(&mut bytes).map_err(|e| io("read", e))?;
        Ok(Self(bytes))
    }

    fn create(path: &Path) -> Result<(), IdKeyError> {
        let io = |step, path: &Path, source| IdKeyError::Io {
            step,
            path: path.to_owned(),
            source,
        };
        let dir = path.parent().unwrap_or(Path::new("/"));
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io("create the directory", dir, e))?;
        let mut bytes = [0u8; KEY_LEN];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| io("read", Path::new("/dev/urandom"), e))?;
        // A file of this launcher's own, complete before link(2) makes it the key, so no
        // launcher ever reads a half-written key.
        let tmp = dir.join(format!(".sandbox-id.key.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => Ok(()),
            // Another launcher published its key first: that one is the key.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(io("create", path, e)),
        }
    }

    /// The permutation of `0 .. 2^22` under this key: `pid` (taken modulo 2^22; host pids
    /// are always below it) to an offset in the same range. Distinct pids below 2^22 give
    /// distinct offsets.
    pub fn permute(&self, pid: u32) -> u32 {
        let (mut left, mut right) = ((pid >> HALF_BITS) & HALF_MASK, pid & HALF_MASK);
        for round in 0..ROUNDS {
            let next = left ^ self.round(round, right);
            left = right;
            right = next;
        }
        (left << HALF_BITS) | right
    }

    fn round(&self, round: u8, half: u32) -> u32 {
        let digest = Sha256::new()
            .chain_update(self.0)
            .chain_update([round])
            .chain_update(half.to_le_bytes())
            .finalize();
        u32::from_le_bytes([digest[0], digest[1], digest[2], digest[3]]) & HALF_MASK
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> IdKey {
        IdKey::from_bytes([seed; KEY_LEN])
    }

    #[test]
    fn distinct_pids_get_distinct_offsets_within_the_pid_range() {
        let k = key(7);
        let mut seen = std::collections::HashSet::new();
        // A stretch of pids as a busy host hands them out, and the top of the range.
        for pid in (300..20_000).chain((1 << PID_BITS) - 1000..1 << PID_BITS) {
            let offset = k.permute(pid);
            assert!(offset < 1 << PID_BITS, "{pid} -> {offset}");
            assert!(seen.insert(offset), "two pids share offset {offset}");
        }
    }

    #[test]
    fn the_offsets_of_successive_pids_do_not_follow_the_pids() {
        let k = key(9);
        // Under pid + constant every step would be +1; a random permutation almost never
        // steps by the pids' own difference.
        let following = (1000..2000)
            .filter(|&pid| k.permute(pid + 1).wrapping_sub(k.permute(pid)) == 1)
            .count();
        assert!(
            following <= 2,
            "{following} of 1000 steps followed the pids"
        );
        assert_ne!(k.permute(4321), 4321);
    }

    #[test]
    fn another_key_gives_other_offsets() {
        let same = (1000..1100)
            .filter(|&pid| key(1).permute(pid) == key(2).permute(pid))
            .count();
        assert!(same <= 2, "{same} of 100 pids map alike under two keys");
    }

    #[test]
    fn the_key_is_made_once_and_read_back_by_every_later_launcher() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/sandbox-id.key");
        let first = IdKey::load_or_create(&path).unwrap();
        assert_eq!(IdKey::load_or_create(&path).unwrap(), first);
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o600);
        assert_eq!(meta.len(), KEY_LEN as u64);
        let dir_mode = std::fs::metadata(path.parent().unwrap()).unwrap().mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        // No stray temp file is left beside it.
        assert_eq!(
            std::fs::read_dir(path.parent().unwrap()).unwrap().count(),
            1
        );
    }

    #[test]
    fn a_key_others_can_read_or_of_the_wrong_size_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sandbox-id.key");
        std::fs::write(&path, [0u8; KEY_LEN]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let err = IdKey::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("mode 644"), "{err}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(IdKey::load_or_create(&path).is_ok());
        std::fs::write(&path, [0u8; 5]).unwrap();
        let err = IdKey::load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("32 bytes"), "{err}");
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(IdKey::load_or_create(&link).is_err());
    }
}
