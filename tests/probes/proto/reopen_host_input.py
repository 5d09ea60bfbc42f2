# PROTO: reopen the descriptor that carries the host's messages through /proc/self/fd for
# writing, and forge a host line to our own runner with it (a pipe's owner may do so; the
# caller's uid is the sandbox's when unprivileged). Control: the descriptor still reads.
fds = runner_fds()
path = "/proc/self/fd/%d" % fds["PROTO_IN"]
outcome, err = attempt_all([
    (os.open, path, os.O_WRONLY),
    (os.open, path, os.O_RDWR),
])
control = check("the host's descriptor is open", os.fstat(fds["PROTO_IN"]) is not None)
if outcome == "allowed":
    report("allowed", None, call=err, control=control)
else:
    report(outcome, err, control=control)
