"""Steer runs of `serve` from the Python MCP SDK: cancel, queue, progress, disconnect.

Usage: python steer.py SCENARIO JOURNAL [SERVE_LOG] -- SERVE_COMMAND...

JOURNAL is the toy server's `--journal` file: the scenarios wait on it to know that a
run's call reached the server. SERVE_LOG is the file serve's stderr (at log level info)
goes to: `queue` waits on it to know that serve took in a cancel.

Prints one JSON object with what was observed (times in seconds, from time.monotonic):

  cancel       start a run that awaits `slow` (30 s); cancel it (asyncio task cancel: the
               SDK sends notifications/cancelled) once the call reached the server; then run
               `print('next')` and time it.
  queue        fill the 4 slots with runs that await `slow` (60 s), queue a fifth that calls
               `echo` with "queued-side-effect", cancel it while it waits; once serve logged
               the cancel (or after 20 s) cancel the 4, so their slots come free only then;
               then run `print('after')` (queued behind the fifth, had it stayed) and wait
               1 s more for a late call. The slots never come free on a clock of their own,
               so the cancel cannot lose a race against them however loaded the machine is.
  progress     one run with a progress callback: 3 calls, then 9 s of sleep; the
               notifications received.
  timed        run each code given after the journal, one after the other (pass them as
               `timed JOURNAL CODE... -- SERVE`); each one's seconds and result.
  disconnect   start a run that starts a child (its command line ends with "steer-" and
               the name of JOURNAL's directory), calls `echo`, then sleeps 60 s; leave
               (close stdin) once the call reached the server; how long leaving took.
"""

import asyncio
import json
import os
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

LONG_RUN = "print('ready', flush=True)\nawait slow({'seconds': 30})\nawait echo({'text': 'after-cancel'})"
JOURNAL = None
SERVE_LOG = None


async def file_shows(path, text, count=1, within=60.0):
    """Wait until the file at `path` holds `text` `count` times; False if it never did."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(path) as f:
                if f.read().count(text) >= count:
                    return True
        except FileNotFoundError:
            pass
        await asyncio.sleep(0.05)
    return False


async def journal_shows(text, count=1, within=60.0):
    """Wait until the journal holds `text` `count` times."""
    if not await file_shows(JOURNAL, text, count, within):
        raise TimeoutError("the journal never showed %r %d times" % (text, count))


async def cancel(session):
    task = asyncio.create_task(session.call_tool("run_python", {"code": LONG_RUN}))
    await journal_shows("call slow")
    started = time.monotonic()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    cancelled_at = time.monotonic()
    result = await session.call_tool("run_python", {"code": "print('next')"})
    return {
        "next_stdout": result.structured_content["stdout"],
        "cancel_returned_s": cancelled_at - started,
        "next_after_cancel_s": time.monotonic() - cancelled_at,
    }


async def queue(session):
    busy = [
        asyncio.create_task(session.call_tool("run_python", {"code": "await slow({'seconds': 60})\nprint('busy')"}))
        for _ in range(4)
    ]
    await journal_shows("call slow", 4)
    queued = asyncio.create_task(session.call_tool("run_python", {"code": "await echo({'text': 'queued-side-effect'})"}))
    # Let the request reach serve and take its place in the queue before cancelling it.
    await asyncio.sleep(0.5)
    queued.cancel()
    try:
        await queued
    except asyncio.CancelledError:
        pass
    logged = await file_shows(SERVE_LOG, "a queued run was cancelled before it started", within=20.0)
    for task in busy:
        task.cancel()
    busy_cancelled = 0
    for task in busy:
        try:
            await task
        except asyncio.CancelledError:
            busy_cancelled += 1
    after = await session.call_tool("run_python", {"code": "print('after')"})
    await asyncio.sleep(1.0)
    return {
        "cancel_logged": logged,
        "busy_cancelled": busy_cancelled,
        "after_stdout": after.structured_content["stdout"],
    }


async def progress(session):
    seen = []
    start = time.monotonic()

    async def on_progress(progress, total, message):
        seen.append({"t": time.monotonic() - start, "progress": progress, "total": total, "message": message})

    code = "import time\nfor i in range(3):\n    await add({'a': i, 'b': 1})\ntime.sleep(9)\nprint('slept')"
    result = await session.call_tool("run_python", {"code": code}, progress_callback=on_progress)
    return {"stdout": result.structured_content["stdout"], "progress": seen, "took": time.monotonic() - start}


async def timed(session, codes):
    runs = []
    for code in codes:
        start = time.monotonic()
        result = await session.call_tool("run_python", {"code": code})
        runs.append({"seconds": time.monotonic() - start, "result": result.structured_content})
    return {"runs": runs}


async def main() -> None:
    global JOURNAL, SERVE_LOG
    sep = sys.argv.index("--")
    scenario, JOURNAL = sys.argv[1], sys.argv[2]
    if scenario != "timed" and sep > 3:
        SERVE_LOG = sys.argv[3]
    command = sys.argv[sep + 1:]
    params = StdioServerParameters(command=command[0], args=command[1:])
    out = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            if scenario == "disconnect":
                # A child whose command line names this journal, for the test to look for.
                marker = "steer-" + os.path.basename(os.path.dirname(JOURNAL))
                code = (
                    "import subprocess, time\n"
                    f"subprocess.Popen(['/usr/bin/python3', '-c', 'import time; time.sleep(60)', {marker!r}])\n"
                    "await echo({'text': 'running'})\ntime.sleep(60)"
                )
                asyncio.create_task(session.call_tool("run_python", {"code": code}))
                await journal_shows("call echo")
                await asyncio.sleep(0.5)
                leaving = time.monotonic()
            elif scenario == "timed":
                out = await timed(session, sys.argv[3:sep])
                leaving = time.monotonic()
            else:
                out = await {"cancel": cancel, "queue": queue, "progress": progress}[scenario](session)
                leaving = time.monotonic()
    out["leave_s"] = time.monotonic() - leaving
    print(json.dumps(out))


asyncio.run(main())
