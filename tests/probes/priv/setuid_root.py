# PRIV: become root (or any other uid/gid), by every identity call, and raise capabilities.
SYS_setfsuid, SYS_setfsgid, SYS_capset = 122, 123, 126


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


header = CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
data = (CapData * 2)(CapData(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF), CapData(0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF))
calls = [
    (os.setuid, 0),
    (os.setgid, 0),
    (os.seteuid, 0),
    (os.setreuid, 0, 0),
    (os.setresuid, 0, 0, 0),
    (os.setresgid, 0, 0, 0),
    (os.setgroups, [0]),
    (os.setuid, 65534),  # even its own uid: the identity calls are refused outright
    (sys_call, SYS_capset, ctypes.byref(header), data),
]
outcome, err = attempt_all(calls)
# setfsuid never fails in the kernel (it returns the old fsuid); the filter makes it fail.
try:
    sys_call(SYS_setfsuid, 0)
    if os.stat("/proc/self").st_uid == 0 and outcome == "denied":
        outcome, err = "allowed", "setfsuid(0)"
except OSError:
    pass
report(outcome, err, control=check("getuid is 65534", os.getuid() == 65534 and os.geteuid() == 65534))
