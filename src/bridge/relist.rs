//! Reading a server's tools again when it says they changed
//! (`notifications/tools/list_changed`, spec "Server features § Tools § List changed").
//!
//! The notification wakes a task of the bridge, which reads the tools of every server that
//! sent one and publishes a new catalog (a higher [`super::Bridge::generation`]): `serve`
//! then tells its own client (`notifications/tools/list_changed`, the run_python
//! description embeds the catalog) and the warm pool replaces sandboxes started with the old
//! one. A run also re-lists before it starts ([`super::Bridge::refresh`]), waiting for a
//! re-list in progress, so the next run always sees the new catalog. A new list the catalog
//! refuses (a name clash) leaves the old one in place, with a warning.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{REFRESH_WAIT, Shared};

impl Shared {
    /// Read again the tools of each server that sent `list_changed` since its tools were
    /// last read, and publish the new catalog. One re-list at a time; a caller that comes
    /// while one runs waits for it. Returns whether the catalog changed.
    pub(super) async fn relist_changed(&self) -> bool {
        let _one_at_a_time = self.relisting.lock().await;
        let mut relisted = false;
        for slot in &self.slots {
            let Some(upstream) = slot.upstream() else {
                continue;
            };
            if !upstream.take_tools_changed() {
                continue;
            }
            match tokio::time::timeout(REFRESH_WAIT * 5, upstream.list_tools()).await {
                Ok(Ok(tools)) => {
                    let old = std::mem::replace(&mut slot.state().tools, tools);
                    if let Err(e) = self.rebuild() {
                        tracing::warn!(server = %upstream.name(), "its new tool list is refused, the old one stays: {e}");
                        slot.state().tools = old;
                    } else {
                        relisted = true;
                    }
                }
                Ok(Err(e)) => tracing::warn!("{e}"),
                Err(_) => {
                    tracing::warn!(server = %upstream.name(), "tools/list after list_changed: no answer in time");
                }
            }
        }
        if relisted {
            tracing::info!(
                generation = self.generation.load(Ordering::SeqCst),
                "the catalog was read again after list_changed"
            );
        }
        relisted
    }
}

/// Start the task that re-lists as soon as a server says its tools changed. It holds the
/// bridge only while it re-lists, and ends when the bridge is closed or dropped.
pub(super) fn spawn_relister(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let wake = shared.wake.clone();
    tokio::spawn(async move {
        loop {
            wake.notified().await;
            let Some(shared) = weak.upgrade() else {
                break;
            };
            if shared.closed.load(Ordering::SeqCst) {
                break;
            }
            shared.relist_changed().await;
        }
    });
}
