# FS: a /tmp symlink to /proc/self/root and /proc/1/root, then write through it to the
# root and read what only the host has.
os.symlink("/proc/self/root", "/tmp/r")
os.symlink("/proc/1/root", "/tmp/r1")
calls = [
    (os.open, "/tmp/r/etc/passwd", os.O_WRONLY | os.O_APPEND),
    (os.open, "/tmp/r/probe", os.O_WRONLY | os.O_CREAT, 0o644),
    (os.open, "/tmp/r1/usr/bin/probe", os.O_WRONLY | os.O_CREAT, 0o644),
    (os.open, "/tmp/r/etc/shadow", os.O_RDONLY),
    (os.open, "/tmp/r1/root/.bashrc", os.O_RDONLY),
    (os.open, "/tmp/r1/proc/1/root/etc/shadow", os.O_RDONLY),
]
outcome, err = attempt_all(calls)
same = sorted(os.listdir("/tmp/r")) == sorted(os.listdir("/"))
report(outcome, err, control=check("/proc/self/root is the sandbox root", same))
