//! The flag a wrapped server's `notifications/tools/list_changed` sets (bridge/relist.rs
//! reads the tools again when it is woken).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether a server sent `notifications/tools/list_changed` since its tools were last read,
/// and whom to wake when it does (the bridge, which reads them again at once).
#[derive(Debug, Default)]
pub(crate) struct ToolsChanged {
    flag: AtomicBool,
    wake: Arc<tokio::sync::Notify>,
}

impl ToolsChanged {
    /// A flag that wakes `wake` (one permit, kept when nobody waits) when it is set.
    pub(crate) fn waking(wake: Arc<tokio::sync::Notify>) -> Self {
        Self {
            flag: AtomicBool::new(false),
            wake,
        }
    }

    pub(super) fn set(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    /// Whether it was set since the last call (it is cleared).
    pub(crate) fn take(&self) -> bool {
        self.flag.swap(false, Ordering::SeqCst)
    }

    /// Whether it is set, leaving it as it is.
    pub(crate) fn is_set(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}
