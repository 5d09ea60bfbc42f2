# PRIV: signals beyond the sandbox: the test process and a host process of the sandbox's own
# host uid, in the test's process group, started for this run (by pid and pidfd), every
# process we may signal (kill -1), and our process group, which the native sandbox shares
# with the host (kill 0; see layers.rs). SIGUSR1 ends the host process; the sandbox ignores
# it, so the test sees any signal that got out.
import signal

signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # inherited by the child below
status, out = run_child("""
import os, signal
for target in (-1, 0):
    try:
        os.kill(target, signal.SIGUSR1)
    except OSError:
        pass
print("sent")
""")
calls = [
    (os.kill, HOST["sentinel_pid"], signal.SIGUSR1),
    (os.kill, HOST["pid"], 0),
    (os.kill, -HOST["sentinel_pid"], signal.SIGUSR1),
    (sys_call, 434, HOST["sentinel_pid"], 0),  # pidfd_open
]
outcome, err = attempt_all(calls)
report(outcome, err, group_signals=out.strip(), control=check("signal a child", status == 0))
