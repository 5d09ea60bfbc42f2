"""The sandbox side of mcp-code-mode: runs the model's code, one cell at a time.

Started inside the sandbox as ``/usr/bin/python3 -I -S -B /runner.py`` with fd 0 = the
protocol from the host (a socket natively; on Docker a pipe, relayed onto a socket by a
child: see _relay_host_input), fd 1 = the protocol to the host, fd 2 = a diagnostics pipe.
The protocol is newline-delimited UTF-8 JSON, one object per line:

  host -> runner   {"type":"start","tools":[{"name","stub","summary","private","params"}...],
                    "limits":{"stdout_keep","stdout_stop","error_chars","max_line"},
                    "ready":true}
                   {"type":"cell","code":"..."}
                   {"type":"result","id":7,"ok":true,"value":"..."}
                   {"type":"result","id":8,"ok":false,"error":"..."}
  runner -> host   {"type":"ready"}
                   {"type":"began"}
                   {"type":"call","id":7,"tool":"add","args":{...}}
                   {"type":"output","text":"...","truncated":false}
                   {"type":"done","stdout":"...","error":null,"truncated":false,"stopped":false}

`output` streams what the capture keeps, as the code writes it, so the host still has it
when it must stop the cell (deadline, memory, crash), a last line without its newline
included: one message per write that keeps something (print writes its pieces one by one);
none once nothing more is kept, and all texts of a cell together are at most `stdout_keep`
bytes.
`truncated` becomes true, once, on the message after which output is dropped (its text may be
empty). None is sent after the cell's `done`, whose `stdout` is the whole kept output and
authoritative. A start without `max_line` (the host's line cap) means 1 MiB.

`ready` answers a start that asks for it (`"ready": true`, a pooled sandbox): it is sent
once, after the imports and the catalog are done, when the runner blocks on its first cell.

`began` is the first line of every cell, sent once the cell is read and before any of its
code runs: a sandbox that dies before it never ran the code (the host may run the cell
again in a fresh sandbox); one that dies after it ended the code's own way.

Every string sent is valid Unicode (no lone surrogates: the host's JSON reader refuses them),
and a call whose line the host could not read as sent (a lone surrogate, NaN, an integer
outside -2**63..2**64-1, nesting past the host's reader, a line over `max_line`) raises
ToolError in the code instead of being sent.

The host treats every line from here as untrusted: the code runs in this process and can
reach the private descriptors, so nothing here is a security boundary. What this file
does is keep honest output (print, subprocesses, C code) off the protocol pipe.

How the code can end: `exit()`, `quit()` (provided here: `-S` leaves them out of builtins),
`sys.exit(n)` and `raise SystemExit(n)` end the cell; `os._exit(n)` ends the cell and the
process (a child made by os.fork just exits). Status 0 or None is success; any other status
is the error "exited with status n" (a non-integer status is status 1, with its text).

Errors are the tail of the traceback with only the code's own frames (`<code>`), also in
the causes, contexts and sub-exceptions of an ExceptionGroup (asyncio.TaskGroup's).

Exit status: 0 on EOF from the host (or after a stop), 1 when the host went away mid-write
or the runner itself failed, 2 on a line from the host it cannot parse, n when the code
called os._exit(n).
Standard library only; Python >= 3.10.
"""

import os
import sys
import fcntl


_real_exit = os._exit  # the code's os._exit is replaced (see _code_exit)
_main_pid = os.getpid()


def _private_fd(fd):
    """A non-inheritable copy of `fd` numbered 3 or more."""
    return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)


# 1. Move the protocol (and the diagnostics pipe) to private descriptors, then point
#    0, 1 and 2 at /dev/null, before anything else can write to them.
PROTO_IN = _private_fd(0)
PROTO_OUT = _private_fd(1)
DIAG = _private_fd(2)
_null = os.open("/dev/null", os.O_RDWR)
for _fd in (0, 1, 2):
    os.dup2(_null, _fd)
if _null > 2:
    os.close(_null)


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
                _real_exit(1)
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
            _real_exit(1)
        _real_exit(0)
    theirs.close()
    ours.shutdown(socket.SHUT_WR)
    os.close(pipe)
    return ours.detach()


PROTO_IN = _relay_host_input(PROTO_IN)



def _seal_abi():
    """Add a seccomp filter that kills the whole process on a syscall made through another
    ABI than the native one (i386's int 0x80 on x86_64, or x32: a number with bit 30 set).

    The native launcher's filter already does (libseccomp's bad-arch action, kill-process).
    Docker's profile format has no bad-arch action, and runc leaves libseccomp's default,
    which kills only the calling thread: the runner would hang with its main thread gone.
    Filters stack and the strictest action wins, so this one decides for those syscalls on
    both backends. It is added before any thread starts, so every thread has it. Without
    no_new_privs or the prctl allowed it fails: the runner says so and goes on."""
    import ctypes
    import struct

    archs = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # AUDIT_ARCH_* (linux/audit.h)
    arch = archs.get(os.uname().machine)
    if arch is None:
        return
    ld_abs, jeq, jset, ret = 0x20, 0x15, 0x45, 0x06  # BPF_LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET|K
    kill, allow = 0x80000000, 0x7FFF0000  # SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ALLOW
    program = [
        (ld_abs, 0, 0, 4),  # A = seccomp_data.arch
        (jeq, 1, 0, arch),  # native: skip the kill
        (ret, 0, 0, kill),
        (ld_abs, 0, 0, 0),  # A = seccomp_data.nr
    ]
    if arch == archs["x86_64"]:
        program.append((jset, 0, 1, 0x40000000))  # __X32_SYSCALL_BIT: kill
        program.append((ret, 0, 0, kill))
    program.append((ret, 0, 0, allow))
    code = b"".join(struct.pack("=HBBI", *insn) for insn in program)
    buffer = ctypes.create_string_buffer(code, len(code))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(program), ctypes.addressof(buffer))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:  # PR_SET_SECCOMP, MODE_FILTER
        diag("could not add the ABI filter: errno %d" % ctypes.get_errno())


import ast  # noqa: E402  (imported after the descriptors are safe)

# asyncio imports ssl when it can, which maps OpenSSL's libraries: about 4 MiB of every idle
# pooled sandbox. The sandbox has no network, so asyncio gets no TLS (its ssl= arguments and
# start_tls fail); the code can still `import ssl` itself, which then loads it.
sys.modules["ssl"] = None
import asyncio  # noqa: E402

del sys.modules["ssl"]
import builtins  # noqa: E402
import codecs  # noqa: E402
import inspect  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import keyword  # noqa: E402
import linecache  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

RUNNER_FILE = __file__
CODE_FILE = "<code>"
RUNNER_NAMES = ("ToolError", "TOOLS", "search_tools")
DEFAULT_LIMITS = {
    "stdout_keep": 8192,
    "stdout_stop": 1048576,
    "error_chars": 2000,
    "max_line": 1048576,
}
TRACEBACK_LINES = 20
# An exception group (asyncio.TaskGroup's) keeps this many times more, for its sub-exceptions.
GROUP_LINES_FACTOR = 4
# A line of only carets and tildes, inside a group's margin too.
CARETS = re.compile(r"[\s|+]*[~^]+\s*")
# Integers the host's JSON reader (serde_json) keeps exactly: i64 and u64. Others would be
# rounded to a float, or refused as a line that is not JSON.
MIN_INT, MAX_INT = -(1 << 63), (1 << 64) - 1
# Nesting of `args` the host's reader takes (its limit is 128 levels for the whole line).
MAX_ARGS_DEPTH = 100
# A real dunder (`__class__`); `__`, `____` and `__class___` are not.
DUNDER = re.compile(r"__[^_](?:.*[^_])?__")
SURROGATES = re.compile("[\ud800-\udfff]")


def diag(text):
    """Best effort: one line on the private copy of the diagnostics pipe."""
    try:
        os.write(DIAG, ("runner: " + text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def bad_host_line(reason):
    diag("bad line from the host: " + reason)
    _real_exit(2)


def scalar(text):
    """`text` with each lone surrogate replaced by U+FFFD (the host takes only valid Unicode)."""
    return SURROGATES.sub("\ufffd", text)


def utf8(text):
    """`text` as UTF-8, a lone surrogate written as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return scalar(text).encode("utf-8")


def reserved(name):
    """Whether a tool may not take `name`: a keyword (soft ones too), a builtin, a real dunder
    or one of the runner's names. The host's `is_reserved` (src/bridge/names.rs) is the same
    rule, so a name it hands out is never refused here."""
    return (
        keyword.iskeyword(name)
        or name in keyword.softkwlist
        or hasattr(builtins, name)
        or DUNDER.fullmatch(name) is not None
        or name in RUNNER_NAMES
    )


# ---------------------------------------------------------------------------------------
# Writing to the host: whole lines, one writer at a time.

# One lock for the protocol pipe and the output capture, always taken first, so a thread
# that prints (and so sends `output`) never waits on a thread that waits on it. Reentrant: a
# signal handler may print in the middle of a send on its own thread; `_writing` then tells
# the capture to hold its output back rather than write inside a line.
_send_lock = threading.RLock()
_writing = False


def encode(message):
    """One protocol line, UTF-8. Raises TypeError/ValueError on values JSON lacks, and
    UnicodeEncodeError (a ValueError) on a lone surrogate."""
    text = json.dumps(message, ensure_ascii=False, allow_nan=False)
    return text.encode("utf-8") + b"\n"


def send(message):
    write_line(encode(message))


def write_line(data):
    global _writing
    with _send_lock:
        view = memoryview(data)
        outer, _writing = _writing, True
        try:
            while view:
                view = view[os.write(PROTO_OUT, view) :]
        except OSError as error:  # the host is gone: nobody is left to tell
            diag("failed to write to the host: " + str(error))
            _real_exit(1)
        finally:
            _writing = outer


# ---------------------------------------------------------------------------------------
# Reading from the host: a thread reads every line. Results go to the waiting call's
# event loop (whichever loop made the call); start and cell messages go to the main thread.


class ToolError(Exception):
    """A tool call the host refused, or that failed; the message is the host's (<= 500 chars)."""


_inbox = queue.Queue()  # start/cell messages, then None at EOF
_pending = {}  # call id -> (loop, future)
_pending_lock = threading.Lock()
_eof = threading.Event()


def _check_result(msg):
    if type(msg.get("id")) is not int or type(msg.get("ok")) is not bool:
        bad_host_line("result needs an int id and a bool ok")
    field = "value" if msg["ok"] else "error"
    if not isinstance(msg.get(field), str):
        bad_host_line("result needs a string " + field)


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
    limits = msg.get("limits", DEFAULT_LIMITS)
    if not isinstance(limits, dict):
        bad_host_line("limits must be an object")
    for key in DEFAULT_LIMITS:
        value = limits.get(key, DEFAULT_LIMITS[key])
        if type(value) is not int or value <= 0:
            bad_host_line("limit " + key + " must be a positive int")


def _resolve(future, msg):
    if future.done():  # the waiting task was cancelled
        return
    if msg["ok"]:
        future.set_result(msg["value"])
    else:
        future.set_exception(ToolError(msg["error"]))


def _reader():
    with open(PROTO_IN, "rb", buffering=65536, closefd=False) as pipe:
        for raw in pipe:
            try:
                msg = json.loads(raw)
            except ValueError as error:
                bad_host_line("not JSON: " + str(error)[:200])
            kind = msg.get("type") if isinstance(msg, dict) else None
            if kind == "result":
                _check_result(msg)
                with _pending_lock:
                    waiting = _pending.pop(msg["id"], None)
                if waiting is None:
                    continue  # unknown or cancelled id: ignored
                loop, future = waiting
                try:
                    loop.call_soon_threadsafe(_resolve, future, msg)
                except RuntimeError:
                    pass  # that loop is closed; nobody is waiting any more
            elif kind == "start":
                _check_start(msg)
                _inbox.put(msg)
            elif kind == "cell":
                if not isinstance(msg.get("code"), str):
                    bad_host_line("cell needs a string code")
                _inbox.put(msg)
            else:
                bad_host_line("unknown message type")
    _eof.set()
    with _pending_lock:
        waiting = bool(_pending)
    if waiting:  # calls can never be answered now
        diag("the host closed the protocol with calls in flight")
        _real_exit(0)
    _inbox.put(None)


# ---------------------------------------------------------------------------------------
# Tool calls.

_ids = itertools.count(1)
_limits = dict(DEFAULT_LIMITS)  # as the host's start sets them
_capture = None  # the Capture behind sys.stdout and sys.stderr


def _unsendable(why):
    return ToolError("arguments cannot be sent as JSON: " + why)


def _number(value):
    text = str(value)
    return text if len(text) <= 40 else "of %d digits" % len(text.lstrip("-"))


def call_line(call_id, tool, params):
    """The `call` line, or ToolError when the host could not read it as sent."""
    message = {"type": "call", "id": call_id, "tool": tool, "args": params}
    try:
        text = json.dumps(message, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as error:
        raise _unsendable(str(error)[:200]) from None
    try:
        line = text.encode("utf-8") + b"\n"
    except UnicodeEncodeError as error:
        char = error.object[error.start]
        raise _unsendable("a string holds the lone surrogate U+%04X" % ord(char)) from None
    if len(line) - 1 > _limits["max_line"]:
        raise ToolError(
            "arguments too large to send: the call would be a line of %d bytes; the limit is %s"
            % (len(line) - 1, _size(_limits["max_line"]))
        )
    # Read it back as the host will: integers exactly, and not nested too deep.
    try:
        pending = [(json.loads(text)["args"], 1)]
    except RecursionError:
        raise _unsendable("nested too deep") from None
    while pending:
        value, depth = pending.pop()
        if type(value) is int and not MIN_INT <= value <= MAX_INT:
            raise _unsendable(
                "the integer %s is outside -2**63..2**64-1 (send it as a string)" % _number(value)
            )
        if isinstance(value, (dict, list)):
            if depth > MAX_ARGS_DEPTH:
                raise _unsendable("nested more than %d levels deep" % MAX_ARGS_DEPTH)
            items = value.values() if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return line


async def _call(tool, params):
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    call_id = next(_ids)
    line = call_line(call_id, tool, params)
    if _eof.is_set():
        diag("a tool call after the host closed the protocol")
        _real_exit(0)
    with _pending_lock:
        _pending[call_id] = (loop, future)
    if _capture is not None:  # the host has the output so far if the call never returns
        _capture.flush()
    write_line(line)
    try:
        return await future
    finally:
        with _pending_lock:
            _pending.pop(call_id, None)


def _call_shape_error(name, params):
    """The TypeError for a call of the wrong shape, showing both right calls."""
    shown = [p for p in params if isinstance(p, str)][:3]
    as_dict = "{" + ", ".join("%s: ..." % json.dumps(p) for p in shown) + "}"
    words = [p for p in shown if p.isidentifier() and not keyword.iskeyword(p)]
    as_words = ", ".join("%s=..." % p for p in words)
    return TypeError(
        "%s() takes its arguments as one dict or as keywords: await %s(%s) or await %s(%s)"
        % (name, name, as_dict, name, as_words)
    )


def _make_tool(name, stub, params=()):
    async def tool(*args, **kwargs) -> str:
        # One dict, or keywords (`await add({"a": 1})` or `await add(a=1)`), not both.
        if not args:
            arguments = kwargs
        elif len(args) == 1 and not kwargs and isinstance(args[0], dict):
            arguments = args[0]
        else:
            raise _call_shape_error(name, params)
        return await _call(name, arguments)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = stub
    return tool


def _make_search(catalog):
    def search_tools(query):
        """Summary lines of the tools whose name (2 points) or stub (1 point) holds a
        word of `query`, best first; "" when none does. Never reaches the host."""
        words = list(dict.fromkeys(str(query).lower().split()))
        scored = []
        for index, tool in enumerate(catalog):
            name, stub = tool["name"].lower(), tool["stub"].lower()
            score = sum(2 if w in name else 1 if w in stub else 0 for w in words)
            if score > 0:
                scored.append((-score, index, tool["summary"]))
        return "\n".join(summary for _, _, summary in sorted(scored))

    return search_tools


# ---------------------------------------------------------------------------------------
# Output: sys.stdout and sys.stderr both write here, from any thread.


# Most bytes a writer's held output may reach before it is written anyway, in the middle of
# another writer's line (the memory a writer may pin; writers are threads, so at most the
# sandbox's pids limit of them).
LINE_HOLD = 64 * 1024

# The signal handler calls running on each thread, innermost last (see _signal): each
# call's output is a writer of its own, so it never lands in the middle of the line it
# interrupted, nor in that of another call of a handler at the same depth.
_handler_depth = threading.local()
_handler_calls = itertools.count(1)


def _writer():
    """Who is writing: the thread, and the signal handler call running on it, if any."""
    calls = getattr(_handler_depth, "calls", None)
    return (threading.get_ident(), calls[-1] if calls else 0)


class Capture(io.TextIOBase):
    """Keeps the first `keep` bytes of output as UTF-8 text and streams them to the host as
    `output` messages (line-buffered); at `stop` bytes written ends the process.

    Any thread may write, and lines are never broken: output goes out at once while the
    stream is at the start of a line or its open line is the writer's own (so a single
    writer's unterminated last line is streamed and survives a kill); another writer's output
    is held, in order, until that line is ended, then written. A writer is a thread, or a
    signal handler running on it (see _signal). Held output is written anyway past
    LINE_HOLD bytes, and at the end of the cell, after whatever line is open.

    A signal handler may also write in the middle of a write on its own thread (the lock is
    reentrant): its bytes wait in `later` until the write it interrupted is over, so what is
    kept and what is streamed stay in the same order."""

    def __init__(self, limits):
        self.keep = limits["stdout_keep"]
        self.stop = limits["stdout_stop"]
        self.lock = _send_lock  # see _send_lock: the capture sends while holding it
        self.buffer = _RawCapture(self)
        self.busy = False
        self.reset()

    def reset(self):
        """A new cell: nothing kept, and streaming on."""
        with self.lock:
            self.kept = []  # pieces of text kept, in order
            self.kept_bytes = 0
            self.total = 0  # bytes written, kept or not
            self.truncated = False  # something was dropped; nothing more is kept
            self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
            self.unsent = []  # kept pieces not yet streamed
            self.told_truncated = False
            self.streaming = True
            self.later = []  # (writer, bytes) written by a signal handler during a write
            self.owner = None  # the writer whose line is open, None at the start of a line
            self.held = {}  # writer -> [bytes, ...] held until the open line ends
            self.held_bytes = {}  # writer -> bytes held

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    def writable(self):
        return True

    def isatty(self):
        return False

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        self.write_bytes(utf8(text))
        return len(text)

    def write_bytes(self, data):
        writer = _writer()
        with self.lock:
            if self.busy:
                self.later.append((writer, bytes(data)))
                return
            self.busy = True
            try:
                self._line(writer, data)
                while self.later:
                    self._line(*self.later.pop(0))
            finally:
                self.busy = False

    def _line(self, writer, data):
        """Write `data` of `writer` now if the open line is its own (or none is), else hold
        it; then write held output while no line is open."""
        if not data:
            return
        if self.owner in (None, writer) and writer not in self.held:
            self._emit(writer, data)
        else:
            self.held.setdefault(writer, []).append(bytes(data))
            self.held_bytes[writer] = self.held_bytes.get(writer, 0) + len(data)
            if self.held_bytes[writer] > LINE_HOLD:
                self._emit_held(writer)
        while self.owner is None and self.held:
            self._emit_held(next(iter(self.held)))

    def _emit_held(self, writer):
        self.held_bytes.pop(writer, None)
        self._emit(writer, b"".join(self.held.pop(writer)))

    def _emit(self, writer, data):
        self.owner = None if data.endswith(b"\n") else writer
        self._write(data)

    def forked(self):
        """In a child made by os.fork: what other writers held is the parent's to write."""
        self.held = {}
        self.held_bytes = {}
        self.owner = None

    def flush(self):
        with self.lock:
            if self.busy:
                return
            self.busy = True
            try:
                self._stream()
            finally:
                self.busy = False

    def finish(self, error):
        """Send the cell's `done`; no `output` follows it until the next reset."""
        with self.lock:
            self.busy = True
            try:
                self._finish(error, stopped=False)
            finally:
                self.busy = False

    def _write(self, data):
        self._take(data)
        if self.total >= self.stop:
            # A BaseException could be caught by the code: report and leave at once.
            if _writing:  # a signal handler printed in the middle of a line
                diag("output limit exceeded in the middle of a protocol line")
                _real_exit(0)
            self._finish("output limit of %s exceeded" % _size(self.stop), stopped=True)
            _real_exit(0)
        self._stream()

    def _take(self, data):
        """Count `data` and keep what fits of it, cut on a character boundary."""
        self.total += len(data)
        if self.truncated:
            return
        room = self.keep - self.kept_bytes
        # Decoding never shortens: past room + 4 bytes the cut is certain.
        text = self.decoder.decode(data[: room + 4])
        self._keep(text)
        if len(data) > room + 4:
            self.truncated = True

    def _keep(self, text):
        """Keep what fits of `text` (valid Unicode), cut on a character boundary."""
        if not text or self.truncated:
            return
        data = text.encode("utf-8")
        room = self.keep - self.kept_bytes
        if len(data) > room:
            text = data[:room].decode("utf-8", "ignore")
            data = text.encode("utf-8")
            self.truncated = True
        if text:
            self.kept.append(text)
            self.unsent.append(text)
            self.kept_bytes += len(data)

    def _stream(self):
        """Send what was kept since the last `output`, a piece without a newline too (so a
        last line survives a kill), except in the middle of a line to the host on this
        thread (a signal handler that prints during a call): then a later write or `done`
        has it."""
        if not self.streaming or _writing:
            return
        if self.truncated == self.told_truncated and not self.unsent:
            return
        text = "".join(self.unsent)
        self.unsent = []
        self.told_truncated = self.truncated
        send({"type": "output", "text": text, "truncated": self.truncated})

    def _finish(self, error, stopped):
        while self.later:
            writer, data = self.later.pop(0)
            self.held.setdefault(writer, []).append(data)
        # The cell is over: what writers held follows whatever line is open.
        for chunks in self.held.values():
            self._take(b"".join(chunks))
        self.held = {}
        self.held_bytes = {}
        # An incomplete last character is dropped when output was cut, else replaced.
        self._keep(self.decoder.decode(b"", final=True))
        self.streaming = False
        self.unsent = []
        send(
            {
                "type": "done",
                "stdout": "".join(self.kept),
                "error": None if error is None else scalar(error),
                "truncated": self.truncated,
                "stopped": stopped,
            }
        )


class _RawCapture(io.RawIOBase):
    """`sys.stdout.buffer`: bytes written go to the same capture."""

    def __init__(self, capture):
        self.capture = capture

    def writable(self):
        return True

    def write(self, data):
        data = bytes(data)
        self.capture.write_bytes(data)
        return len(data)

    def flush(self):
        self.capture.flush()


_real_signal = signal.signal
_real_getsignal = signal.getsignal
_handlers = {}  # (signal number, the wrapper installed) -> the code's handler


def _signal(signum, handler):
    """signal.signal for the code: a Python handler runs as a writer of its own (see
    Capture), so what it prints never lands in the middle of the line it interrupted.
    signal.getsignal still gives the code's own handler."""
    installed = handler
    if callable(handler):

        def installed(sig, frame):
            # Each call is a writer of its own, nested ones too.
            calls = getattr(_handler_depth, "calls", None)
            if calls is None:
                calls = _handler_depth.calls = []
            calls.append(next(_handler_calls))
            try:
                return handler(sig, frame)
            finally:
                calls.pop()

    previous = _real_signal(signum, installed)
    previous = _handlers.pop((int(signum), previous), previous)
    if installed is not handler:
        _handlers[(int(signum), installed)] = handler
    return previous


def _getsignal(signum):
    current = _real_getsignal(signum)
    return _handlers.get((int(signum), current), current)


signal.signal = _signal
signal.getsignal = _getsignal


def _size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d bytes" % n


# ---------------------------------------------------------------------------------------
# Errors: the tail of the traceback, without the runner's own frames.


def _strip(exc, seen=None):
    """Keep only the code's own frames, in `exc` and in every exception linked to it (cause,
    context, the sub-exceptions of a group)."""
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


def _code_exit(status):
    """The code's os._exit: end the cell with its output and this status, then the process.
    A forked child, a non-int status, or a call in the middle of a line to the host (a
    signal handler) exits at once, as os._exit does."""
    if type(status) is int and os.getpid() == _main_pid and _capture is not None and not _writing:
        try:
            if _capture.streaming:
                _capture.finish(exit_error(status))
        except BaseException:  # exiting anyway; the host reports the status
            pass
    _real_exit(status)


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


# ---------------------------------------------------------------------------------------
# Cells: one globals dict and one event loop for the life of the process.


def run_cell(code_text, namespace, loop):
    """Runs one cell; returns the error text, or None when it succeeded."""
    linecache.cache[CODE_FILE] = (len(code_text), None, code_text.splitlines(True), CODE_FILE)
    try:
        code = compile(
            code_text, CODE_FILE, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
        )
        if code.co_flags & inspect.CO_COROUTINE:
            loop.run_until_complete(eval(code, namespace))
        else:
            exec(code, namespace)
    except BaseException as error:  # the code's failure, whatever it is, is its result
        # SystemExit or KeyboardInterrupt raised in a task leaves the loop stopped between
        # callbacks: those would raise it again in the next cell, so the next cell gets a
        # fresh loop.
        run_cell.loop_spoiled = not isinstance(error, Exception)
        return error_text(error, run_cell.error_chars)
    return None


run_cell.loop_spoiled = False


def main():
    global _capture
    _seal_abi()  # before any thread starts
    threading.Thread(target=_reader, name="protocol-reader", daemon=True).start()

    start = _inbox.get()
    if start is None:
        _real_exit(0)
    if start["type"] != "start":
        bad_host_line("the first message must be start")
    limits = dict(DEFAULT_LIMITS, **start.get("limits", {}))
    _limits.update(limits)
    run_cell.error_chars = limits["error_chars"]
    catalog = start["tools"]

    # The code's namespace is a fresh __main__ module, so pickle and `import __main__` see it.
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    os._exit = _code_exit
    for tool in catalog:
        params = tool.get("params")
        params = params if isinstance(params, list) else ()
        namespace[tool["name"]] = _make_tool(tool["name"], tool["stub"], params)
    namespace["ToolError"] = ToolError
    namespace["TOOLS"] = {tool["name"]: tool["stub"] for tool in catalog}
    namespace["search_tools"] = _make_search(catalog)
    sys.modules["__main__"] = module
    sys.argv = [""]

    capture = _capture = Capture(limits)
    os.register_at_fork(after_in_child=capture.forked)
    sys.stdout = sys.stderr = capture
    loop = asyncio.new_event_loop()
    if start.get("ready"):
        send({"type": "ready"})

    while True:
        msg = _inbox.get()
        if msg is None:
            _real_exit(0)
        if msg["type"] != "cell":
            bad_host_line("start may come only once")
        if loop.is_closed() or run_cell.loop_spoiled:  # keep serving with a new one
            loop = asyncio.new_event_loop()
            run_cell.loop_spoiled = False
        asyncio.set_event_loop(loop)
        capture.reset()
        send({"type": "began"})  # before any of the code runs
        error = run_cell(msg["code"], namespace, loop)
        capture.finish(error)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        diag("internal error:\n" + traceback.format_exc())
        _real_exit(1)
