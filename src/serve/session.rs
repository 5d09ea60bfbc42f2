//! What belongs to one MCP session: its private-data taint, its run slots, its runs in
//! flight (for `--session-idle`) and its seat under the session cap.
//!
//! On stdio the one session is the process. Over Streamable HTTP each session (one
//! `Mcp-Session-Id`, MCP 2025-11-25 basic/transports "Session Management") gets its own
//! [`Session`] when it initializes, so one client's private call never refuses or allows
//! another client's calls, and one client's runs never take all the slots: a run waits for
//! a slot of its session ([`DEFAULT_SESSION_RUNS`] by default) and then for one of the
//! process ([`crate::limits::MAX_CONCURRENT_RUNS`]).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

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
    /// This session's runs in flight and when it was last used.
    pub activity: Arc<Activity>,
    /// Cancelled when the session is closed (`DELETE`, `--session-idle`, eviction at the
    /// session cap): every run of the session is cancelled at once, before rmcp ends the
    /// session's service (which waits up to 5 s for the answers in flight).
    pub closed: CancellationToken,
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
            activity: Arc::default(),
            closed: CancellationToken::new(),
            _seat: None,
        }
    }
}

/// When a session was last used and how many of its runs are in flight: a session with a
/// run going (waiting for a slot, running, or asking an approval question) is not idle, and
/// its idle time starts when its last run ends (`serve --http --session-idle`).
#[derive(Debug)]
pub struct Activity {
    state: Mutex<ActivityState>,
}

#[derive(Debug)]
struct ActivityState {
    runs: usize,
    last: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            state: Mutex::new(ActivityState {
                runs: 0,
                last: Instant::now(),
            }),
        }
    }
}

impl Activity {
    /// Note a request of the session now.
    pub fn touch(&self) {
        self.state().last = Instant::now();
    }

    /// Count a run in flight until the returned guard is dropped; the drop counts as use.
    pub fn run(self: &Arc<Self>) -> RunInFlight {
        self.state().runs += 1;
        RunInFlight(self.clone())
    }

    /// `None` while a run is in flight, else when the session was last used.
    pub fn idle_since(&self) -> Option<Instant> {
        let state = self.state();
        (state.runs == 0).then_some(state.last)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ActivityState> {
        // The state is two plain fields, whole after any panic.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A run counted by [`Activity::run`]; dropping it ends the count and notes the use.
#[derive(Debug)]
pub struct RunInFlight(Arc<Activity>);

impl Drop for RunInFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.runs -= 1;
        state.last = Instant::now();
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
        Some(self.session(permit, runs))
    }

    /// [`Seats::seat`], waiting up to `wait` for a seat to be freed (e.g. by a session just
    /// closed to make room). Waiters are served in order, before any [`Seats::seat`] call
    /// made meanwhile. `None` when no seat was freed in time.
    pub(super) async fn seat_within(&self, runs: usize, wait: Duration) -> Option<Session> {
        let permit = tokio::time::timeout(wait, self.seats.clone().acquire_owned())
            .await
            .ok()?
            .ok()?;
        Some(self.session(permit, runs))
    }

    fn session(&self, permit: OwnedSemaphorePermit, runs: usize) -> Session {
        self.metrics.sessions().inc();
        Session {
            id: uuid::Uuid::new_v4().to_string(),
            taint: Taint::default(),
            slots: Arc::new(Semaphore::new(runs.max(1))),
            activity: Arc::default(),
            closed: CancellationToken::new(),
            _seat: Some(Arc::new(Seat {
                _permit: permit,
                metrics: self.metrics.clone(),
            })),
        }
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

    #[tokio::test]
    async fn a_seat_waited_for_is_taken_when_one_is_freed_and_not_past_the_wait() {
        let seats = Seats::new(1, Arc::new(Metrics::default()));
        let first = seats.seat(1).expect("a first seat");
        assert!(
            seats
                .seat_within(1, Duration::from_millis(50))
                .await
                .is_none()
        );
        let freeing = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            drop(first);
        });
        let second = seats.seat_within(1, Duration::from_secs(10)).await;
        assert!(second.is_some());
        freeing.await.unwrap();
        assert!(seats.seat(1).is_none());
    }
}
