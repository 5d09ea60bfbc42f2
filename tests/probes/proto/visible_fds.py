# PROTO: the descriptors the code can see are 0, 1 and 2 (/dev/null) and the runner's own
# (pipes, sockets, the event loop's epoll): nothing that names a host file or directory.
fds = {}
for fd in sorted(int(f) for f in os.listdir("/proc/self/fd")):
    try:
        fds[fd] = os.readlink("/proc/self/fd/%d" % fd)
    except OSError:
        pass  # the listing's own descriptor, gone already
kinds = ("pipe:[", "socket:[", "anon_inode:[eventpoll]", "anon_inode:[eventfd]")
bad = {fd: t for fd, t in fds.items() if not (t == "/dev/null" and fd <= 2 or t.startswith(kinds) or t.startswith("/proc/"))}
std = all(fds.get(fd) == "/dev/null" for fd in (0, 1, 2))
if not std:
    bad.update({fd: fds.get(fd) for fd in (0, 1, 2)})
report("allowed" if bad else "denied", json.dumps(bad) if bad else None, fds=fds,
       control=check("the runner's descriptors are present", set(runner_fds().values()) <= set(fds)))
