# RES: 1 GiB written to sys.stderr in 1 MiB pieces. The run stops at the output limit.
import sys

chunk = "x" * (1 << 20)
for _ in range(1024):
    sys.stderr.write(chunk)
report("allowed", None)
