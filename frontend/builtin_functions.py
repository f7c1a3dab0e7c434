"""Python builtins that are compositions rather than primitives, written in the compiled
subset (parsed into graphs where they are used, like frontend/numpy_functions.py).

`min(xs)` and `max(xs)` of one iterable compare the items one by one exactly as CPython
does (`item < best` keeps the first of equal items, and a NaN compares false), so the value
is CPython's; the gradient goes to the item chosen.
"""


def min_of(xs):
    if len(xs) == 0:
        raise ValueError("min() arg is an empty sequence")
    best = xs[0]
    for x in xs:
        if x < best:
            best = x
    return best


def max_of(xs):
    if len(xs) == 0:
        raise ValueError("max() arg is an empty sequence")
    best = xs[0]
    for x in xs:
        if x > best:
            best = x
    return best
