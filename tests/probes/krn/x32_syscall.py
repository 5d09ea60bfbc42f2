# KRN: an x32 syscall (number | 0x40000000: another ABI on the same architecture) kills
# the process that makes it. In a child, so the probe can tell.
status, out = run_child("sys_call(0x40000000 | 39)\nprint('survived')")
if status < 0:
    outcome, err = "killed", _signal.Signals(-status).name
elif "survived" in out:
    outcome, err = "allowed", "x32 getpid returned"
else:
    outcome, err = "denied", "exit %d" % status
report(outcome, err, control=control_subprocess())
