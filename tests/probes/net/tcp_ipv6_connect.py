# NET: TCP and UDP over IPv6, to an outside address and to the loopback.
import socket


def tcp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(("2606:4700:4700::1111", 443))


def udp6():
    s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    s.sendto(b"probe", ("::1", 53))


outcome, err = attempt_all([(tcp6,), (udp6,)])
report(outcome, err, control=control_socketpair())
