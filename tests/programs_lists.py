"""Subjects of tests/test_lists.py: Python lists in compiled code."""

import numpy as np

from myir import grad


# ------------------------------------------------------------------ values

def literal_index(a, b):
    xs = [a, b * 2.0, 3.0]
    return xs[0] + xs[-1] * xs[1] + len(xs)


def literal_returned(a):
    return [a, a * a, [a, 1]]


def empty_list():
    return []


def slices(xs):
    return xs[1:], xs[:-1], xs[::2], xs[::-1], xs[5:]


def concat_repeat(xs, n):
    return xs + [1.0] + xs * n, [0] * 3


def iterate(xs):
    total = 0.0
    for v in xs:
        total = total + v * v
    return total


def zip_enumerate(xs, ys):
    total = 0.0
    for i, (x, y) in enumerate(zip(xs, ys)):
        total = total + i * x * y
    return total


def append_loop(a, n):
    xs = []
    for i in range(n):
        xs.append(a * i)
    return xs


def append_extend_pop(a):
    xs = [a, 2.0 * a]
    xs.extend([a * a, 3.0])
    xs.extend((4.0,))
    last = xs.pop()
    first = xs.pop(0)
    xs.append(last * first)
    return xs, last, first


def pop_empty(n):
    xs = [1.0] * n
    return xs.pop()


def index_out_of_range(xs, i):
    return xs[i]


def copy_then_append(xs):
    ys = list(xs)
    ys.append(1.0)
    return ys


def argument_copied_then_appended(xs):
    xs = list(xs)
    xs.append(0.5)
    return xs


def comprehension(xs, a):
    return [x * a for x in xs]


def comprehension_if_nested(xs, ys):
    return [x * y for x in xs if x > 0 for y in ys if y != x]


def comprehension_scope(x, xs):
    ys = [x * 2 for x in xs]
    return x, ys


def nested_comprehension(n):
    return [[i * j for j in range(i)] for i in range(n)]


def sums(xs, a):
    return sum(xs), sum(xs, a), sum([x * x for x in xs]), sum(x * a for x in xs)


def int_sum(n):
    return sum([i for i in range(n)])


def extrema(xs):
    return min(xs), max(xs), min([x * x for x in xs])


def empty_min(n):
    return min([1.0] * n)


def conversions(t, xs):
    return list(t), tuple(xs), list(range(3)), list(), tuple()


def unpack(xs):
    a, b = xs
    return b, a


def stack_of_list(xs, a):
    return np.stack([x * a for x in xs]), np.concatenate([x * a for x in xs]), \
        np.array([a, a * 2.0]), np.array([[a, 1.0], [2.0, a]])


def atleast(a, x):
    return np.atleast_1d(a), np.atleast_2d(x), np.atleast_3d(x), np.atleast_1d(x)


def list_of_arrays_param(ws, x):
    h = x
    for w in ws:
        h = np.tanh(w @ h)
    return h


def nested_param(layers):
    return [w * 2.0 for w, b in layers]


def add_list_tuple(xs, t):
    return xs + t


# ------------------------------------------------------------------ gradients

def loss_of_list(xs):
    return xs[0] * xs[1] + xs[-1] ** 2 + sum(xs)


def loss_comprehension(a):
    ys = [a * i for i in range(1, 5) if i != 2]
    return sum(ys) * ys[0] + max(ys) - min(ys)


def loss_append_pop(a, b):
    xs = [a]
    for i in range(3):
        xs.append(xs[-1] * b + 1.0)
    last = xs.pop()
    xs.extend([last, a * b])
    return sum(xs[1:]) + xs[0] * last


def loss_stack(xs, w):
    m = np.stack([x * w for x in xs])
    c = np.concatenate([x + w for x in xs])
    return np.sum(m * m) + np.sum(np.sin(c)) + np.sum(np.array([w[0], w[1] * w[1]]))


def loss_layers(ws, x):
    h = x
    for w in ws:
        h = np.tanh(w @ h)
    return np.sum(h * h)


def loss_conversions(t, a):
    xs = list(t)
    xs.append(a)
    u = tuple(xs)
    return u[0] * u[-1] + sum(u)


def loss_slices(xs):
    ys = xs[1:]
    ys.extend(xs[:1])
    return sum([y * x for x, y in zip(xs, ys)]) + xs[::-1][0] * xs[-2:][0]


def loss_grad_inside(xs, a):
    g = grad(loss_of_list, "xs")(xs)
    return g[0] * a + g[1]


def grad_of_list_inside(xs):
    return grad(loss_of_list, "xs")(xs)


def second_order(a):
    return grad(loss_comprehension)(a)


# ------------------------------------------------------------------ refused updates

def append_to_argument(xs):
    xs.append(1.0)
    return xs


def append_to_alias(a):
    xs = [a]
    ys = xs
    xs.append(2.0)
    return ys


def append_shared_in_tuple(a):
    xs = [a]
    t = (xs, 1)
    xs.append(2.0)
    return t


def identity(v):
    return v


def pop_shared_by_a_function(a):
    xs = [a, 2.0 * a]
    ys = identity(xs)
    xs.pop()
    return ys


def append_to_element(a):
    xs = [[a]]
    xs[0].append(1.0)
    return xs


def append_in_branch_copy(xs, c):
    if c:
        xs = list(xs)
    xs.append(1.0)
    return xs


def append_value_used(a):
    ys = [a]
    return ys.append(2.0)


def add_tuple_list(t, xs):
    return t + xs


def add_float_list(a, xs):
    return a + xs


def loss_numpy_of_lists(a, v):
    return np.sum([a, a * a]) + np.dot([a, 2.0, a * a], v) + np.mean(np.array([[a, 1.0],
                                                                                [2.0, a]]))


def loss_repeat(a):
    xs = [a, 2.0 * a] * 3
    ys = [a * i for i in range(3)]
    zs = 2 * ys
    return sum(xs) + xs[3] * xs[4] + sum(zs) * zs[-1]


def repeat_argument(xs, a):
    ys = xs * 2
    return ys[0] * a + ys[-1]


def read_in_an_exclusive_branch(a, k):
    """`ys` sees the list `xs.append` changes, but only in the `elif` the append never
    runs with."""
    xs = [a, 2.0 * a]
    ys = xs
    if k == 0:
        xs.append(3.0)
    elif k == 1:
        return ys[0] * a
    return xs[-1] * a


def shared_in_an_exclusive_branch(a, k):
    xs = [a, 2.0 * a]
    if k == 0:
        xs.append(3.0)
    elif k == 1:
        zs = [xs]
        return zs[0][0] * a
    return xs[-1] * a


def loss_slice_repeat_and_array(a):
    """A slice of a list repeated, and a list used by np.array and by other reads (their
    gradients, a list's and an array's rows, are added)."""
    xs = [a, 2.0 * a, 3.0]
    ys = xs[1:] + xs[:1] * 2
    rows = [np.array([a, 1.0]) * a, np.array([2.0, a])]
    return sum(ys) * ys[-2] + np.sum(np.array(rows) ** 2) + np.sum(rows[0])


def set_items(a):
    """`xs[i] = v`, `xs[i] op= v` and a slice assignment that shortens the list."""
    xs = [a, 2.0 * a, 3.0, 4.0]
    xs[1] = a * a
    xs[-1] += 1.0
    xs[0] *= 2.0
    xs[2:4] = [xs[3] * a]
    return xs, len(xs)


def set_items_of_unknown_length(a, n):
    xs = [a * i for i in range(n)]
    xs[0] = 1.5
    xs[1:] = [x * a for x in xs[1:]]
    return xs


def loss_slice_assignment(a):
    """Slice assignments that shorten, lengthen and keep a list's length: each item's
    gradient follows it to its new position."""
    xs = [a, 2.0 * a, 3.0, a * a]
    xs[1:3] = [a * 5.0]
    xs[:1] = [a, a * a * a]
    xs[::2] = [xs[0] * a, 7.0]
    return xs[0] + xs[1] * 10.0 + xs[2] * 100.0 + xs[3] * 1000.0


def shape_list(x):
    """A shape built as a list: np.reshape and np.zeros take it as numpy does."""
    shape = list(x.shape)
    shape.append(1)
    return x.reshape(shape), np.zeros([2, len(shape)])


def sum_of_comprehension(xs):
    """sum() of a list of floats of a length inference does not know: CPython's 0 (an int)
    if it is empty, else a float."""
    return sum([x * x for x in xs if x > 0])


def loss_set_items_of_unknown_length(a, n):
    xs = set_items_of_unknown_length(a, n)
    return sum(xs) * xs[-1]


def iterators_materialised(xs, ys):
    """list(), tuple(), sum() and dict() of zip, enumerate and reversed."""
    return list(zip(xs, ys)), tuple(enumerate(xs, 1)), list(reversed(xs)), \
        sum(reversed(ys)), dict(enumerate(ys)), dict(zip(("u", "v"), xs))


def loss_of_iterators(a):
    xs = [a, a * a, 3.0]
    d = dict(zip(("u", "v", "w"), xs))
    pairs = list(zip(xs, reversed(xs)))
    return d["u"] * d["v"] + sum([x * y for x, y in pairs]) + pairs[0][1]


def comprehension_lengths(xs, a):
    """Comprehensions without `if` over values of a known number: one item per value, a
    list of that length; with `if`, of a length inference does not know."""
    return [x * a for x in xs], [a * i for i in range(3)], \
        [x * y for x, y in zip(xs, (1.0, 2.0))], [x for x in xs if x > a]


def stacks_of_comprehensions(v):
    """numpy's stacks of a list a comprehension made: shapes known before running."""
    rows = [v * i for i in range(3)]
    return np.vstack(rows), np.stack(rows, axis=1), np.concatenate(rows), \
        np.column_stack(rows), np.dstack(rows), np.hstack(rows), np.array(rows)


def loss_stacks_of_comprehensions(v):
    total = 0.0
    for k, m in enumerate(stacks_of_comprehensions(v)):
        total = total + np.sum(m * m) * (k + 1)
    return total


def list_carried_by_a_loop(v, n):
    """A list a comprehension rebuilds at each step: its length stays known."""
    ps = [v, v * 2.0]
    for _ in range(n):
        ps = [p * 0.5 + 1.0 for p in ps]
    return ps


# ------------------------------------------------------------------ sorting and list methods

def sorts(xs):
    """sorted() with `reverse=` and `key=`: CPython's order, ties in their stable order."""
    return sorted(xs), sorted(xs, reverse=True), sorted(xs, key=abs), \
        sorted(xs, key=lambda v: -v, reverse=True), sorted(tuple(xs))


def sort_records(ps):
    return sorted(ps), sorted(ps, key=lambda p: p[1]), sorted(ps, key=lambda p: p[0],
                                                               reverse=True)


def list_methods(xs, v):
    ys = list(xs)
    ys.sort()
    ys.insert(1, v)
    ys.insert(-10, v * 2.0)
    ys.insert(100, 7.0)
    ys.insert(-1, 8.0)
    ys.reverse()
    ys.remove(7.0)
    ys.sort(key=lambda t: t * t, reverse=True)
    return ys


def remove_missing(xs):
    ys = list(xs)
    ys.remove(10.0)
    return ys


def sort_incomparable(a):
    ys = [a, "b"]
    ys.sort()
    return ys


def loss_sorted(xs):
    ys = sorted(xs)
    zs = sorted(xs, key=lambda v: v * v, reverse=True)
    return ys[0] * 1.0 + ys[1] * 10.0 + ys[2] * 100.0 + zs[0] * zs[1] + zs[2] * 0.5


def loss_list_methods(a):
    ys = [a, 2.0 * a, -a, 3.0]
    ys.sort()
    ys.insert(1, a * a)
    ys.reverse()
    ys.remove(3.0)
    ys.sort(key=lambda t: -t)
    return ys[0] + 10.0 * ys[1] + 100.0 * ys[2] + 1000.0 * ys[3]


def sort_argument(xs):
    xs.sort()
    return xs


def reverse_argument(xs):
    xs.reverse()
    return xs


def insert_shared(a):
    xs = [a, 2.0 * a]
    ys = xs
    xs.insert(0, 1.0)
    return ys


def remove_in_a_tuple(a):
    xs = [a, 2.0 * a]
    t = (xs, a)
    xs.remove(a)
    return t


def weighted_sorted(xs, reverse):
    ys = sorted(xs, reverse=reverse)
    return ys[0] * 1.0 + ys[1] * 10.0 + ys[2] * 100.0


def atleast_many(a, v, m):
    """np.atleast_1d/2d/3d of several arrays: numpy's tuple of each one's result."""
    x, y, z = np.atleast_1d(a, v, m)
    return x, y, z, np.atleast_2d(a, v), np.atleast_3d(v, m, a), np.atleast_1d(v)


def loss_atleast_many(a, v):
    x, y = np.atleast_2d(a, v * a)
    p, q = np.atleast_3d(v, a)
    return np.sum(x * y) + np.sum(p * q)


def sort_local_array(v):
    x = v * 2.0
    x.sort()
    return x


def sorted_of_iterators(xs, ys):
    """sorted() of a generator expression, of zip and enumerate, of a dict (its keys)."""
    return sorted(x * x for x in xs), sorted(zip(ys, xs)), sorted(enumerate(xs), reverse=True), \
        sorted({"b": 1, "a": 2})


def rows_appended(v, xs):
    """A loop appending one item at every step: the list's length is the loop's number of
    steps more (known for `range` of a constant, a list of known length)."""
    rows = []
    for i in range(3):
        rows.append(v * i)
    out = [v]
    for x in xs:
        h = v * x
        out.append(h)
    some = []
    for x in xs:
        if x > 0.0:
            some.append(x)
    first = []
    for x in xs:
        first.append(x)
        if x > 1.0:
            break
    return np.stack(rows), np.stack(out), some, first


def loss_repeat_sorted_and_appended(xs):
    """`* n` of a sorted list and of a list a loop appended to: lists the function made."""
    ys = sorted(xs)
    rows = []
    for x in xs:
        rows.append(x * x)
    return sum(ys * 2) + sum(rows * 3)
