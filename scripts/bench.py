"""Benchmark: what one run_python call costs, every way we can start a sandbox, side by side.

Usage: scripts/bench [RUNS]   (default 100 runs per row)

One invocation measures, on this machine and at this load:
- `print(1)` end to end through `mcp-code-mode serve` with the Python SDK client: p50, p90
  and p99 over RUNS runs for native pooled, native cold (`--pool 0`), Docker pooled and
  Docker cold (one `docker run` per call), and bare bubblewrap + python on the same rootfs
  (runner.py doing the same start and cell, no serve: the floor of a cold start) when bwrap
  is installed; each with its ratio to native pooled. Pooled rows wait between runs until
  the pool has refilled (serve logs each ready sandbox), so they time a warm take; the
  back-to-back row times runs that come faster than the pool refills.
- four runs at once (native pooled), p50/p90/p99 of the time until all four are done;
- the bridge: 1,000 sequential `echo` calls from one run, and 1,000 under asyncio.gather
  (timed inside the sandbox), against the same toy server called directly by the Python
  SDK client (the baseline); the bridge's own share is the difference per call;
- memory: serve's RSS (and peak), and each idle pooled sandbox (runner RSS, launcher RSS,
  and the cgroup's memory usage; docker: the container's usage);
- steering, on each backend with `--pool 0`: how soon a cancelled run's slot is free
  (serve's own log line, from the cancel to the sandbox gone), and how soon `serve` exits
  once its client leaves mid-run (from closing its stdin to the process ending).
Targets are printed beside the numbers; nothing here fails on a miss.
"""

import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

PRINT1 = "print(1)"
CALLS = 1000
SEQUENTIAL = (
    "import time\n"
    f"t = time.perf_counter()\nfor i in range({CALLS}):\n    await echo({{'text': 'x'}})\n"
    "print(time.perf_counter() - t)"
)
GATHERED = (
    "import asyncio, time\n"
    f"t = time.perf_counter()\nawait asyncio.gather(*(echo({{'text': 'x'}}) for i in range({CALLS})))\n"
    "print(time.perf_counter() - t)"
)


def pct(times, p):
    times = sorted(times)
    return times[min(len(times) - 1, max(0, round(p / 100 * len(times)) - 1))]


def ms(t):
    return f"{t * 1000:.1f}"


def children(pid):
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return found


def status_kib(pid, field):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode() for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def cgroup_memory(pid):
    """memory.usage_in_bytes (v1) or memory.current (v2) of `pid`'s cgroup, bytes."""
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            file = f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes"
        elif controllers == "":
            file = f"/sys/fs/cgroup{path}/memory.current"
            if not os.path.exists(file):
                file = f"/sys/fs/cgroup/unified{path}/memory.current"
        else:
            continue
        try:
            with open(file) as f:
                return int(f.read())
        except OSError:
            continue
    return None


class Serve:
    """One `serve` under the Python SDK client; its log goes to a file we can watch."""

    def __init__(self, binary, toy, backend, pool, extra=(),
                 log_filter="warn,mcp_code_mode::run::pool=info"):
        self.dir = tempfile.mkdtemp(prefix="mcp-code-mode-bench-")
        self.pid_file = os.path.join(self.dir, "pid")
        self.log = os.path.join(self.dir, "log")
        self.backend = backend
        self.params = StdioServerParameters(
            command="sh",
            args=["-c", f'echo $$ > {self.pid_file}; exec "$@"', "sh", binary, "serve",
                  "--backend", backend, "--pool", str(pool), "--max-calls", "5000", *extra, "--", toy],
            env={**os.environ, "MCP_CODE_MODE_LOG": log_filter},
        )

    def pid(self):
        with open(self.pid_file) as f:
            return int(f.read().strip())

    def ready_count(self):
        try:
            with open(self.log) as f:
                return f.read().count("pooled sandbox ready")
        except OSError:
            return 0

    async def wait_ready(self, count, limit=120):
        start = time.monotonic()
        while self.ready_count() < count:
            if time.monotonic() - start > limit:
                raise RuntimeError(f"the pool did not refill ({self.ready_count()} < {count})")
            await asyncio.sleep(0.005)


async def call(session, code):
    result = await session.call_tool("run_python", {"code": code})
    if result.is_error:
        raise RuntimeError("".join(getattr(c, "text", "") for c in result.content)[:300])
    return result


async def serve_session(serve, body):
    with open(serve.log, "w") as log:
        async with stdio_client(serve.params, errlog=log) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


async def time_print1(binary, toy, backend, pool, runs):
    """p-times of print(1); pooled rows wait for the refill before each run."""
    serve = Serve(binary, toy, backend, pool)

    async def body(session):
        times, pooled = [], 0
        for i in range(runs):
            if pool:
                await serve.wait_ready(pool + i)
            start = time.perf_counter()
            result = await call(session, PRINT1)
            times.append(time.perf_counter() - start)
            pooled += bool((result.meta or {}).get("mcp-code-mode/pooled"))
        extra = {"pooled": pooled}
        if pool:
            await serve.wait_ready(pool + runs)
            extra["memory"] = sandbox_memory(serve)
            extra["serve_rss"] = status_kib(serve.pid(), "VmRSS")
            extra["serve_hwm"] = status_kib(serve.pid(), "VmHWM")
            if backend == "native":
                extra["launcher"] = next(
                    (cmdline(c) for c in children(serve.pid()) if "__launcher" in cmdline(c)), None)
        return times, extra

    return await serve_session(serve, body)


async def time_back_to_back(binary, toy, pool, runs):
    serve = Serve(binary, toy, "native", pool)

    async def body(session):
        await serve.wait_ready(pool)
        times, pooled = [], 0
        for _ in range(runs):
            start = time.perf_counter()
            result = await call(session, PRINT1)
            times.append(time.perf_counter() - start)
            pooled += bool((result.meta or {}).get("mcp-code-mode/pooled"))
        return times, {"pooled": pooled}

    return await serve_session(serve, body)


async def time_four_at_once(binary, toy, reps):
    serve = Serve(binary, toy, "native", 4)

    async def body(session):
        times = []
        for i in range(reps):
            await serve.wait_ready(4 + 4 * i)
            start = time.perf_counter()
            await asyncio.gather(*(call(session, PRINT1) for _ in range(4)))
            times.append(time.perf_counter() - start)
        return times, {}

    return await serve_session(serve, body)


SLEEPER = "import time\nprint('up', flush=True)\ntime.sleep(60)"
FREED = re.compile(r"its slot was free (\d+) ms after the cancel")


def exited(pid):
    """Whether `pid` has ended (gone, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


async def time_steering(binary, toy, backend, reps):
    """Milliseconds from a cancel to the run's slot being free (serve's log), `reps` times,
    and from the client leaving mid-run to serve's exit, `reps` times."""
    serve = Serve(binary, toy, backend, 0, log_filter="warn,mcp_code_mode::serve=info")

    async def cancels(session):
        for i in range(reps):
            task = asyncio.create_task(session.call_tool("run_python", {"code": SLEEPER}))
            await asyncio.sleep(2.0)  # the sandbox has started and sleeps
            task.cancel()  # the SDK sends notifications/cancelled
            try:
                await task
            except BaseException:
                pass
            limit = time.monotonic() + 15
            while time.monotonic() < limit:
                with open(serve.log) as f:
                    if len(FREED.findall(f.read())) > i:
                        break
                await asyncio.sleep(0.01)
        with open(serve.log) as f:
            return [int(ms) / 1000 for ms in FREED.findall(f.read())]

    freed = await serve_session(serve, cancels)
    exits = []
    for _ in range(reps):
        leaver = Serve(binary, toy, backend, 0)
        with open(leaver.log, "w") as log:
            async with stdio_client(leaver.params, errlog=log) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    run = asyncio.create_task(session.call_tool("run_python", {"code": SLEEPER}))
                    run.add_done_callback(lambda t: t.cancelled() or t.exception())
                    await asyncio.sleep(2.0)  # the sandbox has started and sleeps
                pid, left = leaver.pid(), time.perf_counter()

                async def until_gone():
                    while not exited(pid):
                        await asyncio.sleep(0.002)
                    return time.perf_counter() - left

                # Leaving stdio_client closes serve's stdin (and gives it 2 s before a
                # SIGTERM); the watch times serve's own exit meanwhile.
                watch = asyncio.create_task(until_gone())
        exits.append(await watch)
    return freed, exits


def sandbox_memory(serve):
    """Memory of each idle pooled sandbox: (runner RSS KiB, launcher RSS KiB, cgroup bytes)."""
    found = []
    if serve.backend == "native":
        for launcher in children(serve.pid()):
            if "__launcher" not in cmdline(launcher):
                continue
            for runner in children(launcher):
                found.append((status_kib(runner, "VmRSS"), status_kib(launcher, "VmRSS"),
                              cgroup_memory(runner)))
    else:
        names = subprocess.run(
            ["docker", "ps", "--format", "{{.Names}}", "--filter", f"name=mcp-code-mode-{serve.pid()}-"],
            capture_output=True, text=True).stdout.split()
        for name in names:
            top = subprocess.run(["docker", "top", name, "-o", "pid"], capture_output=True, text=True)
            pids = [int(p) for p in top.stdout.split()[1:] if p.isdigit()]
            rss = sum(status_kib(p, "VmRSS") or 0 for p in pids)
            usage = cgroup_memory(pids[0]) if pids else None
            found.append((rss, None, usage))
    return found


async def bridge_costs(binary, toy):
    serve = Serve(binary, toy, "native", 1)

    async def body(session):
        await serve.wait_ready(1)
        seq = float((await call(session, SEQUENTIAL)).structured_content["stdout"])
        await serve.wait_ready(2)
        gat = float((await call(session, GATHERED)).structured_content["stdout"])
        return seq, gat

    return await serve_session(serve, body)


async def direct_costs(toy):
    params = StdioServerParameters(command=toy, args=[])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(20):
                await session.call_tool("echo", {"text": "x"})
            t = time.perf_counter()
            for _ in range(CALLS):
                await session.call_tool("echo", {"text": "x"})
            seq = time.perf_counter() - t
            t = time.perf_counter()
            await asyncio.gather(*(session.call_tool("echo", {"text": "x"}) for _ in range(CALLS)))
            gat = time.perf_counter() - t
            return seq, gat


def time_bwrap(launcher_cmdline, runs):
    """runner.py under bare bubblewrap on the same rootfs: spawn, start, cell, done, exit."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None, "not installed"
    if not launcher_cmdline:
        return None, "no native sandbox to copy the rootfs from"
    rootfs = launcher_cmdline[launcher_cmdline.index("--rootfs") + 1]
    argv = launcher_cmdline[launcher_cmdline.index("--") + 1:]
    command = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", rootfs, "/",
               "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv", "--", *argv]
    start_line = json.dumps({"type": "start", "tools": [], "limits": {}}) + "\n"
    cell_line = json.dumps({"type": "cell", "code": PRINT1}) + "\n"
    times = []
    for _ in range(runs + 3):
        t = time.perf_counter()
        p = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdin.write((start_line + cell_line).encode())
        p.stdin.flush()
        done = None
        for line in p.stdout:
            msg = json.loads(line)
            if msg["type"] == "done":
                done = msg
                break
        p.stdin.close()
        p.wait()
        times.append(time.perf_counter() - t)
        if not done or done["stdout"] != "1\n":
            return None, f"failed: {p.stderr.read().decode()[:200]}"
    return times[3:], None


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs ({model}), kernel {os.uname().release}"


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "release", "mcp-code-mode")
    toy = os.path.join(target, "release", "examples", "toy_server")
    print(f"machine: {machine()}; load average at start: {load()}", flush=True)

    rows, notes = {}, {}

    def measure(name, work):
        try:
            rows[name] = asyncio.run(work)
        except Exception as e:  # a backend this host cannot run is reported, not timed
            notes[name] = f"not measured ({type(e).__name__}: {str(e)[:160]})"
        print(f"  measured {name} (load {load()})", file=sys.stderr, flush=True)

    measure("native pooled", time_print1(binary, toy, "native", 4, runs))
    measure("native cold (--pool 0)", time_print1(binary, toy, "native", 0, runs))
    measure("docker pooled", time_print1(binary, toy, "docker", 4, runs))
    measure("docker cold (--pool 0)", time_print1(binary, toy, "docker", 0, runs))
    launcher = rows.get("native pooled", (None, {}))[1].get("launcher")
    bw, why = time_bwrap(launcher, runs)
    if bw:
        rows["bubblewrap + python, no serve"] = (bw, {})
    else:
        notes["bubblewrap + python, no serve"] = why
    measure("native back to back, --pool 4", time_back_to_back(binary, toy, 4, runs))
    measure("native, 4 runs at once (all done)", time_four_at_once(binary, toy, max(10, runs // 4)))

    base = statistics.median(rows["native pooled"][0]) if "native pooled" in rows else None
    print(f"\nprint(1) through serve with the Python SDK client, {runs} runs a row (ms)\n")
    print(f"{'row':36} {'p50':>8} {'p90':>8} {'p99':>8} {'x pooled':>9}  note")
    order = ["native pooled", "native cold (--pool 0)", "docker pooled", "docker cold (--pool 0)",
             "bubblewrap + python, no serve", "native back to back, --pool 4",
             "native, 4 runs at once (all done)"]
    for name in order:
        if name in rows:
            times, extra = rows[name]
            ratio = f"{statistics.median(times) / base:8.1f}x" if base else "-"
            note = f"{extra['pooled']}/{len(times)} pooled" if "pooled" in extra else ""
            print(f"{name:36} {ms(pct(times, 50)):>8} {ms(pct(times, 90)):>8} {ms(pct(times, 99)):>8} {ratio:>9}  {note}")
        else:
            print(f"{name:36} {'-':>8} {'-':>8} {'-':>8} {'-':>9}  {notes.get(name, '')}")

    print("\nthe bridge: 1,000 echo calls to the toy server")
    bridge = direct = None
    try:
        bridge = asyncio.run(bridge_costs(binary, toy))
        direct = asyncio.run(direct_costs(toy))
    except Exception as e:
        print(f"  not measured ({type(e).__name__}: {str(e)[:160]})")
    if bridge and direct:
        (bseq, bgat), (dseq, dgat) = bridge, direct
        print(f"  {'':34} {'us/call sequential':>19} {'calls/s gathered':>17}")
        print(f"  {'from a run (through the bridge)':34} {bseq / CALLS * 1e6:19.0f} {CALLS / bgat:17.0f}")
        print(f"  {'Python SDK client, direct':34} {dseq / CALLS * 1e6:19.0f} {CALLS / dgat:17.0f}")
        print(f"  bridge's own share: {(bseq - dseq) / CALLS * 1e6:.0f} us per sequential call")

    print("\nsteering (--pool 0), ms: p50 / max")
    for backend in ("native", "docker"):
        try:
            freed, exits = asyncio.run(time_steering(binary, toy, backend, max(5, runs // 10)))
            print(f"  {backend:7} cancel -> slot free {ms(pct(freed, 50))} / {ms(max(freed))}"
                  f" ({len(freed)} cancels); client leaves -> serve exited"
                  f" {ms(pct(exits, 50))} / {ms(max(exits))} ({len(exits)} runs)")
        except Exception as e:
            print(f"  {backend:7} not measured ({type(e).__name__}: {str(e)[:160]})")

    print("\nmemory")
    for name in ("native pooled", "docker pooled"):
        if name not in rows:
            continue
        extra = rows[name][1]
        print(f"  serve ({name}): RSS {extra['serve_rss'] / 1024:.1f} MiB, peak {extra['serve_hwm'] / 1024:.1f} MiB")
        for runner, launcher_rss, cgroup in extra["memory"]:
            parts = [f"runner RSS {runner / 1024:.1f} MiB" if runner else "runner RSS ?"]
            if launcher_rss:
                parts.append(f"launcher RSS {launcher_rss / 1024:.1f} MiB")
            parts.append(f"cgroup usage {cgroup / 2**20:.1f} MiB" if cgroup else "cgroup usage ?")
            print(f"  idle pooled sandbox ({name.split()[0]}): " + ", ".join(parts))

    print("\ntargets: native pooled p50 <= 5 ms, p99 <= 15 ms; native pooled >= 50x faster than "
          "docker cold; native cold <= 1.2x bubblewrap; bridge <= 100 us per sequential call and "
          ">= 5,000 calls/s gathered; idle pooled sandbox <= 20 MiB; a cancelled run's slot free "
          "<= 100 ms after the cancel; serve exited <= 1 s after its client left")
    if "native cold (--pool 0)" in rows and "bubblewrap + python, no serve" in rows:
        ratio = statistics.median(rows["native cold (--pool 0)"][0]) / statistics.median(
            rows["bubblewrap + python, no serve"][0])
        print(f"native cold / bubblewrap: {ratio:.2f}x")
    if base and "docker cold (--pool 0)" in rows:
        print(f"docker cold / native pooled: {statistics.median(rows['docker cold (--pool 0)'][0]) / base:.0f}x")
    print(f"load average at the end: {load()}")


main()
