"""Python builtins that are compositions rather than primitives, written in the compiled
subset (parsed into graphs where they are used, like frontend/numpy_functions.py).

`min(xs)` and `max(xs)` of one iterable compare the items one by one exactly as CPython
does (`item < best` keeps the first of equal items, and a NaN compares false), so the value
is CPython's; the gradient goes to the item chosen.  The items are those iteration gives
(`list(xs)`): a dict's keys, a view's keys or values, an array's rows.
"""


def min_of(xs):
    items = list(xs)
    if len(items) == 0:
        raise ValueError("min() arg is an empty sequence")
    best = items[0]
    for x in items:
        if x < best:
            best = x
    return best


def max_of(xs):
    items = list(xs)
    if len(items) == 0:
        raise ValueError("max() arg is an empty sequence")
    best = items[0]
    for x in items:
        if x > best:
            best = x
    return best
