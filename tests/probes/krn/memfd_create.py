# KRN: memfd_create (an executable anonymous file, exec'd through /proc/self/fd).
outcome, err = attempt_all([
    (os.memfd_create, "probe"),
    (os.memfd_create, "probe", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING),
    (sys_call, 319, b"probe", 0x0004),  # MFD_HUGETLB
])
report(outcome, err, control=control_tmp_file())
