//! Telling one client that its tool list changed: once per new catalog generation, paced.

use std::sync::Arc;

use super::CodeModeServer;
use crate::bridge::Bridge;

/// Changes of the wrapped catalog as one client sees them: a new [`Bridge::generation`]
/// after the one its run_python description was last built from.
pub(super) struct CatalogChanges {
    bridge: Arc<Bridge>,
    seen: u64,
    versions: tokio::sync::watch::Receiver<u64>,
}

impl CatalogChanges {
    /// Call `notify` once per new generation, at most once per
    /// [`crate::bridge::RELIST_INTERVAL`] (changes in between are one call), until `notify`
    /// fails (the client went away) or the bridge is dropped.
    pub(super) async fn each<F, Fut>(mut self, notify: F)
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        while self.versions.changed().await.is_ok() {
            let now = self.bridge.generation();
            if now == self.seen {
                continue;
            }
            self.seen = now;
            if let Err(e) = notify().await {
                tracing::debug!("notifications/tools/list_changed not sent: {e}");
                return;
            }
            tracing::info!(generation = now, "told the client its tool list changed");
            tokio::time::sleep(crate::bridge::RELIST_INTERVAL).await;
        }
    }
}

impl CodeModeServer {
    pub(super) fn catalog_changes(&self) -> CatalogChanges {
        let bridge = self.pool.bridge().clone();
        let versions = bridge.watch_catalog();
        CatalogChanges {
            seen: self.tool_generation,
            bridge,
            versions,
        }
    }
}
