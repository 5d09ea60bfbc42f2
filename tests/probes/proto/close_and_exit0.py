# PROTO: close both protocol descriptors and exit with status 0, without a done line. It
# must read as a stop, never as a success.
fds = runner_fds()
os.close(fds["PROTO_OUT"])
os.close(fds["PROTO_IN"])
# posix._exit: the code's os._exit would end the cell with a done line first.
import posix
posix._exit(0)
