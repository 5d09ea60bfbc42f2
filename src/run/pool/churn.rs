//! The pool's pace under a catalog that keeps changing: after sandboxes thrown away for one
//! catalog change after another, the slots wait for the catalog to rest before they start
//! the next ones.
//!
//! A wrapped server that announces a new tool list in a loop (`list_changed` with a new
//! description each time) gets a new catalog about once per
//! [`crate::bridge::RELIST_INTERVAL`], and every run re-lists it before it takes its sandbox,
//! so no pooled sandbox could ever serve a run: each would be stale at its take. Starting
//! one after another anyway would cost a start per catalog (or, when a start takes longer
//! than a catalog lasts, a start all the time) and serve nothing. So the sandboxes thrown
//! away for the first catalog change are replaced at once (a server whose tools change now
//! and then keeps its pool), and after a second change in a row that throws sandboxes away,
//! a slot starts only once the catalog has not changed for a while: as long as the last
//! start took, at least `RELIST_INTERVAL`, doubled for each further change in a row, at most
//! [`super::CHURN_REST_MAX`]. A catalog that changes every second thus costs the pool a few
//! starts, then none until it rests. The streak is the pool's (one for all slots) and counts
//! catalog versions, not sandboxes: the pool's idle sandboxes thrown away together for one
//! change count once.
//!
//! The streak ends when a run takes one of the pool's sandboxes, and when a sandbox thrown
//! away had stayed current for [`super::CHURN_REST_MAX`] while it was ready (a change after
//! such a rest starts a new streak).

use std::time::Duration;

use tokio::sync::watch;

use super::CHURN_REST_MAX;
use crate::bridge::RELIST_INTERVAL;

/// The pool's streak of catalog changes that threw its sandboxes away.
#[derive(Debug, Default)]
pub(super) struct Churn {
    /// Catalog changes in a row, with no take between them, that threw sandboxes away.
    streak: u32,
    /// The catalog version of the last sandbox thrown away for a change.
    last_stale: Option<u64>,
    /// How long the pool's last start took to say `ready`.
    start_took: Duration,
}

impl Churn {
    /// Note how long a slot's start took to be ready.
    pub(super) fn started(&mut self, took: Duration) {
        self.start_took = took;
    }

    /// A run took a sandbox of the pool: the pool is of use, the streak ends.
    pub(super) fn taken(&mut self) {
        self.streak = 0;
        self.last_stale = None;
    }

    /// A sandbox started with catalog `version` was thrown away because the catalog changed;
    /// it had been ready and current for `current_for` (zero when it was stale when it became
    /// ready).
    pub(super) fn stale(&mut self, version: u64, current_for: Duration) {
        if current_for >= CHURN_REST_MAX {
            self.streak = 1;
        } else if self.last_stale != Some(version) {
            self.streak = self.streak.saturating_add(1);
        }
        self.last_stale = Some(version);
    }

    /// How long the catalog must stay unchanged before a slot's next start; `None` when it
    /// may start at once.
    pub(super) fn rest(&self) -> Option<Duration> {
        let doublings = self.streak.checked_sub(2)?;
        let base = self.start_took.max(RELIST_INTERVAL);
        let factor = 1u32.checked_shl(doublings.min(16)).unwrap_or(u32::MAX);
        Some(base.saturating_mul(factor).min(CHURN_REST_MAX))
    }
}

/// Resolves once the catalog version has not changed for `rest` (each change starts the
/// wait again), or at once when the bridge is gone.
pub(super) async fn catalog_rests(catalog: &mut watch::Receiver<u64>, rest: Duration) {
    catalog.borrow_and_update();
    loop {
        match tokio::time::timeout(rest, catalog.changed()).await {
            Err(_) | Ok(Err(_)) => return,
            Ok(Ok(())) => {
                catalog.borrow_and_update();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pool's pace after sandboxes of these catalog versions were thrown away, each
    /// stale when it became ready, the starts taking `took_ms`.
    fn after(versions: impl IntoIterator<Item = u64>, took_ms: u64) -> Churn {
        let mut churn = Churn::default();
        churn.started(Duration::from_millis(took_ms));
        for version in versions {
            churn.stale(version, Duration::ZERO);
        }
        churn
    }

    #[test]
    fn sandboxes_thrown_away_for_one_catalog_change_are_replaced_at_once() {
        assert_eq!(after([1], 300).rest(), None);
        assert_eq!(
            after([1, 1, 1, 1], 300).rest(),
            None,
            "four idle sandboxes thrown away for one change are one change"
        );
    }

    #[test]
    fn the_rest_starts_at_the_relist_interval_or_the_start_time_and_doubles_up_to_its_bound() {
        let rests: Vec<Option<Duration>> = (2..=7).map(|n| after(1..=n, 300).rest()).collect();
        let secs = |s: u64| Some(Duration::from_secs(s));
        assert_eq!(
            rests,
            [secs(1), secs(2), secs(4), secs(8), secs(10), secs(10)]
        );
        assert_eq!(
            after([1, 2], 2500).rest(),
            Some(Duration::from_millis(2500)),
            "a start slower than the re-list interval sets the first rest"
        );
    }

    #[test]
    fn a_take_or_a_long_current_sandbox_ends_the_streak() {
        let mut churn = after([1, 2, 3], 300);
        churn.taken();
        assert_eq!(churn.rest(), None);
        let mut churn = after([1, 2, 3], 300);
        churn.stale(4, CHURN_REST_MAX);
        assert_eq!(churn.rest(), None);
    }

    #[tokio::test]
    async fn the_rest_waits_until_the_catalog_has_not_changed_for_the_whole_time() {
        let (version, mut catalog) = watch::channel(0u64);
        let begun = std::time::Instant::now();
        let changes = tokio::spawn(async move {
            for v in 1..=3 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                version.send_replace(v);
            }
            version
        });
        catalog_rests(&mut catalog, Duration::from_secs(1)).await;
        // Changes at 0.1, 0.2 and 0.3 s: the catalog rests a whole second only from 0.3 s.
        assert_eq!(*catalog.borrow(), 3);
        let waited = begun.elapsed();
        assert!(waited >= Duration::from_millis(1300), "{waited:?}");
        drop(changes.await);
    }
}
