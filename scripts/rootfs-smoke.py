#!/usr/bin/env python3
"""Runs runner.py inside a built rootfs without the launcher, to check the rootfs alone.

Usage: scripts/rootfs-smoke.py <rootfs dir>
Needs util-linux `unshare` and unprivileged user namespaces: in a private mount namespace
it binds the host's /dev into <rootfs>/dev, mounts a tmpfs on /tmp, chroots, and plays the
host's side of the protocol for one cell that gathers two tool calls. No sandboxing beyond
that: this checks the rootfs, not the sandbox.
"""
import json
import subprocess
import sys

root = sys.argv[1]
script = (
    f"mount --rbind /dev '{root}/dev' && mount -t tmpfs tmpfs '{root}/tmp' && "
    f"exec chroot '{root}' /usr/bin/python3 -I -S -B /runner.py"
)
proc = subprocess.Popen(
    ["unshare", "-rm", "sh", "-c", script],
    stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={}, cwd="/",
)


def send(message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def receive():
    return json.loads(proc.stdout.readline())


send({"type": "start", "tools": [{"name": "add", "stub": "add stub", "summary": "add(a, b)", "private": False}]})
send({"type": "cell", "code": (
    "import asyncio, sys, ssl, sqlite3\n"
    "r = await asyncio.gather(add({'a': 1}), add({'a': 2}))\n"
    "print(r, sys.version.split()[0])"
)})
first, second = receive(), receive()
send({"type": "result", "id": second["id"], "ok": True, "value": "two"})
send({"type": "result", "id": first["id"], "ok": True, "value": "one"})
done = receive()
proc.stdin.close()
print(json.dumps(done))
sys.exit(0 if proc.wait() == 0 and done["error"] is None and done["stdout"].startswith("['one', 'two']") else 1)
