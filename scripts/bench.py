"""Benchmark: the cost of one run_python call on each backend, side by side.

Usage: scripts/bench [RUNS]   (default 20 runs per case)

Starts `mcp-code-mode serve` over stdio with a real MCP client (the Python SDK), wraps the
toy server, and times RUNS calls of each case on each backend; then prints a table of
median and p90 latency, the serve process's peak memory (VmHWM), and the docker/native
ratio. A backend that cannot run here is reported as such, not timed.
"""

import asyncio
import os
import statistics
import subprocess
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

CASES = {
    "print(1)": "print(1)",
    "quick start (3 calls)": (
        "import asyncio, json\n"
        "sums = await asyncio.gather(*(add({'a': n, 'b': 10}) for n in range(3)))\n"
        "print([json.loads(s)['sum'] for s in sums])"
    ),
    "50 sequential calls": "for i in range(50):\n    await add({'a': i, 'b': 1})\nprint('ok')",
}


def serve_pid(pid_file):
    try:
        with open(pid_file) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def peak_kib(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def bench_backend(binary, toy, backend, runs):
    pid_file = f"/tmp/mcp-code-mode-bench-{os.getpid()}-{backend}.pid"
    params = StdioServerParameters(
        command="sh",
        args=["-c", f'echo $$ > {pid_file}; exec "$@"', "sh", binary, "serve", "--backend", backend, "--", toy],
        env={**os.environ, "MCP_CODE_MODE_LOG": "warn"},
    )
    results = {}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            warm = await session.call_tool("run_python", {"code": "print('warm')"})
            if warm.is_error:
                raise RuntimeError("".join(getattr(c, "text", "") for c in warm.content))
            for name, code in CASES.items():
                times = []
                for _ in range(runs):
                    start = time.perf_counter()
                    result = await session.call_tool("run_python", {"code": code})
                    times.append(time.perf_counter() - start)
                    if result.is_error:
                        raise RuntimeError(f"{name}: {result.content}")
                results[name] = times
            peak = peak_kib(serve_pid(pid_file))
    return results, peak


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "release", "mcp-code-mode")
    toy = os.path.join(target, "release", "examples", "toy_server")
    table = {}
    for backend in ("native", "docker"):
        try:
            table[backend] = asyncio.run(bench_backend(binary, toy, backend, runs))
        except Exception as e:  # a backend this host cannot run is reported, not timed
            print(f"{backend}: not measured ({type(e).__name__}: {str(e)[:200]})", file=sys.stderr)
    print(f"{runs} runs per case; latency of one run_python call as the MCP client sees it\n")
    print(f"{'case':26} {'native median':>14} {'native p90':>11} {'docker median':>14} {'docker p90':>11} {'docker/native':>14}")
    for name in CASES:
        row = [f"{name:26}"]
        medians = {}
        for backend in ("native", "docker"):
            if backend in table:
                times = sorted(table[backend][0][name])
                medians[backend] = statistics.median(times)
                p90 = times[int(len(times) * 0.9) - 1]
                row.append(f"{medians[backend] * 1000:12.1f}ms {p90 * 1000:9.1f}ms")
            else:
                row.append(f"{'-':>14} {'-':>11}")
        ratio = medians["docker"] / medians["native"] if len(medians) == 2 else None
        row.append(f"{ratio:13.2f}x" if ratio else f"{'-':>14}")
        print(" ".join(row))
    print()
    for backend, (_, peak) in table.items():
        print(f"serve peak memory ({backend}): {peak / 1024:.1f} MiB" if peak else f"serve peak memory ({backend}): unknown")


main()
