# RES: sleep forever with SIGTERM, SIGINT and SIGHUP ignored, in the runner and in a child
# named HOST["marker"]. Ends by the deadline; nothing survives the run.
import signal
import time

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)
if os.fork() == 0:
    libc.prctl(15, HOST["marker"].encode(), 0, 0, 0)
    while True:
        time.sleep(3600)
while True:
    time.sleep(3600)
