# RES: start threads until the kernel refuses (pids limit), then check that a thread starts
# again once they have ended.
import threading

stop = threading.Event()
threads = []
err = None
while len(threads) < 1000:
    t = threading.Thread(target=stop.wait)
    try:
        t.start()
    except RuntimeError as e:  # "can't start new thread": pthread_create said EAGAIN
        err = "EAGAIN" if "new thread" in str(e) else type(e).__name__
        break
    threads.append(t)
stop.set()
for t in threads:
    t.join()
again = threading.Thread(target=lambda: None)
again.start()
again.join()
report("denied" if err else "allowed", err, threads=len(threads), control=check("a thread after", True))
