# NET: a UDP datagram to an outside IPv4 address (no connection needed).
import socket


def send():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"probe", ("1.1.1.1", 53))


outcome, err = attempt(send)
report(outcome, err, control=control_socketpair())
