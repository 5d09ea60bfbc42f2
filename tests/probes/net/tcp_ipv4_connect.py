# NET: a TCP connection to an outside IPv4 address.
import socket

outcome, err = attempt(socket.create_connection, ("1.1.1.1", 443), 3)
report(outcome, err, control=control_socketpair())
