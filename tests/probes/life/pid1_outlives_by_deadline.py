# LIFE: pid 1 itself (the runner, running this code) tries to clear its death signal, names
# itself HOST["marker"], ignores SIGTERM and sleeps past the deadline: the host must end it.
import signal
import time

attempt(sys_call, 157, 1, 0, 0, 0, 0)
libc.prctl(15, HOST["marker"].encode(), 0, 0, 0)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
time.sleep(3600)
report("allowed", "slept past the deadline")
