# ENV: /proc/self/cgroup names no host cgroup path (cgroup namespace: every path is "/").
lines = open("/proc/self/cgroup").read().splitlines()
paths = sorted({l.split(":", 2)[2] for l in lines})
report("allowed" if paths != ["/"] else "denied", None if paths == ["/"] else ", ".join(paths))
