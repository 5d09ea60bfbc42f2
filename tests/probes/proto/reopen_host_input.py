# PROTO: reopen the descriptor that carries the host's messages through /proc/self/fd for
# writing, and forge a host line to our own runner with it (a pipe's owner may do so; the
# caller's uid is the sandbox's when unprivileged). Also every descriptor of every other
# process of the sandbox (on Docker, the runner's relay child holds runc's stdin pipe).
# A descriptor number that is not open (ENOENT) is no attempt. Control: ours still reads.
fds = runner_fds()
calls = [
    (os.open, "/proc/self/fd/%d" % fds["PROTO_IN"], os.O_WRONLY),
    (os.open, "/proc/self/fd/%d" % fds["PROTO_IN"], os.O_RDWR),
]
others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]
for pid in others:
    for n in range(64):
        path = "/proc/%s/fd/%d" % (pid, n)
        try:
            os.readlink(path)
        except FileNotFoundError:
            continue
        except OSError:
            pass  # not ours to read: the open below must fail too
        calls.append((os.open, path, os.O_WRONLY))
outcome, err = attempt_all(calls)
control = check("the host's descriptor is open", os.fstat(fds["PROTO_IN"]) is not None)
if outcome == "allowed":
    report("allowed", None, call=err, control=control)
else:
    report(outcome, err, control=control, others=len(others))
