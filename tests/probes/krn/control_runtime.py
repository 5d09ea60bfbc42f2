# KRN, positive control: what ordinary code needs from the kernel still works: randomness,
# time, threads, mmap, select/poll/epoll, pipes, signals, a subprocess.
import select
import signal
import threading
import time

results = []
t = threading.Thread(target=lambda: results.append(len(os.urandom(64))))
t.start()
t.join()
r, w = os.pipe()
os.write(w, b"x")
ep = select.epoll()
ep.register(r, select.EPOLLIN)
ready = ep.poll(1)
got = []
signal.signal(signal.SIGALRM, lambda *a: got.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.01)
time.sleep(0.2)
ok = results == [64] and ready and got and time.monotonic() > 0 and control_subprocess() == "ok"
report("allowed" if ok else "denied", None, control=check("runtime", bool(ok)))
