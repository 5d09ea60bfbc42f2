# Prepended to every probe by tests/suite/probes/verdict.rs, after two assignments:
#   PROBE = "<class>/<name>"   the probe's file, without .py
#   HOST = {...}               facts about the host the probe must NOT reach (see tests/suite/probes/host_facts.rs)
# A probe performs one hostile attempt (plus its positive control) and calls report() once.
# Outcomes: "denied" (errno: the error's name, or null when nothing was there to take),
# "allowed" (the attempt worked: a hole, unless the probe is a positive control),
# "killed" (errno: the signal's name), "started" (judged on the host after the run).
import ctypes
import errno as _errno
import json
import os
import signal as _signal
import subprocess
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
PYTHON = "/usr/bin/python3"


def ename(code):
    """errno number -> name ("EPERM"), or the number as text when it has no name."""
    return _errno.errorcode.get(code, str(code))


def sys_call(nr, *args):
    """A raw syscall through libc; the result, or an OSError with the errno."""
    words = [ctypes.c_ulong(a & (1 << 64) - 1) if isinstance(a, int) else a for a in args]
    ctypes.set_errno(0)
    result = libc.syscall(ctypes.c_long(nr), *words)
    if result == -1:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))
    return result


def attempt(f, *args):
    """("allowed", None) when f(*args) works, ("denied", "ENAME") when it raises OSError."""
    try:
        f(*args)
        return "allowed", None
    except OSError as e:
        return "denied", ename(e.errno) if e.errno else type(e).__name__


def attempt_all(calls):
    """Every (f, args...) in calls must fail: "allowed" with the first that worked, else
    "denied" with the distinct errno names joined by "|"."""
    names = []
    for f, *args in calls:
        outcome, name = attempt(f, *args)
        if outcome == "allowed":
            return "allowed", getattr(f, "__name__", str(f)) + repr(tuple(args))[:80]
        if name not in names:
            names.append(name)
    return "denied", "|".join(sorted(names))


def check(name, condition):
    """For controls: "ok", or what failed."""
    return "ok" if condition else "failed: " + name


def control_socketpair():
    import socket

    a, b = socket.socketpair()
    a.sendall(b"ping")
    ok = b.recv(4) == b"ping"
    a.close()
    b.close()
    return check("socketpair", ok)


def control_tmp_file():
    path = "/tmp/.probe-control-%d" % os.getpid()
    with open(path, "w") as f:
        f.write("x")
    ok = open(path).read() == "x"
    os.unlink(path)
    return check("temp file in /tmp", ok)


def control_subprocess():
    r = subprocess.run([PYTHON, "-I", "-S", "-c", "print(6 * 7)"], capture_output=True)
    return check("subprocess of the rootfs python", r.stdout == b"42\n")


def control_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(7)
    return check("fork", os.waitpid(pid, 0)[1] == 7 << 8)


def run_child(code, timeout=30):
    """Runs `code` in a subprocess of the rootfs python (with this prelude's helpers).
    Returns (returncode, stdout text)."""
    src = PRELUDE_SOURCE + "\n" + code
    r = subprocess.run(
        [PYTHON, "-I", "-S", "-c", src], capture_output=True, timeout=timeout
    )
    return r.returncode, r.stdout.decode(errors="replace")


def runner_fds():
    """The runner's private descriptors: {"PROTO_IN": 3, "PROTO_OUT": 4, "DIAG": 5}, as its
    module code_mode_runner.channel holds them."""
    channel = sys.modules["code_mode_runner.channel"]
    return {k: getattr(channel, k) for k in ("PROTO_IN", "PROTO_OUT", "DIAG")}


def send_raw(data):
    """Writes `data` on the protocol pipe to the host, as a line of the runner's would go."""
    fd = runner_fds()["PROTO_OUT"]
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def report(outcome, errno=None, **extra):
    line = {"probe": PROBE, "outcome": outcome, "errno": errno}
    line.update(extra)
    print(json.dumps(line, sort_keys=True))
