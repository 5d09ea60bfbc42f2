# RES: 256 MiB to the runner's diagnostics pipe (the sandbox's stderr, read by the host): the
# host keeps a bounded part (exec prints at most a few KiB) and the run goes on.
diag = runner_fds()["DIAG"]
chunk = b"d" * (1 << 20)
for _ in range(256):
    os.write(diag, chunk)
report("denied", None, control=check("the run goes on", True))
