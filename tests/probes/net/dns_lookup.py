# NET: resolving a public name (the resolver needs a UDP or TCP socket to a nameserver).
import socket

try:
    socket.getaddrinfo("example.com", 443)
    outcome, err = "allowed", None
except socket.gaierror as e:
    # EAI_* codes have no errno names; name them by constant.
    names = {v: k for k, v in vars(socket).items() if k.startswith("EAI_")}
    outcome, err = "denied", names.get(e.errno, str(e.errno))
except OSError as e:
    outcome, err = "denied", ename(e.errno)
report(outcome, err, control=control_socketpair())
