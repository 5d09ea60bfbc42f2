# KRN: bpf(2): create a map, load a socket filter program, read a program id.
attr = (ctypes.c_ubyte * 128)()
attr[0] = 2  # BPF_MAP_TYPE_ARRAY
attr[4], attr[8], attr[12] = 4, 4, 1  # key size, value size, max entries
outcome, err = attempt_all([
    (sys_call, 321, 0, attr, 128),  # BPF_MAP_CREATE
    (sys_call, 321, 5, attr, 128),  # BPF_PROG_LOAD
    (sys_call, 321, 11, attr, 128),  # BPF_PROG_GET_NEXT_ID
])
report(outcome, err, control=control_socketpair())
