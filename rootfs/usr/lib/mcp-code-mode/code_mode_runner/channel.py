"""The runner's private channel to the host, set up before anything else can write.

Importing this module (the entry, /runner.py, imports it first) moves the protocol and the
diagnostics pipe to private descriptors and points 0, 1 and 2 at /dev/null; on Docker it
also starts the relay of the host's input (see _relay_host_input).
"""

import fcntl
import os

real_exit = os._exit  # the code's os._exit is replaced (see errors.code_exit)
main_pid = os.getpid()


def _private_fd(fd):
    """A non-inheritable copy of `fd` numbered 3 or more."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


# Move the protocol (and the diagnostics pipe) to private descriptors, then point 0, 1 and 2
# at /dev/null, before anything else can write to them.
PROTO_IN = _private_fd(0)
PROTO_OUT = _private_fd(1)
DIAG = _private_fd(2)
_null = os.open("/dev/null", os.O_RDWR)
for _fd in (0, 1, 2):
    os.dup2(_null, _fd)
if _null > 2:
    os.close(_null)


def diag(text):
    """Best effort: one line on the private copy of the diagnostics pipe."""
    try:
        os.write(DIAG, ("runner: " + text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def _relay_host_input(pipe):
    """The descriptor to read the host's lines from, given the one they arrive on.

    Natively that is a socket whose sending side is shut down: it cannot be opened by path
    (ENXIO) nor written. On Docker it is a pipe that runc made the sandbox user's, and the
    code runs in this process: it could reopen /proc/self/fd/N of the pipe for writing (and
    chmod it back if we took the write bit away) and forge host lines to its own runner.
    So a child holds the pipe and copies it onto such a socket. The child first makes
    itself non-dumpable (prctl PR_SET_DUMPABLE 0, the one setting the seccomp filter
    allows), which closes its /proc/PID/fd to every other process of the sandbox (same uid,
    no CAP_SYS_PTRACE); no process can make it dumpable again, and it runs no code but this
    loop. If that fails, the child exits and the runner ends at once rather than run with
    the pipe reachable. The child is the runner's: the code's os.wait() may see it (it ends
    when the host closes its input)."""
    import stat

    if not stat.S_ISFIFO(os.fstat(pipe).st_mode):
        return pipe
    import socket

    ours, theirs = socket.socketpair()
    if os.fork() == 0:
        try:
            import ctypes

            if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
                os.write(DIAG, b"runner: the input relay cannot make itself non-dumpable\n")
                real_exit(1)
            out = theirs.fileno()
            low, high = sorted((pipe, out))
            os.closerange(3, low)
            os.closerange(low + 1, high)
            os.closerange(high + 1, os.sysconf("SC_OPEN_MAX"))
            while True:
                view = memoryview(os.read(pipe, 65536))
                if not view:
                    break
                while view:
                    view = view[os.write(out, view):]
        except BaseException:
            real_exit(1)
        real_exit(0)
    theirs.close()
    ours.shutdown(socket.SHUT_WR)
    os.close(pipe)
    return ours.detach()


PROTO_IN = _relay_host_input(PROTO_IN)
