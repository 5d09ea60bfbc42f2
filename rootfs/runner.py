"""The sandbox side of mcp-code-mode: runs the model's code, one cell at a time.

Started inside the sandbox as ``/usr/bin/python3 -I -S -B /runner.py`` with fd 0 = the
protocol from the host, fd 1 = the protocol to the host, fd 2 = a diagnostics pipe.
The protocol is newline-delimited UTF-8 JSON, one object per line:

  host -> runner   {"type":"start","tools":[{"name","stub","summary","private"}...],
                    "limits":{"stdout_keep","stdout_stop","error_chars"}}
                   {"type":"cell","code":"..."}
                   {"type":"result","id":7,"ok":true,"value":"..."}
                   {"type":"result","id":8,"ok":false,"error":"..."}
  runner -> host   {"type":"call","id":7,"tool":"add","args":{...}}
                   {"type":"done","stdout":"...","error":null,"truncated":false,"stopped":false}

The host treats every line from here as untrusted: the code runs in this process and can
reach the private descriptors, so nothing here is a security boundary. What this file
does is keep honest output (print, subprocesses, C code) off the protocol pipe.

Exit status: 0 on EOF from the host (or after a stop), 1 when the host went away mid-write
or the runner itself failed, 2 on a line from the host it cannot parse.
Standard library only; Python >= 3.10.
"""

import os
import sys
import fcntl


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

import ast  # noqa: E402  (imported after the descriptors are safe)
import asyncio  # noqa: E402
import builtins  # noqa: E402
import codecs  # noqa: E402
import inspect  # noqa: E402
import io  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import keyword  # noqa: E402
import linecache  # noqa: E402
import queue  # noqa: E402
import threading  # noqa: E402
import traceback  # noqa: E402
import types  # noqa: E402

RUNNER_FILE = __file__
CODE_FILE = "<code>"
RUNNER_NAMES = ("ToolError", "TOOLS", "search_tools")
DEFAULT_LIMITS = {"stdout_keep": 8192, "stdout_stop": 1048576, "error_chars": 2000}
TRACEBACK_LINES = 20


def diag(text):
    """Best effort: one line on the private copy of the diagnostics pipe."""
    try:
        os.write(DIAG, ("runner: " + text + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def bad_host_line(reason):
    diag("bad line from the host: " + reason)
    os._exit(2)


# ---------------------------------------------------------------------------------------
# Writing to the host: whole lines, one writer at a time.

_send_lock = threading.Lock()


def encode(message):
    """One protocol line; ASCII only. Raises TypeError/ValueError on values JSON lacks."""
    return (json.dumps(message, ensure_ascii=True, allow_nan=False) + "\n").encode("ascii")


def send(message):
    write_line(encode(message))


def write_line(data):
    with _send_lock:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(PROTO_OUT, view) :]
        except OSError as error:  # the host is gone: nobody is left to tell
            diag("failed to write to the host: " + str(error))
            os._exit(1)


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
        if (
            not name.isidentifier()
            or keyword.iskeyword(name)
            or (name.startswith("__") and name.endswith("__"))
            or name in RUNNER_NAMES
        ):
            bad_host_line("tool name is not a free Python identifier: " + name[:64])
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
        os._exit(0)
    _inbox.put(None)


# ---------------------------------------------------------------------------------------
# Tool calls.

_ids = itertools.count(1)


async def _call(tool, params):
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    call_id = next(_ids)
    try:
        line = encode({"type": "call", "id": call_id, "tool": tool, "args": params})
    except (TypeError, ValueError, RecursionError) as error:
        raise ToolError("arguments are not JSON: " + str(error)[:200]) from None
    if _eof.is_set():
        diag("a tool call after the host closed the protocol")
        os._exit(0)
    with _pending_lock:
        _pending[call_id] = (loop, future)
    write_line(line)
    try:
        return await future
    finally:
        with _pending_lock:
            _pending.pop(call_id, None)


def _make_tool(name, stub):
    async def tool(params: dict) -> str:
        return await _call(name, params)

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


class Capture(io.TextIOBase):
    """Keeps the first `keep` bytes of UTF-8 output; at `stop` bytes ends the process."""

    def __init__(self, limits):
        self.keep = limits["stdout_keep"]
        self.stop = limits["stdout_stop"]
        self.lock = threading.RLock()
        self.buffer = _RawCapture(self)
        self.reset()

    def reset(self):
        with self.lock:
            self.kept = bytearray()
            self.total = 0

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
        self.write_bytes(text.encode("utf-8", "replace"))
        return len(text)

    def write_bytes(self, data):
        with self.lock:
            room = self.keep - len(self.kept)
            if room > 0:
                self.kept += data[:room]
            self.total += len(data)
            if self.total >= self.stop:
                # A BaseException could be caught by the code: report and leave at once.
                error = "output limit of %s exceeded" % _size(self.stop)
                send(self.done(error, stopped=True))
                os._exit(0)

    def done(self, error, stopped=False):
        with self.lock:
            truncated = self.total > self.keep
            # Cut on a character boundary: an incomplete last character is dropped.
            decoder = codecs.getincrementaldecoder("utf-8")("replace")
            stdout = decoder.decode(bytes(self.kept), final=not truncated)
        return {
            "type": "done",
            "stdout": stdout,
            "error": error,
            "truncated": truncated,
            "stopped": stopped,
        }


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


def _size(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d bytes" % n


# ---------------------------------------------------------------------------------------
# Errors: the tail of the traceback, without the runner's own frames.


def _strip(exc):
    """Drop runner frames, and the plumbing above the first frame of the code."""
    frames = [f for f in exc.stack if f.filename != RUNNER_FILE]
    for i, frame in enumerate(frames):
        if frame.filename == CODE_FILE:
            frames = frames[i:]
            break
    exc.stack = traceback.StackSummary.from_list(frames)
    for linked in (exc.__cause__, exc.__context__):
        if linked is not None:
            _strip(linked)


def error_text(error, limit):
    if isinstance(error, SystemExit):
        if error.code is None or error.code == 0:
            return None
        return "SystemExit: %s" % (error.code,)
    exc = traceback.TracebackException(type(error), error, error.__traceback__)
    _strip(exc)
    lines = "".join(exc.format()).splitlines()[-TRACEBACK_LINES:]
    text = "\n".join(lines)
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
        return error_text(error, run_cell.error_chars)
    return None


def main():
    threading.Thread(target=_reader, name="protocol-reader", daemon=True).start()

    start = _inbox.get()
    if start is None:
        os._exit(0)
    if start["type"] != "start":
        bad_host_line("the first message must be start")
    limits = dict(DEFAULT_LIMITS, **start.get("limits", {}))
    run_cell.error_chars = limits["error_chars"]
    catalog = start["tools"]

    # The code's namespace is a fresh __main__ module, so pickle and `import __main__` see it.
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    for tool in catalog:
        namespace[tool["name"]] = _make_tool(tool["name"], tool["stub"])
    namespace["ToolError"] = ToolError
    namespace["TOOLS"] = {tool["name"]: tool["stub"] for tool in catalog}
    namespace["search_tools"] = _make_search(catalog)
    sys.modules["__main__"] = module
    sys.argv = [""]

    capture = Capture(limits)
    sys.stdout = sys.stderr = capture
    loop = asyncio.new_event_loop()

    while True:
        msg = _inbox.get()
        if msg is None:
            os._exit(0)
        if msg["type"] != "cell":
            bad_host_line("start may come only once")
        if loop.is_closed():  # the code closed it; keep serving with a new one
            loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        capture.reset()
        error = run_cell(msg["code"], namespace, loop)
        send(capture.done(error))


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        diag("internal error:\n" + traceback.format_exc())
        os._exit(1)
