# FS: fill /tmp: write 1 MiB chunks into several files until the write fails.
chunk = b"\0" * (1 << 20)
written = 0
err = None
for i in range(64):
    try:
        with open("/tmp/fill%d" % i, "wb") as f:
            for _ in range(8):
                f.write(chunk)
                f.flush()
                written += len(chunk)
    except OSError as e:
        err = ename(e.errno)
        break
for i in range(64):
    try:
        os.unlink("/tmp/fill%d" % i)
    except OSError:
        pass
outcome = "denied" if err else "allowed"
report(outcome, err, mib=written >> 20, control=control_tmp_file())
