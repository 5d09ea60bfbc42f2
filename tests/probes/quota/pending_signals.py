# QUOTA: queued real-time signals count against the host user's RLIMIT_SIGPENDING. Block
# SIGRTMIN and queue it to this thread (the runner's other threads would take
# process-directed ones) until refused; more than 64 queued is a hole.
# Control: the queued signal is delivered when unblocked (Python runs its handler once for
# any number of pending instances).
import signal
import threading

SYS_rt_tgsigqueueinfo = 297
tid = threading.get_native_id()
sig = signal.SIGRTMIN
seen = []
signal.signal(sig, lambda *a: seen.append(1))
signal.pthread_sigmask(signal.SIG_BLOCK, {sig})
info = (ctypes.c_int * 32)()
info[0] = sig
info[2] = -1  # si_code SI_QUEUE
queued, err = 0, None
while queued < 100000:
    info[0] = sig
    try:
        sys_call(SYS_rt_tgsigqueueinfo, os.getpid(), tid, sig, info)
        queued += 1
    except OSError as e:
        err = ename(e.errno)
        break
signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
if queued > 64 or err is None:
    report("allowed", "%d signals queued" % queued)
else:
    report("denied", err, queued=queued, control=check("queued signals delivered", queued > 0 and len(seen) > 0))
