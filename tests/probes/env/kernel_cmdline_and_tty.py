# ENV: the host kernel's command line (/proc/cmdline) and a terminal (/dev/tty). Native: no
# /proc/cmdline (proc is mounted subset=pid) and no /dev/tty. Docker: a recorded difference,
# see the row in probes.rs. Control: /proc/self/status reads.
outcome, err = attempt_all([
    (lambda: open("/proc/cmdline").read(),),
    (os.open, "/dev/tty", os.O_RDWR),
])
ok = "Pid:" in open("/proc/self/status").read()
if outcome == "allowed":
    report("allowed", None, call=err, control=check("/proc/self/status", ok))
else:
    report(outcome, err, control=check("/proc/self/status", ok))
