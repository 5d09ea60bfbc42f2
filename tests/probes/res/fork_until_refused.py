# RES: fork until the kernel refuses (the pids limit), then check that forking works again
# once the children are gone.
import signal
import time

children = []
err = None
while len(children) < 1000:
    try:
        pid = os.fork()
    except OSError as e:
        err = ename(e.errno)
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children.append(pid)
for pid in children:
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
report("denied" if err else "allowed", err, processes=len(children) + 1, control=control_fork())
