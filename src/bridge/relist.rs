//! Reading a server's tools again when it says they changed
//! (`notifications/tools/list_changed`, spec "Server features § Tools § List changed").
//!
//! The notification wakes a task of the bridge, which starts a re-list of every server that
//! sent one: its `tools/list` is read again and a new catalog published (a higher
//! [`super::Bridge::generation`]): `serve` then tells its own client
//! (`notifications/tools/list_changed`, the run_python description embeds the catalog) and
//! the warm pool replaces sandboxes started with the old one. A server that sends the
//! notification in a loop is read at most once per [`RELIST_INTERVAL`] by the task. A new
//! list the catalog refuses (a name clash) leaves the old one in place, with a warning; a
//! list equal to the current one, in any order, changes nothing (no new generation, the
//! pool kept, the client not told).
//!
//! A run re-lists before it starts ([`super::Bridge::refresh`]): it starts the re-lists
//! still due and waits for each server's re-list under way or due when it began (and for
//! the catalog build), so the next run sees the new catalog. The catalog is one per bridge
//! (every run's stubs hold every server's tools), so a run waits for every server's re-list,
//! also runs that call only other servers. That wait is bounded twice:
//! - in all, at most [`RELIST_TIMEOUT`] per run, however many servers re-list;
//! - a server whose re-list went unanswered for [`RELIST_TIMEOUT`] is *slow*: no run waits
//!   for its re-lists until one answers within that time again. Its late answer is still
//!   used (within the server's startup timeout, the deadline of every listing): the new
//!   catalog applies when it comes, to the runs after it. So a server that announces
//!   changes in a loop and answers slowly delays runs once, by at most [`RELIST_TIMEOUT`].
//!
//! Re-lists are coalesced: at most one per server is under way (its `tools/list` and the
//! catalog build that follows), and whatever notifications come meanwhile are one flag, so
//! at most one more re-list follows, reading the latest list. A storm of `list_changed`
//! during a build costs at most two re-lists, and the build itself runs off the runtime
//! (rebuild.rs). Each re-list is a task of its own, so a run that gives up waiting never
//! leaves one half done.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use rmcp::model::Tool;
use tokio::time::Instant;

use super::Shared;
use super::catalog::LabelCheck;
use super::upstream::Upstream;

/// Longest a run waits for re-lists after `list_changed`, in all ([`super::Bridge::refresh`]),
/// and the time after which a server's unanswered re-list makes it *slow*: runs stop waiting
/// for its re-lists (module doc). Its old tools stay until its answer comes.
pub const RELIST_TIMEOUT: Duration = Duration::from_secs(10);

/// Where one server's re-lists stand (kept in its slot).
#[derive(Debug, Default)]
pub(super) struct RelistState {
    /// Re-lists started, ever.
    started: u64,
    /// Re-lists over (answered, failed, or their listing deadline passed), ever.
    finished: u64,
    /// Its last re-list went unanswered for [`RELIST_TIMEOUT`]: runs do not wait for it.
    slow: bool,
}

impl RelistState {
    fn in_flight(&self) -> bool {
        self.started > self.finished
    }
}

impl Shared {
    /// Start a re-list of each running server that sent `list_changed` since its tools were
    /// last read and has no re-list under way (one then follows the one under way).
    pub(super) fn start_relists(self: &Arc<Self>) {
        if self.closed.load(Ordering::SeqCst) {
            return;
        }
        for (index, slot) in self.slots.iter().enumerate() {
            let upstream = {
                let mut state = slot.state();
                let Some(upstream) = state.upstream.clone() else {
                    continue;
                };
                if state.relist.in_flight() || !upstream.tools_changed().take() {
                    continue;
                }
                state.relist.started += 1;
                upstream
            };
            tokio::spawn(relist(Arc::downgrade(self), index, upstream));
        }
    }

    /// Start the re-lists due and wait, at most [`RELIST_TIMEOUT`] in all, until each
    /// server that is not slow has finished the re-list under way when this began, and the
    /// one after it when it had sent `list_changed` by then (notifications that come while
    /// this waits are not waited for: a server announcing in a loop holds no run).
    pub(super) async fn relists_settled(self: &Arc<Self>) {
        let deadline = Instant::now() + RELIST_TIMEOUT;
        let mut changes = self.relist_changes.subscribe();
        let targets: Vec<Option<u64>> = self
            .slots
            .iter()
            .map(|slot| {
                let state = slot.state();
                let upstream = state.upstream.as_ref()?;
                let due = u64::from(upstream.tools_changed().is_set());
                Some(state.relist.started + due)
            })
            .collect();
        loop {
            changes.borrow_and_update();
            self.start_relists();
            let waiting = self.slots.iter().zip(&targets).any(|(slot, target)| {
                let state = slot.state();
                target.is_some_and(|t| !state.relist.slow && state.relist.finished < t)
            });
            if !waiting || self.closed.load(Ordering::SeqCst) {
                return;
            }
            if tokio::time::timeout_at(deadline, changes.changed())
                .await
                .is_err()
            {
                tracing::debug!("a run stops waiting for re-lists after {RELIST_TIMEOUT:?}");
                return;
            }
        }
    }

    /// Change server `index`'s re-list state and tell the runs waiting.
    fn relist_state(&self, index: usize, change: impl FnOnce(&mut RelistState)) {
        change(&mut self.slots[index].state().relist);
        self.relist_changes.send_modify(|n| *n += 1);
    }

    /// Put a server's re-read `tools` in force, unless they equal its current ones.
    async fn apply_relisted(&self, index: usize, upstream: &Upstream, tools: Vec<Tool>) {
        let slot = &self.slots[index];
        // The same list again, in whatever order, changes nothing: no new catalog, so the
        // warm pool stays and the client is not told.
        if same_tools(&slot.state().tools, &tools) {
            tracing::debug!(server = %upstream.name(), "tools/list after list_changed: the same tools");
            return;
        }
        // A label naming a tool the server no longer lists only gets a warning: the tool is
        // gone, and the rest of the new list (new schemas, annotations, descriptions) comes
        // into force. Other refusals (a name clash) keep the old list.
        match self
            .rebuild(Some((index, Arc::new(tools))), LabelCheck::Warn)
            .await
        {
            Err(e) => {
                tracing::warn!(server = %upstream.name(), "its new tool list is refused, the old one stays: {e}");
            }
            Ok(()) => tracing::info!(
                server = %upstream.name(),
                generation = self.generation.load(Ordering::SeqCst),
                "the catalog was read again after list_changed"
            ),
        }
    }
}

/// One re-list of server `index`: read its tools (within its startup timeout, the deadline
/// of every listing) and put them in force. Past [`RELIST_TIMEOUT`] without an answer the
/// server is marked slow and the re-list goes on; an answer within it clears the mark. The
/// bridge is held only while the answer is put in force.
async fn relist(shared: Weak<Shared>, index: usize, upstream: Arc<Upstream>) {
    let listing = upstream.list_tools();
    tokio::pin!(listing);
    let (answer, in_time) = match tokio::time::timeout(RELIST_TIMEOUT, &mut listing).await {
        Ok(answer) => (answer, true),
        Err(_) => {
            tracing::warn!(
                server = %upstream.name(),
                "tools/list after list_changed: no answer in {RELIST_TIMEOUT:?}; runs no longer wait for its re-lists, and its new tools apply when they come"
            );
            if let Some(shared) = shared.upgrade() {
                shared.relist_state(index, |r| r.slow = true);
            }
            (listing.await, false)
        }
    };
    let Some(shared) = shared.upgrade() else {
        return;
    };
    match answer {
        Ok(tools) if !shared.closed.load(Ordering::SeqCst) => {
            shared.apply_relisted(index, &upstream, tools).await;
        }
        Ok(_) => {}
        Err(e) => tracing::warn!("{e}"),
    }
    shared.relist_state(index, |r| {
        r.finished += 1;
        if in_time {
            r.slow = false;
        }
    });
    // A notification that came meanwhile found this re-list under way: the task starts the
    // next one.
    if upstream.tools_changed().is_set() {
        shared.wake.notify_one();
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

/// Start the task that starts re-lists when a server says its tools changed: at once, unless
/// the last ones began less than [`RELIST_INTERVAL`] ago, then when that interval is over.
/// Notifications coalesce: whatever arrives while it waits is one pending wake (one
/// [`tokio::sync::Notify`] permit, one flag per server; a server's re-list that ends with
/// its flag set wakes it again). It ends when the bridge is closed or dropped.
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
            shared.start_relists();
        }
    });
}
