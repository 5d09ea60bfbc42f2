"""Tool calls: the async functions the code calls its tools by, the `call` lines they send
(only lines the host can read as sent), and search_tools."""

import asyncio
import itertools
import json
import keyword
import os
import threading
import weakref

from . import capture, channel, inbox, wire
from .inbox import ToolError

# The host reads integers of any length exactly, as written, so an int is sent as it is
# (one past Python's int-to-text limit, 4300 digits, cannot be written: ValueError).

# Nesting of `args` the host's reader takes (its limit is 128 levels for the whole line).
MAX_ARGS_DEPTH = 100

_ids = itertools.count(1)


def _unsendable(why):
    return ToolError("arguments cannot be sent as JSON: " + why)


# The call line's text as the runner's encoder writes {"type", "id", "tool", "args"}.
_CALL_TEXT = '{"type": "call", "id": %d, "tool": %s, "args": %s}'


def call_line(call_id, tool, params, tool_json=None):
    """The `call` line, or ToolError when the host could not read it as sent; `tool_json`
    is the tool's name as JSON text when the caller has it already."""
    # Plain arguments are a tree (nested at most MAX_ARGS_DEPTH deep, so in none of
    # themselves): they need no circular-reference memo and no read-back, and the line is
    # their JSON in the call's fixed frame (the same text as the whole message encoded).
    plain = _reads_back_as_is(params)
    try:
        if plain and wire.tree_json is not None:
            if tool_json is None:
                tool_json = wire.tree_json(tool)
            text = _CALL_TEXT % (call_id, tool_json, wire.tree_json(params))
        else:
            message = {"type": "call", "id": call_id, "tool": tool, "args": params}
            text = wire.to_json(message, tree=plain)
    except (TypeError, ValueError, RecursionError) as error:
        raise _unsendable(str(error)[:200]) from None
    try:
        line = text.encode("utf-8") + b"\n"
    except UnicodeEncodeError as error:
        char = error.object[error.start]
        raise _unsendable("a string holds the lone surrogate U+%04X" % ord(char)) from None
    if len(line) - 1 > wire.limits["max_line"]:
        raise ToolError(
            "arguments too large to send: the call would be a line of %d bytes; the limit is %s"
            % (len(line) - 1, wire.size(wire.limits["max_line"]))
        )
    if plain:
        return line
    # Read it back as the host will: not nested too deep.
    try:
        pending = [(json.loads(text)["args"], 1)]
    except RecursionError:
        raise _unsendable("nested too deep") from None
    while pending:
        value, depth = pending.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_ARGS_DEPTH:
                raise _unsendable("nested more than %d levels deep" % MAX_ARGS_DEPTH)
            items = value.values() if isinstance(value, dict) else value
            pending.extend((item, depth + 1) for item in items)
    return line


def _reads_back_as_is(params):
    """Whether `params` is read back from its JSON as it is and passes the read-back check
    of call_line: only dicts with str keys, lists, str, bool, None, float and int, each of
    exactly that type, nested at most MAX_ARGS_DEPTH deep. Anything
    else (a subclass, a tuple, a key that is not a str) goes through the read-back, which
    gives the error, if any."""
    if type(params) is dict:  # the usual arguments: a dict of strings, numbers, bools, None
        for key, value in params.items():
            kind = type(value)
            if type(key) is not str or not (
                kind is str
                or kind is bool
                or kind is float
                or kind is int
                or value is None
            ):
                break
        else:
            return True
    pending = [(params, 1)]
    while pending:
        value, depth = pending.pop()
        kind = type(value)
        if kind is str or kind is bool or kind is float or kind is int or value is None:
            continue
        if depth > MAX_ARGS_DEPTH:
            return False
        if kind is dict:
            for key, item in value.items():
                if type(key) is not str:
                    return False
                pending.append((item, depth + 1))
        elif kind is list:
            pending.extend((item, depth + 1) for item in value)
        else:
            return False
    return True


def _no_loop():
    return None


# The loop _send last ran on, as a weak reference (a dropped loop is not kept); _no_loop
# before the first call and in a child made by os.fork.
_last_loop = _no_loop
_get_ident = threading.get_ident


def _forget_loop():
    global _last_loop
    _last_loop = _no_loop


os.register_at_fork(after_in_child=_forget_loop)


def _running_loop():
    """asyncio.get_running_loop(), without the getpid() system call it makes (it checks the
    loop was not started by the parent of a fork) when the loop is the one the last call ran
    on: a selector loop is running on this thread exactly while its `_thread_id` is this
    thread's (run_forever sets it and clears it), and one loop runs on a thread at a time.
    A fork forgets the loop, so a child gets asyncio's own answer (no running loop)."""
    global _last_loop
    loop = _last_loop()
    if loop is not None and loop._thread_id == _get_ident():
        return loop
    loop = asyncio.get_running_loop()
    if type(loop) is _LOOP_TYPE:
        _last_loop = weakref.ref(loop)
    return loop


def _send(tool, params, tool_json=None):
    """Send a call of `tool` and, when it is alone, wait for its answer here: (its id, its
    future), the future done when answered. A call awaited alone is answered without
    suspending the task: that saves the two turns of the loop (the reader's, then the
    task's), each with its epoll_wait. Otherwise the caller awaits the future and then takes
    the call's id off `inbox.pending`."""
    loop = _running_loop()
    future = loop.create_future()
    call_id = next(_ids)
    line = call_line(call_id, tool, params, tool_json)
    if inbox.eof.is_set():
        channel.diag("a tool call after the host closed the protocol")
        channel.real_exit(0)
    inbox.watch(loop)  # the result wakes this loop
    alone = not inbox.pending  # no other call in flight, on any loop
    inbox.pending[call_id] = (loop, future)
    try:
        if capture.current is not None:  # the host has the output so far if it never returns
            capture.current.flush_unsent()
        # Written now unless the window is full (then held until a result makes room).
        if inbox.send_call(call_id, line, loop) and alone:
            inbox.wait_here(loop, future, _runs_alone)
    except BaseException:
        inbox.forget(call_id)
        raise
    return call_id, future


_LOOP_TYPE = asyncio.SelectorEventLoop  # the loop the runner makes (asyncio.new_event_loop)


def _runs_alone(loop):
    """Whether nothing but the host's answer could move `loop` (running the calling task) on
    before that answer: no callback ready, no timer (asyncio.sleep, wait_for and timeout make
    one), no descriptor watched but the protocol and the loop's own wake-up socket (a
    subprocess's pipes, a socket, a child watcher), no stop asked for, no cancellation of the
    task pending, no debug mode (it times each step), no task factory, and no signal handler
    of the code's (one may raise into the loop's wait). The loop's private attributes are
    those of asyncio's selector loop in Python 3.10 to 3.13; where one is missing, False."""
    try:
        if (
            type(loop) is not _LOOP_TYPE
            or loop._ready
            or loop._scheduled
            or loop._stopping
            or loop._debug
            or loop._task_factory is not None
            or capture.handlers_installed()
        ):
            return False
        task = asyncio.current_task(loop)
        if type(task) is not asyncio.Task or task._must_cancel:
            return False
        watched = loop._selector._fd_to_key
        return len(watched) == 2 and inbox.PROTO_FD in watched and loop._ssock.fileno() in watched
    except AttributeError:
        return False


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


def make_tool(name, stub, params=()):
    """The async function the code calls the tool `name` by; `stub` is its docstring.
    `params` are the tool's parameter names (the host lists `params` whenever the schema
    names it)."""
    name_json = wire.tree_json(name) if wire.tree_json is not None else None
    # The stub reads `async def add(params: dict)`, so `add(params={...})` passes the dict
    # itself, as Python would, unless the tool has a parameter called `params`.
    params_is_the_dict = "params" not in params

    async def tool(*args, **kwargs) -> str:
        # One dict, or keywords (`await add({"a": 1})` or `await add(a=1)`), not both.
        if not args:
            arguments = kwargs
            if (
                params_is_the_dict
                and len(kwargs) == 1
                and isinstance(kwargs.get("params"), dict)
            ):
                arguments = kwargs["params"]
        elif len(args) == 1 and not kwargs and isinstance(args[0], dict):
            arguments = args[0]
        else:
            raise _call_shape_error(name, params)
        # One coroutine per call (this one): the call is sent, and answered when alone, by
        # a plain function.
        call_id, future = _send(name, arguments, name_json)
        if future.done():
            return future.result()
        try:
            return await future
        finally:
            inbox.forget(call_id)

    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = stub
    tool.__module__ = "__main__"  # as the code's own functions, for pickle
    return tool


def make_search(catalog):
    """search_tools over `catalog` (the start's tools)."""

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

    search_tools.__module__ = "__main__"
    return search_tools

