"""A seccomp filter the runner adds to itself: syscalls through a foreign ABI kill the
whole process."""

import os

from .channel import diag


def seal_abi():
    """Add a seccomp filter that kills the whole process on a syscall made through another
    ABI than the native one (i386's int 0x80 on x86_64, or x32: a number with bit 30 set).

    The native launcher's filter already does (libseccomp's bad-arch action, kill-process).
    Docker's profile format has no bad-arch action, and runc leaves libseccomp's default,
    which kills only the calling thread: the runner would hang with its main thread gone.
    Filters stack and the strictest action wins, so this one decides for those syscalls on
    both backends. It is added before any thread starts, so every thread has it. Without
    no_new_privs or the prctl allowed it fails: the runner says so and goes on."""
    import ctypes
    import struct

    archs = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_* (linux/audit.h)
    arch = archs.get(os.uname().machine)
    if arch is None:
        return
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET|K
    kill, allow = 0x80000000, 0x7FFF0000  # SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW
    program = [
        (ld_abs, 0, 0, 4),  # A = seccomp_data.arch
        (jeq, 1, 0, arch),  # native: skip the kill
        (ret, 0, 0, kill),
        (ld_abs, 0, 0, 0),  # A = seccomp_data.nr
    ]
    if arch == archs["x86_64"]:
        program.append((jset, 0, 1, 0x40000000))  # __X32_SYSCALL_BIT: kill
        program.append((ret, 0, 0, kill))
    program.append((ret, 0, 0, allow))
    code = b"".join(struct.pack("=HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        diag("could not add the ABI filter: errno %d" % ctypes.get_errno())

