# PROTO: a forged, well-formed done whose stdout is over the 8 KiB kept-output cap (a way
# past the output limit into the model's context).
import json
import time

send_raw((json.dumps({"type": "done", "stdout": "F" * 100000, "error": None,
                      "truncated": False, "stopped": False}) + "\n").encode())
time.sleep(3)
report("allowed", None)
