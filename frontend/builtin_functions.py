"""Python builtins that are compositions rather than primitives, written in the compiled
subset (parsed into graphs where they are used, like frontend/numpy_functions.py).

`min(xs)` and `max(xs)` of one iterable compare the items one by one exactly as CPython
does (`item < best` keeps the first of equal items, and a NaN compares false), so the value
is CPython's; the gradient goes to the item chosen.  The items are those iteration gives
(`list(xs)`): a dict's keys, a view's keys or values, an array's rows.

`sorted(xs, key=..., reverse=...)` and the list methods that change a local list
(`xs.sort()`, `xs.reverse()`, `xs.insert(i, v)`, `xs.remove(v)`: frontend/parser.py's
`list_update`) take their positions from the helpers below.  The order is CPython's own
sort of the positions by item (`list_order`), so ties keep CPython's stable order and an
error comparing items is CPython's; the gradient of the sorted list goes back through the
permutation (`list_permute`'s rule).
"""

from myir.ir.primitives import PRIMITIVES

list_order = PRIMITIVES["list_order"]
list_permute = PRIMITIVES["list_permute"]


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


def sorted_of(iterable, key=None, reverse=False):
    items = list(iterable)
    return list_permute(items, sort_order(items, key, reverse))


def sort_order(items, key=None, reverse=False):
    """The positions of `items` in sorted order; `key` is called once per item, in order,
    as CPython calls it."""
    if key is None:
        return list_order(items, reverse)
    return list_order([key(x) for x in items], reverse)


def reversed_order(items):
    return list(range(len(items) - 1, -1, -1))


def insert_position(items, i):
    """Where `items.insert(i, v)` puts v: i counted from the end if negative, then clamped
    to the list, as CPython does."""
    n = len(items)
    if i < 0:
        i = i + n
        if i < 0:
            i = 0
    elif i > n:
        i = n
    return i


def remove_position(items, v):
    """The position of the first item equal to v, which `items.remove(v)` removes."""
    n = len(items)
    k = 0
    while k < n and not items[k] == v:
        k = k + 1
    if k == n:
        raise ValueError("list.remove(x): x not in list")
    return k
