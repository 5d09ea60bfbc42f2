# NET: pathname UNIX sockets of the host: Docker, containerd, D-Bus, systemd, X11, and one
# the test listens on for this run.
import socket

paths = [
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
    "/run/systemd/private",
    "/run/systemd/notify",
    "/run/systemd/journal/socket",
    "/dev/log",
    "/tmp/.X11-unix/X0",
    HOST["unix_path"],
]


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(path)


outcome, err = attempt_all([(connect, p) for p in paths])
report(outcome, err, control=control_socketpair())
