"""Reading from the host: whoever waits for a line reads it. Between cells the main thread
reads (blocking) until the next start or cell. During a cell, each event loop that has made
a tool call watches the protocol descriptor (loop.add_reader), so a result wakes the loop
that waits for it and is handed to its future there, with no thread in between; a call
awaited while nothing else could move its loop is answered without a turn of the loop, its
task reading the lines itself (wait_here). Input that nobody reads for DRAIN_AFTER (the
waiting loop is blocked by the code, or no loop runs) is read by the drain thread, so the
host's writes never wait on the code. One reader at a time:
every line read is checked, a result goes to the future of its call (on its own loop,
whichever reader read it), start and cell messages wait in `messages` for the main thread.
A line the runner cannot take ends it with status 2. A result also frees its call's place in
the call window (send_call): the host serves at most `calls_in_flight` calls at once, and
calls past them wait here, unwritten, until a result comes."""

import builtins
import collections
import json
import json.scanner
import keyword
import os
import re
import select
import socket
import threading
import time
import weakref

from . import channel, wire

RUNNER_NAMES = ("ToolError", "TOOLS", "search_tools")


def _stdlib_modules():
    """The names of stdlib_modules.txt, beside this file: one a line, `#` comments. The host
    embeds the same file (src/bridge/catalog/stdlib_modules.rs)."""
    path = os.path.join(os.path.dirname(__file__), "stdlib_modules.txt")
    with open(path, encoding="utf-8") as f:
        lines = (line.strip() for line in f)
        return frozenset(line for line in lines if line and not line.startswith("#"))


# Top-level modules of Python's standard library: `import json` would replace a tool `json`.
STDLIB_MODULES = _stdlib_modules()
# A real dunder (`__class__`); `__`, `____` and `__class___` are not.
DUNDER = re.compile(r"__[^_](?:.*[^_])?__")
# Bytes asked for per read of the protocol.
READ_SIZE = 65536
# Seconds input may wait unread before the drain thread reads it.
DRAIN_AFTER = 0.01


class ToolError(Exception):
    """A tool call the host refused, or that failed; the message is the host's (<= 500 chars)."""

    # The code's globals hold it: its tracebacks name it `ToolError`, and pickle finds it in
    # the code's __main__.
    __module__ = "__main__"


messages = collections.deque()  # start/cell messages read, not yet taken by the main thread
pending = {}  # call id -> (loop, future); dict operations are atomic under the GIL
# The call window: the ids of this cell's calls written to the host whose result has not been
# read, at most wire.limits["calls_in_flight"] (the calls the host serves at once), and the
# calls beyond it, (id, line, loop) in order, waiting here for a result to make room. The
# host reads the runner's lines in order, so a call it cannot serve yet would hold back the
# output and the `done` written after it; held here, a call that waits is never in the way,
# and one still waiting when the cell ends is never written (nobody runs to await it). A held
# call goes out only while its loop runs (see _write_held), and never holds up the calls of
# other loops. All of these change under _window_lock, which is never held across a write.
unanswered = set()
held = collections.deque()
_queued = set()  # loops with a _write_held queued (call_soon_threadsafe) that has not run
_window_lock = threading.Lock()
eof = threading.Event()
# Set while the main thread is not reading the protocol (a cell runs): only then can input
# wait unread, so only then does the drain thread look. An idle sandbox, whose main thread
# waits in next_message, then costs no wake-ups.
_main_away = threading.Event()

# The protocol input is a socket (channel relays a pipe onto one), so a loop can read it
# without blocking (MSG_DONTWAIT) while the main thread reads it blocking between cells.
_sock = socket.socket(fileno=channel.PROTO_IN)
_read_lock = threading.Lock()  # held by whoever reads; `_buffer` is theirs meanwhile
_buffer = bytearray()  # bytes read after the last complete line
_reads = 0  # reads of the protocol so far
_DONTWAIT = int(socket.MSG_DONTWAIT)
PROTO_FD = _sock.fileno()  # the descriptor read (channel.PROTO_IN, or its relay)
_watched = weakref.WeakSet()  # the loops that watch the protocol (see watch)


def _nothing():
    return None


# A reference to the loop watch() last found watching, so that a loop's every call needs
# no look-up in _watched (a weak reference, so a dropped loop is not kept; reset by _unwatch).
_last_watched = _nothing
# loop -> a poll of the protocol and the loop's wake-up socket (see wait_here)
_pollers = weakref.WeakKeyDictionary()
# (a weak reference to the loop, its poll) of the last wait_here, so that the usual wait
# needs no look-up in _pollers
_last_poller = (_nothing, None)
_forked = False  # in a child made by os.fork: the protocol is its parent's to read


def _after_fork():
    global _forked, _window_lock
    _forked = True
    _window_lock = threading.Lock()  # another thread may have held it at the fork
    held.clear()  # calls of the parent's tasks
    _queued.clear()


def send_call(call_id, line, loop):
    """Write the line of a call made on `loop` now, if the window has room, else hold it until
    a result makes room. True when it was written."""
    with _window_lock:
        room = not held and len(unanswered) < wire.limits["calls_in_flight"]
        if room:
            unanswered.add(call_id)
        else:
            held.append((call_id, line, loop))
            # Room, yet calls wait: those of loops that are not running (see _write_held).
            passed_over = len(unanswered) < wire.limits["calls_in_flight"]
    if room:
        wire.write_line(line)
        return True
    if passed_over:
        _write_held(None)  # this loop runs: its call goes out past them
    return False


def _drop_loop(loop):
    """A closed `loop`'s held calls: nobody can await them any more, so they are dropped
    unwritten, and off `pending` (the caller holds _window_lock)."""
    index = 0
    while index < len(held):
        if held[index][2] is loop:
            pending.pop(held[index][0], None)
            del held[index]
        else:
            index += 1


def forget(call_id):
    """The call's task no longer waits for it: taken off `pending`, and off `held` if it was
    not written yet (then it never is)."""
    pending.pop(call_id, None)
    if held:
        with _window_lock:
            for index, entry in enumerate(held):
                if entry[0] == call_id:
                    del held[index]
                    break


def new_cell():
    """A cell begins: calls of the last one count no more (the host answers none of them
    after its `done`), and those it left waiting are dropped unwritten."""
    with _window_lock:
        unanswered.clear()
        held.clear()
        _queued.clear()


def _answered(call_id):
    """A result for `call_id` was read: its place in the window is free. Held calls are
    written by a loop that runs (never here: a reader that waited on a full pipe would stop
    reading the host's lines, which the host may wait on before it reads ours), so each loop
    with a held call gets a _write_held queued: one that runs writes them at once, one that
    is stopped (or whose thread the code blocks) when it runs again, while the others' go
    out meanwhile. A closed loop's held calls are dropped."""
    with _window_lock:
        if call_id not in unanswered:
            return
        unanswered.discard(call_id)
        if not held:
            return
        for loop in dict.fromkeys(entry[2] for entry in held):  # each once, in order
            if loop in _queued and not loop.is_closed():
                continue  # its _write_held has yet to run
            try:
                loop.call_soon_threadsafe(_write_held, loop)
                _queued.add(loop)
            except RuntimeError:  # that loop is closed: nobody waits for its calls
                _queued.discard(loop)
                _drop_loop(loop)


def _write_held(loop):
    """Write held calls, in order, while the window has room, passing over those of a loop
    that is not running: a stopped loop's wait until it runs again (the _write_held queued
    on it then writes them), so that they never hold up the calls of loops that run; a
    closed loop's are dropped. `loop` is the loop this was queued on, None when send_call
    calls it."""
    limit = wire.limits["calls_in_flight"]
    while True:
        with _window_lock:
            if loop is not None:
                _queued.discard(loop)
                loop = None
            entry = None
            index = 0
            while entry is None and index < len(held) and len(unanswered) < limit:
                owner = held[index][2]
                if owner.is_running():
                    entry = held[index]
                    del held[index]
                elif owner.is_closed():
                    # Its calls may stand before `index` too (it was passed over as stopped
                    # and closed since): the scan starts again, so none is skipped.
                    _drop_loop(owner)
                    index = 0
                else:
                    index += 1
            if entry is None:
                return
            unanswered.add(entry[0])
        wire.write_line(entry[1])


os.register_at_fork(after_in_child=_after_fork)


def bad_host_line(reason):
    channel.diag("bad line from the host: " + reason)
    channel.real_exit(2)


def reserved(name):
    """Whether a tool may not take `name`: a keyword (soft ones too), a builtin, a real dunder,
    a top-level module of the standard library or one of the runner's names. The host's
    `is_reserved` (src/bridge/catalog/names.rs) is the same rule over the same module list,
    so a name it hands out is never refused here."""
    return (
        keyword.iskeyword(name)
        or name in keyword.softkwlist
        or hasattr(builtins, name)
        or DUNDER.fullmatch(name) is not None
        or name in STDLIB_MODULES
        or name in RUNNER_NAMES
    )


def _check_start(msg):
    tools = msg.get("tools")
    if not isinstance(tools, list):
        bad_host_line("start needs a list of tools")
    for tool in tools:
        if not isinstance(tool, dict) or not all(
            isinstance(tool.get(k), str) for k in ("name", "stub", "summary")
        ):
            bad_host_line("each tool needs a string name, stub and summary")
        name = tool["name"]
        if not name.isidentifier() or reserved(name):
            bad_host_line("tool name is not a free Python identifier: " + name[:64])
    if type(msg.get("ready", False)) is not bool:
        bad_host_line("ready must be a bool")
    limits = msg.get("limits", wire.DEFAULT_LIMITS)
    if not isinstance(limits, dict):
        bad_host_line("limits must be an object")
    for key in wire.DEFAULT_LIMITS:
        value = limits.get(key, wire.DEFAULT_LIMITS[key])
        if type(value) is not int or value <= 0:
            bad_host_line("limit " + key + " must be a positive int")


def _resolve(future, ok, text):
    """Settle a call's `future` by its result: `text` is the value when `ok`, else the error."""
    if future.done():  # the waiting task was cancelled
        return
    if ok:
        future.set_result(text)
    else:
        future.set_exception(ToolError(text))


_decoder = json.JSONDecoder()
_scan_once = getattr(json.scanner, "c_make_scanner", lambda _: None)(_decoder)
_JSON_SPACE = " \t\n\r"


def _loads(raw):
    """json.loads(raw): the same value, and the same error for a line it refuses. A line
    that opens as an object (as every line of the host does) is read by the C scanner
    directly, without json.loads's Python layers (the encoding guess, the whitespace
    patterns); anything else, and any line the scanner refuses, goes through json.loads."""
    if _scan_once is not None and raw.startswith(b'{"'):
        try:
            text = raw.decode("utf-8", "surrogatepass")
            msg, end = _scan_once(text, 0)
        except (ValueError, StopIteration):
            pass
        else:
            if not text[end:].strip(_JSON_SPACE):
                return msg
    return json.loads(raw)


def _take(raw, reading_loop):
    """Check one line from the host and hand it on; `reading_loop` is the loop reading it
    (None for the main thread between cells)."""
    try:
        msg = _loads(raw)
    except ValueError as error:
        bad_host_line("not JSON: " + str(error)[:200])
    kind = msg.get("type") if isinstance(msg, dict) else None
    if kind == "result":
        call_id, ok = msg.get("id"), msg.get("ok")
        if type(call_id) is not int or type(ok) is not bool:
            bad_host_line("result needs an int id and a bool ok")
        field = "value" if ok else "error"
        text = msg.get(field)
        if not isinstance(text, str):
            bad_host_line("result needs a string " + field)
        if unanswered:
            _answered(call_id)
        waiting = pending.pop(call_id, None)
        if waiting is None:
            return  # unknown or cancelled id: ignored
        loop, future = waiting
        if loop is reading_loop:
            _resolve(future, ok, text)
            return
        try:
            loop.call_soon_threadsafe(_resolve, future, ok, text)
        except RuntimeError:
            pass  # that loop is closed; nobody is waiting any more
    elif kind == "start":
        _check_start(msg)
        messages.append(msg)
    elif kind == "cell":
        if not isinstance(msg.get("code"), str):
            bad_host_line("cell needs a string code")
        messages.append(msg)
    else:
        bad_host_line("unknown message type")


def _split(data, reading_loop):
    """Take each complete line of what was read so far plus `data`."""
    if not _buffer and data.endswith(b"\n") and data.count(b"\n") == 1:
        _take(data, reading_loop)  # the usual read: one whole line
        return
    seen = len(_buffer)
    _buffer.extend(data)
    start = 0
    end = _buffer.find(b"\n", seen)
    while end >= 0:
        _take(bytes(_buffer[start : end + 1]), reading_loop)
        start = end + 1
        end = _buffer.find(b"\n", start)
    del _buffer[:start]


def _at_eof():
    """The host closed the protocol: calls in flight can never be answered now."""
    eof.set()
    if pending:
        channel.diag("the host closed the protocol with calls in flight")
        channel.real_exit(0)


def _read_ready(reading_loop, until_empty):
    """Read and take what the host sent, without blocking (the caller holds `_read_lock`):
    one read, or with `until_empty` until nothing is left. False at the end of input."""
    global _reads
    while True:
        try:
            data = _sock.recv(READ_SIZE, _DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:  # the protocol is gone (the code closed it): as its end
            data = b""
        _reads += 1
        if not data:
            _at_eof()
            return False
        _split(data, reading_loop)
        if len(data) < READ_SIZE and not until_empty:
            return True  # all there was; a later line wakes the loop again


def _readable(loop):
    """`loop`'s callback while it watches the protocol: read what the host sent."""
    if eof.is_set():
        _unwatch(loop)
        return
    # A forked child leaves the protocol to its parent (and its loop's epoll set, shared
    # with the parent's loop, as it is).
    if _forked or not _read_lock.acquire(blocking=False):
        return  # someone else reads it
    try:
        if not _read_ready(loop, until_empty=False):
            _unwatch(loop)
    finally:
        _read_lock.release()


def watch(loop):
    """Make `loop` read the protocol whenever it waits and a line is there: once per loop,
    for its life (a closed loop drops its readers)."""
    global _last_watched
    if _last_watched() is loop:
        return
    if loop not in _watched:
        loop.add_reader(_sock, _readable, loop)
        _watched.add(loop)
    _last_watched = weakref.ref(loop)


def _unwatch(loop):
    global _last_watched, _last_poller
    _last_watched, _last_poller = _nothing, (_nothing, None)  # neither may name `loop` now
    loop.remove_reader(_sock)
    _watched.discard(loop)
    _pollers.pop(loop, None)


def wait_here(loop, future, alone):
    """Wait for `future` (a call's) on this thread, without a turn of `loop`: read the host's
    lines here and take each as `loop`'s reader would, until `future` is done. The caller
    holds `loop` still (it runs in one of its tasks), so this only stands in for the loop
    while `alone(loop)` says nothing else could move it: its own wake-up socket (another
    thread's call_soon_threadsafe, a signal asyncio watches) is watched with the protocol
    and ends the wait, as does another reader holding the protocol. True when `future` is
    done; False to leave the rest of the wait to the loop (`future` stays pending then).

    A signal handler that raises here (SIGINT's KeyboardInterrupt) is raised out of the
    loop, as it would have been from the loop's own wait, not into the task."""
    global _last_poller
    if _forked or not alone(loop):
        return False
    last_loop, poller = _last_poller
    if last_loop() is not loop:
        poller = _pollers.get(loop)
        if poller is None:
            poller = _pollers[loop] = select.poll()
            poller.register(_sock, select.POLLIN)
            poller.register(loop._ssock, select.POLLIN)
        _last_poller = (weakref.ref(loop), poller)
    while True:
        try:
            events = poller.poll()
        except (KeyboardInterrupt, SystemExit) as error:
            # The loop's Handle re-raises these two out of the loop.
            loop.call_soon(_raise, error.with_traceback(None))
            return False
        if len(events) != 1 or events[0][0] != PROTO_FD:
            return False  # the loop has something else to do (or the protocol is gone)
        if not _read_lock.acquire(blocking=False):
            return False  # someone else reads it; the result comes through the loop
        try:
            more = _read_ready(loop, until_empty=False)
        finally:
            _read_lock.release()
        if not more:
            _unwatch(loop)
            return False
        if future.done():
            return True
        if not alone(loop):
            return False


def _raise(error):
    raise error


def drain():
    """The drain thread: reads what waited unread for DRAIN_AFTER, so the host can always
    write its lines (a host whose writes wait stops reading the code's calls). That is input
    no loop reads: the loop that waits for it is busy (the code blocks it), or no loop runs
    (a plain cell). A result read here goes to its loop as a callback; EOF and bad lines end
    the runner as anywhere else."""
    poller = select.poll()
    poller.register(_sock, select.POLLIN)
    seen_waiting = None  # the read count when input was last seen waiting
    while not eof.is_set():
        _main_away.wait()
        time.sleep(DRAIN_AFTER)
        if not poller.poll(0):
            seen_waiting = None
        elif seen_waiting != _reads:
            seen_waiting = _reads  # give its reader DRAIN_AFTER more
        elif _read_lock.acquire(blocking=False):
            try:
                _read_ready(None, until_empty=True)
            finally:
                _read_lock.release()


def next_message():
    """The main thread's next start or cell message, read blocking; None at EOF, and in a
    child made by os.fork (the host's lines are its parent's)."""
    if _forked:
        return None
    _main_away.clear()
    try:
        return _next_message()
    finally:
        _main_away.set()


def _next_message():
    global _reads
    while True:
        if messages:
            return messages.popleft()
        if eof.is_set():
            return None
        with _read_lock:
            if messages or eof.is_set():
                continue  # another reader took it meanwhile
            try:
                data = _sock.recv(READ_SIZE)
            except OSError:  # the protocol is gone: as its end
                data = b""
            _reads += 1
            if data:
                _split(data, None)
            else:
                _at_eof()
