# FS: /proc of host processes: the test process, host pid 1, and a host process of uid
# 65534 (the sandbox's own host uid) that the test started for this run.
paths = []
for pid in (HOST["pid"], HOST["sentinel_pid"]):
    for leaf in ("environ", "cmdline", "root/", "mem"):
        paths.append("/proc/%d/%s" % (pid, leaf))
outcome, err = attempt_all([(open, p, "rb") for p in paths])
# Every pid listed in /proc is a process of this sandbox (uid 65534, python).
outside = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        status = open("/proc/%s/status" % pid).read()
    except OSError:
        continue
    uid = [l.split()[1] for l in status.splitlines() if l.startswith("Uid:")]
    if uid != ["65534"]:
        outside.append(pid)
if outside and outcome == "denied":
    outcome, err = "allowed", "foreign pids in /proc: %s" % outside
report(outcome, err, control=check("own /proc", os.path.exists("/proc/self/status")))
