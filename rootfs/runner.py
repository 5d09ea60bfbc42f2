"""The sandbox side of mcp-code-mode: runs the model's code, one cell at a time.

Started inside the sandbox as ``/usr/bin/python3 -I -S -B /runner.py`` with fd 0 = the
protocol from the host (a socket natively; on Docker a pipe, relayed onto a socket by a
child: see channel._relay_host_input), fd 1 = the protocol to the host, fd 2 = a
diagnostics pipe.

This file is only the entry. The runner is the package `code_mode_runner` in
/usr/lib/mcp-code-mode (rootfs/usr/lib/mcp-code-mode in the repository), read-only like the
rest of the rootfs, with its bytecode precompiled there:

  channel   the private descriptors and the relay of the host's input (imported first)
  abi       the seccomp filter that kills the process on a foreign-ABI syscall
  wire      writing protocol lines; the limits; valid-Unicode helpers
  inbox     reading and checking the host's lines (by the loop that waits); ToolError
  tools     the tool functions, their `call` lines, search_tools
  capture   sys.stdout/sys.stderr: keeping, streaming and capping output; signal handlers
  errors    exits and tracebacks
  cells     the main loop: the start, the code's globals, one cell at a time
The protocol is newline-delimited UTF-8 JSON, one object per line:

  host -> runner   {"type":"start","tools":[{"name","stub","summary","private","params"}...],
                    "limits":{"stdout_keep","stdout_stop","error_chars","max_line"},
                    "ready":true}
                   {"type":"cell","code":"...","nonce":"..."}
                   {"type":"result","id":7,"ok":true,"value":"..."}
                   {"type":"result","id":8,"ok":false,"error":"..."}
  runner -> host   {"type":"ready"}
                   {"type":"began","nonce":"..."}
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
code runs, with the cell's `nonce` when it has one (the host tells this cell's lines from
lines written while no cell ran by it): a sandbox that dies before it never ran the code (the host may run the cell
again in a fresh sandbox); one that dies after it ended the code's own way.

Every string sent is valid Unicode (no lone surrogates: the host's JSON reader refuses them),
and a call whose line the host could not read as sent (a lone surrogate, NaN or an
infinity, an int too long for Python to write, nesting past the host's reader, a line over
`max_line`) raises ToolError in the code instead of being sent. Integers of any length are
sent as they are: the host reads them exactly.

The host treats every line from here as untrusted: the code runs in this process and can
reach the private descriptors, so nothing here is a security boundary. What the runner
does is keep honest output (print, subprocesses, C code) off the protocol pipe.

How the code can end: `exit()`, `quit()` (provided here: `-S` leaves them out of builtins),
`sys.exit(n)` and `raise SystemExit(n)` end the cell; `os._exit(n)` ends the cell and the
process (a child made by os.fork just exits). Status 0 or None is success; any other status
is the error "exited with status n" (a non-integer status is status 1, with its text).

Errors are the tail of the traceback with only the code's own frames (`<code>`), also in
the causes, contexts and sub-exceptions of an ExceptionGroup (asyncio.TaskGroup's).

Exit status: 0 on EOF from the host (or after a stop), 1 when the host went away mid-write
or the runner itself failed, 2 on a line from the host it cannot parse, 3 when the runner
ran out of memory itself (errors.runner_failed), n when the code called os._exit(n).
The runner's own failures go to the diagnostics pipe, never to the code's output.
Standard library only; Python >= 3.10.
"""

import os
import sys

# -I leaves this file's directory off sys.path: the package's directory is added here, and
# taken off again once the runner is imported, so the code sees Python's own sys.path.
RUNNER_LIB = os.path.join(os.path.dirname(__file__), "usr", "lib", "mcp-code-mode")
sys.path.append(RUNNER_LIB)

from code_mode_runner import channel  # noqa: E402  first: moves the protocol off 0, 1 and 2

# asyncio imports ssl when it can, which maps OpenSSL's libraries: about 4 MiB of every idle
# pooled sandbox. The sandbox has no network, so asyncio gets no TLS (its ssl= arguments and
# start_tls fail); the code can still `import ssl` itself, which then loads it.
sys.modules["ssl"] = None
import asyncio  # noqa: E402,F401

del sys.modules["ssl"]

from code_mode_runner import cells, errors  # noqa: E402

sys.path.remove(RUNNER_LIB)

if __name__ == "__main__":
    try:
        cells.main()
    except BaseException:
        errors.runner_failed()
