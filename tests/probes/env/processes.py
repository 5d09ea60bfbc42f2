# ENV: the processes in view are the sandbox's own: the runner is pid 1, the session and
# process group are not named inside, and no pid reads as a host pid (NSpid has one level).
seen = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen[int(pid)] = open("/proc/%s/comm" % pid).read().strip()
    except OSError:
        pass
nspid = [l.split()[1:] for l in open("/proc/self/status") if l.startswith("NSpid:")][0]
bad = []
if seen.get(1) != "python3" or set(seen.values()) != {"python3"}:
    bad.append("processes %r" % seen)
if len(nspid) != 1:
    bad.append("NSpid %r" % nspid)
if os.getppid() != 0:
    bad.append("ppid %d" % os.getppid())
report("allowed" if bad else "denied", "; ".join(bad) or None, pgrp=os.getpgrp(), sid=os.getsid(0))
