# RES: spin the CPU in 16 threads that do not hold the GIL (hashing large buffers releases
# it) for 3 s; the CPU time used must stay near one CPU's worth (the 1-CPU limit).
import hashlib
import threading
import time

data = b"\0" * (8 << 20)
stop = time.monotonic() + 3


def spin():
    while time.monotonic() < stop:
        hashlib.sha256(data).digest()


started, cpu0 = time.monotonic(), time.process_time()
threads = [threading.Thread(target=spin) for _ in range(16)]
for t in threads:
    t.start()
for t in threads:
    t.join()
ratio = (time.process_time() - cpu0) / (time.monotonic() - started)
report("allowed" if ratio > 1.3 else "denied", None, cpus=round(ratio, 2), host_cpus=os.cpu_count())
