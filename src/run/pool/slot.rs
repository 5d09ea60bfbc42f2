//! The pool's background side: a slot keeps one sandbox started ahead (pausing while the
//! catalog keeps changing, churn.rs), a race's other
//! sandbox joins the pool, and an idle sandbox waits for its take, its death, a catalog
//! change or the pool's close.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};

use super::churn::catalog_rests;
use super::{
    Ask, FINISH_LIMIT, Idle, Member, READY_LIMIT, REFILL_WAIT, RETRY_FIRST, RETRY_MAX, Shared,
    hand_to_waiter,
};
use crate::bridge::Bridge;
use crate::run::HeldSandbox;
use crate::sandbox::{Backend, CpuPriority};

/// Resolves when the pool is closed or dropped.
async fn closing(closed: &mut watch::Receiver<bool>) {
    let _ = closed.wait_for(|c| *c).await;
}

/// Resolves when the catalog version moves past `version` (never when the bridge is gone).
async fn catalog_moves(catalog: &mut watch::Receiver<u64>, version: u64) {
    if catalog.wait_for(|v| *v != version).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Start a sandbox at `priority` that asks for `ready`, and wait for it. The backend's
/// start is always finished (see [`slot`]); when the pool closes while the runner boots
/// after it, the sandbox is killed at once and the start fails: a booting runner at
/// background priority can take seconds on a loaded machine, and serve's exit waits for
/// the pool's close.
async fn start_member(
    bridge: &Arc<Bridge>,
    backend: &dyn Backend,
    priority: CpuPriority,
    mut closed: watch::Receiver<bool>,
) -> Result<HeldSandbox, String> {
    let sandbox = backend
        .spawn_at(priority)
        .await
        .map_err(|e| e.to_string())?;
    let mut held = HeldSandbox::begin(bridge.clone(), sandbox, true).await;
    tokio::select! {
        ready = held.wait_ready(READY_LIMIT) => ready.map_err(|e| e.to_string())?,
        () = closing(&mut closed) => {
            held.end_now().await;
            return Err("the pool closed while the sandbox started".into());
        }
    }
    Ok(held)
}

/// A take's own start in a race with the pool's: [`start_member`] at normal priority (a run
/// waits for it), counted as ready.
pub(super) async fn start_ready(
    bridge: Arc<Bridge>,
    backend: Arc<dyn Backend>,
    shared: Arc<Shared>,
    closed: watch::Receiver<bool>,
) -> Result<Member, String> {
    // The version is read before the catalog goes into `start` (see catalog_changed).
    let version = bridge.catalog_version();
    let held = start_member(&bridge, backend.as_ref(), CpuPriority::Normal, closed).await?;
    shared.counters.ready.fetch_add(1, Ordering::SeqCst);
    Ok(Member { held, version })
}

/// The task of a sandbox that lost a take's race: wait until `member` is ready (it was
/// started by the take; when the pool closes first, it is let finish and ended), hand it to
/// a waiting take or list it idle, as a slot does, once.
pub(super) async fn adopted(
    bridge: Arc<Bridge>,
    shared: Arc<Shared>,
    mut closed: watch::Receiver<bool>,
    mut member: BoxFuture<'static, Result<Member, String>>,
) {
    let started = tokio::select! {
        started = &mut member => started,
        () = closing(&mut closed) => {
            if let Ok(Ok(member)) = tokio::time::timeout(FINISH_LIMIT, member).await {
                member.held.end_now().await;
            }
            return;
        }
    };
    let member = match started {
        Ok(member) => member,
        Err(why) => {
            tracing::info!("a run's own start lost its race and then failed: {why}");
            return;
        }
    };
    let version = member.version;
    let member = {
        let mut state = shared.state();
        let Some(member) = hand_to_waiter(&mut state, member) else {
            if bridge.catalog_version() == version {
                shared.churn().taken();
            }
            shared.counters.adopted.fetch_add(1, Ordering::SeqCst);
            tracing::info!("a race's other sandbox handed to a waiting run");
            return;
        };
        member
    };
    let mut catalog = bridge.watch_catalog();
    idle_until_used(
        &bridge,
        &shared,
        member,
        Origin::Race,
        &mut catalog,
        &mut closed,
    )
    .await;
}

/// Where a sandbox about to be listed idle comes from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// A slot's start.
    Slot,
    /// A take's start that lost its race (counted as adopted once listed).
    Race,
}

/// What ended a pooled sandbox's wait.
enum Next {
    Taken(oneshot::Sender<Member>),
    Dead,
    /// A sandbox taken while this one was idle did not acknowledge its cell.
    Suspect,
    Stale,
    Closed,
}

/// How a pooled sandbox's time in the pool ended.
enum Went {
    /// A run took it; the receiver resolves (with an error) once that run's sandbox has
    /// been ended.
    Taken(oneshot::Receiver<()>),
    /// It died or went stale and was ended.
    Away,
    /// The pool already held its size of idle sandboxes; it was ended unlisted.
    Full,
    /// The pool closed; it was ended.
    Closed,
}

/// Keep `member`, ready, listed idle until a take gets it, it dies or goes stale (then it is
/// ended), or the pool closes (then it is ended). When the pool already holds its size of
/// idle sandboxes, it is ended at once instead: a race's other sandbox and a slot's start
/// can both become ready while neither was listed, and the pool holds at most its size.
async fn idle_until_used(
    bridge: &Bridge,
    shared: &Shared,
    member: Member,
    origin: Origin,
    catalog: &mut watch::Receiver<u64>,
    closed: &mut watch::Receiver<bool>,
) -> Went {
    let Member { mut held, version } = member;
    if bridge.catalog_version() != version {
        shared.churn().stale(version, Duration::ZERO);
        shared.counters.stale.fetch_add(1, Ordering::SeqCst);
        tracing::info!("pooled sandbox thrown away: the catalog changed");
        held.close().await;
        return Went::Away;
    }
    let id = shared.ids.fetch_add(1, Ordering::SeqCst);
    let (give, mut asked) = oneshot::channel();
    let listed = Instant::now();
    let idle = {
        let mut state = shared.state();
        if state.idle.len() >= shared.size {
            None
        } else {
            state.idle.push_back(Idle { id, listed, give });
            if origin == Origin::Race {
                shared.counters.adopted.fetch_add(1, Ordering::SeqCst);
            }
            Some(state.idle.len())
        }
    };
    let Some(idle) = idle else {
        tracing::info!("a ready sandbox ended unlisted: the pool already holds its size idle");
        held.close().await;
        return Went::Full;
    };
    tracing::info!(idle, "pooled sandbox ready");
    let next = tokio::select! {
        asked = &mut asked => match asked {
            Ok(Ask::Take(reply)) => Next::Taken(reply),
            Ok(Ask::Suspect) => Next::Suspect,
            Err(_) => Next::Closed,
        },
        () = held.stops_waiting() => Next::Dead,
        () = catalog_moves(catalog, version) => Next::Stale,
        () = closing(closed) => Next::Closed,
    };
    match next {
        Next::Taken(reply) => {
            if bridge.catalog_version() == version {
                shared.churn().taken();
            }
            let (ended, run_over) = oneshot::channel();
            held.ended = Some(ended);
            if let Err(member) = reply.send(Member { held, version }) {
                member.held.close().await;
            }
            return Went::Taken(run_over);
        }
        Next::Dead => {
            shared.counters.dead.fetch_add(1, Ordering::SeqCst);
            tracing::info!("pooled sandbox thrown away: it died while idle");
        }
        Next::Stale => {
            shared.churn().stale(version, listed.elapsed());
            shared.counters.stale.fetch_add(1, Ordering::SeqCst);
            tracing::info!("pooled sandbox thrown away: the catalog changed");
        }
        Next::Suspect | Next::Closed => {}
    }
    shared.unlist(id);
    // No grace for a runner that runs nothing when serve's exit waits for it (the pool
    // closed) or when it may be unable to wake for it (a suspect).
    match next {
        Next::Closed => {
            held.end_now().await;
            Went::Closed
        }
        Next::Suspect => {
            held.end_now().await;
            Went::Away
        }
        _ => {
            held.close().await;
            Went::Away
        }
    }
}

/// One slot: keep one sandbox ready until the pool closes.
pub(super) async fn slot(
    bridge: Arc<Bridge>,
    backend: Arc<dyn Backend>,
    shared: Arc<Shared>,
    mut closed: watch::Receiver<bool>,
) {
    let mut catalog = bridge.watch_catalog();
    let mut retry = RETRY_FIRST;
    loop {
        if *closed.borrow() {
            return;
        }
        // One start at a time, and only while the idle sandboxes and the starts under way
        // are fewer than the pool's size (a race's other sandbox may have joined). After
        // sandboxes thrown away for one catalog change after another, also only once the
        // catalog has rested and not changed since (churn.rs); asked at this slot's turn,
        // since starts of other slots may have been thrown away while it waited for it.
        let mut rested = None;
        let one_at_a_time = loop {
            let permit = tokio::select! {
                permit = shared.starting.acquire() => permit,
                () = closing(&mut closed) => return,
            };
            let rest = shared.churn().rest();
            if let Some(rest) = rest
                && rested != Some(bridge.catalog_version())
            {
                drop(permit);
                tracing::info!(
                    "the catalog keeps changing: the pool starts its next sandbox once it has not changed for {} ms",
                    rest.as_millis()
                );
                tokio::select! {
                    () = catalog_rests(&mut catalog, rest) => {}
                    () = closing(&mut closed) => return,
                }
                rested = Some(bridge.catalog_version());
                continue;
            }
            let room = shared.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut state = shared.state();
                if state.idle.len() + state.in_progress < shared.size {
                    state.in_progress += 1;
                    break permit;
                }
            }
            drop(permit);
            tokio::select! {
                () = room => {}
                () = closing(&mut closed) => return,
            }
        };
        // The version is read before the catalog goes into `start` (see catalog_changed),
        // and after the wait for this slot's turn, so a catalog change during that wait
        // does not make the start stale before it began.
        let version = bridge.catalog_version();
        let begun = Instant::now();
        let start = start_member(
            &bridge,
            backend.as_ref(),
            CpuPriority::Background,
            closed.clone(),
        );
        tokio::pin!(start);
        let started = tokio::select! {
            started = &mut start => started,
            () = closing(&mut closed) => {
                // The backend's start under way is finished and then ended, not dropped
                // half way: a Docker create request dropped before the engine has made its
                // container can leave a container made after its removal was asked for.
                // A runner still booting after it is killed at once (start_member).
                if let Ok(Ok(held)) = tokio::time::timeout(FINISH_LIMIT, start).await {
                    held.end_now().await;
                }
                return;
            }
        };
        drop(one_at_a_time);
        let member = match started {
            Ok(held) => {
                retry = RETRY_FIRST;
                shared.churn().started(begun.elapsed());
                shared.counters.ready.fetch_add(1, Ordering::SeqCst);
                let member = Member { held, version };
                match shared.start_ended(Some(member)) {
                    Some(member) => member,
                    None => {
                        tracing::info!("pooled sandbox ready, handed to a waiting run");
                        if bridge.catalog_version() == version {
                            shared.churn().taken();
                        }
                        continue;
                    }
                }
            }
            Err(why) => {
                shared.start_ended(None);
                shared.counters.failed.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(
                    "a pooled sandbox failed to start: {why}; runs start cold until one does; next try in {} ms",
                    retry.as_millis()
                );
                tokio::select! {
                    () = tokio::time::sleep(retry) => {}
                    () = closing(&mut closed) => return,
                }
                retry = (retry * 2).min(RETRY_MAX);
                continue;
            }
        };
        match idle_until_used(
            &bridge,
            &shared,
            member,
            Origin::Slot,
            &mut catalog,
            &mut closed,
        )
        .await
        {
            Went::Closed => return,
            // Full: the next start waits for room, as every start does.
            Went::Away | Went::Full => {}
            // The next start waits until the run that took this sandbox is over and its
            // sandbox ended (at most REFILL_WAIT), so neither competes with that run and
            // its reply for the CPU.
            Went::Taken(run_over) => {
                tokio::select! {
                    _ = run_over => {}
                    () = tokio::time::sleep(REFILL_WAIT) => {}
                    () = closing(&mut closed) => return,
                }
            }
        }
    }
}
