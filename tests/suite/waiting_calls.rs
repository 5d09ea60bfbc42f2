//! What runs while the code awaits a tool call, end to end through `exec` on each backend.
//! A call awaited while nothing else in the process could run is answered without a turn of
//! the event loop (the runner reads the host's lines itself, `tools._runs_alone` and
//! `inbox.wait_here` in the runner's package); everything else that could run meanwhile
//! still does, at its time and in its order.
//!
//! Index: a sleeping task, a subprocess's pipe, an executor thread's result, a timeout
//! around the call, calls from another thread's loop, a forked child's calls, and signal
//! handlers that raise during the wait. Each was checked to fail with the rule it names
//! taken out of `_runs_alone` or `wait_here` (the forked child's loop: out of
//! `tools._running_loop`).

use super::common::{Exec, exec_on};

crate::on_both_backends!(
    a_task_sleeping_while_another_awaits_a_call_wakes_before_the_answer,
    a_subprocess_pipe_is_read_while_a_call_is_awaited,
    an_executor_threads_result_is_taken_while_a_call_is_awaited,
    a_call_inside_wait_for_with_a_short_timeout_times_out_and_its_late_answer_is_dropped,
    calls_from_another_threads_loop_and_the_main_task_each_get_their_own_answer,
    a_forked_childs_call_never_reads_the_protocol,
    a_forked_childs_call_belongs_to_the_loop_the_child_runs,
    a_signal_handler_raising_during_a_call_ends_the_cell_as_the_loop_would,
);

fn run(backend: &str, code: &str) -> Exec {
    exec_on(backend, code, &["--deadline", "30"])
}

/// The run printed exactly `expected` and ended without an error.
fn assert_printed(run: &Exec, expected: &str) {
    assert_eq!(run.error(), "", "{run:?}");
    assert_eq!(run.printed(), expected, "{run:?}");
}

fn a_task_sleeping_while_another_awaits_a_call_wakes_before_the_answer(backend: &str) {
    // The sleeper's timer is the only other thing the loop has when the call goes out.
    let r = run(
        backend,
        "import asyncio\n\
         async def sleeper():\n    await asyncio.sleep(0.2)\n    print('woke')\n\
         task = asyncio.create_task(sleeper())\n\
         await asyncio.sleep(0)\n\
         print(await slow({'seconds': 2}))\n\
         await task",
    );
    assert_printed(&r, "woke\ndone\n");
}

fn a_subprocess_pipe_is_read_while_a_call_is_awaited(backend: &str) {
    let r = run(
        backend,
        "import asyncio, sys\n\
         child = await asyncio.create_subprocess_exec(sys.executable, '-c', \
         'import time; time.sleep(0.2); print(\"from the child\", flush=True); time.sleep(5)', \
         stdout=asyncio.subprocess.PIPE)\n\
         async def reader():\n    print((await child.stdout.readline()).decode().strip())\n\
         task = asyncio.create_task(reader())\n\
         await asyncio.sleep(0)\n\
         print(await slow({'seconds': 2}))\n\
         await task\n\
         child.kill()\n\
         await child.wait()",
    );
    assert_printed(&r, "from the child\ndone\n");
}

fn an_executor_threads_result_is_taken_while_a_call_is_awaited(backend: &str) {
    // The thread hands its result to the loop with call_soon_threadsafe (its wake-up socket).
    let r = run(
        backend,
        "import asyncio, time\n\
         async def waiter():\n    await asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.2)\n    print('slept')\n\
         task = asyncio.create_task(waiter())\n\
         await asyncio.sleep(0)\n\
         print(await slow({'seconds': 2}))\n\
         await task",
    );
    assert_printed(&r, "slept\ndone\n");
}

fn a_call_inside_wait_for_with_a_short_timeout_times_out_and_its_late_answer_is_dropped(
    backend: &str,
) {
    // The first call's answer comes while the second call waits: it is no one's any more.
    let r = run(
        backend,
        "import asyncio\n\
         try:\n    await asyncio.wait_for(slow({'seconds': 1}), 0.2)\nexcept asyncio.TimeoutError:\n    print('timed out')\n\
         print(await slow({'seconds': 1.5}))\n\
         print(await echo({'text': 'next'}))",
    );
    assert_printed(&r, "timed out\ndone\nnext\n");
}

fn calls_from_another_threads_loop_and_the_main_task_each_get_their_own_answer(backend: &str) {
    // The thread's call is answered while the main task's is awaited: whichever reads the
    // thread's answer hands it to the thread's loop.
    let r = run(
        backend,
        "import asyncio, threading\n\
         got = []\n\
         def in_thread():\n    got.append(asyncio.run(echo({'text': 'thread'})))\n\
         t = threading.Timer(0.2, in_thread)\n\
         t.start()\n\
         main = await slow({'seconds': 1})\n\
         t.join()\n\
         print(got, main)\n\
         print(await echo({'text': 'main'}))",
    );
    assert_printed(&r, "['thread'] done\nmain\n");
}

fn a_forked_childs_call_never_reads_the_protocol(backend: &str) {
    // The host's lines are the parent's: a child reading them could take its parent's
    // answers (its call ids are the parent's too). Its call (on a loop of its own, as the
    // parent's loop does not run in it) is sent and answered, and the answer is left to
    // the parent, which has no call of that id waiting.
    let r = run(
        backend,
        "import asyncio, os, select, warnings\n\
         warnings.simplefilter('ignore', DeprecationWarning)  # fork() with threads (3.12+)\n\
         r, w = os.pipe()\n\
         pid = os.fork()\n\
         if pid == 0:\n    try:\n        \
         os.write(w, asyncio.new_event_loop().run_until_complete(echo({'text': 'child'})).encode())\n    \
         finally:\n        os._exit(0)\n\
         os.close(w)\n\
         answered = select.select([r], [], [], 1.5)[0]\n\
         os.kill(pid, 9)\n\
         os.waitpid(pid, 0)\n\
         print('the child got', os.read(r, 100) if answered else None)\n\
         print(await echo({'text': 'parent'}))",
    );
    assert_printed(&r, "the child got None\nparent\n");
}

fn a_forked_childs_call_belongs_to_the_loop_the_child_runs(backend: &str) {
    // The parent's loop was running when it forked, on the thread the child goes on with:
    // the runner's remembered loop must not stand in for the child's own. The child's call
    // is a future of its loop, so wait_for there times it out (the answer is the parent's);
    // on the parent's loop it would be "attached to a different loop" (a RuntimeError).
    let r = run(
        backend,
        "import asyncio, os, select, warnings\n\
         warnings.simplefilter('ignore', DeprecationWarning)  # fork() with threads (3.12+)\n\
         print(await echo({'text': 'before'}))\n\
         r, w = os.pipe()\n\
         pid = os.fork()\n\
         if pid == 0:\n    try:\n        try:\n            \
         asyncio.new_event_loop().run_until_complete(asyncio.wait_for(echo({'text': 'child'}), 0.3))\n            \
         got = 'an answer'\n        except BaseException as error:\n            \
         got = type(error).__name__\n        os.write(w, got.encode())\n    \
         finally:\n        os._exit(0)\n\
         os.close(w)\n\
         select.select([r], [], [], 10)\n\
         os.waitpid(pid, 0)\n\
         print('the child got', os.read(r, 100).decode())\n\
         print(await echo({'text': 'parent'}))",
    );
    assert_printed(&r, "before\nthe child got TimeoutError\nparent\n");
}

fn a_signal_handler_raising_during_a_call_ends_the_cell_as_the_loop_would(backend: &str) {
    // Raised in the loop's wait, not in the task: the code's `except` does not see it.
    for (setup, raised) in [
        (
            "class Alarm(Exception):\n    pass\n\
             def ring(signum, frame):\n    raise Alarm()\n\
             signal.signal(signal.SIGALRM, ring)\n\
             signal.setitimer(signal.ITIMER_REAL, 0.2)\n",
            "Alarm",
        ),
        // Python's own SIGINT handler (which asyncio.run puts back): no handler of the
        // code's, so the call is waited for without the loop, and the KeyboardInterrupt is
        // raised out of the loop all the same.
        (
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n\
             threading.Timer(0.2, signal.pthread_kill, (threading.main_thread().ident, signal.SIGINT)).start()\n",
            "KeyboardInterrupt",
        ),
    ] {
        let code = format!(
            "import signal, threading\n{setup}\
             try:\n    await slow({{'seconds': 2}})\nexcept BaseException:\n    print('caught in the task')"
        );
        let r = run(backend, &code);
        assert_eq!(r.printed(), "", "{r:?}");
        assert!(r.error().ends_with(raised), "{r:?}");
    }
}
