# NET: every address family but AF_UNIX, with every common socket type, by raw syscall
# (Python's socket module rejects some families before the kernel sees them).
SYS_socket = 41
AF_UNIX = 1
calls = [
    (sys_call, SYS_socket, family, kind, 0)
    for family in range(0, 46)
    if family != AF_UNIX
    for kind in (1, 2, 3, 5)  # SOCK_STREAM, DGRAM, RAW, SEQPACKET
]
outcome, err = attempt_all(calls)
report(outcome, err, control=control_socketpair())
