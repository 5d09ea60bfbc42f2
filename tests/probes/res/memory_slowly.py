# RES: 1 GiB slowly: 4 MiB touched every 5 ms, kept.
import time

kept = []
for _ in range(256):
    kept.append(bytearray(b"\1" * (4 << 20)))
    time.sleep(0.005)
report("allowed", None, mib=4 * len(kept))
