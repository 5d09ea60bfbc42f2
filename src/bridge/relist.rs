//! Reading a server's tools again when it says they changed
//! (`notifications/tools/list_changed`, spec "Server features § Tools § List changed").
//!
//! The notification wakes a task of the bridge, which reads the tools of every server that
//! sent one and publishes a new catalog (a higher [`super::Bridge::generation`]): `serve`
//! then tells its own client (`notifications/tools/list_changed`, the run_python
//! description embeds the catalog) and the warm pool replaces sandboxes started with the old
//! one. A run also re-lists before it starts ([`super::Bridge::refresh`]), waiting for a
//! re-list in progress (at most [`RELIST_TIMEOUT`] per server), so the next run always sees
//! the new catalog. A server that sends
//! the notification in a loop is read at most once per [`RELIST_INTERVAL`] by the task. A new list the catalog
//! refuses (a name clash) leaves the old one in place, with a warning; a list equal to the
//! current one, in any order, changes nothing (no new generation, the pool kept, the client
//! not told).
//!
//! Re-lists are coalesced: one at a time (a lock the task and every run's refresh take), and
//! whatever notifications come while one runs are one flag per server, so at most one more
//! re-list follows, reading the latest list. A storm of `list_changed` during a build costs
//! at most two re-lists, and the build itself runs off the runtime (rebuild.rs). A refresh
//! runs the re-list in a task of its own, so a run that gives up waiting never leaves one
//! half done.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::Tool;
use tokio::time::Instant;

use super::Shared;

/// Longest a re-list after `list_changed` waits for a server's `tools/list`: a run waits for
/// it before it starts ([`super::Bridge::refresh`]); a server that has not answered by then
/// keeps its old tools, with a warning.
pub const RELIST_TIMEOUT: Duration = Duration::from_secs(10);

impl Shared {
    /// Read again the tools of each server that sent `list_changed` since its tools were
    /// last read, and publish the new catalog. One re-list at a time; a caller that comes
    /// while one runs waits for it. Returns whether the catalog changed.
    pub(super) async fn relist_changed(&self) -> bool {
        let _one_at_a_time = self.relisting.lock().await;
        let mut relisted = false;
        for (index, slot) in self.slots.iter().enumerate() {
            let Some(upstream) = slot.upstream() else {
                continue;
            };
            if !upstream.take_tools_changed() {
                continue;
            }
            match tokio::time::timeout(RELIST_TIMEOUT, upstream.list_tools()).await {
                // The same list again, in whatever order, changes nothing: no new catalog,
                // so the warm pool stays and the client is not told.
                Ok(Ok(tools)) if same_tools(&slot.state().tools, &tools) => {
                    tracing::debug!(server = %upstream.name(), "tools/list after list_changed: the same tools");
                }
                Ok(Ok(tools)) => match self.rebuild(Some((index, Arc::new(tools)))).await {
                    Err(e) => {
                        tracing::warn!(server = %upstream.name(), "its new tool list is refused, the old one stays: {e}");
                    }
                    Ok(()) => relisted = true,
                },
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

/// Whether `old` and `new` list the same tools, in any order: the same names, each with an
/// equal definition. MCP fixes no order, and a server building its list from a hash map
/// may answer each `tools/list` in another. Tools of one name (the catalog keeps the first)
/// must also come in the same relative order.
fn same_tools(old: &[Tool], new: &[Tool]) -> bool {
    if old.len() != new.len() {
        return false;
    }
    if old == new {
        return true;
    }
    sorted_by_name(old) == sorted_by_name(new)
}

/// `tools` by name; stable, so tools of one name keep their order.
fn sorted_by_name(tools: &[Tool]) -> Vec<&Tool> {
    let mut refs: Vec<&Tool> = tools.iter().collect();
    refs.sort_by(|a, b| a.name.cmp(&b.name));
    refs
}

/// Shortest time between two re-lists of the background task: a server that says
/// `list_changed` in a loop gets its tools read at most this often (runs still re-list
/// before they start, [`super::Bridge::refresh`]), and so at most this often a new catalog,
/// a line in the log and a replaced warm pool.
pub const RELIST_INTERVAL: Duration = Duration::from_secs(1);

/// Start the task that re-lists when a server says its tools changed: at once, unless the
/// last re-list began less than [`RELIST_INTERVAL`] ago, then when that interval is over.
/// Notifications coalesce: whatever arrives while it waits or re-lists is one pending
/// re-list (one [`tokio::sync::Notify`] permit, one flag per server). It holds the bridge
/// only while it re-lists, and ends when the bridge is closed or dropped.
pub(super) fn spawn_relister(shared: &Arc<Shared>) {
    let weak = Arc::downgrade(shared);
    let wake = shared.wake.clone();
    tokio::spawn(async move {
        let mut last: Option<Instant> = None;
        loop {
            wake.notified().await;
            if let Some(last) = last {
                tokio::time::sleep_until(last + RELIST_INTERVAL).await;
            }
            last = Some(Instant::now());
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
