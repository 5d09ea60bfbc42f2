# NET: abstract UNIX sockets of the host (per network namespace): X11's, D-Bus's, and one
# the test listens on for this run.
import socket

names = ["/tmp/.X11-unix/X0", "/tmp/dbus-probe", "/org/freedesktop/systemd1/notify", HOST["abstract"]]


def connect(name, kind):
    s = socket.socket(socket.AF_UNIX, kind)
    s.settimeout(3)
    s.connect("\0" + name)


calls = [(connect, n, k) for n in names for k in (socket.SOCK_STREAM, socket.SOCK_SEQPACKET)]
outcome, err = attempt_all(calls)
report(outcome, err, control=control_socketpair())
