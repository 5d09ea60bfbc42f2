# PROTO: JSON nested 100,000 deep (a recursion bomb for a naive parser), under 1 MiB.
import time

send_raw(b'{"type":"call","id":1,"tool":"echo","args":' + b"[" * 100000 + b"]" * 100000 + b"}\n")
time.sleep(3)
report("allowed", None)
