# KRN: userfaultfd (stretches kernel race windows), plain and user-mode-only, and its device.
outcome, err = attempt_all([
    (sys_call, 323, 0),
    (sys_call, 323, 1),  # UFFD_USER_MODE_ONLY
    (sys_call, 323, 0x80000 | 0x800),  # O_CLOEXEC | O_NONBLOCK
    (os.open, "/dev/userfaultfd", os.O_RDWR),
])
report(outcome, err, control=check("os.urandom", len(os.urandom(32)) == 32))
