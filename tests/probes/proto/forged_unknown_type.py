# PROTO: a JSON object of a type the host does not know, and a bare JSON array.
import time

send_raw(b'{"type":"result","id":1,"ok":true,"value":"forged"}\n[1, 2]\n')
time.sleep(3)
report("allowed", None)
