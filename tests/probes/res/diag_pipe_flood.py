# RES: 256 MiB to the runner's diagnostics pipe (the sandbox's stderr, read by the host): the
# host keeps a bounded part (exec prints at most a few KiB: checked on the host) and the run
# goes on. Control: every byte was taken (the host drained the pipe), and a tool call after
# the flood is answered.
diag = runner_fds()["DIAG"]
chunk = b"d" * (1 << 20)
written = 0
for _ in range(256):
    view = memoryview(chunk)
    while view:
        n = os.write(diag, view)
        written += n
        view = view[n:]
answered = json.loads(await add({"a": 2, "b": 3})).get("sum") == 5
report(
    "denied",
    None,
    written=written,
    control=check("256 MiB taken and a call answered after it", written == 256 << 20 and answered),
)
