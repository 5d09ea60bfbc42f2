# RES: a double-forked daemon in its own session, named HOST["marker"], with SIGTERM and
# SIGHUP ignored and no descriptors from the runner. It must die with the run: the test looks
# for it on the host afterwards.
import signal
import time

r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        libc.prctl(15, HOST["marker"].encode(), 0, 0, 0)
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
