//! The warm pool: sandboxes started ahead of the runs that will use them.
//!
//! A pool of size N keeps N slots. Each slot starts one sandbox from the [`Backend`], sends
//! it the catalog in a `start` that asks for `ready`, and waits for that `ready`: runner.py
//! has done its imports, loaded the catalog and blocks reading its first cell. The sandbox
//! then waits, idle, until one of four things happens:
//!
//! - a run takes it ([`Pool::take`]): the slot starts the next sandbox once that run is
//!   over and its sandbox ended, or after [`REFILL_WAIT`] when the run lasts longer;
//! - it dies or writes anything (out of memory, a signal from the host, a crash): thrown away;
//! - the bridge's [`Bridge::catalog_version`] moves on (a catalog change, a server restart):
//!   thrown away, since its `start` is stale;
//! - the pool closes ([`Pool::close`], or the pool is dropped): killed.
//!
//! Every sandbox serves exactly one run and is then ended like a cold one: a pooled run has
//! fresh namespaces, a fresh /tmp and its own cgroup or container, exactly as a cold run.
//! The end of a run's sandbox (its exit, its cgroup's removal, `docker rm`) happens in the
//! background, so the result does not wait for it; [`Pool::close`] waits for those endings.
//! A run's deadline and call budget start when it takes its sandbox, never when the sandbox
//! was started. When no sandbox is idle (runs come faster than the slots refill) and one is
//! being started, a run races it against a start of its own: whichever says `ready` first
//! serves the run, and the other joins the pool as an idle member (a fresh sandbox, never
//! a used one), so a stalled start never makes a take slower than a cold start. When none
//! is being started, the run starts a sandbox of its own (a cold start).
//!
//! A run never fails because of a pool member. A member found dead or stale at the take is
//! thrown away and the run takes the next. A taken member must acknowledge the cell (its
//! `began`, written as soon as the runner has read the cell, before any code runs) within
//! [`ACK_LIMIT`]: one that is stopped, frozen, paused or too slow is killed, nothing it
//! sends is read any more (so none of its tool calls reaches a server), and the cell goes to
//! a sandbox the run starts itself, under the same deadline ([`super::run_in`]), so a run
//! waits for an acknowledgement at most once. The sandboxes idle beside the silent one are
//! replaced too (`Pool::suspect_idle`): whatever silenced it (the host stopping or
//! freezing the pool's processes, pausing its containers, a machine too loaded to wake
//! them) may hold them as well, and each would cost a later run that wait again.
//!
//! Slots start their sandboxes one at a time, so filling the pool competes with a cold run
//! for the CPU as little as one more start does.
//!
//! The pool's own work runs at background CPU priority ([`CpuPriority::Background`]) where
//! the backend can raise it again: a slot's start, and the ending of a finished run's
//! sandbox. A take puts its sandbox back at normal priority before the cell is sent; a
//! sandbox whose priority cannot be raised is thrown away. A take's own start (a cold
//! start, or one raced against the pool's) runs at normal priority from the beginning.
//!
//! A slot whose sandbox fails to start waits before it tries again (from
//! [`RETRY_FIRST`] doubling up to [`RETRY_MAX`]), so a host that cannot start sandboxes is
//! not kept busy; runs then start cold and report the failure themselves.
//!
//! Sandboxes thrown away for a catalog change are replaced at once; when the next change
//! throws sandboxes away too, with no take between (a wrapped server announcing a new tool
//! list in a loop), the slots wait for the catalog to rest before each next start, from a
//! second (or the time a start takes) doubling up to [`CHURN_REST_MAX`] (pool/churn.rs):
//! such a catalog is stale again before any run could take a sandbox holding it, so the
//! starts would serve nothing.

mod churn;
mod slot;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use tokio_util::task::TaskTracker;

use self::slot::{adopted, slot, start_ready};
use super::{HeldSandbox, PoolSide, RunOptions, RunReport, Steering, run_in};
use crate::bridge::Bridge;
use crate::sandbox::{Backend, CpuPriority, SandboxError};

/// The pool size `serve` uses by default: one sandbox for each run it runs at once.
pub const DEFAULT_POOL_SIZE: u16 = crate::limits::MAX_CONCURRENT_RUNS as u16;
/// Longest time a pooled sandbox may take to say `ready` before it is thrown away.
pub const READY_LIMIT: Duration = Duration::from_secs(60);
/// Longest time a sandbox taken from the pool may take to acknowledge its cell (to send
/// `began` or anything else) before it is killed and the cell goes to another sandbox.
///
/// An idle runner blocks in a read of its input and writes `began` as soon as that read
/// returns, before any code runs, so the acknowledgement costs one wake-up of a process and
/// one pipe (Docker: the attach stream through the engine) each way. Measured from the
/// cell's write to the `began`'s read, 200 pooled runs each on the 2-core VM at a load
/// average of 4 to 9 (a debug build): native p50 0.6 ms, p99 9 ms, max 14 ms; Docker p50
/// 5 ms, p99 70 ms, max 104 ms. Two seconds is about 20 times the slowest of those, so a
/// healthy member is given up only on a machine far more loaded than that; one given up by
/// mistake costs only another sandbox (about a cold start), and one that is stopped, frozen
/// or paused costs its run this bound once.
pub const ACK_LIMIT: Duration = Duration::from_secs(2);
/// Longest time [`Pool::close`] waits for the sandboxes of finished runs to be ended (one
/// ending is bounded by the runner's exit grace and, on Docker, by `docker rm`'s timeout).
pub const ENDING_LIMIT: Duration = Duration::from_secs(20);
/// Longest time [`Pool::close`] lets a sandbox start under way finish, so it can be ended
/// whole; past it the start is dropped (killed half way).
pub const FINISH_LIMIT: Duration = Duration::from_secs(10);
/// Longest time a slot whose sandbox a run took waits for that run to end before it starts
/// the next sandbox. The start (about 120 ms of CPU natively: the launcher's namespaces,
/// mounts and cgroup, then CPython's imports) would otherwise compete with the run and its
/// reply for the CPU; a longer run gets its replacement started beside it after this wait.
pub const REFILL_WAIT: Duration = Duration::from_millis(500);
/// Wait after a slot's first failed start, doubled after each further failure.
pub const RETRY_FIRST: Duration = Duration::from_millis(250);
/// Longest wait between two failed starts of one slot.
pub const RETRY_MAX: Duration = Duration::from_secs(30);
/// Longest time the catalog must stay unchanged before the pool, whose sandboxes were thrown
/// away for one catalog change after another, starts again; a sandbox that stayed current
/// this long while ready ends such a streak.
pub const CHURN_REST_MAX: Duration = Duration::from_secs(10);

/// Counts of what a pool did since it was made (for logs, tests and the benchmark).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Sandboxes waiting for a run now.
    pub idle: usize,
    /// Sandboxes that said `ready`: those the slots started, and those takes started
    /// in a race with a slot's start.
    pub ready: u64,
    /// Runs that took a pooled sandbox.
    pub taken: u64,
    /// Runs that started a sandbox of their own (none was idle, or it was dead or stale, or
    /// their own start won the race with the pool's).
    pub cold: u64,
    /// Sandboxes of takes' races that lost and joined the pool as idle members (they count
    /// in `ready` too).
    pub adopted: u64,
    /// Idle sandboxes thrown away because they died or wrote something.
    pub dead: u64,
    /// Idle sandboxes thrown away because the catalog changed.
    pub stale: u64,
    /// Idle sandboxes thrown away because a taken one did not acknowledge its cell while
    /// they were idle beside it (they may be silenced the same way; see the module doc).
    pub suspect: u64,
    /// Starts that failed (no `ready`).
    pub failed: u64,
}

/// A sandbox ready for a run, handed over by its slot.
struct Member {
    held: HeldSandbox,
    /// The catalog version its `start` carried.
    version: u64,
}

/// An idle sandbox as the pool lists it: ask its slot for it through `give`.
struct Idle {
    id: u64,
    /// When it was listed (it had said `ready` just before).
    listed: Instant,
    give: oneshot::Sender<Ask>,
}

/// What the pool asks of an idle sandbox's slot.
enum Ask {
    /// Hand the sandbox over through this sender (a take).
    Take(oneshot::Sender<Member>),
    /// End it at once: a sandbox idle beside it did not acknowledge its cell.
    Suspect,
}

#[derive(Default)]
struct Counters {
    ready: AtomicU64,
    taken: AtomicU64,
    cold: AtomicU64,
    adopted: AtomicU64,
    dead: AtomicU64,
    stale: AtomicU64,
    suspect: AtomicU64,
    failed: AtomicU64,
}

/// The pool's lists, under one lock.
#[derive(Default)]
struct State {
    /// Ready sandboxes, oldest first.
    idle: VecDeque<Idle>,
    /// Takes that wait for a sandbox being started, first come first served.
    waiters: VecDeque<oneshot::Sender<Member>>,
    /// Sandboxes being started now (spawned, not yet ready).
    in_progress: usize,
}

struct Shared {
    /// The pool's size: idle members above it are not kept.
    size: usize,
    state: Mutex<State>,
    /// One sandbox starts at a time: a burst of starts (the pool filling up, several takes
    /// at once) would slow down the cold starts of runs that found the pool empty.
    starting: tokio::sync::Semaphore,
    /// Notified when an idle sandbox leaves the list: a slot that waits because the list
    /// and the starts under way already make the pool's size (a race's other sandbox took
    /// its place) may start one.
    room: tokio::sync::Notify,
    ids: AtomicU64,
    counters: Counters,
    /// The streak of catalog changes that threw sandboxes away, for all slots.
    churn: Mutex<churn::Churn>,
}

impl Shared {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn churn(&self) -> std::sync::MutexGuard<'_, churn::Churn> {
        self.churn.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn unlist(&self, id: u64) {
        self.state().idle.retain(|idle| idle.id != id);
        self.room.notify_waiters();
    }

    /// A slot's start ended: with `member` when it succeeded. The member goes to the first
    /// take still waiting, if any (then `None`); takes that now wait for more starts than
    /// are under way stop waiting (their own starts serve them).
    fn start_ended(&self, member: Option<Member>) -> Option<Member> {
        let mut state = self.state();
        state.in_progress = state.in_progress.saturating_sub(1);
        let member = member.and_then(|m| hand_to_waiter(&mut state, m));
        while state.waiters.len() > state.in_progress {
            state.waiters.pop_back();
        }
        member
    }
}

/// Give `member` to the first take still waiting; `Some` when none took it. A waiter that
/// is gone (its run was cancelled, or its own start won) hands the member back.
fn hand_to_waiter(state: &mut State, member: Member) -> Option<Member> {
    let mut member = member;
    while let Some(waiter) = state.waiters.pop_front() {
        member = waiter.send(member).err()?;
    }
    Some(member)
}

/// Sandboxes started ahead for runs of one bridge on one backend. Size 0 is no pool: every
/// run starts cold. Dropping the pool ends its slots, which kill their sandboxes; call
/// [`Pool::close`] to wait until they are gone.
pub struct Pool {
    bridge: Arc<Bridge>,
    backend: Arc<dyn Backend>,
    shared: Arc<Shared>,
    closed: watch::Sender<bool>,
    slots: Mutex<JoinSet<()>>,
    /// Sandboxes of finished or stopped runs being ended in the background (their exit,
    /// cgroup removal or `docker rm`), so a result never waits for them.
    endings: TaskTracker,
}

impl Pool {
    /// A pool of `size` sandboxes for runs of `bridge` on `backend`; the slots start filling
    /// at once. Needs a tokio runtime when `size` is above 0.
    pub fn new(bridge: Arc<Bridge>, backend: Arc<dyn Backend>, size: usize) -> Self {
        let shared = Arc::new(Shared {
            size,
            state: Mutex::new(State::default()),
            starting: tokio::sync::Semaphore::new(1),
            room: tokio::sync::Notify::new(),
            ids: AtomicU64::new(0),
            counters: Counters::default(),
            churn: Mutex::default(),
        });
        let closed = watch::Sender::new(false);
        let mut slots = JoinSet::new();
        for _ in 0..size {
            slots.spawn(slot(
                bridge.clone(),
                backend.clone(),
                shared.clone(),
                closed.subscribe(),
            ));
        }
        Self {
            bridge,
            backend,
            shared,
            closed,
            slots: Mutex::new(slots),
            endings: TaskTracker::new(),
        }
    }

    /// What the pool did so far.
    pub fn stats(&self) -> PoolStats {
        let c = &self.shared.counters;
        PoolStats {
            idle: self.shared.state().idle.len(),
            ready: c.ready.load(Ordering::SeqCst),
            taken: c.taken.load(Ordering::SeqCst),
            cold: c.cold.load(Ordering::SeqCst),
            adopted: c.adopted.load(Ordering::SeqCst),
            dead: c.dead.load(Ordering::SeqCst),
            stale: c.stale.load(Ordering::SeqCst),
            suspect: c.suspect.load(Ordering::SeqCst),
            failed: c.failed.load(Ordering::SeqCst),
        }
    }

    /// A sandbox for one run, its `start` sent: an idle pooled one when there is one that is
    /// alive and current; else, when the pool is starting one, whichever is ready first of
    /// that one and a start of the take's own (the other joins the pool); else a fresh one
    /// from the backend. The second value says whether it came from the pool. A pooled
    /// sandbox must acknowledge its cell within [`ACK_LIMIT`].
    ///
    /// # Errors
    /// [`SandboxError`] when the pool had none and the backend cannot start one.
    pub async fn take(&self) -> Result<(HeldSandbox, bool), SandboxError> {
        enum Source {
            Idle(Idle),
            Race(oneshot::Receiver<Member>),
            Cold,
        }
        loop {
            let source = {
                let mut state = self.shared.state();
                if let Some(idle) = state.idle.pop_front() {
                    self.shared.room.notify_waiters();
                    Source::Idle(idle)
                } else if state.in_progress > state.waiters.len() {
                    let (tx, rx) = oneshot::channel();
                    state.waiters.push_back(tx);
                    Source::Race(rx)
                } else {
                    Source::Cold
                }
            };
            let member = match source {
                Source::Cold => break,
                Source::Idle(idle) => {
                    let (reply, member) = oneshot::channel();
                    if idle.give.send(Ask::Take(reply)).is_err() {
                        continue;
                    }
                    let Ok(member) = member.await else {
                        continue;
                    };
                    member
                }
                Source::Race(refill) => match self.race(refill).await {
                    Raced::Pool(member) => member,
                    Raced::Own(member) => match self.usable(member) {
                        Some(held) => {
                            self.shared.counters.cold.fetch_add(1, Ordering::SeqCst);
                            return Ok((held, false));
                        }
                        None => continue,
                    },
                    Raced::Neither => break,
                },
            };
            if let Some(mut held) = self.usable(member) {
                // A pooled sandbox waits at background priority; the run gets it at normal
                // priority, or not at all.
                if !held.set_priority(CpuPriority::Normal).await {
                    tracing::warn!(
                        "pooled sandbox thrown away at its take: its CPU priority could not be raised to normal"
                    );
                    self.endings.spawn(held.close());
                    continue;
                }
                self.shared.counters.taken.fetch_add(1, Ordering::SeqCst);
                held.pooled = true;
                held.ack_limit = Some(ACK_LIMIT);
                return Ok((held, true));
            }
        }
        self.shared.counters.cold.fetch_add(1, Ordering::SeqCst);
        let held = HeldSandbox::start(self.bridge.clone(), self.backend.as_ref()).await?;
        Ok((held, false))
    }

    /// A sandbox of the take's own, never a pooled one (counted as cold): for a run whose
    /// pooled sandbox did not acknowledge its cell, which is not made to wait for another
    /// acknowledgement ([`super::run_in`]).
    ///
    /// # Errors
    /// [`SandboxError`] when the backend cannot start one.
    pub(super) async fn start_cold(&self) -> Result<HeldSandbox, SandboxError> {
        self.shared.counters.cold.fetch_add(1, Ordering::SeqCst);
        HeldSandbox::start(self.bridge.clone(), self.backend.as_ref()).await
    }

    /// A taken sandbox did not acknowledge the cell sent to it at `sent`: end every sandbox
    /// listed idle before then, at once (killed, without the runner's exit grace; their
    /// slots start new ones). They waited beside the silent one, and whatever silenced it
    /// (the host stopping or freezing the pool's processes, pausing its containers, a machine
    /// too loaded to wake them) may hold them too: kept, each could cost a later run
    /// [`ACK_LIMIT`] again. Replacing them costs background starts, one at a time. Those
    /// listed since `sent` said `ready` while it was already silent, and are kept.
    pub(super) fn suspect_idle(&self, sent: Instant) {
        let suspects: VecDeque<Idle> = {
            let mut state = self.shared.state();
            let (suspects, kept) = std::mem::take(&mut state.idle)
                .into_iter()
                .partition(|idle| idle.listed < sent);
            state.idle = kept;
            suspects
        };
        if suspects.is_empty() {
            return;
        }
        self.shared.room.notify_waiters();
        tracing::info!(
            count = suspects.len(),
            "idle pooled sandboxes thrown away: one taken beside them did not acknowledge its cell"
        );
        for idle in suspects {
            if idle.give.send(Ask::Suspect).is_ok() {
                self.shared.counters.suspect.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    /// The sandbox of `member` when it is current and alive; else it is thrown away.
    fn usable(&self, mut member: Member) -> Option<HeldSandbox> {
        let counters = &self.shared.counters;
        let why = if member.version != self.bridge.catalog_version() {
            counters.stale.fetch_add(1, Ordering::SeqCst);
            "the catalog changed"
        } else if !member.held.still_waiting() {
            counters.dead.fetch_add(1, Ordering::SeqCst);
            "it died while idle"
        } else {
            return Some(member.held);
        };
        tracing::info!("pooled sandbox thrown away at its take: {why}");
        self.endings.spawn(member.held.close());
        None
    }

    /// Race the pool's start that `refill` waits for against a start of the take's own: the
    /// first to be ready; the other, once ready, joins the pool ([`Self::adopt`]). When the
    /// take's own start fails, the take starts cold (the pool's start may be what stalls).
    async fn race(&self, mut refill: oneshot::Receiver<Member>) -> Raced {
        let mut own = Box::pin(start_ready(
            self.bridge.clone(),
            self.backend.clone(),
            self.shared.clone(),
            self.closed.subscribe(),
        ));
        let mut waiting = true;
        loop {
            tokio::select! {
                got = &mut refill, if waiting => match got {
                    Ok(member) => {
                        tracing::info!("a run took the sandbox the pool was starting; its own start joins the pool");
                        self.adopt(own);
                        return Raced::Pool(member);
                    }
                    // The pool's start failed, or it served another take.
                    Err(_) => waiting = false,
                },
                started = &mut own => {
                    // The pool's start, if it is ready by now, joins the pool.
                    refill.close();
                    if let Ok(member) = refill.try_recv() {
                        self.adopt(Box::pin(std::future::ready(Ok(member))));
                    }
                    return match started {
                        Ok(member) => Raced::Own(member),
                        Err(why) => {
                            tracing::warn!("a run's own start, raced against the pool's, failed: {why}");
                            Raced::Neither
                        }
                    };
                }
            }
        }
    }

    /// Let the sandbox `member` will give (a start that lost a take's race) serve the pool:
    /// handed to a take that waits, else listed idle while fewer than the pool's size are
    /// idle, else ended. A slot starts its next sandbox only while the idle ones and the
    /// starts under way are fewer than the size, and a ready sandbox (this one, or a slot's
    /// start that ends after this one joined) is listed only while fewer than the size are
    /// idle, so the pool never holds more than its size idle. Its task is one of the pool's
    /// slots, so [`Self::close`] ends it.
    fn adopt(&self, member: BoxFuture<'static, Result<Member, String>>) {
        let task = adopted(
            self.bridge.clone(),
            self.shared.clone(),
            self.closed.subscribe(),
            member,
        );
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .spawn(task);
    }

    /// The bridge whose catalog the pool's sandboxes carry.
    pub fn bridge(&self) -> &Arc<Bridge> {
        &self.bridge
    }

    /// Run `code` in a sandbox of this pool ([`Self::take`]); its deadline and call budget
    /// start at the take. The sandbox ends with the run. Each run starts untainted, as with
    /// [`crate::run::run_code`] (whose doc says when runs must share a taint instead: then
    /// use [`Self::run_steered`]).
    ///
    /// # Errors
    /// [`SandboxError`] when the sandbox could not be started at all.
    pub async fn run(&self, code: &str, options: &RunOptions) -> Result<RunReport, SandboxError> {
        self.run_steered(code, options, &Steering::default()).await
    }

    /// [`Self::run`], steered as [`crate::run::run_steered`] is: a run cancelled at its take
    /// or later kills its sandbox.
    ///
    /// # Errors
    /// [`SandboxError`] when the sandbox could not be started at all.
    pub async fn run_steered(
        &self,
        code: &str,
        options: &RunOptions,
        steering: &Steering,
    ) -> Result<RunReport, SandboxError> {
        let take = async { self.take().await.map(|(held, _)| held) };
        let side = PoolSide {
            pool: self,
            endings: &self.endings,
        };
        run_in(&self.bridge, take, code, options, steering, Some(side)).await
    }

    /// Stop refilling and end every pooled sandbox at once (killed without the runner's exit
    /// grace, its cgroup or container removed), waiting until they are gone: a backend's
    /// start under way is let finish first (at most [`FINISH_LIMIT`]), a runner booting
    /// after it is not waited for. Then wait until the sandboxes of finished runs, ended in
    /// the background, are gone too, and those the backend removes in the background
    /// ([`Backend::settle`]) (at most [`ENDING_LIMIT`] for both; what is left then is killed
    /// and removed when its task is dropped with the runtime).
    pub async fn close(&self) {
        self.closed.send_replace(true);
        {
            let mut state = self.shared.state();
            state.idle.clear();
            state.waiters.clear();
        }
        let mut slots = std::mem::take(&mut *self.slots.lock().unwrap_or_else(|p| p.into_inner()));
        while slots.join_next().await.is_some() {}
        self.endings.close();
        // Then the backend's own removals: sandboxes dropped midway (a start cut short, a
        // race's loser), and those the endings above dropped.
        let ended = async {
            self.endings.wait().await;
            self.backend.settle().await;
        };
        if tokio::time::timeout(ENDING_LIMIT, ended).await.is_err() {
            tracing::warn!(
                "{} sandboxes of finished runs were still ending after {} s",
                self.endings.len(),
                ENDING_LIMIT.as_secs()
            );
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // The slots see the pool closed and end their sandboxes on their own.
        self.closed.send_replace(true);
    }
}

/// How a take's race ended.
enum Raced {
    /// The pool's start was ready first.
    Pool(Member),
    /// The take's own start was ready first.
    Own(Member),
    /// The take's own start failed.
    Neither,
}
