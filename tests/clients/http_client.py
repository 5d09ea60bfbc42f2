"""The Python MCP SDK's Streamable HTTP client against `serve --http`.

Usage: python http_client.py SCENARIO URL JOURNAL [ARG...]
The bearer token, if any, is taken from the MCP_TOKEN environment variable. JOURNAL is the
toy server's `--journal` file ("-" when the scenario does not wait on it).

Prints one JSON object:

  calls     one session: initialize, list the tools, call run_python with each ARG;
            {"session_id", "tools", "calls": [{"stdout", "error", "is_error"}]}
  cancel    start a run that awaits `slow` (30 s); cancel it (asyncio task cancel: the SDK
            sends notifications/cancelled) once the call reached the server; then run
            `print('next')`; {"cancel_returned_s", "next_stdout", "next_after_cancel_s"}
  taint     two sessions A and B at once: A calls the private `secret`, then A and B each
            call `add`; {"a_secret", "a_add", "b_add"} (each the run's stdout)
  slots     sessions A and B: A asks for two runs that sleep 3 s at once, then B asks for
            one quick run; when each ended, in seconds from the start:
            {"a": [end, end], "b": end}
  hold      open ARG[0] sessions one after the other and keep them open; each one's outcome
            ("ok" or the error's text); then close them all
  slow      one session: one run that sleeps ARG[0] seconds and prints "slept"; prints
            "started" on stderr once the run is sent; {"stdout", "error"} or {"failed"}
"""

import asyncio
import contextlib
import json
import os
import sys
import time

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

LONG_RUN = "await slow({'seconds': 30})\nawait echo({'text': 'after-cancel'})"


def client():
    token = os.environ.get("MCP_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(120.0))


@contextlib.asynccontextmanager
async def session(url):
    async with client() as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


async def journal_shows(journal, text, within=60.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            with open(journal) as f:
                if text in f.read():
                    return
        except FileNotFoundError:
            pass
        await asyncio.sleep(0.05)
    raise TimeoutError("the journal never showed %r" % text)


def stdout_of(result):
    return (result.structured_content or {}).get("stdout")


async def calls(url, journal, codes):
    async with session(url) as s:
        listed = await s.list_tools()
        out = []
        for code in codes:
            result = await s.call_tool("run_python", {"code": code})
            structured = result.structured_content or {}
            out.append({
                "stdout": structured.get("stdout"),
                "error": structured.get("error"),
                "is_error": bool(result.is_error),
            })
        return {"tools": [t.name for t in listed.tools], "calls": out}


async def cancel(url, journal, _args):
    async with session(url) as s:
        task = asyncio.create_task(s.call_tool("run_python", {"code": LONG_RUN}))
        await journal_shows(journal, "call slow")
        started = time.monotonic()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        cancelled_at = time.monotonic()
        result = await s.call_tool("run_python", {"code": "print('next')"})
        return {
            "cancel_returned_s": cancelled_at - started,
            "next_stdout": stdout_of(result),
            "next_after_cancel_s": time.monotonic() - cancelled_at,
        }


async def taint(url, journal, _args):
    async with session(url) as a, session(url) as b:
        run = lambda s, code: s.call_tool("run_python", {"code": code})
        add = "try:\n    print(await add({'a': 1, 'b': 2}))\nexcept ToolError as e:\n    print('refused:', e)"
        a_secret = stdout_of(await run(a, "print(await secret({}))"))
        a_add, b_add = await asyncio.gather(run(a, add), run(b, add))
        return {"a_secret": a_secret, "a_add": stdout_of(a_add), "b_add": stdout_of(b_add)}


async def slots(url, journal, _args):
    async with session(url) as a, session(url) as b:
        start = time.monotonic()

        async def timed(s, code):
            await s.call_tool("run_python", {"code": code})
            return time.monotonic() - start

        sleep = "import time\ntime.sleep(3)"
        a_runs = [asyncio.create_task(timed(a, sleep)) for _ in range(2)]
        await asyncio.sleep(0.5)
        b_end = await timed(b, "print('quick')")
        return {"a": sorted(await asyncio.gather(*a_runs)), "b": b_end}


async def hold(url, journal, args):
    outcomes = []
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(int(args[0])):
            try:
                await stack.enter_async_context(session(url))
                outcomes.append("ok")
            except BaseException as e:  # the SDK raises an ExceptionGroup from its task group
                outcomes.append(describe(e))
    return {"outcomes": outcomes}


async def slow(url, journal, args):
    try:
        async with session(url) as s:
            task = asyncio.create_task(
                s.call_tool("run_python", {"code": f"import time\ntime.sleep({float(args[0])})\nprint('slept')"})
            )
            await asyncio.sleep(0.3)
            print("started", file=sys.stderr, flush=True)
            result = await task
            structured = result.structured_content or {}
            return {"stdout": structured.get("stdout"), "error": structured.get("error")}
    except BaseException as e:
        return {"failed": describe(e)}


def describe(e):
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"


async def main():
    scenario, url, journal = sys.argv[1:4]
    args = sys.argv[4:]
    run = {"calls": calls, "cancel": cancel, "taint": taint, "hold": hold, "slow": slow, "slots": slots}[scenario]
    print(json.dumps(await run(url, journal, args)), flush=True)


asyncio.run(main())
