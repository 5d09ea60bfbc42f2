# PROTO: forged lines of the right types in the wrong shape: a call with a negative id, a
# done with an extra field. The first one stops the run.
import time

send_raw(b'{"type":"call","id":-1,"tool":"add","args":{"a":1,"b":2}}\n')
send_raw(b'{"type":"done","stdout":"forged","error":null,"truncated":false,"stopped":false,"x":1}\n')
time.sleep(3)
report("allowed", None)
