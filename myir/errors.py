"""Errors that myir reports to its users, and the source locations they point at.

Every error a user can cause is a `MyirError` that names the construct, says where it is
(`file:line:col`), shows the source line with a caret under the offending column, and says
what to write instead.  Internal failures are bugs and stay ordinary exceptions.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Location:
    """A position in the user's source: 1-based line, 1-based column (as editors count)."""

    filename: str
    line: int
    column: int
    end_column: int | None = None

    def __str__(self) -> str:
        return f"{self.filename}:{self.line}:{self.column}"

    def source_line(self) -> str | None:
        text = linecache.getline(self.filename, self.line)
        return text.rstrip("\n") if text else None

    def excerpt(self) -> str:
        """The source line and a caret (or a run of carets) under the located construct."""
        text = self.source_line()
        if text is None:
            return ""
        width = 1
        if self.end_column is not None and self.end_column > self.column:
            width = self.end_column - self.column
        indent = "".join(c if c == "\t" else " " for c in text[: self.column - 1])
        return f"    {text}\n    {indent}{'^' * width}"


class MyirError(Exception):
    """An error in the user's program (or its use of myir), reported with its location.
    `notes`: (location, text) pairs for other places the error involves (the `if` whose
    branches gave a value the types that disagree), each shown with its source line."""

    def __init__(self, message: str, location: Location | None = None, hint: str | None = None,
                 notes: tuple = ()):
        self.message = message
        self.location = location
        self.hint = hint
        self.notes = tuple(notes)
        super().__init__(self._format())

    def _format(self) -> str:
        parts = []
        if self.location is not None:
            parts.append(f"{self.location}: {self.message}")
            excerpt = self.location.excerpt()
            if excerpt:
                parts.append(excerpt)
        else:
            parts.append(self.message)
        for location, text in self.notes:
            parts.append(f"{location}: note: {text}")
            excerpt = location.excerpt()
            if excerpt:
                parts.append(excerpt)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)


class MyirSyntaxError(MyirError):
    """A construct outside the compiled subset of Python, or a name that cannot be resolved."""


class MyirTypeError(MyirError):
    """A value of the wrong kind where the program needs another (found before or while running)."""


# The code of the functions that raise, for generated code, the exception CPython raises at
# the user's line (`raises_for_the_caller`).
_FOR_THE_CALLER: set = set()


def raises_for_the_caller(f):
    """Mark f as raising for its caller, a line of generated code that stands for a line of
    the user's file (unpacking the wrong number of values, reading a variable no path
    assigned, `raise` inside an expression of a gradient): `end_at_the_callers_line` cuts
    f's frame from the traceback, which then ends at the user's line, as CPython's does."""
    _FOR_THE_CALLER.add(f.__code__)
    return f


def end_at_the_callers_line(error: BaseException) -> None:
    """Cut from `error`'s traceback its innermost frame where it is a function marked by
    `raises_for_the_caller`."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        if tb.tb_next.tb_next is None and tb.tb_next.tb_frame.f_code in _FOR_THE_CALLER:
            tb.tb_next = None
            return
        tb = tb.tb_next
