# PROTO: a call whose id does not fit in 64 bits, and one with a fractional id.
import time

send_raw(b'{"type":"call","id":18446744073709551616,"tool":"add","args":{"a":1,"b":2}}\n')
send_raw(b'{"type":"call","id":1.5,"tool":"add","args":{"a":1,"b":2}}\n')
time.sleep(3)
report("allowed", None)
