"""Drive N MCP sessions through HAProxy with the Python SDK's Streamable HTTP client.

Usage: python scale_demo.py URL SESSIONS CONCURRENCY KILL_PID_FILE NEW_SESSIONS
The token comes from MCP_TOKEN. Started by scripts/scale-demo.

1. Opens SESSIONS sessions (CONCURRENCY at a time); each calls run_python once and stays
   open. Prints the spread over replicas (HAProxy's X-Mcp-Replica header), the failures,
   and p50/p99 of the run_python latency (the call as the client sees it).
2. Kills the replica named in KILL_PID_FILE's first line ("NAME PID") with SIGKILL, waits
   until HAProxy marks it down, and lets every open session call again: the failures by
   replica show that only the killed replica's sessions fail.
3. Opens NEW_SESSIONS new sessions: all go to the other replicas and none fails.
"""

import asyncio
import contextlib
import json
import os
import signal
import statistics
import sys
import time
from collections import Counter

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

CODE = "print(await add({'a': 2, 'b': 3}))"


class Session:
    def __init__(self, url):
        self.url = url
        self.replica = None
        self.stack = contextlib.AsyncExitStack()
        self.session = None

    async def open(self):
        token = os.environ.get("MCP_TOKEN")

        async def seen(response):
            if self.replica is None and "x-mcp-replica" in response.headers:
                self.replica = response.headers["x-mcp-replica"]

        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=httpx2.Timeout(300.0),
            event_hooks={"response": [seen]},
        )
        await self.stack.enter_async_context(http)
        read, write = await self.stack.enter_async_context(
            streamable_http_client(self.url, http_client=http, terminate_on_close=False)
        )
        self.session = await self.stack.enter_async_context(ClientSession(read, write))
        await self.session.initialize()

    async def call(self):
        started = time.monotonic()
        result = await asyncio.wait_for(
            self.session.call_tool("run_python", {"code": CODE}), timeout=300
        )
        took = time.monotonic() - started
        stdout = (result.structured_content or {}).get("stdout")
        if result.is_error or stdout != '{"sum": 5}\n':
            raise RuntimeError(f"unexpected result: {result.structured_content}")
        return took

    async def close(self):
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(self.stack.aclose(), timeout=5)


def describe(e):
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(describe(x) for x in e.exceptions)
    return f"{type(e).__name__}: {e}"[:200]


async def round_of(sessions, concurrency, opening):
    """Each session (opened first when `opening`) calls once; (latencies, failures)."""
    gate = asyncio.Semaphore(concurrency)
    latencies, failures = [], []

    async def one(s):
        async with gate:
            try:
                if opening:
                    await asyncio.wait_for(s.open(), timeout=120)
                latencies.append(await s.call())
            except BaseException as e:
                failures.append((s.replica, describe(e)))

    await asyncio.gather(*(one(s) for s in sessions))
    return latencies, failures


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def report(title, sessions, latencies, failures):
    spread = Counter(s.replica or "none" for s in sessions)
    failed_by = Counter(r or "none" for r, _ in failures)
    print(f"\n== {title}")
    print(f"sessions: {len(sessions)}; by replica: {dict(sorted(spread.items()))}")
    print(f"failures: {len(failures)}; by replica: {dict(sorted(failed_by.items()))}")
    for replica, why in failures[:3]:
        print(f"  e.g. on {replica}: {why}")
    if latencies:
        print(
            f"run_python latency: p50 {percentile(latencies, 50) * 1000:.0f} ms, "
            f"p99 {percentile(latencies, 99) * 1000:.0f} ms, "
            f"mean {statistics.mean(latencies) * 1000:.0f} ms over {len(latencies)} calls"
        )
    return {
        "sessions": len(sessions),
        "spread": dict(spread),
        "failures": len(failures),
        "failures_by_replica": dict(failed_by),
        "p50_ms": round(percentile(latencies, 50) * 1000),
        "p99_ms": round(percentile(latencies, 99) * 1000),
    }


async def wait_down(url, replica, within=15.0):
    """Until new sessions stop landing on `replica` (HAProxy marked it down)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        await asyncio.sleep(1.0)
        probe = Session(url)
        try:
            await asyncio.wait_for(probe.open(), timeout=30)
        except BaseException:
            pass
        finally:
            await probe.close()
        if probe.replica and probe.replica != replica:
            return


async def main():
    url, total, concurrency, kill_file, new = sys.argv[1:6]
    total, concurrency, new = int(total), int(concurrency), int(new)
    summary = {}
    sessions = [Session(url) for _ in range(total)]
    began = time.monotonic()
    latencies, failures = await round_of(sessions, concurrency, opening=True)
    summary["open"] = report(
        f"1. {total} sessions opened, one run each ({time.monotonic() - began:.0f} s)",
        sessions, latencies, failures,
    )

    name, pid = open(kill_file).read().split()[:2]
    os.kill(int(pid), signal.SIGKILL)
    print(f"\n-- killed replica {name} (pid {pid}) with SIGKILL")
    await wait_down(url, name)
    alive = [s for s in sessions if s.session is not None]
    latencies, failures = await round_of(alive, concurrency, opening=False)
    summary["after_kill"] = report(
        f"2. the open sessions call again after {name} died", alive, latencies, failures
    )
    others = [r for r in summary["after_kill"]["failures_by_replica"] if r != name]
    print(f"sessions failed on replicas other than {name}: {others or 'none'}")

    fresh = [Session(url) for _ in range(new)]
    latencies, failures = await round_of(fresh, concurrency, opening=True)
    summary["new"] = report(f"3. {new} new sessions after {name} died", fresh, latencies, failures)
    summary["new_on_killed_replica"] = sum(1 for s in fresh if s.replica == name)
    print(f"new sessions on {name}: {summary['new_on_killed_replica']}")

    await asyncio.gather(*(s.close() for s in sessions + fresh))
    print("\n" + json.dumps(summary))


asyncio.run(main())
