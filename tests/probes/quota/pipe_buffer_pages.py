# QUOTA: pipe buffer pages are a per-user host counter (fs.pipe-user-pages-soft): grow a
# pipe to 1 MiB with F_SETPIPE_SZ, or shrink it. Control: a pipe of the default size works.
import fcntl

F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
r, w = os.pipe()
outcome, err = attempt_all([
    (fcntl.fcntl, w, F_SETPIPE_SZ, 1 << 20),
    (fcntl.fcntl, w, F_SETPIPE_SZ, 1 << 16),
])
os.write(w, b"x" * 4096)
ok = fcntl.fcntl(r, F_GETPIPE_SZ) >= 4096 and len(os.read(r, 8192)) == 4096
report(outcome, err, control=check("a default pipe", ok))
