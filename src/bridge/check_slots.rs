//! How many argument checks run at once in the whole process: at most one per CPU.
//!
//! A check off the async runtime runs on tokio's blocking pool (check.rs): in `serve`'s
//! own process, outside every run's cgroup, and it cannot be stopped once started (its
//! work is bounded before it starts: [`super::catalog::ArgsValidator::check`]). One run has
//! one check in flight at a time, but many runs and sessions could each have one, up to the
//! pool's 512 threads. So a check first takes one of [`slots`] process-wide slots, held
//! until it ends (also when its run stopped waiting for it); waiting for a slot is part of
//! waiting for the check, so it ends with the run's deadline or cancel, and a call never
//! sent past it (test `every_check_slot_taken_makes_a_check_wait`).

use std::num::NonZeroUsize;
use std::sync::{Arc, LazyLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The slots, one per CPU this process may use.
static SLOTS: LazyLock<Arc<Semaphore>> = LazyLock::new(|| Arc::new(Semaphore::new(slots())));

/// How many checks may run at once: the CPUs this process may use
/// ([`std::thread::available_parallelism`]: its affinity mask and cgroup CPU quota), at
/// least 1.
pub(super) fn slots() -> usize {
    std::thread::available_parallelism().map_or(1, NonZeroUsize::get)
}

/// Wait for a check slot; the check may run while the returned permit is held.
///
/// # Errors
/// `Err(())` only if the slots were closed, which they never are.
pub(super) async fn take() -> Result<OwnedSemaphorePermit, ()> {
    SLOTS.clone().acquire_owned().await.map_err(|_| ())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::bridge::CallBudget;
    use crate::bridge::catalog::ArgsValidator;

    #[tokio::test]
    async fn every_check_slot_taken_makes_a_check_wait() {
        // A pattern keeps the check off the runtime (check.rs), where slots apply.
        let validator = Arc::new(
            ArgsValidator::compile(&json!({"properties": {"s": {"pattern": "^a*$"}}}))
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let args = json!({"s": "aaaa"});
        let mut held = Vec::new();
        for _ in 0..slots() {
            held.push(take().await.unwrap_or_else(|()| panic!("slots closed")));
        }
        let budget = CallBudget::new(10);
        let waited = tokio::time::timeout(
            Duration::from_millis(300),
            super::super::check::check(&budget, &validator, &args, 10),
        )
        .await;
        assert!(waited.is_err(), "a check ran with every slot taken");
        // One slot free: the check runs.
        held.pop();
        let checked = tokio::time::timeout(
            Duration::from_secs(30),
            super::super::check::check(&budget, &validator, &args, 10),
        )
        .await;
        assert!(matches!(checked, Ok(Ok(Ok(())))), "{checked:?}");
        drop(held);
    }
}
