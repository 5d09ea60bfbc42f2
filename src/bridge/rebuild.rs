//! Building the catalog and putting it in force, off the async runtime.
//!
//! A build compiles every kept tool's inputSchema and writes its stub: for a server listing
//! thousands of tools that is seconds of CPU, so it runs on tokio's blocking pool
//! (`spawn_blocking`) and the runtime thread (serve's only one) goes on answering pings,
//! runs, progress, cancels and deadlines meanwhile, at startup as on a re-list. The catalog
//! in force stays until the new one is built, then is replaced whole (one `Arc` swapped
//! under a lock): each run's sandbox keeps the stubs of the catalog it started with, and each
//! call is checked against the catalog in force when it is made.
//!
//! Builds run one at a time per bridge, each reading every server's tools when it begins,
//! so the last build reflects the latest lists. A build whose waiter goes away (a startup
//! given up because the client left) is stopped within one tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rmcp::model::Tool;

use super::catalog::{Catalog, CatalogError, LabelCheck, Selection, ServerTools};
use super::{Shared, SlotState};

/// Sets its flag when dropped: the build on the blocking pool sees it and stops.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// One server's part of a build, owned (the build runs on another thread).
struct Listed {
    name: String,
    selection: Selection,
    tools: Arc<Vec<Tool>>,
    check: LabelCheck,
}

impl Shared {
    /// Build the catalog from every running server's tools, with `candidate` (a server's
    /// index and its newly listed tools) in place of that server's tools, off the runtime;
    /// on success the candidate's tools become the server's and the catalog is put in force
    /// with the next generation number (after the first, [`super::Bridge::catalog_version`]
    /// grows too, so the warm pool replaces its sandboxes). `labels` is what a label naming
    /// no tool does for the candidate's server, or for every running server without a
    /// candidate; the other servers' labels were checked when their lists came, and are not
    /// again, and those of a server that is not running wait for its first list.
    ///
    /// # Errors
    /// The [`CatalogError`] of a refused catalog (a name clash, a label naming no tool
    /// where `labels` refuses): the catalog in force and the server's tools stay as they were.
    pub(super) async fn rebuild(
        &self,
        candidate: Option<(usize, Arc<Vec<Tool>>)>,
        labels: LabelCheck,
    ) -> Result<(), CatalogError> {
        let _one_at_a_time = self.building.lock().await;
        let mut listed = Vec::with_capacity(self.slots.len());
        let mut unavailable = Vec::new();
        for (index, slot) in self.slots.iter().enumerate() {
            let state = slot.state();
            let (tools, check) = match &candidate {
                Some((i, tools)) if *i == index => (tools.clone(), labels),
                Some(_) => (state.tools.clone(), LabelCheck::Quiet),
                // A server that is not running listed nothing its labels could name: they
                // are checked at its first list, when a later try starts it (`retry`).
                None if state.upstream.is_none() => (state.tools.clone(), LabelCheck::Quiet),
                None => (state.tools.clone(), labels),
            };
            listed.push(Listed {
                name: slot.entry.spec.name.clone(),
                selection: slot.entry.selection.clone(),
                tools,
                check,
            });
            if let Some(why) = &state.failure {
                // Shown to people (run_python's description, /healthz): the name they know.
                unavailable.push((slot.entry.shown_name(), why.clone()));
            }
        }
        let prefixed = self.prefixed;
        let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
        let stopped = stop.0.clone();
        let built = tokio::task::spawn_blocking(move || {
            let servers: Vec<ServerTools<'_>> = listed
                .iter()
                .map(|l| ServerTools {
                    name: &l.name,
                    prefixed,
                    tools: &l.tools,
                    selection: &l.selection,
                })
                .collect();
            let checks: Vec<LabelCheck> = listed.iter().map(|l| l.check).collect();
            Catalog::build_unless(&servers, &checks, &stopped)
        })
        .await;
        let catalog = match built {
            Ok(Ok(Some(catalog))) => catalog,
            Ok(Err(e)) => return Err(e),
            // Stopped (only when this future is dropped) or cancelled by the runtime's
            // shutdown: nobody is left to use a catalog.
            Ok(Ok(None)) => return Ok(()),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => return Ok(()),
        };
        if let Some((index, tools)) = candidate {
            let state: &mut SlotState = &mut self.slots[index].state();
            state.tools = tools;
        }
        let generation = self.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let catalog = catalog.with_state(generation, unavailable);
        *self.catalog.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(catalog);
        if generation > 1 {
            // After the first catalog: sandboxes started with an older one are stale.
            self.catalog_version.send_modify(|v| *v += 1);
        }
        Ok(())
    }
}
