# PROTO: point the protocol descriptor at /dev/null so the runner's done goes nowhere, and
# stay alive. The host waits only until the deadline.
os.dup2(os.open("/dev/null", os.O_WRONLY), runner_fds()["PROTO_OUT"])
report("allowed", None)
