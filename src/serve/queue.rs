//! The bound on runs waiting for a run slot.
//!
//! A run_python call that finds no free slot (its session's and the process's, see
//! [`super::session`]) waits, holding its code. Without a bound a client could queue calls
//! until `serve` runs out of memory (300 waiting calls of 1 MB code each took `serve` from
//! 10 to 335 MB RSS). So the runs waiting at once, over every session, are bounded in number
//! (`--max-queued-runs`) and in the bytes of code they hold (`--max-queued-bytes`): a call
//! past either bound gets a tool error at once ([`QueueFull`]) and nothing else changes, the
//! runs already running or waiting go on. A call that finds a free slot never waits and is
//! never counted, whatever its size.

use std::sync::{Arc, Mutex};

use rmcp::model::CallToolResult;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Runs that may wait for a slot at once, by default (`--max-queued-runs`).
pub const DEFAULT_MAX_QUEUED_RUNS: usize = 64;
/// Bytes of code the runs waiting for a slot may hold together, by default
/// (`--max-queued-bytes`): 64 MiB.
pub const DEFAULT_MAX_QUEUED_BYTES: usize = 64 << 20;

/// The bounds of the run queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueLimits {
    /// Runs waiting for a slot at once, over every session.
    pub runs: usize,
    /// UTF-8 bytes of code those runs hold together.
    pub bytes: usize,
}

impl Default for QueueLimits {
    fn default() -> Self {
        Self {
            runs: DEFAULT_MAX_QUEUED_RUNS,
            bytes: DEFAULT_MAX_QUEUED_BYTES,
        }
    }
}

/// Runs waiting for a slot now, and the code they hold.
#[derive(Debug, Default)]
struct Waiting {
    runs: usize,
    bytes: usize,
}

/// The run queue's bookkeeping, shared by every session of a process.
#[derive(Debug)]
pub(super) struct RunQueue {
    limits: QueueLimits,
    waiting: Mutex<Waiting>,
}

/// Why a run may not wait for a slot: the queue is full. Its `Display` is the tool error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFull {
    what: String,
}

impl std::fmt::Display for QueueFull {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "every run slot is busy and {}, so this run was not started (nothing of it ran); run it again once some of the runs have finished",
            self.what
        )
    }
}

impl std::error::Error for QueueFull {}

/// A run's place in the queue; dropping it (the run got its slots, or was cancelled while
/// it waited) frees the place and the bytes.
#[derive(Debug)]
pub(super) struct Place {
    queue: Arc<RunQueue>,
    bytes: usize,
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut waiting = self.queue.state();
        waiting.runs -= 1;
        waiting.bytes -= self.bytes;
    }
}

/// How a run gets its slots: [`RunQueue::admit`]'s answer.
#[derive(Debug)]
pub(super) enum Admission<'a> {
    /// Both slots were free and are now the run's: the session's permit, the process's.
    Now(SemaphorePermit<'a>, SemaphorePermit<'a>),
    /// The run waits for its slots, holding this place in the queue meanwhile.
    Wait(Place),
}

impl RunQueue {
    /// A queue bounded by `limits`.
    pub(super) fn new(limits: QueueLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            waiting: Mutex::default(),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Both of `slots` (the session's, then the process's) taken at once when each has a
    /// permit free, so the run never waits and is never counted; else, with neither held, a
    /// place from [`Self::enter`]. Taking the permits here, rather than checking that some
    /// are free and acquiring them later, leaves no gap in which another run takes them and
    /// this one waits uncounted.
    ///
    /// # Errors
    /// [`QueueFull`] as [`Self::enter`].
    pub(super) fn admit<'a>(
        self: &Arc<Self>,
        slots: [&'a Semaphore; 2],
        bytes: usize,
    ) -> Result<Admission<'a>, QueueFull> {
        if let Ok(session) = slots[0].try_acquire()
            && let Ok(process) = slots[1].try_acquire()
        {
            return Ok(Admission::Now(session, process));
        }
        self.enter(bytes).map(Admission::Wait)
    }

    /// A place for a run holding `bytes` of code, unless the queue already holds
    /// [`QueueLimits::runs`] runs, or `bytes` more would take it past [`QueueLimits::bytes`].
    ///
    /// # Errors
    /// [`QueueFull`], saying which bound and which option sets it.
    pub(super) fn enter(self: &Arc<Self>, bytes: usize) -> Result<Place, QueueFull> {
        let mut waiting = self.state();
        let limits = self.limits;
        if waiting.runs >= limits.runs {
            let what = if limits.runs == 0 {
                "no run may wait for one (--max-queued-runs 0)".to_owned()
            } else {
                format!(
                    "{} runs already wait for one (at most {} may wait: --max-queued-runs)",
                    waiting.runs, limits.runs
                )
            };
            return Err(QueueFull { what });
        }
        if waiting.bytes.saturating_add(bytes) > limits.bytes {
            return Err(QueueFull {
                what: format!(
                    "the {} runs waiting for one hold {} bytes of code, which with this run's {} bytes is more than the {} bytes the waiting runs may hold (--max-queued-bytes)",
                    waiting.runs, waiting.bytes, bytes, limits.bytes
                ),
            });
        }
        waiting.runs += 1;
        waiting.bytes += bytes;
        drop(waiting);
        Ok(Place {
            queue: self.clone(),
            bytes,
        })
    }
}

/// The tool result of a run refused because the queue is full (and its log line): a run's
/// result object whose `error` says which bound refused it.
pub(super) fn refusal(full: &QueueFull) -> CallToolResult {
    tracing::warn!("a run was refused: {full}");
    super::unstarted_result(&full.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_past_either_bound_is_refused_and_a_freed_place_takes_the_next() {
        let queue = RunQueue::new(QueueLimits {
            runs: 2,
            bytes: 100,
        });
        let first = queue.enter(60).expect("room");
        let too_big = queue.enter(41).expect_err("60 + 41 bytes is over 100");
        assert!(
            too_big.to_string().contains("--max-queued-bytes"),
            "{too_big}"
        );
        let second = queue.enter(40).expect("100 bytes fit");
        let third = queue.enter(0).expect_err("two runs already wait");
        assert!(third.to_string().contains("--max-queued-runs"), "{third}");
        drop(first);
        let _third = queue
            .enter(60)
            .expect("the first run's place and bytes are free again");
        drop(second);
        assert_eq!(queue.state().runs, 1);
        assert_eq!(queue.state().bytes, 60);
    }

    #[test]
    fn a_refusal_is_a_run_result_object_saying_which_bound_refused_it() {
        let queue = RunQueue::new(QueueLimits { runs: 0, bytes: 0 });
        let full = queue.enter(1).expect_err("no run may wait");
        let result = refusal(&full);
        assert_eq!(result.is_error, Some(true));
        let structured = result.structured_content.expect("structuredContent");
        let error = "every run slot is busy and no run may wait for one (--max-queued-runs 0), so this run was not started (nothing of it ran); run it again once some of the runs have finished";
        assert_eq!(
            structured,
            serde_json::json!({"stdout": "", "error": error, "truncated": false, "stopped": true})
        );
        let text = result.content[0]
            .as_text()
            .expect("a text block")
            .text
            .clone();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&text).expect("JSON text"),
            structured
        );
    }

    #[test]
    fn a_run_admitted_at_once_holds_its_slots_so_the_next_one_waits_in_the_queue() {
        let queue = RunQueue::new(QueueLimits::default());
        let (session, process) = (Semaphore::new(4), Semaphore::new(1));
        let first = queue.admit([&session, &process], 10).expect("room");
        assert!(matches!(first, Admission::Now(..)), "{first:?}");
        assert_eq!(
            process.available_permits(),
            0,
            "the first run holds its slot"
        );
        let second = queue.admit([&session, &process], 10).expect("room");
        assert!(matches!(second, Admission::Wait(_)), "{second:?}");
        assert_eq!(
            session.available_permits(),
            3,
            "a run that waits holds no session slot meanwhile"
        );
        let waiting = queue.state();
        assert_eq!((waiting.runs, waiting.bytes), (1, 10));
        drop(waiting);
        drop((first, second));
        assert_eq!(queue.state().runs, 0);
        assert_eq!(process.available_permits(), 1);
    }
}
