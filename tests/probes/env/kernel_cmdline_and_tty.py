# ENV: the host kernel's command line (/proc/cmdline) and a terminal (/dev/tty). Native: no
# /proc/cmdline (proc is mounted subset=pid) and no /dev/tty. Docker: /proc/cmdline is
# masked (/dev/null bound over it: it reads empty) and /dev/tty has no terminal behind it
# (ENXIO). Control: /proc/self/status reads.


class Masked(OSError):
    """The file opens but reads empty: /dev/null is bound over it."""


def read_cmdline():
    with open("/proc/cmdline", "rb") as f:
        if not f.read(64):
            raise Masked("/proc/cmdline")


outcome, err = attempt_all([
    (read_cmdline,),
    (os.open, "/dev/tty", os.O_RDWR),
])
ok = "Pid:" in open("/proc/self/status").read()
if outcome == "allowed":
    report("allowed", None, call=err, control=check("/proc/self/status", ok))
else:
    report(outcome, err, control=check("/proc/self/status", ok))
