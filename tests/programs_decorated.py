"""Subjects compiled with the decorator forms of `myir.compile` (imported only by the tests
that need the compiler)."""

import myir


@myir.compile
def plain(x):
    return x * 2 + 1


@myir.compile(backend="python")
def with_backend(x, y=1):
    return x * 2 + y
