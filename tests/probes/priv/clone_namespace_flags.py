# PRIV: clone(2) with each namespace flag (a raw clone behaves like fork), clone3 (its flags
# are in memory, out of the filter's reach: answered ENOSYS) and vfork with CLONE_NEWUSER.
SYS_clone, SYS_clone3 = 56, 435
SIGCHLD = 17
flags = [0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000]


def clone(flags):
    pid = sys_call(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


class CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls")]


def clone3(flags):
    args = CloneArgs(flags, 0, 0, 0, SIGCHLD, 0, 0, 0)
    pid = sys_call(SYS_clone3, ctypes.byref(args), ctypes.sizeof(args))
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


calls = [(clone, f) for f in flags] + [(clone, 0x10000000 | 1 << 32)]
calls += [(clone3, 0x10000000), (clone3, 0x80), (clone3, 0)]
outcome, err = attempt_all(calls)
report(outcome, err, control=control_fork())
