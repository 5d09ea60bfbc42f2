# RES: 1 GiB at once (touched, so it is really used).
data = b"\1" * (1 << 30)
report("allowed", None, bytes=len(data))
