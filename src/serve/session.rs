//! What belongs to one MCP session: its private-data taint, its run slots, and its seat
//! under the session cap.
//!
//! On stdio the one session is the process. Over Streamable HTTP each session (one
//! `Mcp-Session-Id`, MCP 2025-11-25 basic/transports "Session Management") gets its own
//! [`Session`] when it initializes, so one client's private call never refuses or allows
//! another client's calls, and one client's runs never take all the slots: a run waits for
//! a slot of its session ([`DEFAULT_SESSION_RUNS`] by default) and then for one of the
//! process ([`crate::limits::MAX_CONCURRENT_RUNS`]).

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::bridge::Taint;
use crate::serve::metrics::Metrics;

/// Runs one session may have going at once, by default (`--session-runs`).
pub(super) const DEFAULT_SESSION_RUNS: usize = 2;
/// Sessions one process serves at once, by default (`--max-sessions`).
pub(super) const DEFAULT_MAX_SESSIONS: usize = 64;

/// One session's state; clones share it.
#[derive(Clone, Debug)]
pub struct Session {
    /// This session's id in the audit log: a UUID v4 of our own (not the Streamable HTTP
    /// `Mcp-Session-Id`, which a client presents like a credential and is never logged).
    pub id: String,
    /// The private-data taint of this session.
    pub taint: Taint,
    /// This session's run slots.
    pub slots: Arc<Semaphore>,
    _seat: Option<Arc<Seat>>,
}

impl Session {
    /// The same session without its seat: what a task layer keeps, so that the seat is
    /// freed when the session's own service ends.
    pub(crate) fn unseat(&self) -> Self {
        Self {
            _seat: None,
            ..self.clone()
        }
    }

    /// A session with `runs` run slots, outside any cap (stdio's one session).
    pub fn unseated(runs: usize) -> Self {
        Self {
            id: uuid::Uuid::new_v4().to_string(),
            taint: Taint::default(),
            slots: Arc::new(Semaphore::new(runs.max(1))),
            _seat: None,
        }
    }
}

/// The session cap: at most `max` sessions hold a seat at once.
#[derive(Clone, Debug)]
pub(super) struct Seats {
    seats: Arc<Semaphore>,
    max: usize,
    metrics: Arc<Metrics>,
}

impl Seats {
    /// A cap of `max` sessions, counted in `metrics`.
    pub(super) fn new(max: usize, metrics: Arc<Metrics>) -> Self {
        Self {
            seats: Arc::new(Semaphore::new(max)),
            max,
            metrics,
        }
    }

    /// The cap.
    pub(super) fn max(&self) -> usize {
        self.max
    }

    /// A new session with `runs` run slots, holding a seat until its last clone is dropped;
    /// `None` when every seat is taken.
    pub(super) fn seat(&self, runs: usize) -> Option<Session> {
        let permit = self.seats.clone().try_acquire_owned().ok()?;
        self.metrics.sessions().inc();
        Some(Session {
            id: uuid::Uuid::new_v4().to_string(),
            taint: Taint::default(),
            slots: Arc::new(Semaphore::new(runs.max(1))),
            _seat: Some(Arc::new(Seat {
                _permit: permit,
                metrics: self.metrics.clone(),
            })),
        })
    }
}

/// A taken seat; dropping it frees the seat.
#[derive(Debug)]
struct Seat {
    _permit: OwnedSemaphorePermit,
    metrics: Arc<Metrics>,
}

impl Drop for Seat {
    fn drop(&mut self) {
        self.metrics.sessions().dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_refuses_a_seat_until_a_session_ends() {
        let seats = Seats::new(2, Arc::new(Metrics::default()));
        let first = seats.seat(1).expect("a first seat");
        let _second = seats.seat(1).expect("a second seat");
        assert!(seats.seat(1).is_none());
        drop(first);
        assert!(seats.seat(1).is_some());
    }
}
