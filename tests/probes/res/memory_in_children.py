# RES: the memory limit holds for the whole sandbox, not per process: four children of
# 96 MiB each (384 MiB in all, each far below 256 MiB).
import time

pids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        data = b"\1" * (96 << 20)
        time.sleep(30)
        os._exit(0)
    pids.append(pid)
time.sleep(3)
alive = 0
for pid in pids:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done == 0:
        alive += 1
        os.kill(pid, 9)
        os.waitpid(pid, 0)
report("allowed" if alive == 4 else "denied", None if alive == 4 else "OOM", alive=alive, control=control_fork())
