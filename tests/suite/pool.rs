//! The warm pool (`serve --pool N`): every pooled sandbox serves one run and is as fresh as a
//! cold one; dead and stale members are thrown away; a run's deadline starts at its take.
//!
//! Each test drives `serve` with the Python SDK client one call at a time
//! (tests/clients/pool_driver.py) and watches the pool from the host: serve's log says when
//! a pooled sandbox is ready, and the sandboxes themselves are serve's launcher children
//! (native) or its containers (docker).
//!
//! Each test was checked to fail, on both backends, with its rule taken out of the code
//! (the mutations are described in the commit that added this paragraph):
//! - a finished pooled run's sandbox kept for the next run: the /tmp, globals and
//!   namespace tests fail;
//! - the idle watch and the take's liveness check removed: the killed-member test fails
//!   (the death is never seen while idle); with the cold retry of a pooled sandbox that died
//!   unheard removed too, its run fails;
//! - the runner's `began` (its acknowledgement of a cell) left out: the crash-before-any-line
//!   test fails (the crashed run is thrown away and run again cold, `pooled: false`);
//! - the idle watch, the check at `ready` and the take's catalog-version check removed: both
//!   catalog tests fail (a stale sandbox serves a run without `new_tool`);
//! - the deadline counted from the sandbox's start instead of its take: the deadline test
//!   fails;
//! - a taken pooled sandbox held to no acknowledgement bound (`ACK_LIMIT`): the stopped-member
//!   test fails on both backends (its run waits for its deadline);
//! - a run whose pooled sandbox did not acknowledge its cell taking the pool's next one (as
//!   before session 16's fix) instead of starting its own: the test with five silenced
//!   members fails on both backends (10.2 s native, 10.3 s Docker, against 2.5 s and 3.3 s);
//! - idle pooled sandboxes left alone when the pool closes: the test of every way serve ends
//!   and the pooled 100-run tests in cleanup.rs fail (cgroups, containers left).

mod served;

use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{require, send_signal, unprivileged, venv_python};
use super::misbehaving_servers::Scenario;
use served::{FREEZER, PATIENCE};
pub(super) use served::{Served, children};

pub(super) fn ready(backend: &str) -> bool {
    require(
        venv_python().is_some(),
        "could not install the Python MCP SDK from PyPI",
    ) && super::common::backend_ready(backend)
}

pub(super) fn stdout(reply: &Value) -> &str {
    reply["structured"]["stdout"].as_str().unwrap_or_else(|| {
        panic!("no stdout in {reply}");
    })
}

pub(super) fn pooled(reply: &Value) -> bool {
    reply["meta"]["mcp-code-mode/pooled"] == true
}

/// A pooled sandbox waits long between its pid 1's start and its run (and its start at a
/// low CPU weight can take seconds), yet pid 1's start reads within its clocks' first
/// second (host_clocks.rs says why). Native only: Docker gives no time namespace.
#[test]
fn a_pooled_native_sandboxs_pid_1_started_within_its_clocks_first_second() {
    if !ready("native") {
        return;
    }
    let mut served = Served::start("native", &["--pool", "1"]);
    served.wait_ready(1);
    let reply = served.run(super::host_clocks::PID_1_START);
    assert!(pooled(&reply), "{reply}");
    assert!(
        super::host_clocks::started_in_the_first_second(stdout(&reply)),
        "{reply}"
    );
}

/// Two runs of `first` then `second`, each in a pooled sandbox of a pool of one.
fn two_pooled_runs(backend: &str, first: &str, second: &str) -> (Value, Value) {
    let mut served = Served::start(backend, &["--pool", "1"]);
    served.wait_ready(1);
    let one = served.run(first);
    assert!(pooled(&one) && one["is_error"] == false, "{one}");
    served.wait_ready(2);
    let two = served.run(second);
    assert!(pooled(&two), "the second run was pooled: {two}");
    (one, two)
}

fn a_file_written_to_tmp_is_absent_in_the_next_pooled_run(backend: &str) {
    let (_, second) = two_pooled_runs(
        backend,
        "open('/tmp/left-behind', 'w').write('x')\nprint('written')",
        "import os\nprint(os.path.exists('/tmp/left-behind'), os.listdir('/tmp'))",
    );
    assert_eq!(stdout(&second), "False []\n", "{second}");
}

fn a_global_defined_in_one_pooled_run_is_absent_in_the_next(backend: &str) {
    let (_, second) = two_pooled_runs(
        backend,
        "left_behind = 42\nimport json\nprint('defined')",
        "print('left_behind' in globals(), 'json' in globals())",
    );
    assert_eq!(stdout(&second), "False False\n", "{second}");
}

/// Code that prints the run's namespace numbers (pid, cgroup, mnt, net, ipc, uts, user), the
/// source of its /etc/hostname mount (Docker: names the container) or `-`, and the pid of
/// the last of `forks` children it forks (each exits at once and is reaped): a pid-counter
/// marker of the run's pid namespace.
fn namespaces(forks: usize) -> String {
    format!(
        "import os\ndef child():\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    return pid\nlast = [child() for _ in range({forks})][-1]\nprint(' '.join(os.readlink('/proc/self/ns/' + n) for n in ('pid', 'cgroup', 'mnt', 'net', 'ipc', 'uts', 'user')), ''.join(l.split()[3] for l in open('/proc/self/mountinfo') if ' /etc/hostname ' in l) or '-', last)"
    )
}

/// How many children the first run forks: the margin by which a fresh sandbox's first
/// child pid stays below the first run's last, however its start-up differs.
const FIRST_FORKS: usize = 16;

fn the_next_pooled_run_has_its_own_pid_namespace_and_cgroup(backend: &str) {
    let (first, second) = two_pooled_runs(backend, &namespaces(FIRST_FORKS), &namespaces(1));
    let first: Vec<&str> = stdout(&first).split_whitespace().collect();
    let second: Vec<&str> = stdout(&second).split_whitespace().collect();
    assert_eq!(first.len(), 9, "{first:?}");
    assert_eq!(second.len(), 9, "{second:?}");
    if backend == "docker" {
        // A container's namespace numbers are freed with it and the kernel hands them out
        // again, so two containers one after another can show the same ones; the source of
        // each container's /etc/hostname mount names the container's id, never reused.
        assert_ne!(
            first[7], second[7],
            "one container for two runs: {first:?} {second:?}"
        );
        return;
    }
    // A namespace number names a namespace only while it lives: once the first sandbox is
    // gone the kernel may give the same numbers to the next one, so they cannot tell two
    // sandboxes apart (nor can pid 1's start time: the sandbox's time namespace makes it
    // the same in every sandbox). Pids can: within one pid namespace they only grow (until
    // pid_max wraps, far beyond these few forks), so in a sandbox used twice the second
    // run's child has a pid above the first run's last child; a fresh sandbox, whose pid
    // namespace and cgroup the launcher creates together with all its others, starts
    // counting again and gives its first child a pid below the first run's last of
    // FIRST_FORKS. The numbers are printed as a hint.
    let pid = |run: &[&str]| -> u32 {
        run[8]
            .parse()
            .unwrap_or_else(|_| panic!("no child pid in {run:?}"))
    };
    assert!(
        pid(&second) < pid(&first),
        "one pid namespace for two runs: the second run's child has pid {}, above the \
         first run's last child {}: {first:?} {second:?}",
        pid(&second),
        pid(&first)
    );
}

fn a_pool_member_killed_while_idle_is_replaced_and_the_run_succeeds(backend: &str) {
    // serve logs this when a sandbox goes idle in the pool (not when it is handed straight
    // to a run that waits for it).
    const LISTED: &str = "pooled sandbox ready idle=";
    const SEEN_IDLE: &str = "pooled sandbox thrown away: it died while idle";
    let mut served = Served::start(backend, &["--pool", "1"]);
    // Killed and left alone: the pool sees the death while the sandbox is idle, throws it
    // away and starts another before any run asks.
    served.wait_logged(LISTED, 1);
    let idle = served.wait_sandboxes(1);
    served.kill_idle(&idle[0]);
    served.wait_logged(SEEN_IDLE, 1);
    served.wait_logged(LISTED, 2);
    let replaced = served.run("print('replaced')");
    assert!(
        pooled(&replaced) && stdout(&replaced) == "replaced\n",
        "{replaced}"
    );
    // Killed just before a run asks for it: the run still succeeds (the death is seen at
    // the take, or when the sandbox ends without a word and the run starts cold).
    served.wait_logged(LISTED, 3);
    let idle = served.wait_sandboxes(1);
    served.kill_idle(&idle[0]);
    let run = served.run("print('still fine')");
    assert_eq!(stdout(&run), "still fine\n", "{run}");
    assert_eq!(run["is_error"], false, "{run}");
    // And the pool refills: the next run is pooled again.
    served.wait_logged(LISTED, 4);
    let later = served.run("print('pooled')");
    assert!(pooled(&later) && stdout(&later) == "pooled\n", "{later}");
}

/// An idle pooled sandbox that is alive but cannot answer (stopped by a signal, frozen in
/// a freezer cgroup, a paused container) looks idle to the pool; the run that takes it gets
/// no acknowledgement of its cell within the pool's bound, kills it, and runs in another
/// sandbox: it succeeds well within its deadline, and the silenced sandbox is gone.
fn a_stopped_idle_pool_member_is_replaced_and_the_run_succeeds(backend: &str) {
    const LISTED: &str = "pooled sandbox ready idle=";
    const GIVEN_UP: &str = "thrown away: it did not acknowledge the cell";
    let ways: &[&str] = if backend == "docker" {
        &["pause", "STOP"]
    } else if !unprivileged() && std::path::Path::new(FREEZER).join("tasks").exists() {
        &["STOP", "freeze"]
    } else {
        &["STOP"]
    };
    for how in ways {
        // A fresh pool of one: its only sandbox is the idle one the run takes.
        let mut served = Served::start(backend, &["--pool", "1", "--deadline", "30"]);
        served.wait_logged(LISTED, 1);
        let idle = served.wait_sandboxes(1);
        let (thaw, silenced) = served.silence_idle(&idle[0], how);
        let run = served.run("print('answered')");
        assert_eq!(stdout(&run), "answered\n", "{how}: {run}");
        assert_eq!(run["is_error"], false, "{how}: {run}");
        assert_eq!(served.logged(GIVEN_UP), 1, "{how}: {}", served.log_text());
        // Still silenced: ending it must not wait for a thaw that never comes.
        let start = Instant::now();
        while served.exists(&idle[0]) || silenced.is_some_and(alive) {
            assert!(
                start.elapsed() < PATIENCE,
                "{how}: the silenced sandbox {} is still there",
                idle[0]
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(thaw);
    }
}

/// Every idle pooled sandbox silenced at once (stopped by a signal; Docker: paused): the run
/// that takes one waits for its acknowledgement once (`ACK_LIMIT`, 2 s), then starts a
/// sandbox of its own instead of giving each silenced member the same wait in turn (five
/// members: 10 s before the fix). The silenced members idle beside it are thrown away with
/// it, none of them is left, and the pool refills with sandboxes that serve runs.
fn a_run_waits_for_one_silenced_pool_member_however_many_are_silenced(backend: &str) {
    const SIZE: usize = 5;
    const LISTED: &str = "pooled sandbox ready idle=";
    const GIVEN_UP: &str = "thrown away: it did not acknowledge the cell";
    let how = if backend == "docker" { "pause" } else { "STOP" };
    let mut served = Served::start(backend, &["--pool", &SIZE.to_string(), "--deadline", "60"]);
    served.wait_logged(LISTED, SIZE);
    let idle = served.wait_sandboxes(SIZE);
    let silenced: Vec<_> = idle.iter().map(|id| served.silence_idle(id, how)).collect();
    let start = Instant::now();
    let run = served.run("print('answered')");
    let took = start.elapsed();
    assert_eq!(stdout(&run), "answered\n", "{run}");
    assert_eq!(run["is_error"], false, "{run}");
    assert!(!pooled(&run), "served by a sandbox of its own: {run}");
    // One wait and a cold start, with room for a loaded machine; trying each silenced member
    // in turn takes at least 5 x 2 s.
    assert!(
        took < Duration::from_secs(8),
        "the run took {took:?} with {SIZE} silenced members; serve's log:\n{}",
        served.log_text()
    );
    assert_eq!(served.logged(GIVEN_UP), 1, "{}", served.log_text());
    let start = Instant::now();
    while idle.iter().any(|id| served.exists(id))
        || silenced.iter().any(|(_, pid)| pid.is_some_and(alive))
    {
        assert!(
            start.elapsed() < PATIENCE,
            "silenced sandboxes are still there: {idle:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The taken member's replacement and one for each thrown away.
    served.wait_logged(LISTED, 2 * SIZE);
    let later = served.run("print('pooled')");
    assert!(pooled(&later) && stdout(&later) == "pooled\n", "{later}");
}

/// serve ends while its idle pooled sandbox is frozen (native: in a cgroup v1 freezer group
/// of someone else's, where a SIGKILL waits for a thaw; where there is no freezer, stopped
/// by SIGSTOP) or paused (docker): serve still exits, and nothing of the sandbox is left,
/// though nobody thawed it.
fn a_frozen_idle_pool_member_is_ended_when_serve_exits(backend: &str) {
    let how = if backend == "docker" {
        "pause"
    } else if !unprivileged() && std::path::Path::new(FREEZER).join("tasks").exists() {
        "freeze"
    } else {
        "STOP"
    };
    let mut served = Served::start(backend, &["--pool", "1"]);
    served.wait_logged("pooled sandbox ready idle=", 1);
    let idle = served.wait_sandboxes(1);
    let (thaw, _) = served.silence_idle(&idle[0], how);
    end_and_check_nothing_is_left(&mut served, "disconnect");
    drop(thaw);
}

/// Code that kills its sandbox before it prints or calls anything (a crash, the memory
/// limit) ran in a pooled sandbox that had acknowledged the cell: the run reports that end,
/// stays pooled and is never run again cold.
fn code_that_crashes_before_its_first_line_runs_once_and_reports_its_crash(backend: &str) {
    const COLD: &str = "the run starts cold";
    // Under a memory cgroup 300 MiB is killed as out of memory; the rlimit fallback (an
    // unprivileged caller) refuses it instead (RLIMIT_DATA at the 256 MiB limit), and the
    // code sees a MemoryError.
    let memory = (
        "a = bytearray(300 * 1024 * 1024)",
        if unprivileged() {
            "MemoryError"
        } else {
            "out of memory"
        },
    );
    let mut served = Served::start(backend, &["--pool", "1"]);
    for (n, (code, reason)) in [("import os\nos.abort()", "signal"), memory]
        .into_iter()
        .enumerate()
    {
        served.wait_ready(n + 1);
        let run = served.run(code);
        let error = run["structured"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(reason), "{code}: {run}");
        assert_eq!(run["is_error"], true, "{run}");
        assert!(pooled(&run), "ran again cold: {run}");
        assert_eq!(served.logged(COLD), 0, "{}", served.log_text());
    }
}

fn a_catalog_change_replaces_the_pooled_sandboxes(backend: &str) {
    let mut served = Served::start(backend, &["--pool", "2"]);
    served.wait_ready(2);
    // The wrapped server exits; the next call restarts it, which may change its tools.
    let died = served.run("await exit_({})");
    assert_eq!(died["is_error"], true, "{died}");
    served.wait_ready(3);
    let before = served.sandboxes();
    assert_eq!(before.len(), 2, "two pooled sandboxes: {before:?}");
    // A restart waits 2 s after the server's last start.
    std::thread::sleep(Duration::from_secs(2));
    let restarted = served.run("print(await add({'a': 1, 'b': 2}))");
    assert_eq!(stdout(&restarted), "{\"sum\": 3}\n", "{restarted}");
    served.wait_logged("thrown away: the catalog changed", 1);
    let start = Instant::now();
    while before.iter().any(|id| served.exists(id)) {
        assert!(
            start.elapsed() < PATIENCE,
            "pooled sandboxes from before the change are still there: {before:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let ready = served.logged("pooled sandbox ready");
    served.wait_ready(ready.max(5));
    let after = served.run("print(await add({'a': 2, 'b': 2}))");
    assert!(pooled(&after), "{after}");
    assert_eq!(stdout(&after), "{\"sum\": 4}\n", "{after}");
}

/// A wrapped server's `notifications/tools/list_changed` (tests/scenarios/list_changed.json:
/// its `change` tool swaps `old_tool` for `new_tool` and says so) makes every pooled sandbox
/// holding the old catalog stale: none of them serves a run again, and the pool refills with
/// sandboxes that hold the new one.
fn a_list_changed_from_a_wrapped_server_replaces_the_pooled_sandboxes(backend: &str) {
    let scenario = Scenario::load("list_changed");
    let spec = scenario.spec();
    let server: Vec<String> = std::iter::once(spec.command).chain(spec.args).collect();
    let mut served = Served::wrapping(backend, &["--pool", "2"], &server);
    served.wait_ready(2);
    let changed = served.run("print(await change({}))");
    assert_eq!(stdout(&changed), "changed\n", "{changed}");
    // The other pooled sandbox was started with the old catalog; the very next run must not
    // get it, whether it is pooled or cold.
    const NEW_CATALOG: &str = "print(await new_tool({}), 'old_tool' in globals())";
    let next = served.run(NEW_CATALOG);
    assert_eq!(stdout(&next), "new False\n", "{next}");
    served.wait_logged("thrown away: the catalog changed", 1);
    // Sandboxes ready from now on hold the new catalog; a later run takes one (it may be
    // ready already: one a run started for itself and then did not need joins the pool).
    let start = Instant::now();
    loop {
        let later = served.run(NEW_CATALOG);
        assert_eq!(stdout(&later), "new False\n", "{later}");
        if pooled(&later) {
            break;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no later run was pooled; serve's log:\n{}",
            served.log_text()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn the_deadline_counts_from_the_take_not_from_the_pool_start(backend: &str) {
    let mut served = Served::start(backend, &["--pool", "1", "--deadline", "2"]);
    served.wait_ready(1);
    // The pooled sandbox waits longer than a whole deadline before its run.
    std::thread::sleep(Duration::from_secs(3));
    let run = served.run("import time\ntime.sleep(1)\nprint('in time')");
    assert!(pooled(&run), "{run}");
    assert_eq!(stdout(&run), "in time\n", "{run}");
    assert_eq!(run["structured"]["stopped"], false, "{run}");
}

fn twenty_runs_back_to_back_with_a_pool_of_two_all_succeed(backend: &str) {
    let mut served = Served::start(backend, &["--pool", "2"]);
    for i in 0..20 {
        let run = served.run(&format!("print({i})"));
        assert_eq!(stdout(&run), format!("{i}\n"), "run {i}: {run}");
    }
}

fn serve_ended_right_after_runs_leaves_no_sandbox_behind(backend: &str) {
    let mut served = Served::start(backend, &["--pool", "2"]);
    served.wait_ready(2);
    // Runs whose sandboxes take a while to end: a thread the runner waits for at its exit
    // keeps each one up until it is killed.
    let lingering = "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\nprint('done')";
    for _ in 0..3 {
        let run = served.run(lingering);
        assert_eq!(stdout(&run), "done\n", "{run}");
    }
    end_and_check_nothing_is_left(&mut served, "TERM");
}

/// Every way `serve` ends (its client disconnects; SIGTERM, SIGINT, SIGHUP) ends the
/// sandboxes idle in its pool: none of their processes, cgroups or containers is left.
fn every_way_serve_ends_kills_its_idle_pooled_sandboxes(backend: &str) {
    for how in ["disconnect", "TERM", "INT", "HUP"] {
        let mut served = Served::start(backend, &["--pool", "2"]);
        served.wait_ready(2);
        let run = served.run("print('one run')");
        assert_eq!(stdout(&run), "one run\n", "{run}");
        // The pool is full again and its sandboxes wait, idle, when serve ends.
        served.wait_ready(3);
        served.wait_sandboxes(2);
        end_and_check_nothing_is_left(&mut served, how);
    }
}

/// End serve `how` ("disconnect": its client closes the session; else the signal's name),
/// wait until it has exited, and check that nothing of the sandboxes it held is left: no
/// process (native), no run cgroup (native), no container (docker).
fn end_and_check_nothing_is_left(served: &mut Served, how: &str) {
    let pid = served.serve_pid();
    // What serve holds now: the pooled sandboxes and those of runs still ending.
    let held = served.sandboxes();
    let processes: Vec<u32> = if served.backend == "docker" {
        Vec::new()
    } else {
        held.iter()
            .filter_map(|id| id.parse().ok())
            .flat_map(|launcher| std::iter::once(launcher).chain(children(launcher)))
            .collect()
    };
    if how == "disconnect" {
        served.stdin = None;
    } else {
        send_signal(how, pid);
    }
    let start = Instant::now();
    while alive(pid) {
        assert!(
            start.elapsed() < PATIENCE,
            "serve {pid} did not exit ({how})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let left: Vec<String> = if served.backend == "docker" {
        served.sandboxes()
    } else {
        processes
            .iter()
            .filter(|p| alive(**p))
            .map(u32::to_string)
            .chain(
                super::cleanup::cgroups_of(pid)
                    .iter()
                    .map(|c| c.display().to_string()),
            )
            .collect()
    };
    assert_eq!(
        left,
        Vec::<String>::new(),
        "left behind when serve ended ({how}; it held {held:?}); serve's log:\n{}",
        served.log_text()
    );
}

/// Whether process `pid` exists and has not exited (a zombie has).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// The pool's tests, once for each backend: `native::NAME` and `docker::NAME` call `NAME`
/// with the backend's name when it can run here.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        on_both_backends!(@backend native, "native", $($name),*);
        on_both_backends!(@backend docker, "docker", $($name),*);
    };
    (@backend $module:ident, $backend:literal, $($name:ident),*) => {
        mod $module {
            $(
                #[test]
                fn $name() {
                    if super::ready($backend) {
                        super::$name($backend);
                    }
                }
            )*
        }
    };
}

on_both_backends!(
    a_file_written_to_tmp_is_absent_in_the_next_pooled_run,
    a_global_defined_in_one_pooled_run_is_absent_in_the_next,
    the_next_pooled_run_has_its_own_pid_namespace_and_cgroup,
    a_pool_member_killed_while_idle_is_replaced_and_the_run_succeeds,
    a_stopped_idle_pool_member_is_replaced_and_the_run_succeeds,
    a_run_waits_for_one_silenced_pool_member_however_many_are_silenced,
    a_frozen_idle_pool_member_is_ended_when_serve_exits,
    code_that_crashes_before_its_first_line_runs_once_and_reports_its_crash,
    a_catalog_change_replaces_the_pooled_sandboxes,
    a_list_changed_from_a_wrapped_server_replaces_the_pooled_sandboxes,
    the_deadline_counts_from_the_take_not_from_the_pool_start,
    twenty_runs_back_to_back_with_a_pool_of_two_all_succeed,
    serve_ended_right_after_runs_leaves_no_sandbox_behind,
    every_way_serve_ends_kills_its_idle_pooled_sandboxes,
);
