# NET: socketpair with a network family (the filter allows only AF_UNIX pairs).
import socket

outcome, err = attempt_all([
    (socket.socketpair, socket.AF_INET, socket.SOCK_STREAM),
    (socket.socketpair, socket.AF_INET6, socket.SOCK_DGRAM),
])
report(outcome, err, control=control_socketpair())
