//! Where a call's JSON Schema check runs: where the call is served when it is small, else on
//! a blocking thread, never holding the async runtime for long.
//!
//! A wrapped server's inputSchema and the code's arguments are both hostile input, and a
//! check can cost real CPU (a schema whose `$ref`s form a "billion laughs" DAG, a `pattern`
//! with stacked lookaheads). A check whose schema holds nothing whose evaluation can cost
//! more than in proportion to its size (no regular expression, no `uniqueItems`: decided
//! once per tool, when the catalog is built) and whose counted work is small runs at once
//! where the call is served ([`ArgsValidator::check_inline`]): a hop to another thread would
//! cost more than it does. Every other check runs on tokio's blocking
//! pool ([`tokio::task::spawn_blocking`]): the runtime's workers keep serving every other
//! run, session and request while it runs (test
//! `a_costly_argument_check_never_delays_another_run`).
//!
//! One run has at most one check off the runtime in flight ([`CallBudget`]'s check queue):
//! gathered calls wait their turn, so one run takes at most one blocking thread however many
//! calls it gathers. A check is bounded by its run: at the run's deadline or cancel the run
//! loop drops the call's future, so a call whose check has not finished is never sent (test
//! `a_call_still_being_checked_at_the_deadline_is_never_sent`); the thread itself stops when
//! the check ends, which the work budget of [`ArgsValidator::check`] bounds. Across the
//! process at most one check per CPU runs at once (check_slots.rs).

use std::sync::Arc;

use serde_json::Value;

use super::CallBudget;
use super::catalog::{ArgsValidator, CheckError};

/// Check `args` (`args_bytes` as JSON) against `validator`: at once when the check is small
/// ([`ArgsValidator::check_inline`]), else on a blocking thread after the run's earlier
/// checks.
///
/// `Ok(Ok(()))`: the arguments pass; `Ok(Err(why))`: refused, with a short bounded reason;
/// `Err(())`: the check itself panicked (a host fault; nothing is sent).
pub(super) async fn check(
    budget: &CallBudget,
    validator: &Arc<ArgsValidator>,
    args: &Value,
    args_bytes: usize,
) -> Result<Result<(), CheckError>, ()> {
    let inline = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        validator.check_inline(args, args_bytes)
    }));
    match inline {
        Ok(Some(checked)) => Ok(checked),
        Ok(None) => check_off_runtime(budget, validator.clone(), args.clone()).await,
        Err(_) => Err(()),
    }
}

/// Check `args` against `validator` on a blocking thread, after the run's earlier checks
/// off the runtime.
async fn check_off_runtime(
    budget: &CallBudget,
    validator: Arc<ArgsValidator>,
    args: Value,
) -> Result<Result<(), CheckError>, ()> {
    // The queue is never closed, so acquiring only fails if it were; treat that as a fault.
    let turn = budget
        .checks
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| ())?;
    // Then one of the process's check slots (check_slots.rs).
    let slot = super::check_slots::take().await?;
    let checked = tokio::task::spawn_blocking(move || {
        // The turn and the slot are held until the check ends, even when the run stopped
        // waiting for it.
        let _turn = turn;
        let _slot = slot;
        validator.check(&args)
    });
    checked.await.map_err(|_| ())
}
