# KRN: the kernel log: syslog(2) read, clear, console level; /dev/kmsg and /proc/kmsg.
buf = ctypes.create_string_buffer(4096)
outcome, err = attempt_all([
    (sys_call, 103, 3, buf, 4096),  # SYSLOG_ACTION_READ_ALL
    (sys_call, 103, 10, 0, 0),  # SYSLOG_ACTION_SIZE_BUFFER
    (sys_call, 103, 5, 0, 0),  # SYSLOG_ACTION_CLEAR
    (sys_call, 103, 8, 0, 1),  # SYSLOG_ACTION_CONSOLE_LEVEL
    (open, "/dev/kmsg", "rb"),
    (open, "/proc/kmsg", "rb"),
])
report(outcome, err, control=control_tmp_file())
