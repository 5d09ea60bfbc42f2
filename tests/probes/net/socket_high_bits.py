# NET: socket(AF_INET | 1 << 32): the kernel reads the int's low 32 bits, so a filter that
# compares all 64 bits would let it through.
SYS_socket, SYS_socketpair = 41, 53
pair = (ctypes.c_int * 2)()
outcome, err = attempt_all([
    (sys_call, SYS_socket, 2 | 1 << 32, 1, 0),
    (sys_call, SYS_socket, 10 | 1 << 32, 2, 0),
    (sys_call, SYS_socket, 40 | 0xFFFF_FFFF_0000_0000, 1, 0),
    (sys_call, SYS_socketpair, 2 | 1 << 32, 1, 0, pair),
])
report(outcome, err, control=control_socketpair())
