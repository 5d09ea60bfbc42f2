# LIFE: everything a process can do to its own attributes to outlive the run: pid 1 and a
# double-forked daemon try to clear their death signal, the daemon leaves the session and
# process group, ignores SIGTERM/SIGHUP/SIGINT and closes every descriptor. Then the run ends
# with a result. The host checks that no process named HOST["marker"] is alive 1 s later.
import signal
import time

SYS_prctl, PR_SET_PDEATHSIG, PR_SET_NAME = 157, 1, 15
attempt(sys_call, SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0)
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        attempt(sys_call, SYS_prctl, PR_SET_PDEATHSIG, 0, 0, 0, 0)
        libc.prctl(PR_SET_NAME, HOST["marker"].encode(), 0, 0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)
        os.write(w, str(os.getpid()).encode())
        os.closerange(0, 1024)
        while True:
            time.sleep(3600)
    os._exit(0)
os.close(w)
daemon = int(os.read(r, 32))
os.wait()
alive = os.path.exists("/proc/%d" % daemon)
report("started" if alive else "denied", None, daemon=daemon)
