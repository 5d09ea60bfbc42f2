# KRN: System V and POSIX IPC (shared memory, message queues, semaphores).
outcome, err = attempt_all([
    (sys_call, 29, 0, 4096, 0o1600),  # shmget(IPC_PRIVATE)
    (sys_call, 68, 0, 0o1600),  # msgget
    (sys_call, 64, 0, 1, 0o1600),  # semget
    (sys_call, 240, b"probe", 0o100 | 2, 0o600, 0),  # mq_open(O_CREAT | O_RDWR)
])
report(outcome, err, control=control_socketpair())
