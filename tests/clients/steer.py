"""Steer runs of `serve` from the Python MCP SDK: cancel, queue, progress, disconnect.

Usage: python steer.py SCENARIO JOURNAL -- SERVE_COMMAND...

JOURNAL is the toy server's `--journal` file: the scenarios wait on it to know that a
run's call reached the server.

Prints one JSON object with what was observed (times in seconds, from time.monotonic):

  cancel       start a run that awaits `slow` (30 s); cancel it (asyncio task cancel: the
               SDK sends notifications/cancelled) once the call reached the server; then run
               `print('next')` and time it.
  queue        fill the 4 slots with runs that await `slow` (3 s), queue a fifth that calls
               `echo` with "queued-side-effect", cancel it while it waits, let the 4 finish.
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


async def journal_shows(text, count=1, within=60.0):
    """Wait until the journal holds `text` `count` times."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(JOURNAL) as f:
                if f.read().count(text) >= count:
                    return
        except FileNotFoundError:
            pass
        await asyncio.sleep(0.05)
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
        asyncio.create_task(session.call_tool("run_python", {"code": "await slow({'seconds': 3})\nprint('busy')"}))
        for _ in range(4)
    ]
    await journal_shows("call slow", 4)
    queued = asyncio.create_task(session.call_tool("run_python", {"code": "await echo({'text': 'queued-side-effect'})"}))
    await asyncio.sleep(0.5)
    queued.cancel()
    try:
        await queued
    except asyncio.CancelledError:
        pass
    results = await asyncio.gather(*busy)
    await asyncio.sleep(1.0)
    return {"busy": [r.structured_content["stdout"] for r in results]}


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
    global JOURNAL
    sep = sys.argv.index("--")
    scenario, JOURNAL = sys.argv[1], sys.argv[2]
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
