"""A progress line for long compiles, so that a slow compile never looks like a hang.

The pipeline names each stage as it starts (`Progress.stage`: parse, recursion, expand,
optimize, infer, optimize_typed, tvm region k/n, codegen).  Nothing is shown for a compile that ends
within `AFTER_S` seconds, which is nearly all of them; past that, a timer thread shows the
stage running then and every stage after it, and the time so far.  On a terminal it is one
line on stderr, rewritten in place and cleared when the compile ends; where `\\r` does not
rewrite a line (a notebook, a log file, a pipe) each stage gets a plain line.

Where it is on: the command line (`python -m myir`) and notebooks (an IPython kernel);
plain library calls stay silent, as a library's should, unless MYIR_PROGRESS=1.
MYIR_PROGRESS=0 turns it off everywhere.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time

AFTER_S = 2.0
_shown_by_caller = [False]     # set by `shown()`: the command line


@contextlib.contextmanager
def shown():
    """Compiles within this block report their progress (unless MYIR_PROGRESS=0)."""
    before = _shown_by_caller[0]
    _shown_by_caller[0] = True
    try:
        yield
    finally:
        _shown_by_caller[0] = before


def enabled() -> bool:
    setting = os.environ.get("MYIR_PROGRESS")
    if setting is not None:
        return setting != "0"
    return _shown_by_caller[0] or _in_notebook()


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "ipykernel" in sys.modules \
        and type(shell).__name__ == "ZMQInteractiveShell"


class Progress:
    """The progress of one compile of `what`: call `stage(name)` as each stage starts and
    `done()` at the end (`with Progress(...)` does that)."""

    def __init__(self, what: str, stream=None, after: float = AFTER_S,
                 in_place: bool | None = None):
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.in_place = in_place if in_place is not None else \
            (not _in_notebook() and getattr(self.stream, "isatty", lambda: False)())
        self.current = ""
        self.visible = False
        self.width = 0      # of the line shown, to blank it out when rewriting in place
        self.start = time.perf_counter()
        self.lock = threading.Lock()
        self.timer = threading.Timer(after, self._show)
        self.timer.daemon = True
        self.timer.start()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.done()

    def stage(self, name: str) -> None:
        with self.lock:
            if name == self.current:
                return
            self.current = name
            if self.visible:
                self._write()

    def done(self) -> None:
        self.timer.cancel()
        with self.lock:
            if self.visible and self.in_place:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
            self.visible = False

    def _show(self) -> None:
        with self.lock:
            if not self.visible and self.current:
                self.visible = True
                self._write()

    def _write(self) -> None:
        text = (f"myir: compiling {self.what}: {self.current} "
                f"({time.perf_counter() - self.start:.1f} s)")
        if self.in_place:
            self.stream.write("\r" + text.ljust(self.width))
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


class Silent:
    """What a compile reports to when progress is off."""

    def stage(self, name: str) -> None:
        pass

    def done(self) -> None:
        pass

    def __enter__(self) -> "Silent":
        return self

    def __exit__(self, *exc) -> None:
        pass


def for_compile(what: str) -> Progress | Silent:
    """The reporter of one compile: a `Progress` where progress is on, else `Silent`."""
    return Progress(what, after=AFTER_S) if enabled() else Silent()
