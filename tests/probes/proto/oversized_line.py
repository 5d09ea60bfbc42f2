# PROTO: a line of 2 MiB (over the host's 1 MiB line limit), no newline until the end.
import time

send_raw(b'{"type":"call","id":1,"tool":"echo","args":{"text":"' + b"x" * (2 << 20) + b'"}}\n')
time.sleep(3)
report("allowed", None)
