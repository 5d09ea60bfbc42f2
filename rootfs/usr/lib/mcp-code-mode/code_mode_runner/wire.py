"""Writing to the host: whole protocol lines, one writer at a time; the limits the host's
`start` set; the text helpers every line needs (valid Unicode, sizes in words)."""

import json
import os
import re
import threading

from . import channel

DEFAULT_LIMITS = {
    "stdout_keep": 8192,
    "stdout_stop": 1048576,
    "error_chars": 2000,
    "max_line": 1048576,
    "calls_in_flight": 16,
}
limits = dict(DEFAULT_LIMITS)  # as the host's start sets them
SURROGATES = re.compile("[\ud800-\udfff]")


def scalar(text):
    """`text` with each lone surrogate replaced by U+FFFD (the host takes only valid Unicode)."""
    return SURROGATES.sub("\ufffd", text)


def utf8(text):
    """`text` as UTF-8, a lone surrogate written as U+FFFD."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return scalar(text).encode("utf-8")


def size(n):
    """`n` bytes in words: `8 KiB`, `1 MiB`, `1000 bytes`."""
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d bytes" % n


# One lock for the protocol pipe and the output capture, always taken first, so a thread
# that prints (and so sends `output`) never waits on a thread that waits on it. Reentrant: a
# signal handler may print in the middle of a send on its own thread; `writing` then tells
# the capture to hold its output back rather than write inside a line.
send_lock = threading.RLock()
writing = False


# json.dumps(message, ensure_ascii=False, allow_nan=False), without building an encoder for
# every line (json.dumps makes one per call when given options).
_encoder = json.JSONEncoder(ensure_ascii=False, allow_nan=False)
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_c_encode_str = getattr(json.encoder, "c_encode_basestring", None)


def _make_encoder(markers):
    return _c_make_encoder(
        markers,
        _encoder.default,
        _c_encode_str,
        None,
        _encoder.key_separator,
        _encoder.item_separator,
        False,
        False,
        False,
    )


# The C encoder for trees (see to_json): it keeps no memo, so one serves every line, on
# every thread.
_tree_encode = _make_encoder(None) if _c_make_encoder and _c_encode_str else None


def _tree_json(value):
    """`value` (a tree: see to_json) as JSON text, as _encoder.encode writes it."""
    return "".join(_tree_encode(value, 0))


# _tree_json, or None where json has no C encoder (then to_json is the way).
tree_json = _tree_json if _tree_encode is not None else None


def to_json(message, tree=False):
    """`message` (a dict) as _encoder.encode writes it, the same text and the same errors:
    its C encoder called directly, without the Python layers JSONEncoder.encode goes
    through on every line. With `tree` the caller knows `message` is a tree of dicts and
    lists (no container inside itself), so no circular-reference memo is kept and one
    encoder serves every line; otherwise a fresh memo each time, as JSONEncoder.encode."""
    if _tree_encode is None:
        return _encoder.encode(message)
    if tree:
        return "".join(_tree_encode(message, 0))
    return "".join(_make_encoder({})(message, 0))


def encode(message):
    """One protocol line, UTF-8, of a message the runner built (a tree: see to_json).
    Raises TypeError/ValueError on values JSON lacks, and UnicodeEncodeError (a
    ValueError) on a lone surrogate."""
    return to_json(message, tree=True).encode("utf-8") + b"\n"


def send(message):
    write_line(encode(message))


def write_line(data):
    global writing
    with send_lock:
        outer, writing = writing, True
        try:
            written = os.write(channel.PROTO_OUT, data)  # a line is usually written whole
            if written < len(data):
                view = memoryview(data)[written:]
                while view:
                    view = view[os.write(channel.PROTO_OUT, view) :]
        except OSError as error:  # the host is gone: nobody is left to tell
            channel.diag("failed to write to the host: " + str(error))
            channel.real_exit(1)
        finally:
            writing = outer
