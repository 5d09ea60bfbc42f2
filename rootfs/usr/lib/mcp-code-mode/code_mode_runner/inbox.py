"""Reading from the host: a thread reads every line and checks it. Results go to the waiting
call's event loop (whichever loop made the call); start and cell messages go to the main
thread through `messages`. A line the runner cannot take ends it with status 2."""

import builtins
import json
import keyword
import queue
import re
import threading

from . import channel, wire

RUNNER_NAMES = ("ToolError", "TOOLS", "search_tools")
# A real dunder (`__class__`); `__`, `____` and `__class___` are not.
DUNDER = re.compile(r"__[^_](?:.*[^_])?__")


class ToolError(Exception):
    """A tool call the host refused, or that failed; the message is the host's (<= 500 chars)."""

    # The code's globals hold it: its tracebacks name it `ToolError`, and pickle finds it in
    # the code's __main__.
    __module__ = "__main__"


messages = queue.Queue()  # start/cell messages, then None at EOF
pending = {}  # call id -> (loop, future)
pending_lock = threading.Lock()
eof = threading.Event()


def bad_host_line(reason):
    channel.diag("bad line from the host: " + reason)
    channel.real_exit(2)


def reserved(name):
    """Whether a tool may not take `name`: a keyword (soft ones too), a builtin, a real dunder
    or one of the runner's names. The host's `is_reserved` (src/bridge/catalog/names.rs) is
    the same rule, so a name it hands out is never refused here."""
    return (
        keyword.iskeyword(name)
        or name in keyword.softkwlist
        or hasattr(builtins, name)
        or DUNDER.fullmatch(name) is not None
        or name in RUNNER_NAMES
    )


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
    limits = msg.get("limits", wire.DEFAULT_LIMITS)
    if not isinstance(limits, dict):
        bad_host_line("limits must be an object")
    for key in wire.DEFAULT_LIMITS:
        value = limits.get(key, wire.DEFAULT_LIMITS[key])
        if type(value) is not int or value <= 0:
            bad_host_line("limit " + key + " must be a positive int")


def _resolve(future, msg):
    if future.done():  # the waiting task was cancelled
        return
    if msg["ok"]:
        future.set_result(msg["value"])
    else:
        future.set_exception(ToolError(msg["error"]))


def reader():
    """The protocol-reader thread: every line from the host until EOF."""
    with open(channel.PROTO_IN, "rb", buffering=65536, closefd=False) as pipe:
        for raw in pipe:
            try:
                msg = json.loads(raw)
            except ValueError as error:
                bad_host_line("not JSON: " + str(error)[:200])
            kind = msg.get("type") if isinstance(msg, dict) else None
            if kind == "result":
                _check_result(msg)
                with pending_lock:
                    waiting = pending.pop(msg["id"], None)
                if waiting is None:
                    continue  # unknown or cancelled id: ignored
                loop, future = waiting
                try:
                    loop.call_soon_threadsafe(_resolve, future, msg)
                except RuntimeError:
                    pass  # that loop is closed; nobody is waiting any more
            elif kind == "start":
                _check_start(msg)
                messages.put(msg)
            elif kind == "cell":
                if not isinstance(msg.get("code"), str):
                    bad_host_line("cell needs a string code")
                messages.put(msg)
            else:
                bad_host_line("unknown message type")
    eof.set()
    with pending_lock:
        waiting = bool(pending)
    if waiting:  # calls can never be answered now
        channel.diag("the host closed the protocol with calls in flight")
        channel.real_exit(0)
    messages.put(None)

