//! The warm pool's rules about members that stall or stay silent, through the library API
//! ([`Pool`]) with a backend that holds chosen sandboxes back: the native backend, wrapped so
//! that its Nth start waits, or the runner's output after `ready` is withheld. What the pool
//! does then is host logic, the same on both backends (the serve tests in pool.rs silence
//! real sandboxes on each backend).
//!
//! Index: a take does not wait for a stalled refill; the start that loses a take's race joins
//! the pool, which still holds no more than its size idle; a pooled sandbox silent past the
//! acknowledgement bound is replaced, and none of what it sends later (its `began`, its
//! calls) reaches the bridge; a run waits for one acknowledgement however many members are
//! silent.
//!
//! Each test was checked to fail with its rule taken out: a take that waits for the refill
//! (as before the race) takes 10 s; a race whose losing start is dropped leaves the next
//! run cold; a pool that lists every ready sandbox holds two idle after a race; a pooled
//! sandbox held to no acknowledgement bound makes its run wait until its output is let
//! through, and a bound that left the silent sandbox's output read lets its call reach the
//! server; a run that takes the pool's next sandbox after a silent one (instead of starting
//! its own) waits for every silent member in turn (8.0 s with four, against 2.3 s).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_code_mode::bridge::{Bridge, ServerEntry};
use mcp_code_mode::rootfs;
use mcp_code_mode::run::pool::{ACK_LIMIT, Pool};
use mcp_code_mode::run::{RunOptions, RunReport};
use mcp_code_mode::sandbox::native::NativeBackend;
use mcp_code_mode::sandbox::{Backend, BoxFuture, Sandbox, SandboxError};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::watch;

use super::common::{bin, native_available, require, toy};

/// Longest wait for the pool to reach a state (a start under load).
const PATIENCE: Duration = Duration::from_secs(60);
/// How long a held-back start or output waits when the test never lets it go.
const STALL: Duration = Duration::from_secs(30);

/// A gate the test opens; what waits on it goes on then, or after [`STALL`].
#[derive(Clone)]
struct Gate {
    open: watch::Sender<bool>,
    /// Something that waited on the gate went on.
    passed: Arc<AtomicBool>,
}

impl Gate {
    fn new() -> Self {
        Self {
            open: watch::Sender::new(false),
            passed: Arc::new(AtomicBool::new(false)),
        }
    }

    fn open(&self) {
        self.open.send_replace(true);
    }

    /// Whether anything went past the gate (it was opened, or the stall ran out).
    fn passed(&self) -> bool {
        self.passed.load(Ordering::SeqCst)
    }

    async fn pass(&self) {
        let mut open = self.open.subscribe();
        let _ = tokio::time::timeout(STALL, open.wait_for(|o| *o)).await;
        self.passed.store(true, Ordering::SeqCst);
    }
}

/// What the wrapped backend does to one start.
#[derive(Clone)]
enum Hold {
    /// Nothing: an ordinary start.
    None,
    /// The start begins only after this long.
    Delay(Duration),
    /// The start begins only once the gate is open (a stalled start).
    Start(Gate),
    /// The runner's output after its first line (`ready`) is withheld until the gate opens:
    /// a sandbox that looks idle and then stays silent.
    Output(Gate),
}

/// The native backend, its starts held back as `plan` says for the start's number (from 0).
struct HeldBack {
    inner: NativeBackend,
    spawns: AtomicUsize,
    plan: Box<dyn Fn(usize) -> Hold + Send + Sync>,
}

impl HeldBack {
    fn spawns(&self) -> usize {
        self.spawns.load(Ordering::SeqCst)
    }
}

impl Backend for HeldBack {
    fn spawn(&self) -> BoxFuture<'_, Result<Sandbox, SandboxError>> {
        let hold = (self.plan)(self.spawns.fetch_add(1, Ordering::SeqCst));
        Box::pin(async move {
            match &hold {
                Hold::Delay(length) => tokio::time::sleep(*length).await,
                Hold::Start(gate) => gate.pass().await,
                Hold::None | Hold::Output(_) => {}
            }
            let mut sandbox = self.inner.spawn().await?;
            if let Hold::Output(gate) = hold {
                sandbox.stdout = withheld(sandbox.stdout, gate);
            }
            Ok(sandbox)
        })
    }
}

/// `stdout` with everything after its first line held back until `gate` opens.
fn withheld(
    stdout: Box<dyn tokio::io::AsyncRead + Send + Unpin>,
    gate: Gate,
) -> Box<dyn tokio::io::AsyncRead + Send + Unpin> {
    let (mut to_host, host_end) = tokio::io::duplex(64 * 1024);
    tokio::spawn(async move {
        let mut from_runner = BufReader::new(stdout);
        let mut first = Vec::new();
        if from_runner.read_until(b'\n', &mut first).await.is_err()
            || to_host.write_all(&first).await.is_err()
        {
            return;
        }
        gate.pass().await;
        let _ = tokio::io::copy(&mut from_runner, &mut to_host).await;
    });
    Box::new(host_end)
}

/// A filled pool of one on the held-back native backend, wrapping the toy server, with what
/// a test looks at and closes.
struct Held {
    pool: Pool,
    backend: Arc<HeldBack>,
    bridge: Arc<Bridge>,
    /// The toy server's journal, one line per event.
    journal: PathBuf,
}

/// A pool of `size` whose start number `n` (from 0) is held back as `holds[n]`, and every
/// later start as `rest`, wrapping the toy server (its journal named after `name`); returned
/// once it is full. `None` when the native sandbox cannot run here.
async fn pool_holding(name: &str, size: usize, holds: Vec<Hold>, rest: Hold) -> Option<Held> {
    if !require(native_available(), "user namespaces are not available here") {
        return None;
    }
    let journal = std::env::temp_dir().join(format!(
        "mcp-code-mode-pool-members-{name}-{}.journal",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&journal);
    let rootfs = rootfs::ensure(&rootfs::Options::default()).expect("the rootfs");
    let backend = Arc::new(HeldBack {
        inner: NativeBackend::new(bin(), rootfs.dir.clone(), rootfs.argv(), 60),
        spawns: AtomicUsize::new(0),
        plan: Box::new(move |n| holds.get(n).unwrap_or(&rest).clone()),
    });
    let entry = ServerEntry::stdio(
        "toy",
        toy()[0].clone(),
        ["--journal".to_owned(), journal.display().to_string()],
    );
    let bridge = Arc::new(
        Bridge::open(vec![entry], false)
            .await
            .expect("open the toy"),
    );
    let pool = Pool::new(bridge.clone(), backend.clone(), size);
    until("the pool to fill", || pool.stats().idle == size).await;
    Some(Held {
        pool,
        backend,
        bridge,
        journal,
    })
}

impl Held {
    /// The first run, served by the pooled member; returns once the refill has begun.
    async fn first_run_and_refill(&self) {
        let first = self
            .pool
            .run("print(1)", &RunOptions::default())
            .await
            .expect("a run");
        assert!(first.pooled && first.result.succeeded(), "{first:?}");
        until("the refill to begin", || self.backend.spawns() >= 2).await;
    }

    /// The second run, whose take races the pool's start (slow) against its own (held back by
    /// `own`): the pool's wins and serves it. Then `own` is let go; returns the run once the
    /// take's own start has joined the pool as its one idle sandbox.
    async fn second_run_won_by_the_pool(&self, own: &Gate) -> RunReport {
        let second = self
            .pool
            .run("print(2)", &RunOptions::default())
            .await
            .expect("a run");
        assert!(second.pooled, "the pool's start won: {second:?}");
        until("the take's own start and the next refill to begin", || {
            self.backend.spawns() >= 4
        })
        .await;
        own.open();
        until("the take's own start to join the pool", || {
            self.pool.stats().adopted == 1 && self.pool.stats().idle == 1
        })
        .await;
        second
    }

    /// Close the pool and the bridge, and remove the journal.
    async fn close(self) {
        self.pool.close().await;
        self.bridge.close().await;
        let _ = std::fs::remove_file(&self.journal);
    }
}

async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < PATIENCE, "waited in vain for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The pool's first refill stalls (30 s); the run that finds the pool empty while it stalls
/// starts a sandbox of its own and is served by it, in about a cold start, well under the
/// 10 s a take used to wait for the refill. The refill, once let go, joins the pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_take_does_not_wait_for_a_stalled_refill() {
    let stalled = Gate::new();
    let holds = vec![Hold::None, Hold::Start(stalled.clone())];
    let Some(held) = pool_holding("stalled", 1, holds, Hold::None).await else {
        return;
    };
    let (pool, options) = (&held.pool, RunOptions::default());
    held.first_run_and_refill().await;

    let start = Instant::now();
    let second = pool.run("print(2)", &options).await.expect("a run");
    let took = start.elapsed();
    assert!(second.result.succeeded(), "{second:?}");
    assert_eq!(second.result.stdout, "2\n");
    assert!(!second.pooled, "served by its own start: {second:?}");
    assert!(
        took < Duration::from_secs(5),
        "the run took {took:?} while the refill stalled"
    );
    assert!(!stalled.passed());
    assert_eq!(pool.stats().cold, 1, "{:?}", pool.stats());

    stalled.open();
    until("the stalled refill to join the pool", || {
        pool.stats().idle == 1
    })
    .await;
    let third = pool.run("print(3)", &options).await.expect("a run");
    assert!(third.pooled && third.result.succeeded(), "{third:?}");
    held.close().await;
}

/// A take races the pool's start (slow: 2 s) against its own (held back until the test lets
/// it go); the pool's wins and serves the run. The take's own start, once ready, is not
/// thrown away: it joins the pool, and the next run takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_that_loses_a_takes_race_joins_the_pool() {
    let own = Gate::new();
    let later = Gate::new();
    let holds = vec![
        Hold::None,
        Hold::Delay(Duration::from_secs(2)),
        Hold::Start(own.clone()),
    ];
    let Some(held) = pool_holding("race", 1, holds, Hold::Start(later.clone())).await else {
        return;
    };
    let (pool, options) = (&held.pool, RunOptions::default());
    held.first_run_and_refill().await;

    let second = held.second_run_won_by_the_pool(&own).await;
    assert!(second.result.succeeded(), "{second:?}");
    let third = pool.run("print(3)", &options).await.expect("a run");
    assert!(third.pooled && third.result.succeeded(), "{third:?}");
    let stats = pool.stats();
    assert_eq!((stats.taken, stats.cold), (3, 0), "{stats:?}");
    later.open();
    held.close().await;
}

/// A take's own start loses its race and joins the pool; the slot's next start, under way
/// meanwhile (held back), becomes ready after it. A pool of one then holds one idle sandbox,
/// not two: the later one is ended unlisted, and the slot starts again only once a run has
/// taken the idle one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_of_one_never_holds_two_idle_sandboxes_after_a_race() {
    let own = Gate::new();
    let refill = Gate::new();
    let holds = vec![
        Hold::None,
        Hold::Delay(Duration::from_secs(2)),
        Hold::Start(own.clone()),
        Hold::Start(refill.clone()),
    ];
    let Some(held) = pool_holding("two-idle", 1, holds, Hold::None).await else {
        return;
    };
    let (pool, options) = (&held.pool, RunOptions::default());
    held.first_run_and_refill().await;
    held.second_run_won_by_the_pool(&own).await;

    // Ready: the first fill, the first refill, the take's own start, and now this refill.
    refill.open();
    until("the held-back refill to be ready", || {
        pool.stats().ready == 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stats = pool.stats();
    assert_eq!(stats.idle, 1, "{stats:?}");
    assert_eq!(held.backend.spawns(), 4, "no start while the pool is full");

    // A run takes the idle one; the slot refills to one again.
    let third = pool.run("print(3)", &options).await.expect("a run");
    assert!(third.pooled && third.result.succeeded(), "{third:?}");
    until("the pool to refill", || pool.stats().idle == 1).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pool.stats().idle, 1, "{:?}", pool.stats());
    held.close().await;
}

/// A pooled sandbox says `ready` and then nothing (its output withheld, as a stopped or
/// frozen runner sends nothing): the run that takes it gets no `began` within
/// [`ACK_LIMIT`], kills it and runs in another sandbox, long before the silent one's output
/// is let through. What the silent sandbox wrote (its `began` and its call) is never read:
/// the server sees the one call of the sandbox that served the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_pool_member_never_gets_a_tool_call_through_the_bridge() {
    let silent = Gate::new();
    let holds = vec![Hold::Output(silent.clone())];
    let Some(held) = pool_holding("silent", 1, holds, Hold::None).await else {
        return;
    };
    let code = "print(await echo({'text': 'once'}))";
    let report = held
        .pool
        .run(code, &RunOptions::default())
        .await
        .expect("a run");
    assert!(
        !silent.passed(),
        "the run waited for the silent sandbox's output"
    );
    assert!(report.result.succeeded(), "{report:?}");
    assert_eq!(report.result.stdout, "once\n");
    assert_eq!(report.calls, 1, "{report:?}");

    // The silent sandbox's output goes on now; nothing of it may reach the bridge.
    silent.open();
    tokio::time::sleep(ACK_LIMIT * 2).await;
    let calls = std::fs::read_to_string(&held.journal).unwrap_or_default();
    assert_eq!(
        calls.lines().filter(|l| l.starts_with("call ")).count(),
        1,
        "calls that reached the server:\n{calls}"
    );
    held.close().await;
}

/// Every sandbox of a pool of four says `ready` and then nothing (as when the host stops,
/// freezes or pauses them all): the run that takes one waits [`ACK_LIMIT`] for its
/// acknowledgement once, then starts a sandbox of its own, rather than giving each silent
/// member the same wait in turn (4 × 2 s before the fix); the three idle beside it are thrown
/// away as suspect, nothing of theirs is read, and the pool refills with sandboxes that serve
/// runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waits_for_one_acknowledgement_however_many_pool_members_are_silent() {
    const SIZE: usize = 4;
    let silent = Gate::new();
    let holds = vec![Hold::Output(silent.clone()); SIZE];
    let Some(held) = pool_holding("all-silent", SIZE, holds, Hold::None).await else {
        return;
    };
    let pool = &held.pool;
    let start = Instant::now();
    let report = pool
        .run("print('answered')", &RunOptions::default())
        .await
        .expect("a run");
    let took = start.elapsed();
    assert!(report.result.succeeded(), "{report:?}");
    assert_eq!(report.result.stdout, "answered\n");
    assert!(!report.pooled, "served by its own start: {report:?}");
    // One wait and a cold start; trying every silent member takes at least 8 s.
    assert!(
        took < ACK_LIMIT + Duration::from_secs(4),
        "the run took {took:?} with {SIZE} silent members"
    );
    assert!(!silent.passed(), "a silent member's output was read");
    let stats = pool.stats();
    assert_eq!(
        (stats.taken, stats.cold, stats.suspect),
        (1, 1, SIZE as u64 - 1),
        "{stats:?}"
    );

    // The slots start fresh sandboxes, and the next run takes one.
    until("the pool to refill", || pool.stats().idle == SIZE).await;
    let next = pool
        .run("print('pooled')", &RunOptions::default())
        .await
        .expect("a run");
    assert!(next.pooled && next.result.succeeded(), "{next:?}");
    assert_eq!(pool.stats().suspect, SIZE as u64 - 1);
    held.close().await;
}
