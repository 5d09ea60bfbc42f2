//! The warm pool under a wrapped server whose tools change in a loop
//! (tests/scenarios/churn.json: `list_changed` every 250 ms, a new description in each
//! `tools/list`, so a new catalog about once a second): a pooled sandbox would be stale
//! before any run could take it, so the pool stops starting them until the catalog rests,
//! and then refills.
//!
//! Checked to fail with the slot's rest (src/run/pool/churn.rs) taken out: the pool then
//! starts a sandbox after each catalog change for as long as the changes go on, and never
//! goes 3 s without one.

use std::time::{Duration, Instant};

use super::misbehaving_servers::Scenario;
use super::pool::{Served, pooled, stdout};

/// Longest wait for the pool to reach a state (a Docker container start under load).
const PATIENCE: Duration = Duration::from_secs(60);
/// serve's log line for each new catalog read after `list_changed`.
const RELISTED: &str = "the catalog was read again after list_changed";
/// serve's log line for each pooled sandbox thrown away for a catalog change.
const STALE: &str = "thrown away: the catalog changed";

crate::on_both_backends!(
    a_catalog_that_keeps_changing_stops_the_pool_starting_sandboxes_until_it_rests
);

fn a_catalog_that_keeps_changing_stops_the_pool_starting_sandboxes_until_it_rests(backend: &str) {
    let mut served = Served::wrapping(
        backend,
        &["--pool", "2"],
        &Scenario::load("churn").command(),
    );
    served.wait_logged(RELISTED, 3);
    // The pool settles: no sandbox for 3 s in a row while the catalog goes on changing.
    let start = Instant::now();
    let mut empty_since: Option<Instant> = None;
    loop {
        if served.sandboxes().is_empty() {
            if empty_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(3) {
                break;
            }
        } else {
            empty_since = None;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "the pool kept starting sandboxes while the catalog changed ({} thrown away for a catalog change); serve's log:\n{}",
            served.logged(STALE),
            served.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Five more seconds of changes start at most one sandbox: the pool's rest grows with each
    // start thrown away, but a gap between two re-lists that happens to outlast it may still
    // let one start through (without the rest, the pool starts one after every change).
    let relisted = served.logged(RELISTED);
    let thrown = served.logged(STALE);
    let mut started = std::collections::BTreeSet::new();
    let window = Instant::now();
    while window.elapsed() < Duration::from_secs(5) {
        started.extend(served.sandboxes());
        assert!(
            started.len() <= 1,
            "the pool started {started:?} while the catalog kept changing"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        served.logged(RELISTED) >= relisted + 3,
        "the catalog went on changing meanwhile; serve's log:\n{}",
        served.log_text()
    );
    assert!(served.logged(STALE) <= thrown + 1, "{}", served.log_text());
    // A run meanwhile is served (by a sandbox of its own) and stops the changes.
    let calmed = served.run("print(await calm({}))");
    assert_eq!(stdout(&calmed), "calm\n", "{calmed}");
    // Once the catalog rests the pool refills, and a run takes a pooled sandbox.
    let start = Instant::now();
    loop {
        let later = served.run("print(await churning({}))");
        assert_eq!(stdout(&later), "churned\n", "{later}");
        if pooled(&later) {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no run was pooled after the catalog rested; serve's log:\n{}",
            served.log_text()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}
