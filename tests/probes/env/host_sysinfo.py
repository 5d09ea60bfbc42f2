# ENV: sysinfo(2) answers with the host's uptime, load, RAM and host-wide process count, which
# the native /proc (subset=pid) hides; seccomp refuses it on both backends. The control:
# Python's os.sysconf for the page size still works, and what SC_PHYS_PAGES (glibc asks
# sysinfo for it) gives is reported, never the host's RAM.
buf = (ctypes.c_ubyte * 112)()
outcome, err = attempt(sys_call, 99, buf)  # sysinfo
try:
    phys = os.sysconf("SC_PHYS_PAGES")
except (OSError, ValueError) as e:
    phys = type(e).__name__
report(
    outcome,
    err,
    control=check("sysconf(SC_PAGESIZE)", os.sysconf("SC_PAGESIZE") > 0),
    phys_pages=phys,
)
