# RES: open descriptors until the kernel refuses (RLIMIT_NOFILE), including through dup2 to a
# high number; then check that closing some lets us open again.
fds = []
err = None
while len(fds) < 100000:
    try:
        fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        err = ename(e.errno)
        break
count = len(fds)
high = attempt(os.dup2, 0, 4096)[1]
for fd in fds:
    os.close(fd)
report("denied" if err else "allowed", err, opened=count, dup2_high=high, control=control_tmp_file())
