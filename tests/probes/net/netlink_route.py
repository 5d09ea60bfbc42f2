# NET: AF_NETLINK (routing, audit, uevents: kernel interfaces reachable without a network).
import socket

calls = [(socket.socket, socket.AF_NETLINK, socket.SOCK_RAW, proto) for proto in (0, 9, 15)]
calls.append((socket.socket, socket.AF_NETLINK, socket.SOCK_DGRAM, 0))
outcome, err = attempt_all(calls)
report(outcome, err, control=control_socketpair())
