# PROTO: a line that is not JSON on the protocol pipe, then the code goes on. The host stops
# the run as a protocol violation; "survived" never reaches it.
import time

send_raw(b"this is not json\n")
time.sleep(3)
report("allowed", None)
