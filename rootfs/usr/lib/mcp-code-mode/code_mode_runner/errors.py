"""How a cell's error is told: exits (exit(), quit(), sys.exit, os._exit) and tracebacks cut
to the code's own frames; how the runner ends when it fails itself (`runner_failed`).

Memory: under the rlimit fallback (no memory cgroup) the code's MemoryError, or a runaway
recursion under a raised recursion limit, leaves the process at its limit with the code's
frames still held by the traceback. Telling that error must not need much memory: only the
last CODE_FRAMES_KEPT of the code's frames are formatted, and when formatting still runs out
of memory the tracebacks are dropped (freeing the frames) and the reserve is given back, so a
short text can be made and `done` sent. Whatever the runner cannot survive ends it with
OUT_OF_MEMORY_STATUS, a fixed line on the diagnostics pipe, and nothing on the code's output.

Importing this module puts exit and quit in builtins."""

import builtins
import mmap
import os
import re
import sys
import traceback
import types

from . import capture, channel, wire

CODE_FILE = "<code>"  # the file name the code is compiled under
TRACEBACK_LINES = 20
# The innermost frames of the code's kept per exception, however deep its traceback: a
# runaway recursion has millions. Python's own RecursionError shows about this many.
CODE_FRAMES_KEPT = 1000
# Address space held back for telling an out-of-memory error (a private writable anonymous
# mapping, never touched: it counts against RLIMIT_DATA and RLIMIT_AS but uses no memory).
RESERVE_BYTES = 8 << 20
# The runner's exit status when it ran out of memory itself, without a result (the host
# reports it as such: src/run/ending.rs).
OUT_OF_MEMORY_STATUS = 3
# Said after an error whose traceback could not be formatted within the memory limit.
FRAMES_LEFT_OUT = "(its traceback was left out: formatting it ran out of memory)"
# An exception group (asyncio.TaskGroup's) keeps this many times more, for its sub-exceptions.
GROUP_LINES_FACTOR = 4
# A line of only carets and tildes, inside a group's margin too.
CARETS = re.compile(r"[\s|+]*[~^]+\s*")


def _linked(error):
    """`error` and every exception linked to it (cause, context, the sub-exceptions of a
    group), each once."""
    seen = set()
    todo = [error]
    while todo:
        exc = todo.pop()
        if not isinstance(exc, BaseException) or id(exc) in seen:
            continue
        seen.add(id(exc))
        yield exc
        todo += [exc.__cause__, exc.__context__]
        todo += list(getattr(exc, "exceptions", None) or [])


def _code_frames_only(error):
    """Cut the traceback of `error` and of every exception linked to it to the code's own
    frames (no runner module's, no standard library's), the innermost CODE_FRAMES_KEPT of
    them: walking a traceback needs no memory per frame, formatting one does. Returns how
    many of the code's frames the traceback of `error` itself had."""
    depth = 0
    for exc in _linked(error):
        kept = []
        count = 0
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == CODE_FILE:
                count += 1
                kept.append(tb)
                if len(kept) > 2 * CODE_FRAMES_KEPT:
                    del kept[:CODE_FRAMES_KEPT]
            tb = tb.tb_next
        chain = None
        for tb in reversed(kept[-CODE_FRAMES_KEPT:]):
            chain = types.TracebackType(chain, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
        exc.__traceback__ = chain
        if exc is error:
            depth = count
    return depth


def _depth_note(error, depth):
    """The line said after a traceback cut to CODE_FRAMES_KEPT frames of `depth`, or ''.
    Python 3.11 raises SystemError("error return without exception set") when it has no
    memory left for one more frame (no MemoryError): that is said as what it is."""
    if depth <= CODE_FRAMES_KEPT:
        return ""
    note = "(the traceback was %d frames deep: only the innermost %d are shown" % (
        depth,
        CODE_FRAMES_KEPT,
    )
    if type(error) is SystemError and str(error) == "error return without exception set":
        note += "; the recursion ran out of memory for its frames"
    return note + ")"


def _drop_tracebacks(error):
    """Drop the tracebacks of `error` and of every exception linked to it, which frees
    the frames they hold (a runaway recursion's fill the memory limit)."""
    for exc in _linked(error):
        exc.__traceback__ = None


def _take_reserve():
    try:
        return mmap.mmap(-1, RESERVE_BYTES, flags=mmap.MAP_PRIVATE)
    except (OSError, MemoryError, ValueError):
        return None


_reserve = _take_reserve()


def release_reserve():
    """Give the reserve back (see the module docs), if it is held."""
    global _reserve
    if _reserve is not None:
        _reserve.close()
        _reserve = None


def renew_reserve():
    """Take the reserve again after it was given back, when the memory is there."""
    global _reserve
    if _reserve is None:
        _reserve = _take_reserve()


def runner_failed():
    """The last resort when the runner itself fails (an exception out of its main loop or
    one of its threads): the traceback on the diagnostics pipe, then exit with status 1,
    or OUT_OF_MEMORY_STATUS for a MemoryError. Never raises, and writes nothing the capture
    would take as the code's output."""
    try:
        error = sys.exc_info()[1]
        status = OUT_OF_MEMORY_STATUS if isinstance(error, MemoryError) else 1
        sys.stdout = sys.stderr = None  # nothing reaches the capture from here
        release_reserve()
        try:
            channel.diag("internal error:\n" + traceback.format_exc())
        except BaseException:
            os.write(channel.DIAG, b"runner: internal error (out of memory to tell it)\n")
    except BaseException:
        status = OUT_OF_MEMORY_STATUS
    channel.real_exit(status)


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
    lines (only the code's frames, no caret lines), at most `limit` characters. Out of
    memory while formatting, the reserve is given back and it is tried again; then the same
    without the frames, with FRAMES_LEFT_OUT; then the exception's type alone."""
    if isinstance(error, SystemExit):
        return exit_error(error.code)
    for attempt in range(2):
        try:
            note = _depth_note(error, _code_frames_only(error))
            text = _traceback_text(error, limit + len(note) + 1)
            return (text + "\n" + note if note else text)[-limit:]
        except MemoryError:
            release_reserve()
        except Exception:  # a hostile exception (a property that raises): its type alone
            return ("%s (its traceback could not be formatted)" % type(error).__name__)[-limit:]
    _drop_tracebacks(error)
    try:
        return (_traceback_text(error, limit) + "\n" + FRAMES_LEFT_OUT)[-limit:]
    except MemoryError:
        return ("%s\n%s" % (type(error).__name__, FRAMES_LEFT_OUT))[-limit:]
    except Exception:
        return ("%s (its traceback could not be formatted)" % type(error).__name__)[-limit:]


def _traceback_text(error, limit):
    exc = traceback.TracebackException(type(error), error, error.__traceback__)
    # Caret lines (`~~^~~`, Python 3.11+) say no more than the line above them, and differ
    # between Python versions: left out.
    lines = [l for l in "".join(exc.format()).splitlines() if not CARETS.fullmatch(l)]
    groups = getattr(builtins, "BaseExceptionGroup", ())
    keep = TRACEBACK_LINES * (GROUP_LINES_FACTOR if groups and isinstance(error, groups) else 1)
    text = "\n".join(lines[-keep:])
    return text[-limit:]

