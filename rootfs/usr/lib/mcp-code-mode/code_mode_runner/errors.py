"""How a cell's error is told: exits (exit(), quit(), sys.exit, os._exit) and tracebacks cut
to the code's own frames.

Importing this module puts exit and quit in builtins."""

import builtins
import os
import re
import traceback

from . import capture, channel, wire

CODE_FILE = "<code>"  # the file name the code is compiled under
TRACEBACK_LINES = 20
# An exception group (asyncio.TaskGroup's) keeps this many times more, for its sub-exceptions.
GROUP_LINES_FACTOR = 4
# A line of only carets and tildes, inside a group's margin too.
CARETS = re.compile(r"[\s|+]*[~^]+\s*")


def _strip(exc, seen=None):
    """Keep only the code's own frames (no runner module's, no standard library's), in `exc`
    and in every exception linked to it (cause, context, the sub-exceptions of a group)."""
    seen = set() if seen is None else seen
    if id(exc) in seen:
        return
    seen.add(id(exc))
    frames = [f for f in exc.stack if f.filename == CODE_FILE]
    exc.stack = traceback.StackSummary.from_list(frames)
    linked = [exc.__cause__, exc.__context__] + list(getattr(exc, "exceptions", None) or [])
    for other in linked:
        if other is not None:
            _strip(other, seen)


def exit_error(status):
    """The error for an exit with `status` (an int, None, or any object, as SystemExit
    takes): None for 0 and None."""
    if status is None or (type(status) is int and status == 0):
        return None
    if type(status) is int or (isinstance(status, int) and not isinstance(status, bool)):
        return "exited with status %d" % status
    return "exited with status 1: %s" % (status,)


def code_exit(status):
    """The code's os._exit: end the cell with its output and this status, then the process.
    A forked child, a non-int status, or a call in the middle of a line to the host (a
    signal handler) exits at once, as os._exit does."""
    live = capture.current
    main_process = os.getpid() == channel.main_pid
    if type(status) is int and main_process and live is not None and not wire.writing:
        try:
            if live.streaming:
                live.finish(exit_error(status))
        except BaseException:  # exiting anyway; the host reports the status
            pass
    channel.real_exit(status)


class _Exit:
    """`exit` and `quit`, as the site module would provide them: calling one raises
    SystemExit(code)."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code=None):
        raise SystemExit(code)


# `-S` leaves out site's exit and quit; the code expects them. As builtins they are
# reserved names, as they are on the host (src/bridge/catalog/names.rs).
builtins.exit = _Exit("exit")
builtins.quit = _Exit("quit")


def error_text(error, limit):
    """The error text of a cell that raised `error`: an exit's, or the traceback's last
    lines (only the code's frames, no caret lines), at most `limit` characters."""
    if isinstance(error, SystemExit):
        return exit_error(error.code)
    exc = traceback.TracebackException(type(error), error, error.__traceback__)
    _strip(exc)
    # Caret lines (`~~^~~`, Python 3.11+) say no more than the line above them, and differ
    # between Python versions: left out.
    lines = [l for l in "".join(exc.format()).splitlines() if not CARETS.fullmatch(l)]
    groups = getattr(builtins, "BaseExceptionGroup", ())
    keep = TRACEBACK_LINES * (GROUP_LINES_FACTOR if groups and isinstance(error, groups) else 1)
    text = "\n".join(lines[-keep:])
    return text[-limit:]

