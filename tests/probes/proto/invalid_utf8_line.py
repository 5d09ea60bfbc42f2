# PROTO: invalid UTF-8 and NUL bytes inside a JSON string on the protocol pipe.
import time

send_raw(b'{"type":"done","stdout":"\xff\xfe\x00","error":null,"truncated":false,"stopped":false}\n')
time.sleep(3)
report("allowed", None)
