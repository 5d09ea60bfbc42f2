# KRN: io_uring (its operations bypass syscall filtering): setup, enter, register.
params = (ctypes.c_ubyte * 120)()
outcome, err = attempt_all([
    (sys_call, 425, 8, params),  # io_uring_setup
    (sys_call, 426, 0, 1, 0, 0, 0, 0),  # io_uring_enter
    (sys_call, 427, 0, 0, 0, 0),  # io_uring_register
])
report(outcome, err, control=control_tmp_file())
