# FS: /sys (kernel objects, cgroups, firmware, debugfs) holds nothing to read.
paths = [
    "/sys/kernel",
    "/sys/fs/cgroup",
    "/sys/class/net",
    "/sys/firmware",
    "/sys/kernel/debug",
    "/sys/kernel/security",
    "/sys/block",
    "/sys/devices",
    "/sys/module",
]


def read(path):
    os.listdir(path)


outcome, err = attempt_all([(read, p) for p in paths])
empty = not os.path.isdir("/sys") or os.listdir("/sys") == []
if not empty and outcome == "denied":
    outcome, err = "allowed", "/sys lists %s" % os.listdir("/sys")[:5]
report(outcome, err, control=check("list /dev", "null" in os.listdir("/dev")))
