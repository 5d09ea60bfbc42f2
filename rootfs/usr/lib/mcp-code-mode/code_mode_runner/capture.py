"""Output: sys.stdout and sys.stderr both write to one Capture, from any thread; it keeps
what fits and streams it to the host as `output` lines, and ends the process at the
write cap. signal.signal is wrapped so a handler's output is a writer of its own."""

import codecs
import io
import itertools
import signal
import threading

from . import channel, wire

current = None  # the Capture behind sys.stdout and sys.stderr, once the start is read

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
        self.lock = wire.send_lock  # see wire.send_lock: the capture sends while holding it
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
        self.write_bytes(wire.utf8(text))
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

    def flush_unsent(self):
        """flush, when kept output waits unsent; otherwise nothing (no lock taken): a call
        made while nothing was printed since the last write costs no flush."""
        if self.unsent or self.truncated != self.told_truncated:
            self.flush()

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
            if wire.writing:  # a signal handler printed in the middle of a line
                channel.diag("output limit exceeded in the middle of a protocol line")
                channel.real_exit(0)
            self._finish("output limit of %s exceeded" % wire.size(self.stop), stopped=True)
            channel.real_exit(0)
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
        if not self.streaming or wire.writing:
            return
        if self.truncated == self.told_truncated and not self.unsent:
            return
        text = "".join(self.unsent)
        self.unsent = []
        self.told_truncated = self.truncated
        wire.send({"type": "output", "text": text, "truncated": self.truncated})

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
        wire.send(
            {
                "type": "done",
                "stdout": "".join(self.kept),
                "error": None if error is None else wire.scalar(error),
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
    signal.getsignal still gives the code's own handler. Python's own SIGINT handler
    (signal.default_int_handler, which asyncio.run puts back when it ends) prints nothing and
    is installed as it is."""
    installed = handler
    if callable(handler) and handler is not signal.default_int_handler:

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


def handlers_installed():
    """Whether a handler of the code's (one but Python's own) is installed by signal.signal."""
    return bool(_handlers)


def _getsignal(signum):
    current = _real_getsignal(signum)
    return _handlers.get((int(signum), current), current)


signal.signal = _signal
signal.getsignal = _getsignal

