# PRIV: join namespaces through /proc/<pid>/ns/*: ours, pid 1's, the host's.
SYS_setns = 308
calls = []
for pid in ("self", "1"):
    for ns in os.listdir("/proc/%s/ns" % pid):
        try:
            fd = os.open("/proc/%s/ns/%s" % (pid, ns), os.O_RDONLY)
        except OSError:
            continue
        calls.append((sys_call, SYS_setns, fd, 0))
for ns in ("mnt", "net", "user", "pid"):
    calls.append((os.open, "/proc/%d/ns/%s" % (HOST["pid"], ns), os.O_RDONLY))
outcome, err = attempt_all(calls)
report(outcome, err, tried=len(calls), control=check("own ns links readable", os.readlink("/proc/self/ns/net").startswith("net:")))
