"""Benchmark: what one run_python call costs, every way we can start a sandbox, side by side.

Usage: scripts/bench [RUNS]   (default 100 runs per row)

One invocation measures, on this machine and at this load:
- `print(1)` end to end through `mcp-code-mode serve` with the Python SDK client: p50, p90
  and p99 over RUNS runs for native pooled, native cold (`--pool 0`), Docker pooled and
  Docker cold (one container per call), and bare bubblewrap + python on the same rootfs
  (runner.py doing the same start and cell, no serve: the floor of a cold start) when bwrap
  is installed; each with its ratio to native pooled. Native cold and bubblewrap runs are
  taken in turn, one of each, so their ratio compares the two under the same load. Pooled rows wait between runs until
  the pool has refilled (serve logs each ready sandbox), so they time a warm take; the
  back-to-back row times runs that come faster than the pool refills.
- four runs at once (native pooled), p50/p90/p99 of the time until all four are done;
- the bridge: 1,000 sequential `echo` calls from one run, and 1,000 under asyncio.gather
  (timed inside the sandbox after WARMUP untimed calls), against the same toy server called
  directly by a Rust rmcp client (examples/echo_client.rs, the client the bridge uses: the
  baseline, which makes the same warm-up calls) and by the Python SDK client; the bridge's
  own share is a run's time per call minus the Rust client's. The judged runs come from a
  serve with `--pool 0`, so no sandbox starts beside their timed calls (a run's own sandbox
  starts before its code and timer do, and each run's sandbox has ended before the next
  thing is timed). ROUNDS rounds of (run, Rust client) are taken in turn, the order flipping
  each round; each round gives one share, and the target is judged on the median share (min
  and max and every round's share are shown, so one disturbed run neither hides nor decides
  it). Each round also times, not judged, the sequential calls of a pooled run (`--pool 1`),
  whose replacement sandbox starts beside it once it outlasts the pool's refill wait;
- memory: serve's RSS (and peak), and each idle pooled sandbox: the runner's RSS, the RSS
  and PSS of its processes (native: runner and launcher; docker: the container's), and its
  cgroup's memory usage;
- steering, on each backend with `--pool 0`: how soon a cancelled run's slot is free (from
  the client's cancel until the run's sandbox is gone as the host sees it: native, its
  launcher and every process in it ended and its cgroups removed; Docker, the container's
  processes ended), and how soon `serve` exits once its client leaves mid-run (from closing
  its stdin to the process ending).
The result goes to stdout as Markdown tables ready for the README: the machine named (CPUs,
kernel, load average at the start and the end), the rows above, the bridge, steering, the
memory, and each target (README, "Speed") with whether it was met. Progress goes to stderr.
Nothing here fails on a miss. Run it on an idle machine: every other process competes for
the same cores (it waits, at most 90 s, for the CPUs to be idle before the first row).
"""

import asyncio
import atexit
import json
import os
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
# Calls each side makes before its timer starts, as examples/echo_client.rs does: the first
# calls of a process pay for code paths, caches and allocations the steady state does not.
WARMUP = 20
# Rounds of (one run's 1,000 calls, one Rust-direct run's 1,000 calls); the bridge's figures are
# the medians over the rounds, so one disturbed run does not decide the target. A round's share
# swings by +-100 us on a shared VM (the two sides are timed a second apart), so fifteen rounds:
# the median of nine still moved by ~30 us between two runs of one build.
ROUNDS = 15
_WARM = f"for i in range({WARMUP}):\n    await echo({{'text': 'x'}})\n"
SEQUENTIAL = (
    f"import time\n{_WARM}"
    f"t = time.perf_counter()\nfor i in range({CALLS}):\n    await echo({{'text': 'x'}})\n"
    "print(time.perf_counter() - t)"
)
GATHERED = (
    f"import asyncio, time\n{_WARM}"
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


def descendants(pid):
    """Every process below `pid`: its children, theirs, and so on."""
    found, todo = [], [pid]
    while todo:
        for child in children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def names_container(argv, name, cid):
    """Whether a command line names the container `name` (full id `cid`): as an argument, or
    as a flag's value (`--name=NAME`)."""
    return any(a in (name, cid, cid[:12]) or a.endswith("=" + name) for a in argv)


def status_kib(pid, field):
    """A `field: N kB` line of /proc/PID/status, KiB (None when the process is gone)."""
    return kib_field(f"/proc/{pid}/status", field)


def pss_kib(pid):
    """Proportional set size: the process's own pages plus its share of pages it shares
    (the binary, libraries, the rootfs's files) with other processes, KiB."""
    return kib_field(f"/proc/{pid}/smaps_rollup", "Pss")


def parent(pid):
    """The parent's pid, from /proc/PID/status (None when the process is gone)."""
    return kib_field(f"/proc/{pid}/status", "PPid")


def kib_field(path, field):
    """The number of the first `field: N kB` line of `path`, KiB (None if unreadable or absent)."""
    try:
        with open(path) as f:
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


_SCRATCH = []


def scratch():
    """This invocation's one temporary directory (each serve's log and pid file go below it),
    removed when the benchmark exits."""
    if not _SCRATCH:
        _SCRATCH.append(tempfile.mkdtemp(prefix="mcp-code-mode-bench-"))
        atexit.register(shutil.rmtree, _SCRATCH[0], True)
    return _SCRATCH[0]


class Serve:
    """One `serve` under the Python SDK client; its log goes to a file we can watch."""

    def __init__(self, binary, toy, backend, pool, extra=(),
                 log_filter="warn,mcp_code_mode::run::pool=info"):
        self.dir = tempfile.mkdtemp(dir=scratch())
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


def exited(pid):
    """Whether `pid` has ended (gone, or a zombie not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def running_sandbox(serve):
    """What shows that serve's one running sandbox still exists: a function that is true
    while it does. Native: its launcher has not ended or a cgroup of it is still there (the
    run's sandbox is gone when every process of it has ended and its cgroups are removed).
    Docker: the container's first process has not ended (the container's processes share
    its pid namespace and end with it; `docker rm` follows in the background)."""
    if serve.backend == "native":
        launchers = [c for c in children(serve.pid()) if "__launcher" in cmdline(c)]
        if len(launchers) != 1:
            raise RuntimeError(f"expected one running sandbox, found {len(launchers)} launchers")
        launcher = launchers[0]
        argv = cmdline(launcher)
        cgroups = [os.path.dirname(argv[i + 1]) for i, a in enumerate(argv) if a == "--cgroup-procs"]
        return lambda: not exited(launcher) or any(os.path.exists(c) for c in cgroups)
    names = subprocess.run(
        ["docker", "ps", "--format", "{{.Names}}", "--filter", f"name=mcp-code-mode-{serve.pid()}-"],
        capture_output=True, text=True).stdout.split()
    if len(names) != 1:
        raise RuntimeError(f"expected one running container, found {names}")
    pid = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", names[0]],
                             capture_output=True, text=True).stdout.strip() or 0)
    if pid <= 0:
        raise RuntimeError(f"container {names[0]} has no process")
    return lambda: not exited(pid)


async def time_steering(binary, toy, backend, reps):
    """Seconds from a cancel to the run's sandbox being gone, `reps` times, and from the
    client leaving mid-run to serve's exit, `reps` times."""
    serve = Serve(binary, toy, backend, 0)

    async def cancels(session):
        freed = []
        for i in range(reps):
            task = asyncio.create_task(session.call_tool("run_python", {"code": SLEEPER}))
            await asyncio.sleep(2.0)  # the sandbox has started and sleeps
            alive = running_sandbox(serve)
            cancelled = time.perf_counter()
            task.cancel()  # the SDK sends notifications/cancelled
            try:
                await task
            except BaseException:
                pass
            limit = cancelled + 15
            while alive() and time.perf_counter() < limit:
                await asyncio.sleep(0.0005)
            if alive():
                raise RuntimeError("a cancelled run's sandbox was still there after 15 s")
            freed.append(time.perf_counter() - cancelled)
        return freed

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
    """Memory of each idle pooled sandbox: {"rss", "pss"} (KiB, its processes summed: the
    runner and, native, the launcher that waits for it), "runner_rss" (KiB) and "cgroup"
    (bytes, its cgroup's usage)."""
    found = []
    if serve.backend == "native":
        for launcher in children(serve.pid()):
            if "__launcher" not in cmdline(launcher):
                continue
            for runner in children(launcher):
                pids = [runner, launcher]
                found.append({
                    "runner_rss": status_kib(runner, "VmRSS"),
                    "rss": sum(status_kib(p, "VmRSS") or 0 for p in pids),
                    "pss": sum(pss_kib(p) or 0 for p in pids),
                    "cgroup": cgroup_memory(runner),
                })
    else:
        listed = subprocess.run(
            ["docker", "ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}", "--filter",
             f"name=mcp-code-mode-{serve.pid()}-"],
            capture_output=True, text=True).stdout.splitlines()
        held = descendants(serve.pid())
        for line in listed:
            cid, name = line.split()
            top = subprocess.run(["docker", "top", name, "-o", "pid"], capture_output=True, text=True)
            pids = [int(p) for p in top.stdout.split()[1:] if p.isdigit()]
            rss = sum(status_kib(p, "VmRSS") or 0 for p in pids)
            # What the host keeps for it while it idles: any process of serve's that names
            # the container (a client attached to its stdio, such as a `docker run`,
            # `docker start -a` or `docker attach`; serve itself attaches over the Engine
            # API, in its own process), and the containerd shim that is the parent of its
            # first process.
            host = [c for c in held if c not in pids and names_container(cmdline(c), name, cid)]
            if pids:
                shim = parent(pids[0])
                if shim:
                    host.append(shim)
            found.append({
                "runner_rss": None,
                "rss": rss,
                "pss": sum(pss_kib(p) or 0 for p in pids),
                "host_pss": sum(pss_kib(p) or 0 for p in host),
                "host_processes": len(host),
                "cgroup": cgroup_memory(pids[0]) if pids else None,
            })
    return found


async def bridge_rounds(binary, toy, client):
    """ROUNDS rounds, each one run's sequential and gathered calls beside one Rust-direct run
    (examples/echo_client.rs), taken in turn (the order flips each round) so both sides of a
    round's difference see the same load; then, not judged, one pooled run's sequential calls.
    Returns [(bridge (seq_s, gat_s), rust (seq_s, gat_s), pooled seq_s)].

    The judged runs come from a serve with `--pool 0`: each run's sandbox starts before its
    code does, so its timer (inside the code) starts with no sandbox starting beside it, as the
    Rust client's has none. A pooled run (`--pool 1`) gets its replacement started beside it
    once it outlasts the pool's refill wait (500 ms); that is shown in its own row. Each run
    is left to end (and the pool to refill) before the next thing is timed."""
    cold = Serve(binary, toy, "native", 0)
    pooled = Serve(binary, toy, "native", 1)

    async def settled():
        # The last judged run's sandbox has ended (its launcher is gone), so its ending does
        # not compete with what is timed next.
        start = time.monotonic()
        while any("__launcher" in cmdline(c) for c in children(cold.pid())):
            if time.monotonic() - start > 10:
                raise RuntimeError("a finished run's sandbox did not end")
            await asyncio.sleep(0.005)

    async def bridge_run(session):
        await settled()
        seq = float((await call(session, SEQUENTIAL)).structured_content["stdout"])
        await settled()
        gat = float((await call(session, GATHERED)).structured_content["stdout"])
        await settled()
        return seq, gat

    async def body(cold_session, pooled_session):
        rounds = []
        for r in range(ROUNDS):
            if r % 2 == 0:
                bridge = await bridge_run(cold_session)
                rust = await asyncio.to_thread(rust_direct_costs, client, toy)
            else:
                rust = await asyncio.to_thread(rust_direct_costs, client, toy)
                bridge = await bridge_run(cold_session)
            await pooled.wait_ready(r + 1)
            seq = float((await call(pooled_session, SEQUENTIAL)).structured_content["stdout"])
            await pooled.wait_ready(r + 2)
            rounds.append((bridge, rust, seq))
        return rounds

    return await serve_session(
        cold, lambda cold_session: serve_session(
            pooled, lambda pooled_session: body(cold_session, pooled_session)))


def share_us(bridge, rust):
    """The bridge's own share of one sequential call in us: a run's time per call minus the
    Rust client's."""
    return (bridge[0] - rust[0]) / CALLS * 1e6


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


def rust_direct_costs(client, toy):
    """The same calls from a Rust rmcp client (examples/echo_client.rs), no sandbox, no bridge."""
    out = subprocess.run([client, toy, str(CALLS)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-300:])
    measured = json.loads(out.stdout.strip().splitlines()[-1])
    return measured["sequential_s"], measured["gathered_s"]


def bwrap_command(launcher_cmdline):
    """bwrap running the launcher's program on the launcher's rootfs, every namespace unshared:
    (argv, None), or (None, why not)."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        return None, "not installed"
    if not launcher_cmdline:
        return None, "no native sandbox to copy the rootfs from"
    rootfs = launcher_cmdline[launcher_cmdline.index("--rootfs") + 1]
    argv = launcher_cmdline[launcher_cmdline.index("--") + 1:]
    return [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", rootfs, "/",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--clearenv", "--", *argv], None


async def bwrap_once(command):
    """runner.py under bare bubblewrap: spawn, start, cell `print(1)`, done, exit. Seconds."""
    start_line = json.dumps({"type": "start", "tools": [], "limits": {}}) + "\n"
    cell_line = json.dumps({"type": "cell", "code": PRINT1}) + "\n"
    t = time.perf_counter()
    p = await asyncio.create_subprocess_exec(
        *command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdin.write((start_line + cell_line).encode())
    await p.stdin.drain()
    done = None
    while line := await p.stdout.readline():
        msg = json.loads(line)
        if msg["type"] == "done":
            done = msg
            break
    p.stdin.close()
    await p.wait()
    elapsed = time.perf_counter() - t
    if not done or done["stdout"] != "1\n":
        raise RuntimeError(f"failed: {(await p.stderr.read()).decode()[:200]}")
    return elapsed


async def time_cold_beside_bwrap(binary, toy, launcher_cmdline, runs):
    """Native cold runs through serve (`--pool 0`) and bare bubblewrap runs, taken in turn
    (one of each, `runs` times), so both rows see the same machine: a cold start is tens of
    milliseconds of CPU on two cores, and whatever else runs meanwhile (a build finishing,
    the previous row's containers being removed) would otherwise land on one row only.
    Returns (native row, bubblewrap times or None, why not)."""
    command, why = bwrap_command(launcher_cmdline)
    serve = Serve(binary, toy, "native", 0)

    async def body(session):
        native, pooled, bw = [], 0, []
        for i in range(runs + 3):
            start = time.perf_counter()
            result = await call(session, PRINT1)
            elapsed = time.perf_counter() - start
            if command:
                bw.append(await bwrap_once(command))
            if i < 3:  # the first runs of a new serve warm the page cache for both
                continue
            native.append(elapsed)
            pooled += bool((result.meta or {}).get("mcp-code-mode/pooled"))
        return (native, {"pooled": pooled}), bw[3:] or None

    native, bw = await serve_session(serve, body)
    return native, bw, why


def cpu_busy(interval=1.0):
    """The fraction of all CPUs' time spent busy over `interval` seconds (/proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return sum(fields), idle

    total0, idle0 = sample()
    time.sleep(interval)
    total1, idle1 = sample()
    return 1 - (idle1 - idle0) / max(1, total1 - total0)


def wait_idle(limit=90, busy=0.15):
    """Wait (at most `limit` s) until the CPUs are under `busy` for a whole second, so what the
    build before us left running (the linker, cargo) is not timed as ours. Returns the last
    busy fraction seen."""
    end = time.monotonic() + limit
    seen = cpu_busy()
    while seen >= busy and time.monotonic() < end:
        seen = cpu_busy()
    return seen


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
    return f"{os.cpu_count()} CPUs ({model}), Linux {os.uname().release}"


def mib(kib):
    return f"{kib / 1024:.1f}" if kib else "?"


ORDER = ["native pooled", "native cold (--pool 0)", "docker pooled", "docker cold (--pool 0)",
         "bubblewrap + python, no serve", "native back to back, --pool 4",
         "native, 4 runs at once (all done)"]


def print_table(runs, rows, notes, rounds, direct, steering, start_load):
    """The README-ready result: Markdown tables, the machine named, targets checked."""
    base = statistics.median(rows["native pooled"][0]) if "native pooled" in rows else None
    print(f"\nMeasured by `scripts/bench {runs}` on {machine()}; load average "
          f"{start_load} at the start, {load()} at the end.\n")
    print(f"| `print(1)` through `serve`, Python SDK client, {runs} runs a row | p50 ms | p90 ms "
          "| p99 ms | x native pooled | note |")
    print("|---|---:|---:|---:|---:|---|")
    for name in ORDER:
        if name in rows:
            times, extra = rows[name]
            ratio = f"{statistics.median(times) / base:.1f}" if base else "-"
            note = f"{extra['pooled']}/{len(times)} pooled" if "pooled" in extra else ""
            print(f"| {name} | {ms(pct(times, 50))} | {ms(pct(times, 90))} | {ms(pct(times, 99))} "
                  f"| {ratio} | {note} |")
        else:
            print(f"| {name} | - | - | - | - | {notes.get(name, '')} |")

    print(f"\n| the bridge: {CALLS:,} `echo` calls to the toy server, {len(rounds or [])} rounds "
          "| us per sequential call: median (min to max) | calls/s gathered: median (min to max) |")
    print("|---|---:|---:|")

    def spread(values):
        return f"{statistics.median(values):.0f} ({min(values):.0f} to {max(values):.0f})"

    if rounds:
        for name, side in (("from a run (runner.py, the bridge, rmcp; `--pool 0`)", 0),
                           ("Rust rmcp client, direct (the baseline)", 1)):
            seq = [r[side][0] / CALLS * 1e6 for r in rounds]
            gat = [CALLS / r[side][1] for r in rounds]
            print(f"| {name} | {spread(seq)} | {spread(gat)} |")
    if rounds:
        seq = [r[2] / CALLS * 1e6 for r in rounds]
        print("| not judged: from a pooled run (`--pool 1`; the replacement sandbox starts beside "
              f"it once the run outlasts 500 ms) | {spread(seq)} | |")
    if direct:
        print(f"| Python SDK client, direct (one run) | {direct[0] / CALLS * 1e6:.0f} | "
              f"{CALLS / direct[1]:.0f} |")
    if rounds:
        shares = [share_us(r[0], r[1]) for r in rounds]
        print(f"| the bridge's own share (a run minus the Rust client in the same round) | "
              f"{spread(shares)} | |")
        print(f"| the share in each round, in order | {', '.join(f'{v:.0f}' for v in shares)} | |")
    for key in ("bridge", "direct"):
        if key in notes:
            print(f"| {key}: {notes[key]} | | |")

    print("\n| steering (`--pool 0`) | p50 ms | max ms |")
    print("|---|---:|---:|")
    for backend, (freed, exits) in steering.items():
        for what, times in ((f"a cancel until the run's sandbox is gone ({len(freed)} cancels)",
                             freed),
                            (f"the client leaves mid-run until serve has exited ({len(exits)} runs)",
                             exits)):
            if times:
                print(f"| {backend}: {what} | {ms(pct(times, 50))} | {ms(max(times))} |")
            else:
                print(f"| {backend}: {what} | - | - |")
    for key in ("steering native", "steering docker"):
        if key in notes:
            print(f"| {key}: {notes[key]} | | |")

    print("\n| memory | MiB |")
    print("|---|---|")
    for name in ("native pooled", "docker pooled"):
        if name not in rows:
            continue
        extra = rows[name][1]
        backend = name.split()[0]
        print(f"| `serve` ({backend}, pool of 4): RSS, peak | {mib(extra['serve_rss'])}, "
              f"{mib(extra['serve_hwm'])} |")
        members = extra["memory"]
        what = "runner + launcher" if backend == "native" else "the container's processes"

        def each(key, scale=1):
            return ", ".join(mib(m[key] / scale) if m[key] else "?" for m in members)

        if backend == "native":
            print(f"| each idle pooled sandbox (native): runner RSS | {each('runner_rss')} |")
        print(f"| each idle pooled sandbox ({backend}): RSS of {what} | {each('rss')} |")
        print(f"| each idle pooled sandbox ({backend}): PSS of {what} | {each('pss')} |")
        if backend == "docker":
            counts = ", ".join(str(m["host_processes"]) for m in members)
            print("| each idle pooled sandbox (docker): PSS of the host processes kept for it "
                  f"(clients attached to it, containerd shim; {counts} process(es)) | "
                  f"{each('host_pss')} |")
        print(f"| each idle pooled sandbox ({backend}): cgroup memory usage | "
              f"{each('cgroup', 1024)} |")

    print("\n| target | measured | met |")
    print("|---|---|---|")

    def target(what, value, ok):
        print(f"| {what} | {value} | {'yes' if ok else 'NO'} |")

    if "native pooled" in rows:
        times = rows["native pooled"][0]
        target("native pooled p50 <= 5 ms", f"{ms(pct(times, 50))} ms", pct(times, 50) <= 0.005)
        target("native pooled p99 <= 15 ms", f"{ms(pct(times, 99))} ms", pct(times, 99) <= 0.015)
    if base and "docker cold (--pool 0)" in rows:
        ratio = statistics.median(rows["docker cold (--pool 0)"][0]) / base
        target("native pooled >= 50x faster than docker cold", f"{ratio:.0f}x", ratio >= 50)
    if "native cold (--pool 0)" in rows and "bubblewrap + python, no serve" in rows:
        ratio = statistics.median(rows["native cold (--pool 0)"][0]) / statistics.median(
            rows["bubblewrap + python, no serve"][0])
        target("native cold <= 1.2x bare bubblewrap", f"{ratio:.2f}x", ratio <= 1.2)
    if rounds:
        share = statistics.median(share_us(r[0], r[1]) for r in rounds)
        target("the bridge adds <= 100 us per sequential call (median of the rounds)",
               f"{share:.0f} us", share <= 100)
        rate = statistics.median(CALLS / r[0][1] for r in rounds)
        target(">= 5,000 calls/s gathered (median of the rounds)", f"{rate:.0f}/s", rate >= 5000)
    for backend, (freed, exits) in steering.items():
        if freed:
            target(f"{backend}: a cancelled run's slot free <= 100 ms after the cancel",
                   f"{ms(max(freed))} ms (max)", max(freed) <= 0.1)
        if exits:
            target(f"{backend}: serve exited <= 1 s after its client left",
                   f"{ms(max(exits))} ms (max)", max(exits) <= 1.0)
    for name in ("native pooled", "docker pooled"):
        if name not in rows:
            continue
        # What a sandbox takes: its processes' PSS (pages shared with other sandboxes and
        # serve counted by share) with the host processes kept for it (Docker: the shim and
        # any client process attached to it; natively the launcher is one of its processes), or its
        # cgroup's usage when that is larger.
        worst = 0.0
        for member in rows[name][1]["memory"]:
            own = ((member["pss"] or 0) + (member.get("host_pss") or 0)) * 1024
            worst = max(worst, own, member["cgroup"] or 0)
        target(f"one idle pooled sandbox ({name.split()[0]}) <= 20 MiB",
               f"{worst / 2**20:.1f} MiB (largest)", 0 < worst <= 20 * 2**20)


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    binary = os.path.join(target, "release", "mcp-code-mode")
    toy = os.path.join(target, "release", "examples", "toy_server")
    client = os.path.join(target, "release", "examples", "echo_client")
    busy = wait_idle()
    start_load = load()
    print(f"CPUs {busy:.0%} busy before the first row", file=sys.stderr, flush=True)
    print(f"machine: {machine()}; load average at start: {start_load}", file=sys.stderr, flush=True)

    rows, notes = {}, {}

    def measure(name, work):
        try:
            rows[name] = asyncio.run(work)
        except Exception as e:  # a backend this host cannot run is reported, not timed
            notes[name] = f"not measured ({type(e).__name__}: {str(e)[:160]})"
        print(f"  measured {name} (load {load()})", file=sys.stderr, flush=True)

    measure("native pooled", time_print1(binary, toy, "native", 4, runs))
    launcher = rows.get("native pooled", (None, {}))[1].get("launcher")
    try:
        cold, bw, why = asyncio.run(time_cold_beside_bwrap(binary, toy, launcher, runs))
        rows["native cold (--pool 0)"] = cold
        if bw:
            rows["bubblewrap + python, no serve"] = (bw, {})
        else:
            notes["bubblewrap + python, no serve"] = why
    except Exception as e:
        notes["native cold (--pool 0)"] = f"not measured ({type(e).__name__}: {str(e)[:160]})"
    print(f"  measured native cold beside bubblewrap (load {load()})", file=sys.stderr, flush=True)
    measure("docker pooled", time_print1(binary, toy, "docker", 4, runs))
    measure("docker cold (--pool 0)", time_print1(binary, toy, "docker", 0, runs))
    measure("native back to back, --pool 4", time_back_to_back(binary, toy, 4, runs))
    measure("native, 4 runs at once (all done)", time_four_at_once(binary, toy, max(10, runs // 4)))

    def costs(key, work):
        try:
            return work()
        except Exception as e:
            notes[key] = f"not measured ({type(e).__name__}: {str(e)[:160]})"
            return None

    rounds = costs("bridge", lambda: asyncio.run(bridge_rounds(binary, toy, client)))
    direct = costs("direct", lambda: asyncio.run(direct_costs(toy)))
    print("  measured the bridge", file=sys.stderr, flush=True)

    steering = {}
    for backend in ("native", "docker"):
        got = costs(f"steering {backend}", lambda: asyncio.run(
            time_steering(binary, toy, backend, max(5, runs // 10))))
        if got:
            steering[backend] = got
    print("  measured steering", file=sys.stderr, flush=True)

    print_table(runs, rows, notes, rounds, direct, steering, start_load)


main()
