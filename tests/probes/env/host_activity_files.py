# ENV: host-wide /proc files that show the host's uptime, load, memory, CPUs, disks, interrupt
# and pressure counts (activity of everything else on the host), boot options, open-file
# counts and the boot's identity. Native: absent (proc subset=pid). Docker: masked (a file
# reads empty, a directory is an empty tmpfs). Any byte read is a leak.


class Masked(OSError):
    """The file opens but reads empty: /dev/null is bound over it."""


def read(path):
    with open(path, "rb") as f:
        if not f.read(64):
            raise Masked(path)


paths = [
    "/proc/uptime", "/proc/loadavg", "/proc/meminfo", "/proc/cpuinfo", "/proc/stat",
    "/proc/interrupts", "/proc/softirqs", "/proc/diskstats", "/proc/partitions",
    "/proc/vmstat", "/proc/zoneinfo", "/proc/buddyinfo", "/proc/locks", "/proc/cmdline",
    "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory",
    "/proc/sys/kernel/random/boot_id", "/proc/sys/fs/file-nr", "/proc/sys/fs/dentry-state",
]
outcome, err = attempt_all([(read, p) for p in paths])
ok = "Pid:" in open("/proc/self/status").read()
report(outcome, err, control=check("/proc/self/status", ok))
