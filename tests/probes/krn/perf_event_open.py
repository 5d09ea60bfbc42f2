# KRN: perf_event_open(2) on ourselves, on every process, and a tracepoint.
attr = (ctypes.c_ubyte * 128)()
attr[4] = 128  # size
outcome, err = attempt_all([
    (sys_call, 298, attr, 0, -1, -1, 0),
    (sys_call, 298, attr, -1, 0, -1, 0),
    (sys_call, 298, attr, 0, -1, -1, 8),  # PERF_FLAG_FD_CLOEXEC
])
report(outcome, err, control=control_tmp_file())
