# QUOTA: raised socket buffers queue kernel memory no address-space limit counts (up to
# net.core.wmem_max each): SO_SNDBUF, SO_RCVBUF and their FORCE forms at 4 MiB.
# Control: a socketpair with the default buffers.
import socket

a, b = socket.socketpair()
outcome, err = attempt_all([
    (a.setsockopt, socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20),
    (a.setsockopt, socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20),
    (a.setsockopt, socket.SOL_SOCKET, 32, 4 << 20),
    (a.setsockopt, socket.SOL_SOCKET, 33, 4 << 20),
])
a.close()
b.close()
report(outcome, err, control=control_socketpair())
