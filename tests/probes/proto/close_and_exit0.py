# PROTO: close both protocol descriptors and exit with status 0, without a done line. It
# must read as a stop, never as a success.
fds = runner_fds()
os.close(fds["PROTO_OUT"])
os.close(fds["PROTO_IN"])
os._exit(0)
