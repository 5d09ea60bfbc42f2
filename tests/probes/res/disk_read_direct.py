# RES: read the largest file of the rootfs with O_DIRECT for 2 s, which goes to the disk
# every time (the page cache is bypassed), and measure the rate. The run's disk limit is
# 32 MiB/s (crate::limits::DISK_BYTES_PER_SEC); unlimited, this host reads 600+ MiB/s.
# Control: the same bytes read through the page cache.
import mmap
import time

largest, size = None, 0
for root, dirs, files in os.walk("/usr"):
    for name in files:
        path = os.path.join(root, name)
        try:
            st = os.stat(path, follow_symlinks=False)
        except OSError:
            continue
        if st.st_size > size and (st.st_mode & 0o170000) == 0o100000:
            largest, size = path, st.st_size
chunk = 1 << 20
buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT needs
try:
    fd = os.open(largest, os.O_RDONLY | os.O_DIRECT)
except OSError as e:
    report("denied", ename(e.errno), file=largest)
    raise SystemExit
done, offset = 0, 0
started = time.monotonic()
while time.monotonic() - started < 2:
    n = os.preadv(fd, [buf], offset)
    done += n
    offset = offset + n if n == chunk else 0
rate = done / (time.monotonic() - started) / (1 << 20)
first = os.preadv(fd, [buf], 0) and bytes(buf[:4096])
with open(largest, "rb") as f:
    ok = f.read(4096) == first
outcome = "allowed" if rate > 48 else "denied"
report(outcome, None, mib_per_s=round(rate, 1), file=largest, control=check("a cached read", ok))
