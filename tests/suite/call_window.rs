//! Calls beyond the sixteen the host serves at once, end to end through `exec` on each
//! backend: the runner holds the code's calls past its window (`inbox.send_call` in the
//! runner's package), so what the code prints, and the end of its code, reach the host
//! whatever calls wait; calls still held when the code ends are never sent. The host's own
//! bound holds against lines the code forges: at most sixteen served at once, and what was
//! written behind a call it cannot serve yet is still read at the deadline.
//!
//! Index: output at the deadline with 40 calls waiting; a finished code's unawaited calls;
//! held calls a timeout gave up; held calls of an event loop of the code's own that is
//! stopped, closed after it stopped, or whose thread is blocked (none holds up another
//! loop's calls); forged calls past the cap (served sixteen at a time, and the output
//! written after them at the deadline).

use std::path::Path;

use super::common::{Exec, exec_wrapping, toy};

crate::on_both_backends!(
    output_printed_while_more_than_sixteen_calls_wait_reaches_the_deadline_result,
    a_run_whose_code_ended_does_not_send_the_calls_it_left_unawaited,
    a_held_call_whose_wait_timed_out_is_never_sent_and_the_next_call_goes_out,
    held_calls_of_a_stopped_event_loop_wait_for_it_without_holding_up_another_loops_calls,
    held_calls_of_an_event_loop_closed_after_it_stopped_are_dropped_and_hold_up_no_later_call,
    held_calls_of_an_event_loop_whose_thread_is_blocked_hold_up_no_other_loops_calls,
    forged_calls_past_sixteen_are_served_sixteen_at_a_time,
    output_written_behind_forged_calls_the_host_cannot_serve_yet_reaches_the_deadline_result,
);

/// `exec` on `backend` with the toy server keeping its journal at `journal`.
fn run(backend: &str, code: &str, args: &[&str], journal: &Path) -> Exec {
    let mut server = toy();
    server.extend(["--journal".to_owned(), journal.display().to_string()]);
    exec_wrapping(backend, code, args, server)
}

/// The journal's lines of calls of `tool` the server got (`call`) or answered (`done`), in
/// order: `true` for a call, `false` for an answer.
fn journal_of(journal: &Path, tool: &str) -> Vec<bool> {
    let text = std::fs::read_to_string(journal).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            if line.starts_with(&format!("call {tool} ")) {
                Some(true)
            } else if line == format!("done {tool}") {
                Some(false)
            } else {
                None
            }
        })
        .collect()
}

fn output_printed_while_more_than_sixteen_calls_wait_reaches_the_deadline_result(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // Sixteen calls end 5 s into the code and print; the next sixteen could end only after
    // the deadline. The host that stopped reading at sixteen calls in flight read that
    // output only after a second round of calls, past the deadline: stdout was "".
    let code = "import asyncio\n\
                async def one(i):\n    await slow(seconds=5)\n    print('done', i, flush=True)\n\
                await asyncio.gather(*[one(i) for i in range(40)])";
    let r = run(backend, code, &["--deadline", "9"], &journal);
    assert!(r.stopped() && r.error().contains("deadline"), "{r:?}");
    let printed = r
        .printed()
        .lines()
        .filter(|l| l.starts_with("done "))
        .count();
    let answered = journal_of(&journal, "slow").iter().filter(|c| !**c).count();
    assert!(
        (16..40).contains(&printed),
        "what 16 or more answered calls printed: {printed} lines, {answered} answered; {r:?}"
    );
}

fn a_run_whose_code_ended_does_not_send_the_calls_it_left_unawaited(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let code = "import asyncio\n\
                t = [asyncio.ensure_future(slow(seconds=3)) for _ in range(40)]\n\
                await asyncio.sleep(0.1)\n\
                print('end of code', flush=True)";
    let r = run(backend, code, &["--deadline", "60"], &journal);
    assert_eq!(r.printed(), "end of code\n", "{r:?}");
    assert!(!r.stopped(), "{r:?}");
    // At most the sixteen written went out (one of them may still be on its way when the
    // code's end withdraws it); the run ended without sending any of the rest, which a
    // host that kept reading call lines after the code's end did: the server got all 40.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let sent = journal_of(&journal, "slow").iter().filter(|c| **c).count();
    assert!(
        (1..=16).contains(&sent),
        "calls the server got: {sent}; {r:?}"
    );
}

fn a_held_call_whose_wait_timed_out_is_never_sent_and_the_next_call_goes_out(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // Sixteen calls of 3 s are written first and four more are held behind them; the four
    // held ones give up in the code after 0.3 s, long before a written one is answered and
    // makes room, and the echo after them all goes out. A runner that wrote a held call
    // whose task gave up would send 20.
    let code = "import asyncio\n\
                async def held():\n    try:\n        await asyncio.wait_for(slow(seconds=3), 0.3)\n    except asyncio.TimeoutError:\n        return 'timed out'\n\
                written = [asyncio.ensure_future(slow(seconds=3)) for _ in range(16)]\n\
                given_up = await asyncio.gather(*[held() for _ in range(4)])\n\
                await asyncio.gather(*written)\n\
                print(given_up)\n\
                print(await echo(text='after'))";
    let r = run(backend, code, &["--deadline", "60"], &journal);
    assert_eq!(
        r.printed(),
        "['timed out', 'timed out', 'timed out', 'timed out']\nafter\n",
        "{r:?}"
    );
    let sent = journal_of(&journal, "slow").iter().filter(|c| **c).count();
    assert_eq!(sent, 16, "the four held calls were given up unsent; {r:?}");
}

fn held_calls_of_a_stopped_event_loop_wait_for_it_without_holding_up_another_loops_calls(
    backend: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // A loop of the code's own, in a thread, makes 20 calls of 2 s: sixteen are written and
    // four held; it then stops (it is not closed) before any is answered. The main loop's
    // call, held behind them, goes out when the first answer makes room: a runner that left
    // the room to the stopped loop never wrote it (the run hit its deadline). Run again, the
    // stopped loop writes its four and gets all twenty answers.
    let code = "import asyncio, threading\n\
                L2 = asyncio.new_event_loop()\n\
                tasks, results = [], []\n\
                def start():\n    tasks.extend(L2.create_task(slow(seconds=2)) for _ in range(20))\n    L2.run_until_complete(asyncio.sleep(0.2))\n\
                t = threading.Thread(target=start)\n\
                t.start()\n\
                t.join()\n\
                print(await echo(text='main call'), flush=True)\n\
                def resume():\n    results.extend(L2.run_until_complete(asyncio.gather(*tasks)))\n\
                t = threading.Thread(target=resume)\n\
                t.start()\n\
                t.join()\n\
                print(len(results), 'answers')";
    let r = run(backend, code, &["--deadline", "40"], &journal);
    assert_eq!(r.printed(), "main call\n20 answers\n", "{r:?}");
    assert!(!r.stopped(), "{r:?}");
}

fn held_calls_of_an_event_loop_closed_after_it_stopped_are_dropped_and_hold_up_no_later_call(
    backend: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // The main loop's sixteen calls of 5 s fill the window; a loop of the code's own, in a
    // thread, makes four more (held: the 5 s leave room for a slow start of the thread) and
    // stops after its first turn (the four are sent to the window then). All sixteen are answered while it is stopped,
    // then the code closes it: its four can never be awaited. A runner that gave each free
    // place to the stopped loop lost them all when it closed, and the echo after waited
    // behind its four to the deadline. Now they are dropped unsent and the echo goes out.
    let code = "import asyncio, threading\n\
                written = [asyncio.ensure_future(slow(seconds=5)) for _ in range(16)]\n\
                await asyncio.sleep(0)\n\
                L2 = asyncio.new_event_loop()\n\
                kept = []\n\
                def stopped():\n    kept.extend(L2.create_task(slow(seconds=2)) for _ in range(4))\n    L2.run_until_complete(asyncio.sleep(0))\n\
                t = threading.Thread(target=stopped)\n\
                t.start()\n\
                t.join()\n\
                print(len(await asyncio.gather(*written)), 'answers', flush=True)\n\
                L2.close()\n\
                print(await echo(text='after the close'), flush=True)";
    let r = run(backend, code, &["--deadline", "40"], &journal);
    assert_eq!(r.printed(), "16 answers\nafter the close\n", "{r:?}");
    assert!(!r.stopped(), "{r:?}");
    let sent = journal_of(&journal, "slow").iter().filter(|c| **c).count();
    assert_eq!(sent, 16, "the closed loop's four were never sent; {r:?}");
}

fn held_calls_of_an_event_loop_whose_thread_is_blocked_hold_up_no_other_loops_calls(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    // A loop of the code's own makes 20 calls of 2 s (sixteen written, four held) and then
    // blocks its thread until the main loop's call is answered. That call, held behind the
    // four, goes out as answers make room, with the four before it: a runner that left each
    // free place to the blocked loop never wrote it, and both waited until the deadline.
    let code = "import asyncio, threading\n\
                sent, go = threading.Event(), threading.Event()\n\
                results = []\n\
                async def blocking():\n    tasks = [asyncio.ensure_future(slow(seconds=2)) for _ in range(20)]\n    await asyncio.sleep(0)\n    sent.set()\n    go.wait()\n    results.extend(await asyncio.gather(*tasks))\n\
                t = threading.Thread(target=lambda: asyncio.new_event_loop().run_until_complete(blocking()))\n\
                t.start()\n\
                sent.wait()\n\
                print(await echo(text='main call'), flush=True)\n\
                go.set()\n\
                t.join()\n\
                print(len(results), 'answers')";
    let r = run(backend, code, &["--deadline", "40"], &journal);
    assert_eq!(r.printed(), "main call\n20 answers\n", "{r:?}");
    assert!(!r.stopped(), "{r:?}");
}

/// Code that writes `count` raw `call` lines of `slow` (its own ids, past the runner's
/// window) on every descriptor, then `after`.
fn forge_slow_calls(count: usize, seconds: u32, after: &str) -> String {
    format!(
        "import os, json\nfor n in range({count}):\n    line = (json.dumps({{'type': 'call', 'id': 424242 + n, 'tool': 'slow', 'args': {{'seconds': {seconds}}}}}) + '\\n').encode()\n    for fd in range(3, 64):\n        try:\n            os.write(fd, line)\n        except OSError:\n            pass\n{after}"
    )
}

fn forged_calls_past_sixteen_are_served_sixteen_at_a_time(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let code = forge_slow_calls(24, 3, "import time\ntime.sleep(4)\nprint('slept')");
    let r = run(backend, &code, &["--deadline", "60"], &journal);
    assert_eq!(r.printed(), "slept\n", "{r:?}");
    let (mut at_once, mut most) = (0, 0);
    for call in journal_of(&journal, "slow") {
        at_once = if call { at_once + 1 } else { at_once - 1 };
        most = most.max(at_once);
    }
    assert_eq!(most, 16, "calls the server had at once; {r:?}");
}

fn output_written_behind_forged_calls_the_host_cannot_serve_yet_reaches_the_deadline_result(
    backend: &str,
) {
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("journal");
    let code = forge_slow_calls(
        20,
        30,
        "print('written behind them', flush=True)\nimport time\ntime.sleep(60)",
    );
    let r = run(
        backend,
        &code,
        &["--deadline", "5", "--call-timeout", "60"],
        &journal,
    );
    assert!(r.stopped() && r.error().contains("deadline"), "{r:?}");
    assert_eq!(r.printed(), "written behind them\n", "{r:?}");
}
