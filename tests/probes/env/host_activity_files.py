# ENV: host-wide /proc files that show the host's uptime, load, memory, CPUs, disks, interrupt
# and pressure counts (activity of everything else on the host), boot options, open-file
# counts, the boot's identity, the host file systems' counters (/proc/fs/ext4/*: extent cache
# hits of every file access, free blocks) and crypto use counts (/proc/crypto). Native:
# absent (proc subset=pid). Docker: masked (a file reads empty, a directory is an empty
# tmpfs). Any byte read is a leak.


class Masked(OSError):
    """The file opens but reads empty: /dev/null is bound over it."""


def read(path):
    with open(path, "rb") as f:
        if not f.read(64):
            raise Masked(path)


def read_tree(top):
    """Any file under top that yields a byte is a leak; an empty directory is a mask."""
    os.listdir(top)  # ENOENT when absent
    for here, _, files in os.walk(top):
        for name in files:
            try:
                read(os.path.join(here, name))
                return
            except OSError:
                continue
    raise Masked(top)


paths = [
    "/proc/uptime", "/proc/loadavg", "/proc/meminfo", "/proc/cpuinfo", "/proc/stat",
    "/proc/interrupts", "/proc/softirqs", "/proc/diskstats", "/proc/partitions",
    "/proc/vmstat", "/proc/zoneinfo", "/proc/buddyinfo", "/proc/locks", "/proc/cmdline",
    "/proc/pressure/cpu", "/proc/pressure/io", "/proc/pressure/memory",
    "/proc/sys/kernel/random/boot_id", "/proc/sys/fs/file-nr", "/proc/sys/fs/dentry-state",
    "/proc/crypto",
]
outcome, err = attempt_all([(read, p) for p in paths] + [(read_tree, "/proc/fs")])
ok = "Pid:" in open("/proc/self/status").read()
report(outcome, err, control=check("/proc/self/status", ok))
