# NET: AF_PACKET (raw frames on every interface).
import socket

outcome, err = attempt_all([
    (socket.socket, socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
    (socket.socket, socket.AF_PACKET, socket.SOCK_DGRAM, 0x0300),
])
report(outcome, err, control=control_socketpair())
