# PROTO: write a forged result into the pipe that carries the host's messages (its read
# end is ours: the write must fail) and read what the host sent before the cell.
fds = runner_fds()
outcome, err = attempt(os.write, fds["PROTO_IN"], b'{"type":"result","id":1,"ok":true,"value":"x"}\n')
report(outcome, err, control=check("fd 0 is /dev/null", os.readlink("/proc/self/fd/0") == "/dev/null"))
