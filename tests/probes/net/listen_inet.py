# NET: listening on a TCP port (all addresses, and the loopback).
import socket


def listen(host):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((host, 8080))
    s.listen()


outcome, err = attempt_all([(listen, "0.0.0.0"), (listen, "127.0.0.1")])
report(outcome, err, control=control_socketpair())
