# RES: the memory limit holds for the whole sandbox, not per process: four children of
# 96 MiB each (384 MiB in all, each far below 256 MiB). Each child says on a pipe when its
# memory is held, so the verdict waits for every allocation (not a guessed time). Reports how
# each child ended: a denial only when a child was killed by SIGKILL (the OOM killer's
# signal); any other end is reported as it is. Control: one child of 96 MiB alone lives.
import time


def children(n):
    kids = []
    for _ in range(n):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            data = b"\1" * (96 << 20)
            os.write(w, b"1")
            time.sleep(60)
            os._exit(0)
        os.close(w)
        kids.append((pid, r))
    # Every child has either allocated (it wrote) or died (EOF) once its read returns.
    held = [os.read(r, 1) == b"1" for _, r in kids]
    time.sleep(0.5)
    ends = []
    for (pid, r), allocated in zip(kids, held):
        os.close(r)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            ends.append("alive")
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        elif os.WIFSIGNALED(status):
            ends.append(_signal.Signals(os.WTERMSIG(status)).name)
        else:
            ends.append("exit %d" % os.WEXITSTATUS(status))
    return ends


ends = children(4)
alone = children(1)
others = sorted({e for e in ends if e not in ("alive", "SIGKILL")})
control = check("one child of 96 MiB lives", alone == ["alive"])
if others:
    report("failed", "|".join(others), ends=ends)
elif "SIGKILL" in ends:
    report("denied", "SIGKILL", ends=ends, control=control)
else:
    report("allowed", None, ends=ends, control=control)
