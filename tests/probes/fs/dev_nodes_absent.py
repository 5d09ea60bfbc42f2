# FS: host devices: disks, kernel log and memory, kvm, fuse, tun, consoles, loop, msr.
nodes = [
    "sda", "vda", "xvda", "nvme0n1", "nvme0", "sr0", "dm-0", "loop0", "loop-control",
    "mapper/control", "kmsg", "mem", "kmem", "port", "kvm", "fuse", "net/tun", "console",
    "tty0", "tty1", "ttyS0", "vcs", "hpet", "rtc0", "watchdog", "cpu/0/msr", "uinput",
    "dri/card0", "snd/seq", "vsock", "vhost-vsock", "vhost-net", "userfaultfd", "bsg",
    "sg0", "autofs", "btrfs-control", "cuse", "ppp", "uhid", "hwrng", "nvram", "zram0",
    "core", "ptmx", "pts/ptmx", "pts/0",
]
calls = [(os.open, "/dev/" + n, os.O_RDONLY | os.O_NONBLOCK) for n in nodes]
outcome, err = attempt_all(calls)
# Only the documented nodes are in /dev (docker adds full, tty, shm, mqueue and the pts
# mount point; the native sandbox has none of them).
allowed = {"null", "zero", "full", "random", "urandom", "tty", "fd", "stdin", "stdout",
           "stderr", "pts", "shm", "mqueue", "core", "ptmx"}
extra = sorted(set(os.listdir("/dev")) - allowed)
if extra and outcome == "denied":
    outcome, err = "allowed", "unexpected /dev entries: %s" % extra
control = check("read /dev/urandom", len(open("/dev/urandom", "rb").read(16)) == 16)
report(outcome, err, dev=sorted(os.listdir("/dev")), control=control)
