# NET: AF_VSOCK (the way out of a VM to its hypervisor).
import socket

AF_VSOCK = 40


def vsock_connect():
    s = socket.socket(AF_VSOCK, socket.SOCK_STREAM)
    s.connect((2, 1024))  # CID 2: the host


outcome, err = attempt_all([(vsock_connect,), (socket.socket, AF_VSOCK, socket.SOCK_DGRAM)])
report(outcome, err, control=control_socketpair())
