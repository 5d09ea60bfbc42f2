# NET: raw ICMP and the unprivileged ICMP "ping" socket.
import socket

outcome, err = attempt_all([
    (socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
    (socket.socket, socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
    (socket.socket, socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6),
    (socket.socket, socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW),
])
report(outcome, err, control=control_socketpair())
