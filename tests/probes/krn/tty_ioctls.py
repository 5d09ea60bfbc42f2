# KRN: terminal ioctls: TIOCSTI (push input into a terminal), TIOCLINUX, TIOCCONS,
# TIOCSETD, TIOCSCTTY, with and without high bits, on every descriptor we have and on
# /dev/tty when it opens. (The filter answers before the driver.)
SYS_ioctl = 16
cmds = [0x5412, 0x541C, 0x541D, 0x5423, 0x540E, 0x5412 | 1 << 32, 0x541C | 0xFFFF_FFFF_0000_0000]
fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
try:
    fds.append(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
except OSError:
    pass
byte = ctypes.c_char(b"x")
outcome, err = attempt_all([(sys_call, SYS_ioctl, fd, cmd, ctypes.byref(byte)) for fd in fds for cmd in cmds])
r, w = os.pipe()
os.write(w, b"abc")
n = ctypes.c_int()
sys_call(SYS_ioctl, r, 0x541B, ctypes.byref(n))  # FIONREAD
report(outcome, err, control=check("FIONREAD on a pipe", n.value == 3))
