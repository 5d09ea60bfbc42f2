"""The main loop: reads the start, builds the code's globals, then runs one cell at a time
with one globals dict and one event loop for the life of the process."""

import ast
import asyncio
import builtins
import inspect
import linecache
import os
import sys
import threading
import types

from . import abi, capture, channel, errors, inbox, tools, wire
from .errors import CODE_FILE, code_exit, error_text
from .inbox import ToolError, bad_host_line


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


def _runner_thread(target):
    """`target` as a runner thread's body: its failure ends the runner as the main loop's
    does (errors.runner_failed), rather than print into the code's output and leave the
    runner without the thread."""

    def run():
        try:
            target()
        except BaseException:
            errors.runner_failed()

    return run


def main():
    """Serves the host until it closes the protocol (exit status 0)."""
    abi.seal_abi()  # before any thread starts
    threading.Thread(target=_runner_thread(inbox.drain), name="protocol-drain", daemon=True).start()

    start = inbox.next_message()
    if start is None:
        channel.real_exit(0)
    if start["type"] != "start":
        bad_host_line("the first message must be start")
    limits = dict(wire.DEFAULT_LIMITS, **start.get("limits", {}))
    wire.limits.update(limits)
    run_cell.error_chars = limits["error_chars"]
    catalog = start["tools"]

    # The code's namespace is a fresh __main__ module, so pickle and `import __main__` see it.
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    os._exit = code_exit
    for tool in catalog:
        params = tool.get("params")
        params = params if isinstance(params, list) else ()
        namespace[tool["name"]] = tools.make_tool(tool["name"], tool["stub"], params)
    namespace["ToolError"] = ToolError
    namespace["TOOLS"] = {tool["name"]: tool["stub"] for tool in catalog}
    namespace["search_tools"] = tools.make_search(catalog)
    sys.modules["__main__"] = module
    sys.argv = [""]

    output = capture.current = capture.Capture(limits)
    os.register_at_fork(after_in_child=output.forked)
    sys.stdout = sys.stderr = output
    loop = asyncio.new_event_loop()
    if start.get("ready"):
        wire.send({"type": "ready"})

    while True:
        msg = inbox.next_message()
        if msg is None:
            channel.real_exit(0)
        if msg["type"] != "cell":
            bad_host_line("start may come only once")
        if loop.is_closed() or run_cell.loop_spoiled:  # keep serving with a new one
            loop = asyncio.new_event_loop()
            run_cell.loop_spoiled = False
        asyncio.set_event_loop(loop)
        output.reset()
        inbox.new_cell()
        began = {"type": "began"}
        if "nonce" in msg:
            began["nonce"] = msg["nonce"]
        wire.send(began)  # before any of the code runs
        error = run_cell(msg["code"], namespace, loop)
        output.finish(error)
        errors.renew_reserve()  # when telling an error out of memory gave it back
