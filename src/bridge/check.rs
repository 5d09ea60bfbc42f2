//! Where a call's JSON Schema check runs: on a blocking thread, never on the async runtime.
//!
//! A wrapped server's inputSchema and the code's arguments are both hostile input, and a
//! check can cost real CPU (a schema whose `$ref`s form a "billion laughs" DAG, a `pattern`
//! with stacked lookaheads). So the check of [`ArgsValidator::check`] runs on tokio's
//! blocking pool ([`tokio::task::spawn_blocking`]): the runtime's workers keep serving every
//! other run, session and request while it runs (test
//! `a_costly_argument_check_never_delays_another_run`).
//!
//! One run has at most one check in flight ([`CallBudget`]'s check queue): gathered calls
//! wait their turn, so one run takes at most one blocking thread however many calls it
//! gathers. A check is bounded by its run: at the run's deadline or cancel the run loop
//! drops the call's future, so a call whose check has not finished is never sent (test
//! `a_call_still_being_checked_at_the_deadline_is_never_sent`); the thread itself stops when
//! the check ends, which the work budget of [`ArgsValidator::check`] bounds.

use std::sync::Arc;

use serde_json::Value;

use super::CallBudget;
use super::catalog::{ArgsValidator, CheckError};

/// Check `args` against `validator` on a blocking thread, after the run's earlier checks.
///
/// `Ok(Ok(()))`: the arguments pass; `Ok(Err(why))`: refused, with a short bounded reason;
/// `Err(())`: the check itself panicked (a host fault; nothing is sent).
pub(super) async fn check_off_runtime(
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
    let checked = tokio::task::spawn_blocking(move || {
        // The turn is held until the check ends, even when the run stopped waiting for it.
        let _turn = turn;
        validator.check(&args)
    });
    checked.await.map_err(|_| ())
}
