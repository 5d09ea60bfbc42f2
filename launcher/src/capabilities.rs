//! Stage 8: drop every capability: bounding, ambient, inheritable, effective, permitted.
//!
//! The bounding set goes first (dropping it needs CAP_SETPCAP, which is in the effective set
//! until the end). Sources: capabilities(7), "Capability bounding set" and "Ambient
//! capabilities"; prctl(2) PR_CAPBSET_DROP.

use caps::{CapSet, Capability};

use crate::sys;

/// Dropping a capability set failed.
#[derive(Debug, thiserror::Error)]
pub enum CapabilityError {
    /// PR_CAPBSET_DROP failed for this capability.
    #[error("failed to drop {cap} from the bounding set: {source}")]
    Bounding {
        cap: Capability,
        source: std::io::Error,
    },
    /// Clearing a set through capset(2) or PR_CAP_AMBIENT failed.
    #[error("failed to clear the {set:?} capability set: {why}")]
    Clear { set: CapSet, why: String },
}

/// Drops every capability from every set. Capabilities the running kernel does not know
/// are skipped (EINVAL from PR_CAPBSET_DROP).
pub fn drop_all() -> Result<(), CapabilityError> {
    for cap in caps::all() {
        match sys::drop_bounding_cap(cap.index() as u32) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
            Err(source) => return Err(CapabilityError::Bounding { cap, source }),
            Ok(()) => {}
        }
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(|e| CapabilityError::Clear {
            set,
            why: e.to_string(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Exit;
    use crate::testutil::{in_child, in_user_namespace, require_user_namespaces};

    #[test]
    fn no_capability_is_left_in_any_set() {
        if !require_user_namespaces() {
            return;
        }
        let exit = in_child(|| {
            // A fresh user namespace grants every capability: something to drop.
            in_user_namespace();
            assert!(!caps::read(None, CapSet::Effective).unwrap().is_empty());
            drop_all().unwrap();
            let sets = [
                CapSet::Bounding,
                CapSet::Ambient,
                CapSet::Inheritable,
                CapSet::Effective,
                CapSet::Permitted,
            ];
            if sets
                .iter()
                .all(|s| caps::read(None, *s).unwrap().is_empty())
            {
                0
            } else {
                1
            }
        });
        assert_eq!(exit, Exit::Code(0));
    }
}
