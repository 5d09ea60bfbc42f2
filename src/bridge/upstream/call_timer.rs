//! The timers that bound a wrapped server's calls, kept armed between calls and reused.
//!
//! A fresh timer per call costs more than its bookkeeping: tokio inserts it into its timer
//! wheel under a lock, and since a call's deadline (30 s by default) is nearly always
//! earlier than every other timer of `serve` (a run's deadline), the insert also wakes the
//! runtime's driver (an eventfd write and one more `epoll_wait` per call). A timer taken
//! back from [`CallTimers`] still sits in the wheel at an earlier call's deadline; moving it
//! to a later deadline only records the new one (tokio's `Sleep::reset` extends an armed
//! timer in place, and the wheel re-files it when the old instant comes). Sequential calls,
//! whose deadlines only move forward, then arm no timer at all.
//!
//! A timer is reused only on the runtime that made it (a timer belongs to its runtime's
//! driver), and only when its call ended before it fired; a call given up (dropped) drops
//! its timer. At most [`MAX_IDLE`] timers wait between calls; one that reaches its old
//! deadline while idle fires once, a spurious wake-up of the task that last polled it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

use tokio::runtime::{Handle, Id};
use tokio::time::{Instant, Sleep};

/// Idle timers kept, at most: enough for every call in flight of several runs at once.
const MAX_IDLE: usize = 64;

/// A pool of call timers, one per wrapped server.
#[derive(Default)]
pub(super) struct CallTimers {
    idle: Mutex<Vec<(Id, Pin<Box<Sleep>>)>>,
}

impl CallTimers {
    /// `work`'s output if it finishes before `deadline`, else `None` (`work` is then
    /// dropped), as `tokio::time::timeout_at` gives it.
    pub(super) async fn within<F: Future>(&self, deadline: Instant, work: F) -> Option<F::Output> {
        let runtime = Handle::current().id();
        let mut timer = self.take(runtime, deadline);
        let output = tokio::select! {
            biased;
            output = work => Some(output),
            () = timer.as_mut() => None,
        };
        if output.is_some() && !timer.is_elapsed() {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            if idle.len() < MAX_IDLE {
                idle.push((runtime, timer));
            }
        }
        output
    }

    /// An idle timer of `runtime` moved to `deadline`, or a new one.
    fn take(&self, runtime: Id, deadline: Instant) -> Pin<Box<Sleep>> {
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            // Timers of another runtime are of no use here (it may have ended).
            idle.retain(|(id, _)| *id == runtime);
            idle.pop()
        };
        match reused {
            Some((_, mut timer)) => {
                timer.as_mut().reset(deadline);
                timer
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn after(millis: u64) -> Instant {
        Instant::now() + Duration::from_millis(millis)
    }

    #[tokio::test]
    async fn work_that_finishes_in_time_gives_its_output_and_leaves_its_timer_for_the_next_call() {
        let timers = CallTimers::default();
        assert_eq!(timers.within(after(30_000), async { 7 }).await, Some(7));
        let short = tokio::time::sleep(Duration::from_millis(10));
        assert_eq!(timers.within(after(31_000), short).await, Some(()));
        assert_eq!(timers.idle.lock().unwrap().len(), 1);
    }

    #[tokio::test]
    async fn a_reused_timer_ends_work_at_its_new_deadline_whether_earlier_or_later() {
        let timers = CallTimers::default();
        // Armed at 10 s (work pending at first, so the timer is polled and registered),
        // then moved earlier: the work ends at the new deadline.
        assert_eq!(
            timers.within(after(10_000), tokio::task::yield_now()).await,
            Some(())
        );
        assert_eq!(timers.idle.lock().unwrap().len(), 1);
        let start = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(timers.within(after(50), never).await, None);
        assert!(start.elapsed() >= Duration::from_millis(50));
        assert!(start.elapsed() < Duration::from_secs(10));
        // A timer that fired is not kept.
        assert!(timers.idle.lock().unwrap().is_empty());
        // Armed at 20 ms, then moved later: the work is not ended at the old instant.
        assert_eq!(
            timers.within(after(20), tokio::task::yield_now()).await,
            Some(())
        );
        assert_eq!(timers.idle.lock().unwrap().len(), 1);
        let start = Instant::now();
        let never = std::future::pending::<()>();
        assert_eq!(timers.within(after(150), never).await, None);
        assert!(start.elapsed() >= Duration::from_millis(150));
    }

    #[test]
    fn a_timer_of_an_ended_runtime_is_never_used_again() {
        let timers = CallTimers::default();
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap()
        };
        let first = runtime();
        first.block_on(async { timers.within(after(30_000), async {}).await });
        drop(first);
        let never = std::future::pending::<()>();
        let bounded = runtime().block_on(async { timers.within(after(20), never).await });
        assert_eq!(bounded, None);
    }
}
