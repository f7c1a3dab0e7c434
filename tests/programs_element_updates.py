"""Subjects of tests/test_element_updates.py: element and slice assignment on local values,
`op=` on fresh arrays, and the aliases that make an update an error.  A line where an error
is expected ends with `# error`."""

import numpy as np

import myir


# ------------------------------------------------------------------------------ values

def fill_loop(n):
    y = np.zeros(n)
    for i in range(n):
        y[i] = i * i + 0.5
    return y


def from_copy(x):
    y = x.copy()
    y[0] = 5.0
    y[-1] = -1.0
    return y


def from_np_copy(x):
    y = np.copy(x)
    y[1] = y[0] + y[-1]
    return y


def slices(x):
    y = np.zeros(6)
    y[1:4] = x[:3]
    y[4:] = 2.0
    y[::-2] += 1.0
    return y


def two_d(n, m):
    y = np.zeros((n, m))
    for i in range(n):
        for j in range(m):
            y[i, j] = i * 10 + j
    return y


def rows_and_columns(x):
    y = np.ones((3, 4))
    y[1] = x
    y[:, 0] = 0.0
    y[-1, 1:3] = x[:2] * 2.0
    return y


def element_ops(x):
    y = x * 1.0
    y[1] += 3.0
    y[0] *= 2.0
    y[2:] -= 1.0
    y[-1] /= 4.0
    return y


def int_array(n):
    y = np.zeros(n, dtype=np.int64)
    for i in range(n):
        y[i] = i * 1.7
    y[0] += 7
    return y


def int_slice_in_place(v):
    """`y[a:b] op= v` updates the array `y[a:b]` in place: numpy keeps its dtype, and
    refuses (UFuncTypeError) a float result in an int array."""
    y = np.arange(5)
    y[1:3] += v
    y[3:] *= v
    return y


def int_element_in_place(v):
    """`y[i] op= v` on a 1-d array: `y[i]` is a number, `y[i] + v` a float, which the
    assignment truncates into the int array."""
    y = np.arange(5)
    y[1] += v
    y[2, ...] -= 1
    return y


def int_slice_assigned(v):
    """`y[a:b] = v` casts v to y's dtype (truncating a float)."""
    y = np.arange(5)
    y[1:3] = v
    y[3:] = np.ones(2) * v
    return y


def int_slice_divided(n):
    y = np.arange(5)
    y[1:] //= n
    y[:2] /= n
    return y


def float32_slice_in_place(x):
    """float64 into float32 casts (`same_kind`): the result is float32."""
    y = np.zeros(4, dtype=np.float32)
    y[1:] += x[1:] * 0.1
    y[:2] **= 2
    return y


def bool_slice_in_place(v):
    y = np.zeros(4, dtype=np.bool_)
    y[:2] |= v
    return y


def append_loop(n):
    xs = []
    for i in range(n):
        if i % 3:
            xs.append(i * 0.5)
        xs.extend([i, -i])
    return xs


def recurrence(x):
    y = np.zeros(len(x))
    y[0] = x[0]
    for i in range(1, len(x)):
        y[i] = y[i - 1] * 0.5 + x[i]
    return y


def running_total(v, n):
    total = v * 0.0
    for i in range(n):
        total += v * (i + 1)
    return total


def owned_name_ops(x):
    y = x * 2.0
    y += 1.0
    y *= x
    y -= x
    return y


def in_branches(x, c):
    y = x.copy()
    if c > 0:
        y[0] = c
    else:
        y[1] = c
    return y


def read_before_update(x):
    y = x.copy()
    s = y.sum()
    first = y[0]
    y[0] = 100.0
    return s + y.sum() + first


def conditional_in_loop(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        if x[i] > 0:
            y[i] = x[i]
    return y


def out_of_range(n):
    y = np.zeros(n)
    y[n] = 1.0
    return y


def returns_old_and_new(x):
    y = x + 0.0
    y[0] = 3.0
    z = y.copy()
    z[1] = 4.0
    return y, z


def overlapping(x):
    y = x * 1.0
    y[1:] = y[:-1]
    y[:2] += y[2:]
    return y


def until_negative(x):
    y = np.zeros(len(x))
    i = 0
    while i < len(x):
        if x[i] < 0:
            break
        y[i] = x[i] * 3.0
        i += 1
    return y, i


def local_of_closure(x):
    def scaled(k):
        w = x * k
        w[0] = k
        return w
    return scaled(2.0) + scaled(3.0)


def swap_in_loop(x):
    y = x.copy()
    for i in range(len(y) - 1):
        if y[i] > y[i + 1]:
            t = y[i]
            y[i] = y[i + 1]
            y[i + 1] = t
    return y


# ------------------------------------------------------------------------------ gradients

def squares_sum(x):
    y = np.zeros(len(x))
    for i in range(len(x)):
        y[i] = x[i] ** 2
    return np.sum(np.sin(y))


def slice_from_scalar(x, a):
    y = x * 1.0
    y[1:3] = a * x[:2]
    y[0] = a
    return np.sum(y ** 2)


def element_aug(x):
    y = x.copy()
    y[0] += x[1] * x[2]
    y[1:] *= x[0]
    return np.sum(y * y)


def _scaler(x):
    return lambda t, u: 3 ** (u % 4) + (9 + 2)


def _applied(fn, n, scale=1.0):
    return fn(n, scale)


def total_of_products_round_a_loop(k):
    """Found by the random-program tests: whether `width += ...` updates a list (which the
    sum of a product of calls, round the loop, might be) once followed the `+` back into
    itself without end (RecursionError)."""
    width = (k == 0.5) * -k
    tries = 0
    while True:
        if tries >= 3 or width:
            break
        width += tries - _applied(lambda s, r: _scaler(r)(r, 10), 10, 0.5)
        width += _applied(lambda t, u: k, 6, 0.1) * _scaler(3.0)(3.5, tries)
        tries += 1
    return width


def running_total_loss(v, n):
    return np.sum(running_total(v, n) ** 2)


def np_copy_loss(x):
    y = np.copy(x)
    y[0] = 3.0
    return np.sum(y * x)


def recurrence_loss(x):
    return np.sum(recurrence(x) ** 2)


def powers(a):
    y = np.zeros(3)
    for i in range(3):
        y[i] = a ** (i + 1)
    return np.sum(y)


def squares_hvp(x, v):
    """A Hessian-vector product of squares_sum: second order through the updates."""
    return np.sum(myir.grad(squares_sum)(x) * v)


def matrix_fill(x):
    y = np.zeros((2, 3))
    y[0] = x
    y[1, :] = x * x
    y[:, 1] += 1.0
    return np.sum(y * np.arange(6.0).reshape(2, 3))


def swap(x, i, j):
    y = x.copy()
    t = y[i]
    y[i] = y[j]
    y[j] = t
    return y


def tuple_swap(x):
    y = x.copy()
    y[0], y[-1] = y[-1], y[0]
    return y


def rows_swap(x):
    y = x.copy()
    t = y[0].copy()
    y[0] = y[1]
    y[1] = t
    return y


# ------------------------------------------------------------------------------ errors

def shape_mismatch(x):
    y = np.zeros(4)
    y[0:2] = x  # error
    return y


def into_tuple(x):
    t = (x, x)
    t[0] = 1.0  # error
    return t


def row_view_read_after(x):
    y = x.copy()
    t = y[0]
    y[0] = y[1]  # error
    y[1] = t
    return y


def rows_tuple_swap(x):
    y = x.copy()
    y[0], y[1] = y[1], y[0]  # error
    return y


def view_carried_round_a_loop(x):
    y = x * 1.0
    w = y[:2]
    for i in range(3):
        if i == 1:
            w = y[1:3]
        else:
            y[i] = 10.0 * i  # error
    return w


def into_argument(x):
    x[0] = 1.0  # error
    return x


def into_alias_of_argument(x):
    y = x
    y[0] = 1.0  # error
    return y


def view_read_after(x):
    y = x * 1.0
    z = y[1:]
    y[1] = 7.0  # error
    return z.sum()


def view_read_in_the_next_iteration(x):
    y = x * 1.0
    z = y[0:3]
    for i in range(3):
        y[i] = z[0] + 1.0  # error
    return y


def other_name_read_after(x):
    y = x * 1.0
    z = y
    y[0] = 7.0  # error
    return z


def transpose_read_after(x):
    y = x * 1.0
    z = y.T
    y[0, 0] = 7.0  # error
    return z


def tuple_read_after(x):
    y = x * 1.0
    t = (y, 1)
    y[0] = 7.0  # error
    return t[0]


def ident(a):
    return a


def function_result_read_after(x):
    y = x * 1.0
    z = ident(y)
    y[0] = 7.0  # error
    return z


def extremum_read_after(x):
    """`min(xs)` / `max(xs)` of a list of numbers is a number (no alias), read after an
    update of the list, in a loop too."""
    values = [x, 2.0 * x]
    m = min(values)
    values[0] = 5.0
    for i in range(3):
        values = [x * i, -x]
        if i == 1:
            values[1] = 0.5
        m += max(values)
    return m + values[0]


def nested_element(x):
    y = np.zeros((2, 2, 2))
    y[0][1][0] = 1.0  # error
    return y


GLOBAL = np.zeros(3)


def into_global(x):
    GLOBAL[0] = x  # error
    return x


def loop_alias(x, n):
    y = x * 1.0
    z = y
    for i in range(n):
        y[i] = 0.0  # error
    return z


def stored_in_a_list(x):
    y = np.zeros(2)
    xs = [y]
    y[0] = x  # error
    return xs[0][0]


def stored_in_a_dict(x):
    y = np.zeros(2)
    d = {"w": y}
    y[1] = x  # error
    return d["w"][1]


def appended_to_a_list(x):
    y = np.zeros(2)
    xs = [1.0]
    xs.append(y)
    y[0] = x  # error
    return xs[1][0]


def stored_after_the_update(x):
    y = np.zeros(2)
    y[0] = x
    xs = [y]
    return xs[0][0]


def list_updates(a, n):
    """A list's elements updated and appended to in a loop, a dict's key updated."""
    xs = [a, 2.0 * a]
    ys = [a * i for i in range(3)]
    for i in range(n):
        xs.append(a * i)
        xs[0] = xs[-1] * a
        ys[-1] += a
    xs[-1] += 1.0
    d = {"w": a, "b": 1.0}
    d["b"] = d["w"] * a
    return sum(xs) + sum(ys) + d["b"]


def scale_last(pair):
    return pair[1] * 2.0


def element_passed_on_then_updated(k):
    """An element of a list, passed in a tuple to a function whose result is read after
    `history[i] += v`: the function holds (at most) the element, a number, not the list."""
    history = [np.pi, 0.0 + k]
    steps = 0
    total = 0.0
    while steps < 5:
        steps += 1
        total += scale_last((k, history[-1]))
        history[steps % len(history)] += steps / len(history)
    return total + history[0] * history[1]


def element_of_a_dict_bound_then_updated(x, y):
    """`v = d["a"] or d[key]` read after `d["a"] -= ...`: v is a number, not the dict."""
    table = {"a": x, "b": x * y}
    v = 0.0
    for key in ("a", "b"):
        table["a"] -= table["b"] + y
        v = table["a"] or table[key]
    table["b"] += v
    return v * table["b"]


def elements_kept_after_replacing(x):
    """Elements taken from a list or dict and read after `y[i] = v` or `y.append(v)`, which
    replace an element (or add one) and leave the old elements as they were: a list, an
    array, a number."""
    rows = [[x, 2.0 * x], [3.0 * x]]
    r = rows[0]
    rows[0] = [x * x]
    arrays = [np.zeros(2) + x, np.ones(2)]
    a = arrays[0]
    arrays[0] = a * x
    arrays.append(a)
    d = {"w": [x], "b": x + 1.0}
    w = d["w"]
    d["w"] = [2.0 * x]
    return r, rows, a, arrays, w, d


def own_list_element_extended(x):
    """`xs[0] += [v]` on a list's element made where it is stored and seen through xs
    alone: CPython extends it in place, which nothing else sees."""
    xs = [[x], [2.0 * x]]
    for i in range(3):
        xs[i % 2] += [x * i]
    return xs


def concatenated_lists_updated(x):
    """`y[i] op= v` on a concatenation of lists: a number element of a list that is read
    after (it shares its elements), a list element made in the concatenation."""
    xs = [x, 2.0 * x]
    ys = xs + [3.0]
    ys[0] += x
    rows = [[x]] + [[2.0 * x]]
    rows[1] += [x]
    return xs, ys, rows

def read_in_the_other_branch(x, k):
    """A view made before an `if`, read only in the branch that does not update: no run
    reads it after the update."""
    y = x.copy()
    z = y[0:2]
    if k == 0:
        y[0] = 5.0 * x[1]
    elif k == 1:
        return np.sum(z * x[:2])
    return np.sum(y * x)


def view_made_in_the_other_branch(x, k):
    y = x.copy()
    if k == 0:
        y[0] = 5.0
    else:
        z = y[0:2]
        return z * 2.0
    return y


def view_made_in_a_branch_read_in_the_next_iteration(x):
    """The other branch's view, made in one iteration, read after the update in a later one."""
    y = x.copy()
    z = x
    s = 0.0
    for i in range(3):
        if i == 1:
            z = y[0:2]
        else:
            y[0] = 5.0 + i  # error
        s = s + z[0]
    return s, y


def view_read_in_the_other_branch_of_a_later_iteration(x):
    y = x.copy()
    z = y[0:2]
    s = 0.0
    for i in range(3):
        if i == 1:
            y[0] = 5.0  # error
        else:
            s = s + z[0]
    return s, y


def view_made_in_the_loop_returned_after_it(x):
    """The loop's exit runs after its body: the last iteration's view sees its update."""
    y = x.copy()
    z = x
    for i in range(3):
        z = y[0:2]
        y[0] = 5.0 + i  # error
    return z


def fancy_updates(x):
    """Updates at an index array, a list of indices (a repeated one is written once, as
    numpy does) and a mask."""
    y = x.copy()
    y[np.array([0, 2])] = x[:2] * 2.0
    y[[1, 1, 3]] += 1.0
    y[y < 0] = 0.0
    return y


# ------------------------------------------------------------------ y[i][j] = v

def nested_list_updates(a):
    """`y[i][j] = v` and `y[i][j] += v` on a list of lists the function made."""
    y = [[0.0, 0.0], [1.0, 2.0]]
    y[0][1] = a
    y[1][0] = a * 2.0
    y[1][1] += a * a
    y[-1][-2] -= 1.0
    return y


def grid_filled_in_loops(a, n):
    """A comprehension's rows, filled in a loop nest."""
    grid = [[0.0] * 3 for _ in range(n)]
    for i in range(n):
        for j in range(3):
            grid[i][j] = a * i + j
    return grid


def list_of_arrays_updates(v):
    ys = [np.zeros(3), np.ones(3)]
    ys[1][2] = v[0]
    ys[0][0:2] = v[1:]
    ys[0][2] += v[2] * 2.0
    rows = []
    for i in range(2):
        rows.append(np.zeros(2))
    for i in range(2):
        rows[i][1] = v[i] * v[i]
    return ys, rows


def dict_of_arrays_updates(a):
    g = {"W": np.zeros(2), "b": 0.0}
    g["W"][0] = a
    g["W"][1] += 2.0 * a
    return g


def array_row_updates(a):
    """On a 2-D array, `y[i][j] = v` writes into y, as `y[i, j] = v`."""
    y = np.zeros((2, 3))
    y[0][1] = a
    y[1][0:2] += a
    return y


def loss_nested_updates(a, v):
    y = nested_list_updates(a)
    ys, rows = list_of_arrays_updates(v * a)
    g = dict_of_arrays_updates(a)
    return y[0][1] * y[1][1] + y[1][0] + np.sum(ys[0] * ys[1]) + np.sum(rows[1] ** 2) \
        + g["W"][1] * a + np.sum(array_row_updates(a) ** 2)


def nested_update_aliased_rows(a):
    r = [0.0, 0.0]
    y = [r, r]
    y[0][1] = a  # error
    return y


def nested_update_repeated_rows(a):
    y = [[0.0] * 2] * 2
    y[0][1] = a  # error
    return y


def nested_update_element_read_after(a):
    y = [[0.0, 0.0], [1.0, 1.0]]
    r = y[0]
    y[0][1] = a  # error
    return r


def nested_update_copied_argument(xs, a):
    y = list(xs)
    y[0][1] = a  # error
    return y


def nested_update_argument(xs, a):
    xs[0][1] = a  # error
    return xs


def nested_update_row_used_twice(a):
    row = [0.0, 0.0]
    y = [row]
    y[0][0] = a  # error
    return y, row


def nested_update_one_array_appended(a, n):
    row = np.zeros(2)
    y = []
    for i in range(n):
        y.append(row)
    y[0][1] = a  # error
    return y


def nested_update_of_a_copy_read_after(a):
    d = {"W": np.zeros(2)}
    g = d.copy()
    g["W"][0] = a  # error
    return d


def nested_update_of_a_dead_copy(a):
    y = [[0.0, 0.0]]
    z = list(y)
    z[0][0] = a
    y = None
    return z, y


def nested_update_of_a_concatenation(a):
    r = [0.0]
    y = [r] + [r]
    y[0][0] = a  # error
    return y


def nested_update_of_rows_added(a):
    y = [[0.0]] + [[1.0, 2.0] for _ in range(2)]
    y[2][1] = a
    return y


# --------------------------------------------------------- y[i] op= v on a list's element

def list_read_through_another_name(x):
    y = [x, 2.0 * x]
    z = y
    y[0] = 1.0  # error
    return z


def list_stored_in_a_list(x):
    y = [x, x]
    rows = [y]
    y[0] = 2.0  # error
    return rows


def list_element_extended_read_after(x):
    xs = [[x], [x]]
    a = xs[0]
    xs[0] += [1.0]  # error
    return len(a)


def one_array_twice_in_a_list(x):
    arr = np.zeros(3) + x
    rows = [arr, arr]
    rows[0] += 1.0  # error
    return rows[1][0]


def rows_of_an_array_in_a_list(x):
    arr = np.zeros(3) + x
    rows = list(arr.reshape(3, 1))
    rows[0] += 1.0  # error
    return arr[0]


def concatenation_element_extended(x):
    xs = [[x]]
    y = xs + xs
    y[0] += [1.0]  # error
    return len(xs[0])
