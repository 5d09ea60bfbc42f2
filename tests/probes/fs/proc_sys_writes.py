# FS: kernel tunables and triggers in /proc: core_pattern (runs a host program on a crash),
# sysrq-trigger, lowering our OOM score, the kernel's memory and log (kernel addresses are
# krn/kernel_addresses).
calls = [
    (os.open, "/proc/sys/kernel/core_pattern", os.O_WRONLY),
    (os.open, "/proc/sys/kernel/modprobe", os.O_WRONLY),
    (os.open, "/proc/sys/vm/drop_caches", os.O_WRONLY),
    (os.open, "/proc/sysrq-trigger", os.O_WRONLY),
]


class Masked(OSError):
    """The file opens but reads empty: Docker binds /dev/null over it."""


def read(path):
    with open(path, "rb") as f:
        if not f.read(64):
            raise Masked(path)


calls += [(read, p) for p in ("/proc/kcore", "/proc/kmsg", "/proc/timer_list", "/proc/keys", "/proc/sched_debug")]


def lower_oom_score():
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")


calls.append((lower_oom_score,))
outcome, err = attempt_all(calls)
report(outcome, err, control=check("read /proc/self/status", "NoNewPrivs" in open("/proc/self/status").read()))
