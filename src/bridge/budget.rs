//! A run's call budget and its session's private-data taint, which the bridge checks
//! before each call goes out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use super::governed::RunTag;

/// The private-data taint of one client session: set by the first private call sent in
/// the session, never cleared while it lasts. Clones share the state.
#[derive(Debug, Clone, Default)]
pub struct Taint(Arc<AtomicBool>);

impl Taint {
    /// Whether a private tool has been called in this session.
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    pub(super) fn set(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The calls one run may still send, and the taint of the session the run belongs to;
/// shared by every server of the bridge.
#[derive(Debug)]
pub struct CallBudget {
    pub(super) max: u32,
    pub(super) used: AtomicU32,
    pub(super) taint: Taint,
    /// The run's name in the audit log and who approves its calls (`governed.rs`).
    pub(super) tag: RunTag,
    /// The run's argument checks, one at a time (check.rs).
    pub(super) checks: Arc<tokio::sync::Semaphore>,
}

impl CallBudget {
    /// A budget of `max` calls for a run in a session of its own (a fresh [`Taint`]).
    pub fn new(max: u32) -> Self {
        Self::in_session(max, Taint::default())
    }

    /// A budget of `max` calls for a run of the session whose taint is `taint`.
    pub fn in_session(max: u32, taint: Taint) -> Self {
        Self {
            max,
            used: AtomicU32::new(0),
            taint,
            tag: RunTag::default(),
            checks: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    /// Calls the run may send.
    pub fn max(&self) -> u32 {
        self.max
    }

    /// Calls sent so far.
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::SeqCst)
    }
}
